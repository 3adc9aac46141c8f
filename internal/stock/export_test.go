package stock

import "context"

// Queued is how many requests wait in segment i's combining queue (0
// without combining), so tests can line buyers up without sleeping.
func (s *Service) Queued(i int) int {
	c := s.segs[i].comb
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Gathering reports whether a request of segment i is acquiring its lock
// for the next batch.
func (s *Service) Gathering(i int) bool {
	c := s.segs[i].comb
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gathering
}

// WitnessBegin records a reset's epoch in the witness and nothing else:
// a reset that failed between the witness and Redis.
func (s *Store) WitnessBegin(ctx context.Context, epoch string) error {
	return s.wit.begin(ctx, epoch, len(s.segs))
}

// SegmentAcks is segment i's replica acks.
func (s *Store) SegmentAcks(i int) ReplicaAcks { return s.segs[i].acks }
