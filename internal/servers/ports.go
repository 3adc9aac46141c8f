package servers

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// FreePort returns a free loopback TCP port for a server the harness
// starts. A server the harness restarts (a replica switched to another
// backend, a killed Redis, a cut proxy) binds its port again, so the port
// must stay its own while it is down:
//
//   - It is below the kernel's ephemeral range: a port from that range
//     (what port 0 gives) may meanwhile be the local end of any process's
//     outgoing connection.
//   - It is never handed out twice by one test binary: a cell's new
//     server cannot take the port of a replica that is being restarted.
//   - It comes from a block of ports this test binary holds a lock on
//     (flock, released when the binary exits, -9 included), so the test
//     binaries go test runs side by side (-p) hand out disjoint ports.
//
// Only a process outside the harness can still take one. Falls back to
// port 0 when no block can be had.
func FreePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	for {
		for ports.next < len(ports.free) {
			port := ports.free[ports.next]
			ports.next++
			if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
				l.Close()
				return port, nil
			}
		}
		if !ports.claimBlock() {
			break
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ports is this test binary's share of the port range.
var ports portBlocks

type portBlocks struct {
	mu    sync.Mutex
	held  []*os.File // the blocks' lock files, open (and locked) for the binary's life
	tried map[int]bool
	free  []int // the held blocks' ports, in a random order
	next  int   // free[:next] are handed out (or were taken by another listener)
}

const (
	// freePortLow is the lowest port FreePort hands out: above the common
	// services' ports.
	freePortLow = 10000
	// portBlockSize is how many ports a block holds: more than a test
	// binary usually needs (the fault matrix starts a few hundred
	// servers), so most binaries lock one.
	portBlockSize = 512
)

// claimBlock locks one more block of ports, tried in a random order, and
// adds its ports to free. False when every block is locked or tried.
func (p *portBlocks) claimBlock() bool {
	lo, hi := freePortLow, ephemeralLow()
	n := (hi - lo) / portBlockSize
	dir := filepath.Join(os.TempDir(), "seckill-lab-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return false
	}
	if p.tried == nil {
		p.tried = map[int]bool{}
	}
	for _, b := range rand.Perm(n) {
		if p.tried[b] {
			continue
		}
		p.tried[b] = true
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("block-%d.lock", b)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue // another test binary's
		}
		p.held = append(p.held, f)
		base := lo + b*portBlockSize
		for _, i := range rand.Perm(portBlockSize) {
			p.free = append(p.free, base+i)
		}
		return true
	}
	return false
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), 32768 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= freePortLow+portBlockSize {
		return 32768
	}
	return lo
}
