package testrules

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A restricted constructor: one that builds a short bound from a plain
// duration. Tests must not call it: a must-happen wait (an ack, a reply) that
// a test bounds by a short, fixed time fails whenever the machine is busy.
// The type it returns gives tests the two honest choices: the zero value
// (the long default) and the constructor whose name says the event must
// NOT happen within the bound.
type restricted struct {
	pkg     string   // the package's directory, from the module root
	name    string   // the exported function
	allowed []string // directories whose non-test files may call it
	instead string   // what a test uses, for the message
}

var restrictedBounds = []restricted{{
	pkg: "internal/stock/redisstore", name: "AckWithin",
	allowed: []string{"internal/stock/redisstore", "internal/stockd"},
	instead: "the zero redisstore.AckBound (the long default) for an ack that must come, or redisstore.AckMustNotWithin(d) for one that must not",
}}

// TestNoShortBoundOnAMustHappenWait: no test, and no package but the ones
// that wire configuration, builds a bound with a restricted constructor.
// Named constants cannot dodge it: the rule is on the call, not its value.
func TestNoShortBoundOnAMustHappenWait(t *testing.T) {
	moduleFiles(t, false, nil, func(gf goFile) {
		for _, r := range restrictedBounds {
			if !gf.test && slices.Contains(r.allowed, gf.dir) {
				continue
			}
			for _, pos := range references(gf.f, gf.dir, r) {
				t.Errorf("%s: %s.%s builds a short bound from a duration; a test takes %s",
					gf.fset.Position(pos), filepath.Base(r.pkg), r.name, r.instead)
			}
		}
	})
}

// references are the places f names r's function: pkg.Name through any
// import name, or Name alone in r's own package.
func references(f *ast.File, dir string, r restricted) []token.Pos {
	local := ""
	for _, imp := range f.Imports {
		if strings.TrimSuffix(strings.Trim(imp.Path.Value, `"`), "/") != "seckill/"+r.pkg {
			continue
		}
		local = filepath.Base(r.pkg)
		if imp.Name != nil {
			local = imp.Name.Name
		}
	}
	inPkg := dir == r.pkg
	var out []token.Pos
	fields := map[*ast.Ident]bool{} // x.Name's Name: a field or method, not the function
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			fields[n.Sel] = true
			if x, ok := n.X.(*ast.Ident); ok && local != "" && x.Name == local && n.Sel.Name == r.name {
				out = append(out, n.Pos())
			}
		case *ast.Ident:
			if inPkg && !fields[n] && n.Name == r.name {
				out = append(out, n.Pos())
			}
		}
		return true
	})
	return out
}
