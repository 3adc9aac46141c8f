package zklock

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serverCPU is a server process's user+system CPU time from
// /proc/<pid>/stat (in USER_HZ ticks of 10 ms), so a benchmark can report
// what each operation cost the server, not only the client.
func serverCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// reportServerCPU reports the server CPU spent since before, per op.
func reportServerCPU(b *testing.B, pid int, before time.Duration) {
	b.ReportMetric(float64((serverCPU(b, pid)-before).Microseconds())/float64(b.N), "server-µs/op")
}
