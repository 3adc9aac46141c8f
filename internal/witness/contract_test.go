package witness_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/stock"
)

// which version a contract step puts with.
type which int

const (
	vZero    which = iota // 0: "only if nothing is stored"
	vCurrent              // the version the last Get returned
	vStale                // the version before the last stored Put
	vNever                // a version the register never had
)

// testRegister is the stock.Register contract, run against a real server.
// r must hold nothing yet.
func testRegister(t *testing.T, r stock.Register) {
	t.Helper()
	ctx := t.Context()

	get := func(t *testing.T) ([]byte, int64) {
		t.Helper()
		v, ver, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		return v, ver
	}

	value, cur := get(t)
	if value != nil || cur != 0 {
		t.Fatalf("Get on an empty register = (%q, %d), want (nil, 0)", value, cur)
	}

	binary := make([]byte, 64<<10) // every byte value, NULs included
	for i := range binary {
		binary[i] = byte(i)
	}
	steps := []struct {
		name       string
		value      []byte
		version    which
		wantStored bool
		want       []byte // what Get returns after the Put
	}{
		{"put with version 0 on empty stores", []byte("a"), vZero, true, []byte("a")},
		{"second put with version 0 is refused", []byte("b"), vZero, false, []byte("a")},
		{"put with a version never stored is refused", []byte("b"), vNever, false, []byte("a")},
		{"put with the current version stores", []byte("b"), vCurrent, true, []byte("b")},
		{"put with the stale version is refused", []byte("c"), vStale, false, []byte("b")},
		{"put of the same bytes with the current version stores", []byte("b"), vCurrent, true, []byte("b")},
		{"put of an empty value stores", []byte{}, vCurrent, true, []byte{}},
		{"put of binary bytes stores", binary, vCurrent, true, binary},
		{"put with version 0 once stored is still refused", []byte("d"), vZero, false, binary},
		{"put with the stale version is refused again", []byte("d"), vStale, false, binary},
	}
	seen := []int64{0}
	var stale int64
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			var version int64
			switch s.version {
			case vCurrent:
				version = cur
			case vStale:
				version = stale
			case vNever:
				version = cur + 1<<40
			}
			nv, err := r.Put(ctx, s.value, version)
			stored := nv != 0
			if err != nil {
				t.Fatalf("Put(version %d): %v", version, err)
			}
			if stored != s.wantStored {
				t.Fatalf("Put(version %d) stored = %v, want %v", version, stored, s.wantStored)
			}
			got, ver := get(t)
			if got == nil || !bytes.Equal(got, s.want) {
				t.Fatalf("Get after Put = %.20q (%d bytes, nil %v), want %.20q (%d bytes)",
					got, len(got), got == nil, s.want, len(s.want))
			}
			switch {
			case !stored && ver != cur:
				t.Fatalf("refused Put moved the version from %d to %d", cur, ver)
			case stored && slices.Contains(seen, ver):
				t.Fatalf("stored Put left version %d, which the register had before (%v)", ver, seen)
			case stored && nv != ver:
				t.Fatalf("stored Put returned version %d, Get reads %d", nv, ver)
			}
			if stored {
				stale, cur = cur, ver
				seen = append(seen, ver)
			}
		})
		if !ok {
			return
		}
	}

	t.Run("canceled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, _, err := r.Get(cctx)
		checkCanceled(t, "Get", err)
		_, err = r.Put(cctx, []byte("e"), cur)
		checkCanceled(t, "Put", err)
	})

	// Two writers each add 1 to a counter 50 times by read-modify-write,
	// reading again whenever their Put is refused. Without compare-and-set
	// some increments would be lost; with it the count is exact.
	t.Run("concurrent read-modify-write", func(t *testing.T) {
		const writers, each = 2, 50
		_, ver := get(t)
		if nv, err := r.Put(ctx, []byte("0"), ver); err != nil || nv == 0 {
			t.Fatalf("reset the counter: version %d, %v", nv, err)
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
					v, ver, err := r.Get(ctx)
					if err != nil {
						t.Errorf("Get: %v", err)
						return
					}
					n, err := strconv.Atoi(string(v))
					if err != nil {
						t.Errorf("counter %q: %v", v, err)
						return
					}
					nv, err := r.Put(ctx, []byte(strconv.Itoa(n+1)), ver)
					if err != nil {
						t.Errorf("Put: %v", err)
						return
					}
					if nv != 0 {
						done++
						stored.Add(1)
					} else {
						refusals.Add(1)
					}
				}
			})
		}
		wg.Wait()
		v, _ := get(t)
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
// stock.ErrRegisterUnavailable, and do not hang.
func testUnavailable(t *testing.T, r stock.Register, kill func()) {
	t.Helper()
	// A connection to the live server first, so the client has one to
	// find dead, as a long-running process would.
	if _, _, err := r.Get(t.Context()); err != nil {
		t.Fatalf("Get before the kill: %v", err)
	}
	kill()
	const timeout, slack = 2 * time.Second, 2 * time.Second
	for _, op := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, _, err := r.Get(ctx); return err }},
		{"Put", func(ctx context.Context) error { _, err := r.Put(ctx, []byte("x"), 0); return err }},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		start := time.Now()
		err := op.call(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, stock.ErrRegisterUnavailable) {
			t.Errorf("%s with the server down = %v, want ErrRegisterUnavailable", op.name, err)
		}
		if took > timeout+slack {
			t.Errorf("%s with the server down took %v, want at most %v", op.name, took, timeout+slack)
		}
		t.Logf("%s with the server down: %v after %v", op.name, err, took.Round(time.Millisecond))
	}
}
