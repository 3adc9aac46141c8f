// Package servers starts real server processes (redis-server, etcd, ZooKeeper,
// MariaDB, nginx, stockd) on free loopback ports with private temp directories, waits
// until they answer, and can stop, kill, pause, resume and restart them. It is
// the ground floor of the local cluster, the end-to-end tests and the
// benchmark: nothing here is a fake.
package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"seckill/internal/backoff"
)

// ErrNotInstalled is returned when a server binary is missing from PATH.
var ErrNotInstalled = errors.New("servers: binary not installed")

// Spec describes how to run and probe one process.
type Spec struct {
	Name  string   // label used for the log file and errors, e.g. "redis"
	Path  string   // executable
	Args  []string // arguments
	Env   []string // extra environment (KEY=VALUE), appended to os.Environ()
	Dir   string   // working directory; also where <Name>.log goes
	Addr  string   // host:port the process serves on
	Ready func(ctx context.Context, addr string) error
	// ReadyTimeout bounds the wait for Ready; default 30s.
	ReadyTimeout time.Duration
}

// Process is a running (or stopped) server started from a Spec.
type Process struct {
	spec Spec

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// Start runs spec and waits until spec.Ready succeeds.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if spec.ReadyTimeout == 0 {
		spec.ReadyTimeout = 30 * time.Second
	}
	p := &Process{spec: spec}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Name returns the process label.
func (p *Process) Name() string { return p.spec.Name }

// Addr is the host:port the process serves on.
func (p *Process) Addr() string { return p.spec.Addr }

// Dir is the process's private directory.
func (p *Process) Dir() string { return p.spec.Dir }

// Pid is the OS process id of the current incarnation (0 when not running).
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// LogPath is where the process's stdout and stderr go.
func (p *Process) LogPath() string { return filepath.Join(p.spec.Dir, p.spec.Name+".log") }

func (p *Process) start(ctx context.Context) error {
	if err := os.MkdirAll(p.spec.Dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Not CommandContext: the process must outlive the ctx that bounded its start.
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Dir = p.spec.Dir
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A group of its own, so signals reach the JVM's or nginx's children and
	// a Ctrl-C in the terminal is handled by us, not delivered to servers twice.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// spawn, not cmd.Start: the server dies with this process (owned.go).
	if err := spawn(cmd); err != nil {
		logf.Close()
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("%s: %w: %v", p.spec.Name, ErrNotInstalled, err)
		}
		return fmt.Errorf("start %s: %w", p.spec.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited, p.paused = cmd, exited, false
	p.mu.Unlock()

	if err := p.waitReady(ctx, exited); err != nil {
		_ = p.Kill()
		return fmt.Errorf("%s on %s not ready: %w\n%s", p.spec.Name, p.spec.Addr, err, p.LogTail(20))
	}
	return nil
}

func (p *Process) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, p.spec.ReadyTimeout)
	defer cancel()
	poll := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, time.Second)
		err := p.spec.Ready(probeCtx, p.spec.Addr)
		probeCancel()
		if err == nil {
			return nil
		}
		// Readiness has no event to wait for from outside the process: a
		// bounded, growing backoff between probes is the honest option.
		select {
		case <-exited:
			return fmt.Errorf("exited during start-up (last probe: %v)", err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last probe: %v)", ctx.Err(), err)
		case <-time.After(poll.Next()):
		}
	}
}

// ExitCode is the exit status of the current incarnation once it has exited
// (Exited is closed); -1 while it runs or when a signal ended it.
func (p *Process) ExitCode() int {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return -1
	}
	select {
	case <-exited:
	default:
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

// Exited is closed when the current incarnation of the process has exited.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

func (p *Process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	// Negative pid: the whole process group.
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s %v: %w", p.spec.Name, sig, err)
	}
	return nil
}

// Stop asks the process to exit (SIGTERM), waits up to timeout, then kills it.
func (p *Process) Stop(timeout time.Duration) error {
	_ = p.Resume() // a stopped process cannot act on SIGTERM
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.Exited():
		return nil
	case <-time.After(timeout):
		return p.Kill()
	}
}

// Kill ends the process at once (SIGKILL) and waits for it to be reaped.
func (p *Process) Kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	if ch := p.Exited(); ch != nil {
		<-ch
	}
	return nil
}

// Pause freezes the process (SIGSTOP): it keeps its sockets but does nothing,
// like a long GC pause.
func (p *Process) Pause() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	return nil
}

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() error {
	p.mu.Lock()
	paused := p.paused
	p.paused = false
	p.mu.Unlock()
	if !paused {
		return nil
	}
	return p.signal(syscall.SIGCONT)
}

// Restart stops the process gracefully and starts it again with the same
// spec (same port, same data directory), waiting until it is ready.
func (p *Process) Restart(ctx context.Context) error {
	if err := p.Stop(10 * time.Second); err != nil {
		return err
	}
	return p.start(ctx)
}

// Start starts a stopped or killed process again with the same spec.
func (p *Process) Start(ctx context.Context) error {
	select {
	case <-p.Exited():
	default:
		return fmt.Errorf("%s is still running", p.spec.Name)
	}
	return p.start(ctx)
}

// LogTail returns the last n lines of the process log, for error messages.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LoopbackAddr returns "127.0.0.1:<free port>".
func LoopbackAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}
