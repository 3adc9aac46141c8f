// Package bench is `seckill bench`: one run that measures seckill's lock
// backends against the libraries and baselines they replace, on the same
// servers, and writes the report (docs/benchmarks.md) and chart
// (docs/bench.svg).
//
// Design notes follow the package clause.
package bench

// Design notes.
//
// A run has three parts, all against one set of real servers started by a
// localcluster (redis, etcd, ZooKeeper, stockd replicas behind nginx), plus
// a MariaDB the run starts itself for the mysql subjects:
//
//  1. The lock micro-benchmark (no HTTP). For C contenders (1, 8, 50) spread
//     over three client sets ("processes", each with its own clients and
//     lockers), every contender loops lock → GET stock → MULTI SET stock-1,
//     INCR lucky EXEC → unlock until the stock is gone, then the invariant
//     (stock 0, lucky N, N sales counted) is checked. N is picked per row
//     from a short calibration so each row takes a few seconds. The same loop
//     runs over every Subject: the seckill backends, the peers (redsync,
//     bsm/redislock, the articles' SETNX sleep-poll, etcd's
//     concurrency.Mutex and go-zookeeper's Lock used raw, a raw GET_LOCK
//     loop and a raw FOR UPDATE transaction) and the lock-free Lua sale as
//     a ceiling.
//  2. The serial bound, 1 / (CriticalSectionRoundTrips × RTT), with RTT from
//     a PING loop on the same Redis.
//  3. End to end: loadgen through nginx against three stockd replicas per
//     backend, and stockd's atomic mode as the HTTP ceiling (RowsBackends);
//     and the scaling rows (RowsScaling, scaling.go): the redis backend
//     locked, with request combining, with 2/4/8 stock segments with and
//     without combining, atomic with and without 8 segments, and one
//     request in flight — each sized by a calibration sale to sell for
//     seconds and reported as the median of three runs, with the verifier's
//     false sold-out and negative-segment checks in its invariant.
//
// Goals are ratios within the run, never absolute numbers, because the lab
// runs on two shared cores.
