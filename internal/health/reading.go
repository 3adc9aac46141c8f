package health

import (
	"sync"
	"sync/atomic"
	"time"
)

// readingEvery is how often /readyz takes again a reading that costs more
// than a probe should (several round trips): a probe's pace (seconds), so
// a change shows within one or two probes.
const readingEvery = 5 * time.Second

// Reading is the last reading of T and when the next is due: what /readyz
// reports of a reading too costly for every probe. It is taken again at
// most once an Every, by the one probe that finds it due, and the other
// probes answer with the last one.
type Reading[T any] struct {
	Every time.Duration
	mu    sync.Mutex // held by the one probe reading again
	next  time.Time  // guarded by mu
	last  atomic.Pointer[T]
}

// Get returns the last reading, after taking a new one with read when it
// is due at now and no other probe is taking one; nil before any read
// succeeded. A failed read keeps the last: the state is what it was until
// read otherwise, and the dependency's own check says it does not answer.
func (r *Reading[T]) Get(now time.Time, read func() (T, error)) *T {
	if r.mu.TryLock() {
		if !now.Before(r.next) {
			r.next = now.Add(r.Every)
			if v, err := read(); err == nil {
				r.last.Store(&v)
			}
		}
		r.mu.Unlock()
	}
	return r.last.Load()
}

// Seed takes v as the last reading, the next due at next.
func (r *Reading[T]) Seed(v T, next time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last.Store(&v)
	r.next = next
}

// Last is the last reading; nil before any.
func (r *Reading[T]) Last() *T { return r.last.Load() }
