// Package orders stores the ledger's orders in MySQL or MariaDB, exactly
// once: a Consumer reads the Redis stream the sale scripts append to (one
// entry per unit sold, see stock.Order) through a consumer group, inserts
// each entry into a table keyed by the order id, and acknowledges the
// entries only after the transaction that holds them has committed.
//
// # Delivery
//
// Delivery is at least once, rows are exactly once. An entry leaves the
// group's pending list (XACK) only after its row is committed, so a crash,
// a lost reply or a database outage at any point leaves it pending and it
// is stored again later; the primary key on the order id makes the second
// insert a no-op (INSERT … ON DUPLICATE KEY UPDATE id = id), counted in
// Stats.Duplicates. Entries are stored one transaction per read (at most
// Config.Batch entries, one multi-row INSERT).
//
// # Every replica runs a consumer
//
// There is no leader: each replica runs a Consumer under its own name in the
// same group. Redis hands each new entry to one of them, so the work is
// shared, and a duplicate delivery costs one ignored insert, so nothing
// needs to be exclusive. A replica that dies leaves its undelivered
// entries to the others and its delivered-but-unacknowledged ones in the
// pending list, where the others' XAUTOCLAIM finds them once they have been
// idle for Config.ClaimIdle. Running it only on the leader would add a
// fail-over delay and an election dependency to a path that the unique key
// already makes safe, and would stop the drain whenever there is no leader.
//
// Design notes follow the package clause.
package orders

// Design notes.
//
// # Resets
//
// stock's Reset deletes the stream, and the group with it. Every command
// that answers NOGROUP makes the consumer recreate the group (XGROUP CREATE
// … 0 MKSTREAM, from the first entry of the new stream; BUSYGROUP from a
// replica that got there first is success) and go on. A batch read before
// the reset and not yet committed is kept in memory and stored anyway: its
// orders were sold, even if the stream that held them is gone.
//
// # Outages
//
// A failed read, insert or acknowledgement is retried with a bounded
// exponential backoff (50ms doubling to 2s) that ends with the context.
// The batch being stored is kept and retried as it is, so nothing is lost
// while the database is down: the entries stay pending in Redis (for
// another replica to claim if this one dies) and in memory. A batch already
// committed whose XACK failed is only acknowledged again, not re-inserted.
//
// # Malformed entries
//
// An entry without id, sale, token, replica, stock_after or time, or with a
// value the table cannot hold (see parse), cannot become an order row. It
// is logged, counted in Stats.Malformed and written to a dead-letter table
// (Table + "_dead": entry id, reason, the raw fields as JSON) in the same
// transaction as its batch, then acknowledged with it. Skipping it silently
// would hide a producer bug; leaving it pending would block its batch
// forever. The dead-letter table keeps it for a human after the stream is
// gone. user and key may be absent (read as empty).
//
// parse checks everything EnsureSchema's table would refuse, so a row the
// database refuses means the table is not EnsureSchema's (altered by
// hand). That batch is not dead-lettered but retried, with errors logged
// and the lag growing: it is the schema's fault, not the entries', and
// every entry after it would fail the same way.
//
// # One order per unit, per key, per limited buyer
//
// Every table has UNIQUE (sale, unit) and UNIQUE (sale, user, idem_key):
// a unit's number (the lucky count its sale made, ledger.lua) and a
// buyer's idempotency key each have one order in a sale. A second (another
// id) is what a stock Redis that went back in time leaves when it sells a
// unit again; it is refused, counted, logged and acknowledged as below.
// NULLs never collide: entries from before units were numbered, and
// anonymous buyers' keys, are not bound. Tables made before these keys get
// them at start (EnsureSchema), refused loudly if a unit was already sold
// twice.
//
// With Config.UniqueBuyer the table also has UNIQUE (sale, user). user is
// NULL for anonymous buyers, and NULLs never collide, so it only binds
// named buyers. A second order of one buyer in one sale (another id) is not
// inserted: it is counted as a duplicate and as a conflict (Stats.Conflicts),
// logged at error level — it means the sale sold that buyer twice — and
// acknowledged, since retrying cannot change the outcome.
//
// Every refused order (unit, key or buyer) is also written to the
// dead-letter table in its batch's transaction, reason "refused: …": what
// the group acknowledges, MySQL holds, so trimming the acknowledged part
// of the stream (Config.TrimEvery) never loses an entry.
//
// # Trimming
//
// Redis 7.0 has no "trim what the group acknowledged": TrimLedger reads
// the bound from XINFO GROUPS (last-delivered-id) and XPENDING (the
// oldest pending entry) and trims below it, all in one script, so it
// never meets a stream other than the one it read (a reset deletes the
// stream and its group; an XTRIM MINID computed before one would cut the
// next sale's entries if their ids were lower). Every group of the stream
// counts. The trim is exact, not '~': the index entries to remove are
// the trimmed entries' ids, read in the same run; a partly trimmed
// stream node is freed with its last entry. Every replica trims after its
// own acknowledgements, at most once per TrimEvery and once when its read
// finds nothing; concurrent trims are safe (one script at a time) and a
// second one finds nothing. A trim removes at most 16 runs of 1000
// entries: a larger backlog goes over the next trims. Trimmed entries are
// counted (stock's Keys.Trimmed), so the ledger's orders stay XLEN plus
// that count.
//
// # Lag
//
// Lag is what the group has not stored yet: XINFO GROUPS' lag (entries not
// yet delivered to the group, Redis 7) plus its pending count (delivered,
// not acknowledged). When Redis cannot compute lag (entries deleted from
// the middle of the stream) the entries after the group's last delivered id
// are counted instead. No stream: 0. A stream without the group (just after
// a reset): its length. A batch held in memory across a reset is not
// counted.
