package servertest

import (
	"testing"

	"seckill/internal/servers"
)

// ServerCPU starts charging p's CPU to benchmark b: the returned func, called
// after the timed loop, reports the server's CPU since now per op as
// "server-µs/op", so a benchmark shows what each operation cost the server
// and not only the client.
func ServerCPU(b *testing.B, p *servers.Process) (report func()) {
	b.Helper()
	before, err := servers.ProcCPU(p.Pid())
	if err != nil {
		b.Fatal(err)
	}
	return func() {
		b.Helper()
		after, err := servers.ProcCPU(p.Pid())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64((after-before).Microseconds())/float64(b.N), "server-µs/op")
	}
}
