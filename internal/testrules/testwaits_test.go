package testrules

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// timers are the time functions a test file may not call: each races a
// wait against a number the test picked, the way a must-happen event (a
// reply, a failover, a lock grant) becomes a failure whenever the machine
// is busy. internal/testwait names the two honest waits instead.
var timers = map[string]bool{"After": true, "NewTimer": true, "Tick": true}

// TestTestWaitsAreNamed: no test file bounds a wait with time.After,
// time.NewTimer or time.Tick. A wait for an event that must happen is
// bounded by the test binary's deadline (testwait.Until); a wait whose
// passing outcome is that nothing happened says so (testwait.MustNotWithin).
// A pause between polls is a time.Sleep or a time.Ticker. Every _test.go
// in the module is checked, internal/lab's included; internal/testwait,
// which wraps the timer, is not.
func TestTestWaitsAreNamed(t *testing.T) {
	moduleFiles(t, true, []string{"internal/testwait"}, func(gf goFile) {
		for _, v := range timerWaits(gf.fset, gf.f) {
			t.Errorf("%s: time.%s in a test%s; use testwait.Until(t) for an event that must happen, testwait.MustNotWithin(d) for one that must not",
				gf.fset.Position(v.pos), v.name, v.note)
		}
	})
}

// timerWait is one refused use of a timer.
type timerWait struct {
	pos  token.Pos
	name string // After, NewTimer or Tick
	note string // why an escape hatch beside it did not count, if one did not
}

// timerWaits are f's references to time.After, time.NewTimer and time.Tick
// through any import name of "time" (under a dot import, the calls of the
// bare names), but for those with an escape hatch that gives a reason.
func timerWaits(fset *token.FileSet, f *ast.File) []timerWait {
	tn := timeImports(f)
	if tn.none() {
		return nil
	}
	h := escapeHatches(fset, f)

	var out []timerWait
	ast.Inspect(f, func(n ast.Node) bool {
		var name *ast.Ident
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if tn.is(n, func(s string) bool { return timers[s] }) {
				name = n.Sel
			}
		case *ast.CallExpr: // under a dot import, a call of the bare name
			if fn, ok := n.Fun.(*ast.Ident); ok && tn.is(fn, func(s string) bool { return timers[s] }) {
				name = fn
			}
		}
		if name == nil {
			return true
		}
		ok, note := h.excuse(fset.Position(n.Pos()).Line)
		if !ok {
			out = append(out, timerWait{pos: n.Pos(), name: name.Name, note: note})
		}
		return true
	})
	return out
}

// TestTestWaitsRuleSeesAViolation: the rule above finds the pattern it
// exists to refuse, under any import name, and honours an escape hatch
// only with a reason, so a change to it cannot make it pass vacuously.
func TestTestWaitsRuleSeesAViolation(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // the refused timers, in order
	}{{
		name: "time",
		src: `package x_test
import "time"
func a() { <-time.After(time.Second) }
func b() { tm := time.NewTimer(time.Second); _ = tm }
func c() { for range time.Tick(time.Second) {} }
func d() { f := time.After; _ = f }
func ok() {
	time.Sleep(time.Second)
	tk := time.NewTicker(time.Second); tk.Stop()
	_ = time.Now().After(time.Now())
	stop := time.AfterFunc(time.Second, func() {}); _ = stop
}
`,
		want: []string{"After", "NewTimer", "Tick", "After"},
	}, {
		name: "alias",
		src: `package x_test
import clock "time"
func a() { <-clock.After(clock.Second) }
func b(time interface{ After(int) }) { time.After(1) } // not the package
`,
		want: []string{"After"},
	}, {
		name: "dot",
		src: `package x_test
import . "time"
func a() { <-After(Second) }
func b(x interface{ After(int) }) { x.After(1) }
`,
		want: []string{"After"},
	}, {
		name: "hatch",
		src: `package x_test
import "time"
func a() {
	<-time.After(time.Second) //testwait:ok the deadline is the event
	//testwait:ok the bound is what is tested
	<-time.After(time.Second)
	<-time.After(time.Second) //testwait:ok
	//testwait:ok
	<-time.NewTimer(time.Second).C
	<-time.After(time.Second) //testwait:okay, no
}
`,
		want: []string{"After", "NewTimer", "After"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fset, f := parseSource(t, tc.src)
			var got []string
			for _, v := range timerWaits(fset, f) {
				got = append(got, v.name)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("refused %v, want %v", got, tc.want)
			}
		})
	}
}
