package stockd

import (
	"fmt"
	"strings"

	"seckill/internal/api"
	"seckill/internal/orders"
	"seckill/internal/stock/redisstore"
)

// release.go: which release this build is, and which it shares a sale
// with. During a rolling upgrade replicas of two releases sell together;
// each stored format says what it reads (Formats), and
// CHANGELOG.md says, per change of format, which releases run together.
// A test holds CHANGELOG.md's newest entry to these.
const (
	// Release is this build's release: CHANGELOG.md's newest entry.
	Release = "0.10.0"
	// RunsBeside is the oldest release whose replicas may share a sale
	// with this one's: one release back.
	RunsBeside = "0.9.0"
)

// VersionLine is what stockd --version prints: the release, the build,
// what it runs beside, and every format it writes and reads.
func VersionLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stockd %s (build %s); runs beside %s and later; formats:", Release, BuildVersion(), RunsBeside)
	for _, f := range Formats() {
		fmt.Fprintf(&b, " %s %d (reads %d to %d)", f.Name, f.Writes, f.ReadsFrom, f.Writes)
	}
	return b.String()
}

// Formats lists every stored format this build writes and reads: the
// sale's (redisstore.Formats) and the durable orders' (orders.Formats).
func Formats() []redisstore.Format {
	return append(redisstore.Formats(), orders.Formats()...)
}

// apiFormats is Formats as GET /info gives them.
func apiFormats() []api.Format {
	var out []api.Format
	for _, f := range Formats() {
		out = append(out, api.Format{Name: f.Name, Writes: f.Writes, ReadsFrom: f.ReadsFrom})
	}
	return out
}
