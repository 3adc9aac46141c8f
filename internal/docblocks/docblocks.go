// Package docblocks holds the fenced blocks of README.md and docs/*.md to
// what a reader is promised: a block of commands either runs as written in
// a named test or says why it cannot, in an HTML comment on the line just
// above its fence (GitHub shows neither):
//
//	<!-- runs in TestItemsQuickStartRunsAsWritten -->
//	<!-- not run: needs a Docker engine with compose -->
//
// The marker is also the anchor by which the test takes its block (For):
// the test reads the page, never a copy, so an edited block is what runs.
// The package's own test holds every page and every named test to this.
package docblocks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Block is one fenced block of a page.
type Block struct {
	Page string // from the repository's root, e.g. docs/items.md
	Line int    // the opening fence's, from 1
	Lang string // the info string's first word: sh, yaml, text…
	Text string // between the fences, each line with its newline

	// Test is the test a "runs in" marker names; Reason a "not run"
	// marker's why; Bad a comment above the fence that is neither.
	Test, Reason, Bad string
}

// Commands are the languages of blocks a reader pastes into a shell.
var Commands = []string{"sh", "bash", "shell", "console"}

// Checked are the other languages whose blocks need a marker: a yaml
// block is a configuration a reader copies, checkable by loading it.
var Checked = []string{"yaml"}

// NeedsMarker reports whether b must say where it runs or why not.
func (b Block) NeedsMarker() bool {
	return slices.Contains(Commands, b.Lang) || slices.Contains(Checked, b.Lang)
}

var (
	runsIn = regexp.MustCompile(`^<!-- runs in (Test[A-Za-z0-9_]+) -->$`)
	notRun = regexp.MustCompile(`^<!-- not run: (\S.*\S) -->$`)
)

// Parse finds page's fenced blocks (fences of three backquotes at the
// start of a line) and the marker on the line above each.
func Parse(page, text string) []Block {
	lines := strings.Split(text, "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		b := Block{Page: page, Line: i + 1}
		if f := strings.Fields(info); len(f) > 0 {
			b.Lang = f[0]
		}
		if i > 0 {
			above := strings.TrimSpace(lines[i-1])
			if m := runsIn.FindStringSubmatch(above); m != nil {
				b.Test = m[1]
			} else if m := notRun.FindStringSubmatch(above); m != nil {
				b.Reason = m[1]
			} else if strings.HasPrefix(above, "<!--") {
				b.Bad = above
			}
		}
		var body strings.Builder
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body.WriteString(lines[i] + "\n")
		}
		b.Text = body.String()
		out = append(out, b)
	}
	return out
}

// Pages are README.md and docs/*.md, from the repository's root.
func Pages(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	pages := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages, nil
}

// Root is the repository's root: the nearest directory up from the
// working directory (a test's package) that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("docblocks: no go.mod above the working directory")
		}
		dir = parent
	}
}

// For is the block of page (from the repository's root) marked
// `<!-- runs in Name -->`, Name the running test's (its top-level name,
// in a subtest too). t fails unless exactly one block is so marked.
func For(t testing.TB, page string) string {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	var found []Block
	for _, b := range Parse(page, string(text)) {
		if b.Test == name {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d blocks marked <!-- runs in %s -->, want 1", page, len(found), name)
	}
	return found[0].Text
}
