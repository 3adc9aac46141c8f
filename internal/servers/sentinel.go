package servers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinel.go: a replicated Redis watched by Sentinel — a primary, one
// replica and three redis-sentinel processes on loopback — for the stock's
// failover tests. Plain processes, like the rest of this
// package: SIGKILL or SIGSTOP the primary and Sentinel promotes the replica
// for real.

// SentinelMasterPrefix starts every Sentinel set's master name
// (SentinelSet.MasterName): "seckill-" and eight hex digits of its own. A
// set of its own name cannot adopt a stray Sentinel of an earlier run that
// monitors the same name: one left by a killed test binary joined the next
// run's set by its hellos and failed its failover.
const SentinelMasterPrefix = "seckill-"

// DefaultDownAfter is SentinelOptions.DownAfter when it is zero.
const DefaultDownAfter = 3 * time.Second

// SentinelOptions tunes a Sentinel set. Zero values get the defaults shown.
type SentinelOptions struct {
	// DownAfter is how long the primary must be silent before a Sentinel
	// thinks it down (down-after-milliseconds); default 3s, so a test's
	// failover takes seconds, not Sentinel's 30 s. Not less: a switch
	// restarts each Sentinel's silence timer for the new primary and
	// re-allows a failover at once (sentinelResetMaster), while its link is
	// reconnected at one attempt a second; with 1s the first PONG lost that
	// race on two busy cores (+sdown of the new primary 1.02 s after
	// +switch-master): a second failover then promoted the old primary
	// just rejoined as its replica, and the first promoted one, a master
	// still for ~10 s, was made its replica and resynced from it, losing
	// what it took meanwhile (all of it when the old primary was promoted
	// before its own sync: the lab's "empty primary", docs/faults.md).
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout; default 3s.
	FailoverTimeout time.Duration
	// Sentinels is how many Sentinels run; default 3, quorum a majority.
	Sentinels int
	// ReplicaVia, if set, is given the primary's address and returns the
	// one the replica replicates from instead: a hop that can hold or cut
	// the replication stream (servertest.Relay), to make a lagging replica
	// at will. Sentinel "fixes" a replica that names another master after
	// FailoverTimeout, so give that a long one when using it.
	ReplicaVia func(primary string) string
	// Splittable puts the primary behind a Front (SentinelSet.Front) that
	// the Sentinels and the replica reach it through, from sources of
	// their own (SentinelSource, ReplicaSource), while clients come from
	// 127.0.0.1: SentinelSet.Isolate then cuts the primary off from the
	// Sentinels and the replica, not from the clients — the split brain
	// Sentinel's docs describe. The Front's address is the primary's for
	// everyone (Sentinel hands it out). Not with ReplicaVia.
	Splittable bool
	// MinReplicasToWrite is min-replicas-to-write on both nodes (0: off),
	// with Redis's default min-replicas-max-lag of 10 s: a primary that
	// has heard from none of its replicas that long refuses writes.
	MinReplicasToWrite int
	// Clocks runs each data node on a wall clock of its own that the test
	// can step (SentinelSet.Clock), at offset 0 at start; a Rejoin keeps a
	// node's. The Sentinels keep the machine's.
	Clocks bool
}

// SentinelSet is the running set. After a failover the roles swap: ask
// Master for the current primary's address, and Node for its process.
type SentinelSet struct {
	// Primary and Replica are the processes as started; their roles are
	// whatever Sentinel has made of them since.
	Primary, Replica *Process
	Sentinels        []*Process
	Quorum           int
	// Front is the primary's front with SentinelOptions.Splittable, else
	// nil.
	Front *Front
	// MasterName is the name the Sentinels monitor the primary by
	// (SentinelMasterPrefix and a random suffix): redis.sentinel.master.
	MasterName string

	clocks map[string]*ShiftedClock // by node name, with Clocks
}

// Clock is the wall clock node p runs on (SentinelOptions.Clocks), or nil.
func (s *SentinelSet) Clock(p *Process) *ShiftedClock { return s.clocks[p.Name()] }

// StartSentinelSet starts a primary, a replica of it (synced before this
// returns) and the Sentinels in dir, each in a subdirectory of its own.
// Each Sentinel's config names the replica and the other Sentinels from
// the start (known-replica, known-sentinel with ids chosen here), so
// failover works at once instead of after Sentinel's discovery (an INFO
// every 10 s, hellos every 2 s). On error, whatever started is stopped.
func StartSentinelSet(ctx context.Context, dir string, opt SentinelOptions) (_ *SentinelSet, err error) {
	if opt.DownAfter <= 0 {
		opt.DownAfter = DefaultDownAfter
	}
	if opt.FailoverTimeout <= 0 {
		opt.FailoverTimeout = 3 * time.Second
	}
	if opt.Sentinels <= 0 {
		opt.Sentinels = 3
	}
	sentinelBin, err := sentinelBinary()
	if err != nil {
		return nil, err
	}
	// Not the named result: each "return nil, err" would nil it before
	// this cleanup runs, which then panicked and left the servers running.
	set := &SentinelSet{Quorum: opt.Sentinels/2 + 1, MasterName: SentinelMasterPrefix + sentinelID()[:8]}
	defer func() {
		if err != nil {
			set.Stop(5 * time.Second)
		}
	}()

	paddr, err := LoopbackAddr()
	if err != nil {
		return nil, err
	}
	var primaryArgs, replicaArgs []string
	if opt.MinReplicasToWrite > 0 {
		n := strconv.Itoa(opt.MinReplicasToWrite)
		primaryArgs = append(primaryArgs, "--min-replicas-to-write", n)
		replicaArgs = append(replicaArgs, "--min-replicas-to-write", n)
	}
	monitored, upstream := paddr, paddr
	if opt.Splittable {
		if set.Front, err = StartFront("127.0.0.1:0", paddr); err != nil {
			return nil, err
		}
		monitored, upstream = set.Front.Addr(), set.Front.Addr()
		_, fport, _ := net.SplitHostPort(monitored)
		// Once demoted, the old primary says it is at its front: the
		// one address Sentinel knows it by.
		primaryArgs = append(primaryArgs, "--replica-announce-ip", "127.0.0.1", "--replica-announce-port", fport)
		replicaArgs = append(replicaArgs, "--bind-source-addr", ReplicaSource, "--replica-announce-ip", "127.0.0.1")
	}
	if opt.Clocks {
		set.clocks = map[string]*ShiftedClock{}
		for _, name := range []string{"redis-primary", "redis-replica"} {
			if set.clocks[name], err = NewShiftedClock(filepath.Join(dir, "clock-"+name)); err != nil {
				return nil, err
			}
		}
	}
	if set.Primary, err = startRedisNode(ctx, filepath.Join(dir, "primary"), "redis-primary", paddr, "", set.clocks["redis-primary"].Env(), primaryArgs...); err != nil {
		return nil, err
	}
	raddr, err := LoopbackAddr()
	if err != nil {
		return nil, err
	}
	if opt.ReplicaVia != nil {
		upstream = opt.ReplicaVia(paddr)
	}
	if set.Replica, err = startRedisNode(ctx, filepath.Join(dir, "replica"), "redis-replica", raddr, upstream, set.clocks["redis-replica"].Env(), replicaArgs...); err != nil {
		return nil, err
	}
	if err := WaitReplicated(ctx, paddr, harnessKey, 1); err != nil {
		return nil, fmt.Errorf("replica %s never synced with %s: %w\n%s", raddr, paddr, err, set.Replica.LogTail(20))
	}

	addrs := make([]string, opt.Sentinels)
	ids := make([]string, opt.Sentinels)
	for i := range addrs {
		if addrs[i], err = LoopbackAddr(); err != nil {
			return nil, err
		}
		ids[i] = sentinelID()
	}
	for i := range addrs {
		sdir := filepath.Join(dir, fmt.Sprintf("sentinel%d", i+1))
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return nil, err
		}
		conf := sentinelConf(sdir, set.MasterName, addrs, ids, i, monitored, raddr, set.Quorum, opt)
		confPath := filepath.Join(sdir, "sentinel.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		args := []string{confPath}
		if filepath.Base(sentinelBin) != "redis-sentinel" {
			args = append(args, "--sentinel") // redis-server in Sentinel mode
		}
		p, err := Start(ctx, Spec{
			Name:  fmt.Sprintf("sentinel%d", i+1),
			Path:  sentinelBin,
			Args:  args,
			Dir:   sdir,
			Addr:  addrs[i],
			Ready: redisReady,
		})
		if err != nil {
			return nil, err
		}
		set.Sentinels = append(set.Sentinels, p)
	}
	return set, nil
}

// sentinelBinary is Debian's redis-sentinel, or redis-server (the same
// binary: it runs as a Sentinel with --sentinel) when only that is there.
func sentinelBinary() (string, error) {
	if p, err := exec.LookPath("redis-sentinel"); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("redis-sentinel: %w", ErrNotInstalled)
}

// startRedisNode runs a redis-server without persistence on addr, a
// replica of primary when primary is set. Diskless sync with no delay
// makes the replica's first sync (and its resync after a failover)
// immediate; the default waits 5 s for more replicas to share it.
func startRedisNode(ctx context.Context, dir, name, addr, primary string, env []string, extra ...string) (*Process, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--bind", host, "--port", port, "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--daemonize", "no", "--loglevel", "notice",
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
	}
	if primary != "" {
		phost, pport, err := net.SplitHostPort(primary)
		if err != nil {
			return nil, err
		}
		args = append(args, "--replicaof", phost, pport)
	}
	args = append(args, extra...)
	return Start(ctx, Spec{Name: name, Path: "redis-server", Args: args, Env: env, Dir: dir, Addr: addr, Ready: redisReady})
}

// harnessKey is the key WaitReplicated writes on a Sentinel set's primary.
const harnessKey = "seckill:harness:synced"

// WaitReplicated returns once n replicas of the Redis at addr have
// acknowledged everything written to it so far, by one write of key (a
// key the node serves: on a cluster, one of its slots) and WAIT on the
// same connection. WAIT is the event: it returns as soon as they have, so
// there is nothing to poll.
func WaitReplicated(ctx context.Context, addr, key string, n int) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	// WAIT counts the writes of its own connection.
	conn := rdb.Conn()
	defer conn.Close()
	// One write of our own, so WAIT has an offset to wait for. With
	// min-replicas-to-write a primary without its replica refuses it
	// (NOREPLICAS) until the replica is back: what this waits for.
	for {
		err := conn.Set(ctx, key, time.Now().UnixNano(), 0).Err()
		if err == nil {
			break
		}
		if !strings.HasPrefix(err.Error(), "NOREPLICAS") {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (the primary refuses writes: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond): // a remote's progress: nothing to wait on
		}
	}
	// Up to the caller's deadline: a restarted old primary waits for
	// Sentinel's next INFO (every 10 s) to be made a replica.
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl) - 100*time.Millisecond
	}
	got, err := conn.Wait(ctx, n, timeout).Result()
	if err != nil {
		return err
	}
	if got < int64(n) {
		return fmt.Errorf("%d of %d replicas acknowledged within %v", got, n, timeout)
	}
	return nil
}

func sentinelID() string {
	var b [20]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// sentinelConf is Sentinel i's config file. Sentinel rewrites it as it
// learns (hence a file of its own, in its own directory).
func sentinelConf(dir, master string, addrs, ids []string, i int, primary, replica string, quorum int, opt SentinelOptions) string {
	host, port, _ := net.SplitHostPort(addrs[i])
	phost, pport, _ := net.SplitHostPort(primary)
	rhost, rport, _ := net.SplitHostPort(replica)
	var b strings.Builder
	fmt.Fprintf(&b, "bind %s\nport %s\ndaemonize no\nprotected-mode no\ndir %s\nloglevel notice\n", host, port, dir)
	fmt.Fprintf(&b, "sentinel myid %s\n", ids[i])
	if opt.Splittable {
		// Connect from the Sentinels' source, but say where they listen:
		// hellos would otherwise announce the source address, where no
		// Sentinel answers, and the Sentinels could not elect a leader.
		fmt.Fprintf(&b, "bind-source-addr %s\nsentinel announce-ip %s\n", SentinelSource, host)
	}
	fmt.Fprintf(&b, "sentinel monitor %s %s %s %d\n", master, phost, pport, quorum)
	fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", master, opt.DownAfter.Milliseconds())
	fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", master, opt.FailoverTimeout.Milliseconds())
	fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", master)
	fmt.Fprintf(&b, "sentinel known-replica %s %s %s\n", master, rhost, rport)
	for j, a := range addrs {
		if j == i {
			continue
		}
		h, p, _ := net.SplitHostPort(a)
		fmt.Fprintf(&b, "sentinel known-sentinel %s %s %s %s\n", master, h, p, ids[j])
	}
	return b.String()
}

// SentinelAddrs are the Sentinels' host:port addresses, for a go-redis
// FailoverClient.
func (s *SentinelSet) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, p := range s.Sentinels {
		addrs[i] = p.Addr()
	}
	return addrs
}

// Master asks the Sentinels, in turn, for the current primary's address;
// the first that answers wins.
func (s *SentinelSet) Master(ctx context.Context) (string, error) {
	var errs []error
	for _, addr := range s.SentinelAddrs() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		hp, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
		sc.Close()
		if err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		errs = append(errs, fmt.Errorf("%s: %v %w", addr, hp, err))
	}
	return "", fmt.Errorf("no sentinel named a master: %w", errors.Join(errs...))
}

// Node is the process serving addr (the primary or the replica), or nil.
func (s *SentinelSet) Node(addr string) *Process {
	if s.Front != nil && addr == s.Front.Addr() {
		return s.Primary
	}
	for _, p := range []*Process{s.Primary, s.Replica} {
		if p != nil && p.Addr() == addr {
			return p
		}
	}
	return nil
}

// WatchSwitch subscribes to +switch-master on every Sentinel and returns a
// channel that receives the new primary's address once all of them have
// switched to one (each Sentinel publishes it when it adopts the new
// config; the ones that did not lead the failover learn it from hellos,
// up to 2 s later). Until then a lagging Sentinel still names the old
// primary: restart that one before all have switched and a lagging
// Sentinel presents it, empty, as the master. Subscribe before causing the
// failover, so no event is missed; cancel ctx to stop watching (the
// channel is then closed without a value).
func (s *SentinelSet) WatchSwitch(ctx context.Context) (<-chan string, error) {
	type sub struct {
		sc *redis.SentinelClient
		ps *redis.PubSub
	}
	var subs []sub
	closeAll := func() {
		for _, x := range subs {
			x.ps.Close()
			x.sc.Close()
		}
	}
	for _, addr := range s.SentinelAddrs() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		ps := sc.Subscribe(ctx, "+switch-master")
		subs = append(subs, sub{sc, ps})
		// The subscription's confirmation: after it, no event is missed.
		if _, err := ps.Receive(ctx); err != nil {
			closeAll()
			return nil, fmt.Errorf("sentinel %s: subscribe +switch-master: %w", addr, err)
		}
	}
	got := make(chan string, len(subs))
	for _, x := range subs {
		go func() {
			ch := x.ps.Channel()
			for {
				select {
				case <-ctx.Done():
					return
				case m, ok := <-ch:
					if !ok {
						return
					}
					// "<master name> <old ip> <old port> <new ip> <new port>"
					f := strings.Fields(m.Payload)
					if len(f) == 5 && f[0] == s.MasterName {
						got <- net.JoinHostPort(f[3], f[4]) // buffered: one per Sentinel
						return
					}
				}
			}
		}()
	}
	out := make(chan string, 1)
	go func() {
		defer close(out)
		defer closeAll()
		var addr string
		for range subs {
			select {
			case a := <-got:
				if addr != "" && a != addr {
					return // Sentinels disagree: no single answer to give
				}
				addr = a
			case <-ctx.Done():
				return
			}
		}
		out <- addr
	}()
	return out, nil
}

// Rejoin starts p, a stopped or killed node of the set, again on its
// address and directory, as a replica of the current primary, and waits
// until it has synced. Started as it was (Process.Start), an old primary
// comes back as an empty master until Sentinel's next INFO to it (every
// 10 s) turns it into a replica; an operator would give it the replicaof
// line instead, as this does.
func (s *SentinelSet) Rejoin(ctx context.Context, p *Process) error {
	select {
	case <-p.Exited():
	default:
		return fmt.Errorf("%s is still running", p.Name())
	}
	master, err := s.Master(ctx)
	if err != nil {
		return err
	}
	if master == p.Addr() {
		return fmt.Errorf("%s is still the Sentinels' master", p.Name())
	}
	np, err := startRedisNode(ctx, p.Dir(), p.Name(), p.Addr(), master, s.Clock(p).Env())
	if err != nil {
		return err
	}
	switch p {
	case s.Primary:
		s.Primary = np
	case s.Replica:
		s.Replica = np
	}
	return WaitReplicated(ctx, master, harnessKey, 1)
}

// WaitReplicated returns once n replicas of the current primary have
// acknowledged everything written to it so far (a restarted old primary
// that Sentinel has turned into a replica, say).
func (s *SentinelSet) WaitReplicated(ctx context.Context, n int) error {
	addr, err := s.Master(ctx)
	if err != nil {
		return err
	}
	return WaitReplicated(ctx, addr, harnessKey, n)
}

// Stop stops every process, Sentinels first (so none starts a failover
// while the Redis servers go), each within timeout.
func (s *SentinelSet) Stop(timeout time.Duration) {
	for _, p := range s.Sentinels {
		_ = p.Stop(timeout)
	}
	for _, p := range []*Process{s.Replica, s.Primary} {
		if p != nil {
			_ = p.Stop(timeout)
		}
	}
	if s.Front != nil {
		_ = s.Front.Close()
	}
}

// Isolate cuts the primary off from the Sentinels and the replica, not
// from its clients (SentinelOptions.Splittable): it keeps running and
// answering writes while the Sentinels, unable to reach it, promote the
// replica. heal ends the partition; Sentinel then finds two masters and
// makes the old one a replica of the new, discarding what it took alone.
func (s *SentinelSet) Isolate() (heal func(), err error) {
	if s.Front == nil {
		return nil, errors.New("servers: the Sentinel set was not started Splittable")
	}
	s.Front.Cut(SentinelSource, ReplicaSource)
	return s.Front.Heal, nil
}

// NodeState is a one-line account of the Redis at addr for a failover's
// diagnosis: its role, whom it replicates from and how (link, offset, sync
// in progress), its replication id and offset, and its key count. An error
// is part of the line: a dead node is a state too.
func NodeState(ctx context.Context, addr string) string {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Sprintf("%s: %v", addr, err)
	}
	keys, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return fmt.Sprintf("%s: dbsize: %v", addr, err)
	}
	want := []string{"role", "master_host", "master_port", "master_link_status", "master_sync_in_progress",
		"slave_repl_offset", "connected_slaves", "master_replid", "master_repl_offset"}
	fields := infoFields(info)
	var b strings.Builder
	fmt.Fprintf(&b, "%s keys=%d", addr, keys)
	for _, k := range want {
		if v, ok := fields[k]; ok {
			if k == "master_replid" && len(v) > 8 {
				v = v[:8]
			}
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	return b.String()
}

// ConfigEpochs is each Sentinel's config epoch for the master: the number
// of failovers it has adopted since the set started (each failover's
// leader takes a new epoch). One fault must make exactly one failover; a
// second one is a spurious failover of the new primary.
func (s *SentinelSet) ConfigEpochs(ctx context.Context) ([]int64, error) {
	epochs := make([]int64, 0, len(s.Sentinels))
	for _, addr := range s.SentinelAddrs() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		m, err := sc.Master(ctx, s.MasterName).Result()
		sc.Close()
		if err != nil {
			return epochs, fmt.Errorf("sentinel %s: %w", addr, err)
		}
		n, err := strconv.ParseInt(m["config-epoch"], 10, 64)
		if err != nil {
			return epochs, fmt.Errorf("sentinel %s: config-epoch %q: %w", addr, m["config-epoch"], err)
		}
		epochs = append(epochs, n)
	}
	return epochs, nil
}
