// Package redislock is the "redis" backend: a single-instance Redis lock with
// fencing tokens, renewal, fair, event-driven waiting with direct hand-off
// between processes, and bounded lock passing within a process.
//
// # Keys
//
// A lock named K uses four keys under one hash tag (so they share a cluster
// slot whatever K is):
//
//	{K}        the owner value, SET NX PX ttl
//	{K}:fence  INCR once per acquisition from Redis (see Fencing tokens)
//	{K}:q      waiting owners in arrival order (sorted set)
//	{K}:qe     each waiter's entry deadline and TTL (hash)
//
// {K}:fence never expires, so tokens keep increasing across idle periods.
//
// Design notes follow the package clause.
package redislock

// Design notes.
//
// # Why hand-off instead of a broadcast
//
// A release that publishes "free" to every waiter wakes all of them; all but
// one lose the race and go back to sleep, which under contention sells less
// than a plain sleep-poll. So:
//
//  1. Per process and key, waiting goroutines queue locally, in order; only
//     one of them talks to Redis, and only while the process does not hold
//     the lock (see Cohort hand-off). A process adds at most one waiter per
//     key to Redis.
//  2. That waiter runs acquire.lua, which either takes the lock or appends
//     the waiter to {K}:q, atomically, so no release can slip in between.
//     When {K}:q does not exist nobody waits, and both scripts take their
//     fast path: one SET NX (and INCR fence) to acquire, GET/DEL to
//     release, no queue command, so an uncontended lock costs Redis little
//     more than redsync's.
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
// # Cohort hand-off
//
// Even with direct hand-off, every acquisition under contention costs a trip
// through Redis: a release script, a pub/sub message, goroutine wake-ups in
// two processes. So a
// Locker treats its goroutines as one cohort (as in NUMA-aware cohort
// locks; the local queue and passing are the cohort package): when a holder
// releases and another goroutine of the same Locker
// waits for the key, the lock is passed to it in memory, with no round trip,
// up to Options.LocalHandoffs (default 8) times in a row, even while other
// processes wait in {K}:q. After that many passes, or when no local
// goroutine waits, Release runs release.lua as above, which hands the lock
// to the head of {K}:q; the next local waiter then queues in Redis like any
// other process (its acquire.lua may overlap the release.lua; Redis orders
// them). So a waiter in another process gets the lock after at most
// LocalHandoffs+1 holders of the current process, processes take turns in
// Redis's FIFO order, and goroutines of one process in local FIFO order.
//
// The lock in Redis, and its validity, belong to the acquisition, not to one
// lease: the owner value stays the one the acquisition set (a release after
// passes is still owner-checked), and one watchdog timer per acquisition
// renews it every TTL/3 across passes. A lock is passed only while it has
// more than TTL/3 of validity left, has not been reported lost and was
// acquired after the last AdvanceTokens (its counter not below the floor
// that call set), so a pass
// never extends a lock past what Redis granted; otherwise it goes back to
// Redis. When the lock is lost, the current holder's Done closes and no
// further pass happens. A released lease cannot touch its successor's: its
// second Release returns lock.ErrNotHeld without a round trip.
//
// # Fencing tokens
//
// A lease's token is c<<16 | n: c is the {K}:fence value its Redis
// acquisition got, n the number of in-memory passes since then (0 for the
// acquiring goroutine, at most 65535, which is why LocalHandoffs is capped).
// The next acquisition from Redis INCRs c, so its token exceeds every token
// passed before it: tokens are strictly increasing in lock order. They are
// uint64 and fit as long as c stays below 2^48; compare them as integers (or
// as canonical decimal strings), not as Lua numbers, past 2^53.
//
// {K}:fence lives only in Redis. A Redis that restarts empty, from an older
// snapshot, or as a promoted lagging replica hands out tokens below ones
// already seen, which a fence refuses forever; AdvanceTokens (the
// lock.TokenAdvancer a fence calls) moves the counter back past the highest
// token seen, forward only (rediscounter, shared with redissonlock).
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
//
// # Layout
//
// acquire.go is the cohort.Server (acquire.lua, the hand-off message, the
// fallback retry, withdrawal), hold.go the cohort.Hold (release.lua, the
// watchdog), redislock.go the Locker and its subscription, advance.go
// AdvanceTokens. The local queue and passing are the cohort package's.
