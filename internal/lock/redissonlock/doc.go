// Package redissonlock is the "redisson" lock backend: Redisson's reentrant
// RLock rebuilt in Go on go-redis.
//
// # Server-side state
//
// A lock is a Redis hash {owner-id: hold-count} with a TTL. acquire.lua takes
// it when it is absent or already the caller's (HINCRBY + PEXPIRE) and
// otherwise returns the holder's remaining PTTL; release.lua decrements the
// count, deletes the hash at zero and PUBLISHes on the lock's channel
// "redisson_lock__channel:{key}". A first acquisition also INCRs "<key>:fence"
// inside the same script, which makes the fencing token of Lease.Token.
// AdvanceTokens (lock.TokenAdvancer) moves that counter forward past a
// fence's high-water mark when a Redis that lost its state restarts it low.
//
// # Owner identity and reentrancy
//
// Redisson names the owner "<instance-uuid>:<thread-id>". Go has no thread
// id, so the owner here is "<Locker uuid>:<acquisition sequence>", minted by
// Acquire and carried by the *Lease. Reentrancy is therefore by handle, not by
// goroutine: (*Lease).Reacquire runs the same acquire script for the same
// owner and increments the hold count; HoldCount reports it. Release undoes
// one hold; Done closes with lock.ErrReleased only when the count reaches
// zero; a Release beyond the count returns lock.ErrNotHeld. Reacquire never
// takes a lock the owner no longer holds, so a lost lease stays lost.
//
// # Waiting without a herd
//
// A contender whose first attempt fails subscribes to the lock's channel,
// tries once more after the subscription is confirmed (a release published in
// between would otherwise be missed) and then sleeps until a release message
// arrives or the returned TTL elapses, as Redisson's semaphore latch does.
// Unlike Redisson, a Locker wakes one goroutine per release, not all: it owns
// one pub/sub connection and keeps a FIFO of waiters per key, and only the
// head of that FIFO talks to Redis. A release message wakes the head; when the
// head acquires or gives up, the next waiter becomes head. Across N processes
// a release therefore costs N acquire attempts, not one per waiting goroutine.
// Stats counts the attempts so a benchmark can check that.
//
// # Local hand-off
//
// A final Release while another goroutine of the same Locker waits for the
// key does not delete the lock: transfer.lua checks the releasing owner's
// field, replaces it with a new owner minted by the Locker (HDEL, HSET 1,
// PEXPIRE) and INCRs the fence, all in one call, and the new *Lease goes to
// the oldest idle waiter through a channel. One round trip replaces release,
// PUBLISH, the pub/sub wake-up and the waiter's acquire script, and nothing
// is published, so other processes' waiters sleep on. Redis always names the
// true holder, so renewal, Reacquire, ForceUnlock and crash expiry work as
// for any lease; the new lease has its own watchdog, Done and token.
//
// The in-memory alternative, a cohort lock that passes the Redis hold
// between goroutines without telling Redis and derives tokens as
// token<<16|n, saves that round trip but was rejected: the hash would name
// an owner that has left, re-entry counts of two leases would share one
// field, and tokens would no longer equal the fence counter other tools read.
//
// Hand-offs are bounded by Options.LocalHandoffs (default 8) in a row. The
// Release that reaches the bound asks the script to release instead when
// PUBSUB NUMSUB shows another connection listening on the channel; it then
// publishes "yield:<Locker uuid>", which the Locker's own dispatcher ignores,
// and the Locker's queue head holds back until another process's release
// message arrives (or a short fallback passes, in case the listener never
// takes the lock). So a waiter of another process acquires after at most
// LocalHandoffs+1 holders of this one. With nobody else listening the
// hand-offs simply go on. Stats counts Handoffs and Yields.
//
// # Lost replies
//
// A reply that never came does not mean the script did not run, and a
// client retry may run it twice. So each call that adds a hold names its
// result: acquire.lua gets the hold count the attempt makes (1, or the
// lease's count + 1) and a second run returns the first run's answer
// without adding a hold; transfer.lua's new owner id is minted per call, so
// a second run that finds it holding reports the hand-off again. A reply
// that is lost, or that no correct run could give, abandons the attempt:
// abandon.lua drops every hold of that owner under its own bounded deadline,
// so one lost reply never leaves the lock held for a watchdog TTL by an
// owner nobody renews. A retried partial Release can still count down twice.
//
// # Watchdog and lease time
//
// With Options.LeaseTime 0 (the default) a lock is held with TTL
// Options.Watchdog and renewed every Watchdog/3 for as long as it is held.
// Renewal stops on the final Release or on Close. If a renewal finds another
// owner (the key expired, was deleted or force-unlocked) or the validity
// passes without a successful renewal, Done closes with an error wrapping
// lock.ErrLost. With a positive LeaseTime there is no renewal (Redisson's
// lock(leaseTime) semantics): the lock expires LeaseTime after the last
// acquire, re-entry or partial release, and Done closes at that moment.
//
// # Operators
//
// (*Locker).ForceUnlock deletes a lock whoever holds it and wakes the
// waiters. It is for operators only; the request path never calls it. The
// holder learns of it at its next renewal (at most Watchdog/3 later) or, with
// a LeaseTime, when the lease expires; holders in the same Locker learn at once.
//
// # Redis Cluster
//
// The lock hash and its fence key must live in one slot: give cluster keys a
// hash tag, e.g. "{sku42}". PUBSUB NUMSUB counts only the node the script
// runs on, so in a cluster the hand-off bound may miss listeners connected
// elsewhere; set LocalHandoffs negative there if that matters.
package redissonlock
