package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lab/bench/peers"
)

// MicroRow is one (subject, contenders) result of the lock micro-benchmark.
type MicroRow struct {
	Subject    string `json:"subject"`
	Kind       string `json:"kind"`
	Server     string `json:"server"`
	Contenders int    `json:"contenders"`
	// Stock is N, the units to sell; chosen per row from a calibration.
	Stock        int64   `json:"stock"`
	Sales        int64   `json:"sales"`
	Acquisitions int64   `json:"acquisitions"`
	Seconds      float64 `json:"seconds"` // first Lock call to last sale
	SalesPerSec  float64 `json:"sales_per_sec"`
	// AcquireRT and LockRT are lock round trips per acquisition: those sent
	// while acquiring, and all of them (acquire, release, background). -1
	// when not applicable (lock-free) or not observable.
	AcquireRT float64 `json:"acquire_rt_per_sale"`
	LockRT    float64 `json:"lock_rt_per_sale"`
	WaitP50ms float64 `json:"wait_p50_ms"`
	WaitP99ms float64 `json:"wait_p99_ms"`
	// Fairness is the busiest contender's sales over a fair share (N/C).
	Fairness float64 `json:"fairness"`
	// GaveUp counts lock calls a peer library abandoned and we repeated.
	GaveUp int64 `json:"gave_up,omitempty"`
	// StockLeft and Lucky are read back after the row; InvariantOK means
	// StockLeft == 0, Lucky == Stock, and Sales == Stock.
	StockLeft   int64  `json:"stock_left"`
	Lucky       int64  `json:"lucky"`
	InvariantOK bool   `json:"invariant_ok"`
	Unavailable bool   `json:"unavailable,omitempty"`
	Error       string `json:"error,omitempty"`
	// Evidence is what the row spent per sale (CPU, disk syncs).
	Evidence Evidence `json:"evidence"`
	// Runs is every run's sales/s, in run order; the other fields are the
	// median run's (Config.MicroRuns).
	Runs []float64 `json:"runs,omitempty"`
}

// runOrder is the order of the subjects in micro run number run (from 0):
// as listed, then reversed, alternately. A drift over the runs (a JVM still
// compiling, the machine's load easing) then does not always favour the
// subject listed second of a compared pair: each goes first in alternate
// runs.
func runOrder(subjects []Subject, run int) []Subject {
	if run%2 == 0 {
		return subjects
	}
	rev := slices.Clone(subjects)
	slices.Reverse(rev)
	return rev
}

// medianRow is the row a subject's runs report: the median run by sales/s,
// or, if any run failed (an error, a broken invariant), the first failed
// run, so that one bad run is never hidden by two good ones.
func medianRow(rows []MicroRow) MicroRow {
	runs := make([]float64, len(rows))
	for i, m := range rows {
		runs[i] = m.SalesPerSec
	}
	pick := -1
	for i, m := range rows {
		if !m.InvariantOK || m.Error != "" {
			pick = i
			break
		}
	}
	if pick < 0 {
		order := make([]int, len(rows))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rows[a].SalesPerSec, rows[b].SalesPerSec) })
		pick = order[len(order)/2]
	}
	row := rows[pick]
	if len(rows) > 1 {
		row.Runs = runs
	}
	return row
}

// phaseOut is what one run of the sale loop measured.
type phaseOut struct {
	sales, acquisitions int64
	elapsed             time.Duration
	waits               []time.Duration
	perContender        []int64
	counts              counts
	zkPackets           int64
	mysqlQueries        int64
	evidence            Evidence
	stock, lucky        int64
}

// The ZooKeeper JIT warm-up: before the first ZooKeeper row, jitWarmFor of
// untimed sales with jitWarmContenders contenders. One contender, because
// then every sale is a create, a getChildren and a delete at the server
// (with more, cohort passes leave half the sales without a request): about
// 12,000 cycles, 36,000 requests on this machine. With 8 contenders for 5s
// ZooKeeper still spent 984 µs of CPU per uncontended zklock sale in the
// first runs, against 514 once warm (BenchmarkAcquireRelease, 3 × 5000).
const (
	jitWarmFor        = 15 * time.Second
	jitWarmContenders = 1
)

// microRow measures subj with c contenders over cfg.Sets processes: a short
// calibration sizes N so the row takes about cfg.RowTarget, then the real
// run sells N units and checks the invariant.
func (r *runner) microRow(ctx context.Context, subj Subject, c int) MicroRow {
	row := MicroRow{Subject: subj.Name, Kind: subj.Kind, Server: subj.Server, Contenders: c, AcquireRT: -1, LockRT: -1}
	fail := func(err error) MicroRow {
		row.Error = err.Error()
		row.Unavailable = errors.Is(err, ErrUnavailable)
		return row
	}
	if !r.serverUp(subj.Server) {
		return fail(errNoServer(subj.Server))
	}
	var (
		counter Counter
		gaveUp  peers.GaveUp
		sets    []procSet
	)
	defer func() {
		for _, s := range sets {
			if err := s.close(); err != nil {
				r.log.Debug("closing client set", "subject", subj.Name, "err", err)
			}
		}
	}()
	for range r.cfg.Sets {
		s, err := subj.open(ctx, r.servers, &counter, &gaveUp)
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", subj.Name, err))
		}
		sets = append(sets, &onceSet{procSet: s})
	}
	id := fmt.Sprintf("%s-%d-%d", subj.Name, c, time.Now().UnixNano())
	if err := r.warmUp(ctx, subj, sets, id+"-warm"); err != nil {
		return fail(fmt.Errorf("warm-up: %w", err))
	}

	if subj.Server == "zookeeper" && !r.jitWarm && !r.cfg.Quick {
		// ZooKeeper is a JVM: its first thousands of requests run
		// interpreted, and whichever subject ran first on it paid for that
		// (zookeeper, before zk-lock). Sell untimed for a while first.
		r.jitWarm = true
		if _, err := r.phase(ctx, subj, sets, jitWarmContenders, id+"-jit", 1<<40, jitWarmFor, 0, &counter); err != nil {
			return fail(fmt.Errorf("JIT warm-up: %w", err))
		}
	}
	n := r.cfg.Stock
	if n == 0 {
		cal, err := r.phase(ctx, subj, sets, c, id+"-cal", 1<<40, r.cfg.Calibrate, 0, &counter)
		if err != nil {
			return fail(fmt.Errorf("calibration: %w", err))
		}
		if cal.stock+cal.lucky != 1<<40 || cal.lucky != cal.sales {
			return fail(fmt.Errorf("calibration broke the invariant: stock %d + lucky %d, %d sales counted", cal.stock, cal.lucky, cal.sales))
		}
		rate := float64(cal.sales) / max(cal.elapsed.Seconds(), r.cfg.Calibrate.Seconds()/2)
		n = int64(rate * r.cfg.RowTarget.Seconds())
		n = min(max(n, r.cfg.MinStock), r.cfg.MaxStock)
	}
	gaveUp.Store(0)
	out, err := r.phase(ctx, subj, sets, c, id, n, 0, 0, &counter)
	row.Stock = n
	row.Sales, row.Acquisitions = out.sales, out.acquisitions
	row.Seconds = out.elapsed.Seconds()
	row.StockLeft, row.Lucky = out.stock, out.lucky
	row.GaveUp = gaveUp.Load()
	row.Evidence = out.evidence
	row.InvariantOK = err == nil && out.stock == 0 && out.lucky == n && out.sales == n
	if out.elapsed > 0 {
		row.SalesPerSec = float64(out.sales) / out.elapsed.Seconds()
	}
	if len(out.waits) > 0 && !subj.lockFree {
		slices.Sort(out.waits)
		row.WaitP50ms = ms(out.waits[len(out.waits)/2])
		row.WaitP99ms = ms(out.waits[min(len(out.waits)-1, len(out.waits)*99/100)])
	}
	if out.sales > 0 {
		row.Fairness = float64(slices.Max(out.perContender)) / (float64(out.sales) / float64(c))
	}
	if acq := float64(out.acquisitions); acq > 0 {
		switch subj.Server {
		case "zookeeper":
			row.LockRT = float64(out.zkPackets) / acq
			// The count is server-side (mntr), so acquire and release
			// requests cannot be told apart, and a cohort lock deletes its
			// node once per batch, not per acquisition: report the total
			// as an upper bound on the acquire round trips.
			row.AcquireRT = row.LockRT
		case "mysql":
			// Server-side too (Questions): every statement of the row,
			// keep-alives and token mints included; an upper bound.
			row.LockRT = float64(out.mysqlQueries) / acq
			row.AcquireRT = row.LockRT
		default:
			row.LockRT = float64(out.counts.total()) / acq
			row.AcquireRT = float64(out.counts.Acquire) / acq
		}
	}
	if err != nil {
		return fail(err)
	}
	if !row.InvariantOK {
		row.Error = fmt.Sprintf("invariant broken: stock %d (want 0), lucky %d and %d sales counted (want %d)", out.stock, out.lucky, out.sales, n)
	}
	return row
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// warmUp has every process take and release a lock once (dialling,
// subscribing, granting sessions) so the measured run starts warm.
func (r *runner) warmUp(ctx context.Context, subj Subject, sets []procSet, key string) error {
	for i, s := range sets {
		if err := r.data[i%len(r.data)].Ping(ctx).Err(); err != nil {
			return fmt.Errorf("%w: redis: %w", ErrUnavailable, err)
		}
		if subj.lockFree {
			continue
		}
		ct, err := s.contender(ctx, key)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		unlock, err := ct.Lock(wctx)
		if err == nil {
			err = unlock(wctx)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// phase runs the sale loop once: c goroutines, goroutine g in process
// g%len(sets), each looping lock → sell → unlock until the stock is gone
// or, with timebox > 0, until its first sale after timebox has passed.
//
// hold is how long each sale keeps the lock after its write (the
// critical-section time of the hold rows; 0 in every other row).
func (r *runner) phase(ctx context.Context, subj Subject, sets []procSet, c int, id string, stock int64, timebox, hold time.Duration, counter *Counter) (phaseOut, error) {
	k := keysFor(id)
	if err := k.reset(ctx, r.data[0], stock); err != nil {
		return phaseOut{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	cs := make([]contender, c)
	if !subj.lockFree {
		for g := range cs {
			ct, err := sets[g%len(sets)].contender(ctx, "bench-"+id)
			if err != nil {
				return phaseOut{}, err
			}
			cs[g] = ct
		}
	}

	var (
		out      = phaseOut{perContender: make([]int64, c)}
		waits    = make([][]time.Duration, c)
		acquired atomic.Int64
		stop     atomic.Bool
		lastNs   atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	// loopCtx ends the waits once the stock is gone (or on error, or at the
	// row's deadline); the critical section and unlock use ctx, so a cut
	// never leaves a half-written sale.
	loopCtx, cancel := context.WithTimeout(ctx, r.cfg.RowTimeout)
	defer cancel()
	halt := func(err error) {
		if err != nil {
			errOnce.Do(func() { firstErr = err })
		}
		stop.Store(true)
		cancel()
	}
	before := counter.snapshot()
	var zkBefore int64
	if subj.Server == "zookeeper" {
		zkBefore, _ = zkPackets(ctx, r.servers.ZooKeeper)
	}
	var myBefore int64
	if subj.Server == "mysql" {
		myBefore, _ = mysqlQueries(ctx, r.servers.MySQL)
	}
	probeBefore := r.probe(ctx, subj.Server)
	start := time.Now()
	sold := func() {
		now := int64(time.Since(start))
		for {
			old := lastNs.Load()
			if now <= old || lastNs.CompareAndSwap(old, now) {
				return
			}
		}
	}
	// The timebox ends a row at its first sale after it, not at the box
	// itself: a row that sold nothing measured nothing, and on a busy
	// machine a short box can pass before the first acquisition (a fresh
	// key's ZooKeeper parents, a cold JIT) is through.
	var boxOver atomic.Bool
	var sales atomic.Int64
	if timebox > 0 {
		t := time.AfterFunc(timebox, func() {
			boxOver.Store(true)
			if sales.Load() > 0 {
				halt(nil)
			}
		})
		defer t.Stop()
	}
	for g := range c {
		data := r.data[g%len(r.data)]
		wg.Go(func() {
			for !stop.Load() {
				left, ok, wait, err := r.sellOnce(ctx, loopCtx, subj, cs[g], data, k, &acquired, &stop, hold)
				switch {
				case err != nil && loopCtx.Err() != nil && stop.Load():
					return // cut short because the row is over
				case err != nil:
					halt(fmt.Errorf("contender %d: %w", g, err))
					return
				case ok:
					sold()
					out.perContender[g]++
					waits[g] = append(waits[g], wait)
					if sales.Add(1); left == 0 || boxOver.Load() {
						halt(nil)
					}
				default: // sold out, or stopped before selling
					halt(nil)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-loopCtx.Done():
		select {
		case <-done:
		case <-time.After(r.cfg.RowTimeout / 4):
			// A contender stuck in a call that ignores ctx (zk.Lock):
			// closing the clients makes it return.
			halt(fmt.Errorf("row did not finish within %v", r.cfg.RowTimeout))
			for _, s := range sets {
				_ = s.close()
			}
			<-done
		}
	}
	if loopCtx.Err() == context.DeadlineExceeded && !stop.Load() {
		halt(fmt.Errorf("row did not finish within %v", r.cfg.RowTimeout))
	}
	out.elapsed = time.Duration(lastNs.Load())
	probeAfter := r.probe(ctx, subj.Server)
	out.counts = counter.snapshot().sub(before)
	if subj.Server == "zookeeper" {
		if after, err := zkPackets(ctx, r.servers.ZooKeeper); err == nil {
			out.zkPackets = after - zkBefore
		}
	}
	if subj.Server == "mysql" {
		if after, err := mysqlQueries(ctx, r.servers.MySQL); err == nil {
			out.mysqlQueries = after - myBefore - 1 // not our own SHOW STATUS
		}
	}
	out.acquisitions = acquired.Load()
	for g := range c {
		out.sales += out.perContender[g]
		out.waits = append(out.waits, waits[g]...)
	}
	out.evidence = evidence(probeBefore, probeAfter, out.sales)
	var err error
	if out.stock, out.lucky, err = k.read(ctx, r.data[0]); err != nil {
		return out, err
	}
	return out, firstErr
}

// sellOnce is one iteration of a contender: lock (timed), sell, unlock; or,
// lock-free, the sale script. ok reports a unit sold; wait is the time spent
// in Lock.
func (r *runner) sellOnce(ctx, loopCtx context.Context, subj Subject, ct contender, data *redis.Client, k saleKeys, acquired *atomic.Int64, stop *atomic.Bool, hold time.Duration) (left int64, ok bool, wait time.Duration, err error) {
	if subj.lockFree {
		left, ok, err = sellAtomic(ctx, data, k)
		return left, ok, 0, err
	}
	t0 := time.Now()
	unlock, err := ct.Lock(withPhase(loopCtx, phaseAcquire))
	if err != nil {
		return 0, false, 0, err
	}
	wait = time.Since(t0)
	acquired.Add(1)
	if !stop.Load() {
		left, ok, err = sellLocked(ctx, data, k)
		if err == nil && hold > 0 {
			time.Sleep(hold) // stockd's work.delay: the lock stays held
		}
	}
	uctx, cancel := context.WithTimeout(withPhase(ctx, phaseRelease), 10*time.Second)
	defer cancel()
	if uerr := unlock(uctx); uerr != nil && err == nil {
		err = uerr
	}
	return left, ok, wait, err
}
