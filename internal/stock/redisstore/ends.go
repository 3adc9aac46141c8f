package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ends.go: the ends of reservations that MySQL does not hold yet
// (WithDurableStates, Keys.Ended). lifecycle.lua adds each end there in
// the script that decides it, so a replica killed after the script loses
// none; orders.StateSyncer reads a batch (Ended), stores it, and removes
// it (Synced). Any number of replicas may do so at once: storing an end
// twice changes nothing.

// End is one order's end: its state (StatePaid, StateCancelled or
// StateExpired), the payment that paid it, and when, by the reservations'
// clock.
type End struct {
	Order     string
	State     string
	PaymentID string // paid only
	At        time.Time
	// Malformed says why the entry is not an end (a hand-written member):
	// it is logged and removed, never stored.
	Malformed string
	member    string
}

// Ended reads up to n ends MySQL does not hold yet, the oldest first.
func (s *Store) Ended(ctx context.Context, n int) ([]End, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, s.keys.Ended, 0, int64(n)-1).Result()
	if err != nil {
		return nil, WrapRedis(ctx, "ended orders", err)
	}
	out := make([]End, 0, len(zs))
	for _, z := range zs {
		m := fmt.Sprint(z.Member)
		out = append(out, parseEnd(m, int64(z.Score)))
	}
	return out, nil
}

// parseEnd reads lifecycle.lua's member '<order> <state>[ <payment id>]'.
func parseEnd(member string, ms int64) End {
	e := End{member: member, At: time.UnixMilli(ms).UTC()}
	f := strings.Fields(member)
	switch {
	case len(f) == 3 && f[1] == StatePaid:
		e.Order, e.State, e.PaymentID = f[0], f[1], f[2]
	case len(f) == 2 && (f[1] == StateCancelled || f[1] == StateExpired):
		e.Order, e.State = f[0], f[1]
	default:
		e.Malformed = fmt.Sprintf("not '<order> <state>[ <payment id>]': %q", member)
	}
	return e
}

// Synced removes ends MySQL now holds (or that were malformed).
func (s *Store) Synced(ctx context.Context, ends []End) error {
	if len(ends) == 0 {
		return nil
	}
	members := make([]any, len(ends))
	for i, e := range ends {
		members[i] = e.member
	}
	if err := s.rdb.ZRem(ctx, s.keys.Ended, members...).Err(); err != nil {
		return WrapRedis(ctx, "ended orders", err)
	}
	return nil
}

// EndedLag is how many ends MySQL does not hold yet.
func (s *Store) EndedLag(ctx context.Context) (int64, error) {
	n, err := s.rdb.ZCard(ctx, s.keys.Ended).Result()
	if err != nil && err != redis.Nil {
		return 0, WrapRedis(ctx, "ended orders", err)
	}
	return n, nil
}
