// Package mysqllock is the database's own lock, the third way of seed 004
// ("MySQL's own mutual-exclusion mechanisms"), as two backends on
// go-sql-driver/mysql and database/sql, both behind the cohort package's
// local FIFO with bounded in-memory passing:
//
//   - "mysql" (New): GET_LOCK(name, slice) / RELEASE_LOCK on a session
//     (*sql.Conn) pinned for the hold. A named lock belongs to its session:
//     losing the connection frees it, so the lease is the session.
//   - "mysql-row" (NewRow): the textbook pessimistic lock, a transaction
//     holding SELECT name FROM seckill_locks WHERE name = ? FOR UPDATE (the
//     row is inserted idempotently first) until ROLLBACK. It costs more per
//     server acquisition (a row lock, a second session for the token); it
//     is here to be measured, not because it is better.
//
// Handoffs < 0 turns passing off: every acquisition then goes to the
// server, as a plain GET_LOCK or FOR UPDATE loop would. The default bound
// is 32 passes per hold, not the cohort's 8: a hold that goes back to the
// server costs the next process a wake-up and an fsynced token commit
// (DefaultHandoffs says why and what it does to fairness).
//
// Design notes follow the package clause.
package mysqllock

// Design notes.
//
// # Waiting
//
// A server-side wait (GET_LOCK's timeout, innodb_lock_wait_timeout) is one
// slice of Config.WaitSlice, in whole seconds (MySQL documents whole
// seconds for the GET_LOCK timeout; innodb_lock_wait_timeout has no
// fraction), repeated until the lock is held. The statement runs on a context detached from the
// caller's: when the caller's ctx ends, KILL QUERY <connection id> from a
// control session interrupts the wait at once, the statement returns, and
// Acquire returns — at its deadline, leaving no waiter behind (a lock
// granted in that instant is released before Acquire returns). Letting the
// driver close the connection on cancel instead would not stop the wait:
// the server notices a closed socket only when it next writes, so the
// abandoned GET_LOCK could still be granted and hold the lock until then.
// If the wait has not ended 500ms after its ctx (the server is unreachable
// or stalled), the connection is dropped after all, so Acquire still
// returns about at its deadline; the KILL, still on its way, or else the
// slice ends the orphaned wait, and a session a late KILL could hit is
// never reused. Slices also let a restart or a dead link surface as an
// error within one slice.
//
// # Fencing token
//
// Minted while the lock is held, from an InnoDB counter row per name in
// seckill_lock_tokens: INSERT … ON DUPLICATE KEY UPDATE token =
// LAST_INSERT_ID(token + 1), one autocommitted round trip whose OK packet
// carries the value. "mysql" mints on its lock session; "mysql-row" on a
// control session, because its lock transaction ends in a rollback that
// would undo the mint. The lock orders holders and the commit precedes the
// lease, so tokens grow strictly per key and survive a restart (the
// counter is durable like any committed row). The lease token is the
// cohort's base<<16 | passes. Locker implements lock.TokenAdvancer for a
// database recreated or restored behind the fence.
//
// # Session = lease
//
// Lock sessions run with wait_timeout = Config.TTL: a holder that goes
// silent (paused, partitioned) loses its lock after TTL, when the server
// closes the idle session; a crashed holder's connection closes and frees
// it at once. A keep-alive every Config.KeepAlive (≤ TTL/2, default TTL/3)
// resets that timer and checks the hold: for "mysql" IS_USED_LOCK(name)
// must equal CONNECTION_ID() and the session's id must not have changed
// (a server restart or a proxy that switched backends shows up as a
// different id); for "mysql-row" the id. Done closes when a check fails or
// takes longer than KeepAlive, which the driver answers by closing the
// connection, so "may be lost" becomes "lost" on the server too.
//
//	sequenceDiagram
//	    participant A as stockd-1
//	    participant M as MySQL
//	    participant B as stockd-2
//	    A->>M: SELECT GET_LOCK('k', 5)  (session 7)
//	    M-->>A: 1
//	    A->>M: INSERT … token = LAST_INSERT_ID(token+1)
//	    M-->>A: token 41: lease 41<<16
//	    B->>M: SELECT GET_LOCK('k', 5)  (session 9, waits)
//	    A->>M: SELECT IS_USED_LOCK('k'), CONNECTION_ID()  (keep-alive)
//	    A->>M: SELECT RELEASE_LOCK('k')
//	    M-->>B: 1
//	    B->>M: INSERT … LAST_INSERT_ID(token+1)
//	    M-->>B: token 42
//
// # Limits
//
//   - A lock lives exactly as long as its session. A connection pool or
//     proxy that recycles or multiplexes server connections (database/sql's
//     own *sql.DB, ProxySQL with multiplexing, RDS Proxy, MySQL Router in
//     some modes) can run RELEASE_LOCK on another connection than GET_LOCK
//     (it returns 0 or NULL and the lock stays until the first connection
//     dies) or drop the holding connection under a live holder. Hence one
//     pinned *sql.Conn per hold, the CONNECTION_ID check, and: put no
//     multiplexing proxy between stockd and the server.
//   - Named locks are not replicated: after a failover to a replica (or in
//     a Galera cluster, another node) nobody holds anything. Done closes
//     with the broken sessions; fencing catches a late write.
//   - If the database is recreated (or restored from an older backup, or a
//     lagging replica is promoted), counters restart below the fence's
//     high-water mark: the fence refuses sales until AdvanceTokens moves
//     the counter past it. Equal tokens from two holders are refused by
//     the fence (one token held twice means lost state).
//   - MariaDB 10.11 vs MySQL 8.4: both keep user locks in the metadata-lock
//     subsystem, many per session, names up to 64 characters (longer keys
//     are hashed, see LockName); waiters were granted in arrival order
//     here (the cohort test checks it). MariaDB accepts fractional GET_LOCK
//     timeouts, MySQL documents whole seconds (hence whole-second slices).
//     MySQL 8.4 shows user locks in performance_schema.metadata_locks and
//     row locks in performance_schema.data_locks; MariaDB keeps
//     performance_schema off by default and has
//     information_schema.METADATA_LOCK_INFO only as a plugin, so
//     diagnostics here use IS_USED_LOCK, PROCESSLIST and INNODB_TRX, which
//     both have. MySQL 8.0.24+ sends error 4031 before closing an idle
//     session, MariaDB just closes it; MariaDB reports a killed session as
//     1927. A KILL QUERY that reaches an idle MariaDB session does not
//     touch its next statement (checked by hand); the package does not rely
//     on it anyway: it never reuses a session a KILL may still reach.
//
// # Layout
//
//   - config.go: Config, its defaults and validation, the two connector
//     configurations (lock sessions, control sessions), LockName.
//   - locker.go: Locker, New/NewRow, Close, Ping, AdvanceTokens, and the
//     interruptible wait (KILL QUERY, grace, tainted sessions).
//   - getlock.go, row.go: the cohort server side of each backend.
//   - hold.go: a server hold, its keep-alive, release and loss.
//   - pool.go: the bounded pool of pinned lock sessions.
//   - schema.go: the tables, the token mint and advance, the row insert.
