//go:build lab

package failpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
)

// point is one enabled failpoint. It is immutable after Enable except for
// its counter and its pause gate.
type point struct {
	name   string
	spec   string
	act    Func
	counts bool         // a count prefix was given
	left   atomic.Int64 // evaluations that still fire, when counts
	gate   *gate        // non-nil for pause
}

// table is the set of enabled failpoints, replaced (never mutated) on every
// change so Eval can read it without a lock. A nil table means none enabled,
// which is the fast path.
var (
	table atomic.Pointer[map[string]*point]
	mu    sync.Mutex // serialises writers of table
)

// exit is os.Exit, replaceable by this package's tests.
var exit = os.Exit

// Eval runs the failpoint called name if it is enabled, and returns what its
// action returns. When no failpoint at all is enabled it is a single atomic
// load and allocates nothing. An action that blocks (sleep, pause) gives up
// when ctx is done, returning an error that wraps ErrInjected and ctx.Err().
func Eval(ctx context.Context, name string) error {
	// Kept this small so the compiler inlines it: the disabled path is then
	// a load and a branch at the call site.
	if table.Load() == nil {
		return nil
	}
	return eval(ctx, name)
}

func eval(ctx context.Context, name string) error {
	p := lookup(name)
	if p == nil {
		return nil
	}
	if p.counts && p.left.Add(-1) < 0 {
		return nil
	}
	return p.act(ctx)
}

// Enable arms the failpoint called name with spec, replacing whatever it had.
// The spec grammar is
//
//	[N*]action
//	action = sleep(duration) | pause | error | error(msg) | panic | panic(msg) | exit | exit(code) | off
//
// where N* fires the action for the first N evaluations only; later ones do
// nothing. sleep waits for the duration (time.ParseDuration syntax); pause
// blocks until Release or Disable of name; error makes Eval return an error
// wrapping ErrInjected; panic panics; exit logs and calls os.Exit (default
// code 137, what a SIGKILLed process reports), simulating a crash at exactly
// that point; off disables the failpoint.
func Enable(name, spec string) error {
	if name == "" {
		return errors.New("failpoint: empty name")
	}
	p, err := parse(name, spec)
	if err != nil {
		return err
	}
	if p == nil {
		Disable(name)
		return nil
	}
	put(name, p)
	return nil
}

// EnableFunc arms the failpoint called name with fn, replacing whatever it
// had. It is for tests that need more than the spec actions, for example to
// close a client at exactly that point, or to act only for one caller.
func EnableFunc(name string, fn Func) {
	put(name, &point{name: name, spec: "func", act: fn})
}

// Disable disarms name and lets go any evaluation paused there. It reports
// whether name was enabled.
func Disable(name string) bool {
	mu.Lock()
	defer mu.Unlock()
	old := table.Load()
	if old == nil || (*old)[name] == nil {
		return false
	}
	p := (*old)[name]
	next := make(map[string]*point, len(*old))
	for k, v := range *old {
		if k != name {
			next[k] = v
		}
	}
	store(next)
	if p.gate != nil {
		p.gate.release()
	}
	return true
}

// DisableAll disarms every failpoint and lets every paused evaluation go.
func DisableAll() {
	mu.Lock()
	defer mu.Unlock()
	old := table.Load()
	table.Store(nil)
	if old == nil {
		return
	}
	for _, p := range *old {
		if p.gate != nil {
			p.gate.release()
		}
	}
}

// Active lists the enabled failpoints as "name=spec", sorted, for a startup
// log line.
func Active() []string {
	m := table.Load()
	if m == nil {
		return nil
	}
	out := make([]string, 0, len(*m))
	for name, p := range *m {
		out = append(out, name+"="+p.spec)
	}
	sort.Strings(out)
	return out
}

// put installs p under name; the caller holds no lock.
func put(name string, p *point) {
	mu.Lock()
	defer mu.Unlock()
	old := table.Load()
	next := make(map[string]*point)
	var replaced *point
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
		replaced = (*old)[name]
	}
	next[name] = p
	store(next)
	// A pause being replaced must not strand its waiters.
	if replaced != nil && replaced.gate != nil {
		replaced.gate.release()
	}
}

// store publishes next, keeping the empty set as nil so Eval's fast path
// stays one load and one comparison.
func store(next map[string]*point) {
	if len(next) == 0 {
		table.Store(nil)
		return
	}
	table.Store(&next)
}

func lookup(name string) *point {
	m := table.Load()
	if m == nil {
		return nil
	}
	return (*m)[name]
}

// crash is the exit action: a log line saying where, so the cluster's logs
// explain the death, then os.Exit without running defers, like a kill.
func crash(name string, code int) Func {
	return func(context.Context) error {
		slog.Error("failpoint: exiting to simulate a crash", "failpoint", name, "code", code)
		exit(code)
		return fmt.Errorf("failpoint %s: %w: exit(%d) returned", name, ErrInjected, code)
	}
}

// Compiled reports whether this build has the registry (the lab tag).
const Compiled = true
