package servertest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// ReplyLoser is a TCP hop between a request/reply client (Redis) and its
// server that can lose replies: the request reaches the server and runs,
// and the connection is cut just before its reply would reach the client —
// the fault that makes a client retry a command that already happened.
// It assumes one request in flight per connection, as go-redis does for
// everything but pipelines.
type ReplyLoser struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	match []byte // requests containing it lose their reply
	left  int    // how many more replies to lose
	lost  atomic.Int64
}

// NewReplyLoser starts a hop to target on a free loopback port and stops it
// in t.Cleanup.
func NewReplyLoser(t testing.TB, target string) *ReplyLoser {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &ReplyLoser{target: target, ln: ln}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

// Addr is the address clients dial instead of the target.
func (p *ReplyLoser) Addr() string { return p.ln.Addr().String() }

// Lose makes the next n requests that contain match lose their replies.
func (p *ReplyLoser) Lose(match []byte, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.left = bytes.Clone(match), n
}

// Lost is how many replies have been lost so far.
func (p *ReplyLoser) Lost() int64 { return p.lost.Load() }

// take reports whether the request in b should lose its reply, counting it.
func (p *ReplyLoser) take(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left <= 0 || !bytes.Contains(b, p.match) {
		return false
	}
	p.left--
	return true
}

func (p *ReplyLoser) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		var doomed atomic.Bool // the reply now on its way is to be lost
		closeBoth := func() { _ = c.Close(); _ = s.Close() }
		p.wg.Add(2)
		go func() { // client -> server
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if p.take(buf[:n]) {
						doomed.Store(true)
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server -> client
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 {
					if doomed.Load() {
						p.lost.Add(1)
						return // the command ran; its answer never arrives
					}
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}
