package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seckill verdict prints compose-test's row for a report: judged when the
// report reads, a FAIL naming the run's stderr when it does not, and a
// usage failure for a condition it cannot read.
func TestVerdictCmd(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "run.json")
	errFile := filepath.Join(dir, "run.err")
	if err := os.WriteFile(report, []byte(`{"sold":297,"errors":4,"rps":99.5,"requests":500,"oversold":0,"replicas":{"stockd-1":297}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(errFile, []byte("seckill run: connection refused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	verdict := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(t.Context(), append([]string{"verdict"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	books := []string{"--stock", "0", "--lucky", "300", "--initial", "300"}
	code, out, _ := verdict(append(books, "--report", report, "--exit", "3", "--want", "sold-out", "--check", "leader moved: ok")...)
	if want := "PASS\t297\t4\t99\tlost=3 (sold, unanswered); sold-out: ok; leader moved: ok\n"; code != 0 || out != want {
		t.Fatalf("verdict = %d %q, want 0 %q", code, out, want)
	}
	code, out, _ = verdict(append(books, "--report", report, "--want", "no-lost")...)
	if code != 0 || !strings.HasPrefix(out, "FAIL\t297\t") || !strings.Contains(out, "no-lost: NO") {
		t.Fatalf("verdict wanting no lost sale = %d %q, want a FAIL row naming no-lost", code, out)
	}
	code, out, _ = verdict(append(books, "--report", filepath.Join(dir, "none.json"), "--err", errFile, "--exit", "1")...)
	if code != 0 || !strings.HasPrefix(out, "FAIL\t-\t-\t-\tseckill rc=1, no report") || !strings.Contains(out, "connection refused") {
		t.Fatalf("verdict without a report = %d %q, want a FAIL row quoting its stderr", code, out)
	}
	code, out, _ = verdict("--report", report, "--stock", "?", "--lucky", "300", "--initial", "300")
	if code != 0 || !strings.HasPrefix(out, "FAIL\t") || !strings.Contains(out, "unreadable") {
		t.Fatalf("verdict with the store unread = %d %q, want a FAIL row", code, out)
	}
	if code, _, errOut := verdict(append(books, "--report", report, "--want", "exactly")...); code != exitFailure || !strings.Contains(errOut, `"exactly"`) {
		t.Fatalf("verdict with an unknown want = %d %q, want exit %d naming it", code, errOut, exitFailure)
	}
}
