package localcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// BuildStockd builds ./cmd/stockd of the module containing the working
// directory and returns the binary's path. See Build.
func BuildStockd(ctx context.Context, outDir string) (string, error) {
	return Build(ctx, "./cmd/stockd", outDir)
}

// LabTags are the build tags of every binary the lab builds: the lab's
// backends and failpoints are compiled only with them (a product build of
// stockd refuses LOCK_BACKEND=none and SECKILL_FAILPOINTS).
const LabTags = "lab"

// buildMu serialises builds within one process; across processes the
// rename into place below keeps concurrent builders from seeing a half
// written binary.
var buildMu sync.Mutex

// Build compiles pkg (a path relative to the module root, e.g. "./cmd/seckill")
// with LabTags into outDir and returns the binary's path. The binary is named after a hash
// of every Go source file, go.mod, go.sum and the toolchain settings, so an
// unchanged tree is not rebuilt (and not even linked again): the second
// cluster of a test run starts in milliseconds. An empty outDir means
// os.UserCacheDir()/seckill, or the temp directory when there is no cache
// directory.
func Build(ctx context.Context, pkg, outDir string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()

	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	if outDir == "" {
		outDir = defaultCacheDir()
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	sum, err := treeHash(ctx, root, pkg)
	if err != nil {
		return "", fmt.Errorf("build %s: hash sources: %w", pkg, err)
	}
	bin := filepath.Join(outDir, fmt.Sprintf("%s-%s", filepath.Base(pkg), sum[:16]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := goBuild(ctx, root, pkg, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// goBuild builds pkg of the module in dir with LabTags to bin: into a
// temporary name, renamed into place, so that a concurrent builder (another
// test binary) never runs a half-written binary.
func goBuild(ctx context.Context, dir, pkg, bin string) error {
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", LabTags, "-o", tmp, pkg)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: go build %s in %s: %v\n%s", ErrBuild, pkg, dir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	return nil
}

func defaultCacheDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "seckill")
	}
	return filepath.Join(os.TempDir(), "seckill-cache")
}

// moduleRoot asks the go command where go.mod is, so Build works from any
// package directory (tests run in their own).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("%w: go env GOMOD: %v", ErrBuild, err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("%w: not inside the seckill module (no go.mod)", ErrBuild)
	}
	return filepath.Dir(gomod), nil
}

// treeHash hashes the toolchain settings, the package path and every .go,
// .lua, .tmpl, go.mod and go.sum file under root (the module is small; this
// takes a few milliseconds). Hashing the whole module rather than the
// package's dependency closure is coarser but cannot miss a dependency.
func treeHash(ctx context.Context, root, pkg string) (string, error) {
	h := sha256.New()
	env, err := exec.CommandContext(ctx, "go", "env", "GOVERSION", "GOOS", "GOARCH", "GOFLAGS", "CGO_ENABLED").Output()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%s\n%s\ntags=%s\n", env, pkg, LabTags)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(name, "_test.go"):
			return nil
		case strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".lua"), strings.HasSuffix(name, ".tmpl"),
			strings.HasSuffix(name, ".conf"), name == "go.mod", name == "go.sum":
		default:
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", rel)
		_, err = io.Copy(h, f)
		return err
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
