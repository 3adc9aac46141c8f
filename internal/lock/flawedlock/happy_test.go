//go:build lab

package flawedlock_test

import (
	"errors"
	"testing"
	"time"

	"seckill/internal/failpoint"
	"seckill/internal/lock"
	"seckill/internal/lock/flawedlock"
	"seckill/internal/lock/locktest"
	"seckill/internal/servers/servertest"
)

func TestDescribe(t *testing.T) {
	for _, b := range allBackends {
		got := b.new(nil, flawedlock.Options{}).Describe()
		if want := (lock.Info{Name: b.name, Safe: false}); got != want {
			t.Errorf("Describe() = %+v, want %+v", got, want)
		}
	}
}

// TestConformanceSubset runs the parts of the conformance suite these locks
// pass while nothing expires: exclusion (across Lockers on their own
// clients, as processes), release, deadline, cancel, tokens. Without Expiry
// the suite leaves out what they fail by design (non-owner release, crash
// expiry, renewal, loss signal).
func TestConformanceSubset(t *testing.T) {
	srv := servertest.Redis(t)
	for _, b := range allBackends {
		t.Run(b.name, func(t *testing.T) {
			locktest.Run(t, locktest.Env{
				New: func(t *testing.T, opts lock.Options) lock.Locker {
					return b.new(newClient(t, srv), flawedlock.Options{TTL: opts.TTL})
				},
				Exclusive: true,
				Processes: true,
				TTL:       30 * time.Second, // nothing may expire in these tests
			})
		})
	}
}

// TestHappyPath: two "processes" on their own clients exclude each other,
// the lock carries its TTL, and a release frees it for the other.
func TestHappyPath(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	const ttl = 5 * time.Second
	for _, b := range allBackends {
		t.Run(b.name, func(t *testing.T) {
			a := b.new(newClient(t, srv), flawedlock.Options{TTL: ttl})
			other := b.new(newClient(t, srv), flawedlock.Options{TTL: ttl})
			if err := a.Ping(t.Context()); err != nil {
				t.Fatal(err)
			}
			key := locktest.Key(t)
			la := acquire(t, a, key, 5*time.Second)
			if pttl := admin.PTTL(t.Context(), a.RedisKey(key)).Val(); pttl <= 0 || pttl > ttl {
				t.Fatalf("PTTL of a held lock = %v, want in (0, %v]", pttl, ttl)
			}
			mustNotAcquire(t, other, key, 200*time.Millisecond)
			if err := la.Release(t.Context()); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := la.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("second Release = %v, want ErrNotHeld", err)
			}
			lb := acquire(t, other, key, time.Second)
			if lb.Token() <= la.Token() {
				t.Fatalf("token after a release %d, want > %d", lb.Token(), la.Token())
			}
			if err := lb.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReleaseSeesOtherOwner: the owner check of setnx and redis-checkdel
// works when nothing interleaves; redis-nocheck has none. Here the lock is
// simply overwritten by someone else before the release.
func TestReleaseSeesOtherOwner(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)
	for _, b := range allBackends {
		t.Run(b.name, func(t *testing.T) {
			lk := b.new(newClient(t, srv), flawedlock.Options{TTL: 5 * time.Second})
			key := locktest.Key(t)
			l := acquire(t, lk, key, 5*time.Second)
			if err := admin.Set(t.Context(), lk.RedisKey(key), "someone-else", 0).Err(); err != nil {
				t.Fatal(err)
			}
			err := l.Release(t.Context())
			exists := admin.Exists(t.Context(), lk.RedisKey(key)).Val()
			if b.name == flawedlock.NameNoCheck {
				if err != nil || exists != 0 {
					t.Fatalf("nocheck Release = %v, key exists %d; want nil and deleted (no owner check)", err, exists)
				}
				return
			}
			if !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release of a lock owned by another = %v, want ErrNotHeld", err)
			}
			if exists != 1 {
				t.Fatal("Release deleted a lock owned by another")
			}
			if !errors.Is(l.Err(), lock.ErrLost) {
				t.Fatalf("Err() = %v, want ErrLost", l.Err())
			}
		})
	}
}

// TestFailpointsWired: each backend evaluates its failpoint where the
// package doc says, and an error there leaves Redis as the failure would.
func TestFailpointsWired(t *testing.T) {
	srv := servertest.Redis(t)
	admin := newClient(t, srv)

	t.Run(flawedlock.NameSetNX, func(t *testing.T) {
		armed(t)
		lk := flawedlock.NewSetNX(newClient(t, srv), flawedlock.Options{TTL: 5 * time.Second})
		key := locktest.Key(t)
		if err := failpoint.Enable(flawedlock.FailpointAfterSetNX, "1*error(EXPIRE lost)"); err != nil {
			t.Fatal(err)
		}
		_, err := lk.Acquire(t.Context(), key)
		if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, failpoint.ErrInjected) {
			t.Fatalf("Acquire = %v, want ErrUnavailable wrapping ErrInjected", err)
		}
		if pttl := admin.PTTL(t.Context(), lk.RedisKey(key)).Val(); pttl != -1 {
			t.Fatalf("PTTL after SETNX without EXPIRE = %v, want -1 (no TTL)", pttl)
		}
	})
	for _, tc := range []struct {
		b  backend
		fp string
	}{
		{allBackends[1], flawedlock.FailpointNoCheckBeforeDel},
		{allBackends[2], flawedlock.FailpointCheckDelBeforeDel},
	} {
		t.Run(tc.b.name, func(t *testing.T) {
			armed(t)
			lk := tc.b.new(newClient(t, srv), flawedlock.Options{TTL: 5 * time.Second})
			key := locktest.Key(t)
			l := acquire(t, lk, key, 5*time.Second)
			if err := failpoint.Enable(tc.fp, "error"); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(t.Context()); !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, failpoint.ErrInjected) {
				t.Fatalf("Release = %v, want ErrUnavailable wrapping ErrInjected", err)
			}
			if n := admin.Exists(t.Context(), lk.RedisKey(key)).Val(); n != 1 {
				t.Fatal("the DEL after the failpoint ran anyway")
			}
			if !errors.Is(l.Err(), lock.ErrLost) {
				t.Fatalf("Err() = %v, want ErrLost", l.Err())
			}
		})
	}
}
