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

// A table made before units were numbered gets the unit column and the
// sale's unique keys at start, from several replicas at once, keeping its
// rows; one that already holds a unit sold twice refuses the key loudly.
func TestEnsureSchemaMigrates(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	const old = "CREATE TABLE legacy (" + `
		id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		sale VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		` + "`user`" + ` VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
		idem_key VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
		token BIGINT UNSIGNED NOT NULL, replica VARCHAR(64) NOT NULL, stock_after BIGINT NOT NULL,
		sold_at DATETIME(3) NOT NULL, entry VARCHAR(40) NOT NULL,
		PRIMARY KEY (id), KEY sale_user (sale, ` + "`user`" + `)) ENGINE=InnoDB`
	if _, err := e.db.ExecContext(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(ctx, "INSERT INTO legacy (id, sale, `user`, token, replica, stock_after, sold_at, entry) VALUES "+
		"('o1', 's', 'U1', 1, 'r', 1, NOW(), '1-0')"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = EnsureSchema(ctx, e.db, "legacy", false) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("EnsureSchema over the old table from 3 replicas: %v", err)
	}
	for _, idx := range []string{uniqueUnitName, uniqueKeyName} {
		if e.count(t, `SELECT COUNT(*) FROM information_schema.statistics
			WHERE table_schema = DATABASE() AND table_name = 'legacy' AND index_name = ?`, idx) == 0 {
			t.Errorf("no %s after the migration", idx)
		}
	}
	if e.count(t, "SELECT COUNT(*) FROM legacy WHERE id = 'o1' AND unit IS NULL AND format = 1") != 1 {
		t.Error("the old row did not survive, got a unit, or is not format 1")
	}
	// 0.9.0 runs on beside the migrated table: its inserts, which name no
	// format, are rows of format 1.
	if _, err := e.db.ExecContext(ctx, "INSERT INTO legacy (id, sale, `user`, idem_key, token, replica, stock_after, unit, sold_at, entry) VALUES "+
		"('o0.9', 's', NULL, NULL, 1, 'r', 0, 1, NOW(), '0-9')"); err != nil {
		t.Fatalf("an insert as 0.9.0 makes it: %v", err)
	}
	if e.count(t, "SELECT COUNT(*) FROM legacy WHERE id = 'o0.9' AND format = 1") != 1 {
		t.Error("0.9.0's row is not format 1")
	}
	// A unit sold twice already in the table: the key cannot be added.
	if _, err := e.db.ExecContext(ctx, "ALTER TABLE legacy DROP KEY "+uniqueUnitName); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(ctx, "INSERT INTO legacy (id, sale, `user`, token, replica, stock_after, unit, sold_at, entry) VALUES "+
		"('o2', 's', 'U2', 1, 'r', 0, 7, NOW(), '2-0'), ('o3', 's', 'U3', 2, 'r', 0, 7, NOW(), '3-0')"); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSchema(ctx, e.db, "legacy", false); !isMySQL(err, errDupEntry) {
		t.Errorf("EnsureSchema over a unit sold twice = %v, want MySQL error %d", err, errDupEntry)
	}
}
