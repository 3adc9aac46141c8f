package lab

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestSoakFaultsRunEverywhere(t *testing.T) {
	for _, f := range SoakFaults {
		sc, ok := scenarios[f]
		if !ok || sc.buyers || sc.failover || sc.noWarmup || sc.election {
			t.Errorf("soak fault %q is not a plain lab scenario", f)
		}
		for _, b := range Correct {
			if why := Inapplicable(b, f); why != "" {
				t.Errorf("soak fault %q does not apply to %s: %s", f, b, why)
			}
		}
	}
	// A fault that needs its own cell is refused before the cluster is
	// touched (a nil cluster would panic otherwise).
	for _, f := range []string{"failover-kill", "replayrace", "crash", "nosuch"} {
		_, _, err := Soak(context.Background(), nil, SoakConfig{Backend: "redis", Faults: []string{f}, RPS: 1, Concurrency: 1, Every: time.Second})
		if !errors.Is(err, ErrUnknown) {
			t.Errorf("fault %q: err = %v, want ErrUnknown", f, err)
		}
	}
}

func TestPacedLoadIsBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"result":"sold_out"}`))
	}))
	defer srv.Close()
	const rps = 20
	start := time.Now()
	l := startPaced(srv.URL, 4, rps, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A sold-out answer does not stop a paced buyer: the 10th comes.
	for {
		l.mu.Lock()
		n, changed := len(l.resps), l.changed
		l.mu.Unlock()
		if n >= 10 {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%d answers in 10s at %d rps", n, rps)
		}
	}
	resps := l.stop()
	elapsed := time.Since(start)
	if max := int(elapsed.Seconds()*rps) + 1; len(resps) > max {
		t.Fatalf("%d requests in %v, bound %d at %d rps", len(resps), elapsed, max, rps)
	}
	if len(resps) < 10 {
		t.Fatalf("%d answers, want the load to go on past sold_out", len(resps))
	}
}

func TestP99(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := P99(d); got != 99*time.Millisecond {
		t.Fatalf("P99 = %v, want 99ms", got)
	}
	if P99(nil) != 0 || P99([]time.Duration{time.Second}) != time.Second {
		t.Fatal("P99 of none or one")
	}
}
