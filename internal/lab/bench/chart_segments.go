package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// Segments chart geometry, in SVG user units.
const (
	segWidth  = 760
	segHeight = 440
	segLeft   = 80  // room for the sales/s axis
	segRight  = 190 // room for the legend
	segTop    = 70
	segBottom = 60 // room for the segments axis
)

// segSeries is one line of the segments chart: how a row label is found
// for n segments.
type segSeries struct {
	name, colour string
	label        func(n int) string
}

var segmentsSeries = []segSeries{
	{"locked (redis)", "#2b6cb0", func(n int) string {
		if n == 1 {
			return LabelLocked
		}
		return segmentsLabel(n, false)
	}},
	{"locked + combine", "#dd6b20", func(n int) string {
		if n == 1 {
			return LabelLockedCombine
		}
		return segmentsLabel(n, true)
	}},
	{"atomic (no lock)", "#38a169", func(n int) string {
		if n == 1 {
			return LabelAtomic
		}
		return "atomic+" + segmentsLabel(n, false)
	}},
}

// WriteSegmentsSVG draws the scaling rows' end-to-end sales/s against
// stock.segments (1, 2, 4, 8 on a log₂ axis), one line per mode, each
// point the median run with a whisker from the slowest to the fastest
// counted run;
// the uncontended row is a dashed reference line. A row that failed is
// left out of its line and named under the chart.
func (r *Report) WriteSegmentsSVG(w io.Writer) error {
	var segs []int
	for _, e := range r.Scaling {
		if n := max(e.Segments, 1); !slices.Contains(segs, n) {
			segs = append(segs, n)
		}
	}
	if len(segs) == 0 {
		segs = []int{1, 2, 4, 8}
	}
	slices.Sort(segs)

	type point struct {
		n            int
		v, low, high float64
	}
	lines := make([][]point, len(segmentsSeries))
	var failed []string
	hi := 0.0
	for i, s := range segmentsSeries {
		for _, n := range segs {
			e, ok := r.ScalingRow(s.label(n))
			if !ok {
				continue
			}
			if usableE2E(e, ok) != "" || e.SalesPerSec <= 0 {
				failed = append(failed, e.Label())
				continue
			}
			pt := point{n: n, v: e.SalesPerSec, low: e.SalesPerSec, high: e.SalesPerSec}
			for _, run := range e.Runs {
				if !run.Short {
					pt.low, pt.high = math.Min(pt.low, run.SalesPerSec), math.Max(pt.high, run.SalesPerSec)
				}
			}
			hi = math.Max(hi, pt.high)
			lines[i] = append(lines[i], pt)
		}
	}
	uncontended := 0.0
	if e, ok := r.ScalingRow(LabelUncontended); ok && usableE2E(e, ok) == "" {
		uncontended = e.SalesPerSec
		hi = math.Max(hi, uncontended)
	}
	top := niceCeil(hi)

	plotW := float64(segWidth - segLeft - segRight)
	plotH := float64(segHeight - segTop - segBottom)
	span := math.Log2(float64(segs[len(segs)-1]) / float64(segs[0]))
	x := func(n int) float64 {
		if span == 0 {
			return segLeft + plotW/2
		}
		return segLeft + plotW*math.Log2(float64(n)/float64(segs[0]))/span
	}
	y := func(v float64) float64 { return segTop + plotH*(1-v/top) }
	bottom := segHeight - segBottom

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		segWidth, segHeight, segWidth, segHeight)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="22" font-size="15" font-weight="bold">End-to-end sales/s against stock segments (nginx, 3 replicas)</text>`+"\n", segLeft)
	sub := fmt.Sprintf("%s · %d CPUs · %d in flight · median of runs, whiskers: slowest to fastest run",
		r.Started.Format("2006-01-02"), r.Machine.CPUs, r.scalingConcurrency())
	if r.Quick {
		sub = "QUICK RUN, not meaningful · " + sub
	}
	p(`<text x="%d" y="40" fill="#555">%s</text>`+"\n", segLeft, html.EscapeString(sub))
	// Horizontal grid: five steps of top.
	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		gy := y(v)
		p(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e2e2e2"/>`+"\n", segLeft, gy, segLeft+plotW, gy)
		p(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="#555">%s</text>`+"\n", segLeft-6, gy, siNumber(v))
	}
	for _, n := range segs {
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e2e2e2"/>`+"\n", x(n), segTop, x(n), bottom)
		p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%d</text>`+"\n", x(n), bottom+16, n)
	}
	p(`<text x="%.1f" y="%d" text-anchor="middle">stock.segments</text>`+"\n", segLeft+plotW/2, bottom+36)
	p(`<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">sales/s</text>`+"\n", segTop+plotH/2, segTop+plotH/2)
	if uncontended > 0 {
		uy := y(uncontended)
		p(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#718096" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n", segLeft, uy, segLeft+plotW, uy)
		p(`<text x="%.1f" y="%.1f" text-anchor="end" fill="#718096">%s</text>`+"\n", segLeft+plotW-4, uy-5,
			html.EscapeString(fmt.Sprintf("1 in flight (locked) = %.0f", uncontended)))
	}
	for i, s := range segmentsSeries {
		pts := lines[i]
		if len(pts) > 1 {
			var path []string
			for _, pt := range pts {
				path = append(path, fmt.Sprintf("%.1f,%.1f", x(pt.n), y(pt.v)))
			}
			p(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(path, " "), s.colour)
		}
		for _, pt := range pts {
			px := x(pt.n)
			if pt.high > pt.low {
				p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", px, y(pt.low), px, y(pt.high), s.colour)
			}
			p(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", px, y(pt.v), s.colour)
			p(`<text x="%.1f" y="%.1f" fill="%s">%.0f</text>`+"\n", px+6, y(pt.v)-6, s.colour, pt.v)
		}
	}
	lx, ly := segWidth-segRight+20, segTop
	for _, s := range segmentsSeries {
		p(`<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n",
			lx, ly, s.colour, lx+20, ly+2, html.EscapeString(s.name))
		ly += 22
	}
	if len(failed) > 0 {
		p(`<text x="%d" y="%d" fill="#c53030">%s</text>`+"\n", segLeft, segHeight-8,
			html.EscapeString("failed, not drawn: "+strings.Join(failed, ", ")))
	}
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 × a power of ten (10 for nothing).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 10
	}
	d := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*d >= v {
			return m * d
		}
	}
	return 10 * d
}
