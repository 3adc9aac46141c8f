package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/backoff"
)

// cluster.go: a Redis Cluster of three masters, each with one replica, on
// loopback — plain redis-server processes formed by redis-cli, so killing
// or pausing a master makes its replica take over for real.

// DefaultClusterNodeTimeout is RedisClusterOptions.NodeTimeout when it is
// zero: short, so a test's failover takes seconds, not Redis's 15 s.
const DefaultClusterNodeTimeout = 2 * time.Second

// clusterSlots is the number of hash slots Redis Cluster divides keys into.
const clusterSlots = 16384

// RedisClusterOptions tunes a cluster. Zero values get the defaults shown.
type RedisClusterOptions struct {
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// silent before the others fail it and its replica is promoted;
	// default 2s.
	NodeTimeout time.Duration
	// FormTimeout bounds the wait for a formed, usable cluster after the
	// processes answer; default 30s.
	FormTimeout time.Duration
}

// RedisCluster is a running cluster. Masters()[i] and Replicas()[i] are a
// master and its replica as formed; after a failover the roles are
// whatever the cluster has made of them since (WaitPromoted).
type RedisCluster struct {
	dir      string
	masters  []*Process
	replicas []*Process
	nodes    []*Process // every process started, in start order
}

// StartRedisCluster starts six redis-server processes in cluster mode, each
// in a directory of its own under a fresh temporary directory in dir ("" for
// the system's), joins them with redis-cli --cluster create into three
// masters with a replica each, and returns once the cluster is usable: every
// node says cluster_state:ok with all slots assigned, and every replica's
// link to its master is up. On error, whatever started is stopped and the
// directory removed.
func StartRedisCluster(ctx context.Context, dir string, opt RedisClusterOptions) (_ *RedisCluster, err error) {
	if opt.NodeTimeout <= 0 {
		opt.NodeTimeout = DefaultClusterNodeTimeout
	}
	if opt.FormTimeout <= 0 {
		opt.FormTimeout = 30 * time.Second
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli: %w", ErrNotInstalled)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server: %w", ErrNotInstalled)
	}
	root, err := os.MkdirTemp(dir, "redis-cluster-")
	if err != nil {
		return nil, fmt.Errorf("cluster dir: %w", err)
	}
	// Not the named result: each "return nil, err" would nil it before
	// this cleanup runs.
	c := &RedisCluster{dir: root}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()

	const n = 6
	addrs := make([]string, n)
	for i := range addrs {
		addr, bus, err := clusterPorts()
		if err != nil {
			return nil, err
		}
		p, err := startRedisNode(ctx, filepath.Join(root, fmt.Sprintf("node%d", i+1)), fmt.Sprintf("redis-cluster%d", i+1), addr, "", nil,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(opt.NodeTimeout.Milliseconds(), 10),
			"--cluster-port", strconv.Itoa(bus))
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, p)
		addrs[i] = addr
	}

	formCtx, cancel := context.WithTimeout(ctx, opt.FormTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(formCtx, cli, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.waitFormed(formCtx); err != nil {
		return nil, err
	}
	return c, nil
}

// clusterPorts picks a client port and a cluster bus port, both free. The
// bus port is named (cluster-port, Redis 7) because Redis's default,
// port+10000, is past 65535 for much of the kernel's ephemeral range (Redis
// then refuses to start) and free or not is anyone's guess.
func clusterPorts() (addr string, bus int, err error) {
	if addr, err = LoopbackAddr(); err != nil {
		return "", 0, err
	}
	if bus, err = FreePort(); err != nil {
		return "", 0, err
	}
	return addr, bus, nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, masterID string
	master, myself     bool
	failed             bool // fail or fail? flag
	slots              int
}

// clusterNodes parses CLUSTER NODES from the node rdb talks to.
func clusterNodes(ctx context.Context, rdb *redis.Client) ([]clusterNode, error) {
	s, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster nodes: %w", err)
	}
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		// <id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent>
		// <pong-recv> <config-epoch> <link-state> <slot> <slot> ...
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: addr}
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "master":
				n.master = true
			case "myself":
				n.myself = true
			case "fail", "fail?":
				n.failed = true
			}
		}
		if f[3] != "-" {
			n.masterID = f[3]
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated or imported
			}
			lo, hi, ok := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if ok {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("cluster nodes: bad slot range %q", r)
			}
			n.slots += b - a + 1
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// infoFields parses an INFO reply into its key:value fields.
func infoFields(info string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// waitFormed polls until the cluster is usable and then records which
// process is which master's replica. Nodes in other processes send no
// event when they agree, so polling under ctx's deadline is all there is.
func (c *RedisCluster) waitFormed(ctx context.Context) error {
	poll := backoff.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	for {
		err := c.checkFormed(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not formed: %w (last check: %v)", ctx.Err(), err)
		case <-time.After(poll.Next()):
		}
	}
}

// checkFormed is one look at every node: nil once each passes
// checkNodeFormed. It then records which process replicates which.
func (c *RedisCluster) checkFormed(ctx context.Context) error {
	byAddr := map[string]*Process{}
	for _, p := range c.nodes {
		byAddr[p.Addr()] = p
	}
	var masters, replicas []*Process
	for _, p := range c.nodes {
		upstream, err := c.checkNodeFormed(ctx, p.Addr())
		if err != nil {
			return err
		}
		if upstream == "" {
			continue
		}
		m := byAddr[upstream]
		if m == nil {
			return fmt.Errorf("%s: replicates %s, not one of ours", p.Addr(), upstream)
		}
		masters = append(masters, m)
		replicas = append(replicas, p)
	}
	if len(masters) != len(c.nodes)/2 {
		return fmt.Errorf("%d replicas, want %d", len(masters), len(c.nodes)/2)
	}
	c.masters, c.replicas = masters, replicas
	return nil
}

// checkNodeFormed is nil once the node at addr says cluster_state:ok with
// every slot assigned and every node known, sees three masters holding all
// slots with a replica each and none failing, and, if it is a replica, has
// its link to its master up; it then returns that master's address ("" for
// a master).
func (c *RedisCluster) checkNodeFormed(ctx context.Context, addr string) (upstream string, err error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rdb.Close()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("%s: cluster info: %w", addr, err)
	}
	ci := infoFields(info)
	if ci["cluster_state"] != "ok" || ci["cluster_slots_assigned"] != strconv.Itoa(clusterSlots) || ci["cluster_known_nodes"] != strconv.Itoa(len(c.nodes)) {
		return "", fmt.Errorf("%s: cluster_state:%s cluster_slots_assigned:%s cluster_known_nodes:%s",
			addr, ci["cluster_state"], ci["cluster_slots_assigned"], ci["cluster_known_nodes"])
	}
	nodes, err := clusterNodes(ctx, rdb)
	if err != nil {
		return "", fmt.Errorf("%s: %w", addr, err)
	}
	replicated := map[string]bool{}
	var nmasters, slots int
	var self clusterNode
	for _, n := range nodes {
		if n.myself {
			self = n
		}
		if n.failed {
			return "", fmt.Errorf("%s: sees %s failing", addr, n.addr)
		}
		if n.master && n.slots > 0 {
			nmasters++
			slots += n.slots
		}
		if n.masterID != "" {
			replicated[n.masterID] = true
		}
	}
	if nmasters != len(c.nodes)/2 || slots != clusterSlots || len(replicated) != nmasters {
		return "", fmt.Errorf("%s: sees %d masters with %d slots, %d of them replicated", addr, nmasters, slots, len(replicated))
	}
	if self.master {
		return "", nil
	}
	repl, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return "", fmt.Errorf("%s: info replication: %w", addr, err)
	}
	if st := infoFields(repl)["master_link_status"]; st != "up" {
		return "", fmt.Errorf("%s: master_link_status:%s", addr, st)
	}
	for _, n := range nodes {
		if n.id == self.masterID {
			return n.addr, nil
		}
	}
	return "", fmt.Errorf("%s: its master %s is not in its node list", addr, self.masterID)
}

// Masters are the master processes as formed; Replicas()[i] replicates
// Masters()[i].
func (c *RedisCluster) Masters() []*Process { return append([]*Process(nil), c.masters...) }

// Replicas are the replica processes as formed, in the order of Masters.
func (c *RedisCluster) Replicas() []*Process { return append([]*Process(nil), c.replicas...) }

// Addrs are every node's host:port, masters first: seeds for a go-redis
// ClusterClient.
func (c *RedisCluster) Addrs() []string {
	var addrs []string
	for _, p := range append(c.Masters(), c.replicas...) {
		addrs = append(addrs, p.Addr())
	}
	return addrs
}

// ReplicaOf is the replica formed for master, or nil.
func (c *RedisCluster) ReplicaOf(master *Process) *Process {
	for i, m := range c.masters {
		if m == master {
			return c.replicas[i]
		}
	}
	return nil
}

// WaitPromoted polls until the replica formed for master is a master
// itself, holding slots, and every node still running says
// cluster_state:ok: master has failed over (after a Kill or Pause of it,
// within about twice NodeTimeout). It returns the promoted replica.
func (c *RedisCluster) WaitPromoted(ctx context.Context, master *Process) (*Process, error) {
	replica := c.ReplicaOf(master)
	if replica == nil {
		return nil, fmt.Errorf("%s is not a master of the cluster as formed", master.Name())
	}
	poll := backoff.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	for {
		err := c.checkPromoted(ctx, master, replica)
		if err == nil {
			return replica, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s not promoted: %w (last check: %v)", replica.Addr(), ctx.Err(), err)
		case <-time.After(poll.Next()):
		}
	}
}

func (c *RedisCluster) checkPromoted(ctx context.Context, master, replica *Process) error {
	for _, p := range c.nodes {
		if p == master {
			continue // dead or paused: it has no say
		}
		select {
		case <-p.Exited():
			continue
		default:
		}
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		info, err := rdb.ClusterInfo(ctx).Result()
		var nodes []clusterNode
		if err == nil {
			nodes, err = clusterNodes(ctx, rdb)
		}
		rdb.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p.Addr(), err)
		}
		if st := infoFields(info)["cluster_state"]; st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", p.Addr(), st)
		}
		for _, n := range nodes {
			if n.addr == replica.Addr() && !(n.master && n.slots > 0) {
				return fmt.Errorf("%s: sees %s still a replica", p.Addr(), replica.Addr())
			}
		}
	}
	return nil
}

// Close kills every process (nothing here is persisted, so there is
// nothing to shut down gracefully) and removes the cluster's directory.
func (c *RedisCluster) Close() error {
	var errs []error
	for _, p := range c.nodes {
		if err := p.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
