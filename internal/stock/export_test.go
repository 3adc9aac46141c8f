package stock

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
