// Package redislock is the "redis" backend: a single-instance Redis lock with
// fencing tokens, renewal, and fair, event-driven waiting with direct
// hand-off.
//
// # Keys
//
// A lock named K uses four keys under one hash tag (so they share a cluster
// slot whatever K is):
//
//	{K}        the owner value, SET NX PX ttl
//	{K}:fence  INCR once per acquisition; the value is the lease's token
//	{K}:q      waiting owners in arrival order (sorted set)
//	{K}:qe     each waiter's entry deadline and TTL (hash)
//
// {K}:fence never expires, so tokens keep increasing across idle periods.
//
// # Why hand-off instead of a broadcast
//
// A release that publishes "free" to every waiter wakes all of them; all but
// one lose the race and go back to sleep. On this lab's two cores, 50
// goroutines woken that way sold 5x less than a 10ms sleep-poll. So:
//
//  1. Per process and key, waiting goroutines queue locally (a locallock);
//     only the one at the front talks to Redis. A process adds at most one
//     waiter per key to Redis, and local waiters are served in order.
//  2. That waiter runs acquire.lua, which either takes the lock or appends
//     the waiter to {K}:q, atomically, so no release can slip in between.
//  3. release.lua gives the lock straight to the first live waiter in the
//     queue (SET owner PX, INCR fence) and PUBLISHes "<owner> <token>" on the
//     waiter's process channel. Exactly one process wakes, and its waiter
//     holds the lock without another round trip: about one acquire call per
//     acquisition under contention, and FIFO fairness across processes.
//  4. Each Locker subscribes to one channel of its own ("redislock:<id>"),
//     once, before its first acquire call, rather than one channel per key:
//     messages go only to the process that must act, and there is no
//     per-key subscribe/unsubscribe traffic.
//  5. Messages can be lost (a pub/sub reconnect). A waiter therefore also
//     re-runs acquire.lua after min(holder's remaining TTL, 50ms doubling to
//     200ms); the script recognises a lock already handed to it, and the call
//     refreshes the waiter's queue entry. An entry lapses 1s after the last
//     call, so a crashed waiter is skipped; a waiter that gives up removes
//     itself with release.lua, which also passes on a lock handed to it in
//     the meantime. A live-looking entry of a process that crashed less than
//     1s ago can still be handed the lock, which then waits out its TTL like
//     any crashed holder.
//
// # Validity
//
// A lease is valid until its last confirmed renewal (or acquisition) plus
// TTL, measured from when that request was sent, so a slow reply only shortens
// it. A hand-off learnt from a message is timed from the message's arrival:
// its transit is normally a fraction of a round trip, but a process paused
// between hand-off and delivery overestimates its validity by the pause, as a
// paused holder of any lease would. The fencing token covers both.
//
// # Clients
//
// The Locker takes a redis.UniversalClient built by the caller. Create it with
// ContextTimeoutEnabled so that a hung server cannot hold a call past its
// context; without it go-redis waits for its ReadTimeout instead.
package redislock
