package servers

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// clockshift.go: a server whose wall clock a test can step. Go ignores
// libfaketime (it reads the clock through the vDSO), and libfaketime
// hangs Debian's redis-server at start; clockshift/clockshift.c, built here
// with gcc and preloaded into the server, adds an offset read from a file
// to CLOCK_REALTIME, gettimeofday and time. Writing the file steps the
// running server's clock either way, as an NTP step, a VM moved to another
// host or a failover to a machine whose clock is off would.

//go:embed clockshift/clockshift.c
var clockshiftSource []byte

// ClockOffsetEnv names the offset file for the preloaded library.
const ClockOffsetEnv = "SECKILL_CLOCK_OFFSET_FILE"

// ErrNoCompiler: gcc, which builds the preloaded library, is missing.
var ErrNoCompiler = errors.New("servers: gcc not installed")

// ShiftedClock is one steppable wall clock, shared by every server started
// with its Env (a Redis restarted with it keeps its offset).
type ShiftedClock struct {
	lib, file string

	mu     sync.Mutex
	offset time.Duration
}

// NewShiftedClock builds the library into dir and makes an offset file
// there, at offset 0.
func NewShiftedClock(dir string) (*ShiftedClock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	src := filepath.Join(dir, "clockshift.c")
	c := &ShiftedClock{lib: filepath.Join(dir, "clockshift.so"), file: filepath.Join(dir, "clock.offset")}
	if err := os.WriteFile(src, clockshiftSource, 0o644); err != nil {
		return nil, err
	}
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-o", c.lib, src).CombinedOutput()
	if errors.Is(err, exec.ErrNotFound) {
		return nil, fmt.Errorf("%w: %v", ErrNoCompiler, err)
	}
	if err != nil {
		return nil, fmt.Errorf("build the clock library: %w: %s", err, out)
	}
	// The file's size never changes after this: the server maps it, and a
	// mapped file that shrank would fault the server on its next read.
	if err := os.WriteFile(c.file, make([]byte, 8), 0o644); err != nil {
		return nil, err
	}
	return c, nil
}

// Env is what a server's environment needs to run on this clock; nil for a
// nil clock (the machine's).
func (c *ShiftedClock) Env() []string {
	if c == nil {
		return nil
	}
	return []string{"LD_PRELOAD=" + c.lib, ClockOffsetEnv + "=" + c.file}
}

// Set puts the clock at offset from the machine's; servers see it at their
// next reading.
func (c *ShiftedClock) Set(offset time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set(offset)
}

// Step moves the clock by d (back when negative) from where it is.
func (c *ShiftedClock) Step(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set(c.offset + d)
}

func (c *ShiftedClock) set(offset time.Duration) error {
	f, err := os.OpenFile(c.file, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], uint64(offset.Nanoseconds()))
	// In place, one aligned 8-byte write: the server reads either the old
	// offset or the new, never a truncated file.
	_, err = f.WriteAt(b[:], 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		c.offset = offset
	}
	return err
}

// Offset is where Set or Step last put the clock.
func (c *ShiftedClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}
