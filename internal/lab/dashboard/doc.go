// Package dashboard is seckill's live view of a sale: an Aggregator that
// polls what the replicas and Redis already expose, and a Handler serving a
// self-contained page (HTML, CSS and JS embedded, no CDN, charts drawn as
// hand-written SVG) plus the JSON state the page polls several times a
// second.
//
// # Where the numbers come from
//
//   - stock, lucky, initial: one MGET of the stock key(s), the lucky key and
//     "<stock>:initial" (what POST /stock/reset writes, read the same way
//     the leader's audit reads it) when a Redis address is given, so the
//     three are one instant; otherwise GET /stock of the first replica that
//     answers, with the initial stock learned as the audit learns it
//     (stock + lucky whenever lucky is 0). Oversold is stock + lucky !=
//     initial, or a negative stock.
//   - sales/s per replica, results by outcome: each replica's
//     seckill_reduce_total{result} counters from /metrics; rates are the
//     counter deltas between polls.
//   - lock wait p50/p99: the seckill_lock_wait_seconds histogram from
//     /metrics, buckets summed over replicas, quantiles interpolated inside
//     a bucket as Prometheus' histogram_quantile does, over the last few
//     seconds (and since start when the window saw no acquisition).
//   - lock backend, replica name: GET /info; readiness, warnings: GET /readyz;
//     leader and term: GET /leader (the highest term any replica reports).
//
// The dashboard never writes, but for the guarded reset: the page asks for
// the admin token and POSTs to this handler, which forwards the call to a
// replica's POST /stock/reset with the token; the token is never stored.
//
// Design notes follow the package clause.
package dashboard

// Design notes.
//
// # Items
//
// The items' table (items.go) is read from the replicas' GET /items and
// GET /items/:id, not from Redis: an item's state (upcoming, open, ended,
// halted) is decided by Redis's clock inside item.lua, which the replica
// runs; reading the keys would mean deciding it again here. It is read at
// most once a second and for at most MaxItems items.
//
// # Why a separate command, not stockd's /dashboard
//
// `seckill dashboard` serves it, not stockd: a replica sees only itself, and
// would have to learn and poll its peers to draw the cluster; the page must
// keep drawing while the lab kills, pauses and restarts replicas (a page
// served by one of them dies with it); and stockd's public surface behind
// nginx stays the sale API, with nothing to allow-list or harden for a UI.
// The command listens on 127.0.0.1 with a free port by default and prints
// the URL, because the reset forwards an admin token and the page reads
// /metrics, which nginx keeps private.
