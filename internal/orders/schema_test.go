package orders

import (
	"errors"
	"sync"
	"testing"
)

// EnsureSchema is idempotent, safe from several replicas at once, and
// adds or drops UNIQUE (sale, user) to follow the per-user limit.
func TestEnsureSchema(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	unique := func() bool {
		return e.count(t, `SELECT COUNT(*) FROM information_schema.statistics
			WHERE table_schema = DATABASE() AND table_name = 'sales' AND index_name = ?`, uniqueBuyerName) > 0
	}
	for _, want := range []bool{false, false, true, true, false, true} {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = EnsureSchema(ctx, e.db, "sales", want) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("EnsureSchema(unique %v) from 4 replicas: %v", want, err)
		}
		if got := unique(); got != want {
			t.Errorf("after EnsureSchema(unique %v): unique buyer key %v", want, got)
		}
	}

	// A buyer with two rows in one sale cannot get the unique key.
	if err := EnsureSchema(ctx, e.db, "sales", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(ctx, "INSERT INTO sales (id, sale, `user`, token, replica, stock_after, sold_at, entry) VALUES "+
		"('o1', 's', 'U1', 1, 'r', 1, NOW(), '1-0'), ('o2', 's', 'U1', 2, 'r', 0, NOW(), '2-0')"); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSchema(ctx, e.db, "sales", true); !isMySQL(err, errDupEntry) {
		t.Errorf("EnsureSchema(unique) over a buyer's two orders = %v, want MySQL error %d", err, errDupEntry)
	}

	if err := EnsureSchema(ctx, e.db, "sales; DROP TABLE x", false); !errors.Is(err, ErrConfig) {
		t.Errorf("EnsureSchema with a bad table name = %v, want ErrConfig", err)
	}
}
