package redisstore

import (
	"context"
	"fmt"
)

// Peek returns the stock without the lock, and whether idem (the buyer's
// idempotency record, "" for none) exists. It writes nothing unless it
// finds a rewound sale, which it halts as any guarded read does, or an
// ended window, which it latches (window.lua). Outside
// the sale's window (Keys.Window) it returns a *WindowError, with record
// set all the same.
func (s *Store) Peek(ctx context.Context, idem string) (left int64, record bool, err error) {
	err = s.guarded(ctx, func(gkeys []string, gargs []any, _ string) error {
		keys := append([]string{s.keys.Stock}, gkeys...)
		if idem != "" {
			keys = append(keys, idem)
		}
		keys, args := s.windowed(keys, gargs)
		res, err := s.scripts().peek.Run(ctx, s.rdb, keys, args...).Slice()
		if err != nil {
			return WrapRedis(ctx, "peek", err)
		}
		if len(res) != 3 {
			return fmt.Errorf("left: peek: unexpected reply %v", res)
		}
		code, _ := res[0].(int64)
		n, _ := res[1].(int64)
		rec, _ := res[2].(int64)
		record = rec == 1 // set with a closed window too
		if err := s.readRefusal(ctx, "peek", code, n); err != nil {
			return err
		}
		left = n
		return nil
	})
	return left, record, err
}
