package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"seckill/internal/api"
	"seckill/internal/lab/loadgen"
)

// response is one reduce answer as the load saw it.
type response struct {
	Sent    time.Time  // when the request was sent
	At      time.Time  // when the answer arrived
	Status  int        // 0 on a transport error
	Result  api.Result // stockd's "result", "" when the body was not stockd's
	Replica string
	Error   string
	Attempt string // the sale's attempt id, on "sold" and "unconfirmed"
	Settled bool   // an "unconfirmed" answer whose receipt says it sold
	// Left is the stock a 200 answer says the sale left, -1 when the
	// answer names none: two 200s that left the same stock sold one unit
	// twice.
	Left int64

	// A named buyer's send (cells with Buyers); zero for anonymous ones.
	Purchase int // index of its purchase in the buyers' plan
	User     string
	Key      string
	Order    string // the order id a 200 answer carries
	Replayed bool   // a 200 that repeats the key's earlier sale
	Retry    loadgen.RetryKind
	Resend   bool // not the purchase's first send
	Cut      bool // given up by the client on purpose (RetryTimeout)
}

// sold: a 200 "sold" answer, replays included.
func (r response) sold() bool { return r.Result == api.Sold && r.Result.Matches(r.Status) }

// load keeps c buyers sending POST /stock/reduce through one URL until
// stopped, recording every answer. Waiting on it is event-driven: each
// answer wakes whoever waits for a matching one.
type load struct {
	url    string
	client *http.Client
	quit   chan struct{}
	wg     sync.WaitGroup
	ended  chan struct{} // closed once every buyer has returned

	// plan, when set, makes the buyers named (buyers.go); nil: anonymous.
	plan *buyerPlan

	mu      sync.Mutex
	resps   []response
	changed chan struct{} // closed and replaced on every answer
}

// startLoad starts c buyers, anonymous or, with plan, named. Each request
// is bounded by reqTimeout; stop waits for the ones in flight rather than
// cancelling them, because a cancelled sale has an unknown outcome and
// would blur the books.
func startLoad(url string, c int, reqTimeout time.Duration, plan *buyerPlan) *load {
	l := &load{
		url: url, client: loadgen.NewClient(2*c, reqTimeout), plan: plan,
		quit: make(chan struct{}), changed: make(chan struct{}), ended: make(chan struct{}),
	}
	for range c {
		if plan != nil {
			l.wg.Go(l.namedBuyer)
		} else {
			l.wg.Go(l.buyer)
		}
	}
	l.endWithBuyers()
	return l
}

func (l *load) buyer() {
	for {
		select {
		case <-l.quit:
			return
		default:
		}
		r := l.reduce()
		l.mu.Lock()
		l.resps = append(l.resps, r)
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
		if r.Result == api.SoldOut {
			// Nothing left to sell: stop hammering, the run's books are final.
			return
		}
		if r.Status >= http.StatusInternalServerError || r.Status == 0 {
			// A replica that fails fast (its server unreachable) would
			// otherwise be asked thousands of times a second, starving the
			// processes under test of CPU; people wait a moment too.
			t := time.NewTimer(errorPause)
			select {
			case <-t.C:
			case <-l.quit:
				t.Stop()
				return
			}
		}
	}
}

// endWithBuyers closes ended once every buyer started so far returned (at
// the sale's end, or stop): its goroutine lives no longer than they do.
func (l *load) endWithBuyers() {
	go func() { l.wg.Wait(); close(l.ended) }()
}

// errLoadEnded: every buyer returned before the awaited answer came.
var errLoadEnded = errors.New("the load ended (every buyer returned) before the answer came")

// errorPause is how long a buyer waits after an error answer.
const errorPause = 20 * time.Millisecond

func (l *load) reduce() response { return l.do(context.Background(), l.url) }

// reduceAt makes one sale at url (a replica directly) outside the buyers,
// and records it with their answers so the books include it. With named
// buyers it is a purchase of its own, so the verdict can place it.
func (l *load) reduceAt(ctx context.Context, url string) response {
	if l.plan != nil {
		i, p := l.plan.extra("s")
		return l.sendAt(ctx, url, i, p, false)
	}
	return l.record(l.do(ctx, url))
}

// record adds r to the answers and wakes whoever waits for one.
func (l *load) record(r response) response {
	l.mu.Lock()
	l.resps = append(l.resps, r)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return r
}

func (l *load) do(ctx context.Context, url string) response {
	return l.send(ctx, url, loadgen.Purchase{})
}

// send makes one sale at url, as p's buyer with p's key when p names them.
func (l *load) send(ctx context.Context, url string, p loadgen.Purchase) response {
	sent := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return response{Sent: sent, At: time.Now(), Error: err.Error(), Left: -1}
	}
	loadgen.SetBuyer(req, p)
	resp, err := l.client.Do(req)
	if err != nil {
		return response{Sent: sent, At: time.Now(), Error: err.Error(), Left: -1}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	r := response{Sent: sent, At: time.Now(), Status: resp.StatusCode, Left: -1}
	var body api.Sale
	if json.Unmarshal(raw, &body) == nil {
		r.Result, r.Replica, r.Error, r.Attempt = body.Result, body.Replica, body.Error, body.Attempt
		r.Order, r.Replayed = body.Order, body.Replayed
		if body.Stock != nil {
			r.Left = *body.Stock
		}
	} else {
		r.Error = fmt.Sprintf("non-JSON answer %d", resp.StatusCode)
	}
	return r
}

// waitFor returns the first answer that arrived at or after since and
// satisfies pred, waiting for it until ctx is done or every buyer has
// returned (the sale is over, ErrLoadEnded): a must-happen wait on an
// ended load would otherwise run to the cell's deadline.
func (l *load) waitFor(ctx context.Context, since time.Time, pred func(response) bool) (response, error) {
	seen, ended := 0, false
	for {
		l.mu.Lock()
		for _, r := range l.resps[seen:] {
			if !r.At.Before(since) && pred(r) {
				l.mu.Unlock()
				return r, nil
			}
		}
		seen = len(l.resps)
		changed := l.changed
		l.mu.Unlock()
		if ended {
			return response{}, errLoadEnded
		}
		select {
		case <-changed:
		case <-l.ended:
			ended = true // one more look at what the last buyers recorded
		case <-ctx.Done():
			return response{}, ctx.Err()
		}
	}
}

// count returns how many answers since since satisfy pred.
func (l *load) count(since time.Time, pred func(response) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.resps {
		if !r.At.Before(since) && pred(r) {
			n++
		}
	}
	return n
}

// countSent is count by send time: answers to requests sent at or after
// since. A request sent before a fault may have done its work before the
// fault and answered after it, so only these prove what happened during it.
func (l *load) countSent(since time.Time, pred func(response) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.resps {
		if !r.Sent.Before(since) && pred(r) {
			n++
		}
	}
	return n
}

// answers returns every answer so far.
func (l *load) answers() []response {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]response(nil), l.resps...)
}

// stop lets the requests in flight finish and returns every answer.
func (l *load) stop() []response {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	l.wg.Wait()
	l.client.CloseIdleConnections()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]response(nil), l.resps...)
}
