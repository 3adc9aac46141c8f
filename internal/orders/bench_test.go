package orders

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDrain measures how fast one consumer stores a backlog of b.N
// entries (time to lag 0), per batch size. Run with a fixed count, e.g.
// -bench Drain -benchtime 20000x.
func BenchmarkDrain(b *testing.B) {
	e := newEnv(b)
	for _, batch := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			stream := fmt.Sprintf("bench:%d:%d", batch, time.Now().UnixNano())
			table := fmt.Sprintf("bench_%d", batch)
			c := e.consumer(b, Config{Stream: stream, Table: table, Batch: batch, Consumer: "r1"})
			if _, err := e.db.ExecContext(b.Context(), "TRUNCATE TABLE `"+table+"`"); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i += 10000 {
				e.sell(b, stream, "sale", fmt.Sprintf("o%d", i), min(10000, b.N-i))
			}
			b.ResetTimer()
			start := time.Now()
			stop := run(b, c)
			e.drained(b, c, table, int64(b.N))
			elapsed := time.Since(start)
			b.StopTimer()
			stop()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "entries/s")
		})
	}
}
