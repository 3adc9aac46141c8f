package api

import "time"

// OK is the value of every healthy check in Health and Ready.
const OK = "ok"

// From names the replica that answered; every body of stockd's own routes
// but /leader embeds it (the X-Replica header says the same).
type From struct {
	Replica string `json:"replica"`
}

// SetReplica stamps the answering replica; the handler calls it on every
// body it writes.
func (f *From) SetReplica(name string) { f.Replica = name }

// Sale is the answer of POST /stock/reduce.
type Sale struct {
	// Attempt is the sale's attempt id, on Sold and Unconfirmed.
	Attempt string `json:"attempt,omitempty"`
	// Error is a stable, generic text for the failures worth explaining
	// (fenced, lock_lost, unconfirmed, error); empty otherwise.
	Error string `json:"error,omitempty"`
	From
	// Order is the order id the sale left in the ledger (stock.ledger on),
	// on Sold; a replayed Idempotency-Key answers the original one.
	Order string `json:"order,omitempty"`
	// Pending, on SoldOut with orders.payment_window, is the units still
	// reserved, which may come back (with Retry-After up to the earliest
	// deadline); absent when none.
	Pending *int64 `json:"pending,omitempty"`
	// PayBy, with orders.payment_window, is when the order's reservation
	// lapses unless paid (unix ms, the stock Redis's clock), on Sold; a
	// replay does not repeat it (GET /orders/:id has it, with the state).
	PayBy *int64 `json:"pay_by,omitempty"`
	// Replayed: this answer repeats an earlier sale with the same
	// Idempotency-Key (also said by the Idempotent-Replayed header); nothing
	// more was sold.
	Replayed bool   `json:"replayed,omitempty"`
	Result   Result `json:"result"`
	// StartsAt is when an item's window opens (unix ms), on NotStarted.
	StartsAt *int64 `json:"starts_at,omitempty"`
	// Stock is what is left after a sale (0 after the last unit), on Sold.
	Stock *int64 `json:"stock,omitempty"`
	// Token is the fencing token the sale was made under (0 in atomic
	// mode), on Sold.
	Token *uint64 `json:"token,omitempty"`
}

// OrderEnd is the answer of POST /orders/:id/pay and POST
// /orders/:id/cancel: the state the order is left in (docs/reservations.md).
type OrderEnd struct {
	From
	Order string `json:"order"`
	// State is "paid", "cancelled" or "expired": what this call made of
	// the order, or the state that won a race against it.
	State string `json:"state"`
	// Refund: the payment met an order that was no longer reserved (or
	// one another payment paid); it is owed back, and listed for the
	// operator.
	Refund bool `json:"refund,omitempty"`
}

// Stock is the answer of GET /stock and of POST /stock/reset: units left and
// units sold ("lucky" buyers).
type Stock struct {
	Lucky int64 `json:"lucky"`
	From
	// Returned is the units reservations gave back to the stock
	// (orders.payment_window): the books are stock + lucky - returned =
	// the initial stock. Absent when none.
	Returned int64 `json:"returned,omitempty"`
	// Segments is each segment's stock when the stock is split
	// (stock.segments > 1; Stock is their sum), so a verifier can see that
	// none went negative; absent otherwise.
	Segments []int64 `json:"segments,omitempty"`
	Stock    int64   `json:"stock"`
}

// Item is the answer of GET /items/:id, POST /items and POST
// /items/:id/reset: an item's sale at one instant, by the stock Redis's
// clock. Times are unix ms; a bound of 0 is none.
type Item struct {
	EndsAt  int64  `json:"ends_at"`
	ID      string `json:"id"`
	Initial int64  `json:"initial"` // the stock of its last reset
	Lucky   int64  `json:"lucky"`   // units sold
	// Now is the stock Redis's clock when read: what State was decided
	// by, and what a countdown should count from.
	Now int64 `json:"now"`
	// PerUserLimit is the limit its sales keep: its own, else
	// stock.per_user_limit (an item set to 0 inherits it); 0: unlimited.
	PerUserLimit int `json:"per_user_limit"`
	From
	SoldOut  bool  `json:"sold_out"`
	StartsAt int64 `json:"starts_at"`
	// State is "upcoming" (before starts_at), "open" or "ended" (from
	// ends_at on), as the sale scripts decide it; "archived" once
	// archived (DELETE /items/:id: every sale answers 410); or "halted"
	// when its sale went back in time (every sale answers store_lost).
	State string `json:"state"`
	// ArchivedAt is when it was archived, unix ms; absent when it is not.
	ArchivedAt int64 `json:"archived_at,omitempty"`
	Stock      int64 `json:"stock"` // units left
}

// ItemSettings is the body of POST /items (and, without ID, of POST
// /items/:id/reset), and an element of Items. Its times are unix ms (the
// requests also take RFC 3339 strings); 0 or absent is no bound. Its
// per_user_limit, 0 or absent in a request, inherits stock.per_user_limit;
// in GET /items it is the one in effect, as in Item.
type ItemSettings struct {
	EndsAt       int64  `json:"ends_at"`
	ID           string `json:"id,omitempty"`
	PerUserLimit int    `json:"per_user_limit"`
	StartsAt     int64  `json:"starts_at"`
	Stock        int64  `json:"stock"`
}

// Items is the answer of GET /items: every item's settings, by id.
type Items struct {
	Items []ItemSettings `json:"items"`
	From
}

// Reset is the body of POST /stock/reset (the admin token goes in
// X-Admin-Token or Authorization: Bearer).
type Reset struct {
	Stock int64 `json:"stock"`
}

// Receipt is the answer of GET /stock/receipts/:attempt: whether that sale
// attempt took effect, and the stock it left when it did.
type Receipt struct {
	Attempt string `json:"attempt"`
	From
	Sold  bool   `json:"sold"`
	Stock *int64 `json:"stock,omitempty"`
}

// Info is the answer of GET /info.
type Info struct {
	Backend string `json:"backend"` // lock backend
	// Durability is what the stock Redis promises for a sale answered
	// sold, as last read (at start, then by /readyz every few seconds);
	// absent until the Redis has answered, and from older replicas.
	Durability *Durability `json:"durability,omitempty"`
	Durable    bool        `json:"durable,omitempty"` // orders.durable: orders are stored in MySQL
	Fencing    bool        `json:"fencing"`           // fencing in effect, not merely configured
	Ledger     bool        `json:"ledger,omitempty"`  // stock.ledger: every sale leaves an order
	// MinReplicaAcks is stock.min_replica_acks in effect: how many
	// replicas must hold a sale (or a reset) before it is answered; 0: no
	// wait. Always present, so 0 is told apart from a replica too old to say.
	MinReplicaAcks int    `json:"min_replica_acks"`
	Mode           string `json:"mode"` // stock mode
	// PerUserLimit is stock.per_user_limit (0: unlimited).
	PerUserLimit int `json:"per_user_limit,omitempty"`
	From
	// ReplicaAckTimeoutMS is stock.replica_ack_timeout in milliseconds,
	// present when MinReplicaAcks is.
	ReplicaAckTimeoutMS int64 `json:"replica_ack_timeout_ms,omitempty"`
	// Sentinel: the stock Redis is reached through Redis Sentinel
	// (redis.sentinel.master), so it can fail over.
	Sentinel bool `json:"sentinel,omitempty"`
	// Cluster: the stock is on a Redis Cluster (redis.cluster.addrs),
	// each sale on one master.
	Cluster bool   `json:"cluster,omitempty"`
	Version string `json:"version"`
	// Release is the replica's release, and RunsBeside the oldest release
	// it shares a sale with during a rolling upgrade (CHANGELOG.md).
	Release    string `json:"release,omitempty"`
	RunsBeside string `json:"runs_beside,omitempty"`
	// Formats are the stored formats the replica writes and reads.
	Formats []Format `json:"formats,omitempty"`
}

// Format is one stored format in GET /info: the one a replica writes, and
// the oldest it reads. A replica refuses (503) what is newer than Writes.
type Format struct {
	Name      string `json:"name"`
	Writes    int    `json:"writes"`
	ReadsFrom int    `json:"reads_from"`
}

// Durability is GET /info's "durability": the stock Redis's persistence
// and what it makes of a sale answered sold.
type Durability struct {
	// AOF: the Redis logs every write to its append-only file and loads it
	// when it starts.
	AOF bool `json:"aof"`
	// Fsync is the AOF's appendfsync: "always", "everysec", "no", or
	// "unknown" where the Redis refuses CONFIG GET (managed services);
	// absent without an AOF.
	Fsync string `json:"fsync,omitempty"`
	// Promise says in one line which failures a 200 survives: a Redis
	// process crash, a machine crash, a failover (README, "Redis
	// requirements").
	Promise      string `json:"promise"`
	RedisVersion string `json:"redis_version,omitempty"`
	// WaitAOF: the Redis has WAITAOF (7.2 and later). stockd does not send
	// it; Promise rests on Fsync.
	WaitAOF bool `json:"waitaof,omitempty"`
	// Rewind says when a stock Redis that went back in time (an older
	// snapshot, another sale's data) is caught: by the witness
	// (stock.witness) whichever processes restart, or only while a stockd
	// that sold keeps running.
	Rewind string `json:"rewind,omitempty"`
}

// Health is the answer of GET /healthz; Status is always OK.
type Health struct {
	From
	Status string `json:"status"`
}

// Ready is the answer of GET /readyz (200 when every check is OK, else 503):
// each field is OK or the failing check's error text, but Clock,
// Eviction, Items and Memory, which are warnings.
type Ready struct {
	// Clock, present only when a clock is off the stock Redis primary's
	// by more than stock.max_clock_skew, or a replica's could not be
	// read, says which and by how much. The replica stays ready: the
	// primary's clock decides items' windows; a replica's would after a
	// failover.
	Clock string `json:"clock,omitempty"`
	// Eviction, present only when stock.allow_eviction lets a Redis that
	// may evict keys through, says which and its policy ("allowed:
	// maxmemory-policy allkeys-lru"); the replica stays ready. Without the
	// opt-out such a Redis fails Redis instead ("evicting: maxmemory-policy
	// allkeys-lru").
	Eviction string `json:"eviction,omitempty"`
	Fence    string `json:"fence"`
	// Items, present only when some item's sale is halted (its Redis went
	// back in time), names them ("halted: x, y"; at most 10, the others
	// counted). The replica stays ready: only those items' sales are
	// refused, on every replica alike.
	Items string `json:"items,omitempty"`
	Lock  string `json:"lock"`
	// Memory, present only when the stock Redis has a maxmemory with less
	// room below it than the units left need (at 1 KiB a unit, what the
	// heaviest sale takes), says so with the figures. The replica stays
	// ready: the Redis refuses sales only once full, on every replica.
	Memory string `json:"memory,omitempty"`
	Redis  string `json:"redis"`
	From
	// Stock is whether this replica reads the sale's format (not when a
	// newer replica reset it: docs/versions.md) and every stock key and
	// the lucky key hold integers a sale can count with; omitted by a replica whose inventory cannot
	// tell (older replicas, test fakes), so the other fields stay as they
	// were.
	Stock string `json:"stock,omitempty"`
	// Witness, with stock.witness set, is OK or why the register that
	// keeps the sale's epoch and ceilings does not answer (sales would be
	// unconfirmed).
	Witness string `json:"witness,omitempty"`
}

// Problem is the answer of a failed request other than a sale (bad input,
// refused admin call, unknown route, a dependency down).
type Problem struct {
	Error string `json:"error"`
	From
}

// Leader is the answer of GET /leader: the election as this replica sees it
// (200), or Error when the election backend could not be read (503). It
// carries no "replica": Self is the answering replica.
type Leader struct {
	Leader   string `json:"leader"`
	Self     string `json:"self"`
	IsLeader bool   `json:"is_leader"`
	Term     uint64 `json:"term"`
	// Backend is the election's backend ("etcd", "zookeeper"), "none" when
	// the election is off.
	Backend string `json:"backend,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Order is the answer of GET /orders/:id, and an element of Orders.
type Order struct {
	Entry      string `json:"entry"` // the ledger stream's entry id
	ID         string `json:"id"`
	Key        string `json:"key,omitempty"` // Idempotency-Key, if the sale had one
	Replica    string `json:"replica"`       // the replica that sold it
	Sale       string `json:"sale"`          // the sale (reset) it belongs to
	StockAfter int64  `json:"stock_after"`
	Time       string `json:"time"` // RFC 3339, milliseconds
	Token      uint64 `json:"token"`
	// Unit is the unit's number in the sale (the lucky count it made),
	// unique across segments; 0 for an order written before units were
	// numbered.
	Unit int64  `json:"unit,omitempty"`
	User string `json:"user,omitempty"`
	// State, with orders.payment_window, is the order's reservation:
	// "reserved" (until PayBy, unix ms), "paid", "cancelled" or
	// "expired" (docs/reservations.md); GET /orders/:id only, and absent
	// for an order sold without a window.
	State string `json:"state,omitempty"`
	PayBy int64  `json:"pay_by,omitempty"`
}

// Orders is the answer of GET /orders?user=U&offset=O&limit=L: one page of
// U's orders, oldest first, and how many U has in all.
type Orders struct {
	From
	Orders []Order `json:"orders"`
	Total  int64   `json:"total"`
	User   string  `json:"user"`
}

// Ledger is the answer of GET /ledger: the order ledger at one instant, for
// a verifier to compare with lucky and with the answers it counted.
type Ledger struct {
	Buyers int64 `json:"buyers"` // distinct named buyers
	// Durable is the orders of this sale stored in MySQL (orders.durable
	// on), and Lag the ledger entries not yet stored there; both absent
	// when off.
	Durable *int64 `json:"durable,omitempty"`
	From
	Lag    *int64 `json:"lag,omitempty"`
	Lucky  int64  `json:"lucky"`
	Orders int64  `json:"orders"` // entries of this sale in the ledger
	Sale   string `json:"sale"`
}

// Census is the answer of GET /stock/reservations: the sale's orders by
// state and its counters at one instant, and each invariant they break
// (docs/reservations.md, "Invariants"); OK when none.
type Census struct {
	Cancelled int64 `json:"cancelled"`
	Expired   int64 `json:"expired"`
	From
	Initial int64 `json:"initial"`
	Lucky   int64 `json:"lucky"`
	OK      bool  `json:"ok"`
	// Other counts states no script writes (a corrupt record).
	Other    int64    `json:"other,omitempty"`
	Paid     int64    `json:"paid"`
	Problems []string `json:"problems"`
	Reserved int64    `json:"reserved"`
	Returned int64    `json:"returned"`
	Stock    int64    `json:"stock"`
}

// Adoption is the answer of POST /stock/witness/adopt: the operator's
// decision to take the stock Redis's sale as the truth after the witness
// lost it (stock.AdoptWitness), as the witness now records it.
type Adoption struct {
	From
	ID     string    `json:"id"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Epoch  string    `json:"epoch"`
	Stocks []int64   `json:"stocks"` // per segment, as Redis held them
	Lucky  int64     `json:"lucky"`
	Lifted string    `json:"lifted,omitempty"` // the halt it lifted
}

// Reconciliation is the answer of POST /stock/reconcile: a halted sale's
// counts rebuilt from what survived a Redis that went back, and the halt
// lifted (stock.Reconcile). -1 marks a source that is not there.
type Reconciliation struct {
	From
	ID      string    `json:"id"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Epoch   string    `json:"epoch"`
	Sale    string    `json:"sale,omitempty"`
	Lifted  string    `json:"lifted"` // the halt it lifted
	Initial int64     `json:"initial"`
	// What it found.
	RedisStocks []int64 `json:"redis_stocks"`
	RedisLucky  int64   `json:"redis_lucky"`
	DurableUnit int64   `json:"durable_unit"` // the highest unit the durable orders hold
	WitnessSold int64   `json:"witness_sold"` // units the witness says were answered sold
	AtLeast     int64   `json:"at_least"`     // the operator's count
	// What it wrote.
	Stocks []int64 `json:"stocks"`
	Lucky  int64   `json:"lucky"`
	// Held: units counted sold that no order holds, never sold again:
	// the buyers' receipts account for them.
	Held int64 `json:"held"`
	// Pending: units Redis's ledger holds that the durable orders do not
	// yet; the consumer stores them.
	Pending int64 `json:"pending"`
}
