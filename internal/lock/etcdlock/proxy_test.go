package etcdlock_test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a cuttable TCP hop between one etcd client and the server, to
// inject the faults a lock must survive: a link cut (requests and replies
// lost, reconnections refused) and lost replies (requests still applied).
type proxy struct {
	target string
	addr   string
	drop   atomic.Bool  // server-to-client bytes are discarded
	hole   atomic.Bool  // bytes both ways are discarded, connections stay up
	lag    atomic.Int64 // client-to-server bytes wait this long (ns), in order

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.wg.Wait) // LIFO: cut, then wait for the pipes
	t.Cleanup(p.cut)
	return p
}

// dropReplies lets requests through but loses every reply, until restore.
func (p *proxy) dropReplies() { p.drop.Store(true) }

// blackhole loses every byte both ways, on the connections open now and on
// new ones, without closing any (a link gone silent: a cable pulled, a
// container's network disconnected), until restore.
func (p *proxy) blackhole() { p.hole.Store(true) }

// cut closes every connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.resetLocked()
}

// restore ends any fault: connections made during it are reset (their
// streams lost bytes), and the proxy listens again.
func (p *proxy) restore(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	p.drop.Store(false)
	p.hole.Store(false)
	p.resetLocked()
	listening := p.ln != nil
	p.mu.Unlock()
	if listening {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy restore on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *proxy) resetLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by cut
			}
			p.forward(c)
		}
	}()
}

func (p *proxy) forward(client net.Conn) {
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
	pipe := func(dst, src net.Conn, reply bool) {
		defer p.wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if d := time.Duration(p.lag.Load()); d > 0 && !reply {
				// Whatever the client sends meanwhile arrives with this
				// chunk, in one read on the server's side.
				time.Sleep(d)
			}
			if n > 0 && !(reply && p.drop.Load()) && !p.hole.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}
	p.wg.Add(2)
	go pipe(server, client, false)
	go pipe(client, server, true)
}
