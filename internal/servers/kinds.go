package servers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries looked up on PATH (Debian packages redis-server, etcd-server,
// zookeeper, nginx). ZooKeeper runs on the JVM from the Debian jar.
var (
	ZooKeeperJar = "/usr/share/java/zookeeper.jar"
)

// StartRedis runs redis-server on addr (a loopback host:port) with no
// persistence, its working files in dir.
func StartRedis(ctx context.Context, dir, addr string) (*Process, error) {
	return RedisWith()(ctx, dir, addr)
}

// RedisWith is StartRedis with more redis-server arguments after its own;
// a later one wins, so "--appendonly", "yes" keeps an append-only file in
// dir, which a Start after a Kill loads again.
func RedisWith(args ...string) func(ctx context.Context, dir, addr string) (*Process, error) {
	return RedisOnClock(nil, args...)
}

// RedisOnClock is RedisWith on clock (the machine's when nil): a Start
// after a Kill runs on it again.
func RedisOnClock(clock *ShiftedClock, args ...string) func(ctx context.Context, dir, addr string) (*Process, error) {
	return func(ctx context.Context, dir, addr string) (*Process, error) {
		var env []string
		if clock != nil {
			env = clock.Env()
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return Start(ctx, Spec{
			Name: "redis",
			Path: "redis-server",
			Args: append([]string{
				"--bind", host, "--port", port, "--dir", dir,
				"--save", "", "--appendonly", "no", "--protected-mode", "no",
				"--daemonize", "no", "--loglevel", "warning",
			}, args...),
			Env:   env,
			Dir:   dir,
			Addr:  addr,
			Ready: redisReady,
		})
	}
}

// redisReady sends an inline PING and expects +PONG.
func redisReady(ctx context.Context, addr string) error {
	return lineProbe(ctx, addr, "PING\r\n", "+PONG")
}

// StartEtcd runs a single-member etcd on addr (client URL) with a second free
// port for peers and its data in dir/data. The data directory survives
// Restart, as a real restart would.
func StartEtcd(ctx context.Context, dir, addr string) (*Process, error) {
	peer, err := LoopbackAddr()
	if err != nil {
		return nil, err
	}
	client := "http://" + addr
	peerURL := "http://" + peer
	return Start(ctx, Spec{
		Name: "etcd",
		Path: "etcd",
		Args: []string{
			"--name", "seckill",
			"--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "seckill=" + peerURL,
			"--log-level", "warn",
		},
		Dir:   dir,
		Addr:  addr,
		Ready: etcdReady,
	})
}

func etcdReady(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"true"`) {
		return fmt.Errorf("etcd health: %d %s", resp.StatusCode, b)
	}
	return nil
}

// StartZooKeeper runs a standalone ZooKeeper 3.8 from the Debian jar on addr.
// tickTime is short (200 ms) so session expiry in tests is quick; the session
// timeout bounds are widened so clients can still ask for 10 s or more.
func StartZooKeeper(ctx context.Context, dir, addr string) (*Process, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("zookeeper: %w: java: %v", ErrNotInstalled, err)
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return nil, fmt.Errorf("zookeeper: %w: %v", ErrNotInstalled, err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`tickTime=200
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%s
clientPortAddress=%s
minSessionTimeout=400
maxSessionTimeout=60000
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
`, filepath.Join(dir, "data"), port, host)
	if err := os.WriteFile(filepath.Join(conf, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return Start(ctx, Spec{
		Name: "zookeeper",
		Path: "java",
		Args: []string{
			"-Xmx256m", "-XX:+UseSerialGC",
			"-Dzookeeper.log.dir=" + dir,
			"-cp", conf + ":" + ZooKeeperJar,
			"org.apache.zookeeper.server.quorum.QuorumPeerMain",
			filepath.Join(conf, "zoo.cfg"),
		},
		Dir:   dir,
		Addr:  addr,
		Ready: zookeeperReady,
	})
}

// lineProbe writes req and expects the reply to start with want.
func lineProbe(ctx context.Context, addr, req, want string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, req); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if !strings.HasPrefix(line, want) {
		return fmt.Errorf("probe %q: got %q (%v), want %q", req, line, err, want)
	}
	return nil
}

// HTTPReady returns a probe that expects 200 from GET http://addr+path.
func HTTPReady(path string) func(ctx context.Context, addr string) error {
	return func(ctx context.Context, addr string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		return nil
	}
}
