package servers_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill/internal/backoff"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// ownedChildEnv makes this test binary, run again by TestKilledOwnerLeavesNothing,
// the owner that is killed: it starts servers, prints their pids and waits.
const ownedChildEnv = "SECKILL_OWNED_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(ownedChildEnv); dir != "" {
		os.Exit(ownedChild(dir))
	}
	os.Exit(m.Run())
}

// ownedChild starts a redis-server and a shell that starts a child of its
// own (as a JVM or nginx does), prints "pids <redis> <shell> <grandchild>"
// and blocks until it is killed.
func ownedChild(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, err := servers.LoopbackAddr()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	redis, err := servers.StartRedis(ctx, filepath.Join(dir, "redis"), addr)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	pidFile := filepath.Join(dir, "grandchild.pid")
	tree, err := servers.Start(ctx, servers.Spec{
		Name: "tree", Path: "sh", Dir: filepath.Join(dir, "tree"), Addr: "-",
		Args: []string{"-c", "sleep 300 & echo $! > " + pidFile + "; wait"},
		Ready: func(context.Context, string) error {
			b, err := os.ReadFile(pidFile)
			if err != nil || !strings.HasSuffix(string(b), "\n") {
				return errors.New("no grandchild pid yet")
			}
			return nil
		},
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	b, _ := os.ReadFile(pidFile)
	fmt.Printf("pids %d %d %s\n", redis.Pid(), tree.Pid(), strings.TrimSpace(string(b)))
	// Killed long before; the bound only ends a child whose test is gone.
	time.Sleep(2 * time.Minute)
	return 1
}

// A test binary killed with -9 runs no cleanup. Its servers die with it
// (Pdeathsig from the harness's spawning thread), and what they started,
// which Pdeathsig does not reach, is killed by the next harness's sweep of
// the marks: nothing the killed binary started is left.
func TestKilledOwnerLeavesNothing(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		servertest.SkipOrFail(t, err, "redis-server")
	}
	before := countRedis(t)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), ownedChildEnv+"="+t.TempDir())
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	// The child's line is a must-happen event: read until it comes, bounded
	// only by the test's deadline (the child gives up after a minute).
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = child.Process.Kill()
		t.Fatalf("child's pids: %q, %v", line, err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "pids" {
		_ = child.Process.Kill()
		t.Fatalf("child said %q, want pids <redis> <shell> <grandchild>", line)
	}
	var pids [3]int
	for i := range pids {
		if pids[i], err = strconv.Atoi(f[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	redisPid, shellPid, grandchild := pids[0], pids[1], pids[2]
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	during := countRedis(t)
	if during != before+1 {
		t.Logf("redis-server processes: %d before, %d with the child's (others' tests may start some too)", before, during)
	}

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The owner itself first: its children get Pdeathsig while it exits,
	// before it is a zombie, and a sweep in that moment sees it alive.
	waitGone(t, "the killed owner", child.Process.Pid)
	waitGone(t, "the killed owner's redis-server", redisPid)
	waitGone(t, "the killed owner's shell", shellPid)
	// Pdeathsig reaches the children the harness started, not theirs.
	if !alive(grandchild) {
		t.Fatalf("grandchild %d gone before the sweep: the sweep below is not tested", grandchild)
	}
	killed, err := servers.SweepStrays()
	if err != nil {
		t.Fatal(err)
	}
	// Another test binary's first start sweeps too (go test runs
	// packages at once): it may have taken the grandchild first.
	if !slices.Contains(killed, grandchild) && alive(grandchild) {
		t.Fatalf("sweep killed %v, want the killed owner's grandchild %d among them", killed, grandchild)
	}
	waitGone(t, "the swept grandchild", grandchild)
	t.Logf("redis-server processes: %d before the child, %d with it, %d after its kill -9", before, during, countRedis(t))
}

// A live owner's servers are not strays: a sweep from another process
// leaves them alone.
func TestSweepSparesLiveOwners(t *testing.T) {
	p := servertest.Redis(t)
	killed, err := servers.SweepStrays()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(killed, p.Pid()) || !alive(p.Pid()) {
		t.Fatalf("sweep killed %v, among them this test's own redis-server %d", killed, p.Pid())
	}
}

// alive: pid runs (a zombie, killed but not yet reaped, does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// waitGone waits until pid has exited. A process that is not our child has
// no event to wait on, so it polls with a growing backoff, bounded only by
// the test's deadline.
func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	until := testwait.Until(t)
	poll := backoff.Backoff{Initial: 5 * time.Millisecond, Max: 200 * time.Millisecond}
	for alive(pid) {
		if until.Err() != nil {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(poll.Next())
	}
}

// countRedis counts the machine's running redis-server processes.
func countRedis(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) == "redis-server" {
			n++
		}
	}
	return n
}
