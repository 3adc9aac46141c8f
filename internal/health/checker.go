package health

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/metrics"
	"seckill/internal/stock"
)

// checker.go: the one component that holds the Redis servers to what the
// sale assumes, at start (Checker.CheckPolicies, Checker.CheckServer) and
// for /readyz (Checker.Redis, Checker.Clock, Checker.Memory), so each
// assumption is read, judged and worded in one place.

// ErrEvictingRedis refuses the start (exit status 2, as a configuration
// error: the fix is the Redis's configuration, or stock.allow_eviction).
var ErrEvictingRedis = errors.New("refusing a Redis that may evict keys")

// ErrNoAOF refuses the start with stock.require_aof (exit status 2, as a
// configuration error: the fix is the Redis's configuration, or the key).
var ErrNoAOF = errors.New("refusing a stock Redis without an append-only file")

// evictionFix says how to make a Redis keep every key, for the refusal.
const evictionFix = "run CONFIG SET maxmemory-policy noeviction on it and put the line " +
	"\"maxmemory-policy noeviction\" in its redis.conf (on a managed Redis: its parameter group), " +
	"or set stock.allow_eviction: true to run anyway"

// aofFix says how to give a Redis an AOF, for the refusal and the warning.
const aofFix = "run CONFIG SET appendonly yes on it and put the lines \"appendonly yes\" and " +
	"\"appendfsync everysec\" (or always) in its redis.conf (on a managed Redis: its AOF or " +
	"durability setting)"

// Policy is a Redis whose maxmemory-policy is checked (MaxmemoryPolicy).
type Policy struct {
	// Name prefixes what is said of it; empty for the stock Redis.
	Name  string
	Redis InfoReader
}

// DurabilityCheck is the stock Redis whose persistence GET /info reports
// (ReadDurability). It is read at start and again by /readyz at most every
// Every, never by a sale: the configuration can change under a running
// replica (CONFIG SET appendonly, a managed service's parameter change, a
// failover to a node configured otherwise), but not so often that a
// probe's pace misses it for long.
type DurabilityCheck struct {
	Redis DurabilityReader
	// ReplicaAcks is stock.min_replica_acks in effect.
	ReplicaAcks int
	// Known is a reading taken before; nil to take it at start
	// (CheckServer) or at the first probe.
	Known *Durability
	// Every bounds how often /readyz reads it again; default 5s.
	Every time.Duration
}

// ClockReader reads the clocks; *ClockCheck is one.
type ClockReader interface {
	ReadClocks(ctx context.Context) (Clocks, error)
	ReadProcess(ctx context.Context) (ClockSkew, error)
}

// ClockWatch is the clocks of the stock Redis's primary, its replicas and
// this process, which /readyz reads again at most every Every and reports
// when one is off by more than MaxSkew: after a failover the promoted
// replica's clock decides every item's window.
type ClockWatch struct {
	Clocks ClockReader
	// MaxSkew is stock.max_clock_skew.
	MaxSkew time.Duration
	// Known is a reading taken before; nil to take it at start.
	Known *Clocks
	// Every bounds how often /readyz reads them again; default 30 s:
	// clocks drift by milliseconds a day, and a reading dials every
	// replica.
	Every time.Duration
	// FreshEvery bounds how often it reads this process's clock against
	// the primary's, which is what a step of either shows in and what
	// items' windows are checked by; default 1 s (one round trip).
	FreshEvery time.Duration
}

// Config wires a Checker. Every check is optional: a nil or empty one is
// not made.
type Config struct {
	Logger *slog.Logger
	// Logs limits the warnings of failed probe readings; default one per
	// kind a second.
	Logs *metrics.LogLimiter
	// StartTimeout bounds each reading at start (redis.timeout); default
	// 1s. ProbeTimeout bounds each one a probe takes; default 1s.
	StartTimeout, ProbeTimeout time.Duration
	// Now is the clock the readings are due by; default time.Now.
	Now func() time.Time

	// Policies are the Redis servers the sale keeps keys in: the stock
	// Redis, and the lock's when it is another. A policy can change at
	// run time (CONFIG SET), so the check at start is not enough.
	Policies []Policy
	// AllowEviction is stock.allow_eviction: an evicting policy is said
	// loudly, not refused.
	AllowEviction bool
	// Durability, if set, is read at start and by the probes, and says
	// what a sale answered sold outlives.
	Durability *DurabilityCheck
	// RequireAOF is stock.require_aof: a stock Redis without an AOF
	// refuses the start, and fails /readyz's "redis" later.
	RequireAOF bool
	// Clocks, if set, are read at start and warned of by /readyz.
	Clocks *ClockWatch
	// Memory, if set, is the stock Redis, whose maxmemory /readyz holds
	// against the stock left.
	Memory InfoReader
}

// Checker reads the Redis servers' facts at start and for /readyz. Its
// readings for /readyz are taken at most once a period, by the one probe
// that finds one due; the other probes answer with the last.
type Checker struct {
	cfg Config

	dur    Reading[Durability]
	clocks Reading[Clocks]
	fresh  Reading[ClockSkew]
	mem    Reading[memoryReading]

	mu        sync.Mutex // guards clockSaid and durSaid
	clockSaid *string
	durSaid   string
}

// New returns a Checker for cfg, with its defaults filled in.
func New(cfg Config) *Checker {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Logs == nil {
		cfg.Logs = metrics.NewLogLimiter(nil, 0)
	}
	cfg.StartTimeout = cmp.Or(cfg.StartTimeout, time.Second)
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Checker{cfg: cfg}
	c.mem.Every = readingEvery
	if d := cfg.Durability; d != nil {
		c.dur.Every = cmp.Or(d.Every, 5*time.Second)
		if d.Known != nil {
			c.setDurability(*d.Known)
		}
	}
	if w := cfg.Clocks; w != nil {
		c.clocks.Every = cmp.Or(w.Every, 30*time.Second)
		c.fresh.Every = cmp.Or(w.FreshEvery, time.Second)
		if w.Known != nil {
			c.setClocks(*w.Known)
		}
	}
	return c
}

// unanswered reports whether a start-up check's err means only that its
// Redis did not answer (yet): unreachable, or silent past the check's own
// bound (StartTimeout) while the process itself (ctx) runs on. Such a
// Redis is no reason to refuse the start, as one that answered wrongly
// is: it may come up after us, or be slow this second on a loaded
// machine, and /readyz reads it once it answers. Without the second case
// a Redis slow to answer INFO at start (measured: a loaded CI machine)
// ended the process, as if it had answered with an evicting policy.
func unanswered(ctx context.Context, err error) bool {
	return errors.Is(err, stock.ErrUnavailable) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil)
}

// CheckPolicies reads each Redis's maxmemory-policy at start and refuses
// one that may evict keys (ErrEvictingRedis), unless AllowEviction, when
// it says so loudly. A Redis that cannot be reached yet is no reason to
// refuse (it may come up after us): /readyz reads its policy once it
// answers.
func (c *Checker) CheckPolicies(ctx context.Context) error {
	log := c.cfg.Logger
	for _, p := range c.cfg.Policies {
		name := cmp.Or(p.Name, "stock redis")
		cctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
		policy, err := MaxmemoryPolicy(cctx, p.Redis)
		cancel()
		switch {
		case err == nil:
		case unanswered(ctx, err):
			log.Info(name+" not reachable yet: /readyz checks its maxmemory-policy once it answers", "err", err)
		case errors.Is(err, ErrEvictingPolicy) && c.cfg.AllowEviction:
			log.Warn("REDIS MAY EVICT THE SALE'S KEYS: stock.allow_eviction is on, so this replica runs anyway; "+
				"an evicted stock key reads as sold out, an evicted receipt or idempotency record sells again",
				"redis", name, "maxmemory_policy", cmp.Or(policy, "unreported"), "err", err)
		case errors.Is(err, ErrEvictingPolicy):
			return fmt.Errorf("%w: %s: %w: under memory pressure it may drop the stock, the receipts and the idempotency "+
				"records, and sell a unit twice; %s", ErrEvictingRedis, name, err, evictionFix)
		default:
			return fmt.Errorf("%s: maxmemory-policy: %w", name, err)
		}
	}
	return nil
}

// CheckServer reads at start what a sale answered sold outlives, the
// cluster's replicas and the clocks, and says what it found. Only a Redis
// without an AOF under RequireAOF refuses the start (ErrNoAOF); the rest
// is logged, and /readyz keeps saying it.
func (c *Checker) CheckServer(ctx context.Context) error {
	if err := c.checkDurability(ctx); err != nil {
		return err
	}
	c.checkClusterReplicas(ctx)
	c.checkClocks(ctx)
	return nil
}

// checkDurability logs what the stock Redis makes of a sale answered
// sold (WARN when only one Redis's memory holds it), and with RequireAOF
// refuses a Redis without an AOF. A Redis that cannot be reached yet is
// no reason to refuse (it may come up after us): /readyz reads it once it
// answers.
func (c *Checker) checkDurability(ctx context.Context) error {
	dc, log := c.cfg.Durability, c.cfg.Logger
	if dc == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	d, err := ReadDurability(cctx, dc.Redis)
	cancel()
	switch {
	case err == nil:
	case unanswered(ctx, err):
		log.Info("stock redis not reachable yet: /readyz reads its persistence once it answers", "err", err)
		return nil
	case c.cfg.RequireAOF:
		return fmt.Errorf("%w: stock.require_aof is on and its persistence cannot be read: %w", ErrNoAOF, err)
	default:
		log.Warn("could not read the stock Redis's persistence: GET /info cannot say what a 200 survives", "err", err)
		return nil
	}
	d.ReplicaAcks = dc.ReplicaAcks
	attrs := []any{"promise", d.Promise(), "aof", d.AOF, "fsync", d.Fsync, "waitaof", d.WaitAOF,
		"redis_version", d.Version, "min_replica_acks", dc.ReplicaAcks, "rdb_changes_since_last_save", d.UnsavedChanges}
	if !d.LastSave.IsZero() {
		attrs = append(attrs, "rdb_last_save", d.LastSave.UTC().Format(time.RFC3339))
	}
	switch {
	case !d.AOF && c.cfg.RequireAOF:
		return fmt.Errorf("%w: stock.require_aof is on, and %s; %s, or set stock.require_aof: false",
			ErrNoAOF, d.Promise(), aofFix)
	case d.MemoryOnly():
		log.Warn("stock redis durability", append(attrs, "fix", aofFix)...)
	default:
		log.Info("stock redis durability", attrs...)
	}
	c.setDurability(d)
	return nil
}

// setDurability takes d as the reading, due again in an Every.
func (c *Checker) setDurability(d Durability) {
	c.dur.Seed(d, c.cfg.Now().Add(c.dur.Every))
	c.mu.Lock()
	c.durSaid = d.Promise()
	c.mu.Unlock()
}

// checkClusterReplicas says at start which masters have fewer replicas
// than stock.min_replica_acks: every sale there is answered unconfirmed
// (WAIT cannot be met) until one joins. A warning, not a refusal: a
// replica may be on its way (a restart, a failover's rejoin).
func (c *Checker) checkClusterReplicas(ctx context.Context) {
	dc := c.cfg.Durability
	if dc == nil || dc.ReplicaAcks <= 0 {
		return
	}
	cc, ok := dc.Redis.(*redis.ClusterClient)
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	ms, err := ClusterReplicas(cctx, cc)
	if err != nil {
		c.cfg.Logger.Warn("could not count the cluster's replicas", "err", err)
		return
	}
	for _, m := range ms {
		if m.Replicas < dc.ReplicaAcks {
			c.cfg.Logger.Warn("a cluster master has fewer replicas than stock.min_replica_acks: its sales are answered unconfirmed until one joins",
				"master", m.Addr, "replicas", m.Replicas, "min_replica_acks", dc.ReplicaAcks)
		}
	}
}

// checkClocks reads the clocks at start and says what it found: WARN when
// one is off the primary's by more than the bound or a replica's cannot
// be read. It never refuses the start: the primary's clock decides every
// window now, a replica's only after a failover, and a replica's host is
// no reason to stop every replica selling; /readyz keeps saying it. A
// primary that cannot be reached yet is read by /readyz once it answers.
func (c *Checker) checkClocks(ctx context.Context) {
	w, log := c.cfg.Clocks, c.cfg.Logger
	if w == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	clocks, err := w.Clocks.ReadClocks(cctx)
	cancel()
	switch {
	case unanswered(ctx, err):
		log.Info("stock redis not reachable yet: /readyz reads its clock once it answers", "err", err)
		return
	case err != nil:
		log.Warn("could not read the stock Redis's clock: items' windows assume it is right", "err", err)
		return
	}
	c.setClocks(clocks)
	attrs := []any{"max_clock_skew", w.MaxSkew, "process", clocks.Process.String()}
	for _, r := range clocks.Replicas {
		attrs = append(attrs, "replica", r.String())
	}
	if p := clocks.Problems(w.MaxSkew); len(p) > 0 {
		log.Warn("CLOCK SKEW: a clock is off the stock Redis primary's, or unread; after a failover items' "+
			"windows move by a replica's skew (keep the hosts on NTP)", append(attrs, "problems", p)...)
		return
	}
	log.Info("stock redis clocks", attrs...)
}

// setClocks takes clocks as the reading, due again in an Every.
func (c *Checker) setClocks(clocks Clocks) {
	c.clocks.Seed(clocks, c.cfg.Now().Add(c.clocks.Every))
	said := clockProblems(clocks, c.cfg.Clocks.MaxSkew)
	c.mu.Lock()
	c.clockSaid = &said
	c.mu.Unlock()
}

// Clocks is the last full reading of the clocks; nil before the primary
// answered, or without a ClockWatch.
func (c *Checker) Clocks() *Clocks { return c.clocks.Last() }

// Durability is the last reading of what a sale answered sold outlives;
// nil before the Redis answered, or without a DurabilityCheck.
func (c *Checker) Durability() *Durability { return c.dur.Last() }

// Redis is /readyz's "redis" state once the stock Redis answers a ping:
// OK, or what is wrong with a server's policy or persistence; and
// allowed, the evicting policies AllowEviction lets run.
func (c *Checker) Redis(ctx context.Context) (state, allowed string) {
	if state, allowed = c.policies(ctx); state != OK {
		return state, ""
	}
	return c.durability(ctx), allowed
}

// OK is a state with nothing wrong: /readyz's "ok".
const OK = "ok"

// policies reads the maxmemory-policy of every Policies Redis. An
// evicting one fails the state, unless AllowEviction, when it is reported
// in allowed instead. A lock Redis that cannot be reached is left to the
// lock's own check.
func (c *Checker) policies(ctx context.Context) (state, allowed string) {
	var notes []string
	for _, p := range c.cfg.Policies {
		pctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		policy, err := MaxmemoryPolicy(pctx, p.Redis)
		cancel()
		prefix := ""
		if p.Name != "" {
			prefix = p.Name + ": "
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrEvictingPolicy) && c.cfg.AllowEviction:
			notes = append(notes, prefix+"allowed: maxmemory-policy "+cmp.Or(policy, "unreported"))
		case p.Name != "" && errors.Is(err, stock.ErrUnavailable):
		default:
			return prefix + err.Error(), ""
		}
	}
	return OK, strings.Join(notes, "; ")
}

// durability reads the stock Redis's persistence again when the last
// reading is due, logs a change of what a sale promises, and answers OK,
// unless RequireAOF and the Redis has no AOF, or none could be read.
func (c *Checker) durability(ctx context.Context) string {
	dc := c.cfg.Durability
	if dc == nil {
		return OK
	}
	d := c.dur.Get(c.cfg.Now(), func() (Durability, error) {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		defer cancel()
		d, err := ReadDurability(rctx, dc.Redis)
		if err != nil {
			if ok, suppressed := c.cfg.Logs.Allow("durability"); ok {
				c.cfg.Logger.Warn("could not read the stock Redis's persistence", "err", err, "suppressed", suppressed)
			}
			return d, err
		}
		d.ReplicaAcks = dc.ReplicaAcks
		c.logDurability(ctx, d)
		return d, nil
	})
	if !c.cfg.RequireAOF {
		return OK
	}
	switch {
	case d == nil:
		return "durability unknown: stock.require_aof needs the Redis to report its AOF (INFO persistence)"
	case !d.AOF:
		return "no AOF: stock.require_aof refuses a Redis that keeps sales in memory only (appendonly no)"
	}
	return OK
}

// logDurability logs a reading whose promise is not the last one's.
func (c *Checker) logDurability(ctx context.Context, d Durability) {
	c.mu.Lock()
	prev := c.durSaid
	c.durSaid = d.Promise()
	c.mu.Unlock()
	if prev == d.Promise() {
		return
	}
	level := slog.LevelInfo
	if d.MemoryOnly() {
		level = slog.LevelWarn
	}
	attrs := []any{"promise", d.Promise(), "aof", d.AOF, "fsync", d.Fsync, "redis_version", d.Version}
	if prev == "" { // not reachable at start: this is the first reading
		c.cfg.Logger.Log(ctx, level, "stock redis durability", attrs...)
		return
	}
	c.cfg.Logger.Log(ctx, level, "stock redis durability changed", append(attrs, "was", prev)...)
}

// Clock is /readyz's "clock": "" when every clock is within the bound,
// else what is off. A warning, never a 503 (the primary's clock decides
// now, and a replica's host is no reason to stop selling); a change is
// logged.
func (c *Checker) Clock(ctx context.Context) string {
	w := c.cfg.Clocks
	if w == nil {
		return ""
	}
	clocks := c.clocks.Get(c.cfg.Now(), func() (Clocks, error) {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		defer cancel()
		return w.Clocks.ReadClocks(rctx)
	})
	if clocks == nil {
		return ""
	}
	// This process's clock against the primary's, read fresh: a step of
	// either shows within FreshEvery, not at the next full reading.
	if p := c.fresh.Get(c.cfg.Now(), func() (ClockSkew, error) {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		defer cancel()
		return w.Clocks.ReadProcess(rctx)
	}); p != nil {
		fresh := *clocks
		fresh.Process = *p
		clocks = &fresh
	}
	says := clockProblems(*clocks, w.MaxSkew)
	c.mu.Lock()
	prev := c.clockSaid
	c.clockSaid = &says
	c.mu.Unlock()
	if prev == nil || *prev != says {
		switch {
		case says != "":
			c.cfg.Logger.Warn("clock skew", "clocks", says)
		case prev != nil:
			c.cfg.Logger.Info("clock skew within stock.max_clock_skew again", "max_clock_skew", w.MaxSkew)
		}
	}
	return says
}

// clockProblems is /readyz's "clock" for reading clocks: "" when every
// clock is within bound.
func clockProblems(clocks Clocks, bound time.Duration) string {
	p := clocks.Problems(bound)
	if len(p) == 0 {
		return ""
	}
	return fmt.Sprintf("off the stock Redis primary's clock by more than %s (stock.max_clock_skew), or unread: %s; "+
		"after a failover items' windows move by a replica's skew", bound, Named(p, maxNamed))
}

// maxNamed bounds the things a warning names; the others are counted.
const maxNamed = 10

// Named lists names, the first n of them and the rest counted.
func Named(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
