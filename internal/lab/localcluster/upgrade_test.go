package localcluster

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// release/previous names a release and a full commit id: what the
// upgrade cell builds.
func TestPreviousReleaseIsNamed(t *testing.T) {
	rel, err := PreviousRelease(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(rel.Name) || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(rel.Commit) {
		t.Fatalf("%s: %+v; want a release x.y.z and a 40-hex commit", PreviousFile, rel)
	}
}

// A commit the repository does not hold is refused by name, before any
// build.
func TestBuildReleaseRefusesAnUnknownCommit(t *testing.T) {
	_, err := BuildRelease(t.Context(), strings.Repeat("0", 40), t.TempDir())
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "is not in this repository") {
		t.Fatalf("BuildRelease of an unknown commit: %v; want ErrBuild naming it", err)
	}
}
