package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"seckill/internal/api"
)

// leaderCmd is `seckill leader`: poll GET /leader on one or more URLs (nginx,
// or each replica) and print every change of leader with a timestamp, until
// --duration has passed. With several replica URLs it also flags a moment
// where two replicas both claim to lead.
//
// Exit status: 0 when at least one answer came; 1 on usage errors or when
// no URL ever answered.
func leaderCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("leader", flag.ContinueOnError)
	urls := fs.String("url", "http://127.0.0.1:8080", "base URL(s) to poll, comma-separated (nginx, or each replica)")
	duration := fs.Duration("duration", 30*time.Second, "how long to watch")
	interval := fs.Duration("interval", 200*time.Millisecond, "poll interval")
	if err := parseFlags(fs, args, stderr); err != nil {
		return flagExit(err)
	}
	if *duration <= 0 || *interval <= 0 {
		fmt.Fprintln(stderr, "seckill leader: --duration and --interval must be positive")
		return exitFailure
	}
	targets := strings.Split(*urls, ",")
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	client := &http.Client{Timeout: max(*interval, time.Second)}

	poll := func(url string) (api.Leader, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/leader", nil)
		if err != nil {
			return api.Leader{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return api.Leader{}, err
		}
		defer resp.Body.Close()
		var v api.Leader
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return api.Leader{}, fmt.Errorf("GET /leader: %d: %w", resp.StatusCode, err)
		}
		if resp.StatusCode != http.StatusOK {
			return v, fmt.Errorf("GET /leader: %d %s", resp.StatusCode, v.Error)
		}
		return v, nil
	}

	last := map[string]string{} // url → last printed state
	answered := false
	changes := 0
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		claims := map[string]uint64{} // self → term, for replicas claiming to lead
		for _, u := range targets {
			v, err := poll(u)
			state := ""
			switch {
			case err != nil && ctx.Err() != nil:
				// The duration ended mid-request; not a transition.
				state = last[u]
			case err != nil:
				state = "unreachable: " + err.Error()
			case v.Backend == "none":
				state = "election disabled (backend none)"
			case v.Leader == "":
				state = "no leader"
			default:
				answered = true
				state = fmt.Sprintf("leader=%s term=%d", v.Leader, v.Term)
			}
			if err == nil && v.IsLeader {
				claims[v.Self] = v.Term
			}
			if state != last[u] {
				fmt.Fprintf(stdout, "%s %s %s\n", time.Now().Format("15:04:05.000"), u, state)
				last[u] = state
				changes++
			}
		}
		if len(claims) > 1 {
			fmt.Fprintf(stdout, "%s SPLIT: %d replicas claim to lead: %v\n", time.Now().Format("15:04:05.000"), len(claims), claims)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "%d changes seen in %s\n", changes, *duration)
			if !answered {
				fmt.Fprintln(stderr, "seckill leader: no URL reported a leader")
				return exitFailure
			}
			return exitOK
		case <-tick.C:
		}
	}
}
