// Package zksesstest helps tests put a cuttable TCP hop between a ZooKeeper
// client and a real server, so a test can make a process "crash" or be
// partitioned without closing its session gracefully: the server then
// expires the session after its timeout, exactly as it would for a dead
// process.
package zksesstest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"seckill/internal/servers"
	"seckill/internal/zksess"
)

// Proxy forwards TCP connections from its own loopback address to a target.
// Cut severs every forwarded connection and refuses new ones until Restore.
type Proxy struct {
	target string
	addr   string
	framed bool // forwards ZooKeeper frames one by one (NewZooKeeperProxy)

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	lose  *replyRule // armed by LoseReply
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target on a free loopback port and stops it in
// t.Cleanup. It forwards bytes without looking at them, so it serves any
// protocol.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return newProxy(t, target, false)
}

// NewZooKeeperProxy is NewProxy for a ZooKeeper server: it forwards whole
// protocol frames, which lets a test lose one reply (LoseReply).
func NewZooKeeperProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return newProxy(t, target, true)
}

func newProxy(t testing.TB, target string, framed bool) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), framed: framed, conns: make(map[net.Conn]struct{})}
	p.serve(ln)
	t.Cleanup(p.wg.Wait) // cleanups run last-in first-out: Cut, then Wait
	t.Cleanup(p.Cut)
	return p
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.addr }

// Cut closes the listener and every forwarded connection: clients see a
// reset, and reconnection attempts are refused, until Restore. Cut is
// idempotent.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Restore listens again on the same address after Cut.
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy restore on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Cut
			}
			p.forward(c)
		}
	}()
}

func (p *Proxy) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		_, _ = io.Copy(dst, src)
		// Either side ending ends the pair, like a dead process or a reset.
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}
	p.wg.Add(2)
	if !p.framed {
		go pipe(server, client)
		go pipe(client, server)
		return
	}
	pair := new(int) // identity of this client-server pair, for LoseReply
	go func() {
		defer p.wg.Done()
		p.copyFrames(server, client, func(f []byte) bool { p.sawRequest(pair, f); return true })
		p.closePair(client, server)
	}()
	go func() {
		defer p.wg.Done()
		p.copyFrames(client, server, func(f []byte) bool { return p.passReply(pair, f) })
		p.closePair(client, server)
	}()
}

func (p *Proxy) closePair(a, b net.Conn) {
	_ = a.Close()
	_ = b.Close()
	p.mu.Lock()
	delete(p.conns, a)
	delete(p.conns, b)
	p.mu.Unlock()
}

// maxFrame bounds a ZooKeeper frame (the server's default jute.maxbuffer
// is about 1 MiB).
const maxFrame = 16 << 20

// copyFrames forwards length-prefixed frames from src to dst while pass
// allows; the first frame of each direction is the session handshake and
// is passed without asking.
func (p *Proxy) copyFrames(dst, src net.Conn, pass func(frame []byte) bool) {
	r := bufio.NewReader(src)
	for first := true; ; first = false {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrame {
			return
		}
		frame := make([]byte, 4+n)
		copy(frame, hdr[:])
		if _, err := io.ReadFull(r, frame[4:]); err != nil {
			return
		}
		if !first && !pass(frame[4:]) {
			return
		}
		if _, err := dst.Write(frame); err != nil {
			return
		}
	}
}

// replyRule is an armed LoseReply.
type replyRule struct {
	opcode int32
	substr string
	pair   *int  // the connection pair the matching request went through
	xid    int32 // its xid
	done   chan struct{}
}

// LoseReply arms the proxy (made by NewZooKeeperProxy) to lose the reply to
// the next request with the given opcode (1 is create) whose body contains
// pathSubstr: the request reaches the server and is executed, but instead
// of forwarding its reply the proxy cuts every connection and refuses new
// ones until Restore. The returned channel is closed when that happened.
func (p *Proxy) LoseReply(t testing.TB, opcode int32, pathSubstr string) <-chan struct{} {
	t.Helper()
	if !p.framed {
		t.Fatal("LoseReply needs a proxy from NewZooKeeperProxy")
	}
	rule := &replyRule{opcode: opcode, substr: pathSubstr, done: make(chan struct{})}
	p.mu.Lock()
	p.lose = rule
	p.mu.Unlock()
	return rule.done
}

// sawRequest notes the xid of the request the armed rule waits for.
// A request frame is xid, opcode, then the body.
func (p *Proxy) sawRequest(pair *int, f []byte) {
	if len(f) < 8 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.lose
	if r == nil || r.pair != nil || int32(binary.BigEndian.Uint32(f[4:8])) != r.opcode ||
		!bytes.Contains(f[8:], []byte(r.substr)) {
		return
	}
	r.pair, r.xid = pair, int32(binary.BigEndian.Uint32(f[:4]))
}

// passReply reports whether a reply frame (xid, zxid, error, body) may be
// forwarded; the armed rule's reply is dropped and the link cut instead.
func (p *Proxy) passReply(pair *int, f []byte) bool {
	if len(f) < 4 {
		return true
	}
	p.mu.Lock()
	r := p.lose
	hit := r != nil && r.pair == pair && int32(binary.BigEndian.Uint32(f[:4])) == r.xid
	if hit {
		p.lose = nil
	}
	p.mu.Unlock()
	if !hit {
		return true
	}
	p.Cut()
	close(r.done)
	return false
}

// Dial opens a zksess.Session to addr (a server or a Proxy) and closes it in
// t.Cleanup.
func Dial(t testing.TB, addr string, sessionTimeout time.Duration) *zksess.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := zksess.Dial(ctx, []string{addr}, sessionTimeout)
	if err != nil {
		// What the server says of itself tells a stalled or unready server
		// from one that never answered.
		srvr, serr := servers.FourLetter(context.Background(), addr, "srvr")
		t.Fatalf("zksess.Dial(%s): %v; the server's srvr: %q (%v)", addr, err, srvr, serr)
	}
	t.Cleanup(s.Close)
	return s
}
