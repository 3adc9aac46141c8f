package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"seckill/internal/loadgen"
	"seckill/internal/localcluster"
)

func TestJudge(t *testing.T) {
	oversold := &loadgen.Report{Oversold: 10}
	consistent := &loadgen.Report{Consistent: true}
	refused := fmt.Errorf("%w: stockd-1\nconfig: lock.backend: unknown backend \"etcd\"", localcluster.ErrReplicaExited)
	crashed := fmt.Errorf("%w: stockd-1\npanic: boom", localcluster.ErrReplicaExited)
	for _, tc := range []struct {
		name     string
		backend  string
		replicas int
		report   *loadgen.Report
		err      error
		verdict  string
		wantFail bool
	}{
		{"none oversells as expected", "none", 3, oversold, nil, "OVERSOLD (expected: no lock)", false},
		{"local oversells across replicas", "local", 3, oversold, nil, "OVERSOLD (expected: per-process lock)", false},
		{"local is correct in one replica", "local", 1, oversold, nil, "OVERSOLD", true},
		{"redis consistent", "redis", 3, consistent, nil, "consistent", false},
		{"redis oversold fails", "redis", 3, oversold, nil, "OVERSOLD", true},
		{"redis false sold-out fails", "redis", 3, &loadgen.Report{Consistent: true, FalseSoldOut: 2}, nil, "FALSE SOLD-OUT", true},
		{"mysql consistent", "mysql", 3, consistent, nil, "consistent", false},
		{"mysql-row oversold fails", "mysql-row", 3, oversold, nil, "OVERSOLD", true},
		// No "not built yet" row: every backend is built, so one stockd
		// refuses is a failure the demo must show.
		{"backend refused by stockd", "etcd", 3, nil, refused, "ERROR: ", true},
		{"crashing replica is an error", "redis", 3, nil, crashed, "ERROR: ", true},
		{"other error", "redis", 3, nil, errors.New("nginx: not installed"), "ERROR: nginx", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := demoRow{Report: tc.report, Backend: tc.backend, ExpectedSafe: !unsafeBackend(tc.backend, tc.replicas)}
			row.judge(tc.err)
			if !strings.HasPrefix(row.Verdict, tc.verdict) || row.failed != tc.wantFail {
				t.Fatalf("got verdict %q failed %v, want %q… failed %v", row.Verdict, row.failed, tc.verdict, tc.wantFail)
			}
		})
	}
}

// The demo shows every backend stockd wires for the sale, the database
// locks of issue 11 included, each expected to be safe across replicas.
func TestDemoBackends(t *testing.T) {
	for _, b := range []string{"none", "local", "redis", "redisson", "etcd", "zookeeper", "mysql", "mysql-row"} {
		if !slices.Contains(Backends, b) {
			t.Errorf("Backends %v lacks %s", Backends, b)
		}
	}
	for _, b := range []string{"mysql", "mysql-row"} {
		if unsafeBackend(b, 3) {
			t.Errorf("%s judged unsafe across replicas", b)
		}
	}
}
