package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"

	"seckill/internal/api"
)

// isTerminal reports whether w is a terminal: progress is drawn only there,
// so a pipe, a file or CI logs get the report alone.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// startProgress redraws one line on w every interval while a sale runs: the
// units sold and left, as GET /stock reports them (the run's own counts
// exist only once it returns), and the time elapsed. The returned stop ends
// the drawing, waits for it, and clears the line so the report starts clean.
func startProgress(ctx context.Context, w io.Writer, url string, initial int, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	client := &http.Client{Timeout: interval}
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			line := fmt.Sprintf("selling… %4.1fs", time.Since(start).Seconds())
			if s, err := readStock(ctx, client, url); err == nil {
				line += fmt.Sprintf("  sold %d  left %d/%d", s.Lucky, s.Stock, initial)
			}
			// \r and erase-line: the line is redrawn in place.
			fmt.Fprintf(w, "\r\033[K%s", line)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		fmt.Fprint(w, "\r\033[K")
	}
}

func readStock(ctx context.Context, client *http.Client, url string) (api.Stock, error) {
	var s api.Stock
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/stock", nil)
	if err != nil {
		return s, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET /stock: %d", resp.StatusCode)
	}
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s, err
}
