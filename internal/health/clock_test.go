package health_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/health"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// fakeTime answers TIME with its readings in turn.
type fakeTime struct{ server []time.Time }

func (f *fakeTime) Time(context.Context) *redis.TimeCmd {
	v := f.server[0]
	f.server = f.server[1:]
	return redis.NewTimeCmdResult(v, nil)
}

// fakeClock is this process's clock, answering its instants in turn.
func fakeClock(at ...time.Time) func() time.Time {
	return func() time.Time {
		v := at[0]
		at = at[1:]
		return v
	}
}

// A server's offset is set against the midpoint of the round trip, with
// half of it as the bound, and the least uncertain of the samples is kept;
// two servers' skew is the difference of their offsets, the bounds added.
func TestClockArithmetic(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// Three round trips of 40, 10 and 30 ms; the server 2 s ahead, its
	// first and last answers made at the end of their round trips.
	primary := &fakeTime{server: []time.Time{ms(2040), ms(2105), ms(2230)}}
	p, err := health.ReadClock(t.Context(), primary, fakeClock(ms(0), ms(40), ms(100), ms(110), ms(200), ms(230)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Offset() != 2*time.Second || p.Uncertainty() != 5*time.Millisecond {
		t.Fatalf("primary: offset %s ±%s, want 2s ±5ms (the 10 ms round trip)", p.Offset(), p.Uncertainty())
	}
	// A replica 1.5 s behind this process, read over a 4 ms round trip.
	replica := health.ClockReading{Sent: ms(1000), Received: ms(1004), Server: ms(1002 - 1500)}
	skew, unc := health.Skew(p, replica)
	if skew != -3500*time.Millisecond || unc != 7*time.Millisecond {
		t.Fatalf("skew: got %s ±%s, want -3.5s ±7ms", skew, unc)
	}
	for _, tc := range []struct {
		skew, unc, bound time.Duration
		beyond           bool
	}{
		{1500 * time.Millisecond, 10 * time.Millisecond, time.Second, true},
		{-1500 * time.Millisecond, 10 * time.Millisecond, time.Second, true},
		{1005 * time.Millisecond, 10 * time.Millisecond, time.Second, false}, // within its uncertainty
		{900 * time.Millisecond, 0, time.Second, false},
	} {
		s := health.ClockSkew{Of: "replica r:1", Skew: tc.skew, Uncertainty: tc.unc}
		if s.Beyond(tc.bound) != tc.beyond {
			t.Errorf("%s beyond %s: got %v, want %v", s, tc.bound, !tc.beyond, tc.beyond)
		}
	}
	c := health.Clocks{
		Process:  health.ClockSkew{Of: health.ThisProcess, Skew: 20 * time.Millisecond, Uncertainty: time.Millisecond},
		Replicas: []health.ClockSkew{{Of: "replica a:1", Skew: -3500 * time.Millisecond, Uncertainty: 7 * time.Millisecond}, {Of: "replica b:1"}},
	}
	if got, want := c.Problems(time.Second), []string{"replica a:1 -3.5s (±7ms)"}; !slices.Equal(got, want) {
		t.Fatalf("problems: got %q, want %q", got, want)
	}
}

// On one machine the primary's, a replica's and this process's clocks
// agree: the readings work against real servers, the replica found in
// the primary's INFO replication.
func TestReadClocksOfAReplica(t *testing.T) {
	// No delay before the replica's first sync (5 s by default).
	primary := servertest.RedisWith(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(primary.Addr())
	replica := servertest.RedisWith(t, "--replicaof", host, port)
	// A read timeout above waitReplicaListed's WAIT.
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr(), MaxRetries: -1, ReadTimeout: time.Minute})
	t.Cleanup(func() { _ = rdb.Close() })
	waitReplicaListed(t, rdb)
	addrs, err := health.InfoReplicas(t.Context(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(addrs, []string{replica.Addr()}) {
		t.Fatalf("replicas: got %v, want %s", addrs, replica.Addr())
	}
	check := health.ClockCheck{
		Primary:  rdb,
		Replicas: func(ctx context.Context) ([]string, error) { return health.InfoReplicas(ctx, rdb) },
		Dial:     func(addr string) *redis.Client { return redis.NewClient(&redis.Options{Addr: addr}) },
	}
	c, err := check.ReadClocks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Replicas) != 1 || c.Replicas[0].Err != nil {
		t.Fatalf("replicas read: %+v", c.Replicas)
	}
	// TIME has µs resolution: one machine's clocks agree within that and
	// the round trips.
	for _, s := range []health.ClockSkew{c.Process, c.Replicas[0]} {
		if s.Skew.Abs() > s.Uncertainty+5*time.Millisecond {
			t.Errorf("%s: one machine's clocks disagree", s)
		}
	}
	if p := c.Problems(time.Millisecond * 50); len(p) != 0 {
		t.Fatalf("problems on one machine: %q", p)
	}
}

// waitReplicaListed waits for the primary to list a replica: WAIT 1
// returns once one acknowledged the last write, which needs it connected,
// and so listed.
func waitReplicaListed(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := rdb.Set(ctx, "clock-test", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Do(ctx, "wait", 1, 30000).Int(); err != nil || n < 1 {
		t.Fatalf("no replica acknowledged within 30 s: %d, %v", n, err)
	}
}

// With Sentinel the replicas are the ones the Sentinels know and would
// promote.
func TestSentinelReplicas(t *testing.T) {
	set := servertest.Sentinels(t, servers.SentinelOptions{})
	addrs, err := health.SentinelReplicas(t.Context(), append([]string{"127.0.0.1:1"}, set.SentinelAddrs()...), set.MasterName)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(addrs, []string{set.Replica.Addr()}) {
		t.Fatalf("sentinel replicas: got %v, want %s", addrs, set.Replica.Addr())
	}
	_, err = health.SentinelReplicas(t.Context(), []string{"127.0.0.1:1"}, set.MasterName)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("no Sentinel answering: got %v, want an error naming it", err)
	}
}
