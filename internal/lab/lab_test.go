package lab

import (
	"slices"
	"testing"
)

func TestCellExpect(t *testing.T) {
	cases := []struct {
		cell Cell
		want Expect
	}{
		{Cell{"redis", "pause", true}, ExpectSafe},
		{Cell{"zookeeper", "kill", true}, ExpectSafe},
		{Cell{"redis", "pause", false}, ExpectOversell},
		{Cell{"redis-nocheck", "slowwork", true}, ExpectOversell},
		{Cell{"setnx", "crash", true}, ExpectStuck},
	}
	for _, tc := range cases {
		if got := tc.cell.Expect(); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.cell, got, tc.want)
		}
	}
}

func TestMatrixHasControlsAndFlawedCells(t *testing.T) {
	cells := Matrix(nil, nil)
	// 12 scenarios besides crash on each correct backend, less the two
	// experimental lockforget cells; controls: pause x4, latency and
	// lockforget on redis; 3 flawed cells.
	if got, want := len(cells), 4*12-2+4+1+1+3; got != want {
		t.Fatalf("got %d cells, want %d", got, want)
	}
	if got := Matrix([]string{"etcd"}, nil); slices.ContainsFunc(got, func(c Cell) bool { return c.Scenario == "lockforget" }) {
		t.Fatalf("etcd's cells %v include the experimental lockforget", got)
	}
	if got := Matrix([]string{"etcd"}, []string{"lockforget"}); len(got) != 1 {
		t.Fatalf("etcd/lockforget asked for by name: got %v, want the one cell", got)
	}
	if got := Matrix([]string{"redis"}, []string{"lockforget"}); len(got) != 2 || got[1].Fencing {
		t.Fatalf("redis/lockforget: got %v, want the fenced cell and its unfenced control", got)
	}
	if got := Matrix([]string{"redis"}, []string{"pause"}); len(got) != 2 || got[1].Fencing {
		t.Fatalf("redis/pause: got %v, want the fenced cell and its unfenced control", got)
	}
	if got := Matrix([]string{"setnx"}, nil); len(got) != 1 || got[0].Scenario != "crash" {
		t.Fatalf("setnx: got %v, want only the crash cell", got)
	}
}

// The watch predicates must tell a sale's read from its write on the wire,
// and must not mistake GET /stock's MGET for a write.
func TestWirePredicates(t *testing.T) {
	resp := func(args ...string) []byte {
		b := []byte("*" + itoa(len(args)) + "\r\n")
		for _, a := range args {
			b = append(b, "$"+itoa(len(a))+"\r\n"+a+"\r\n"...)
		}
		return b
	}
	cases := []struct {
		name        string
		b           []byte
		read, write bool
	}{
		{"get", resp("get", "stock"), true, false},
		{"fenced read", resp("evalsha", "abc", "2", "stock", "stock:fence", "redis", "7"), true, false},
		{"fenced write", resp("evalsha", "def", "4", "stock", "lucky", "stock:fence", "stock:fence:receipt:x-1", "redis/k", "7", "x-1", "9", "600000"), false, true},
		{"multi write", append(resp("multi"), append(resp("set", "stock", "9"), resp("incr", "lucky")...)...), false, true},
		{"status", resp("mget", "stock", "lucky"), false, false},
		{"ping", resp("ping"), false, false},
	}
	for _, tc := range cases {
		if got := isRead(tc.b); got != tc.read {
			t.Errorf("%s: isRead = %v, want %v", tc.name, got, tc.read)
		}
		if got := isWrite(tc.b); got != tc.write {
			t.Errorf("%s: isWrite = %v, want %v", tc.name, got, tc.write)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
