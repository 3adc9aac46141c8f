//go:build lab

package failpoint

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// defaultExitCode is what a shell reports for a SIGKILLed process (128+9):
// the crash the exit action stands in for.
const defaultExitCode = 137

// parse turns a spec into a point, or nil for "off".
func parse(name, spec string) (*point, error) {
	s := strings.TrimSpace(spec)
	p := &point{name: name, spec: s}
	if n, rest, ok := strings.Cut(s, "*"); ok && isDigits(n) {
		count, err := strconv.ParseInt(n, 10, 64)
		if err != nil || count < 1 {
			return nil, fmt.Errorf("failpoint %s: spec %q: count must be a positive integer", name, spec)
		}
		p.counts = true
		p.left.Store(count)
		s = rest
	}
	verb, arg, hasArg := s, "", false
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return nil, fmt.Errorf("failpoint %s: spec %q: missing )", name, spec)
		}
		verb, arg, hasArg = s[:i], s[i+1:len(s)-1], true
	}
	bad := func(why string) error { return fmt.Errorf("failpoint %s: spec %q: %s", name, spec, why) }
	switch verb {
	case "off":
		if hasArg || p.counts {
			return nil, bad("off takes no argument or count")
		}
		return nil, nil
	case "sleep":
		d, err := time.ParseDuration(arg)
		if !hasArg || err != nil || d < 0 {
			return nil, bad("want sleep(<non-negative duration>), e.g. sleep(200ms)")
		}
		p.act = sleep(name, d)
	case "pause":
		if hasArg {
			return nil, bad("pause takes no argument")
		}
		p.gate = newGate()
		p.act = p.gate.wait(name)
	case "error", "return":
		msg := arg
		if msg == "" {
			msg = "injected error"
		}
		p.act = func(context.Context) error {
			return fmt.Errorf("failpoint %s: %w: %s", name, ErrInjected, msg)
		}
	case "panic":
		msg := "failpoint " + name + ": panic"
		if arg != "" {
			msg += ": " + arg
		}
		p.act = func(context.Context) error { panic(msg) }
	case "exit":
		code := defaultExitCode
		if arg != "" {
			c, err := strconv.Atoi(arg)
			if err != nil || c < 0 || c > 255 {
				return nil, bad("want exit or exit(<0..255>)")
			}
			code = c
		}
		p.act = crash(name, code)
	default:
		return nil, bad("unknown action (want sleep(d), pause, error(msg), panic, exit, off)")
	}
	return p, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// sleep waits d, or less if ctx ends first: a caller whose deadline passes
// mid-failpoint behaves as it would if a real slow call had timed out.
func sleep(name string, d time.Duration) Func {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("failpoint %s: %w: sleep cut short: %w", name, ErrInjected, ctx.Err())
		}
	}
}
