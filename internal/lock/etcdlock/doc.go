// Package etcdlock is the "etcd" lock backend: a fair FIFO lock built from a
// session lease, create revisions and a watch on the predecessor, as in the
// etcd lock article this project reproduces and etcd's concurrency.Mutex.
//
// # Protocol
//
// Each contender (one per Locker and lock name, see below) puts a key
// Prefix+PathEscape(name)+"/"+<lease>-<locker>-<n>, unique per acquisition and
// attached to the lease of the
// process's session (borrowed from an etcdsess.Manager). The key with the
// smallest create revision holds the lock; every other contender watches only
// the key created just before its own (no herd), and looks again when that
// key is deleted. A crashed holder's lease expires after the session TTL and
// etcd deletes its key, which wakes the next contender.
//
// The layout is concurrency.Mutex's (owner = smallest create revision under
// the prefix), so a concurrency.Mutex on KeyPrefix(name) excludes and is
// excluded by this Locker. The Locker does not call Mutex.Lock itself because
// of pitfalls it must avoid: Mutex.Lock cleans up a failed wait with the
// client's own context (blocking until the client closes when etcd is
// unreachable), leaves its key behind when the enqueue Txn is cut off by ctx,
// keeps waiting after its session expired, and Mutex.Unlock deletes without
// checking it still owns the key.
//
// Design notes follow the package clause.
package etcdlock

// Design notes.
//
// # One etcd contender per process, cohorts
//
// Goroutines of one Locker share one session, so they are first serialised
// locally by the cohort package (per name, FIFO, ctx-aware); only the front
// of the local queue talks to etcd. When a holder releases while another
// local goroutine waits, the etcd key is kept and the lock is handed over
// in memory (zero round trips) up to Options.LocalHandoffs times in a row
// (default 8), even while other processes are queued; the next release
// then deletes the key, and the next process in etcd's order proceeds
// while this process's next goroutine queues a fresh key behind it. This
// is a cohort lock: FIFO within a process, FIFO across processes at batch
// granularity (a batch is at most LocalHandoffs+1 holders on one key), so
// a queued process waits for at most one batch per process queued ahead of
// it. The price is fairness between goroutines of different processes: a
// goroutine may be overtaken by up to LocalHandoffs goroutines that queued
// after it in another process. LocalHandoffs < 0 disables hand-overs.
//
// # Waiting without re-reads
//
// While a name is contended in a process (a local goroutine queued, or an
// enqueue found keys ahead), the Locker keeps one watch on the name's prefix
// (see feed). The enqueue Txn returns the keys created before ours; the
// watch's delete events remove them, and when none is left while our own
// key was not deleted, we hold the lock: the watch delivers events in
// revision order without gaps, so this is what a read at that revision
// would say. A remote hand-off then costs the holder's delete and the
// event, nothing more. Without a feed (or once it ends: leader lost, client
// closed), waiters fall back to watching their predecessor and reading
// again after each delete, as concurrency.Mutex does.
//
// # Fencing tokens
//
// Token() = CreateRevision<<16 | n, where CreateRevision is the etcd
// revision at which this process's key for the lock was created, and n
// counts the in-memory hand-overs since (0 for the acquisition that went
// through etcd). etcd revisions increase with every write, the holder's key
// always has the smallest create revision of the keys under the prefix, and a
// key created later has a larger one; the next holder's key — another
// process's, queued while we passed the lock around, or our own next one —
// was created after ours, so its token is larger than all of ours. The
// validity of every token of a batch is the session: a hand-over checks
// that the key was not seen deleted and that the session's lease is known
// alive for more than TTL/6 more, timed from when the last keep-alive etcd
// confirmed was sent (etcdsess.Manager.ValidUntil) — not from Session.Done,
// which closes up to TTL/3 + 0.5s after etcd expired the lease; past that
// the next holder goes through etcd. The cohort stops hand-overs before n
// would overflow 16 bits. For a fresh acquisition, Token()>>16 is
// exactly the lock key's create revision.
//
// # Clients
//
// A front whose session lease goes while it queues (expired in a pause or a
// partition, revoked) queues again on a new session (etcdsess.Manager.Gone
// ends the dead one at once, before its keep-alive would notice), and one
// that meets a brief outage (restart, no leader) tries again, both within
// its ctx: the local waiters behind it keep their turn.
//
// Create the etcd client with a DialTimeout and DialKeepAliveTime /
// DialKeepAliveTimeout of a second or two, so a dead server is noticed (and
// errors say ErrUnavailable) quickly instead of when a request times out.
//
// # Layout
//
// server.go is the cohort.Server and the hold (ownership), mutex.go the
// etcd protocol (enqueue Txn, wait for the keys ahead, guarded delete),
// feed.go the prefix watch per contended name, etcdlock.go the Locker.
// Keys whose put or delete went unconfirmed go to the etcdsess.Sweeper;
// the session and its validity are etcdsess's.
