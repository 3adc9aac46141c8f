package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"seckill/internal/lock"
)

// Lazy is a Locker opened on first successful use. New opens its schema
// at construction, so a server that is down would make a service that
// builds its locker at start exit; Lazy tries on every Acquire and Ping
// instead, each bounded by its caller's context, until the server answers.
type Lazy struct {
	info lock.Info
	open func(context.Context) (*Locker, error)
	sem  chan struct{} // one open at a time, waited for under the caller's ctx

	mu     sync.Mutex
	lk     *Locker
	closed bool
}

var (
	_ lock.Locker        = (*Lazy)(nil)
	_ lock.Pinger        = (*Lazy)(nil)
	_ lock.Closer        = (*Lazy)(nil)
	_ lock.Describer     = (*Lazy)(nil)
	_ lock.TokenAdvancer = (*Lazy)(nil)
)

func (z *Lazy) current() (*Locker, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		return nil, fmt.Errorf("mysql: %w", lock.ErrClosed)
	}
	return z.lk, nil
}

// NewLazy is a Lazy that opens its Locker with open, describing itself as
// info meanwhile.
func NewLazy(info lock.Info, open func(context.Context) (*Locker, error)) *Lazy {
	return &Lazy{info: info, open: open, sem: make(chan struct{}, 1)}
}

// Open returns the open locker, opening it if needed. Errors wrap
// lock.ErrUnavailable (the server, or ctx ending first) or lock.ErrClosed.
func (z *Lazy) Open(ctx context.Context) (*Locker, error) {
	if lk, err := z.current(); lk != nil || err != nil {
		return lk, err
	}
	select {
	case z.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("mysql: connect: %w: %w", lock.ErrUnavailable, ctx.Err())
	}
	defer func() { <-z.sem }()
	if lk, err := z.current(); lk != nil || err != nil {
		return lk, err
	}
	lk, err := z.open(ctx)
	if err != nil {
		if !errors.Is(err, lock.ErrUnavailable) && ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
		}
		return nil, err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		_ = lk.Close()
		return nil, fmt.Errorf("mysql: %w", lock.ErrClosed)
	}
	z.lk = lk
	return lk, nil
}

func (z *Lazy) Acquire(ctx context.Context, key string) (lock.Lease, error) {
	lk, err := z.Open(ctx)
	if err != nil {
		return nil, err
	}
	return lk.Acquire(ctx, key)
}

func (z *Lazy) Ping(ctx context.Context) error {
	lk, err := z.Open(ctx)
	if err != nil {
		return err
	}
	return lk.Ping(ctx)
}

func (z *Lazy) AdvanceTokens(ctx context.Context, key string, above uint64) error {
	lk, err := z.Open(ctx)
	if err != nil {
		return err
	}
	return lk.AdvanceTokens(ctx, key, above)
}

func (z *Lazy) Describe() lock.Info { return z.info }

// Close closes the locker if it was ever opened; an open in flight closes
// what it opens.
func (z *Lazy) Close() error {
	z.mu.Lock()
	lk := z.lk
	z.closed, z.lk = true, nil
	z.mu.Unlock()
	if lk == nil {
		return nil
	}
	return lk.Close()
}
