package servers

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTick is USER_HZ, the unit of /proc/<pid>/stat's CPU times; 100 on
// every Linux this lab runs on.
const ClockTick = 10 * time.Millisecond

// ProcCPU is process pid's user+system CPU time so far, from
// /proc/<pid>/stat (10 ms resolution): what benchmarks charge to a server
// they did not start in-process, next to the client's own CPU.
func ProcCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("cpu of pid %d: no such process", pid)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start at field 3.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu of pid %d: short /proc stat %q", pid, s)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu of pid %d: bad /proc stat %q", pid, s)
	}
	return time.Duration(utime+stime) * ClockTick, nil
}
