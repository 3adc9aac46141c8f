// Package stockdtest builds the stockd binary for tests that run it as a
// process: exit codes, signals, the public surface of a real replica.
package stockdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"seckill/internal/auth"
	"seckill/internal/failpoint"
)

// AdminToken passes the admin.token rules (a strong secret), made for
// the test binary's run; JWTSecret likewise for auth.jwt_secret.
var (
	AdminToken = auth.NewSecret()
	JWTSecret  = auth.NewSecret()
)

var (
	once sync.Once
	dir  string
	bin  string
	err  error
)

// Binary builds seckill/cmd/stockd once per test process and returns its
// path. It is built as the test is: with the lab (-tags lab) or without,
// so a lab test runs the lab's backends and a product test the product.
func Binary(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, err = os.MkdirTemp("", "stockd-test-")
		if err != nil {
			return
		}
		bin = filepath.Join(dir, "stockd")
		tags := ""
		if failpoint.Compiled {
			tags = "lab"
		}
		out, berr := exec.Command("go", "build", "-tags", tags, "-o", bin, "seckill/cmd/stockd").CombinedOutput()
		if berr != nil {
			err = fmt.Errorf("go build: %v\n%s", berr, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Cleanup removes the binary; call it from TestMain after m.Run.
func Cleanup() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
