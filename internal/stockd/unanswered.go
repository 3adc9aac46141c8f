package stockd

import (
	"context"
	"errors"

	"seckill/internal/stock"
)

// unanswered reports whether a start-up check's err means only that its
// Redis did not answer (yet): unreachable, or silent past the check's own
// bound (cfg.Redis.Timeout) while the process itself (ctx) runs on. Such a
// Redis is no reason to refuse the start, as one that answered wrongly
// is: it may come up after us, or be slow this second on a loaded
// machine, and /readyz reads it once it answers. Without the second case
// a Redis slow to answer INFO at start (measured: a loaded CI machine)
// ended the process, as if it had answered with an evicting policy.
func unanswered(ctx context.Context, err error) bool {
	return errors.Is(err, stock.ErrUnavailable) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil)
}
