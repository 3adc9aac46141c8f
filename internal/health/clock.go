package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock/redisstore"
)

// clock.go: the clocks an item's window assumes. The window is decided by
// the stock Redis primary's TIME (window.lua); after a failover the
// promoted replica's clock decides, so every window's edges move by the
// skew between the two. ReadClocks measures that skew, each replica's
// clock less the primary's, and this process's, as NTP does: a TIME
// bracketed by this process's clock, the server's answer set against the
// round trip's midpoint, which is off by at most half the round trip.

// clockSamples is how many TIMEs each server answers per reading; the
// one with the shortest round trip is kept, the least uncertain.
const clockSamples = 3

// ClockReading is one server's TIME and this process's clock around it.
type ClockReading struct {
	Sent, Received time.Time // this process's clock before and after
	Server         time.Time // the server's TIME
}

// Offset is the server's clock less this process's at the midpoint of
// the round trip.
func (r ClockReading) Offset() time.Duration {
	return r.Server.Sub(r.Sent.Add(r.Received.Sub(r.Sent) / 2))
}

// Uncertainty bounds Offset's error: half the round trip (the reply was
// made somewhere in it).
func (r ClockReading) Uncertainty() time.Duration { return r.Received.Sub(r.Sent) / 2 }

// Skew is b's clock less a's, from a reading of each, and the bound of
// its error: both readings' uncertainties. This process's clock cancels
// out, so it need not be right, only steady between the two.
func Skew(a, b ClockReading) (skew, uncertainty time.Duration) {
	return b.Offset() - a.Offset(), a.Uncertainty() + b.Uncertainty()
}

// TimeReader is the command ReadClock needs; every go-redis client has it.
type TimeReader interface {
	Time(ctx context.Context) *redis.TimeCmd
}

// ReadClock reads rdb's TIME against now, the best of clockSamples.
func ReadClock(ctx context.Context, rdb TimeReader, now func() time.Time) (ClockReading, error) {
	var best ClockReading
	for i := range clockSamples {
		sent := now()
		t, err := rdb.Time(ctx).Result()
		r := ClockReading{Sent: sent, Received: now(), Server: t}
		if err != nil {
			return ClockReading{}, redisstore.WrapRedis(ctx, "TIME", err)
		}
		if i == 0 || r.Uncertainty() < best.Uncertainty() {
			best = r
		}
	}
	return best, nil
}

// ClockSkew is one clock less the stock Redis primary's.
type ClockSkew struct {
	// Of is "this process", or a replica's host:port.
	Of                string
	Skew, Uncertainty time.Duration
	// Err, when set, says why the clock could not be read (the skew is
	// then unknown).
	Err error
}

// Beyond says whether the skew is certainly beyond bound: even the least
// skew the reading allows exceeds it.
func (s ClockSkew) Beyond(bound time.Duration) bool {
	return s.Err == nil && s.Skew.Abs()-s.Uncertainty > bound
}

func (s ClockSkew) String() string {
	if s.Err != nil {
		return s.Of + " unread: " + s.Err.Error()
	}
	sign := "+"
	if s.Skew < 0 {
		sign = "-"
	}
	return fmt.Sprintf("%s %s%s (±%s)", s.Of, sign, s.Skew.Abs().Round(time.Millisecond),
		max(s.Uncertainty.Round(time.Millisecond), time.Millisecond))
}

// ThisProcess is ClockSkew.Of for the process's own clock.
const ThisProcess = "this process"

// Clocks is one reading of every clock against the primary's.
type Clocks struct {
	Process  ClockSkew
	Replicas []ClockSkew // by address; none without replicas
}

// Problems lists the clocks beyond bound and the replicas unread, with
// what each is; nil when every clock is within it.
func (c Clocks) Problems(bound time.Duration) []string {
	var out []string
	for _, s := range append([]ClockSkew{c.Process}, c.Replicas...) {
		if s.Err != nil || s.Beyond(bound) {
			out = append(out, s.String())
		}
	}
	return out
}

// ClockCheck reads the clocks of the stock Redis's primary and replicas.
type ClockCheck struct {
	Primary redis.UniversalClient
	// Replicas lists the replicas' host:port: SentinelReplicas with
	// Sentinel, else InfoReplicas of the primary.
	Replicas func(ctx context.Context) ([]string, error)
	// Dial is a client of one replica, closed after its reading.
	Dial func(addr string) *redis.Client
	// Now is this process's clock; default time.Now.
	Now func() time.Time
}

// ReadProcess reads this process's clock against the primary's: one
// round trip of clockSamples TIMEs, no replica dialled, so /readyz can
// read it fresh on every probe and show a step of either clock at once.
func (c ClockCheck) ReadProcess(ctx context.Context) (ClockSkew, error) {
	now := c.Now
	if now == nil {
		now = time.Now
	}
	p, err := ReadClock(ctx, c.Primary, now)
	if err != nil {
		return ClockSkew{}, fmt.Errorf("the primary's clock: %w", err)
	}
	return ClockSkew{Of: ThisProcess, Skew: -p.Offset(), Uncertainty: p.Uncertainty()}, nil
}

// ReadClocks reads every clock against the primary's. An error only when
// the primary's cannot be read; a replica that cannot be listed or read
// is a ClockSkew with Err.
func (c ClockCheck) ReadClocks(ctx context.Context) (Clocks, error) {
	now := c.Now
	if now == nil {
		now = time.Now
	}
	p, err := ReadClock(ctx, c.Primary, now)
	if err != nil {
		return Clocks{}, fmt.Errorf("the primary's clock: %w", err)
	}
	out := Clocks{Process: ClockSkew{Of: ThisProcess, Skew: -p.Offset(), Uncertainty: p.Uncertainty()}}
	if c.Replicas == nil {
		return out, nil
	}
	addrs, err := c.Replicas(ctx)
	if err != nil {
		out.Replicas = []ClockSkew{{Of: "replicas", Err: err}}
		return out, nil
	}
	for _, addr := range addrs {
		s := ClockSkew{Of: "replica " + addr}
		rdb := c.Dial(addr)
		r, err := ReadClock(ctx, rdb, now)
		_ = rdb.Close()
		if err != nil {
			s.Err = err
		} else {
			s.Skew, s.Uncertainty = Skew(p, r)
		}
		out.Replicas = append(out.Replicas, s)
	}
	return out, nil
}

// ErrNoReplicaList: the replicas could not be listed.
var ErrNoReplicaList = errors.New("stock: cannot list the replicas")

// InfoReplicas lists the replicas the primary rdb reports in INFO
// replication, host:port as it sees them ("slave0:ip=…,port=…,…").
func InfoReplicas(ctx context.Context, rdb InfoReader) ([]string, error) {
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return nil, fmt.Errorf("%w: INFO replication: %w", ErrNoReplicaList, redisstore.WrapRedis(ctx, "INFO replication", err))
	}
	var out []string
	for line := range strings.SplitSeq(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "slave") || strings.Trim(name[len("slave"):], "0123456789") != "" || name == "slave" {
			continue
		}
		var ip, port string
		for f := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(f, "=")
			switch k {
			case "ip":
				ip = val
			case "port":
				port = val
			}
		}
		if ip != "" && port != "" {
			out = append(out, net.JoinHostPort(ip, port))
		}
	}
	slices.Sort(out)
	return out, nil
}

// SentinelReplicas lists master's replicas as the first of the Sentinels
// at addrs that answers knows them (SENTINEL REPLICAS), leaving out the
// ones it finds down: Sentinel promotes none of those.
func SentinelReplicas(ctx context.Context, addrs []string, master string) ([]string, error) {
	var errs []error
	for _, a := range addrs {
		s := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1, ContextTimeoutEnabled: true})
		reps, err := s.Replicas(ctx, master).Result()
		_ = s.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("sentinel %s: %w", a, err))
			continue
		}
		var out []string
		for _, r := range reps {
			if down(r["flags"]) {
				continue
			}
			out = append(out, net.JoinHostPort(r["ip"], r["port"]))
		}
		slices.Sort(out)
		return out, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrNoReplicaList, errors.Join(errs...))
}

// down says whether a Sentinel's flags mark a replica down or cut off.
func down(flags string) bool {
	for f := range strings.SplitSeq(flags, ",") {
		switch f {
		case "s_down", "o_down", "disconnected":
			return true
		}
	}
	return false
}
