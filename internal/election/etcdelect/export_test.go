package etcdelect

import "seckill/internal/election"

// Rewatched receives a token each time l's watch was re-established after
// a compaction.
func Rewatched(l election.Leadership) <-chan struct{} { return l.(*leadership).rewatched }
