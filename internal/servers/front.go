package servers

import (
	"io"
	"net"
	"net/netip"
	"sync"
)

// front.go: a TCP hop in front of a server that cuts off chosen sources:
// a network partition on loopback, where every process shares one host.
// Each side of the partition connects from an address of its own in
// 127.0.0.0/8 (Redis's bind-source-addr; Linux routes all of it to lo),
// and Cut drops the connections of the sources on the far side, now and
// until Heal, while everyone else keeps talking to the server.

// Loopback sources of the sides a Sentinel set can be split along.
const (
	SentinelSource = "127.0.0.2" // the Sentinels' connections
	ReplicaSource  = "127.0.0.3" // the replica's replication link
)

// Front relays connections from its address to a target.
type Front struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    map[netip.Addr]bool
	conns  map[net.Conn]netip.Addr // client side of every open relay
	closed bool
	wg     sync.WaitGroup
}

// StartFront listens on addr (host:port; port 0 picks one) and relays
// every connection to target.
func StartFront(addr, target string) (*Front, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f := &Front{ln: ln, target: target, cut: map[netip.Addr]bool{}, conns: map[net.Conn]netip.Addr{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// Addr is the address clients dial.
func (f *Front) Addr() string { return f.ln.Addr().String() }

// Cut drops every connection from the sources (IP addresses), and each
// new one as soon as it is accepted, until Heal: the server is gone for
// them, there for everyone else.
func (f *Front) Cut(sources ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range sources {
		if a, err := netip.ParseAddr(s); err == nil {
			f.cut[a] = true
		}
	}
	for c, src := range f.conns {
		if f.cut[src] {
			c.Close()
		}
	}
}

// Heal lets every source through again.
func (f *Front) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.cut)
}

// Close stops the front and every relay through it.
func (f *Front) Close() error {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	err := f.ln.Close()
	f.wg.Wait()
	return err
}

func (f *Front) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		src := netip.Addr{}
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			src = ap.Addr().Unmap()
		}
		f.mu.Lock()
		if f.closed || f.cut[src] {
			f.mu.Unlock()
			c.Close()
			continue
		}
		f.conns[c] = src
		f.wg.Add(1)
		f.mu.Unlock()
		go f.relay(c)
	}
}

// relay copies both ways until either side closes, then closes both.
func (f *Front) relay(c net.Conn) {
	defer f.wg.Done()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		c.Close()
	}()
	s, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // ends with an error on a cut: the point
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	// One direction ended: close both, which ends the other.
	c.Close()
	s.Close()
	<-done
}
