package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"seckill/internal/api"
	"seckill/internal/election"
	"seckill/internal/handler"
	"seckill/internal/testwait"
)

// fakeLeader is a LeaderStatus with a fixed local status and fresh read.
type fakeLeader struct {
	leading bool
	read    election.Leader
	err     error
	// sawDeadline records whether the fresh read was bounded.
	sawDeadline bool
}

func (f *fakeLeader) Status() election.Status { return election.Status{Leading: f.leading} }

func (f *fakeLeader) Backend() string { return "etcd" }

func (f *fakeLeader) Leader(ctx context.Context) (election.Leader, error) {
	_, f.sawDeadline = ctx.Deadline()
	return f.read, f.err
}

// getLeader serves GET /leader with ls (nil: no election) and decodes the
// answer into the typed contract.
func getLeader(t *testing.T, ls handler.LeaderStatus) (int, api.Leader) {
	t.Helper()
	return getLeaderCtx(t, t.Context(), ls)
}

// getLeaderCtx is getLeader for a client that waits as long as ctx.
func getLeaderCtx(t *testing.T, ctx context.Context, ls handler.LeaderStatus) (int, api.Leader) {
	t.Helper()
	h := handler.New(handler.Config{Replica: replica, AdminToken: token}, handler.Deps{Leader: ls})
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/leader", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got := rec.Header().Get("X-Replica"); got != replica {
		t.Fatalf("X-Replica %q, want %q", got, replica)
	}
	var v api.Leader
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("body is not an api.Leader: %v: %s", err, rec.Body.String())
	}
	return rec.Code, v
}

func TestLeader(t *testing.T) {
	errDown := fmt.Errorf("%w: dial 127.0.0.1:2379: connection refused", election.ErrUnavailable)
	cases := []struct {
		name     string
		ls       *fakeLeader // nil: election.backend none
		wantCode int
		want     api.Leader
	}{
		{"backend none", nil, http.StatusOK,
			api.Leader{Self: replica, Backend: "none"}},
		{"leader", &fakeLeader{leading: true, read: election.Leader{ID: replica, Term: 7}}, http.StatusOK,
			api.Leader{Self: replica, Leader: replica, IsLeader: true, Term: 7, Backend: "etcd"}},
		{"not leader", &fakeLeader{read: election.Leader{ID: "r-other", Term: 8}}, http.StatusOK,
			api.Leader{Self: replica, Leader: "r-other", Term: 8, Backend: "etcd"}},
		// Paused past its session: the local flag is still set, the server
		// already names a successor. The fresh read wins.
		{"stale local flag", &fakeLeader{leading: true, read: election.Leader{ID: "r-other", Term: 9}}, http.StatusOK,
			api.Leader{Self: replica, Leader: "r-other", Term: 9, Backend: "etcd"}},
		{"no leader", &fakeLeader{leading: true, err: fmt.Errorf("etcdelect: %w", election.ErrNoLeader)}, http.StatusOK,
			api.Leader{Self: replica, Backend: "etcd"}},
		{"read fails", &fakeLeader{leading: true, err: errDown}, http.StatusServiceUnavailable,
			api.Leader{Self: replica, Error: errDown.Error(), Backend: "etcd"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ls handler.LeaderStatus
			if tc.ls != nil { // a nil *fakeLeader must stay a nil interface
				ls = tc.ls
			}
			code, got := getLeader(t, ls)
			if code != tc.wantCode || got != tc.want {
				t.Fatalf("got %d %+v, want %d %+v", code, got, tc.wantCode, tc.want)
			}
			if tc.ls != nil && !tc.ls.sawDeadline {
				t.Fatal("the fresh read ran without a deadline")
			}
		})
	}
}

// A fresh read that never answers is cut at the handler's bound, not held
// for as long as the client waits.
func TestLeaderReadIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 2s bound")
	}
	// The client waits until the test's deadline. The read sees which
	// ended it: the handler's bound while the client still waits, or the
	// client's wait itself, which is what an unbounded read would last.
	client := testwait.Until(t)
	ls := blockingLeader{client: client, clientWaiting: make(chan bool, 1)}
	start := time.Now()
	code, got := getLeaderCtx(t, client, ls)
	took := time.Since(start)
	if code != http.StatusServiceUnavailable || got.Error == "" || got.IsLeader || got.Backend != "zookeeper" {
		t.Fatalf("got %d %+v, want 503 with an error, is_leader false and the backend", code, got)
	}
	if !<-ls.clientWaiting {
		t.Fatalf("the read ended %v on, when the client stopped waiting: held for as long as the client waits, not cut at the handler's bound", took)
	}
	t.Logf("answered after %v", took.Round(time.Millisecond))
}

// blockingLeader's fresh read never answers: it ends with its ctx, and
// reports on clientWaiting whether the client's ctx was still live then.
type blockingLeader struct {
	client        context.Context
	clientWaiting chan bool
}

func (blockingLeader) Status() election.Status { return election.Status{Leading: true} }

func (blockingLeader) Backend() string { return "zookeeper" }

func (b blockingLeader) Leader(ctx context.Context) (election.Leader, error) {
	<-ctx.Done()
	b.clientWaiting <- b.client.Err() == nil
	return election.Leader{}, errors.Join(election.ErrUnavailable, ctx.Err())
}
