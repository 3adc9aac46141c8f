package orders

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"seckill/internal/stock/redisstore"
	"seckill/internal/testwait"
)

// ends reads the ends table: order -> "state payment".
func (e *env) ends(t *testing.T) map[string]string {
	t.Helper()
	rows, err := e.db.QueryContext(t.Context(), "SELECT id, state, COALESCE(payment_id, '') FROM orders_ends")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, state, pid string
		if err := rows.Scan(&id, &state, &pid); err != nil {
			t.Fatal(err)
		}
		out[id] = state + " " + pid
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func end(order, state, pid string) redisstore.End {
	return redisstore.End{Order: order, State: state, PaymentID: pid, At: time.UnixMilli(1_700_000_000_000)}
}

// An end is stored once and never replaced: the same end again is a
// no-op, another end of the order and a payment id of another order are
// conflicts, refused, counted, and the rest of the batch stored.
func TestEndsMoveOnlyForward(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	s, err := NewEnds(e.db, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, []redisstore.End{end("o1", "paid", "p1"), end("o2", "expired", "")}); err != nil {
		t.Fatal(err)
	}
	// o2's copy again (delivered twice), then o1 expired after it was
	// paid, o3 paid by o1's payment, and o4 new, in one batch.
	err = s.Record(ctx, []redisstore.End{end("o2", "expired", ""), end("o1", "expired", ""), end("o3", "paid", "p1"), end("o4", "cancelled", "")})
	if !errors.Is(err, ErrEndConflict) {
		t.Fatalf("conflicting batch: %v; want ErrEndConflict", err)
	}
	want := map[string]string{"o1": "paid p1", "o2": "expired ", "o4": "cancelled "}
	if got := e.ends(t); !mapsEqual(got, want) {
		t.Fatalf("ends in MySQL: %v; want %v", got, want)
	}
	if st := s.Stats(); st != (EndStats{Stored: 3, Conflicts: 2}) {
		t.Fatalf("stats %+v; want 3 stored, 2 conflicts", st)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// source is an EndSource whose reads and removals a test controls.
type source struct {
	mu      sync.Mutex
	ends    []redisstore.End
	failRm  int           // Synced calls to fail
	empty   chan struct{} // closed once every end is removed
	removed int
}

var errRedisDown = errors.New("redis down")

func (s *source) Ended(_ context.Context, n int) ([]redisstore.End, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ends[:min(n, len(s.ends))]), nil
}

func (s *source) Synced(_ context.Context, ends []redisstore.End) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failRm > 0 {
		s.failRm--
		return errRedisDown
	}
	s.ends = s.ends[len(ends):]
	s.removed += len(ends)
	if len(s.ends) == 0 {
		close(s.empty)
	}
	return nil
}

// A syncer copies every end, in batches, removes each only after MySQL
// holds it (a removal that failed copies it again, a no-op), and drops a
// malformed one with a log.
func TestStateSyncerCopiesEveryEnd(t *testing.T) {
	e := newEnv(t)
	s, err := NewEnds(e.db, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &source{failRm: 1, empty: make(chan struct{})}
	want := map[string]string{}
	for i := range syncBatch + 30 {
		id := "o" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		src.ends = append(src.ends, end(id, "cancelled", ""))
		want[id] = "cancelled "
	}
	src.ends = append(src.ends, redisstore.End{Malformed: "hand-written"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = NewStateSyncer(src, s, 10*time.Millisecond).Run(ctx)
	}()
	select {
	case <-src.empty:
	case <-done:
		t.Fatal("syncer stopped")
	case <-testwait.Until(t).Done():
		t.Fatalf("%d ends never left Redis", len(src.ends))
	}
	cancel()
	<-done
	if got := e.ends(t); !mapsEqual(got, want) {
		t.Fatalf("ends in MySQL: %d rows; want %d", len(got), len(want))
	}
	if st := s.Stats(); st.Stored != int64(len(want)) || st.Conflicts != 0 {
		t.Fatalf("stats %+v; want %d stored", st, len(want))
	}
}
