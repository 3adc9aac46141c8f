package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// upgrade.go: replicas of two releases in one cluster. A replica may run
// another stockd binary than the cluster's (the previous release, built
// from the commit release/previous names), and be replaced by another
// binary while the others sell: a rolling upgrade, one replica at a time.

// PreviousFile is where the repository names the release this build runs
// beside (CHANGELOG.md's "Runs beside"): "<release> <commit>", '#' lines
// are comments. `make release` writes it.
const PreviousFile = "release/previous"

// Release is one recorded release: its name and the commit it was made from.
type Release struct {
	Name, Commit string
}

// PreviousRelease reads PreviousFile from the module's root.
func PreviousRelease(ctx context.Context) (Release, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return Release{}, err
	}
	f, err := os.Open(filepath.Join(root, PreviousFile))
	if err != nil {
		return Release{}, fmt.Errorf("%w: %v", ErrBuild, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, commit, ok := strings.Cut(line, " ")
		if !ok || name == "" || strings.TrimSpace(commit) == "" {
			return Release{}, fmt.Errorf("%w: %s: %q is not \"<release> <commit>\"", ErrBuild, PreviousFile, line)
		}
		return Release{Name: name, Commit: strings.TrimSpace(commit)}, nil
	}
	if err := sc.Err(); err != nil {
		return Release{}, fmt.Errorf("%w: %s: %v", ErrBuild, PreviousFile, err)
	}
	return Release{}, fmt.Errorf("%w: %s names no release", ErrBuild, PreviousFile)
}

// BuildRelease builds ./cmd/stockd as it was at commit (with LabTags,
// from `git archive` of the repository this module is in) into outDir
// (Build's default when empty), and returns the binary's path. The binary
// is named after the commit, so a release is built once per machine.
func BuildRelease(ctx context.Context, commit, outDir string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	full, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("%w: commit %s is not in this repository: %v", ErrBuild, commit, err)
	}
	sha := strings.TrimSpace(string(full))
	if outDir == "" {
		outDir = defaultCacheDir()
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("build release %s: %w", commit, err)
	}
	bin := filepath.Join(outDir, "stockd-release-"+sha[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	src, err := os.MkdirTemp("", "seckill-release-")
	if err != nil {
		return "", fmt.Errorf("build release %s: %w", commit, err)
	}
	defer os.RemoveAll(src)
	// git archive | tar -x, without a shell: the commit's tracked files only.
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", sha)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		return "", fmt.Errorf("build release %s: %w", commit, err)
	}
	var aerr strings.Builder
	archive.Stderr = &aerr
	if err := archive.Start(); err != nil {
		return "", fmt.Errorf("%w: git archive %s: %v", ErrBuild, commit, err)
	}
	out, terr := untar.CombinedOutput()
	if werr := archive.Wait(); werr != nil || terr != nil {
		return "", fmt.Errorf("%w: git archive %s | tar -x: %v %v\n%s%s", ErrBuild, commit, werr, terr, aerr.String(), out)
	}
	if err := goBuild(ctx, src, "./cmd/stockd", bin); err != nil {
		return "", fmt.Errorf("release %s: %w", commit, err)
	}
	return bin, nil
}

// Stockd is the binary replica i runs (or will run when next started).
func (c *Cluster) Stockd(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stockdOf(i)
}

// stockdOf is Stockd with c.mu held.
func (c *Cluster) stockdOf(i int) string {
	if p := c.binaries[i]; p != "" {
		return p
	}
	return c.cfg.Stockd
}

// UseStockd makes replica i run path from its next start on ("" is the
// cluster's own binary again). The running process is left alone:
// ReplaceReplica, SetBackend or RestartReplicas start the new one.
func (c *Cluster) UseStockd(i int, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.binaries == nil {
		c.binaries = make(map[int]string)
	}
	c.binaries[i] = path
}

// ReplaceReplica stops replica i (SIGTERM: it drains and frees its lock)
// and starts it again running path, on the same address, backend and
// settings, while the others go on serving: one step of a rolling
// upgrade. It returns once the new process is ready (/readyz); nginx
// sends it buyers again on its own (its failed attempts against the
// stopped replica are passive and short).
func (c *Cluster) ReplaceReplica(ctx context.Context, i int, path string) error {
	c.UseStockd(i, path)
	c.mu.Lock()
	old := c.replicas[i]
	c.mu.Unlock()
	if old != nil {
		if err := old.Stop(10 * time.Second); err != nil {
			return fmt.Errorf("localcluster: stop %s: %w", ReplicaName(i), err)
		}
	}
	p, err := c.startReplica(ctx, i, "/readyz")
	c.mu.Lock()
	c.replicas[i] = p
	c.mu.Unlock()
	return err
}

// OwnStockd is the cluster's own stockd binary (Config.Stockd, or this
// module's build): what a replica runs unless UseStockd says otherwise.
func (c *Cluster) OwnStockd() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Stockd
}
