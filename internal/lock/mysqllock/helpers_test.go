package mysqllock

import (
	"database/sql"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"seckill/internal/lock"
	"seckill/internal/lock/cohort"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// server is a real MariaDB for one test, with an admin connection pool
// that plays the operator (KILL, PROCESSLIST, IS_USED_LOCK).
type server struct {
	proc  *servers.Process
	dsn   string
	admin *sql.DB
}

func newServer(t testing.TB) *server {
	t.Helper()
	p := servertest.MariaDB(t)
	admin, err := sql.Open("mysql", servers.MariaDBDSN(p.Addr())+"?interpolateParams=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return &server{proc: p, dsn: servers.MariaDBDSN(p.Addr()), admin: admin}
}

// dsnVia is the DSN through a proxy at addr.
func dsnVia(addr string) string { return servers.MariaDBDSN(addr) }

var backends = []string{BackendGetLock, BackendRow}

// newLocker opens a Locker of backend on dsn and closes it when the test
// ends.
func newLocker(t testing.TB, backend, dsn string, cfg Config) *Locker {
	t.Helper()
	cfg.DSN = dsn
	ctx := testwait.Until(t)
	open := New
	if backend == BackendRow {
		open = NewRow
	}
	l, err := open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// sessionOf is the server connection id holding a lease's lock.
func sessionOf(t *testing.T, l lock.Lease) uint64 {
	t.Helper()
	h, ok := cohort.HoldOf(l)
	if !ok {
		t.Fatalf("%T is not a cohort lease", l)
	}
	return h.(*hold).s.id
}

func (s *server) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := s.admin.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (s *server) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.admin.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// waiters counts sessions waiting at the server for key's lock: running
// GET_LOCK or the locking read for its name. PROCESSLIST is live
// (INNODB_TRX is a cache refreshed at most every 100ms).
func (s *server) waiters(t *testing.T, backend, key string) int {
	t.Helper()
	stmt := "GET_LOCK('" + LockName(key) + "'"
	if backend == BackendRow {
		stmt = "WHERE name = '" + LockName(key) + "' FOR UPDATE"
	}
	return s.count(t, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND INSTR(INFO, ?) > 0`, stmt)
}

// queued counts the sessions other than the admin's whose wait for key's
// lock is enqueued at the server: an InnoDB transaction in LOCK WAIT on
// the row (mysql-row), or a session in GET_LOCK's "User lock" state
// (mysql). waiters sees a statement as soon as it runs, before its lock
// request is queued: a lock released in that gap goes to whoever asks
// next, so an order a test expects needs this one.
func (s *server) queued(t *testing.T, backend, key string) int {
	t.Helper()
	if backend == BackendRow {
		return s.count(t, `SELECT COUNT(*) FROM information_schema.INNODB_TRX
			WHERE trx_state = 'LOCK WAIT' AND INSTR(trx_query, ?) > 0`, "WHERE name = '"+LockName(key)+"' FOR UPDATE")
	}
	return s.count(t, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND STATE = 'User lock' AND INSTR(INFO, ?) > 0`, "GET_LOCK('"+LockName(key)+"'")
}

// free reports whether key's lock is free at the server (nobody holds it).
func (s *server) free(t *testing.T, backend, key string) bool {
	t.Helper()
	name := LockName(key)
	if backend == BackendGetLock {
		return s.count(t, "SELECT IS_FREE_LOCK(?)", name) == 1
	}
	tx, err := s.admin.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var got []byte
	err = tx.QueryRowContext(t.Context(), "SELECT name FROM "+rowTable+" WHERE name = ? FOR UPDATE NOWAIT", name).Scan(&got)
	return err == nil
}

// eventually polls cond, which must come to hold, with a growing backoff
// until the test's deadline. It is only for server-side state with no event
// to wait for (a session queued in GET_LOCK, a row-lock wait).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	until := testwait.Until(t)
	backoff := 2 * time.Millisecond
	for !cond() {
		if until.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// proxy is a TCP hop to the server that a test can freeze: bytes stop
// flowing both ways but every socket stays open, as for a paused or
// partitioned process. The server then sees an idle session, not a closed
// one.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	frozen bool
	thaw   chan struct{}
	conns  []net.Conn
	closed bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, thaw: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// gate blocks while frozen; it reports false once the proxy is closed.
func (p *proxy) gate() bool {
	p.mu.Lock()
	frozen, thaw, closed := p.frozen, p.thaw, p.closed
	p.mu.Unlock()
	if closed {
		return false
	}
	if frozen {
		<-thaw
		return false // only close thaws: the session is lost anyway
	}
	return true
}

func (p *proxy) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.thaw)
		for _, c := range p.conns {
			_ = c.Close()
		}
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *proxy) accept() {
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
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c) })
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			} else if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}
