package docblocks_test

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

	"seckill/internal/docblocks"
)

// Every block of commands (and of yaml) in README.md and docs/ runs as
// written in the test its marker names, and that test takes it by the
// marker (docblocks.For with this page), or its marker says why it is not
// run. A block without a language cannot be told from commands: it
// must name one (text for output).
func TestEveryCommandBlockRunsOrSaysWhy(t *testing.T) {
	root, err := docblocks.Root()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := docblocks.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	takes := blocksTaken(t, root)
	var blocks, marked, runs, notRun int
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range docblocks.Parse(page, string(text)) {
			blocks++
			where := page + ":" + strconv.Itoa(b.Line)
			switch {
			case b.Lang == "":
				t.Errorf("%s: a block without a language: say what it is (sh for commands, text for output)", where)
			case b.Bad != "":
				t.Errorf("%s: %q above the block is no marker: want <!-- runs in TestName --> or <!-- not run: why -->", where, b.Bad)
			case b.Test != "":
				runs++
				pagesTaken, ok := takes[b.Test]
				switch {
				case !ok:
					t.Errorf("%s: runs in %s, which is no test in the repository", where, b.Test)
				case !slices.Contains(pagesTaken, page):
					t.Errorf("%s: runs in %s, which never takes it (docblocks.For(t, %q))", where, b.Test, page)
				}
			case b.Reason != "":
				notRun++
			case b.NeedsMarker():
				t.Errorf("%s: a %s block says neither where it runs nor why it cannot: put <!-- runs in TestName --> or <!-- not run: why --> on the line above its fence", where, b.Lang)
			}
			if b.NeedsMarker() {
				marked++
			}
		}
	}
	// A parser that finds (almost) nothing has stopped working, not
	// proved the pages right.
	if blocks < 40 || marked < 20 || runs == 0 {
		t.Fatalf("found %d blocks, %d needing a marker, %d run: the parser missed the pages", blocks, marked, runs)
	}
	t.Logf("%d blocks; %d of commands or configuration; %d run in a test, %d say why not", blocks, marked, runs, notRun)
}

// blocksTaken maps each test function of the module to the pages it
// takes a block of: the string literals it passes to docblocks.For.
func blocksTaken(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == strconv.Quote("seckill/internal/docblocks") {
				local = "docblocks"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Body == nil {
				continue
			}
			pages := out[fn.Name.Name]
			if pages == nil {
				pages = []string{} // a test, taking nothing yet
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if page, ok := forCall(n, local); ok {
					pages = append(pages, page)
				}
				return true
			})
			out[fn.Name.Name] = pages
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// forCall reports the page of a call docblocks.For(t, "page"), local the
// name the file imports the package by ("" when it does not).
func forCall(n ast.Node, local string) (string, bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok || local == "" || len(call.Args) != 2 {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "For" {
		return "", false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != local {
		return "", false
	}
	lit, ok := call.Args[1].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	page, err := strconv.Unquote(lit.Value)
	return page, err == nil
}

// The markers are read as the rule means them: the line just above the
// fence, either form, anything else in a comment there flagged.
func TestMarkersAreRead(t *testing.T) {
	page := strings.Join([]string{
		"Run it:",
		"<!-- runs in TestSomething -->",
		"```sh",
		"echo hi",
		"```",
		"<!-- not run: needs a Docker engine -->",
		"```bash",
		"docker compose up",
		"```",
		"<!-- runs TestTypo -->",
		"```sh",
		"```",
		"<!-- runs in TestFar -->",
		"",
		"```yaml",
		"a: 1",
		"```",
		"```",
		"output",
		"```",
		"```text",
		"```",
	}, "\n")
	got := docblocks.Parse("p.md", page)
	want := []docblocks.Block{
		{Page: "p.md", Line: 3, Lang: "sh", Text: "echo hi\n", Test: "TestSomething"},
		{Page: "p.md", Line: 7, Lang: "bash", Text: "docker compose up\n", Reason: "needs a Docker engine"},
		{Page: "p.md", Line: 11, Lang: "sh", Bad: "<!-- runs TestTypo -->"},
		{Page: "p.md", Line: 15, Lang: "yaml", Text: "a: 1\n"}, // a blank line parts a marker from its block
		{Page: "p.md", Line: 18, Text: "output\n"},
		{Page: "p.md", Line: 21, Lang: "text"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	for i, needs := range []bool{true, true, true, true, false, false} {
		if got[i].NeedsMarker() != needs {
			t.Errorf("block at line %d (%q): NeedsMarker %v, want %v", got[i].Line, got[i].Lang, !needs, needs)
		}
	}
}
