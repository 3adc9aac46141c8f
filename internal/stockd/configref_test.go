package stockd

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The configuration's two references, configs/stockd.yaml and the table in
// docs/config.md, are generated from Config (names, defaults, meanings from
// the doc tags) and from Validate (ranges and accepted values, found by
// probing it), so neither can disagree with the code. The test fails when a
// file differs from what it would generate; UPDATE_DOCS=1 (make docs)
// writes them.

const (
	refBegin = "<!-- BEGIN config reference: generated from Config by `make docs`; do not edit -->\n"
	refEnd   = "<!-- END config reference -->\n"
)

const k8sConfig = "../../deploy/k8s/base/config/stockd.yaml"

func TestConfigReferencesAreGenerated(t *testing.T) {
	ref := newConfigRef(t)
	doc := readDoc(t, configFile)
	before, rest, ok1 := strings.Cut(doc, refBegin)
	_, after, ok2 := strings.Cut(rest, refEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s: no generated block (%q ... %q)", configFile, refBegin, refEnd)
	}
	files := map[string]string{
		configFile:  before + refBegin + ref.table() + refEnd + after,
		shippedFile: ref.yaml(),
		k8sConfig:   ref.yaml(), // the Kubernetes base's copy (deploy/k8s)
	}
	for path, want := range files {
		if readDoc(t, path) == want {
			continue
		}
		if os.Getenv("UPDATE_DOCS") != "" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", path)
			continue
		}
		t.Errorf("%s is not what Config and Validate generate; run `make docs` and commit it", path)
	}
}

// Every key says what it is for.
func TestEveryKeyHasADoc(t *testing.T) {
	for _, f := range configFields() {
		if f.doc == "" && !f.section {
			t.Errorf("%s: no doc tag", f.name)
		}
		if strings.ContainsAny(f.doc, "`|\n") {
			t.Errorf("%s: doc tag has a backquote, bar or newline (it is a table cell and a YAML comment)", f.name)
		}
	}
}

// configField is a key, or a section (section true), in Config's order.
type configField struct {
	name, def, doc string
	section        bool
	kind           reflect.Kind
}

func configFields() []configField {
	var out []configField
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := f.Tag.Get("mapstructure")
			if name == "-" {
				continue
			}
			if prefix != "" {
				name = prefix + "." + name
			}
			def, isKey := f.Tag.Lookup("default")
			if isKey {
				out = append(out, configField{name: name, def: def, doc: f.Tag.Get("doc"), kind: f.Type.Kind()})
				continue
			}
			out = append(out, configField{name: name, doc: f.Tag.Get("doc"), section: true})
			walk(f.Type, name)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return out
}

type configRef struct {
	fields   []configField
	accepted map[string]string // key -> "100ms..1m" or "a, b, c"
}

func newConfigRef(t *testing.T) *configRef {
	t.Helper()
	r := &configRef{fields: configFields(), accepted: validatedRanges(t)}
	for k, v := range validatedChoices(t) {
		if _, dup := r.accepted[k]; dup {
			t.Fatalf("%s: a range and a list of values", k)
		}
		r.accepted[k] = v
	}
	return r
}

var choicesMsg = regexp.MustCompile(`^config: ([a-z_.]+): unknown [a-z ]+ "zz-bogus" \(want one of ([^)]*)\)`)

// validatedChoices finds every enumeration Validate enforces, by setting
// each key to a value no list holds. lock.backend's lab-only values are
// named apart, so that the lab and product builds generate the same text.
func validatedChoices(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		c, err := Load("", append(slices.Clone(probeEnv), envName(k.name)+"=zz-bogus"))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(fmt.Sprint(Validate(c)), "\n") {
			m := choicesMsg.FindStringSubmatch(line)
			if m == nil || m[1] != k.name {
				continue
			}
			vals := strings.Split(m[2], ", ")
			if k.name == "lock.backend" {
				vals = slices.DeleteFunc(vals, func(v string) bool { return slices.Contains(labBackends, v) })
				out[k.name] = strings.Join(vals, ", ") + "; lab only: " + strings.Join(labBackends, ", ")
				continue
			}
			out[k.name] = strings.Join(vals, ", ")
		}
	}
	if len(out) < 6 {
		t.Fatalf("found only %d enumerations: %v", len(out), out)
	}
	return out
}

// table is docs/config.md's reference: one row per key.
func (r *configRef) table() string {
	var b strings.Builder
	b.WriteString("| key | environment | default | accepted | meaning |\n|---|---|---|---|---|\n")
	for _, f := range r.fields {
		if f.section {
			continue
		}
		def := "none"
		if f.def != "" {
			def = "`" + f.def + "`"
		}
		acc := r.accepted[f.name]
		if acc != "" {
			acc = "`" + strings.ReplaceAll(acc, ", ", "`, `") + "`"
			acc = strings.ReplaceAll(acc, "; lab only: ", "`; lab only: `")
			acc = strings.ReplaceAll(acc, "``", "")
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s |\n", f.name, envName(f.name), def, acc, f.doc)
	}
	return b.String()
}

const yamlHeader = `# stockd configuration, generated from Config (internal/stockd/config.go) by
# ` + "`make docs`" + `: edit the doc tags there, not this file. Every key can be
# overridden from the environment with the STOCKD_ prefix and "." replaced by
# "_" (STOCKD_LOCK_BACKEND=etcd); list values from the environment are
# comma-separated. Unknown keys are refused. A range or a list of values
# opens a comment where Validate enforces one. docs/config.md explains more.
`

// yaml is configs/stockd.yaml: every key at its default, its meaning above it.
func (r *configRef) yaml() string {
	var b strings.Builder
	b.WriteString(yamlHeader)
	for _, f := range r.fields {
		depth := strings.Count(f.name, ".")
		indent := strings.Repeat("  ", depth)
		short := f.name[strings.LastIndex(f.name, ".")+1:]
		if f.section {
			b.WriteString("\n")
			writeComment(&b, indent, f.doc)
			fmt.Fprintf(&b, "%s%s:\n", indent, short)
			continue
		}
		if depth == 0 {
			b.WriteString("\n")
		}
		doc := f.doc
		if acc := r.accepted[f.name]; acc != "" {
			doc = strings.ReplaceAll(acc, ", ", " | ") + ": " + doc
		}
		writeComment(&b, indent, doc)
		fmt.Fprintf(&b, "%s%s: %s\n", indent, short, yamlValue(f))
	}
	return b.String()
}

// writeComment writes text as "# " lines of at most 80 columns.
func writeComment(b *strings.Builder, indent, text string) {
	if text == "" {
		return
	}
	line := indent + "#"
	for w := range strings.FieldsSeq(text) {
		if len(line)+1+len(w) > 80 && line != indent+"#" {
			b.WriteString(line + "\n")
			line = indent + "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}

var plainYAML = regexp.MustCompile(`^[A-Za-z0-9/][A-Za-z0-9_./-]*$`)

func yamlValue(f configField) string {
	if f.kind == reflect.Slice {
		if f.def == "" {
			return "[]"
		}
		return "[" + strings.ReplaceAll(f.def, ",", ", ") + "]"
	}
	if f.kind == reflect.String && !plainYAML.MatchString(f.def) {
		return fmt.Sprintf("%q", f.def)
	}
	return f.def
}
