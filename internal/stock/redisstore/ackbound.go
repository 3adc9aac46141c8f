package redisstore

import "time"

// DefaultReplicaAckTimeout is the zero AckBound's: the long bound of an ack
// that must come. WAIT returns the moment the replicas acknowledge, so it
// only bounds a replica that never does; it stays below go-redis's default
// read timeout (3s), which bounds the pipeline the wait is part of.
const DefaultReplicaAckTimeout = 2 * time.Second

// AckBound bounds one wait for replica acks (ReplicaAcks.Timeout). It is a
// type, not a time.Duration, so that a short bound is always named for what
// it is: the zero AckBound is the long default, AckWithin is an operator's
// setting (stockd's stock.replica_ack_timeout), and AckMustNotWithin is a
// test's check that no ack comes within d. A test that waited a short,
// fixed time for an ack that must come failed whenever the machine was
// busy; internal/testrules refuses AckWithin outside stockd's wiring, so a
// test cannot write one back.
type AckBound struct{ d time.Duration }

// AckWithin is the bound an operator configured: it must stay below the
// Redis client's read timeout and the sale's confirm timeout (stockd checks
// both at start). d <= 0 is the default.
func AckWithin(d time.Duration) AckBound { return AckBound{d: d} }

// AckMustNotWithin is a test's bound for a step whose ack must NOT come (a
// replica frozen or cut off): the only short bound a test may take.
func AckMustNotWithin(d time.Duration) AckBound { return AckBound{d: d} }

// Duration is the bound in effect: DefaultReplicaAckTimeout for the zero
// AckBound.
func (b AckBound) Duration() time.Duration {
	if b.d <= 0 {
		return DefaultReplicaAckTimeout
	}
	return b.d
}

// String is the bound in effect, as a time.Duration prints it.
func (b AckBound) String() string { return b.Duration().String() }
