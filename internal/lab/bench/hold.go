package bench

import (
	"context"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"seckill/internal/lab/bench/peers"
	"seckill/internal/lock/backend"
)

// The hold rows measure throughput against critical-section time: each
// backend's micro sale loop with the lock kept HoldDelays longer after the
// write (stockd's work.delay), so a reader sees the 1/hold-time law. They
// are micro rows, not end to end: the law is the lock's, and through nginx
// each point would need a stockd restart and long runs to be as steady.
var (
	// HoldDelays are the critical-section times measured.
	HoldDelays = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}
	// holdSubjects are the backends measured, in report order.
	holdSubjects = backend.Product()
)

const (
	// HoldContenders is the hold rows' contender count: enough that the
	// lock is never idle, so the hold time alone bounds the rate.
	HoldContenders = 8
	// holdTimebox is how long each hold point sells (Quick: holdQuickBox).
	holdTimebox  = 2 * time.Second
	holdQuickBox = 300 * time.Millisecond
)

// HoldRow is one backend at one critical-section time.
type HoldRow struct {
	Subject    string  `json:"subject"`
	Contenders int     `json:"contenders"`
	HoldMs     float64 `json:"hold_ms"`
	Sales      int64   `json:"sales"`
	Seconds    float64 `json:"seconds"`
	// SalesPerSec is sales over the time to the last sale; BoundPerSec is
	// 1 / (hold + CriticalSectionRoundTrips × median RTT), the most a
	// lock held that long per sale can sell.
	SalesPerSec float64 `json:"sales_per_sec"`
	BoundPerSec float64 `json:"bound_sales_per_sec"`
	// InvariantOK: stock + lucky unchanged and lucky = sales counted.
	InvariantOK bool   `json:"invariant_ok"`
	Error       string `json:"error,omitempty"`
}

// holdBound is the serial bound of a sale that keeps the lock hold longer.
func holdBound(hold, rtt time.Duration) float64 {
	d := hold + CriticalSectionRoundTrips*rtt
	if d <= 0 {
		return 0
	}
	return 1 / d.Seconds()
}

// holdRows runs every hold subject selected by cfg at each of HoldDelays.
func (r *runner) holdRows(ctx context.Context, rtt time.Duration) []HoldRow {
	box := holdTimebox
	if r.cfg.Quick {
		box = holdQuickBox
	}
	var rows []HoldRow
	for _, subj := range Subjects() {
		if !slices.Contains(holdSubjects, subj.Name) ||
			(len(r.cfg.Subjects) > 0 && !slices.Contains(r.cfg.Subjects, subj.Name)) {
			continue
		}
		if ctx.Err() != nil {
			return rows
		}
		rows = append(rows, r.holdSubject(ctx, subj, box, rtt)...)
	}
	slices.SortStableFunc(rows, func(a, b HoldRow) int {
		return slices.Index(holdSubjects, a.Subject) - slices.Index(holdSubjects, b.Subject)
	})
	return rows
}

// holdSubject measures one subject at every hold time on one set of
// processes, each point a timeboxed sale from a stock that never runs out.
func (r *runner) holdSubject(ctx context.Context, subj Subject, box, rtt time.Duration) []HoldRow {
	rows := make([]HoldRow, len(HoldDelays))
	for i, d := range HoldDelays {
		rows[i] = HoldRow{Subject: subj.Name, Contenders: HoldContenders, HoldMs: ms(d), BoundPerSec: holdBound(d, rtt)}
	}
	failAll := func(err error) []HoldRow {
		for i := range rows {
			rows[i].Error = err.Error()
		}
		return rows
	}
	if !r.serverUp(subj.Server) {
		return failAll(errNoServer(subj.Server))
	}
	var (
		counter Counter
		gaveUp  peers.GaveUp
		sets    []procSet
	)
	defer func() {
		for _, s := range sets {
			_ = s.close()
		}
	}()
	for range r.cfg.Sets {
		s, err := subj.open(ctx, r.servers, &counter, &gaveUp)
		if err != nil {
			return failAll(fmt.Errorf("open %s: %w", subj.Name, err))
		}
		sets = append(sets, &onceSet{procSet: s})
	}
	id := fmt.Sprintf("hold-%s-%d", subj.Name, time.Now().UnixNano())
	if err := r.warmUp(ctx, subj, sets, id+"-warm"); err != nil {
		return failAll(fmt.Errorf("warm-up: %w", err))
	}
	const stock = 1 << 40
	for i, d := range HoldDelays {
		out, err := r.phase(ctx, subj, sets, HoldContenders, fmt.Sprintf("%s-%d", id, i), stock, box, d, &counter)
		row := &rows[i]
		row.Sales, row.Seconds = out.sales, out.elapsed.Seconds()
		if out.elapsed > 0 {
			row.SalesPerSec = float64(out.sales) / out.elapsed.Seconds()
		}
		row.InvariantOK = err == nil && out.stock+out.lucky == stock && out.lucky == out.sales
		switch {
		case err != nil:
			row.Error = err.Error()
		case !row.InvariantOK:
			row.Error = fmt.Sprintf("invariant broken: stock %d + lucky %d (want %d), %d sales counted", out.stock, out.lucky, int64(stock), out.sales)
		}
		r.log.Info("hold", "subject", subj.Name, "hold", d, "sales/s", int(row.SalesPerSec), "bound", int(row.BoundPerSec), "ok", row.InvariantOK)
	}
	return rows
}

// holdOK reports whether every hold row kept its invariant.
func (r *Report) holdOK() bool {
	for _, h := range r.Hold {
		if h.Sales > 0 && !h.InvariantOK {
			return false
		}
	}
	return true
}

// writeHold writes the hold rows' section.
func (r *Report) writeHold(p func(string, ...any), chart string) {
	if len(r.Hold) == 0 {
		return
	}
	p("\n## Throughput against critical-section time\n\n")
	p("The micro sale loop again (%d contenders over 3 processes, each point a %s timeboxed sale), with the\n",
		HoldContenders, holdTimebox)
	p("lock kept *hold* longer after the write, as stockd's `work.delay` keeps it. These are micro rows, not\n")
	p("end to end: the law is the lock's, and each end-to-end point would need replicas restarted with a\n")
	p("new `work.delay`. A lock held *hold* + 2 round trips per sale cannot sell faster than\n")
	p("**1 / (hold + 2 × %s)**, the *bound* row: once the hold dominates, every backend sells at the\n", us(r.RTT.P50))
	p("same 1/hold rate and the lock's own cost no longer shows. *%% of bound* in parentheses.\n")
	if chart != "" {
		p("\n![sales/s against critical-section time](%s)\n", chart)
	}
	p("\n| backend |")
	for _, d := range HoldDelays {
		p(" hold %s |", fmtHold(d))
	}
	p(" invariant |\n|---|")
	for range HoldDelays {
		p("--:|")
	}
	p("---|\n")
	for _, name := range holdSubjects {
		var cells []string
		inv := "ok"
		seen := false
		for _, d := range HoldDelays {
			h, ok := r.holdRow(name, d)
			if !ok {
				cells = append(cells, "")
				continue
			}
			seen = true
			switch {
			case h.Error != "" && h.Sales == 0:
				cells = append(cells, "—")
				inv = h.Error
			default:
				cells = append(cells, fmt.Sprintf("%.0f (%.0f%%)", h.SalesPerSec, 100*h.SalesPerSec/h.BoundPerSec))
				if !h.InvariantOK {
					inv = "**BROKEN** " + h.Error
				}
			}
		}
		if seen {
			p("| %s | %s | %s |\n", name, strings.Join(cells, " | "), inv)
		}
	}
	p("| bound 1/(hold + 2 RTT) |")
	for _, d := range HoldDelays {
		p(" %.0f |", holdBound(d, r.RTT.P50))
	}
	p(" |\n")
}

func fmtHold(d time.Duration) string { return fmt.Sprintf("%g ms", ms(d)) }

// holdRow returns subject's hold row at d, if it ran.
func (r *Report) holdRow(subject string, d time.Duration) (HoldRow, bool) {
	for _, h := range r.Hold {
		if h.Subject == subject && h.HoldMs == ms(d) {
			return h, true
		}
	}
	return HoldRow{}, false
}

var holdColour = map[string]string{
	"redis": "#c53030", "redisson": "#dd6b20", "etcd": "#2b6cb0",
	"zookeeper": "#38a169", "mysql": "#805ad5", "mysql-row": "#d53f8c",
}

// WriteHoldSVG draws sales/s against critical-section time, one line per
// backend on a log scale, with the serial bound 1/(hold + 2 RTT) dashed.
func (r *Report) WriteHoldSVG(w io.Writer) error {
	const (
		width, height           = 760, 420
		left, right, top, bottm = 80, 130, 60, 50
	)
	bound := func(d time.Duration) float64 { return holdBound(d, r.RTT.P50) }
	lo, hi := math.Inf(1), 0.0
	for _, d := range HoldDelays {
		if b := bound(d); b > 0 {
			lo, hi = math.Min(lo, b), math.Max(hi, b)
		}
	}
	for _, h := range r.Hold {
		if h.SalesPerSec > 0 {
			lo, hi = math.Min(lo, h.SalesPerSec), math.Max(hi, h.SalesPerSec)
		}
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	plotW, plotH := float64(width-left-right), float64(height-top-bottm)
	x := func(i int) float64 {
		return float64(left) + plotW*float64(i)/float64(max(len(HoldDelays)-1, 1))
	}
	y := func(v float64) float64 {
		return float64(top) + plotH*(1-(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="24" font-size="15" font-weight="bold">sales/s against critical-section time (%d contenders, log scale)</text>`+"\n", left, HoldContenders)
	p(`<text x="%d" y="42" fill="#4a5568">dashed: 1 / (hold + 2 × %s RTT), the most a lock held that long per sale allows</text>`+"\n", left, us(r.RTT.P50))
	for v := lo; v <= hi*1.001; v *= 10 {
		p(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e2e8f0"/>`+"\n", left, width-right, y(v), y(v))
		p(`<text x="%d" y="%.1f" text-anchor="end" fill="#4a5568">%s</text>`+"\n", left-6, y(v)+4, compact(v))
	}
	for i, d := range HoldDelays {
		p(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#e2e8f0"/>`+"\n", x(i), x(i), top, height-bottm)
		p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#4a5568">hold %s</text>`+"\n", x(i), height-bottm+18, html.EscapeString(fmtHold(d)))
	}
	var pts []string
	for i, d := range HoldDelays {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(bound(d))))
	}
	p(`<polyline points="%s" fill="none" stroke="#718096" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", strings.Join(pts, " "))
	p(`<text x="%.1f" y="%.1f" fill="#718096">bound</text>`+"\n", x(len(HoldDelays)-1)+8, y(bound(HoldDelays[len(HoldDelays)-1]))+16)
	labelY := float64(top)
	for _, name := range holdSubjects {
		pts = pts[:0]
		for i, d := range HoldDelays {
			if h, ok := r.holdRow(name, d); ok && h.SalesPerSec > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(h.SalesPerSec)))
			}
		}
		if len(pts) == 0 {
			continue
		}
		colour := holdColour[name]
		p(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colour)
		for _, pt := range pts {
			xy := strings.Split(pt, ",")
			p(`<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], colour)
		}
		p(`<rect x="%d" y="%.1f" width="12" height="3" fill="%s"/>`+"\n", width-right+14, labelY, colour)
		p(`<text x="%d" y="%.1f">%s</text>`+"\n", width-right+30, labelY+5, html.EscapeString(name))
		labelY += 18
	}
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// compact writes an axis value: 100, 1k, 10k.
func compact(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%gk", v/1000)
	}
	return fmt.Sprintf("%g", v)
}
