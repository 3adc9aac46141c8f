package testrules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// goFile is one parsed Go file of the module.
type goFile struct {
	fset *token.FileSet
	f    *ast.File
	dir  string // its package's directory, relative to the module root, slash-separated
	test bool   // a _test.go
}

// moduleFiles parses the module's Go files (its _test.go files alone when
// testsOnly) and hands each to check. Hidden directories, testdata,
// vendor, other modules (deploy/k8s) and the directories in skip (relative
// to the root, slash-separated) are left out. Fewer than 100 files fails
// t: a rule that sees nothing passes vacuously.
func moduleFiles(t *testing.T, testsOnly bool, skip []string, check func(gf goFile)) {
	t.Helper()
	root := moduleRoot(t)
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name := d.Name(); strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || slices.Contains(skip, rel) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		test := strings.HasSuffix(path, "_test.go")
		if !strings.HasSuffix(path, ".go") || (testsOnly && !test) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		check(goFile{fset: fset, f: f, dir: filepath.ToSlash(filepath.Dir(rel)), test: test})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files under %s, want the whole module's", checked, root)
	}
}

// moduleRoot is the directory of seckill's go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module seckill\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of module seckill above the test's directory")
		}
		dir = parent
	}
}

// timeNames are a file's names for package time: its import names, and
// whether it dot-imports it.
type timeNames struct {
	names map[string]bool
	dot   bool
}

func timeImports(f *ast.File) timeNames {
	tn := timeNames{names: map[string]bool{}}
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err != nil || p != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			tn.names["time"] = true
		case imp.Name.Name == ".":
			tn.dot = true
		case imp.Name.Name != "_":
			tn.names[imp.Name.Name] = true
		}
	}
	return tn
}

// none: the file does not import time.
func (tn timeNames) none() bool { return len(tn.names) == 0 && !tn.dot }

// is reports whether e names one of time's identifiers that sel accepts:
// time.X under any import name, or X alone under a dot import.
func (tn timeNames) is(e ast.Expr, sel func(string) bool) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && tn.names[x.Name] && sel(e.Sel.Name)
	case *ast.Ident:
		return tn.dot && sel(e.Name)
	}
	return false
}

// call reports whether e is a call of time's name.
func (tn timeNames) call(e ast.Expr, name string) bool {
	c, ok := ast.Unparen(e).(*ast.CallExpr)
	return ok && tn.is(c.Fun, func(s string) bool { return s == name })
}

// escapeHatch marks the rare construct a rule lets through because the
// bound is itself what is tested: "//testwait:ok <reason>", on the line or
// the line above. The reason is required.
const escapeHatch = "//testwait:ok"

// hatches are a file's escape hatch lines: true with a reason, false
// without.
type hatches map[int]bool

func escapeHatches(fset *token.FileSet, f *ast.File) hatches {
	h := hatches{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			rest, ok := strings.CutPrefix(c.Text, escapeHatch)
			if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
				continue
			}
			h[fset.Position(c.Slash).Line] = strings.TrimSpace(rest) != ""
		}
	}
	return h
}

// excuse says whether a hatch on line or the line above lets the construct
// through; when one without a reason stands there, note says so.
func (h hatches) excuse(line int) (ok bool, note string) {
	for _, l := range []int{line, line - 1} {
		if withReason, found := h[l]; found {
			if withReason {
				return true, ""
			}
			note = " (" + escapeHatch + " needs a reason)"
		}
	}
	return false, note
}

// failCalls are the testing.TB methods that fail a test.
var failCalls = map[string]bool{
	"Fatal": true, "Fatalf": true, "Error": true, "Errorf": true, "Fail": true, "FailNow": true,
}

// failsTest reports whether body calls one of them.
func failsTest(body ast.Node) bool {
	fails := false
	ast.Inspect(body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && failCalls[sel.Sel.Name] {
				fails = true
			}
		}
		return !fails
	})
	return fails
}

// parseSource parses one test's example source.
func parseSource(t *testing.T, src string) (*token.FileSet, *ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x_test.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return fset, f
}
