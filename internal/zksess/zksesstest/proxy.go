// Package zksesstest helps tests put a cuttable TCP hop between a ZooKeeper
// client and a real server, so a test can make a process "crash" or be
// partitioned without closing its session gracefully: the server then
// expires the session after its timeout, exactly as it would for a dead
// process.
package zksesstest

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"seckill/internal/zksess"
)

// Proxy forwards TCP connections from its own loopback address to a target.
// Cut severs every forwarded connection and refuses new ones until Restore.
type Proxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target on a free loopback port and stops it in
// t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: make(map[net.Conn]struct{})}
	p.serve(ln)
	t.Cleanup(p.wg.Wait) // cleanups run last-in first-out: Cut, then Wait
	t.Cleanup(p.Cut)
	return p
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.addr }

// Cut closes the listener and every forwarded connection: clients see a
// reset, and reconnection attempts are refused, until Restore.
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
	go pipe(server, client)
	go pipe(client, server)
}

// Dial opens a zksess.Session to addr (a server or a Proxy) and closes it in
// t.Cleanup.
func Dial(t testing.TB, addr string, sessionTimeout time.Duration) *zksess.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := zksess.Dial(ctx, []string{addr}, sessionTimeout)
	if err != nil {
		t.Fatalf("zksess.Dial(%s): %v", addr, err)
	}
	t.Cleanup(s.Close)
	return s
}
