package main

import (
	"log/slog"
	"testing"

	"seckill/internal/election"
	"seckill/internal/servers/servertest"
)

// The lock and the election run on one session per process: the election
// borrows the one the lock built, and builds (and registers for closing)
// nothing of its own.
func TestLockAndElectionShareTheSession(t *testing.T) {
	cases := []struct {
		backend string
		server  func(t *testing.T, c *Config)
		session func(w *wiring) any
	}{
		{"etcd", func(t *testing.T, c *Config) { c.Etcd.Endpoints = []string{"http://" + servertest.Etcd(t).Addr()} },
			func(w *wiring) any { return w.etcdMgr }},
		{"zookeeper", func(t *testing.T, c *Config) { c.ZooKeeper.Servers = []string{servertest.ZooKeeper(t).Addr()} },
			func(w *wiring) any { return w.zkSess }},
	}
	for _, tc := range cases {
		t.Run(tc.backend, func(t *testing.T) {
			c := validConfig(t)
			c.Lock.Backend, c.Election.Backend = tc.backend, tc.backend
			tc.server(t, c)
			w := &wiring{cfg: c, log: slog.Default()}
			t.Cleanup(func() { _ = w.close() })

			if _, _, err := buildLocker(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			sess, clients := tc.session(w), len(w.closers)
			el, err := buildElector(t.Context(), w)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = el.(election.Closer).Close() })
			if tc.session(w) != sess || len(w.closers) != clients {
				t.Fatalf("the election built clients of its own: %d closers, want %d", len(w.closers), clients)
			}
		})
	}
}

// With the election off, /leader has no status to read and stop is a no-op.
func TestElectionNone(t *testing.T) {
	w := &wiring{cfg: validConfig(t), log: slog.Default()}
	stop, status, err := startElection(t.Context(), w, nil, nil, nil)
	if err != nil || status != nil {
		t.Fatalf("got %v, %v; want no status and no error", status, err)
	}
	stop()
	if len(w.closers) != 0 {
		t.Fatalf("built %d clients for no election", len(w.closers))
	}
}
