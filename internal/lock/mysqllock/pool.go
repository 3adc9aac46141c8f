package mysqllock

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// session is one server connection pinned for a lock: a wait, then the
// hold. Its connection id is what KILL QUERY targets and what the
// keep-alive compares.
type session struct {
	conn   *sql.Conn
	id     uint64
	idle   time.Time // when it was last put back
	reused bool      // taken from the free list: its server side may have died meanwhile
	// tainted: a KILL QUERY aimed at it may still arrive; it is closed,
	// never reused, when given back.
	tainted bool
}

// pool hands out sessions, at most size at once, and keeps released ones
// for reuse. It does not return connections to database/sql's own pool
// (MaxIdleConns is 0): a session is ours from open to close, with its id.
type pool struct {
	db      *sql.DB
	slots   chan struct{}
	maxIdle time.Duration // the server closes a session idle for TTL; reuse well before

	mu     sync.Mutex
	free   []*session
	closed bool
}

func newPool(db *sql.DB, size int, ttl time.Duration) *pool {
	db.SetMaxIdleConns(0)
	return &pool{db: db, slots: make(chan struct{}, size), maxIdle: ttl / 2}
}

// take returns a session, waiting for a free slot within ctx.
func (p *pool) take(ctx context.Context) (*session, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	for len(p.free) > 0 {
		s := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		if time.Since(s.idle) < p.maxIdle {
			p.mu.Unlock()
			s.reused = true
			return s, nil
		}
		_ = s.conn.Close()
	}
	p.mu.Unlock()
	s, err := p.open(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return s, nil
}

// fresh replaces s (which failed on its first statement after reuse: its
// server side was gone) with a new session in the same slot.
func (p *pool) fresh(ctx context.Context, s *session) (*session, error) {
	_ = s.conn.Close()
	n, err := p.open(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return n, nil
}

func (p *pool) open(ctx context.Context) (*session, error) {
	conn, err := p.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var id uint64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &session{conn: conn, id: id}, nil
}

// put gives a clean session (no lock, no open transaction) back.
func (p *pool) put(s *session) {
	if s.tainted {
		p.discard(s)
		return
	}
	s.idle = time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = s.conn.Close()
	} else {
		p.free = append(p.free, s)
		p.mu.Unlock()
	}
	<-p.slots
}

// discard closes s: the server ends the session, freeing whatever it held
// (at once on a clean close; after wait_timeout if the network is gone).
func (p *pool) discard(s *session) {
	_ = s.conn.Close()
	<-p.slots
}

// close closes the free sessions; sessions in use are closed when given
// back.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, s := range free {
		_ = s.conn.Close()
	}
}
