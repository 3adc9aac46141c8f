package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// labPackages are the packages only the lab may link: backends that
// oversell on purpose.
var labPackages = []string{
	"seckill/internal/lock/nolock",
	"seckill/internal/lock/locallock",
	"seckill/internal/lock/flawedlock",
}

// A plain go build of stockd — the product, what the Dockerfile ships —
// links none of the lab: not its packages, not the failpoint registry, and
// it refuses the lab's backends and failpoints even with lab.unsafe set.
// A lab build (-tags lab) has them all, or the lab could not run.
func TestProductBuildHasNoLab(t *testing.T) {
	deps := func(tags string) string {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %q: %v\n%s", tags, err, out)
		}
		return string(out)
	}
	product, lab := deps(""), deps("lab")
	for _, build := range []string{product, lab} {
		if strings.Contains(build, "seckill/internal/lab") {
			t.Errorf("stockd links a package of the lab's tools (internal/lab/...):\n%s", build)
		}
	}
	for _, p := range labPackages {
		if strings.Contains(product, p+"\n") {
			t.Errorf("the product build links %s", p)
		}
		if !strings.Contains(lab, p+"\n") {
			t.Errorf("the lab build does not link %s", p)
		}
	}

	bin := filepath.Join(t.TempDir(), "stockd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	syms, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	for _, sym := range []string{"flawedlock.", "nolock.", "locallock.", "failpoint.EnableFunc", "failpoint.crash"} {
		if bytes.Contains(syms, []byte(sym)) {
			t.Errorf("the product binary has a symbol with %q", sym)
		}
	}

	for _, tc := range []struct{ name, env, want string }{
		{"lab backend", "STOCKD_LOCK_BACKEND=none", `config: lock.backend: "none" is lab-only and this stockd is a product build`},
		{"flawed backend", "STOCKD_LOCK_BACKEND=setnx", `config: lock.backend: "setnx" is lab-only and this stockd is a product build`},
		{"unfenced", "STOCKD_STOCK_FENCING=false", "config: stock.fencing: false is lab-only and this stockd is a product build"},
		{"failpoint", "SECKILL_FAILPOINTS=stock/falseSoldOut=1*error", "config: SECKILL_FAILPOINTS: failpoints are lab-only and this stockd is a product build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bin)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "STOCKD_ADMIN_TOKEN=" + testAdminToken, "STOCKD_LAB_UNSAFE=true", tc.env}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("got %v, want exit status 2; stderr:\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr does not contain %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}
