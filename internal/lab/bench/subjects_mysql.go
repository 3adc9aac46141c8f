package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/lab/bench/peers"
	"seckill/internal/lock/mysqllock"
)

// The MySQL subjects, in report order: each backend beside the loop a user
// would write without it.
func mysqlSubjects() []Subject {
	return []Subject{
		{Name: "mysql", Kind: KindBackend, Server: "mysql",
			About: "mysqllock: GET_LOCK on a pinned session per hold, InnoDB token row, keep-alive; in-process cohort passes (≤32: a server hand-off costs an fsynced token commit)",
			open:  mysqlBackendOpen(mysqllock.New)},
		{Name: "mysql-getlock", Kind: KindPeer, Server: "mysql",
			About: "raw GET_LOCK(key, 10) / RELEASE_LOCK loop, one pinned *sql.Conn per contender, no cohort (peers.GetLock)",
			open:  mysqlGetLockOpen},
		{Name: "mysql-row", Kind: KindBackend, Server: "mysql",
			About: "mysqllock row: SELECT … FOR UPDATE held in a transaction per hold, token row; in-process cohort passes (≤32)",
			open:  mysqlBackendOpen(mysqllock.NewRow)},
		{Name: "mysql-forupdate", Kind: KindPeer, Server: "mysql",
			About: "raw BEGIN / SELECT … FOR UPDATE / COMMIT per acquisition on database/sql's pool, no cohort (peers.ForUpdate)",
			open:  mysqlForUpdateOpen},
	}
}

func mysqlBackendOpen(open func(context.Context, mysqllock.Config) (*mysqllock.Locker, error)) func(context.Context, Servers, *Counter, *peers.GaveUp) (procSet, error) {
	return func(ctx context.Context, s Servers, _ *Counter, _ *peers.GaveUp) (procSet, error) {
		if s.MySQL == "" {
			return nil, errNoServer("mysql")
		}
		l, err := open(ctx, mysqllock.Config{DSN: s.MySQL, TTL: lockTTL, Logger: quiet()})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return &lockerSet{l: l, closers: closers{l.Close}}, nil
	}
}

// peerDB is one peer "process": database/sql with client-side
// interpolation, as the backends use, so a statement is one round trip on
// both sides of the comparison, and enough idle connections that the pool
// does not redial per transaction.
func peerDB(s Servers) (*sql.DB, error) {
	if s.MySQL == "" {
		return nil, errNoServer("mysql")
	}
	cfg, err := mysql.ParseDSN(s.MySQL)
	if err != nil {
		return nil, err
	}
	cfg.InterpolateParams = true
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(128)
	return db, nil
}

func mysqlGetLockOpen(_ context.Context, s Servers, _ *Counter, gaveUp *peers.GaveUp) (procSet, error) {
	db, err := peerDB(s)
	if err != nil {
		return nil, err
	}
	set := &funcSet{closers: closers{db.Close}}
	var mu sync.Mutex
	set.mk = func(ctx context.Context, key string) (contender, error) {
		g, err := peers.NewGetLock(ctx, db, key, gaveUp)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		mu.Lock()
		set.closers = append(set.closers, g.Close)
		mu.Unlock()
		return g, nil
	}
	return set, nil
}

// forUpdateTable holds the peer's lock rows, apart from mysqllock's.
const forUpdateTable = "bench_forupdate_locks"

func mysqlForUpdateOpen(ctx context.Context, s Servers, _ *Counter, gaveUp *peers.GaveUp) (procSet, error) {
	db, err := peerDB(s)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+forUpdateTable+
		" (name VARBINARY(255) NOT NULL PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return &funcSet{
		mk: func(ctx context.Context, key string) (contender, error) {
			if _, err := db.ExecContext(ctx, "INSERT IGNORE INTO "+forUpdateTable+" (name) VALUES (?)", key); err != nil {
				return nil, err
			}
			return peers.NewForUpdate(db, forUpdateTable, key, gaveUp), nil
		},
		closers: closers{db.Close},
	}, nil
}

// mysqlQueries is the server's statement count (Questions): go-sql-driver
// has no hook, so round trips are counted server-side, as for ZooKeeper.
func mysqlQueries(ctx context.Context, dsn string) (int64, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var name string
	var n int64
	err = db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n)
	return n, err
}

// mysqlVersion is the server's VERSION().
func mysqlVersion(ctx context.Context, dsn string) (string, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
	return v, err
}
