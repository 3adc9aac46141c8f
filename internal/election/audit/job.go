package audit

import (
	"context"
	"errors"
	"log/slog"

	"seckill/internal/election"
)

// Results of a run, as counted by an Observer.
const (
	ResultOK        = "ok"
	ResultViolation = "violation"
	ResultFenced    = "fenced"
	ResultError     = "error"
)

// Observer counts runs by result; *election.Metrics implements it (a nil
// *election.Metrics counts nothing).
type Observer interface {
	ObserveRun(result string)
}

// Result is the label of one run: ResultFenced for a deposed leader,
// ResultError when Redis failed, ResultViolation when the sale broke an
// invariant, else ResultOK.
func Result(r Record, err error) string {
	switch {
	case errors.Is(err, ErrFenced):
		return ResultFenced
	case err != nil:
		return ResultError
	case !r.OK:
		return ResultViolation
	}
	return ResultOK
}

// Job is the leader-only job for an election.Runner: one Run per call under
// the tenure's term, counted on obs (nil: not counted) and logged. A
// violation is logged as an error because it means the shop oversold; a
// fenced run only warns, since it is the expected end of a deposed leader's
// tenure. Redis failures are returned for the Runner to log.
func (a *Auditor) Job(obs Observer, log *slog.Logger) election.Job {
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context, term uint64) error {
		r, err := a.Run(ctx, term)
		res := Result(r, err)
		if obs != nil {
			obs.ObserveRun(res)
		}
		switch res {
		case ResultFenced:
			log.WarnContext(ctx, "audit: run refused, a leader with a higher term has recorded", "term", term, "err", err)
		case ResultViolation:
			log.ErrorContext(ctx, "audit: sale invariant violated", "term", term, "stock", r.Stock, "lucky", r.Lucky,
				"initial", r.Initial, "problems", r.Problems)
		case ResultOK:
			log.DebugContext(ctx, "audit ok", "term", term, "stock", r.Stock, "lucky", r.Lucky, "id", r.ID)
		}
		return err
	}
}
