package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"seckill/internal/backoff"
)

// confirm.go: the service's side of exactly-once (see the package doc).

// Retry pacing of confirm: quick at first (a dropped reply on a healthy
// link), then backing off so an outage is not hammered.
const (
	confirmMinBackoff = 5 * time.Millisecond
	confirmMaxBackoff = 200 * time.Millisecond
)

// UnconfirmedError is a sale whose write was sent but never answered. It
// wraps ErrUnconfirmed and the last transport error; Attempt names the
// receipt that says afterwards whether it sold (Store.Receipt).
type UnconfirmedError struct {
	Attempt string
	Err     error
}

func (e *UnconfirmedError) Error() string {
	return fmt.Sprintf("%v: attempt %s: %v", ErrUnconfirmed, e.Attempt, e.Err)
}

// Unwrap exposes ErrUnconfirmed and the cause.
func (e *UnconfirmedError) Unwrap() []error { return []error{ErrUnconfirmed, e.Err} }

// confirm runs op, which must be idempotent by the identity it carries,
// until it returns anything but an ErrUnavailable (a definite answer: done,
// or refused; a newer format is one too, however it is classed) or the
// confirm deadline passes; it then returns the last
// error. The deadline is detached from ctx's cancellation: a buyer who hangs
// up must not leave the books unsure of a sale that may have happened.
func (s *Service) confirm(ctx context.Context, op func(context.Context) error) (tries int, err error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ConfirmTimeout)
	defer cancel()
	retry := backoff.Backoff{Initial: confirmMinBackoff, Max: confirmMaxBackoff}
	for {
		tries++
		err = op(cctx)
		if err != nil && cctx.Err() != nil && !errors.Is(err, ErrUnavailable) {
			// Our own confirm deadline cut the call off: the server did not
			// answer in time, which is unavailability, not the caller's
			// cancellation.
			err = fmt.Errorf("%w: no answer within %v: %w", ErrUnavailable, s.cfg.ConfirmTimeout, err)
		}
		if err == nil || !errors.Is(err, ErrUnavailable) || IsNewerFormat(err) {
			return tries, err
		}
		if retry.Wait(cctx) != nil {
			return tries, err
		}
	}
}
