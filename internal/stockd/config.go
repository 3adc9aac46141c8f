package stockd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/viper"

	"seckill/internal/failpoint"
	"seckill/internal/replicaname"
	"seckill/internal/stock"
)

// Config is stockd's whole configuration, and the one list of its keys: a
// field with a default tag is a key, named by its mapstructure tag under its
// section's (Lock.RedisAddr is lock.redis_addr, env STOCKD_LOCK_REDIS_ADDR),
// with its default written as in the environment (lists comma-separated).
// Its doc tag says what the key is for: configs/stockd.yaml and the table
// in docs/config.md are generated from these tags (make docs), with the
// ranges Validate enforces. Adding a key is adding its field, then make docs.
//
// Load fills it from a YAML file (--config), then STOCKD_* environment
// variables, over the defaults. Validate checks it; internal packages
// receive plain values derived from it, never the Config or viper.
type Config struct {
	Replica string `mapstructure:"replica" default:"" doc:"name in responses, metrics and logs; empty: stockd-<n> in compose (read from Docker's DNS, bounded 2 s), else the host name"` // "" = stockd-<n> in compose, else the host name (package replicaname)
	HTTP    struct {
		Addr            string        `mapstructure:"addr" default:":8080" doc:"listen address, host:port"`
		ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout" default:"10s" doc:"grace for in-flight requests after SIGTERM"`
		// Limits of the public listener (see serve.go and README "Running
		// it in public").
		ReadHeaderTimeout time.Duration `mapstructure:"read_header_timeout" default:"5s" doc:"the request line and headers must arrive within this; at most http.read_timeout"`
		ReadTimeout       time.Duration `mapstructure:"read_timeout" default:"10s" doc:"the whole request, body included, must arrive within this: a trickled body is cut here"`
		WriteTimeout      time.Duration `mapstructure:"write_timeout" default:"30s" doc:"the answer's deadline: must stay above lock.wait_timeout + work.delay + 2 x stock.confirm_timeout (3 x with stock.witness; work.delay at its upper end), else the start is refused naming lock.wait_timeout; with stock.combine a batch works for each buyer, so stockd forms no batch whose work does not fit; should not exceed the proxy's read timeout (nginx: 30s; not checked)"`
		IdleTimeout       time.Duration `mapstructure:"idle_timeout" default:"60s" doc:"an idle keep-alive connection is closed after this"`
		MaxHeaderBytes    int           `mapstructure:"max_header_bytes" default:"16384" doc:"the request line and headers, in bytes (8 KiB at least); larger get 431"`
		MaxBodyBytes      int           `mapstructure:"max_body_bytes" default:"65536" doc:"larger bodies get 413 and the connection is closed, not drained (a sale needs no body and takes at most 4 KiB, declared or chunked; a reset ~20 bytes)"`
		MaxConns          int           `mapstructure:"max_conns" default:"4096" doc:"connections served at once; the rest wait in the accept queue. Keep it below the process's open-file limit"`
		// TrustedProxies may set the client address by X-Forwarded-For.
		TrustedProxies []string `mapstructure:"trusted_proxies" default:"" doc:"IP addresses or CIDRs whose X-Forwarded-For names the client (compose: its network's private ranges); required with auth.buyers proxy; empty: the peer is the client"`
	} `mapstructure:"http" doc:"the listener; its limits are those of a public one (docs/buyers.md, Running it in public)"`
	Admin struct {
		Token string `mapstructure:"token" default:"" doc:"required: a random secret of 120+ bits by estimate (no repeats, runs or words like changeme), unless auth.allow_weak_secrets; guards POST /stock/reset. E.g. STOCKD_ADMIN_TOKEN=$(openssl rand -hex 16)"`
	} `mapstructure:"admin" doc:"the operator's endpoints: POST /stock/reset and GET /ledger"`
	// Auth says who a buyer is (package auth): no one (every sale
	// anonymous), the sub of a verified JWT, or the X-User a trusted proxy
	// sets. Never a header any client may write.
	Auth struct {
		Buyers      string        `mapstructure:"buyers" default:"none" doc:"none (every sale anonymous; X-User or any Authorization header is a 401), jwt (the sub of a verified Authorization: Bearer token), proxy (X-User, from http.trusted_proxies only, which it requires)"`
		Required    bool          `mapstructure:"required" default:"false" doc:"an anonymous sale is a 401, so the per-user limit cannot be escaped; refused with auth.buyers none, where nothing could be sold"`
		JWTSecret   string        `mapstructure:"jwt_secret" default:"" doc:"jwt: an HS256 secret, 32+ bytes and 120+ bits by estimate as admin.token (e.g. openssl rand -hex 32); this and/or auth.jwt_keys"`
		JWTKeys     string        `mapstructure:"jwt_keys" default:"" doc:"jwt: a file of public keys, PEM or JWKS (RS256 with RSA 2048+, ES256 with P-256)"`
		JWTIssuer   string        `mapstructure:"jwt_issuer" default:"" doc:"jwt: required, the one iss accepted; a buyer is (iss, sub)"`
		JWTAudience string        `mapstructure:"jwt_audience" default:"" doc:"jwt: required, must be in the token's aud (tokens for another service do not buy here)"`
		JWTLeeway   time.Duration `mapstructure:"jwt_leeway" default:"30s" doc:"jwt: clock skew allowed on exp and nbf. With auth.buyers none or proxy, any auth.jwt_* key set refuses the start"`
		// AllowWeakSecrets accepts a weak admin.token and auth.jwt_secret,
		// for a lab only; an empty token is refused all the same.
		AllowWeakSecrets bool `mapstructure:"allow_weak_secrets" default:"false" doc:"lab only: accept a weak admin.token and auth.jwt_secret (never an empty token, nor a secret under 32 bytes), with a warning at start while it is on"`
	} `mapstructure:"auth" doc:"who a buyer is (docs/buyers.md); never a header any client may write"`
	Log struct {
		Level  string `mapstructure:"level" default:"info" doc:"slog level; debug logs every request"`
		Format string `mapstructure:"format" default:"text" doc:"slog handler"`
	} `mapstructure:"log"`
	Redis struct {
		Addr     string        `mapstructure:"addr" default:"127.0.0.1:6379" doc:"the stock Redis, host:port (unused with redis.sentinel.master)"`
		Password string        `mapstructure:"password" default:"" doc:"the stock Redis's password"`
		DB       int           `mapstructure:"db" default:"0" doc:"the stock Redis's database, not negative"`
		Timeout  time.Duration `mapstructure:"timeout" default:"1s" doc:"dial, read and write timeout of the stock Redis"`
		// Sentinel, when Master is set, finds the stock Redis (and the
		// Redis locks' one, unless lock.redis_addr) through these
		// Sentinels instead of redis.addr, and follows its failovers.
		Sentinel struct {
			Master string   `mapstructure:"master" default:"" doc:"the name these Sentinels monitor: the stock Redis (and the Redis locks', unless lock.redis_addr) is its primary, followed across failovers; requires redis.sentinel.addrs"`
			Addrs  []string `mapstructure:"addrs" default:"" doc:"the Sentinels, host:port each; requires redis.sentinel.master"`
		} `mapstructure:"sentinel"`
		// Cluster, when Addrs is set, is a Redis Cluster holding the sale:
		// every key of one sale (the default one, each item) in one slot,
		// items spread over the masters (docs/cluster.md).
		Cluster struct {
			Addrs []string `mapstructure:"addrs" default:"" doc:"seed nodes of a Redis Cluster holding the stock, host:port each, instead of redis.addr: the sale's keys need one hash tag (stock.key {stock}), items spread over the masters, failovers and slot moves are followed (docs/cluster.md). Not with redis.sentinel"`
		} `mapstructure:"cluster"`
	} `mapstructure:"redis" doc:"the stock Redis"`
	Lock struct {
		Backend     string        `mapstructure:"backend" default:"redis" doc:"the distributed lock; lab-only values need lab.unsafe and a lab build, and oversell on purpose"`
		Key         string        `mapstructure:"key" default:"seckill:lock" doc:"the lock's name, not empty (lock.key:N per segment)"`
		TTL         time.Duration `mapstructure:"ttl" default:"10s" doc:"the Redis locks' lease, renewed every ttl/3 while held"`
		WaitTimeout time.Duration `mapstructure:"wait_timeout" default:"5s" doc:"longest wait for the lock, then 503 busy (see http.write_timeout)"`
		Shed        bool          `mapstructure:"shed" default:"true" doc:"answer 503 busy at once, with a Retry-After, to a buyer whom the lock's queue in this replica could not serve within lock.wait_timeout (estimated from how often the lock comes back), instead of holding its connection for the whole wait; locked mode"`
		MaxQueue    int           `mapstructure:"max_queue" default:"256" doc:"with lock.shed, most requests of one replica queued for one lock (per segment), the holder included; the next is answered 503 busy at once. A longer queue sells no faster and holds a proxy connection each: past the proxy's connections buyers are dropped unanswered. Keep it at least stock.combine_max"`
		RedisAddr   string        `mapstructure:"redis_addr" default:"" doc:"a Redis of its own for the lock, host:port; empty: the stock Redis"` // lock Redis, when it differs from Redis.Addr
	} `mapstructure:"lock"`
	Redisson struct {
		Watchdog  time.Duration `mapstructure:"watchdog" default:"30s" doc:"the Redisson lock's watchdog lease, renewed every watchdog/3"`
		LeaseTime time.Duration `mapstructure:"lease_time" default:"0s" doc:"0: held until released, renewed by the watchdog; else a fixed lease without renewal"`
	} `mapstructure:"redisson" doc:"lock.backend redisson"`
	Etcd struct {
		Endpoints   []string      `mapstructure:"endpoints" default:"127.0.0.1:2379" doc:"etcd members, host:port or http(s)://host:port; at least one when the lock, the election or the witness is etcd"`
		SessionTTL  time.Duration `mapstructure:"session_ttl" default:"10s" doc:"the session lease's TTL, in whole seconds as etcd's leases are (1500ms is refused)"`
		DialTimeout time.Duration `mapstructure:"dial_timeout" default:"2s" doc:"bound on dialling etcd"`
	} `mapstructure:"etcd" doc:"lock.backend etcd, election.backend etcd, stock.witness etcd"`
	ZooKeeper struct {
		Servers        []string      `mapstructure:"servers" default:"127.0.0.1:2181" doc:"ensemble members, host:port; at least one when the lock or the election is zookeeper"`
		SessionTimeout time.Duration `mapstructure:"session_timeout" default:"10s" doc:"the ZooKeeper session timeout"`
		Root           string        `mapstructure:"root" default:"/seckill/locks" doc:"parent of the lock nodes: an absolute path, no trailing /"`
	} `mapstructure:"zookeeper" doc:"lock.backend zookeeper, election.backend zookeeper"`
	// MySQL is the mysql and mysql-row backends' server (mysql.go).
	MySQL struct {
		// DSN has no default: it carries a password.
		DSN        string        `mapstructure:"dsn" default:"" doc:"required for lock.backend mysql and mysql-row, stock.witness mysql and orders.durable: a go-sql-driver DSN with a database, e.g. seckill:secret@tcp(mysql:3306)/seckill, straight to the server (no proxy that multiplexes connections: a named lock belongs to its session); a readTimeout in it must exceed mysql.wait_slice. Tables are created at start"`
		PoolSize   int           `mapstructure:"pool_size" default:"16" doc:"lock sessions (server connections) open at once"`
		SessionTTL time.Duration `mapstructure:"session_ttl" default:"10s" doc:"the lock session's wait_timeout, in whole seconds as MySQL takes it (1500ms is refused): a silent (paused, cut off) holder loses the lock after this, a dead one at once"`
		KeepAlive  time.Duration `mapstructure:"keep_alive" default:"0s" doc:"how often a held lock's session is checked; 0 = mysql.session_ttl/3, else 10ms up to mysql.session_ttl/2"` // 0 = session_ttl/3
		WaitSlice  time.Duration `mapstructure:"wait_slice" default:"5s" doc:"one server-side wait (GET_LOCK timeout, innodb_lock_wait_timeout), in whole seconds as MySQL takes them (a fraction is refused); a cancelled wait is ended at once by KILL QUERY"`
	} `mapstructure:"mysql" doc:"lock.backend mysql (GET_LOCK) and mysql-row (SELECT ... FOR UPDATE), stock.witness mysql, orders.durable"`
	Stock struct {
		Key            string        `mapstructure:"key" default:"stock" doc:"the stock's Redis key, not empty; the sale's other keys derive from it (docs/config.md, Key names)"`
		LuckyKey       string        `mapstructure:"lucky_key" default:"lucky" doc:"the units sold, not empty"`
		FenceKey       string        `mapstructure:"fence_key" default:"stock:fence" doc:"the fence (highest token written), not empty; receipts are <stock.fence_key>:receipt:*"`
		Fencing        bool          `mapstructure:"fencing" default:"true" doc:"check fencing tokens at the write; false in locked mode is lab-only (lab.unsafe)"`
		Mode           string        `mapstructure:"mode" default:"locked" doc:"locked: lock, read, decide, write; atomic: one Lua script, no lock"`
		ConfirmTimeout time.Duration `mapstructure:"confirm_timeout" default:"3s" doc:"how long a stock read or write without an answer is retried, with the same attempt id (so never twice), before the sale answers 503 unconfirmed"`
		Combine        bool          `mapstructure:"combine" default:"true" doc:"locked mode: the lock holder also sells to the buyers queued behind it in its process, in one fenced read and one fenced write per batch; each batch takes the lock from the lock server (no pass in memory between the replica's requests)"`
		CombineMax     int           `mapstructure:"combine_max" default:"64" doc:"most buyers in one combined batch, the holder included; a batch does work.delay for each buyer it may sell to, so with a long work.delay batches are smaller: no more buyers than fit http.write_timeout (the start logs the cap)"`
		Segments       int           `mapstructure:"segments" default:"1" doc:"split the stock over this many keys (stock, stock:1, ...), each with its own lock key and fence; sold out only when all are empty; 1 is the one-key layout"`
		// The order ledger: every sale leaves an order, and the
		// sale may name its buyer (X-User) and carry an Idempotency-Key.
		Ledger         bool          `mapstructure:"ledger" default:"true" doc:"every sale leaves an order in a Redis stream (<stock.key>:orders), written by the script that takes the unit; needed by named buyers, Idempotency-Key, /orders, /ledger, stock.per_user_limit and orders.durable. Off when sales are unfenced (lab)"`
		PerUserLimit   int           `mapstructure:"per_user_limit" default:"0" doc:"most units one named buyer may buy per sale (until a reset); 0 = unlimited; items inherit it unless they set their own (docs/items.md); needs stock.ledger and named buyers (refused with auth.buyers none)"` // 0 = unlimited
		IdempotencyTTL time.Duration `mapstructure:"idempotency_ttl" default:"24h" doc:"how long an Idempotency-Key answers its first sale again, at least, by the selling stockd's clock: its record has no Redis TTL (Redis's clock may jump), later keyed sales trim it, a reset removes it"`
		// A sale is answered sold only once this many replicas hold it
		// (WAIT); -1: 1 with Sentinel, else 0 (minReplicaAcks).
		MinReplicaAcks    int           `mapstructure:"min_replica_acks" default:"-1" doc:"a sale is answered sold only once this many replicas hold it (WAIT after its script), else 503 unconfirmed, settled by its receipt; -1: 1 with redis.sentinel.master, else 0"`
		ReplicaAckTimeout time.Duration `mapstructure:"replica_ack_timeout" default:"500ms" doc:"the WAIT's bound; with acks on it must stay below redis.timeout and stock.confirm_timeout"`
		// AllowEviction runs on a Redis whose maxmemory-policy may evict
		// keys, which stockd otherwise refuses (health.Checker).
		AllowEviction bool `mapstructure:"allow_eviction" default:"false" doc:"run on a Redis whose maxmemory-policy may evict keys (anything but noeviction), which is otherwise refused: exit 2 at start, /readyz 503 later. Loud, and evicted keys can sell twice"`
		// RequireAOF refuses a stock Redis without an append-only file,
		// where a sale answered sold is in memory only (durability.go).
		RequireAOF bool `mapstructure:"require_aof" default:"false" doc:"refuse a stock Redis without an append-only file: exit 2 at start, /readyz 503 later. Either way GET /info durability says what a 200 survives"`
		// Witness keeps the sale's epoch and ceilings where they do not
		// roll back with the stock Redis (witness.go).
		Witness        string        `mapstructure:"witness" default:"none" doc:"keep the sale's epoch and the least stock answered 200 outside the stock Redis (etcd.endpoints, or mysql.dsn's table stock_witness), so a Redis that went back in time halts the sale even when every stockd restarted with it; a 200 waits for the record. Compose sets etcd"`
		WitnessTimeout time.Duration `mapstructure:"witness_timeout" default:"2s" doc:"one round trip to the witness"`
		// MaxClockSkew bounds how far a clock may be off the stock Redis
		// primary's, which decides items' windows (clock.go).
		MaxClockSkew time.Duration `mapstructure:"max_clock_skew" default:"1s" doc:"how far the stock Redis primary's clock may be from this process's for an item's window to move (its high-water clock and end latch); beyond it a sale at a window's edge answers 503 clock_skew. Also warns (log, /readyz clock; still ready) when a Redis replica's or this process's clock is off the primary's by more: after a failover the promoted replica's clock decides items' windows (docs/items.md). 0 turns the bound and the warning off"`
	} `mapstructure:"stock" doc:"the sale: its Redis keys, how it sells, what it promises"`
	// Orders is the ledger's durable copy in MySQL (mysql.dsn), written by
	// a consumer group on the ledger stream in every replica.
	Orders struct {
		Durable        bool          `mapstructure:"durable" default:"false" doc:"copy the ledger into MySQL (mysql.dsn, table orders, the items' in orders_items; needs stock.ledger) from a consumer group in every replica; an unreachable MySQL does not stop sales (orders wait in the stream, GET /ledger shows the lag). With orders.payment_window each order's end too (table orders_ends), and a payment is answered paid only once MySQL holds it"`
		Group          string        `mapstructure:"group" default:"orders" doc:"the stream's consumer group shared by the replicas, not empty"`
		ClaimIdle      time.Duration `mapstructure:"claim_idle" default:"5s" doc:"an entry left pending this long by a (crashed) consumer is taken over"`
		PaymentWindow  time.Duration `mapstructure:"payment_window" default:"0s" doc:"0: a unit sold is final (the articles' sale). 1s..24h: each unit sold is reserved until paid (POST /orders/:id/pay), cancelled, or this long after the sale by the stock Redis's clock, when every replica's expirer returns it to the stock once (docs/reservations.md). Needs stock.ledger and stock.segments 1, and stock.min_replica_acks not 0 on a Redis that fails over (a lost payment would sell its unit again); items are then not sold"`
		PaymentSecret  string        `mapstructure:"payment_secret" default:"" doc:"with orders.payment_window: the secret a payment provider signs its POST /orders/:id/pay callbacks with (HMAC-SHA256 over timestamp, path and body; docs/reservations.md), 32+ bytes and 120+ bits by estimate as auth.jwt_secret (e.g. openssl rand -hex 32). Empty: only the order's buyer, or the admin, pays"`
		DurableTimeout time.Duration `mapstructure:"durable_timeout" default:"2s" doc:"with orders.durable and orders.payment_window, how long a payment's answer waits for MySQL to hold the order's end; then 503 with Retry-After (the same payment_id sent again pays once). Below http.write_timeout"`
		TrimInterval   time.Duration `mapstructure:"trim_interval" default:"1s" doc:"with orders.durable, how often each replica's consumer, after storing, removes from Redis the ledger entries MySQL holds (stream entries every group acknowledged, their index entries; also as soon as it has nothing to read): /orders then reads them from MySQL, /ledger still counts them. 0 keeps them: Redis grows with every unit sold"`
	} `mapstructure:"orders" doc:"the ledger's durable copy in MySQL (table orders), and reservations"`
	Work struct {
		Delay stock.Delay `mapstructure:"delay" default:"0s" doc:"simulated business time inside the lock, per buyer (a combined batch spends it for each of its buyers): 5ms, or a uniform range 2ms-10ms (from >= 0, to >= from)"`
	} `mapstructure:"work"`
	Election struct {
		Backend     string        `mapstructure:"backend" default:"none" doc:"leader election, independent of the lock backend; the leader runs the audit"`
		Path        string        `mapstructure:"path" default:"/seckill/leader" doc:"the election's path: absolute, no trailing /"`
		JobInterval time.Duration `mapstructure:"job_interval" default:"1s" doc:"the leader's audit period"`
	} `mapstructure:"election" doc:"the leader runs the audit (stock + lucky = initial, orders = lucky)"`
	Lab struct {
		// Unsafe permits what only the lab may run (lab.go).
		Unsafe bool `mapstructure:"unsafe" default:"false" doc:"permits the lab-only settings (lock.backend none, local, setnx, redis-nocheck, redis-checkdel; stock.fencing false in locked mode; any SECKILL_FAILPOINTS, known names only); a product build refuses them whatever this says"`
		// Failpoints is $SECKILL_FAILPOINTS, read here so Validate sees it.
		// Not a key: the failpoint package reads that variable itself.
		Failpoints string `mapstructure:"-"`
	} `mapstructure:"lab"`
}

// Load reads the configuration. path may be empty (defaults + environment).
// Parse errors name the key; semantic checks are left to Validate.
func Load(path string, env []string) (*Config, error) {
	v := viper.New()
	// Without a default viper would not know a key that the file omits,
	// and env-only configuration would not reach it.
	for _, k := range keys {
		v.SetDefault(k.name, k.def)
	}
	if path != "" {
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("config: %s: %w", path, err)
		}
		// A misspelt key in the file would otherwise be silently ignored and
		// its default used — e.g. a "lock.backed: etcd" running on redis.
		for _, k := range v.AllKeys() {
			if !knownKey(k) {
				return nil, fmt.Errorf("config: %s: unknown key (known keys are those in configs/stockd.yaml)", k)
			}
		}
	}
	// Bound from the env slice rather than by viper's AutomaticEnv, which
	// reads os.Environ: tests hand in an environment, and a STOCKD_ variable
	// naming no key is refused, not ignored.
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		key, known := envKeys[name]
		if !known {
			return nil, fmt.Errorf("config: environment %s: unknown key", name)
		}
		v.Set(key, val)
	}

	var c Config
	if err := v.UnmarshalExact(&c, viper.DecodeHook(decodeHook)); err != nil {
		return nil, errors.Join(keyErrors(err)...)
	}
	c.Lab.Failpoints = lookupEnv(env, failpoint.EnvVar)
	if c.Replica == "" {
		// Bounded inside: Load has no caller's context.
		c.Replica = replicaname.Default(context.Background())
	}
	return &c, nil
}
