package testrules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// timers are the time functions a test file may not call: each races a
// wait against a number the test picked, the way a must-happen event (a
// reply, a failover, a lock grant) becomes a failure whenever the machine
// is busy. internal/testwait names the two honest waits instead.
var timers = map[string]bool{"After": true, "NewTimer": true, "Tick": true}

// escapeHatch marks the rare timer a test needs (a bound that is itself
// what is tested): "//testwait:ok <reason>", on the call's line or the line
// above. The reason is required.
const escapeHatch = "//testwait:ok"

// TestTestWaitsAreNamed: no test file bounds a wait with time.After,
// time.NewTimer or time.Tick. A wait for an event that must happen is
// bounded by the test binary's deadline (testwait.Until); a wait whose
// passing outcome is that nothing happened says so (testwait.MustNotWithin).
// A pause between polls is a time.Sleep or a time.Ticker. Every _test.go
// in the module is checked, internal/lab's included; internal/testwait,
// which wraps the timer, is not.
func TestTestWaitsAreNamed(t *testing.T) {
	root := moduleRoot(t)
	skip := filepath.Join(root, "internal", "testwait")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if path == skip {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module (deploy/k8s)
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, v := range timerWaits(fset, f) {
			t.Errorf("%s: time.%s in a test%s; use testwait.Until(t) for an event that must happen, testwait.MustNotWithin(d) for one that must not",
				fset.Position(v.pos), v.name, v.note)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d test files under %s, want the whole module's", checked, root)
	}
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
	names := map[string]bool{} // f's names for package time
	dot := false
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err != nil || p != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			names["time"] = true
		case imp.Name.Name == ".":
			dot = true
		case imp.Name.Name != "_":
			names[imp.Name.Name] = true
		}
	}
	if len(names) == 0 && !dot {
		return nil
	}

	// The lines of escape hatches: true with a reason, false without.
	hatches := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			rest, ok := strings.CutPrefix(c.Text, escapeHatch)
			if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
				continue
			}
			hatches[fset.Position(c.Slash).Line] = strings.TrimSpace(rest) != ""
		}
	}

	var out []timerWait
	ast.Inspect(f, func(n ast.Node) bool {
		var name *ast.Ident
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && names[x.Name] && timers[n.Sel.Name] {
				name = n.Sel
			}
		case *ast.CallExpr: // under a dot import, a call of the bare name
			if fn, ok := n.Fun.(*ast.Ident); ok && dot && timers[fn.Name] {
				name = fn
			}
		}
		if name == nil {
			return true
		}
		line := fset.Position(n.Pos()).Line
		v := timerWait{pos: n.Pos(), name: name.Name}
		for _, l := range []int{line, line - 1} {
			if withReason, ok := hatches[l]; ok {
				if withReason {
					return true
				}
				v.note = " (" + escapeHatch + " needs a reason)"
			}
		}
		out = append(out, v)
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
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x_test.go", tc.src, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
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
