package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"seckill/internal/api"
)

// items.go: a run that sells an item (Config.Item, docs/items.md) instead
// of the default sale, and the check of its answers against the item's
// window by the server's clock.

// Window is an item's window as the server holds it, and the check of a
// run's answers against it (Report.Window). The window is decided by the
// stock Redis's clock, inside the request: a sale answered sold was
// decided between its send and its answer, inside the window, so it
// cannot have been sent after ends_at nor answered before starts_at; a
// not_started cannot have been sent from starts_at on, an ended not
// answered before ends_at. This client's clock is held to the server's by
// OffsetMinMS..OffsetMaxMS, read before the run: an answer counts as
// misplaced only when no offset in that interval places it, so the check
// is exact on one machine and never blames a skewed clock.
type Window struct {
	StartsAt int64 `json:"starts_at"` // unix ms, 0: no bound
	EndsAt   int64 `json:"ends_at"`   // unix ms, 0: no bound
	// OffsetMinMS and OffsetMaxMS bound the server's clock minus this
	// client's, in ms: the item's "now" read between a send and its
	// answer (the narrowest of a few reads).
	OffsetMinMS float64 `json:"offset_min_ms"`
	OffsetMaxMS float64 `json:"offset_max_ms"`
	// SoldOutside counts sold answers that no instant of the window can
	// explain; NotStartedLate not_started answers sent once the window
	// had opened (or with no starts_at), EndedEarly ended answers received
	// before it closed (or with no ends_at).
	SoldOutside    int `json:"sold_outside"`
	NotStartedLate int `json:"not_started_late"`
	EndedEarly     int `json:"ended_early"`
	// FirstSaleMS is from starts_at to the first sold answer, and
	// LastSaleMS from the send of the last request that sold to ends_at,
	// by this client's clock: how close to its edges the window was
	// tried. -1 without that bound or without a sale.
	FirstSaleMS float64 `json:"first_sale_ms"`
	LastSaleMS  float64 `json:"last_sale_ms"`
}

// OK: no answer is outside its place in the window.
func (w *Window) OK() bool {
	return w.SoldOutside == 0 && w.NotStartedLate == 0 && w.EndedEarly == 0
}

// Text says the check in one line.
func (w *Window) Text() string {
	bound := func(ms int64) string {
		if ms == 0 {
			return "none"
		}
		return time.UnixMilli(ms).UTC().Format("15:04:05.000")
	}
	return fmt.Sprintf("window %s..%s UTC (server clock, this one %+.1f..%+.1f ms from it): sold outside %d, not_started late %d, ended early %d",
		bound(w.StartsAt), bound(w.EndsAt), -w.OffsetMaxMS, -w.OffsetMinMS, w.SoldOutside, w.NotStartedLate, w.EndedEarly)
}

// clockReads is how many times readWindow reads the server's clock.
const clockReads = 3

// readWindow reads item id's window and bounds the server's clock
// against this one: each GET /items/:id's "now" (whole ms, truncated)
// was read between the send and the answer.
func readWindow(ctx context.Context, client *http.Client, base, id string) (*Window, error) {
	var w *Window
	for range clockReads {
		sent := time.Now()
		it, err := GetItem(ctx, client, base, id)
		got := time.Now()
		if err != nil {
			return nil, err
		}
		lo, hi := float64(it.Now)-unixMS(got), float64(it.Now)+1-unixMS(sent)
		if w == nil || hi-lo < w.OffsetMaxMS-w.OffsetMinMS {
			w = &Window{StartsAt: it.StartsAt, EndsAt: it.EndsAt, OffsetMinMS: lo, OffsetMaxMS: hi}
		}
	}
	return w, nil
}

// unixMS is t in unix ms, with the fraction.
func unixMS(t time.Time) float64 { return float64(t.UnixNano()) / 1e6 }

// windowMS is t in unix ms, 0 for the zero time (no bound).
func windowMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// CheckWindow counts the answers in responses that w's window cannot
// explain (Window), into a copy of w.
func CheckWindow(responses []Response, w Window) *Window {
	w.SoldOutside, w.NotStartedLate, w.EndedEarly = 0, 0, 0
	w.FirstSaleMS, w.LastSaleMS = -1, -1
	var first, last float64
	for _, r := range responses {
		if r.Status == 0 || r.Cut {
			continue
		}
		sent, got := unixMS(r.Sent), unixMS(r.Received)
		// The server decided at one instant of its clock in
		// (sent+min, got+max).
		early, late := sent+w.OffsetMinMS, got+w.OffsetMaxMS
		switch r.Outcome {
		case OutcomeSold:
			if (w.EndsAt > 0 && early >= float64(w.EndsAt)) || (w.StartsAt > 0 && late <= float64(w.StartsAt)) {
				w.SoldOutside++
			}
			if first == 0 || got < first {
				first = got
			}
			last = max(last, sent)
		case OutcomeNotStarted:
			if w.StartsAt == 0 || early >= float64(w.StartsAt) {
				w.NotStartedLate++
			}
		case OutcomeEnded:
			if w.EndsAt == 0 || late <= float64(w.EndsAt) {
				w.EndedEarly++
			}
		}
	}
	if first > 0 && w.StartsAt > 0 {
		w.FirstSaleMS = first - float64(w.StartsAt)
	}
	if last > 0 && w.EndsAt > 0 {
		w.LastSaleMS = float64(w.EndsAt) - last
	}
	return &w
}

// readBooks reads the sale's stock and lucky back: GET /stock, or the
// item's GET /items/:id.
func (c *Config) readBooks(ctx context.Context, client *http.Client) (api.Stock, error) {
	if c.Item == "" {
		return GetStock(ctx, client, c.URL)
	}
	it, err := GetItem(ctx, client, c.URL, c.Item)
	return api.Stock{Stock: it.Stock, Lucky: it.Lucky, From: it.From}, err
}

// saleURL is where the run sells: /stock/reduce, or the item's
// /items/:id/reduce.
func (c *Config) saleURL() string {
	if c.Item == "" {
		return c.URL + "/stock/reduce"
	}
	return itemURL(c.URL, c.Item) + "/reduce"
}

// receiptsURL is the prefix of the sale's receipts.
func (c *Config) receiptsURL() string {
	if c.Item == "" {
		return c.URL + "/stock/receipts/"
	}
	return itemURL(c.URL, c.Item) + "/receipts/"
}
