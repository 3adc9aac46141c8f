package orders

import "sync/atomic"

// Stats are a Consumer's counters since New.
type Stats struct {
	Inserted   int64 // rows this consumer inserted
	Duplicates int64 // entries whose row was already there (redeliveries, and Conflicts)
	Conflicts  int64 // of Duplicates: refused by a unique key of the sale: a unit, a key or a limited buyer sold twice
	Claimed    int64 // entries taken over from idle consumers (XAUTOCLAIM)
	Malformed  int64 // entries dead-lettered (see the package doc)
	Newer      int64 // times an entry of a newer format was met and left pending (redisstore.CheckLedgerFormat)
	Errors     int64 // failed attempts (Redis or MySQL), each followed by a backoff
	Groups     int64 // consumer groups this consumer (re)created
	Trimmed    int64 // acknowledged entries this consumer trimmed from the stream (Config.TrimEvery)
	TrimErrors int64 // failed trims, each retried at the next one due
}

type counters struct {
	inserted, duplicates, conflicts, claimed, malformed, newer, errors, groups, trimmed, trimErrors atomic.Int64
}

func (s *counters) add(o outcome) {
	s.inserted.Add(o.inserted)
	s.duplicates.Add(o.duplicates)
	s.conflicts.Add(o.conflicts)
	s.malformed.Add(o.malformed)
}

// Stats returns the counters; safe while Run runs.
func (c *Consumer) Stats() Stats {
	s := &c.stats
	return Stats{
		Inserted:   s.inserted.Load(),
		Duplicates: s.duplicates.Load(),
		Conflicts:  s.conflicts.Load(),
		Claimed:    s.claimed.Load(),
		Malformed:  s.malformed.Load(),
		Newer:      s.newer.Load(),
		Errors:     s.errors.Load(),
		Groups:     s.groups.Load(),
		Trimmed:    s.trimmed.Load(),
		TrimErrors: s.trimErrors.Load(),
	}
}
