package servers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// owned.go: a server this package starts dies with the process that
// started it, however that process ends. A test binary killed with -9 runs
// no cleanup, and its servers used to live on: Sentinels of a killed run
// joined the next run's set and failed its failover. Two mechanisms, since
// neither covers everything alone:
//
//   - Every server is started from one OS thread that lives as long as the
//     process (spawn), with Pdeathsig SIGKILL: the kernel kills the server
//     when that thread, and so the process, is gone. Pdeathsig belongs to
//     the thread that forked the child, not to the process, so a child
//     started from an ordinary goroutine's thread would be killed when the
//     Go runtime happened to end that thread.
//   - Every server, and everything it starts (a JVM's or nginx's children,
//     which Pdeathsig does not reach), carries the mark OwnerEnv=<owner> in
//     its environment, where owner names its starter by pid and start time.
//     The first start in a process sweeps (SweepStrays): any process with a
//     mark whose owner is gone is killed.

// OwnerEnv is the environment variable that marks a process as started by
// this package; its value names the owner (a pid and that process's start
// time, so a reused pid is another owner).
const OwnerEnv = "SECKILL_HARNESS_OWNER"

// owner is this process's mark.
var owner = sync.OnceValue(func() string { return processMark(os.Getpid()) })

// processMark is "<pid>:<start time>" of a running process, "" when there
// is none. The start time is /proc/<pid>/stat's 22nd field (clock ticks
// since boot): it tells two processes that had one pid apart.
func processMark(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: count from after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19]; a zombie is gone.
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return strconv.Itoa(pid) + ":" + f[19]
}

var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

// spawn starts cmd, marked as this process's own and killed by the kernel
// when this process ends. The first call sweeps strays of earlier runs.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		if killed, err := SweepStrays(); err != nil {
			fmt.Fprintf(os.Stderr, "servers: sweeping strays of earlier runs: %v\n", err)
		} else if len(killed) > 0 {
			fmt.Fprintf(os.Stderr, "servers: killed %d stray server processes of earlier runs: %v\n", len(killed), killed)
		}
		spawnReqs = make(chan spawnReq)
		go spawner()
	})
	cmd.Env = append(cmd.Env, OwnerEnv+"="+owner())
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	spawnReqs <- r
	return <-r.err
}

// spawner starts every server from one thread, locked and never released:
// a goroutine that exits while locked takes its thread with it, and this
// one never exits, so the thread ends only with the process. It is the one
// goroutine of this package that lives as long as the process.
func spawner() {
	runtime.LockOSThread()
	for r := range spawnReqs {
		r.err <- r.cmd.Start()
	}
}

// SweepStrays kills every process marked by this package (OwnerEnv) whose
// owner is no longer running, and returns their pids. Processes it may not
// read (another user's) are passed over.
func SweepStrays() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := owner()
	prefix := []byte(OwnerEnv + "=")
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			mark, ok := bytes.CutPrefix(kv, prefix)
			if !ok {
				continue
			}
			if string(mark) != self && !ownerAlive(string(mark)) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed = append(killed, pid)
				}
			}
			break
		}
	}
	return killed, nil
}

// ownerAlive reports whether the process a mark names still runs.
func ownerAlive(mark string) bool {
	pid, _, ok := strings.Cut(mark, ":")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(pid)
	return err == nil && processMark(n) == mark
}
