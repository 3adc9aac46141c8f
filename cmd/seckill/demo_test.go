package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"seckill/internal/loadgen"
	"seckill/internal/localcluster"
)

func TestJudge(t *testing.T) {
	oversold := &loadgen.Report{Oversold: 10}
	consistent := &loadgen.Report{Consistent: true}
	notBuilt := fmt.Errorf("%w: stockd-1\nconfig: lock.backend: backend \"etcd\" not built yet", localcluster.ErrReplicaExited)
	crashed := fmt.Errorf("%w: stockd-1\npanic: boom", localcluster.ErrReplicaExited)
	for _, tc := range []struct {
		name     string
		backend  string
		replicas int
		report   *loadgen.Report
		err      error
		explicit bool
		verdict  string
		wantFail bool
	}{
		{"none oversells as expected", "none", 3, oversold, nil, false, "OVERSOLD (expected: no lock)", false},
		{"local oversells across replicas", "local", 3, oversold, nil, false, "OVERSOLD (expected: per-process lock)", false},
		{"local is correct in one replica", "local", 1, oversold, nil, false, "OVERSOLD", true},
		{"redis consistent", "redis", 3, consistent, nil, false, "consistent", false},
		{"redis oversold fails", "redis", 3, oversold, nil, false, "OVERSOLD", true},
		{"unbuilt backend in default list", "etcd", 3, nil, notBuilt, false, "unavailable (not in this stockd)", false},
		{"unbuilt backend asked for", "etcd", 3, nil, notBuilt, true, "ERROR: ", true},
		{"crashing replica is an error", "redis", 3, nil, crashed, false, "ERROR: ", true},
		{"other error", "redis", 3, nil, errors.New("nginx: not installed"), false, "ERROR: nginx", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := demoRow{Report: tc.report, Backend: tc.backend, ExpectedSafe: !unsafeBackend(tc.backend, tc.replicas)}
			row.judge(tc.err, tc.explicit)
			if !strings.HasPrefix(row.Verdict, tc.verdict) || row.failed != tc.wantFail {
				t.Fatalf("got verdict %q failed %v, want %q… failed %v", row.Verdict, row.failed, tc.verdict, tc.wantFail)
			}
		})
	}
}
