package electiontest

import (
	"context"
	"testing"
	"time"

	"seckill/internal/election/audit"
	"seckill/internal/testwait"
)

// records reads the group's audit stream; a read that must answer, bounded
// by ctx (testwait.Until).
func (s *suite) records(ctx context.Context, t *testing.T, g *group) []audit.Record {
	t.Helper()
	recs, err := audit.ReadStream(ctx, s.rdb, g.stream)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// awaitRecord waits until id has recorded a run: a leader is only useful
// once its job runs. The stream has no cheap event for one entry, so this
// reads it once per interval, bounded.
func (s *suite) awaitRecord(t *testing.T, g *group, id string) {
	t.Helper()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	until := testwait.Until(t)
	for {
		recs := s.records(until, t, g)
		if n := len(recs); n > 0 && recs[n-1].Replica == id {
			return
		}
		select {
		case <-tick.C:
		case <-until.Done():
			t.Fatalf("%s recorded no audit run", id)
		}
	}
}

// awaitLeaderView waits until c's view of the election names want, e.g.
// after c reconnects.
func awaitLeaderView(t *testing.T, c Candidate, want string) {
	t.Helper()
	until := testwait.Until(t)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		got, err := c.Leader(ctx)
		cancel()
		if err == nil && got.ID == want {
			return
		}
		if until.Err() != nil {
			t.Fatalf("%s sees leader %+v (%v), want %s", c.ID(), got, err, want)
		}
		time.Sleep(Interval) // reconnection has no event visible from here
	}
}

// checkStream asserts what exactly one leader at a time implies for the
// audit stream: terms never go down and each term belongs to one replica —
// so a replica's runs can resume after another's (A, B, A) only under a new,
// higher term of its own, never under the term it was deposed from.
func checkStream(t *testing.T, recs []audit.Record) {
	t.Helper()
	owner := map[uint64]string{}
	for i, r := range recs {
		if r.Term == 0 || r.Replica == "" {
			t.Fatalf("record %d has no term or replica: %+v", i, r)
		}
		if o, ok := owner[r.Term]; ok && o != r.Replica {
			t.Fatalf("term %d recorded by both %s and %s", r.Term, o, r.Replica)
		}
		owner[r.Term] = r.Replica
		if i == 0 {
			continue
		}
		prev := recs[i-1]
		if r.Term < prev.Term {
			t.Fatalf("record %d: term %d after term %d: a deposed leader recorded late", i, r.Term, prev.Term)
		}
	}
}
