package stockd

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"seckill/internal/stock"
)

// The README and docs/ state what the configuration accepts; these tests
// hold them to the validator, so that a rule changed on one side and not the
// other fails here.

const readmeFile = "../../README.md"

// docFiles are the README and every page in docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs/*.md: %v (%d pages)", err, len(pages))
	}
	return append([]string{readmeFile}, pages...)
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// configFile is the configuration reference.
const configFile = "../../docs/config.md"

// probeEnv is a configuration on which every range is checked: a mysql
// lock (mysql.*) and JWT buyers (auth.jwt_leeway).
var probeEnv = []string{
	"STOCKD_REPLICA=r1",
	"STOCKD_ADMIN_TOKEN=" + testAdminToken,
	"STOCKD_LOCK_BACKEND=mysql",
	"STOCKD_MYSQL_DSN=seckill:secret@tcp(mysql:3306)/seckill",
	"STOCKD_AUTH_BUYERS=jwt",
	"STOCKD_AUTH_JWT_SECRET=" + testJWTSecret,
	"STOCKD_AUTH_JWT_ISSUER=shop",
	"STOCKD_AUTH_JWT_AUDIENCE=seckill",
}

var betweenMsg = regexp.MustCompile(`^config: ([a-z_.]+): must be between (\S+) and ([^,\s]+)`)

// validatedRanges finds every range the validator enforces by setting each
// key, one at a time, far below and far above anything sensible: the key
// maps to its "lo..hi" as the docs write it (durations short: 10m, not
// 10m0s).
func validatedRanges(t *testing.T) map[string]string {
	t.Helper()
	base, err := Load("", probeEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(base); err != nil {
		t.Fatalf("the probe's base configuration does not validate: %v", err)
	}
	ranges := map[string]string{}
	for _, k := range keys {
		for _, v := range []string{"1ns", "1000000h", "-2000000000", "2000000000"} {
			c, err := Load("", append(slices.Clone(probeEnv), envName(k.name)+"="+v))
			if err != nil {
				continue // not this key's type
			}
			err = Validate(c)
			if err == nil {
				continue
			}
			for line := range strings.SplitSeq(err.Error(), "\n") {
				m := betweenMsg.FindStringSubmatch(line)
				if m == nil || m[1] != k.name {
					continue
				}
				r := shortBound(m[2]) + ".." + shortBound(m[3])
				if prev, ok := ranges[k.name]; ok && prev != r {
					t.Fatalf("%s: two ranges, %s and %s", k.name, prev, r)
				}
				ranges[k.name] = r
			}
		}
	}
	// A probe that finds (almost) nothing has stopped working, not proved
	// the docs right.
	if len(ranges) < 25 {
		t.Fatalf("found only %d validated ranges: %v", len(ranges), ranges)
	}
	return ranges
}

// shortBound writes a bound as the docs do: an integer as is, a duration
// without its zero minutes and seconds (1h0m0s is 1h).
func shortBound(s string) string {
	if _, err := strconv.Atoi(s); err == nil {
		return s
	}
	if _, err := time.ParseDuration(s); err != nil {
		return s
	}
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// The rule that ties http.write_timeout to the sale's longest answer is
// stated as Validate applies it: lock.wait_timeout + work.delay +
// n × stock.confirm_timeout, n one more with a witness. The README's
// factors are checked at the boundary (equal is refused, 1ms more passes),
// and every other statement of the sum in the docs must carry them too.
func TestDocsWriteTimeoutRule(t *testing.T) {
	rule := regexp.MustCompile("lock\\.wait_timeout \\+ work\\.delay( \\+ (\\d) [×x] stock\\.confirm_timeout \\((\\d) [×x] with stock\\.witness)?")
	var plain, witness int
	for _, f := range append(docFiles(t), shippedFile) {
		text := strings.ReplaceAll(readDoc(t, f), "`", "")
		for _, m := range rule.FindAllStringSubmatch(text, -1) {
			if m[1] == "" {
				t.Errorf("%s: %q leaves out the confirm timeouts Validate adds (+ 2 × stock.confirm_timeout, 3 × with stock.witness)", f, m[0])
				continue
			}
			p, _ := strconv.Atoi(m[2])
			w, _ := strconv.Atoi(m[3])
			if plain == 0 {
				plain, witness = p, w
			} else if p != plain || w != witness {
				t.Errorf("%s: %q: the docs disagree on the factors (%d, %d elsewhere)", f, m[0], plain, witness)
			}
		}
	}
	if plain == 0 {
		t.Fatal("no statement of the http.write_timeout rule found in the docs")
	}
	for _, tc := range []struct {
		witness  string
		confirms int
	}{{"none", plain}, {"etcd", witness}} {
		c, err := Load("", []string{"STOCKD_REPLICA=r1", "STOCKD_ADMIN_TOKEN=" + testAdminToken})
		if err != nil {
			t.Fatal(err)
		}
		c.Stock.Witness = tc.witness
		c.Lock.WaitTimeout = time.Second
		c.Work.Delay = stock.Delay{Max: 500 * time.Millisecond}
		c.Stock.ConfirmTimeout = time.Second
		c.HTTP.WriteTimeout = c.Lock.WaitTimeout + c.Work.Delay.Max + time.Duration(tc.confirms)*c.Stock.ConfirmTimeout
		if err := Validate(c); err == nil || !strings.Contains(err.Error(), "config: lock.wait_timeout: ") {
			t.Errorf("witness %s: write_timeout %s, exactly the documented sum, was not refused: %v", tc.witness, c.HTTP.WriteTimeout, err)
		}
		c.HTTP.WriteTimeout += time.Millisecond
		if err := Validate(c); err != nil {
			t.Errorf("witness %s: write_timeout %s, just above the documented sum, was refused: %v", tc.witness, c.HTTP.WriteTimeout, err)
		}
	}
}

// A compose command that asks for a lab-only setting says LAB_UNSAFE=true
// too: without it every stockd exits 2 and `up --wait` fails.
func TestDocsComposeLabOnlyCommands(t *testing.T) {
	labOnly := regexp.MustCompile(`\b(LOCK_BACKEND=([a-z-]+)|STOCK_FENCING=false)\b`)
	found := 0
	for _, f := range docFiles(t) {
		for i, line := range strings.Split(readDoc(t, f), "\n") {
			if !strings.Contains(line, "docker compose") && !strings.Contains(line, "docker-compose ") {
				continue
			}
			for _, m := range labOnly.FindAllStringSubmatch(line, -1) {
				if m[2] != "" && !slices.Contains(labBackends, m[2]) {
					continue
				}
				found++
				if !strings.Contains(line, "LAB_UNSAFE=true") {
					t.Errorf("%s:%d: %s without LAB_UNSAFE=true (stockd refuses it):\n%s", f, i+1, m[1], line)
				}
			}
		}
	}
	if found == 0 {
		t.Error("no compose command with a lab-only setting found: the docs should show one")
	}
}

// Issue numbers mean nothing to a reader of the docs.
func TestDocsNameNoIssueNumbers(t *testing.T) {
	issue := regexp.MustCompile(`(?i)\bissues? #?\d+|(^|[\s(])#\d+\b`)
	files := docFiles(t)
	// And the Go code's comments and strings, which a reader meets too.
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "../.." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "docs_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for i, line := range strings.Split(readDoc(t, f), "\n") {
			if m := issue.FindString(line); m != "" {
				t.Errorf("%s:%d: names an issue (%q):\n%s", f, i+1, strings.TrimSpace(m), line)
			}
		}
	}
}

// Every relative link in the README and docs/ reaches a file that exists
// and, with a #fragment, a heading of that file: the reference moved into
// docs/ without leaving links behind.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, from := range docFiles(t) {
		text := readDoc(t, from)
		for _, m := range link.FindAllStringSubmatch(stripFences(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := from
			if file != "" {
				path = filepath.Join(filepath.Dir(from), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: %v", from, target, err)
				continue
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(readDoc(t, path)), frag) {
				t.Errorf("%s: link %s: no heading #%s in %s", from, target, frag, path)
			}
		}
	}
}

// stripFences drops fenced code blocks, whose brackets are not links.
func stripFences(text string) string {
	var out []string
	fence := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if !fence {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// anchors are a Markdown file's heading anchors, as GitHub makes them:
// lower case, punctuation dropped, spaces as dashes.
func anchors(text string) []string {
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	var out []string
	for line := range strings.SplitSeq(stripFences(text), "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			out = append(out, strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-"))
		}
	}
	return out
}

// Every package doc says what and why in at most 30 lines; the rest of a
// package's design lives below its package clause, or in docs/.
func TestPackageDocsAreShort(t *testing.T) {
	n := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Doc == nil {
			return nil
		}
		n++
		if lines := len(strings.Split(strings.TrimSpace(f.Doc.Text()), "\n")); len(f.Doc.List) > 30 {
			t.Errorf("%s: the package doc is %d lines (%d of text), want at most 30", path, len(f.Doc.List), lines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 30 {
		t.Fatalf("found %d package docs; the walk missed the tree", n)
	}
}

// README is a map: a reader never scrolls sideways through it. The
// reference (every route's answers, every key) lives in docs/.
func TestReadmeLinesAreShort(t *testing.T) {
	const most = 200
	for i, line := range strings.Split(readDoc(t, readmeFile), "\n") {
		if n := utf8.RuneCountInString(line); n > most {
			t.Errorf("README.md:%d is %d characters, over %d: wrap it, or move it to docs/", i+1, n, most)
		}
	}
}
