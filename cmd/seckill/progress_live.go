package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// liveLine is one line kept at the bottom of a terminal and redrawn in
// place: what a long command (seckill lab, seckill bench) is doing now,
// how far it is, and for how long. Log lines written through it go above
// it: the line is erased, the log line written, and the line drawn again,
// so the two never garble each other.
type liveLine struct {
	mu     sync.Mutex
	w      io.Writer
	text   string
	start  time.Time // the whole command's
	step   time.Time // the current step's
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

// progressLine is the live line on w for a person watching it, or nil (and
// nothing drawn) when quiet is set (--json) or w is not a terminal: a pipe,
// a file or CI logs get the log lines and the report alone. A nil line's
// methods do nothing.
func progressLine(w io.Writer, quiet bool) *liveLine {
	if quiet || !isTerminal(w) {
		return nil
	}
	return newLiveLine(w, time.Second)
}

// newLiveLine draws on w, once now and again every interval (the clocks
// move between steps). Close it before printing the command's report.
func newLiveLine(w io.Writer, interval time.Duration) *liveLine {
	now := time.Now()
	l := &liveLine{w: w, start: now, step: now, stop: make(chan struct{})}
	l.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				l.mu.Lock()
				l.draw()
				l.mu.Unlock()
			}
		}
	})
	return l
}

// Set starts a new step, described by text, and redraws.
func (l *liveLine) Set(text string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text, l.step = text, time.Now()
	l.draw()
}

// draw writes the line over the previous one; l.mu is held.
func (l *liveLine) draw() {
	if l.closed || l.text == "" {
		return
	}
	clocks := fmt.Sprintf("  (%s, %s in all)", time.Since(l.step).Round(time.Second), time.Since(l.start).Round(time.Second))
	fmt.Fprintf(l.w, "\r\033[K%s%s", fit(l.text, liveWidth-len(clocks)), clocks)
}

// liveWidth bounds the drawn line: a line wider than the terminal wraps,
// and "\r" then erases only its last row, leaving the rest on screen.
// 80 columns is the narrowest terminal worth drawing for.
const liveWidth = 79

// fit cuts s to n runes, the last one "…" when something was cut.
func fit(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	return string(r[:n-1]) + "…"
}

// Write puts p above the line: a logger's io.Writer on the same terminal.
func (l *liveLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.w.Write(p)
	}
	if _, err := io.WriteString(l.w, "\r\033[K"); err != nil {
		return 0, err
	}
	n, err := l.w.Write(p)
	if err == nil && strings.HasSuffix(string(p), "\n") {
		l.draw()
	}
	return n, err
}

// Close stops the redrawing, waits for it, and erases the line, so what is
// printed next starts on a clean line. Later writes pass straight through.
func (l *liveLine) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.stop)
	l.mu.Unlock()
	l.wg.Wait()
	fmt.Fprint(l.w, "\r\033[K")
}

// benchProgress is an slog.Handler for seckill bench's logger: every record
// goes to next (through the live line, above it), and the live line shows
// bench's latest step and how many rows it has finished. Bench logs one
// record per finished row, the only ones with a "sales/s" attribute and a
// message without a colon ("micro", "end to end", "end to end (scaling)");
// it does not know its row count up front (rows depend on the servers that
// started and on calibration), so there is no total.
type benchProgress struct {
	next  slog.Handler
	line  *liveLine
	mu    *sync.Mutex
	rows  *int
	attrs []slog.Attr
}

func newBenchProgress(next slog.Handler, line *liveLine) *benchProgress {
	return &benchProgress{next: next, line: line, mu: &sync.Mutex{}, rows: new(int)}
}

func (h *benchProgress) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *benchProgress) Handle(ctx context.Context, r slog.Record) error {
	err := h.next.Handle(ctx, r)
	if r.Level != slog.LevelInfo {
		return err
	}
	var b strings.Builder
	row := false
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		switch a.Key {
		case "sales/s":
			row = true
		case "err", "consistent", "ok", "acquire_rt", "fairness", "false_sold_out", "seconds", "runs":
			return true // the log line has them; the live line stays short
		}
		if v := a.Value.String(); v != "" {
			fmt.Fprintf(&b, " %s=%s", a.Key, v)
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.mu.Lock()
	if row && !strings.Contains(r.Message, ":") {
		*h.rows++
	}
	text := fmt.Sprintf("bench: %d rows done · last: %s", *h.rows, b.String())
	h.mu.Unlock()
	h.line.Set(text)
	return err
}

func (h *benchProgress) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *benchProgress) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}
