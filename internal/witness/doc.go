// Package witness keeps the stock witness's record of a sale somewhere the
// stock Redis cannot take it back with it.
//
// The stock Redis is fast but not a store of record: a restart without
// persistence, a failover to a replica that had not caught up, or a restore
// of an old snapshot can lose writes or rewind the counters to an earlier
// state, and a sale that then goes on from the rewound count sells units it
// already sold. The witness (package stock, witness.go) notes beside each
// sale, in a store that does not roll back with Redis, the sale's epoch and
// the least stock it has answered as sold; a Redis that comes back with more
// stock than that, or from an older epoch, is caught before it oversells.
//
// The types here are that store: stock.Register implementations on etcd
// (Etcd) and on MySQL/MariaDB (MySQL). They are dumb compare-and-set
// registers, one cell of bytes each: Get reads it, Put writes only if the
// bytes are still the ones read (a version counter would go back with a
// restored backup; the witness's bytes never repeat). They know nothing of
// what the bytes mean; how two writers' records merge (the lower stock, the
// newer epoch) is the witness's rule and lives with it in package stock.
//
// Errors that mean the server did not answer (it is down, unreachable, has
// no leader, or the caller's context ended first) wrap
// stock.ErrRegisterUnavailable, and the context's error too when it was the
// caller's context that ended. A Put whose answer was lost may have been
// stored: the caller reads again before deciding anything.
package witness
