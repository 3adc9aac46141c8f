package orders

import (
	"errors"
	"testing"
)

// A server that flushes its log at every commit is durable; one set to
// flush once a second is not, and says what to set.
func TestCheckDurable(t *testing.T) {
	e := newEnv(t)
	if err := CheckDurable(t.Context(), e.db); err != nil {
		t.Fatalf("the default server: got %v, want durable", err)
	}
	if _, err := e.db.ExecContext(t.Context(), "SET GLOBAL innodb_flush_log_at_trx_commit = 2"); err != nil {
		t.Fatal(err)
	}
	if err := CheckDurable(t.Context(), e.db); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("flush once a second: got %v, want ErrNotDurable", err)
	}
}
