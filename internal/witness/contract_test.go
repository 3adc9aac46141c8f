package witness_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/stock"
)

// which expected value a contract step puts with.
type which int

const (
	eNothing which = iota // nil: "only if nothing is stored"
	eCurrent              // the value the last Get returned
	eStale                // the value before the last stored Put
	eNever                // a value the register never held
)

// testRegister is the stock.Register contract, run against a real server.
// r must hold nothing yet.
func testRegister(t *testing.T, r stock.Register) {
	t.Helper()
	ctx := t.Context()

	get := func(t *testing.T) []byte {
		t.Helper()
		v, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		return v
	}

	if value := get(t); value != nil {
		t.Fatalf("Get on an empty register = %q, want nil", value)
	}

	binary := make([]byte, 64<<10) // every byte value, NULs included
	for i := range binary {
		binary[i] = byte(i)
	}
	steps := []struct {
		name       string
		value      []byte
		expect     which
		wantStored bool
		want       []byte // what Get returns after the Put
	}{
		{"put expecting nothing on empty stores", []byte("a"), eNothing, true, []byte("a")},
		{"second put expecting nothing is refused", []byte("b"), eNothing, false, []byte("a")},
		{"put expecting a value never stored is refused", []byte("b"), eNever, false, []byte("a")},
		{"put expecting the current value stores", []byte("b"), eCurrent, true, []byte("b")},
		{"put expecting the stale value is refused", []byte("c"), eStale, false, []byte("b")},
		{"put of the same bytes expecting them stores", []byte("b"), eCurrent, true, []byte("b")},
		{"put of an empty value stores", []byte{}, eCurrent, true, []byte{}},
		{"put expecting nothing over an empty value is refused", []byte("x"), eNothing, false, []byte{}},
		{"put of binary bytes stores", binary, eCurrent, true, binary},
		{"put expecting nothing once stored is still refused", []byte("d"), eNothing, false, binary},
		{"put expecting a prefix of the value is refused", []byte("d"), eNever + 1, false, binary},
		// A restore: the register holds an older value again. A writer
		// that read it now may write; one holding the newer one may not.
		{"put expecting the stale value after a restore of it stores", []byte("b"), eStale, true, []byte("b")},
	}
	cur, stale := []byte(nil), []byte(nil)
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			var expect []byte
			switch s.expect {
			case eCurrent:
				expect = cur
			case eStale:
				expect = stale
			case eNever:
				expect = []byte("never stored")
			case eNever + 1:
				expect = binary[:len(binary)-1]
			}
			if s.name == "put expecting the stale value after a restore of it stores" {
				// Restore the stale value as a backup would.
				if ok, err := r.Put(ctx, stale, cur); err != nil || !ok {
					t.Fatalf("restore: %v, %v", ok, err)
				}
				cur, stale = stale, cur
				expect = cur
			}
			stored, err := r.Put(ctx, s.value, expect)
			if err != nil {
				t.Fatalf("Put(expect %.20q): %v", expect, err)
			}
			if stored != s.wantStored {
				t.Fatalf("Put(expect %.20q) stored = %v, want %v", expect, stored, s.wantStored)
			}
			got := get(t)
			if got == nil || !bytes.Equal(got, s.want) {
				t.Fatalf("Get after Put = %.20q (%d bytes, nil %v), want %.20q (%d bytes)",
					got, len(got), got == nil, s.want, len(s.want))
			}
			if stored {
				stale, cur = cur, got
			}
		})
		if !ok {
			return
		}
	}

	t.Run("canceled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := r.Get(cctx)
		checkCanceled(t, "Get", err)
		_, err = r.Put(cctx, []byte("e"), cur)
		checkCanceled(t, "Put", err)
	})

	// Two writers each add 1 to a counter 50 times by read-modify-write,
	// reading again whenever their Put is refused. Without compare-and-set
	// some increments would be lost; with it the count is exact.
	t.Run("concurrent read-modify-write", func(t *testing.T) {
		const writers, each = 2, 50
		if ok, err := r.Put(ctx, []byte("0"), get(t)); err != nil || !ok {
			t.Fatalf("reset the counter: stored %v, %v", ok, err)
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var (
			wg       sync.WaitGroup
			stored   atomic.Int64
			refusals atomic.Int64
		)
		for range writers {
			wg.Go(func() {
				for done := 0; done < each; {
					v, err := r.Get(ctx)
					if err != nil {
						t.Errorf("Get: %v", err)
						return
					}
					n, err := strconv.Atoi(string(v))
					if err != nil {
						t.Errorf("counter %q: %v", v, err)
						return
					}
					ok, err := r.Put(ctx, []byte(strconv.Itoa(n+1)), v)
					if err != nil {
						t.Errorf("Put: %v", err)
						return
					}
					if ok {
						done++
						stored.Add(1)
					} else {
						refusals.Add(1)
					}
				}
			})
		}
		wg.Wait()
		v := get(t)
		if string(v) != strconv.Itoa(writers*each) {
			t.Fatalf("counter = %q after %d stored increments, want %d", v, stored.Load(), writers*each)
		}
		t.Logf("%d increments, %d refused Puts retried", stored.Load(), refusals.Load())
	})
}

func checkCanceled(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, stock.ErrRegisterUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("%s with a canceled context = %v, want ErrRegisterUnavailable and context.Canceled", op, err)
	}
}

// testUnavailable checks that once kill has stopped r's server, Get and Put
// fail within their 2 s context with errors wrapping
// stock.ErrRegisterUnavailable, and do not hang (a hang fails the test
// binary). How long each took past its context is a speed: noted, not
// checked.
func testUnavailable(t *testing.T, r stock.Register, kill func()) {
	t.Helper()
	// A connection to the live server first, so the client has one to
	// find dead, as a long-running process would.
	if _, err := r.Get(t.Context()); err != nil {
		t.Fatalf("Get before the kill: %v", err)
	}
	kill()
	const timeout, slack = 2 * time.Second, 2 * time.Second
	for _, op := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, err := r.Get(ctx); return err }},
		{"Put", func(ctx context.Context) error { _, err := r.Put(ctx, []byte("x"), nil); return err }},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		start := time.Now()
		err := op.call(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, stock.ErrRegisterUnavailable) {
			t.Errorf("%s with the server down = %v, want ErrRegisterUnavailable", op.name, err)
		}
		note := ""
		if took > timeout+slack {
			note = fmt.Sprintf(" (SLOW: over %v)", timeout+slack)
		}
		t.Logf("%s with the server down: %v after %v%s", op.name, err, took.Round(time.Millisecond), note)
	}
}
