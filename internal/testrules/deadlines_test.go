package testrules

import (
	"go/ast"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// TestNoDeadlineOnAWait: no test fails because a deadline of its own ran
// out. `deadline := time.Now().Add(10 * time.Second)` polled with `if
// time.Now().After(deadline) { t.Fatal(…) }` is time.After spelled
// another way: a must-happen event (a reconnect, an agreement, a consumer
// catching up) that comes late on a busy machine fails the test. Such a
// loop checks testwait.Until(t).Err() instead. The rule refuses an if that
// fails the test and whose condition reads a variable the function
// assigned from time.Now().Add(…), whatever the duration's name;
// "//testwait:ok <reason>" lets one through. A deadline that bounds a
// must-not-happen loop (for time.Now().Before(d) { if bad { t.Fatal } })
// is not read by the failing if, and passes. Every _test.go in the module
// is checked, internal/testwait's included.
func TestNoDeadlineOnAWait(t *testing.T) {
	moduleFiles(t, true, nil, func(gf goFile) {
		for _, v := range deadlineWaits(gf.fset, gf.f) {
			t.Errorf("%s: the test fails when its own deadline (%s) runs out%s; bound a must-happen wait by testwait.Until(t)",
				gf.fset.Position(v.pos), v.name, v.note)
		}
	})
}

// deadlineWait is one refused if.
type deadlineWait struct {
	pos  token.Pos
	name string // the deadline variable
	note string // why an escape hatch beside it did not count, if one did not
}

// deadlineWaits are f's ifs that fail a test on a deadline variable (one
// the function assigned from time.Now().Add), but for those with an escape
// hatch that gives a reason.
func deadlineWaits(fset *token.FileSet, f *ast.File) []deadlineWait {
	tn := timeImports(f)
	if tn.none() {
		return nil
	}
	h := escapeHatches(fset, f)
	// fromNow: time.Now().Add(…).
	fromNow := func(e ast.Expr) bool {
		c, ok := ast.Unparen(e).(*ast.CallExpr)
		if !ok {
			return false
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Add" && tn.call(sel.X, "Now")
	}
	// passed is the deadline variable that cond compares with now
	// (time.Now().After(d), d.Before(time.Now()), time.Until(d),
	// time.Since(d)), or "".
	passed := func(cond ast.Expr, deadlines map[string]bool) string {
		name := ""
		deadline := func(e ast.Expr) bool {
			id, ok := ast.Unparen(e).(*ast.Ident)
			if ok && deadlines[id.Name] {
				name = id.Name
			}
			return ok && deadlines[id.Name]
		}
		ast.Inspect(cond, func(m ast.Node) bool {
			c, ok := m.(*ast.CallExpr)
			if !ok || name != "" {
				return name == ""
			}
			if len(c.Args) == 1 && (tn.call(c, "Until") || tn.call(c, "Since")) {
				deadline(c.Args[0])
			}
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && len(c.Args) == 1 && (sel.Sel.Name == "After" || sel.Sel.Name == "Before") {
				if tn.call(sel.X, "Now") {
					deadline(c.Args[0])
				} else if tn.call(c.Args[0], "Now") {
					deadline(sel.X)
				}
			}
			return name == ""
		})
		return name
	}
	var out []deadlineWait
	refuse := func(n ast.Node, name string) {
		if ok, note := h.excuse(fset.Position(n.Pos()).Line); !ok {
			out = append(out, deadlineWait{pos: n.Pos(), name: name, note: note})
		}
	}
	var check func(body *ast.BlockStmt)
	check = func(body *ast.BlockStmt) {
		// The function's deadlines first (a block is seen before the
		// assignments in it), not its closures': those have their own.
		deadlines := map[string]bool{}
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, rhs := range n.Rhs {
						if id, ok := n.Lhs[i].(*ast.Ident); ok && fromNow(rhs) {
							deadlines[id.Name] = true
						}
					}
				}
			case *ast.ValueSpec:
				if len(n.Names) == len(n.Values) {
					for i, v := range n.Values {
						if fromNow(v) {
							deadlines[n.Names[i].Name] = true
						}
					}
				}
			}
			return true
		})
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				check(n.Body)
				return false
			case *ast.IfStmt:
				if name := passed(n.Cond, deadlines); name != "" && failsTest(n.Body) {
					refuse(n, name)
				}
			case *ast.BlockStmt:
				// for time.Now().Before(deadline) { … return on success … }
				// t.Fatal(…): the same wait, failing after the loop.
				for i, st := range n.List[:max(len(n.List)-1, 0)] {
					if loop, ok := st.(*ast.ForStmt); ok && loop.Cond != nil {
						if name := passed(loop.Cond, deadlines); name != "" && failsNow(n.List[i+1]) {
							refuse(loop, name)
						}
					}
				}
			}
			return true
		})
	}
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
			check(fn.Body)
		}
	}
	slices.SortFunc(out, func(a, b deadlineWait) int { return int(a.pos - b.pos) })
	return out
}

// failsNow reports whether st is itself a call that fails the test
// (t.Fatal(…)), not a statement with one somewhere inside.
func failsNow(st ast.Stmt) bool {
	es, ok := st.(*ast.ExprStmt)
	if !ok {
		return false
	}
	c, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && failCalls[sel.Sel.Name]
}

// TestDeadlineRuleSeesAViolation: the rule above finds the pattern it
// exists to refuse, in each of its forms and under any import name, lets a
// must-not-happen loop and testwait.Until through, and honours an escape
// hatch only with a reason, so a change to it cannot make it pass
// vacuously.
func TestDeadlineRuleSeesAViolation(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // the refused deadlines' names, in order
	}{{
		name: "forms",
		src: `package x_test
import ("testing"; "time")
const bound = 10 * time.Second
func a(t *testing.T, ok func() bool) {
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) { t.Fatal("late") }
	}
	for d := time.Now().Add(time.Second); !ok(); {
		if d.Before(time.Now()) { t.Errorf("late") }
	}
	var end = time.Now().Add(time.Minute)
	if !ok() && time.Until(end) <= 0 { t.FailNow() }
	go func() {
		by := time.Now().Add(time.Second)
		if time.Now().After(by) { t.Error("late") }
	}()
	stop := time.Now().Add(time.Second)
	for time.Now().Before(stop) {
		if ok() { return }
	}
	t.Fatalf("late")
}
`,
		want: []string{"deadline", "d", "end", "by", "stop"},
	}, {
		name: "allowed",
		src: `package x_test
import ("context"; "testing"; "time")
func a(t *testing.T, ok, bad func() bool, until context.Context) {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		if bad() { t.Fatal("must not happen") }
	}
	for !ok() {
		if until.Err() != nil { t.Fatal("late, at the test's deadline") }
	}
	ends := time.Now().Add(time.Second) // an item's end, not a wait
	if ends.IsZero() { t.Log("never") }
	at := time.Now().Add(time.Second)
	_ = at
	before := time.Now().Add(-time.Second) // a lower bound on a time read, not a wait
	if got := time.Now(); got.Before(before) || ends.Before(got) { t.Fatal("out of range") }
	for now := time.Now(); now.Before(ends); now = now.Add(time.Millisecond) {}
	t.Log("a loop without a failure after it")
}
func b(t *testing.T, deadline time.Time) {
	if time.Now().After(deadline) { t.Fatal("deadline is b's parameter, not its own") }
}
`,
	}, {
		name: "alias",
		src: `package x_test
import ("testing"; clock "time")
func a(t *testing.T) {
	d := clock.Now().Add(clock.Second)
	if clock.Now().After(d) { t.Fatal("late") }
}
`,
		want: []string{"d"},
	}, {
		name: "dot",
		src: `package x_test
import ("testing"; . "time")
func a(t *testing.T) {
	d := Now().Add(Second)
	if Now().After(d) { t.Fatal("late") }
}
`,
		want: []string{"d"},
	}, {
		name: "hatch",
		src: `package x_test
import ("testing"; "time")
func a(t *testing.T) {
	d := time.Now().Add(time.Second)
	if time.Now().After(d) { t.Fatal("x") } //testwait:ok the deadline is what is tested
	//testwait:ok the deadline is what is tested
	if time.Now().After(d) { t.Fatal("x") }
	if time.Now().After(d) { t.Fatal("x") } //testwait:ok
	if time.Now().After(d) { t.Fatal("x") } //testwait:okay, no
}
`,
		want: []string{"d", "d"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fset, f := parseSource(t, tc.src)
			var got []string
			for _, v := range deadlineWaits(fset, f) {
				got = append(got, v.name)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("refused %q, want %q", got, tc.want)
			}
		})
	}
}
