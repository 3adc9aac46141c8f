package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"

	"seckill/internal/servers"
)

// This file is the cluster's fault layer, on when Config.Faults is set: a
// second redis-server for the lock (so lock traffic and stock traffic fail
// separately), and an in-process toxiproxy between every replica and every
// server it talks to, so one replica's path can be cut, slowed or watched
// without touching the others.

// ErrNoFaults: a fault method was called on a cluster started without
// Config.Faults.
var ErrNoFaults = errors.New("localcluster: cluster started without Config.Faults")

// Link is one of a replica's connections to a backing server.
type Link string

const (
	// LinkStock is a replica's connection to the stock Redis.
	LinkStock Link = "stock"
	// LinkLock is a replica's connection to the server the current backend's
	// lock lives in: the lock Redis, etcd, ZooKeeper or MariaDB.
	LinkLock Link = "lock"
	// LinkEtcd is a replica's connection to etcd whatever the backend:
	// the witness's (stock.witness etcd) and the election's.
	LinkEtcd Link = "etcd"
)

// Targets of the per-replica proxies.
const (
	targetRedis     = "redis"
	targetLockRedis = "lockredis"
	targetEtcd      = "etcd"
	targetZooKeeper = "zookeeper"
	targetMySQL     = "mysql"
	// targetReplication is a Sentinel set's replica to its primary
	// (sentinel.go), one per set: its index is the set's generation.
	targetReplication = "replication"
)

// faultNet owns the proxies and the lock Redis. Proxies are created on first
// need, when a replica's environment is computed, because etcd and ZooKeeper
// may start only when a later SetBackend needs them.
type faultNet struct {
	api       *toxiproxy.ApiServer
	lockRedis *servers.Process

	mu      sync.Mutex
	proxies map[string]*toxiproxy.Proxy // "<target>/<replica>"
}

func newFaultNet() *faultNet {
	return &faultNet{
		api:     toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		proxies: map[string]*toxiproxy.Proxy{},
	}
}

// startLockRedis runs the lock's own redis-server. Unlike the stock Redis it
// appends every write to its AOF and fsyncs it: a lock server that forgets
// its token counter on restart hands out tokens lower than the fence has
// seen, and every fenced sale is then refused for good (safe, but dead).
func startLockRedis(ctx context.Context, dir string, clock *servers.ShiftedClock) (*servers.Process, error) {
	addr, err := servers.LoopbackAddr()
	if err != nil {
		return nil, fmt.Errorf("localcluster: lock redis: %w", err)
	}
	host, port, _ := net.SplitHostPort(addr)
	dir = filepath.Join(dir, "redis-lock")
	p, err := servers.Start(ctx, servers.Spec{
		Name: "redis-lock",
		Path: "redis-server",
		Args: []string{
			"--bind", host, "--port", port, "--dir", dir,
			"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no",
			"--daemonize", "no", "--loglevel", "warning",
		},
		Env:   clock.Env(),
		Dir:   dir,
		Addr:  addr,
		Ready: redisPing,
	})
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	return p, nil
}

// redisPing expects +PONG to an inline PING: a bare TCP connect would pass
// while redis is still loading its AOF (it answers -LOADING then).
func redisPing(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redis-lock: PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// proxy returns (creating and starting it on first use) the proxy from
// replica i to target at upstream. Its listen address is fixed for the
// cluster's life so a Cut and restore keeps the replica's configuration valid.
func (f *faultNet) proxy(target string, i int, upstream string) (*toxiproxy.Proxy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := target + "/" + strconv.Itoa(i)
	if p, ok := f.proxies[name]; ok {
		return p, nil
	}
	// LoopbackAddr's port is free when it answers, not when the proxy
	// binds it: under a busy suite another process can take it between
	// the two, so a bind that fails is tried again on another port.
	var errs []error
	for range 5 {
		listen, err := servers.LoopbackAddr()
		if err != nil {
			return nil, err
		}
		p := toxiproxy.NewProxy(f.api, name, listen, upstream)
		if err := p.Start(); err != nil {
			errs = append(errs, err)
			continue
		}
		f.proxies[name] = p
		return p, nil
	}
	return nil, fmt.Errorf("localcluster: proxy %s: %w", name, errors.Join(errs...))
}

// existing returns the proxy of replica i to target, or nil.
func (f *faultNet) existing(target string, i int) *toxiproxy.Proxy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.proxies[target+"/"+strconv.Itoa(i)]
}

func (f *faultNet) all() []*toxiproxy.Proxy {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*toxiproxy.Proxy, 0, len(f.proxies))
	for _, p := range f.proxies {
		out = append(out, p)
	}
	return out
}

func (f *faultNet) close() error {
	for _, p := range f.all() {
		p.Stop()
	}
	if f.lockRedis != nil {
		return f.lockRedis.Stop(5 * time.Second)
	}
	return nil
}

// faultEnv points replica i's server addresses at its proxies. Called with
// c.mu held, before the user's env is applied, so a test can still override.
func (c *Cluster) faultEnv(i int, env map[string]string) error {
	f := c.faults
	if f == nil {
		return nil
	}
	p, err := f.proxy(targetRedis, i, c.redis.Addr())
	if err != nil {
		return err
	}
	env["STOCKD_REDIS_ADDR"] = p.Listen
	if p, err = f.proxy(targetLockRedis, i, f.lockRedis.Addr()); err != nil {
		return err
	}
	env["STOCKD_LOCK_REDIS_ADDR"] = p.Listen
	if c.etcd != nil {
		if p, err = f.proxy(targetEtcd, i, c.etcd.Addr()); err != nil {
			return err
		}
		env["STOCKD_ETCD_ENDPOINTS"] = "http://" + p.Listen
	}
	if c.zookeeper != nil {
		if p, err = f.proxy(targetZooKeeper, i, c.zookeeper.Addr()); err != nil {
			return err
		}
		env["STOCKD_ZOOKEEPER_SERVERS"] = p.Listen
	}
	if c.mariadb != nil {
		if p, err = f.proxy(targetMySQL, i, c.mariadb.Addr()); err != nil {
			return err
		}
		env["STOCKD_MYSQL_DSN"] = servers.MariaDBDSN(p.Listen)
	}
	return nil
}

// lockTarget is the proxy target of the current backend's lock server.
func lockTarget(backend string) string {
	switch backend {
	case "etcd":
		return targetEtcd
	case "zookeeper":
		return targetZooKeeper
	case "mysql", "mysql-row":
		return targetMySQL
	default:
		return targetLockRedis
	}
}

// linkProxy finds replica i's proxy for link under the current backend.
func (c *Cluster) linkProxy(i int, link Link) (*toxiproxy.Proxy, error) {
	if c.faults == nil {
		return nil, ErrNoFaults
	}
	if i < 0 || i >= len(c.addrs) {
		return nil, fmt.Errorf("%w: replica %d of %d", ErrConfig, i, len(c.addrs))
	}
	target := targetRedis
	switch link {
	case LinkStock:
	case LinkLock:
		target = lockTarget(c.Backend())
	case LinkEtcd:
		target = targetEtcd
	default:
		return nil, fmt.Errorf("%w: unknown link %q", ErrConfig, link)
	}
	p := c.faults.existing(target, i)
	if p == nil {
		return nil, fmt.Errorf("%w: no %s proxy for replica %d (server not started)", ErrConfig, target, i)
	}
	return p, nil
}

// LockRedis returns the lock's own redis-server, or nil without
// Config.Faults (the lock then shares the stock Redis).
func (c *Cluster) LockRedis() *servers.Process {
	if c.faults == nil {
		return nil
	}
	return c.faults.lockRedis
}

// LockServer returns the process the current backend's lock lives in: etcd,
// ZooKeeper, MariaDB, or the lock Redis (the stock Redis without
// Config.Faults). It is nil for backends whose server has not started.
// Kill, Pause and Restart act on it as on a real server; MariaDB's Restart
// keeps its data directory, so the token counters survive it.
func (c *Cluster) LockServer() *servers.Process {
	switch b := c.Backend(); {
	case b == "etcd":
		return c.Etcd()
	case b == "zookeeper":
		return c.ZooKeeper()
	case needsMySQL(b):
		return c.MariaDB()
	}
	if lr := c.LockRedis(); lr != nil {
		return lr
	}
	return c.Redis()
}

// ForgetLockServer makes the current backend's lock server lose all its
// state: it is stopped, its data directory emptied, and started again — a
// new etcd cluster (new cluster id, revisions from 1), a new ZooKeeper
// ensemble (zxids from the start, every session unknown). Only etcd and
// ZooKeeper keep their data in the directory this empties; a lock Redis
// forgets by FLUSHALL. MariaDB is not emptied here: its data directory
// needs mariadb-install-db again, and its tokens are meant to be durable
// (a recreated database is lock.TokenAdvancer's case, as for Redis).
func (c *Cluster) ForgetLockServer(ctx context.Context) error {
	b := c.Backend()
	if b != "etcd" && b != "zookeeper" {
		return fmt.Errorf("localcluster: ForgetLockServer: backend %q keeps no data directory to forget", b)
	}
	p := c.LockServer()
	if p == nil {
		return fmt.Errorf("localcluster: ForgetLockServer: %s is not running", b)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		return fmt.Errorf("localcluster: stop %s: %w", p.Name(), err)
	}
	data := filepath.Join(p.Dir(), "data")
	if err := os.RemoveAll(data); err != nil {
		return fmt.Errorf("localcluster: forget %s: %w", p.Name(), err)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return fmt.Errorf("localcluster: forget %s: %w", p.Name(), err)
	}
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("localcluster: start %s empty: %w", p.Name(), err)
	}
	return nil
}

// Cut disconnects replica i from link's server: established connections are
// closed and new ones refused, like a partition that resets connections.
// restore reconnects it (the replica redials on its own). Cutting a cut link
// is harmless; so is restoring twice.
func (c *Cluster) Cut(i int, link Link) (restore func() error, err error) {
	p, err := c.linkProxy(i, link)
	if err != nil {
		return nil, err
	}
	p.Stop()
	return func() error {
		err := p.Start()
		if errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("localcluster: restore %s of replica %d: %w", link, i, err)
		}
		return nil
	}, nil
}

// toxicSeq names toxics uniquely within the process.
var (
	toxicMu  sync.Mutex
	toxicSeq int
)

func nextToxicName(kind string) string {
	toxicMu.Lock()
	defer toxicMu.Unlock()
	toxicSeq++
	return fmt.Sprintf("%s-%d", kind, toxicSeq)
}

// addToxic adds a toxic, given as its JSON attributes, to the request
// direction (replica → server) of p, and returns its remover.
func addToxic(p *toxiproxy.Proxy, kind, typ, attrs string) (remove func() error, err error) {
	return addToxicOn(p, kind, typ, "upstream", 1, attrs)
}

// addToxicOn adds a toxic on stream ("upstream": what the replica sends;
// "downstream": what the server answers) to a toxicity share of the
// connections.
func addToxicOn(p *toxiproxy.Proxy, kind, typ, stream string, toxicity float64, attrs string) (remove func() error, err error) {
	name := nextToxicName(kind)
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":%g,"attributes":%s}`, name, typ, stream, toxicity, attrs)
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return nil, fmt.Errorf("localcluster: add %s toxic to %s: %w", typ, p.Name, err)
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() { err = p.Toxics.RemoveToxic(context.Background(), name) })
		return err
	}, nil
}

// LoseReplies makes replica i lose, with probability p each, the answers
// the server sends back over link: the chunk is dropped and the connection
// cut, after the command it answers has run. It is the fault behind every
// "did my write happen?" — a client that retries must not do it twice.
// remove takes it away.
func (c *Cluster) LoseReplies(i int, link Link, p float64) (remove func() error, err error) {
	px, err := c.linkProxy(i, link)
	if err != nil {
		return nil, err
	}
	return addToxicOn(px, "lossy", lossyToxicType, "downstream", 1, fmt.Sprintf(`{"probability":%g}`, p))
}

// Blackhole makes replica i's link silent: every byte either way is
// dropped and no connection is closed, as when a network drops packets
// (docker network disconnect, a firewall) rather than resetting them; each
// side notices only by its own timeouts. restore lets traffic through again
// (what was dropped meanwhile is lost, so a connection that lived through it
// is usually unusable: the client redials).
func (c *Cluster) Blackhole(i int, link Link) (restore func() error, err error) {
	px, err := c.linkProxy(i, link)
	if err != nil {
		return nil, err
	}
	up, err := addToxicOn(px, "blackhole", "timeout", "upstream", 1, `{"timeout":0}`)
	if err != nil {
		return nil, err
	}
	down, err := addToxicOn(px, "blackhole", "timeout", "downstream", 1, `{"timeout":0}`)
	if err != nil {
		return nil, errors.Join(err, up())
	}
	return func() error { return errors.Join(up(), down()) }, nil
}

// SlowReplies delays by d the answers on a share (0..1) of replica i's
// connections over link: a reply that arrives after the client's read
// timeout is, to the client, a lost one. remove takes it away.
func (c *Cluster) SlowReplies(i int, link Link, d time.Duration, share float64) (remove func() error, err error) {
	px, err := c.linkProxy(i, link)
	if err != nil {
		return nil, err
	}
	return addToxicOn(px, "slow", "latency", "downstream", share, fmt.Sprintf(`{"latency":%d}`, d.Milliseconds()))
}

// Latency delays everything replica i sends over link by d (the replies are
// not delayed further): a slow or congested path. remove takes it away.
func (c *Cluster) Latency(i int, link Link, d time.Duration) (remove func() error, err error) {
	p, err := c.linkProxy(i, link)
	if err != nil {
		return nil, err
	}
	return addToxic(p, "latency", "latency", fmt.Sprintf(`{"latency":%d}`, d.Milliseconds()))
}

// watchToxicType is the toxiproxy type name of the Watch toxic.
const watchToxicType = "seckill_watch"

// lossyToxicType is the toxiproxy type name of the reply-losing toxic.
const lossyToxicType = "seckill_lossy"

func init() {
	toxics.Register(watchToxicType, new(watchToxic))
	toxics.Register(lossyToxicType, new(lossyToxic))
}

// repliesLost counts the chunks every lossy toxic has dropped, so a test can
// tell that its fault happened.
var repliesLost atomic.Int64

// RepliesLost is how many server answers LoseReplies has dropped so far, in
// every cluster of this process.
func RepliesLost() int64 { return repliesLost.Load() }

// lossyToxic drops a chunk with probability Probability and cuts the
// connection there; its fields come from JSON.
type lossyToxic struct {
	Probability float64 `json:"probability"`
}

// Pipe forwards chunks until one is lost; then the connection is closed, as
// a reset between the server's reply and the client would leave it.
func (t *lossyToxic) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if rand.Float64() < t.Probability {
				repliesLost.Add(1)
				stub.Close()
				return
			}
			stub.Output <- c
		}
	}
}

// Event is one chunk a Watch matched: which replica sent it, and when.
type Event struct {
	Replica int
	At      time.Time
}

// Watch observes what the replicas send to the stock Redis, chunk by chunk
// (a chunk is, in practice, one command or one pipeline), and can hold the
// first matching chunk inside the proxy until released. That turns "the
// holder is between its read and its write" into an event a test can wait
// for, instead of a sleep tuned to the machine.
type Watch struct {
	id       string
	match    func([]byte) bool
	hold     bool
	events   chan Event
	removers []func() error

	mu      sync.Mutex
	holding bool // a chunk is held, or was and has been released
	heldBy  int
	held    chan struct{} // closed when a chunk is held
	release chan struct{} // closed by Release
}

// watches maps a Watch's id to the Watch: toxiproxy builds toxics from JSON,
// so the toxic finds its Watch by name.
var watches sync.Map

// Watch installs a watch on every replica's stock link. match picks the
// chunks of interest (it runs on the proxy's goroutines and must not block
// or keep the slice). With hold, the first matching chunk from any replica
// is held back until Release or Close; later ones pass. Close removes it.
func (c *Cluster) Watch(match func([]byte) bool, hold bool) (*Watch, error) {
	if c.faults == nil {
		return nil, ErrNoFaults
	}
	w := &Watch{
		id: nextToxicName("watch"), match: match, hold: hold,
		events: make(chan Event, 4096), held: make(chan struct{}), release: make(chan struct{}),
	}
	watches.Store(w.id, w)
	for i := range c.addrs {
		p := c.faults.existing(targetRedis, i)
		if p == nil {
			continue
		}
		rm, err := addToxic(p, "watch", watchToxicType, fmt.Sprintf(`{"watch":%q,"replica":%d}`, w.id, i))
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		w.removers = append(w.removers, rm)
	}
	return w, nil
}

// observe records a matching chunk from replica i and, if this chunk is the
// one to hold, returns the channel to wait on.
func (w *Watch) observe(i int) <-chan struct{} {
	select {
	case w.events <- Event{Replica: i, At: time.Now()}:
	default: // nobody is reading this far back; dropping keeps the proxy moving
	}
	if !w.hold {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holding {
		return nil
	}
	w.holding, w.heldBy = true, i
	close(w.held)
	return w.release
}

// Next returns the next matching chunk sent at or after since.
func (w *Watch) Next(ctx context.Context, since time.Time) (Event, error) {
	for {
		select {
		case ev := <-w.events:
			if !ev.At.Before(since) {
				return ev, nil
			}
		case <-ctx.Done():
			return Event{}, fmt.Errorf("localcluster: watch: no matching chunk: %w", ctx.Err())
		}
	}
}

// Held waits until a chunk is held (hold must be set) and returns the
// replica that sent it.
func (w *Watch) Held(ctx context.Context) (int, error) {
	select {
	case <-w.held:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.heldBy, nil
	case <-ctx.Done():
		return -1, fmt.Errorf("localcluster: watch: nothing held: %w", ctx.Err())
	}
}

// Release lets the held chunk (and any later one) through. It is idempotent.
func (w *Watch) Release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.release:
	default:
		close(w.release)
	}
	// Nothing may be held after a Release.
	w.holding = true
}

// Close releases whatever is held and removes the watch from every proxy.
func (w *Watch) Close() error {
	w.Release()
	var errs []error
	for _, rm := range w.removers {
		errs = append(errs, rm())
	}
	watches.Delete(w.id)
	return errors.Join(errs...)
}

// watchToxic is the toxiproxy side of a Watch; its fields come from JSON.
type watchToxic struct {
	Watch   string `json:"watch"`
	Replica int    `json:"replica"`
}

// Pipe forwards chunks, reporting and holding as its Watch says. On an
// interrupt (toxiproxy rewiring the chain) a held chunk is forwarded, never
// dropped: losing bytes of a Redis command would corrupt the stream.
func (t *watchToxic) Pipe(stub *toxics.ToxicStub) {
	v, _ := watches.Load(t.Watch)
	w, _ := v.(*Watch)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if w != nil && w.match(c.Data) {
				if release := w.observe(t.Replica); release != nil {
					select {
					case <-release:
					case <-stub.Interrupt:
						stub.Output <- c
						return
					}
				}
			}
			stub.Output <- c
		}
	}
}
