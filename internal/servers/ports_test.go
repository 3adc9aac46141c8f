package servers

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Ports are never handed out twice by one binary, past one block too, and
// all lie below the ephemeral range.
func TestFreePortNeverTwice(t *testing.T) {
	seen := map[int]bool{}
	hi := ephemeralLow()
	for range 2*portBlockSize + 10 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		if p < freePortLow || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, freePortLow, hi)
		}
		seen[p] = true
	}
	if n := len(ports.held); n < 3 {
		t.Fatalf("holds %d blocks after %d ports, want 3", n, len(seen))
	}
}

// Another test binary, run while this one holds its blocks, is handed
// ports from other blocks only.
func TestFreePortBlocksAreDisjointAcrossBinaries(t *testing.T) {
	if os.Getenv("SECKILL_PORTS_CHILD") != "" {
		for range 20 {
			p, err := FreePort()
			if err != nil {
				t.Fatal(err)
			}
			os.Stdout.WriteString("port " + strconv.Itoa(p) + "\n")
		}
		return
	}
	if _, err := FreePort(); err != nil { // hold a block at least
		t.Fatal(err)
	}
	ports.mu.Lock()
	mine := map[int]bool{}
	for _, p := range ports.free {
		mine[p] = true
	}
	var held []string
	for _, f := range ports.held {
		held = append(held, f.Name())
	}
	ports.mu.Unlock()
	// Each held block is locked: a second open of its lock file (another
	// open file description, as another binary's) cannot lock it.
	for _, name := range held {
		g, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		g.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			t.Fatalf("lock %s from another open: %v, want EWOULDBLOCK", name, err)
		}
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortBlocksAreDisjointAcrossBinaries$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SECKILL_PORTS_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		s, ok := strings.CutPrefix(sc.Text(), "port ")
		if !ok {
			continue
		}
		p, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if mine[p] {
			t.Fatalf("the other binary was handed %d, in a block this one holds", p)
		}
	}
	if n != 20 {
		t.Fatalf("the other binary printed %d ports, want 20:\n%s", n, out)
	}
}
