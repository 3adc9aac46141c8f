package dashboard

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/metrics"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// fakeReplica is a stockd as the dashboard sees it: the real metrics
// registry behind /metrics, and settable /info, /readyz, /leader, /stock.
type fakeReplica struct {
	*httptest.Server
	m *metrics.Metrics

	mu     sync.Mutex
	name   string
	ready  bool
	memory string // /readyz's memory warning, when ready
	leader api.Leader
	stock  api.Stock
	resets []string // "token body" of every POST /stock/reset
	status int      // POST /stock/reset's status; 0 is 200
	// items is GET /items/:id's answers; nil: items off (GET /items 404).
	items     map[string]api.Item
	itemReads int // GET /items calls
}

func newFakeReplica(t *testing.T, name, backend string) *fakeReplica {
	t.Helper()
	f := &fakeReplica{name: name, ready: true,
		m:      metrics.New(prometheus.Labels{"replica": name, "backend": backend}),
		leader: api.Leader{Backend: "none", Self: name}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { f.metrics().Handler().ServeHTTP(w, r) })
	mux.HandleFunc("GET /info", func(w http.ResponseWriter, r *http.Request) {
		f.json(w, http.StatusOK, api.Info{Backend: backend, Fencing: true, Mode: "locked", From: api.From{Replica: name}})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		ready, memory := f.ready, f.memory
		f.mu.Unlock()
		if ready {
			f.json(w, http.StatusOK, api.Ready{Fence: api.OK, Lock: api.OK, Redis: api.OK, Memory: memory})
			return
		}
		f.json(w, http.StatusServiceUnavailable, api.Ready{Fence: api.OK, Lock: "dial tcp: refused", Redis: api.OK})
	})
	mux.HandleFunc("GET /leader", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		v := f.leader
		f.mu.Unlock()
		f.json(w, http.StatusOK, v)
	})
	mux.HandleFunc("GET /stock", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		v := f.stock
		f.mu.Unlock()
		f.json(w, http.StatusOK, v)
	})
	mux.HandleFunc("POST /stock/reset", func(w http.ResponseWriter, r *http.Request) {
		var body api.Reset
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.resets = append(f.resets, r.Header.Get("X-Admin-Token")+" "+r.Header.Get("Content-Type"))
		status := f.status
		f.mu.Unlock()
		if status != 0 {
			f.json(w, status, api.Problem{Error: "unauthorized"})
			return
		}
		f.json(w, http.StatusOK, api.Stock{Stock: body.Stock})
	})
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.itemReads++
		if f.items == nil {
			f.json(w, http.StatusNotFound, api.Problem{Error: "items are off on this replica"})
			return
		}
		body := api.Items{Items: []api.ItemSettings{}}
		for _, id := range slices.Sorted(maps.Keys(f.items)) {
			body.Items = append(body.Items, api.ItemSettings{ID: id, Stock: f.items[id].Initial})
		}
		f.json(w, http.StatusOK, body)
	})
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		it, ok := f.items[r.PathValue("id")]
		f.mu.Unlock()
		if !ok {
			f.json(w, http.StatusNotFound, api.Problem{Error: "no such item"})
			return
		}
		f.json(w, http.StatusOK, it)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeReplica) json(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeReplica) set(fn func(f *fakeReplica)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeReplica) metrics() *metrics.Metrics {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m
}

// restart gives the replica fresh counters, as a new process has.
func (f *fakeReplica) restart() {
	f.set(func(f *fakeReplica) { f.m = metrics.New(prometheus.Labels{"replica": f.name}) })
}

func (f *fakeReplica) sell(n int) {
	f.metrics().Results.WithLabelValues(string(api.Sold)).Add(float64(n))
}

func newAgg(t *testing.T, cfg Config) *Aggregator {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func count(st State, r api.Result) int64 {
	for _, c := range st.Results {
		if c.Result == string(r) {
			return c.N
		}
	}
	return -1
}

// Two polls of two replicas: results summed by label (every api.Results
// label listed), sales/s from the sold counter's delta, the replica names
// and the lock backend from /info, readiness from /readyz.
func TestPollResultsRatesAndReplicas(t *testing.T) {
	r1 := newFakeReplica(t, "stockd-1", "redis")
	r2 := newFakeReplica(t, "stockd-2", "redis")
	r2.set(func(f *fakeReplica) { f.ready = false })
	a := newAgg(t, Config{Replicas: []string{r1.URL, r2.URL + "/"}})

	r1.sell(5)
	r2.metrics().Results.WithLabelValues(string(api.SoldOut)).Add(3)
	r2.metrics().Results.WithLabelValues(string(api.Fenced)).Inc()
	began := time.Now() // before the first poll's clock reading
	first := a.Poll(t.Context())
	if len(first.Results) != len(api.Results) {
		t.Fatalf("got %d result labels, want every one of api.Results (%d)", len(first.Results), len(api.Results))
	}
	if count(first, api.Sold) != 5 || count(first, api.SoldOut) != 3 || count(first, api.Fenced) != 1 || count(first, api.Busy) != 0 {
		t.Fatalf("results %+v, want sold 5 sold_out 3 fenced 1 busy 0", first.Results)
	}
	if first.Replicas[0].Sales != 0 {
		t.Fatalf("first poll has no rate yet, got %v", first.Replicas[0].Sales)
	}

	const gap = 100 * time.Millisecond
	time.Sleep(gap) // the polls' clock readings are at least this far apart
	r1.sell(20)
	st := a.Poll(t.Context())
	polled := time.Since(began) // at least as far apart as the readings
	if st.Backend != "redis" {
		t.Fatalf("backend %q, want redis", st.Backend)
	}
	one, two := st.Replicas[0], st.Replicas[1]
	if one.Name != "stockd-1" || two.Name != "stockd-2" || one.URL != r1.URL || two.URL != r2.URL {
		t.Fatalf("rows %+v %+v: want names from /info and URLs without the trailing slash", one, two)
	}
	// 20 sales between two readings at least gap and at most polled
	// apart: the rate lies between, however slow the machine.
	lo, hi := 20/polled.Seconds(), 20/gap.Seconds()
	if one.Sold != 25 || one.Sales < lo*0.999 || one.Sales > hi*1.001 {
		t.Fatalf("replica 1: sold %d at %.1f/s, want 25 at %.1f–%.1f/s (20 sales over %v–%v)", one.Sold, one.Sales, lo, hi, gap, polled)
	}
	if two.Sales != 0 || st.Sales != one.Sales {
		t.Fatalf("replica 2 %.1f/s, total %.1f/s, want 0 and replica 1's", two.Sales, st.Sales)
	}
	if !one.Ready || !one.Up || two.Ready || !two.Up || !strings.Contains(two.NotOK, "lock: dial tcp") {
		t.Fatalf("readiness: %+v %+v, want 1 ready, 2 up but not ready for its lock", one, two)
	}
	if one.Warnings != "" {
		t.Fatalf("replica 1 warnings %q, want none", one.Warnings)
	}
	r1.set(func(f *fakeReplica) { f.memory = "maxmemory 16.0 MiB, used_memory 15.0 MiB: short" })
	if w := a.Poll(t.Context()).Replicas[0]; !w.Ready || w.Warnings != "memory: maxmemory 16.0 MiB, used_memory 15.0 MiB: short" {
		t.Fatalf("replica 1 with a memory warning: %+v, want ready with it in warnings", w)
	}
}

// Replicas that disagree on the lock backend are shown as mixed; one that
// does not answer is down, and the others still count.
func TestPollMixedBackendsAndDownReplica(t *testing.T) {
	r1 := newFakeReplica(t, "stockd-1", "redis")
	r2 := newFakeReplica(t, "stockd-2", "etcd")
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	r1.sell(7)
	a := newAgg(t, Config{Replicas: []string{r1.URL, r2.URL, deadURL}})
	st := a.Poll(t.Context())
	if st.Backend != "mixed (redis, etcd)" {
		t.Fatalf("backend %q, want mixed (redis, etcd)", st.Backend)
	}
	if d := st.Replicas[2]; d.Up || d.Ready || d.Error == "" || d.Name != deadURL {
		t.Fatalf("dead replica row %+v: want down, not ready, an error, named by URL", d)
	}
	if count(st, api.Sold) != 7 {
		t.Fatalf("sold %d, want 7 from the live replica", count(st, api.Sold))
	}
}

// A replica whose counters went down restarted: its rate starts afresh
// instead of going negative.
func TestPollRestartedReplica(t *testing.T) {
	r1 := newFakeReplica(t, "stockd-1", "redis")
	a := newAgg(t, Config{Replicas: []string{r1.URL}})
	r1.sell(100)
	a.Poll(t.Context())
	r1.restart()
	r1.sell(2)
	time.Sleep(20 * time.Millisecond)
	st := a.Poll(t.Context())
	if got := st.Replicas[0].Sales; got < 0 || st.Replicas[0].Sold != 2 {
		t.Fatalf("after a restart: %.1f/s sold %d, want a non-negative rate and sold 2", got, st.Replicas[0].Sold)
	}
}

// The leader is the highest term any replica reports; a replica that has
// not seen the failover yet reports the old leader at a lower term.
func TestPollLeader(t *testing.T) {
	r1 := newFakeReplica(t, "stockd-1", "redis")
	r2 := newFakeReplica(t, "stockd-2", "redis")
	r1.set(func(f *fakeReplica) { f.leader = api.Leader{Leader: "stockd-3", Self: "stockd-1", Term: 7} })
	r2.set(func(f *fakeReplica) {
		f.leader = api.Leader{Leader: "stockd-2", Self: "stockd-2", IsLeader: true, Term: 9}
	})
	a := newAgg(t, Config{Replicas: []string{r1.URL, r2.URL}})
	st := a.Poll(t.Context())
	if st.Leader.Leader != "stockd-2" || st.Leader.Term != 9 || st.Leader.Error != "" {
		t.Fatalf("leader %+v, want stockd-2 term 9", st.Leader)
	}
	if st.Replicas[0].Leader || !st.Replicas[1].Leader {
		t.Fatalf("leader flags %v %v, want only stockd-2", st.Replicas[0].Leader, st.Replicas[1].Leader)
	}

	r1.set(func(f *fakeReplica) { f.leader = api.Leader{Backend: "none", Self: "stockd-1"} })
	r2.set(func(f *fakeReplica) { f.leader = api.Leader{Backend: "none", Self: "stockd-2"} })
	if st := a.Poll(t.Context()); st.Leader.Election != "none" || st.Leader.Leader != "" {
		t.Fatalf("leader %+v, want election none", st.Leader)
	}
}

// Without Redis the books come from GET /stock and the initial stock is
// learned as the audit learns it: stock + lucky while lucky is 0.
func TestBooksFromReplicaLearnInitial(t *testing.T) {
	r1 := newFakeReplica(t, "stockd-1", "none")
	a := newAgg(t, Config{Replicas: []string{r1.URL}})
	r1.set(func(f *fakeReplica) { f.stock = api.Stock{Stock: 200} })
	if b := a.Poll(t.Context()).Books; !b.Known || b.Source != "replica" || b.Initial != 200 || !b.Learned || b.Oversold {
		t.Fatalf("books %+v, want known from the replica, initial learned 200, not oversold", b)
	}
	r1.set(func(f *fakeReplica) { f.stock = api.Stock{Stock: 0, Lucky: 200} })
	if b := a.Poll(t.Context()).Books; b.Oversold {
		t.Fatalf("books %+v: exactly sold out is not oversold", b)
	}
	r1.set(func(f *fakeReplica) { f.stock = api.Stock{Stock: 40, Lucky: 200} })
	if b := a.Poll(t.Context()).Books; !b.Oversold || b.Excess != 40 {
		t.Fatalf("books %+v, want oversold by 40", b)
	}
	// A reset: lucky back to 0 relearns the initial stock.
	r1.set(func(f *fakeReplica) { f.stock = api.Stock{Stock: 300} })
	if b := a.Poll(t.Context()).Books; b.Oversold || b.Initial != 300 {
		t.Fatalf("books %+v after a reset to 300, want initial 300, not oversold", b)
	}
}

// With Redis the books are read as the sale reads them (Store.Books): every
// segment, lucky and the initial key stockd's reset writes, at one instant;
// a negative stock is oversold too, and a key the sale could not read is
// an error shown, not a 0.
func TestBooksFromRedis(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	r1 := newFakeReplica(t, "stockd-1", "redis")
	a := newAgg(t, Config{Replicas: []string{r1.URL}, Redis: rdb, StockKey: "s", LuckyKey: "l", Segments: 2})
	ctx := t.Context()
	if err := rdb.MSet(ctx, "s", 60, "s:1", 40, "l", 100, "s:initial", 200).Err(); err != nil {
		t.Fatal(err)
	}
	if b := a.Poll(ctx).Books; !b.Known || b.Source != "redis" || b.Stock != 100 || b.Lucky != 100 || b.Initial != 200 || b.Learned || b.Oversold {
		t.Fatalf("books %+v, want stock 60+40, lucky 100, initial 200 read, consistent", b)
	}
	if err := rdb.MSet(ctx, "s", -3, "s:1", 0, "l", 203).Err(); err != nil {
		t.Fatal(err)
	}
	if b := a.Poll(ctx).Books; !b.Oversold || b.Excess != 0 || b.Stock != -3 {
		t.Fatalf("books %+v, want oversold by a negative stock", b)
	}
	if err := rdb.MSet(ctx, "s", 10, "l", 230).Err(); err != nil {
		t.Fatal(err)
	}
	if b := a.Poll(ctx).Books; !b.Oversold || b.Excess != 40 {
		t.Fatalf("books %+v, want oversold by 40", b)
	}
	if st := a.Poll(ctx); len(st.History) == 0 || st.History[len(st.History)-1].Stock != 10 {
		t.Fatalf("history %+v, want the last point at stock 10", st.History)
	}
	if err := rdb.Set(ctx, "l", "many", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if b := a.Poll(ctx).Books; b.Known || !strings.Contains(b.Error, "integer") {
		t.Fatalf("books %+v with lucky not an integer, want unknown, the error named", b)
	}
}

// Lock wait quantiles come from the replicas' histograms summed, over the
// recent window, and from since start when the window saw nothing.
func TestLockWaitQuantiles(t *testing.T) {
	r1 := newFakeReplica(t, "stockd-1", "redis")
	r2 := newFakeReplica(t, "stockd-2", "redis")
	a := newAgg(t, Config{Replicas: []string{r1.URL, r2.URL}, WaitWindow: time.Hour})
	if lw := a.Poll(t.Context()).LockWait; !lw.Available || lw.Count != 0 {
		t.Fatalf("lock wait %+v, want available with no acquisition", lw)
	}
	for range 90 {
		r1.metrics().ObserveLockWait(2 * time.Millisecond)
	}
	for range 10 {
		r2.metrics().ObserveLockWait(3 * time.Second)
	}
	lw := a.Poll(t.Context()).LockWait
	if lw.Count != 100 || lw.Span != "last 1h0m0s" {
		t.Fatalf("lock wait %+v, want 100 acquisitions in the window", lw)
	}
	// Buckets 0.1ms·2.5^k: 2ms is in (1.5625ms, 3.90625ms], 3s in (2.38s, 5.96s].
	if lw.P50 <= 0.0015 || lw.P50 > 0.0040 || lw.P99 <= 2.38 || lw.P99 > 5.97 {
		t.Fatalf("p50 %v p99 %v, want ~2ms and ~3s within their buckets", lw.P50, lw.P99)
	}
	body, err := json.Marshal(a.Latest())
	if err != nil || !strings.Contains(string(body), `"lock_wait":{"available":true`) {
		t.Fatalf("state JSON %s: %v", body, err)
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := histogram{bounds: []float64{1, 2, 4}, counts: []float64{10, 30, 40}, count: 50}
	for _, c := range []struct{ q, want float64 }{
		{0.1, 0.5},  // rank 5 in (0,1]: halfway
		{0.4, 1.5},  // rank 20 in (1,2]: halfway
		{0.7, 3},    // rank 35 in (2,4]: halfway
		{0.99, 4.0}, // rank 49.5 in +Inf: the highest finite bound
	} {
		if got := h.quantile(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (histogram{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("empty quantile = %v, want NaN", got)
	}
	d := h.sub(histogram{bounds: []float64{1, 2, 4}, counts: []float64{10, 10, 10}, count: 10})
	if d.count != 40 || d.counts[0] != 0 || d.counts[2] != 30 {
		t.Errorf("sub = %+v", d)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, urls := range [][]string{nil, {"127.0.0.1:8081"}} {
		if _, err := New(Config{Replicas: urls}); err == nil {
			t.Errorf("New(%q) accepted", urls)
		}
	}
}

// The items' table: each item's books and state from the first replica
// that answers, an item whose books do not balance marked, at most
// MaxItems shown, read at most every second; a replica with items off
// gives no table.
func TestPollItems(t *testing.T) {
	down := newFakeReplica(t, "stockd-1", "redis")
	down.Close()
	f := newFakeReplica(t, "stockd-2", "redis")
	items := map[string]api.Item{
		"a": {ID: "a", Stock: 0, Lucky: 10, Initial: 10, State: "open", SoldOut: true},
		"b": {ID: "b", Stock: 3, Lucky: 9, Initial: 10, State: "open"}, // 2 units sold twice
		"c": {ID: "c", Stock: 5, Lucky: 0, Initial: 5, State: "upcoming"},
	}
	for i := range MaxItems {
		id := fmt.Sprintf("z%02d", i)
		items[id] = api.Item{ID: id, Stock: 1, Initial: 1, State: "open"}
	}
	f.set(func(f *fakeReplica) { f.items = items })
	a := newAgg(t, Config{Replicas: []string{down.URL, f.URL}})
	a.itemsEvery = time.Hour // the second poll is within it, however slow the machine
	st := a.Poll(t.Context())
	got := st.Items
	if got.Off || got.Error != "" || len(got.Items) != MaxItems || got.More != 3 {
		t.Fatalf("got %+v, want %d items shown and 3 more", got, MaxItems)
	}
	want := []ItemView{
		{ID: "a", State: "open", Lucky: 10, Initial: 10, SoldOut: true},
		{ID: "b", State: "open", Stock: 3, Lucky: 9, Initial: 10, Oversold: true},
		{ID: "c", State: "upcoming", Stock: 5, Initial: 5},
	}
	if !slices.Equal(got.Items[:3], want) {
		t.Fatalf("got %+v, want %+v", got.Items[:3], want)
	}
	// The next poll, within itemsEvery, keeps the table without reading.
	f.set(func(f *fakeReplica) { f.itemReads = 0 })
	if st := a.Poll(t.Context()); len(st.Items.Items) != MaxItems {
		t.Fatalf("second poll: got %+v, want the table kept", st.Items)
	}
	f.set(func(f *fakeReplica) {
		if f.itemReads != 0 {
			t.Errorf("GET /items read %d times within the second, want 0", f.itemReads)
		}
	})

	off := newFakeReplica(t, "stockd-3", "redis")
	if st := newAgg(t, Config{Replicas: []string{off.URL}}).Poll(t.Context()); !st.Items.Off || len(st.Items.Items) != 0 {
		t.Fatalf("items off: got %+v, want Off and no table", st.Items)
	}
}

// A sale with reservations is judged by its census beside its books: the
// orders by state, read at most every censusEvery, and each invariant it
// breaks named; a sale without them shows none.
func TestCensusOfReservations(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	r1 := newFakeReplica(t, "stockd-1", "redis")
	a := newAgg(t, Config{Replicas: []string{r1.URL}, Redis: rdb})
	ctx := t.Context()
	keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}.Derive(true)
	plain := redisstore.NewStore(rdb, keys)
	if err := plain.Reset(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if b := a.Poll(ctx).Books; !b.Known || b.Census != nil {
		t.Fatalf("books %+v: want no census for a sale without reservations", b)
	}
	store := redisstore.NewStore(rdb, keys).WithReservations()
	if err := store.Reset(ctx, 3); err != nil {
		t.Fatal(err)
	}
	svc := stock.NewService(stock.ServiceConfig{Store: store, Mode: stock.ModeAtomic, PaymentWindow: time.Hour})
	var orders []string
	for range 2 {
		sale, err := svc.ReduceFor(ctx, stock.Buyer{})
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, sale.OrderID)
	}
	if _, err := store.Pay(ctx, orders[0], "p-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Cancel(ctx, orders[1]); err != nil {
		t.Fatal(err)
	}
	a.censusEvery = time.Nanosecond
	c := a.Poll(ctx).Books.Census
	if c == nil || !reflect.DeepEqual(*c, CensusView{Paid: 1, Cancelled: 1, Returned: 1, OK: true}) {
		t.Fatalf("census %+v, want 1 paid, 1 cancelled, 1 returned, ok", c)
	}
	// A unit given back twice: one return more than the orders ended.
	if err := rdb.Incr(ctx, keys.Returned).Err(); err != nil {
		t.Fatal(err)
	}
	if c := a.Poll(ctx).Books.Census; c == nil || c.OK || len(c.Problems) == 0 || !strings.Contains(strings.Join(c.Problems, ";"), "2 units returned") {
		t.Fatalf("census %+v, want the extra return named", c)
	}
	// Within censusEvery the last census is shown, not read again.
	a.censusEvery = time.Hour
	if err := rdb.Decr(ctx, keys.Returned).Err(); err != nil {
		t.Fatal(err)
	}
	if c := a.Poll(ctx).Books.Census; c == nil || c.OK {
		t.Fatalf("census %+v within censusEvery: want the last one, not read again", c)
	}
}
