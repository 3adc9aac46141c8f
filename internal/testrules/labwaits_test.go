package testrules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabWaitsAreNamed: a fault cell bounds a wait on its own context only
// through internal/lab/waits.go, whose helpers say what the bound means
// (until: must happen, bounded by the cell's deadline; mustNotWithin: must
// not happen within d; forNote: feeds a note). A scenario that wrote
// context.WithTimeout(x.ctx, 10*time.Second) around a must-happen event
// would fail every time the machine is busy, whatever the constant's name.
func TestLabWaitsAreNamed(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "internal", "lab")
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") || filepath.Base(path) == "waits.go" {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, pos := range boundsOnRunContext(f) {
			t.Errorf("%s: a wait bounded on the cell's context outside waits.go; use x.until() for an event that must happen, x.mustNotWithin(d) for one that must not, x.forNote(d) for a note",
				fset.Position(pos))
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files in %s, want the lab package", checked, dir)
	}
}

// boundsOnRunContext are f's calls context.WithTimeout(v.ctx, …) and
// context.WithDeadline(v.ctx, …): a bound on a run's (a cell's) context.
func boundsOnRunContext(f *ast.File) []token.Pos {
	var out []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		fn, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (fn.Sel.Name != "WithTimeout" && fn.Sel.Name != "WithDeadline") {
			return true
		}
		if pkg, ok := fn.X.(*ast.Ident); !ok || pkg.Name != "context" {
			return true
		}
		if arg, ok := call.Args[0].(*ast.SelectorExpr); ok && arg.Sel.Name == "ctx" {
			out = append(out, call.Pos())
		}
		return true
	})
	return out
}

// TestLabWaitsRuleSeesAViolation: the rule above finds the pattern it
// exists to refuse, so a change to it cannot make it pass vacuously.
func TestLabWaitsRuleSeesAViolation(t *testing.T) {
	src := `package lab
func f(x *run) { ctx, cancel := context.WithTimeout(x.ctx, 10*time.Second); _ = ctx; cancel() }
func g(x *run) { ctx, cancel := context.WithDeadline(x.ctx, at); _ = ctx; cancel() }
func ok(ctx context.Context) { c, cancel := context.WithTimeout(ctx, time.Minute); _ = c; cancel() }
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(boundsOnRunContext(f)); got != 2 {
		t.Fatalf("got %d bounds on a run's context, want 2", got)
	}
}
