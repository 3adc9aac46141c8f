// Package flawedlock holds three deliberately BROKEN Redis locks, the earlier
// versions from the articles this lab follows. They are lab-only: each exists
// to show, reproducibly, the failure that the correct backend (redislock)
// prevents. Never use them to protect anything. Describe reports Safe: false,
// stockd logs a warning at startup for them, and the stock service does not
// apply fencing to them, so the overselling they cause is visible.
//
// Design notes follow the package clause.
package flawedlock

// Design notes.
//
// # The backends and their flaws
//
// "setnx" (NewSetNX), after the Jedis article: SETNX key owner, then EXPIRE
// key ttl as a second command. A process that dies, or whose request times
// out, between the two leaves a lock with no TTL that nobody ever releases;
// every later Acquire waits until its context gives up. Release is the
// article's WATCH key / GET / compare / MULTI / DEL / EXEC, which is correct
// on its own. The article's waiter loop also re-applied EXPIRE to a lock it
// found without a TTL; that repair is off by default (the flaw as usually
// told) and on with Options.RepairMissingTTL.
//
// "redis-nocheck" (NewNoCheck), hm-dianping v1: SET key owner NX PX ttl, and
// release by a plain DEL. When the work under the lock outlasts the TTL, the
// lock expires, B acquires it, and A's DEL then deletes B's lock, so C gets
// in while B still works: two holders at once.
//
// "redis-checkdel" (NewCheckDel), hm-dianping v2: release GETs the value,
// compares it with its own owner, then DELs as a separate command. If the
// lock expires and B acquires it between A's GET and A's DEL, A deletes B's
// lock, with the same result.
//
// None of them renews its lock, which is part of what the articles show:
// any work longer than the TTL runs unprotected. The articles use EX
// (seconds); these use PX/PEXPIRE so that sub-second lab TTLs work, which
// changes nothing else.
//
// # Where they break the lock contract, on purpose
//
//   - Lease.Done closes only on Release. A lease never learns that its lock
//     expired or was deleted, exactly like the articles' code, so a sale
//     carries on and writes under a lock it no longer holds.
//   - Waiting is a sleep-and-retry loop (Options.Retry, 10ms by default, the
//     Jedis article's Thread.sleep(10)). That is the thing being reproduced,
//     not this project's design; see redislock for event-driven waiting.
//   - Tokens come from INCR on a counter after each acquisition, so they
//     increase as the contract asks, but they do not make these locks safe:
//     two holders at once each hold a valid-looking token.
//
// They pass the parts of the conformance suite that hold while nothing
// expires (exclusion, release, deadlines, cancellation, tokens), and fail
// the rest by design.
//
// # Failpoints
//
// Each backend evaluates a failpoint (package failpoint) at the point that
// breaks it, so a test or a lab replica can force the bad interleaving:
//
//	setnx/afterSetNX     between SETNX and EXPIRE     (exit: crash, no TTL)
//	nocheck/beforeDel    before the unchecked DEL     (sleep: let it expire)
//	checkdel/beforeDel   between the GET and the DEL  (pause/sleep: B takes it)
//
// For example SECKILL_FAILPOINTS="setnx/afterSetNX=1*exit" makes a stockd
// replica die holding a lock that never expires. An error returned by a
// failpoint is returned by the call, wrapped in lock.ErrUnavailable, as if
// the next Redis command had failed; nothing is cleaned up, as nothing would
// be after a real failure there.
//
// # Keys
//
// A lock named K of backend B lives at "B:lock:K" (RedisKey), with its
// token counter at "B:token:K". The prefix keeps the backends apart, so a
// setnx lock left without a TTL by one demo does not block a demo of another.
