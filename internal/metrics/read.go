package metrics

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// read.go: the one reader of Prometheus text in the project — what the
// dashboard, the soak, the lab and the bench scrape from stockd and etcd —
// with the format's own parser (expfmt), not a scan of lines.

// maxScrape bounds a /metrics body read.
const maxScrape = 8 << 20

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url (a /metrics endpoint) with client (nil:
// http.DefaultClient) and parses its text.
func Scrape(ctx context.Context, client *http.Client, url string) (Families, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	// The text format: the parser reads only that.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: GET %s: %d", url, resp.StatusCode)
	}
	fams, err := Parse(io.LimitReader(resp.Body, maxScrape))
	if err != nil {
		return nil, fmt.Errorf("metrics: GET %s: %w", url, err)
	}
	return fams, nil
}

// Parse reads Prometheus text.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	return Families(fams), err
}

// Sum is the sum of name's samples (counters, gauges, untyped; a summary
// or histogram's count) whose labels include every pair of labels; ok is
// false when no sample matched.
func (f Families) Sum(name string, labels map[string]string) (sum float64, ok bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.GetSummary().GetSampleCount())
		default:
			continue
		}
		ok = true
	}
	return sum, ok
}

// HistogramSum is the sum of name's histogram samples' sums.
func (f Families) HistogramSum(name string) (sum float64, ok bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if h := m.GetHistogram(); h != nil {
			sum, ok = sum+h.GetSampleSum(), true
		}
	}
	return sum, ok
}

// Value is name's one sample without labels to match (Sum with none).
func (f Families) Value(name string) (float64, bool) { return f.Sum(name, nil) }

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Hist is a histogram's cumulative buckets, summed over its series (and,
// with Add, over scrapes of several processes).
type Hist struct {
	Count  uint64
	Sum    float64
	Upper  []float64 // bucket upper bounds, ascending
	Cumul  []uint64  // samples at or below each bound
	Exists bool      // some scrape had the histogram
}

// Histogram is name's histogram summed over its series: the zero Hist
// when there is none.
func (f Families) Histogram(name string) Hist {
	var h Hist
	fam := f[name]
	if fam == nil {
		return h
	}
	for _, m := range fam.GetMetric() {
		mh := m.GetHistogram()
		if mh == nil {
			continue
		}
		var one Hist
		one.Count, one.Sum, one.Exists = mh.GetSampleCount(), mh.GetSampleSum(), true
		for _, b := range mh.GetBucket() {
			one.Upper = append(one.Upper, b.GetUpperBound())
			one.Cumul = append(one.Cumul, b.GetCumulativeCount())
		}
		h = h.Add(one)
	}
	return h
}

// Add is h and o together; both must have the same buckets (one
// histogram's scrapes), or one of them none.
func (h Hist) Add(o Hist) Hist {
	return h.combine(o, 1)
}

// Sub is what h has beyond an earlier scrape of the same processes, o:
// the samples observed in between.
func (h Hist) Sub(o Hist) Hist {
	return h.combine(o, -1)
}

func (h Hist) combine(o Hist, sign int64) Hist {
	if !o.Exists {
		return h
	}
	if !h.Exists {
		if sign > 0 {
			return o
		}
		return h
	}
	add := func(a, b uint64) uint64 {
		if sign > 0 {
			return a + b
		}
		return a - min(a, b)
	}
	out := Hist{Count: add(h.Count, o.Count), Sum: h.Sum + float64(sign)*o.Sum, Exists: true,
		Upper: h.Upper, Cumul: make([]uint64, len(h.Cumul))}
	for i := range h.Cumul {
		if i < len(o.Cumul) {
			out.Cumul[i] = add(h.Cumul[i], o.Cumul[i])
		} else {
			out.Cumul[i] = h.Cumul[i]
		}
	}
	return out
}

// Mean is the samples' mean, 0 with none.
func (h Hist) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// Quantile is the upper bound of the bucket holding the q-quantile (a
// bound, not an estimate within it); 0 with no samples, +Inf past the
// last bound.
func (h Hist) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	rank := q * float64(h.Count)
	for i, c := range h.Cumul {
		if float64(c) >= rank {
			return h.Upper[i]
		}
	}
	return math.Inf(1)
}
