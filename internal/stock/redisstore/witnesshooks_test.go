package redisstore_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/stock/storetest"
)

// A reset that reached the witness but not Redis leaves the previous sale
// in Redis, whose epoch the witness still keeps: no halt, sales go on.
// A Redis that lost its epoch key while the witness holds one is a lost
// sale, not an unchecked one.
func TestWitnessHalfResetAndLostEpoch(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	// A reset that failed after the witness took its epoch.
	if err := s.WitnessBegin(t.Context(), "half-done"); err != nil {
		t.Fatal(err)
	}
	fresh := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
	if _, err := fresh.SellAtomic(t.Context(), stock.NewAttemptID()); err != nil {
		t.Fatalf("sale after a half reset: %v", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 9, Lucky: 1})

	if err := rdb.Del(t.Context(), "stock:epoch").Err(); err != nil {
		t.Fatal(err)
	}
	fresh = redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
	if _, err := fresh.SellAtomic(t.Context(), stock.NewAttemptID()); !errors.Is(err, stock.ErrStoreLost) || errors.Is(err, stock.ErrStoreRewound) {
		t.Fatalf("sale with the epoch gone: %v; want ErrStoreLost", err)
	}
	storetest.WantStatus(t, s, stock.Status{Stock: 9, Lucky: 1})
}

// A record of a newer format (a newer replica wrote it) is refused, and
// nothing is written back over it: a reader that dropped the fields it
// does not know would write the record back without them.
func TestWitnessRefusesANewerFormat(t *testing.T) {
	srv := servertest.Redis(t)
	reg := &storetest.MemRegister{}
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
	if err := s.Reset(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	newer := []byte(`{"format":2,"gen":99,"sales":[],"fields_v2":{"x":1}}`)
	reg.Set(newer)
	fresh := redisstore.NewStore(rdb, keys).WithWitness(reg, 0)
	if _, err := fresh.SellAtomic(t.Context(), stock.NewAttemptID()); !errors.Is(err, stock.ErrWitnessFormat) || !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("sale on a newer record: %v; want ErrWitnessFormat (unavailable)", err)
	}
	if err := s.WitnessBegin(t.Context(), "reset-by-an-older-replica"); !errors.Is(err, stock.ErrWitnessFormat) {
		t.Fatalf("a reset's write over a newer record: %v; want ErrWitnessFormat", err)
	}
	if got := reg.Set(newer); !bytes.Equal(got, newer) {
		t.Fatalf("the newer record became %s; want it untouched", got)
	}
	storetest.WantHalted(t, s, "")
}

// stockd builds its store as acks, then witness (none by default): every
// segment must keep the acks. WithWitness(nil) used to give them to
// segment 0 alone, so the other segments' sales were answered without
// waiting for the replica.
func TestWitnessKeepsEverySegmentsAcks(t *testing.T) {
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Segments: 3}
	acks := redisstore.ReplicaAcks{Replicas: 1}
	for _, reg := range []stock.Register{nil, &storetest.MemRegister{}} {
		s := redisstore.NewStore(nil, keys).WithReplicaAcks(acks).WithWitness(reg, 0)
		for i := range 3 {
			if got := s.SegmentAcks(i); got != acks {
				t.Fatalf("witness %v: segment %d acks %+v, want %+v", reg != nil, i, got, acks)
			}
		}
	}
}
