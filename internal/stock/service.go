package stock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"seckill/internal/lock"
)

// Mode selects how a sale is made.
type Mode string

const (
	// ModeLocked: acquire the lock, read, decide, (work), write, release —
	// the shape of the articles, where the lock is all that prevents
	// overselling (plus fencing, for backends whose tokens can be trusted).
	ModeLocked Mode = "locked"
	// ModeAtomic: one Lua script does check-and-decrement; no lock at all.
	// The production ceiling the locked mode is measured against.
	ModeAtomic Mode = "atomic"
)

// Sale is the outcome of a successful Reduce.
type Sale struct {
	StockAfter int64  // stock left after this sale
	Token      uint64 // fencing token of the lease it was made under; 0 in atomic mode
}

// ServiceConfig wires a Service. Zero durations get the documented defaults.
type ServiceConfig struct {
	Store  *Store
	Locker lock.Locker // unused in ModeAtomic
	Mode   Mode        // default ModeLocked

	// Backend names the lock backend; it is recorded in the fence.
	Backend string
	// Fencing turns on token checks at read and write. Only set it for
	// backends whose tokens are trustworthy and shared by every replica
	// (lock.Info.Safe, and distributed): "none" has no exclusion at all and
	// "local" hands out per-process tokens, and both exist to show the
	// overselling the articles start from, so fencing them would hide it.
	Fencing bool

	LockKey     string
	WaitTimeout time.Duration // max wait for the lock; default 5s
	// ReleaseTimeout bounds the Release made after the sale with a context
	// detached from the request, so a client that hangs up does not leave
	// the lock held until its TTL; default 2s.
	ReleaseTimeout time.Duration
	Delay          Delay // simulated work inside the critical section

	// OnLockWait, if set, observes how long each Acquire took (success or not).
	OnLockWait func(time.Duration)
	Logger     *slog.Logger // default slog.Default()
}

// Service runs sales. It is safe for concurrent use.
type Service struct {
	cfg ServiceConfig
	log *slog.Logger
}

// NewService returns a Service for cfg.
func NewService(cfg ServiceConfig) *Service {
	if cfg.Mode == "" {
		cfg.Mode = ModeLocked
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 5 * time.Second
	}
	if cfg.ReleaseTimeout <= 0 {
		cfg.ReleaseTimeout = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, log: log}
}

// Reduce sells one unit. Errors wrap ErrSoldOut, ErrBusy, ErrLockLost,
// ErrFenced, ErrMixedBackends, ErrUnavailable or lock.ErrUnavailable.
func (s *Service) Reduce(ctx context.Context) (Sale, error) {
	if s.cfg.Mode == ModeAtomic {
		after, err := s.cfg.Store.SellAtomic(ctx)
		if err != nil {
			return Sale{}, err
		}
		return Sale{StockAfter: after}, nil
	}

	lease, err := s.acquire(ctx)
	if err != nil {
		return Sale{}, err
	}
	defer s.release(ctx, lease)

	sale, err := s.sell(ctx, lease)
	if err != nil {
		return Sale{}, err
	}
	return sale, nil
}

func (s *Service) acquire(ctx context.Context) (lock.Lease, error) {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WaitTimeout)
	defer cancel()
	start := time.Now()
	lease, err := s.cfg.Locker.Acquire(wctx, s.cfg.LockKey)
	if s.cfg.OnLockWait != nil {
		s.cfg.OnLockWait(time.Since(start))
	}
	switch {
	case err == nil:
		return lease, nil
	case errors.Is(err, lock.ErrUnavailable):
		return nil, fmt.Errorf("stock: acquire %q: %w", s.cfg.LockKey, err)
	case ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lock.ErrNotObtained)):
		// Our own wait bound expired, not the caller's context.
		return nil, fmt.Errorf("%w: not obtained within %s: %w", ErrBusy, s.cfg.WaitTimeout, err)
	default:
		return nil, fmt.Errorf("stock: acquire %q: %w", s.cfg.LockKey, err)
	}
}

// sell is the critical section: read, decide, work, check, write.
func (s *Service) sell(ctx context.Context, lease lock.Lease) (Sale, error) {
	f := Fence{Backend: s.cfg.Backend, Token: lease.Token()}

	var cur int64
	var err error
	if s.cfg.Fencing {
		cur, err = s.cfg.Store.Read(ctx, f)
	} else {
		cur, err = s.cfg.Store.ReadUnfenced(ctx)
	}
	if err != nil {
		return Sale{}, err
	}
	if cur <= 0 {
		return Sale{}, ErrSoldOut
	}

	if d := s.cfg.Delay.Next(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-lease.Done():
			t.Stop()
			return Sale{}, lostErr(lease)
		case <-ctx.Done():
			t.Stop()
			return Sale{}, fmt.Errorf("stock: sale abandoned: %w", ctx.Err())
		}
	}
	// The delay may have ended at the same instant the lease was lost; the
	// select above picks at random, so look again before writing. Fencing is
	// what closes the remaining window (loss after this check).
	select {
	case <-lease.Done():
		return Sale{}, lostErr(lease)
	default:
	}

	if s.cfg.Fencing {
		err = s.cfg.Store.Write(ctx, f, cur-1)
	} else {
		err = s.cfg.Store.WriteUnfenced(ctx, cur-1)
	}
	if err != nil {
		return Sale{}, err
	}
	return Sale{StockAfter: cur - 1, Token: f.Token}, nil
}

// release uses a context detached from the request: a client hanging up
// mid-sale must not skip the release and leave the lock to its TTL.
func (s *Service) release(ctx context.Context, lease lock.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	if err := lease.Release(rctx); err != nil {
		// ErrNotHeld after a lost lease is expected and already reported as
		// ErrLockLost or ErrFenced; anything else is worth a look.
		lvl := slog.LevelWarn
		if errors.Is(err, lock.ErrNotHeld) {
			lvl = slog.LevelDebug
		}
		s.log.Log(rctx, lvl, "release lock", "key", s.cfg.LockKey, "token", lease.Token(), "err", err)
	}
}

func lostErr(lease lock.Lease) error {
	return fmt.Errorf("%w: token %d: %w", ErrLockLost, lease.Token(), lease.Err())
}
