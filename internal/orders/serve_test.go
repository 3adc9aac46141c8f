package orders

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"seckill/internal/testwait"
)

// Serve, started while MySQL is down, creates the table once it is up
// and then stores what the stream held meanwhile; it returns nil when its
// context ends.
func TestServeWaitsForMySQL(t *testing.T) {
	e := newEnv(t)
	if err := e.maria.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Redis: e.rdb, DB: e.db, Stream: "seckill:orders", Consumer: "r1", Table: "served",
		ClaimIdle: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, returned := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(returned)
		done <- c.Serve(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-returned
	})
	e.sell(t, "seckill:orders", "sale-a", "a", 10)
	startMaria(t, e)
	eventually(t, func() (bool, string) {
		n := e.count(t, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'served'")
		return n == 1, "the table is not there yet"
	})
	e.drained(t, c, "served", 10)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v, want nil", err)
		}
	case <-testwait.Until(t).Done():
		t.Fatal("Serve still running after its context was cancelled")
	}
}
