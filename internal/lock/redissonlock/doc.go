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
// id, so the owner here is "<Locker uuid>:<sequence>", minted per hold and
// carried by the *Lease. Reentrancy is therefore by handle, not by
// goroutine: (*Lease).Reacquire runs the same acquire script for the same
// owner and increments the hold count; HoldCount reports it. Release undoes
// one hold; Done closes with lock.ErrReleased only when the count reaches
// zero; a Release beyond the count returns lock.ErrNotHeld. Reacquire never
// takes a lock the owner no longer holds, so a lost lease stays lost.
//
// Design notes follow the package clause.
package redissonlock

// Design notes.
//
// # Local queue and hand-off: the cohort package
//
// The goroutines of one Locker queue per key in the cohort package, which
// owns the FIFO, the hand-off bound, loss propagation and Close; this
// package supplies the Redis side (see Layout).
// Only the cohort's front talks to Redis: it runs the acquire script and,
// while another owner holds the lock, subscribes to the lock's channel,
// tries once more after the subscription is confirmed (a release published
// in between would otherwise be missed) and sleeps until a release message
// arrives or the returned TTL elapses, as Redisson's semaphore latch does,
// but with one latch per process: a release costs one acquire attempt per
// process, not one per waiting goroutine. Stats counts the attempts.
//
// A final Release while another goroutine of the Locker waits is a
// hand-off: the hold is a cohort.Transferer, and transfer.lua checks the
// releasing owner's field, replaces it with a new owner (HDEL, HSET 1,
// PEXPIRE) and INCRs the fence, all in one call; the new hold goes to the
// oldest waiter. Nothing is published, so other processes sleep on. Every
// lease has its own owner, so Redis always names the true holder: renewal,
// Reacquire, ForceUnlock and crash expiry work as for any lease, re-entry
// counts are never shared, and the token is the fence counter itself,
// which the cohort takes as is.
//
// Hand-offs are bounded by Options.LocalHandoffs in a row. The Release
// after the bound, with goroutines of the Locker still waiting, yields: it
// publishes "yield:<Locker uuid>", which the Locker itself ignores,
// and when release.lua reports that another connection heard it, the
// Locker's front holds back until another process's release message
// arrives (or a short fallback passes, in case the listener never takes the
// lock). So a waiter of another process acquires after at most
// LocalHandoffs+1 holders of this one. A front never races its own Locker's
// release: it waits until that release has reached Redis. Stats counts
// Handoffs and Yields.
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
// abandon.lua drops every hold of the owners involved under its own bounded
// deadline, so one lost reply never leaves the lock held for a watchdog TTL
// by an owner nobody renews. A retried partial Release can still count down
// twice.
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
// hash tag, e.g. "{sku42}". PUBLISH's count covers only the node the script
// runs on, so in a cluster a yield may miss listeners connected elsewhere;
// set LocalHandoffs negative there if that matters.
//
// # Layout
//
// wait.go is the cohort.Server (the front's acquire/subscribe/sleep loop,
// the yield), hold.go the cohort.Hold and Transferer (release.lua,
// transfer.lua), lease.go the reentrant *Lease over the cohort's lease,
// locker.go the Locker, ForceUnlock and Close, advance.go AdvanceTokens.
// Shared with redislock: the renewal timer (watchdog), the pub/sub
// connection (redissub) and the fencing counter's advance (rediscounter).
