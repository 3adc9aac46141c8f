package localcluster

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The second build of an unchanged tree must reuse the first binary rather
// than link again: clusters in one test run share it.
func TestBuildIsCachedBySourceHash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	first, err := Build(t.Context(), "./cmd/seckill", dir)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Build(t.Context(), "./cmd/seckill", dir)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	if second != first || !st2.ModTime().Equal(st1.ModTime()) {
		t.Fatalf("second build gave %s (%v), want the cached %s (%v)", second, st2.ModTime(), first, st1.ModTime())
	}
	out, _ := exec.CommandContext(t.Context(), first, "help").Output()
	if !strings.Contains(string(out), "seckill run") {
		t.Fatalf("built binary's help = %q, want the seckill usage", out)
	}
}

func TestBuildFailsOnBadPackage(t *testing.T) {
	_, err := Build(t.Context(), "./cmd/does-not-exist", t.TempDir())
	if !errors.Is(err, ErrBuild) {
		t.Fatalf("got %v, want ErrBuild", err)
	}
}
