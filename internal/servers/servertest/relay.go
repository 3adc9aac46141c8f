package servertest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay is a TCP hop whose downstream (server to client) can be held and
// then cut: while held, what the server sends stays in the relay; a cut
// closes every connection and drops it. Between a Redis primary and its
// replica it makes the replica lag at will — the asynchronous replication
// window a failover loses — without pausing either process (a paused
// replica would still find the stream in its socket buffer on resuming).
type Relay struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	open  chan struct{} // closed while not held
	cut   bool
	conns []net.Conn
}

// NewRelay starts a relay to target on a free loopback port and stops it
// in t.Cleanup.
func NewRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{target: target, ln: ln, open: make(chan struct{})}
	close(r.open)
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(func() { r.Cut(); r.wg.Wait() })
	return r
}

// Addr is the relay's address, to give the client instead of target.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Hold stops passing on what the server sends; the client sees nothing
// more until Release, or ever if Cut comes first.
func (r *Relay) Hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.open:
		r.open = make(chan struct{})
	default: // already held
	}
}

// Release passes on what was held, and everything after it.
func (r *Relay) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.open:
	default:
		close(r.open)
	}
}

// Cut closes the relay and every connection, dropping whatever is held.
func (r *Relay) Cut() {
	r.mu.Lock()
	if !r.cut {
		r.cut = true
		_ = r.ln.Close()
		for _, c := range r.conns {
			_ = c.Close()
		}
		select {
		case <-r.open:
		default:
			close(r.open) // wakes the held copiers, which see cut and drop
		}
	}
	r.mu.Unlock()
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		r.mu.Lock()
		if r.cut {
			r.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		r.conns = append(r.conns, c, s)
		r.mu.Unlock()
		r.wg.Add(2)
		go func() { defer r.wg.Done(); _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() { defer r.wg.Done(); r.down(s, c); _ = c.Close() }()
	}
}

// down copies server to client, waiting at the gate before each write.
func (r *Relay) down(s, c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			r.mu.Lock()
			open := r.open
			r.mu.Unlock()
			<-open
			r.mu.Lock()
			cut := r.cut
			r.mu.Unlock()
			if cut {
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
