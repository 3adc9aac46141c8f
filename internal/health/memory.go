package health

import (
	"context"
	"fmt"
)

// memoryReading is the stock Redis's memory and the units left, read
// together.
type memoryReading struct {
	mem  Memory
	left int64
}

// Memory is /readyz's "memory": "" unless the stock Redis has a maxmemory
// and less room below it than the units left need at BytesPerUnit each.
// left reads the units left (with the memory, when it is due); more are
// units known otherwise (the items', from their own reading). A warning:
// the Redis refuses sales only once it is full, on every replica alike,
// and the fix is its maxmemory, not this replica.
func (c *Checker) Memory(ctx context.Context, left func(context.Context) int64, more int64) string {
	rdb := c.cfg.Memory
	if rdb == nil {
		return ""
	}
	m := c.mem.Get(c.cfg.Now(), func() (memoryReading, error) {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		defer cancel()
		mem, err := ReadMemory(rctx, rdb)
		if err != nil || mem.Max == 0 {
			return memoryReading{mem: mem}, err
		}
		return memoryReading{mem: mem, left: max(left(rctx), 0)}, nil
	})
	if m == nil || m.mem.Max == 0 {
		return ""
	}
	units := m.left + more
	need := units * BytesPerUnit
	room := m.mem.Headroom()
	if units == 0 || room >= need {
		return ""
	}
	return fmt.Sprintf("maxmemory %s, used_memory %s: %s of room, below the %s that the %d units left need at %d B each; "+
		"at maxmemory the Redis refuses every sale: raise maxmemory", mib(m.mem.Max), mib(m.mem.Used), mib(max(room, 0)),
		mib(need), units, BytesPerUnit)
}

// mib says n bytes in MiB, to a tenth.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
