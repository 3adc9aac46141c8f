package loadgen

import (
	"errors"
	"strings"
	"testing"

	"seckill/internal/api"
)

// A row fails on what breaks the sale (oversold, unbalanced books, more
// told than counted, a history proven wrong, a want or check that does not
// hold) and only notes what a fault may cause (an answer lost, a search
// out of time, a run cut by its bound).
func TestJudge(t *testing.T) {
	clean := func() *Report {
		return &Report{Sold: 300, Requests: 500, SoldOut: 200, RPS: 812.7, Replicas: map[string]int{"stockd-1": 300}}
	}
	books := api.Books{Stock: 0, Lucky: 300, Initial: 300}
	for _, c := range []struct {
		name   string
		report func(*Report)
		row    Row
		pass   bool
		notes  string // a substring of the notes; "" for none at all
		sold   int
	}{
		{name: "clean", row: Row{Books: books}, pass: true, sold: 300},
		{name: "oversold", report: func(r *Report) { r.Oversold = 2 }, row: Row{Books: books}, notes: "oversold=2", sold: 300},
		{name: "books unbalanced", row: Row{Books: api.Books{Stock: 1, Lucky: 300, Initial: 300}}, notes: "stock+lucky!=initial", sold: 300},
		{name: "told more than counted", report: func(r *Report) { r.Sold = 301 }, row: Row{Books: books}, notes: "sold>lucky", sold: 301},
		{name: "lost answers", report: func(r *Report) { r.Sold = 297 }, row: Row{Books: books, Exit: 3}, pass: true, notes: "lost=3", sold: 297},
		{name: "buyers tell orders", report: func(r *Report) { r.Sold, r.Replayed, r.Buyers = 290, 12, &Buyers{Orders: 300} },
			row: Row{Books: books}, pass: true, notes: "orders told 300 (290 sold, 12 replayed", sold: 300},
		{name: "not linearizable", report: func(r *Report) { r.History = &History{Ops: 500} }, row: Row{Books: books}, notes: "NOT LINEARIZABLE", sold: 300},
		{name: "search out of time", report: func(r *Report) { r.History = &History{Unknown: true} }, row: Row{Books: books}, pass: true, notes: "history unchecked", sold: 300},
		{name: "history skipped", report: func(r *Report) { r.History = &History{Skipped: "too many in flight"} }, row: Row{Books: books}, pass: true, sold: 300},
		{name: "cut by its bound", report: func(r *Report) { r.TimedOut = true }, row: Row{Books: books, Exit: 124}, pass: true, notes: "seckill rc=124 (firing bound hit)", sold: 300},
		{name: "pause notes the lock", row: Row{Books: books, Pause: true}, pass: true, notes: "busy=0 fenced=0", sold: 300},
		{name: "wants hold", row: Row{Books: books, Wants: []string{WantExact, WantSoldOut, WantAllSold, WantNoLost, WantRouted, WantSoldBy + "stockd-1"}},
			pass: true, notes: "exact, sold-out, all-sold, no-lost, routed, sold-by=stockd-1: ok", sold: 300},
		{name: "exact wants exit 0", row: Row{Books: books, Exit: 3, Wants: []string{WantExact}}, notes: "exact: NO", sold: 300},
		{name: "sold out wants stock 0", report: func(r *Report) { r.Sold = 299 },
			row: Row{Books: api.Books{Stock: 1, Lucky: 299, Initial: 300}, Wants: []string{WantSoldOut}}, notes: "sold-out: NO", sold: 299},
		{name: "no lost", report: func(r *Report) { r.Sold = 299 }, row: Row{Books: books, Wants: []string{WantNoLost}}, notes: "no-lost: NO", sold: 299},
		{name: "routed wants few errors", report: func(r *Report) { r.Errors = 75 }, row: Row{Books: books, Wants: []string{WantRouted}}, notes: "routed: NO", sold: 300},
		{name: "sold by a replica that did not", row: Row{Books: books, Wants: []string{WantSoldBy + "stockd-2"}}, notes: "sold-by=stockd-2: NO", sold: 300},
		{name: "check ok", row: Row{Books: books, Checks: []string{"new leader etcd-2: ok"}}, pass: true, notes: "new leader etcd-2: ok", sold: 300},
		{name: "check NO", row: Row{Books: books, Checks: []string{"new leader: NO"}}, notes: "new leader: NO", sold: 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := clean()
			if c.report != nil {
				c.report(r)
			}
			j, err := Judge(r, c.row)
			if err != nil {
				t.Fatal(err)
			}
			notes := strings.Join(j.Notes, "; ")
			if j.Pass != c.pass || j.Sold != c.sold || (c.notes == "") != (notes == "") || !strings.Contains(notes, c.notes) {
				t.Fatalf("Judge = pass %v sold %d notes %q; want pass %v sold %d notes with %q", j.Pass, j.Sold, notes, c.pass, c.sold, c.notes)
			}
			if j.Errors != r.Errors || j.RPS != 812 {
				t.Fatalf("Judge = errors %d rps %d, want the report's %d and 812", j.Errors, j.RPS, r.Errors)
			}
		})
	}
}

// A want or check Judge cannot read is an error, not a row that passes.
func TestJudgeRefusesUnknownConditions(t *testing.T) {
	for _, row := range []Row{
		{Wants: []string{"exactly"}},
		{Wants: []string{WantSoldBy}},
		{Checks: []string{"leader moved"}},
	} {
		if _, err := Judge(&Report{}, row); !errors.Is(err, ErrWant) {
			t.Errorf("Judge with %+v: err %v, want ErrWant", row, err)
		}
	}
}

// The line compose-test reads: five tab-separated fields, a note's own
// tabs and newlines flattened so that it stays one field of one line.
func TestJudgedLine(t *testing.T) {
	got := Judged{Pass: true, Sold: 3, Errors: 1, RPS: 40, Notes: []string{"a\tb", "c\nd"}}.Line()
	if want := "PASS\t3\t1\t40\ta b; c d"; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
	if got := (Judged{}).Line(); got != "FAIL\t0\t0\t0\t" {
		t.Fatalf("Line of a failed row = %q", got)
	}
}
