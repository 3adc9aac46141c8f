package election

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"seckill/internal/backoff"
)

// Job is leader-only work. It runs every interval while the Runner leads,
// under a ctx that is cancelled the moment leadership is lost, and should
// hand term to whatever it writes so a store can fence a deposed leader.
type Job func(ctx context.Context, term uint64) error

// RunnerConfig configures a Runner. Zero values are the documented defaults.
type RunnerConfig struct {
	// Elector is the candidate to campaign with. Required.
	Elector Elector
	// Job runs every Interval while leading. Required.
	Job Job
	// Interval between job runs. The default is 1s.
	Interval time.Duration
	// ResignTimeout bounds the Resign when Run's ctx ends. The default is 2s.
	ResignTimeout time.Duration
	// OnChange, if set, is called (synchronously, from Run's goroutine)
	// whenever the Runner starts or stops leading.
	OnChange func(Status)
	// OnRun, if set, is called after every job run with its error (nil on
	// success), e.g. to count runs in metrics.
	OnRun func(term uint64, err error)
	// Logger receives transitions and job failures. The default is
	// slog.Default().
	Logger *slog.Logger
}

// Status is what a Runner believes about itself.
type Status struct {
	Leading bool
	Term    uint64    // the current tenure's Term, 0 when not leading
	Since   time.Time // when Leading last changed
	Reason  string    // why the last tenure ended, "" while leading
}

// Runner campaigns, runs the Job while leading, and campaigns again when
// leadership is lost, until its ctx ends; then it resigns so another
// candidate takes over at once.
type Runner struct {
	cfg RunnerConfig
	log *slog.Logger

	mu     sync.Mutex
	status Status
}

// NewRunner returns a Runner for cfg.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.ResignTimeout <= 0 {
		cfg.ResignTimeout = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Runner{cfg: cfg, log: log.With("component", "election", "backend", cfg.Elector.Backend())}
}

// Status reports whether this Runner leads now, and with which Term.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Backoff after a failed Campaign (server down): there is no event to wait
// for from a server that does not answer, so the retry is bounded instead.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// Run campaigns and leads until ctx ends, then returns nil (or ErrClosed if
// the Elector was closed under it).
func (r *Runner) Run(ctx context.Context) error {
	retry := backoff.Backoff{Initial: minBackoff, Max: maxBackoff}
	for {
		l, err := r.cfg.Elector.Campaign(ctx)
		if ctx.Err() != nil {
			if l != nil {
				r.resign(ctx, l)
			}
			return nil
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		if err != nil {
			delay := retry.Next()
			r.log.Warn("campaign failed; retrying", "err", err, "backoff", delay)
			if backoff.Sleep(ctx, delay) != nil {
				return nil
			}
			continue
		}
		retry.Reset()
		r.lead(ctx, l)
		if ctx.Err() != nil {
			r.resign(ctx, l)
			return nil
		}
	}
}

func (r *Runner) resign(ctx context.Context, l Leadership) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ResignTimeout)
	defer cancel()
	if err := l.Resign(rctx); err != nil && !errors.Is(err, ErrNotLeader) {
		r.log.Warn("resign failed; leadership ends when the session expires", "term", l.Term(), "err", err)
	} else {
		r.log.Info("resigned", "term", l.Term())
	}
	r.setStatus(Status{Reason: ErrResigned.Error()})
}

// lead runs the job every interval until leadership is lost or ctx ends.
// Before each run it confirms leadership with the server: a leader whose
// connection quietly broke skips the run rather than act on a stale belief.
func (r *Runner) lead(ctx context.Context, l Leadership) {
	r.setStatus(Status{Leading: true, Term: l.Term()})
	r.log.Info("became leader", "id", r.cfg.Elector.ID(), "term", l.Term())

	jobCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.Done():
			cancel() // abort a run in flight the moment leadership is lost
		case <-jobCtx.Done():
		}
	}()

	ticker := time.NewTicker(r.cfg.Interval)
	defer ticker.Stop()
	for {
		r.runOnce(jobCtx, l)
		select {
		case <-l.Done():
			err := l.Err()
			r.log.Warn("lost leadership", "term", l.Term(), "err", err)
			r.setStatus(Status{Reason: errString(err)})
			return
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (r *Runner) runOnce(ctx context.Context, l Leadership) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Interval)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		if !errors.Is(err, ErrNotLeader) && ctx.Err() == nil {
			r.log.Warn("leadership unconfirmed; skipping the job run", "term", l.Term(), "err", err)
		}
		return
	}
	err := r.cfg.Job(ctx, l.Term())
	if err != nil && ctx.Err() == nil {
		r.log.Warn("leader job failed", "term", l.Term(), "err", err)
	}
	if r.cfg.OnRun != nil {
		r.cfg.OnRun(l.Term(), err)
	}
}

func (r *Runner) setStatus(s Status) {
	s.Since = time.Now()
	r.mu.Lock()
	r.status = s
	r.mu.Unlock()
	if r.cfg.OnChange != nil {
		r.cfg.OnChange(s)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
