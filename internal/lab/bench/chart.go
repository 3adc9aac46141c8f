package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartWidth = 920
	chartLeft  = 150 // room for the subject names
	chartRight = 110 // room for the value labels
	chartTop   = 70
	barHeight  = 18
	barGap     = 10
)

var kindColour = map[string]string{
	KindBackend: "#2b6cb0",
	KindPeer:    "#a0aec0",
	KindCeiling: "#38a169",
}

// WriteSVG draws sales/s per subject at GoalContenders contenders as
// horizontal bars on a log scale (the slowest peers are two orders of
// magnitude below the ceilings), with the lock-free sale and the serial
// bound as vertical lines.
func (r *Report) WriteSVG(w io.Writer) error {
	type bar struct {
		name, kind string
		v          float64
		note       string
	}
	var bars []bar
	lockFree := 0.0
	for _, m := range r.Micro {
		if m.Contenders != GoalContenders {
			continue
		}
		b := bar{name: m.Subject, kind: m.Kind, v: m.SalesPerSec}
		switch {
		case m.Unavailable:
			b.v, b.note = 0, "unavailable"
		case !m.InvariantOK || m.Error != "":
			b.note = "failed"
		}
		if m.Kind == KindCeiling && b.note == "" {
			lockFree = m.SalesPerSec
		}
		bars = append(bars, b)
	}
	lo, hi := math.Inf(1), 0.0
	for _, b := range bars {
		if b.v > 0 {
			lo, hi = math.Min(lo, b.v), math.Max(hi, b.v)
		}
	}
	hi = math.Max(hi, r.SerialBound)
	if hi == 0 { // nothing measured: an empty, still valid, chart
		lo, hi = 1, 10
	}
	lo = math.Min(lo, hi)
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	plotW := float64(chartWidth - chartLeft - chartRight)
	x := func(v float64) float64 {
		if v <= 0 {
			return chartLeft
		}
		return chartLeft + plotW*(math.Log10(v)-dlo)/(dhi-dlo)
	}
	height := chartTop + len(bars)*(barHeight+barGap) + 60

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="22" font-size="15" font-weight="bold">Sales/s at %d contenders over 3 processes (log scale)</text>`+"\n", chartLeft, GoalContenders)
	p(`<text x="%d" y="40" fill="#555">%s</text>`+"\n", chartLeft, html.EscapeString(fmt.Sprintf("%s · %d CPUs · Redis RTT p50 %s", r.Started.Format("2006-01-02"), r.Machine.CPUs, us(r.RTT.P50))))
	bottom := chartTop + len(bars)*(barHeight+barGap)
	// Grid: 1, 2, 5 × each power of ten.
	for d := dlo; d <= dhi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > dhi+1e-9 {
				break
			}
			gx := x(v)
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
				p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, bottom+16, siNumber(v))
			}
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", gx, chartTop-8, gx, bottom, stroke)
		}
	}
	for i, bb := range bars {
		y := chartTop + i*(barHeight+barGap)
		p(`<text x="%d" y="%d" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", chartLeft-8, y+barHeight/2, html.EscapeString(bb.name))
		label := fmt.Sprintf("%.0f", bb.v)
		if bb.note != "" {
			label = bb.note
		}
		if bb.v > 0 {
			p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", chartLeft, y, x(bb.v)-chartLeft, barHeight, kindColour[bb.kind])
		}
		p(`<text x="%.1f" y="%d" dominant-baseline="middle" fill="#333">%s</text>`+"\n", x(bb.v)+5, y+barHeight/2, html.EscapeString(label))
	}
	line := func(v float64, colour, label string, dy int) {
		if v <= 0 {
			return
		}
		lx := x(v)
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", lx, chartTop-14, lx, bottom, colour)
		p(`<text x="%.1f" y="%d" text-anchor="end" fill="%s">%s</text>`+"\n", lx-4, chartTop-16+dy, colour, html.EscapeString(label))
	}
	line(r.SerialBound, "#c53030", fmt.Sprintf("serial bound 1/(%d×RTT) = %.0f", CriticalSectionRoundTrips, r.SerialBound), 0)
	line(lockFree, "#2f855a", fmt.Sprintf("lock-free = %.0f", lockFree), -10)
	ly := bottom + 36
	lx := chartLeft
	for _, k := range []string{KindBackend, KindPeer, KindCeiling} {
		p(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly, kindColour[k], lx+16, ly+10, k)
		lx += 110
	}
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// siNumber prints 1000 as 1k, 1000000 as 1M.
func siNumber(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}
