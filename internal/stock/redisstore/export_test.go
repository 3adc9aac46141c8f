package redisstore

import "context"

// WitnessBegin records a reset's epoch in the witness and nothing else:
// a reset that failed between the witness and Redis.
func (s *Store) WitnessBegin(ctx context.Context, epoch string) error {
	return s.wit.begin(ctx, epoch, len(s.segs))
}

// SegmentAcks is segment i's replica acks.
func (s *Store) SegmentAcks(i int) ReplicaAcks { return s.segs[i].acks }

// KeysOf is the store's keys.
func (s *Store) KeysOf() Keys { return s.keys }

// UnitsOf is the durable orders the store's learning checks.
func (s *Store) UnitsOf() DurableUnits { return s.units }
