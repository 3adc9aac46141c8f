package dashboard

import (
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
)

// histogram is a cumulative Prometheus histogram: counts[i] observations at
// or below bounds[i]; count is the total, the +Inf bucket included.
type histogram struct {
	bounds []float64
	counts []float64
	count  float64
}

// histogramOf reads the first series of a histogram family (stockd has one
// per process); false when absent.
func histogramOf(f *dto.MetricFamily) (histogram, bool) {
	if f == nil || len(f.GetMetric()) == 0 || f.GetMetric()[0].GetHistogram() == nil {
		return histogram{}, false
	}
	h := f.GetMetric()[0].GetHistogram()
	var out histogram
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), +1) {
			continue
		}
		out.bounds = append(out.bounds, b.GetUpperBound())
		out.counts = append(out.counts, float64(b.GetCumulativeCount()))
	}
	out.count = float64(h.GetSampleCount())
	return out, true
}

// add sums o into h bucket by bucket. Every replica runs the same binary
// and so the same buckets; a bound only one of them has is still merged by
// value, so a mixed cluster degrades to coarser quantiles, not wrong ones.
func (h *histogram) add(o histogram) {
	if len(h.bounds) == 0 {
		h.bounds = append([]float64(nil), o.bounds...)
		h.counts = append([]float64(nil), o.counts...)
		h.count = o.count
		return
	}
	idx := map[float64]int{}
	for i, b := range h.bounds {
		idx[b] = i
	}
	for i, b := range o.bounds {
		if j, ok := idx[b]; ok {
			h.counts[j] += o.counts[i]
		}
	}
	h.count += o.count
}

// sub is h - o, bucket by bucket: the observations made between two
// snapshots of the same cumulative histogram.
func (h histogram) sub(o histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), count: h.count - o.count}
	idx := map[float64]int{}
	for i, b := range o.bounds {
		idx[b] = i
	}
	for i, b := range h.bounds {
		out.counts[i] = h.counts[i]
		if j, ok := idx[b]; ok {
			out.counts[i] -= o.counts[j]
		}
	}
	return out
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile does:
// find the bucket holding the rank and interpolate linearly inside it (from
// 0 for the first bucket). A rank in the +Inf bucket answers the highest
// finite bound. NaN for an empty histogram.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	i := sort.Search(len(h.counts), func(i int) bool { return h.counts[i] >= rank })
	if i == len(h.counts) {
		return h.bounds[len(h.bounds)-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.bounds[i-1], h.counts[i-1]
	}
	in := h.counts[i] - below
	if in <= 0 {
		return h.bounds[i]
	}
	return lower + (h.bounds[i]-lower)*(rank-below)/in
}
