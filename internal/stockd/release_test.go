package stockd

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"seckill/internal/stock"
)

// CHANGELOG.md's newest entry is this build: its release, what it runs
// beside, and every format it writes; docs/versions.md shows
// stockd --version as it prints.
func TestChangelogNamesThisBuild(t *testing.T) {
	log := readDoc(t, "../../CHANGELOG.md")
	_, rest, ok := strings.Cut(log, "\n## ")
	if !ok {
		t.Fatal("CHANGELOG.md: no entry (## heading)")
	}
	entry, _, _ := strings.Cut(rest, "\n## ")
	heading, _, _ := strings.Cut(entry, "\n")
	if release, _, _ := strings.Cut(heading, " "); release != Release {
		t.Errorf("CHANGELOG.md's newest entry is %q, want this build's release %s", heading, Release)
	}
	if want := "Runs beside: " + RunsBeside + " and later."; !strings.Contains(entry, want) {
		t.Errorf("CHANGELOG.md's %s entry does not say %q", Release, want)
	}
	var formats []string
	for _, f := range stock.Formats() {
		formats = append(formats, fmt.Sprintf("%s %d", f.Name, f.Writes))
	}
	if want := "Formats: " + strings.Join(formats, ", ") + "."; !strings.Contains(entry, want) {
		t.Errorf("CHANGELOG.md's %s entry does not say %q", Release, want)
	}

	doc := readDoc(t, "../../docs/versions.md")
	shown := regexp.MustCompile(`\(build .*?\); runs`).ReplaceAllString(VersionLine(), "(build …); runs")
	if !strings.Contains(doc, "\n"+shown+"\n") {
		t.Errorf("docs/versions.md does not show stockd --version as it prints:\n%s", shown)
	}
}
