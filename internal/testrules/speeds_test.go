package testrules

import (
	"go/ast"
	"go/printer"
	"go/token"
	"strings"
	"testing"
)

// timeUnits are the time package's duration constants a number in a test
// is written with.
var timeUnits = map[string]bool{
	"Nanosecond": true, "Microsecond": true, "Millisecond": true,
	"Second": true, "Minute": true, "Hour": true,
}

// TestNoSpeedAssertions: no test fails because something took longer than
// a number: `if took := time.Since(start); took > 5*time.Second {
// t.Fatal(…) }` fails on a busy machine whatever the code does. Speed
// goals live in benchmarks. A test that must tell a behaviour from its
// broken twin by time compares with the event the broken one would wait
// for, by its name (the TTL, the session timeout, raised in the test so
// the margin is wide); a time that is only a goal is noted (t.Logf, SLOW
// when over). The rule refuses an if whose condition has time.Since(…), or
// a variable of the function assigned from it, above (> or >=) a constant
// built of literals and time's units alone, and whose body fails the test;
// "//testwait:ok <reason>" on the if's line or the line above lets one
// through. Every _test.go in the module is checked.
func TestNoSpeedAssertions(t *testing.T) {
	moduleFiles(t, true, nil, func(gf goFile) {
		for _, v := range speedAssertions(gf.fset, gf.f) {
			t.Errorf("%s: a test that fails when something took over %s%s; compare with the event a broken behaviour would wait for, named (a TTL, a session timeout), or note the time (t.Logf, SLOW when over)",
				gf.fset.Position(v.pos), v.bound, v.note)
		}
	})
}

// speedAssertion is one refused if.
type speedAssertion struct {
	pos   token.Pos
	bound string // the constant, as written
	note  string // why an escape hatch beside it did not count, if one did not
}

// speedAssertions are f's ifs that fail a test when a time.Since is above a
// constant duration, but for those with an escape hatch that gives a
// reason.
func speedAssertions(fset *token.FileSet, f *ast.File) []speedAssertion {
	tn := timeImports(f)
	if tn.none() {
		return nil
	}
	timeName := tn.is
	isSince := func(e ast.Expr) bool { return tn.call(e, "Since") }
	// constant: literals and time's units, combined by arithmetic and
	// time.Duration conversions; any other name (a ttl, a bound) is not.
	var constant func(e ast.Expr) bool
	constant = func(e ast.Expr) bool {
		switch e := ast.Unparen(e).(type) {
		case *ast.BasicLit:
			return e.Kind == token.INT || e.Kind == token.FLOAT
		case *ast.UnaryExpr:
			return (e.Op == token.SUB || e.Op == token.ADD) && constant(e.X)
		case *ast.BinaryExpr:
			switch e.Op {
			case token.ADD, token.SUB, token.MUL, token.QUO:
				return constant(e.X) && constant(e.Y)
			}
			return false
		case *ast.CallExpr:
			return len(e.Args) == 1 && timeName(e.Fun, func(s string) bool { return s == "Duration" }) && constant(e.Args[0])
		default:
			return timeName(e, func(s string) bool { return timeUnits[s] })
		}
	}
	h := escapeHatches(fset, f)

	var out []speedAssertion
	// check looks at the ifs of one function body; since are the names
	// its statements (and its ifs' inits) assign from time.Since.
	var check func(body *ast.BlockStmt)
	check = func(body *ast.BlockStmt) {
		since := map[string]bool{}
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				check(n.Body) // a function of its own, with its own names
				return false
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, rhs := range n.Rhs {
						if id, ok := n.Lhs[i].(*ast.Ident); ok && isSince(rhs) {
							since[id.Name] = true
						}
					}
				}
			case *ast.IfStmt:
				if n.Init != nil {
					ast.Inspect(n.Init, func(m ast.Node) bool {
						if as, ok := m.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
							for i, rhs := range as.Rhs {
								if id, ok := as.Lhs[i].(*ast.Ident); ok && isSince(rhs) {
									since[id.Name] = true
								}
							}
						}
						return true
					})
				}
				elapsed := func(e ast.Expr) bool {
					if id, ok := ast.Unparen(e).(*ast.Ident); ok {
						return since[id.Name]
					}
					return isSince(e)
				}
				var bound ast.Expr
				ast.Inspect(n.Cond, func(m ast.Node) bool {
					b, ok := m.(*ast.BinaryExpr)
					if !ok || bound != nil {
						return bound == nil
					}
					switch {
					case (b.Op == token.GTR || b.Op == token.GEQ) && elapsed(b.X) && constant(b.Y):
						bound = b.Y
					case (b.Op == token.LSS || b.Op == token.LEQ) && elapsed(b.Y) && constant(b.X):
						bound = b.X
					}
					return bound == nil
				})
				if bound == nil || !failsTest(n.Body) {
					return true
				}
				if ok, note := h.excuse(fset.Position(n.Pos()).Line); !ok {
					out = append(out, speedAssertion{pos: n.Pos(), bound: exprString(fset, bound), note: note})
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
	return out
}

// exprString is e as written in the source.
func exprString(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	if err := printer.Fprint(&b, fset, e); err != nil {
		return "a constant"
	}
	return b.String()
}

// TestSpeedRuleSeesAViolation: the rule above finds the pattern it exists
// to refuse, in each of its forms and under any import name, lets a
// comparison with a named event's duration, a lower bound and a note
// through, and honours an escape hatch only with a reason, so a change to
// it cannot make it pass vacuously.
func TestSpeedRuleSeesAViolation(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // the refused bounds, in order
	}{{
		name: "forms",
		src: `package x_test
import ("testing"; "time")
func a(t *testing.T, start time.Time) {
	if took := time.Since(start); took > 5*time.Second { t.Fatalf("slow") }
	if time.Since(start) >= 1500*time.Millisecond { t.Errorf("slow") }
	d := time.Since(start)
	if d > time.Second { t.Fatal("slow") }
	if ok := true; ok && (2*time.Second < d) { t.Error("slow") }
	if d > time.Duration(3)*time.Second+100*time.Millisecond { t.FailNow() }
	go func() {
		if e := time.Since(start); e > time.Minute { t.Error("slow") }
	}()
}
`,
		want: []string{"5 * time.Second", "1500 * time.Millisecond", "time.Second", "2 * time.Second", "time.Duration(3)*time.Second + 100*time.Millisecond", "time.Minute"},
	}, {
		name: "allowed",
		src: `package x_test
import ("testing"; "time")
const ttl = 30 * time.Second
func a(t *testing.T, start time.Time, d time.Duration) {
	if took := time.Since(start); took >= ttl { t.Fatal("waited for the TTL") }
	if took := time.Since(start); took >= ttl/2 { t.Fatal("waited for the TTL") }
	if took := time.Since(start); took < 10*time.Millisecond { t.Fatal("too early") }
	if took := time.Since(start); took > 5*time.Second { t.Logf("SLOW") }
	if d > 5*time.Second { t.Fatal("not from time.Since") }
	if time.Until(start) > time.Second { t.Fatal("not time.Since") }
}
func b(t *testing.T, start time.Time) {
	if d > time.Second { t.Fatal("d is b's own") }
	took := time.Since(start)
	go func(took time.Duration) {}(took)
}
`,
	}, {
		name: "alias",
		src: `package x_test
import ("testing"; clock "time")
func a(t *testing.T, start clock.Time) {
	if clock.Since(start) > 2*clock.Second { t.Fatal("slow") }
}
`,
		want: []string{"2 * clock.Second"},
	}, {
		name: "dot",
		src: `package x_test
import ("testing"; . "time")
func a(t *testing.T, start Time) {
	if Since(start) > 2*Second { t.Fatal("slow") }
}
`,
		want: []string{"2 * Second"},
	}, {
		name: "hatch",
		src: `package x_test
import ("testing"; "time")
func a(t *testing.T, start time.Time) {
	if time.Since(start) > time.Second { t.Fatal("x") } //testwait:ok the bound is what is tested
	//testwait:ok the bound is what is tested
	if time.Since(start) > time.Second { t.Fatal("x") }
	if time.Since(start) > 2*time.Second { t.Fatal("x") } //testwait:ok
	//testwait:ok
	if time.Since(start) > 3*time.Second { t.Fatal("x") }
	if time.Since(start) > 4*time.Second { t.Fatal("x") } //testwait:okay, no
}
`,
		want: []string{"2 * time.Second", "3 * time.Second", "4 * time.Second"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fset, f := parseSource(t, tc.src)
			var got []string
			for _, v := range speedAssertions(fset, f) {
				got = append(got, v.bound)
			}
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Fatalf("refused %q, want %q", got, tc.want)
			}
		})
	}
}
