package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Off a terminal, or with --json, seckill lab and bench draw nothing: no
// line at all, so their stderr is the log lines alone.
func TestProgressLineQuiet(t *testing.T) {
	var buf bytes.Buffer
	if l := progressLine(&buf, false); l != nil {
		l.Close()
		t.Fatal("a live line on a buffer")
	}
	if l := progressLine(&buf, true); l != nil {
		l.Close()
		t.Fatal("a live line with --json")
	}
	var none *liveLine // what lab and bench hold then: its methods do nothing
	none.Set("x")
	none.Close()
	if buf.Len() != 0 {
		t.Fatalf("quiet progress wrote %q", buf.String())
	}
}

// The live line is redrawn in place with its step's and the whole run's
// clocks; a log line written through it lands above it (erase, the log
// line, the live line again); Close erases it, stops the redrawing, and
// lets later writes through untouched.
func TestLiveLine(t *testing.T) {
	var out lockedBuffer
	l := newLiveLine(&out, 10*time.Millisecond)
	l.Set("lab: cell 1/3 redis/kill")
	if got := out.String(); got != "\r\033[Klab: cell 1/3 redis/kill  (0s, 0s in all)" {
		t.Fatalf("first draw %q", got)
	}
	_, _ = l.Write([]byte("time=… level=INFO msg=cell\n"))
	got := out.String()
	want := "\r\033[Ktime=… level=INFO msg=cell\n\r\033[Klab: cell 1/3 redis/kill  ("
	if !strings.Contains(got, want) {
		t.Fatalf("log line through the live line: %q, want it to contain %q", got, want)
	}
	l.Set("lab: cell 2/3 etcd/pause")
	l.Close()
	got = out.String()
	if !strings.Contains(got, "lab: cell 2/3 etcd/pause") || !strings.HasSuffix(got, "lab: cell 2/3 etcd/pause  (0s, 0s in all)\r\033[K") {
		t.Fatalf("after Close: %q, want the last step drawn, then erased", got)
	}
	n := len(out.String())
	time.Sleep(50 * time.Millisecond) // five ticker periods: a live ticker would draw
	if len(out.String()) != n {
		t.Fatal("drawing after Close")
	}
	_, _ = l.Write([]byte("table\n"))
	if !strings.HasSuffix(out.String(), "\r\033[Ktable\n") {
		t.Fatalf("a write after Close: %q, want it as is", out.String()[n:])
	}
	l.Close() // twice is harmless
}

// bench's log records drive its line: the latest step, and the rows done
// counted from the records bench logs per finished row (a "sales/s"
// attribute, a message without a colon); every record still reaches the
// log.
func TestBenchProgress(t *testing.T) {
	var out lockedBuffer
	l := newLiveLine(&out, time.Hour)
	defer l.Close()
	log := slog.New(newBenchProgress(slog.NewTextHandler(l, nil), l)).With("run", 1)
	ctx := context.Background()
	log.Info("starting")
	if got := out.String(); !strings.HasSuffix(got, "bench: 0 rows done · last: starting run=1  (0s, 0s in all)") {
		t.Fatalf("line %q", got)
	}
	log.Info("micro", "subject", "redis", "contenders", 8, "sales/s", 1234, "err", "")
	log.Info("end to end: calibrated", "row", "redis, segments 4", "sales/s", 900)
	log.Info("end to end", "backend", "etcd", "sales/s", 300, "consistent", true)
	log.Warn("slow", "sales/s", 1)
	log.LogAttrs(ctx, slog.LevelInfo, "end to end (scaling)", slog.String("row", "atomic"), slog.Int("sales/s", 5000))
	got := out.String()
	last := got[strings.LastIndex(got, "\r\033[K"):]
	if want := "\r\033[Kbench: 3 rows done · last: end to end (scaling) run=1 row=ato…  (0s, 0s in all)"; last != want {
		t.Fatalf("last line %q, want %q", last, want)
	}
	for _, msg := range []string{"msg=micro", `msg="end to end: calibrated"`, `msg="end to end"`, "msg=slow", `msg="end to end (scaling)"`} {
		if !strings.Contains(got, msg) {
			t.Errorf("the log lost %s: %q", msg, got)
		}
	}
	if strings.Contains(last, "consistent") || strings.Contains(got, "· last: micro subject=redis contenders=8 sales/s=1234 err=") {
		t.Errorf("the line carries what only the log needs: %q", got)
	}
}

// A line wider than the terminal would wrap, and "\r" erases only its last
// row: the drawn line, clocks included, stays within 79 columns, cut with
// "…".
func TestLiveLineFits(t *testing.T) {
	var out lockedBuffer
	l := newLiveLine(&out, time.Hour)
	l.Set(strings.Repeat("é", 200))
	l.Close()
	drawn := strings.TrimSuffix(strings.TrimPrefix(out.String(), "\r\033[K"), "\r\033[K")
	if n := len([]rune(drawn)); n != liveWidth || !strings.HasSuffix(drawn, "…  (0s, 0s in all)") {
		t.Fatalf("drawn %q: %d runes, want %d ending in the cut and the clocks", drawn, n, liveWidth)
	}
	if fit("short", 10) != "short" {
		t.Fatal("a short text was cut")
	}
}
