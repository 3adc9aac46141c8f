package servers

import (
	"os"
	"testing"
	"time"
)

// The reading moves with the CPU this process burns, and a pid that does
// not exist is an error, not a zero that a benchmark would take for "free".
func TestProcCPU(t *testing.T) {
	before, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var after time.Duration
	for x := 0; ; x++ {
		if after, err = ProcCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if after-before >= 2*ClockTick {
			break
		}
	}
	if _, err := ProcCPU(0); err == nil {
		t.Fatal("pid 0: no error")
	}
	if _, err := ProcCPU(1 << 30); err == nil {
		t.Fatal("a pid that does not exist: no error")
	}
}
