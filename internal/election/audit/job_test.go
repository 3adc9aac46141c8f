package audit_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/election/audit"
	"seckill/internal/servers/servertest"
)

func TestResult(t *testing.T) {
	cases := []struct {
		r    audit.Record
		err  error
		want string
	}{
		{audit.Record{OK: true}, nil, audit.ResultOK},
		{audit.Record{OK: false}, nil, audit.ResultViolation},
		{audit.Record{}, fmt.Errorf("%w: term 1 < recorded 2", audit.ErrFenced), audit.ResultFenced},
		{audit.Record{}, fmt.Errorf("%w: read sale: i/o timeout", audit.ErrRedis), audit.ResultError},
	}
	for _, tc := range cases {
		if got := audit.Result(tc.r, tc.err); got != tc.want {
			t.Errorf("Result(%+v, %v) = %q, want %q", tc.r, tc.err, got, tc.want)
		}
	}
}

// observed records ObserveRun calls.
type observed []string

func (o *observed) ObserveRun(result string) { *o = append(*o, result) }

// Job runs the audit, counts each result and logs what an operator must see:
// a violation as an error, a fenced run as a warning.
func TestJob(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	if err := rdb.MSet(ctx, "stock", 10, "lucky", 0, "stock:initial", 10).Err(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	aud := audit.New(rdb, audit.Config{
		Stock: "stock", Lucky: "lucky", Fence: "stock:fence", Initial: "stock:initial",
		Replica: "r-1", Backend: "etcd",
	})
	var obs observed
	job := aud.Job(&obs, log)

	step := func(name string, term uint64, wantErr error, wantLevel, wantMsg string) {
		t.Helper()
		logs.Reset()
		err := job(ctx, term)
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: got %v, want %v", name, err, wantErr)
		}
		switch {
		case wantLevel == "" && logs.Len() > 0:
			t.Fatalf("%s: want no log line, got:\n%s", name, logs.String())
		case wantLevel != "" && (!strings.Contains(logs.String(), "level="+wantLevel) || !strings.Contains(logs.String(), wantMsg)):
			t.Fatalf("%s: log lacks %s %q:\n%s", name, wantLevel, wantMsg, logs.String())
		}
	}
	step("consistent", 5, nil, "DEBUG", "audit ok")
	if err := rdb.Set(ctx, "lucky", 3, 0).Err(); err != nil { // 10 + 3 != 10: oversold
		t.Fatal(err)
	}
	step("oversold", 5, nil, "ERROR", "sale invariant violated")
	step("deposed", 4, audit.ErrFenced, "WARN", "a leader with a higher term has recorded")
	_ = rdb.Close()
	step("redis gone", 6, audit.ErrRedis, "", "") // the Runner logs failures, not the job

	want := observed{audit.ResultOK, audit.ResultViolation, audit.ResultFenced, audit.ResultError}
	if fmt.Sprint(obs) != fmt.Sprint(want) {
		t.Fatalf("observed %v, want %v", obs, want)
	}
}

// A nil Observer and a nil logger are accepted: not counted, default log.
func TestJobWithoutObserver(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	aud := audit.New(rdb, audit.Config{Stock: "s", Lucky: "l", Fence: "f", Replica: "r", Backend: "zookeeper"})
	if err := aud.Job(nil, nil)(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
}
