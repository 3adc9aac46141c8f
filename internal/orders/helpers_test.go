package orders

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// env is a real Redis and a real MariaDB for one test.
type env struct {
	redis, maria *servers.Process
	rdb          *redis.Client
	db           *sql.DB
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{redis: servertest.Redis(t), maria: servertest.MariaDB(t)}
	e.rdb = redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	t.Cleanup(func() { _ = e.rdb.Close() })
	db, err := sql.Open("mysql", servers.MariaDBDSN(e.maria.Addr())+"?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	e.db = db
	return e
}

// consumer makes the tables and a Consumer on them; cfg's zero fields get
// the test's defaults (stream and table named after the test, a short
// ClaimIdle).
func (e *env) consumer(t testing.TB, cfg Config) *Consumer {
	t.Helper()
	if cfg.Redis == nil {
		cfg.Redis = e.rdb
	}
	if cfg.DB == nil {
		cfg.DB = e.db
	}
	if cfg.Stream == "" {
		cfg.Stream = "seckill:orders"
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "r1"
	}
	if cfg.ClaimIdle == 0 {
		cfg.ClaimIdle = 300 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	if err := EnsureSchema(t.Context(), e.db, cmp(cfg.Table, DefaultTable), cfg.UniqueBuyer); err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// run starts c.Run; the returned stop cancels it and fails the test unless
// Run returns nil (it must return; the wait is bounded by the test's
// deadline). Cleanup stops it too.
func run(t testing.TB, c interface{ Run(context.Context) error }) (stop func()) {
	t.Helper()
	until := testwait.Until(t) // before the cleanup below: cancelled after it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v, want nil", err)
			}
		case <-until.Done():
			t.Errorf("Run still running after its context was cancelled")
		}
	}
	t.Cleanup(stop)
	return stop
}

// order is one ledger entry's fields, as stock's scripts write them.
type order struct {
	id, sale, user, key string
	token               uint64
	replica             string
	stockAfter          int64
	unit                int64 // 0: no unit field (an entry from before units)
	ms                  int64
}

func (o order) values() map[string]any {
	v := map[string]any{
		"id": o.id, "sale": o.sale, "user": o.user, "key": o.key,
		"token": strconv.FormatUint(o.token, 10), "replica": o.replica,
		"stock_after": strconv.FormatInt(o.stockAfter, 10), "time": strconv.FormatInt(o.ms, 10),
	}
	if o.unit > 0 {
		v["unit"] = strconv.FormatInt(o.unit, 10)
	}
	return v
}

// xadd appends one entry with exactly values and returns its id.
func (e *env) xadd(t testing.TB, stream string, values map[string]any) string {
	t.Helper()
	id, err := e.rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: stream, Values: values}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// sell appends n anonymous orders of sale, ids prefix-0.., and returns them.
func (e *env) sell(t testing.TB, stream, sale, prefix string, n int) []order {
	t.Helper()
	out := make([]order, n)
	pipe := e.rdb.Pipeline()
	for i := range out {
		out[i] = order{id: fmt.Sprintf("%s-%d", prefix, i), sale: sale, token: uint64(i + 1),
			replica: "r0", stockAfter: int64(n - i - 1), ms: time.Now().UnixMilli()}
		pipe.XAdd(t.Context(), &redis.XAddArgs{Stream: stream, Values: out[i].values()})
	}
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	return out
}

// count runs a COUNT(*) query.
func (e *env) count(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.db.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// eventually polls cond (a state in another process, which sends no
// event) every 20ms until it holds, which it must: it fails at the test's
// deadline with what cond last said.
func eventually(t testing.TB, cond func() (ok bool, state string)) {
	t.Helper()
	start := time.Now()
	until := testwait.Until(t)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		select {
		case <-until.Done():
			t.Fatalf("after %v: %s", time.Since(start).Round(time.Millisecond), state)
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-poll.C:
		}
	}
}

// drained waits until c's lag is 0 and the table holds want rows.
func (e *env) drained(t testing.TB, c *Consumer, table string, want int64) {
	t.Helper()
	eventually(t, func() (bool, string) {
		lag, err := c.Lag(t.Context())
		rows := e.count(t, "SELECT COUNT(*) FROM `"+table+"`")
		return err == nil && lag == 0 && rows == want,
			fmt.Sprintf("lag %d (err %v), rows %d, want lag 0 and %d rows; stats %+v", lag, err, rows, want, c.Stats())
	})
}
