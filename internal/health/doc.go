// Package health reads what the sale assumes of its Redis servers and
// cannot enforce itself: that no key is evicted (maxmemory-policy), what a
// sale answered sold outlives (persistence, replica acks), that the clocks
// windows are decided by agree, and that there is memory left for the
// stock. stockd reads these at start, where a broken assumption refuses
// the start or is logged, and /readyz reads them again while the replica
// runs, since each can change under it (CONFIG SET, a failover).
package health
