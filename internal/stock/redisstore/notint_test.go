package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"seckill/internal/lock/locallock"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// badCounters are values a stock or lucky key can be left holding by hand
// (redis-cli SET, another tool) that no script may count with: before,
// "abc" made the fenced read answer "unexpected reply [0]" (a nil in a Lua
// array ends it), 2^63-1 read as -2^63 (sold out for ever) and 2^53+1 as
// 2^53 (a unit lost per sale), and "5.0" sold in locked mode but, in atomic
// mode, counted a sale (INCR lucky) whose DECR Redis then refused.
var badCounters = []string{"abc", "5.0", " 5", "007", "-0", "+5", "",
	"9007199254740992", "9007199254740993", "9223372036854775807", "-9007199254740992"}

func TestNotIntegerStockKey(t *testing.T) {
	for _, v := range badCounters {
		t.Run(strings.ReplaceAll(v, " ", "_"), func(t *testing.T) {
			s, rdb := newStore(t, 5)
			ctx := t.Context()
			rdb.Del(ctx, "stock")
			if v == "" {
				rdb.HSet(ctx, "stock", "f", "1") // a key of another type
			} else {
				rdb.Set(ctx, "stock", v, 0)
			}
			f := stock.Fence{Lock: "redis", Token: 9, Lease: "l1"}
			if _, err := s.Read(ctx, f); !errors.Is(err, stock.ErrNotInteger) || !strings.Contains(err.Error(), `"stock"`) {
				t.Fatalf("Read: got %v, want ErrNotInteger naming the key", err)
			}
			if n, _ := rdb.Exists(ctx, "stock:fence").Result(); n != 0 {
				t.Fatalf("a refused read recorded itself in the fence")
			}
			if _, err := s.SellAtomic(ctx, "a1"); !errors.Is(err, stock.ErrNotInteger) {
				t.Fatalf("SellAtomic: got %v, want ErrNotInteger", err)
			}
			if _, err := s.ReadUnfenced(ctx); !errors.Is(err, stock.ErrNotInteger) {
				t.Fatalf("ReadUnfenced: got %v, want ErrNotInteger", err)
			}
			if _, err := s.Status(ctx); !errors.Is(err, stock.ErrNotInteger) {
				t.Fatalf("Status: got %v, want ErrNotInteger", err)
			}
			if err := s.CheckCounters(ctx); !errors.Is(err, stock.ErrNotInteger) {
				t.Fatalf("CheckCounters: got %v, want ErrNotInteger", err)
			}
			if l, _ := rdb.Get(ctx, "lucky").Result(); l != "0" {
				t.Fatalf("lucky = %q after refused sales, want 0 (nothing counted)", l)
			}
			if _, sold, _ := s.Receipt(ctx, "a1"); sold {
				t.Fatalf("a refused atomic sale left a receipt")
			}
		})
	}
}

// The lucky key is checked before anything is written: before, a fenced
// write on a lucky of "abc" set the stock and then failed on INCRBY, so a
// unit left the stock with no sale counted (and the buyer was told
// "unconfirmed").
func TestNotIntegerLuckyKey(t *testing.T) {
	s, rdb := newStore(t, 5)
	ctx := t.Context()
	rdb.Set(ctx, "lucky", "abc", 0)
	f := stock.Fence{Lock: "redis", Token: 9, Lease: "l1"}
	rd, err := s.Read(ctx, f)
	if err != nil || rd.Stock != 5 {
		t.Fatalf("Read: got %+v, %v", rd, err)
	}
	if err := s.Write(ctx, f, 4); !errors.Is(err, stock.ErrNotInteger) || !strings.Contains(err.Error(), `"lucky"`) {
		t.Fatalf("Write: got %v, want ErrNotInteger naming lucky", err)
	}
	if _, err := s.SellAtomic(ctx, "a1"); !errors.Is(err, stock.ErrNotInteger) {
		t.Fatalf("SellAtomic: got %v, want ErrNotInteger", err)
	}
	if v, _ := rdb.Get(ctx, "stock").Result(); v != "5" {
		t.Fatalf("stock = %q after refused writes, want 5 (nothing written)", v)
	}
	if err := s.CheckCounters(ctx); !errors.Is(err, stock.ErrNotInteger) {
		t.Fatalf("CheckCounters: got %v, want ErrNotInteger", err)
	}
}

// The limits themselves still count exactly, and missing keys are no
// broken counters (a sale never reset), though no status either.
func TestCounterLimitsExact(t *testing.T) {
	s, rdb := newStore(t, redisstore.MaxStock)
	ctx := t.Context()
	after, err := s.SellAtomic(ctx, "a1")
	if err != nil || after != redisstore.MaxStock-1 {
		t.Fatalf("SellAtomic from 2^53-1: got %d, %v", after, err)
	}
	f := stock.Fence{Lock: "redis", Token: 1, Lease: "l1"}
	rd, err := s.Read(ctx, f)
	if err != nil || rd.Stock != redisstore.MaxStock-1 {
		t.Fatalf("Read: got %+v, %v", rd, err)
	}
	if err := s.Write(ctx, f, rd.Stock-1); err != nil {
		t.Fatal(err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: redisstore.MaxStock - 2, Lucky: 2})
	rdb.Del(ctx, "stock", "lucky")
	if err := s.CheckCounters(ctx); err != nil {
		t.Fatalf("CheckCounters with missing keys: %v", err)
	}
	if st, err := s.Status(ctx); !errors.Is(err, stock.ErrStoreLost) {
		t.Fatalf("status with missing keys: %+v, %v; want ErrStoreLost", st, err)
	}
}

// A sale on a broken stock key is refused at once as ErrNotInteger, in both
// modes: not retried until the confirm deadline, and never "unconfirmed"
// (nothing was written).
func TestServiceNotInteger(t *testing.T) {
	// A refusal that was retried would end at the confirm deadline: long,
	// so that it cannot pass for a slow machine. Nothing waits for it when
	// the refusal is definite.
	const confirmTimeout = 30 * time.Second
	for _, mode := range []stock.Mode{stock.ModeLocked, stock.ModeAtomic} {
		s, rdb := newStore(t, 5)
		rdb.Set(t.Context(), "stock", "abc", 0)
		svc := stock.NewService(stock.ServiceConfig{Store: s, Locker: locallock.New(), Backend: "local", LockKey: "k",
			Mode: mode, Fencing: true, ConfirmTimeout: confirmTimeout})
		start := time.Now()
		_, err := svc.Reduce(t.Context())
		if !errors.Is(err, stock.ErrNotInteger) || errors.Is(err, stock.ErrUnconfirmed) {
			t.Fatalf("mode %v: got %v, want ErrNotInteger, not unconfirmed", mode, err)
		}
		if d := time.Since(start); d >= confirmTimeout {
			t.Fatalf("mode %v: took %v: a definite refusal was retried until the confirm deadline (%v)", mode, d, confirmTimeout)
		}
	}
}

// Every segment's key is checked, and the one at fault is named: a hash at
// a segment key read as 0 units through MGET before.
func TestNotIntegerSegment(t *testing.T) {
	_, rdb := newStore(t, 0)
	s := segmentedStore(rdb, 4)
	ctx := t.Context()
	if err := s.Reset(ctx, redisstore.MaxStock); err != nil {
		t.Fatal(err)
	}
	st, segs, err := s.StatusBySegment(ctx)
	if err != nil || st.Stock != redisstore.MaxStock || len(segs) != 4 {
		t.Fatalf("split 2^53-1 over 4: got %+v %v, %v", st, segs, err)
	}
	rdb.Del(ctx, "stock:2")
	rdb.HSet(ctx, "stock:2", "f", "1")
	for name, err := range map[string]error{
		"CheckCounters": s.CheckCounters(ctx),
		"Status":        func() error { _, err := s.Status(ctx); return err }(),
		"SegmentStocks": func() error { _, err := s.SegmentStocks(ctx); return err }(),
	} {
		if !errors.Is(err, stock.ErrNotInteger) || !strings.Contains(err.Error(), `"stock:2"`) {
			t.Errorf("%s: got %v, want ErrNotInteger naming stock:2", name, err)
		}
	}
}
