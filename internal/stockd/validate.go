package stockd

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/lock/backend"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// Accepted enumerations. Backend names come from the wiring table in
// backends.go, so a backend is valid exactly when it can be constructed.
var (
	logLevels        = []string{"debug", "info", "warn", "error"}
	logFormats       = []string{"text", "json"}
	stockModes       = []string{"locked", "atomic"}
	electionBackends = backend.Elections()
	stockWitnesses   = []string{"none", "etcd", "mysql"}
)

// maxWorkDelay bounds the simulated business time; the lab's longest is a
// few seconds (1.5 leases).
const maxWorkDelay = 30 * time.Second

// Validate checks c and returns every problem found, each naming its key.
// It is pure: no I/O, no environment. Its steps are a checker's, one per
// part of the configuration, in the order the keys are documented.
func Validate(c *Config) error {
	v := &checker{}
	v.http(c)
	adminToken(c.Admin.Token, c.Auth.AllowWeakSecrets, v.bad)
	validateAuth(c, v.bad)
	v.log(c)
	v.redis(c)
	validateCluster(c, v.bad)
	spec, known := v.lock(c)
	v.servers(c, spec, known)
	v.stock(c)
	validateLedger(c, v.bad)
	validateKeys(c, v.bad)
	v.work(c)
	v.election(c)
	validateLab(c, v.bad)
	return errors.Join(v.errs...)
}

// checker collects Validate's findings, each naming its key.
type checker struct{ errs []error }

func (v *checker) bad(key, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
}

func (v *checker) oneOf(key, val string, allowed []string, what string) {
	if !slices.Contains(allowed, val) {
		v.bad(key, "unknown %s %q (want one of %s)", what, val, strings.Join(allowed, ", "))
	}
}

// between bounds a duration: a value outside the range is a mistake or
// an attack surface (lock.ttl=1ns breaks every sale, an hour-long wait
// pins a connection for an hour).
func (v *checker) between(key string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		v.bad(key, "must be between %s and %s, got %s", lo, hi, d)
	}
}

func (v *checker) intBetween(key string, n, lo, hi int) {
	if n < lo || n > hi {
		v.bad(key, "must be between %d and %d, got %d", lo, hi, n)
	}
}

func (v *checker) nonEmpty(key, val string) {
	if val == "" {
		v.bad(key, "must not be empty")
	}
}

func (v *checker) hostPort(key, val string) {
	if _, _, err := net.SplitHostPort(val); err != nil {
		v.bad(key, "want host:port, got %q", val)
	}
}

// list checks an endpoint list: host:port, and for etcd also
// http(s)://host:port.
func (v *checker) list(key string, vals []string, schemes ...string) {
	if len(vals) == 0 {
		v.bad(key, "at least one address required")
	}
	for _, val := range vals {
		for _, s := range schemes {
			if rest, ok := strings.CutPrefix(val, s); ok {
				val = rest
				break
			}
		}
		v.hostPort(key, val)
	}
}

func (v *checker) znodePath(key, val string) {
	if !strings.HasPrefix(val, "/") || (len(val) > 1 && strings.HasSuffix(val, "/")) {
		v.bad(key, "want an absolute path like /seckill/locks, got %q", val)
	}
}

// http checks http.*: the listener, its timeouts and bounds, the proxies.
func (v *checker) http(c *Config) {
	v.hostPort("http.addr", c.HTTP.Addr)
	v.between("http.shutdown_timeout", c.HTTP.ShutdownTimeout, 100*time.Millisecond, 10*time.Minute)
	v.between("http.read_header_timeout", c.HTTP.ReadHeaderTimeout, 100*time.Millisecond, time.Minute)
	v.between("http.read_timeout", c.HTTP.ReadTimeout, 100*time.Millisecond, 5*time.Minute)
	if c.HTTP.ReadHeaderTimeout > c.HTTP.ReadTimeout {
		v.bad("http.read_header_timeout", "must not exceed http.read_timeout (%s), got %s", c.HTTP.ReadTimeout, c.HTTP.ReadHeaderTimeout)
	}
	v.between("http.write_timeout", c.HTTP.WriteTimeout, time.Second, 10*time.Minute)
	v.between("http.idle_timeout", c.HTTP.IdleTimeout, 100*time.Millisecond, time.Hour)
	v.intBetween("http.max_header_bytes", c.HTTP.MaxHeaderBytes, 8<<10, 1<<20) // above headerSlop (newHTTPServer)
	v.intBetween("http.max_body_bytes", c.HTTP.MaxBodyBytes, 4<<10, 10<<20)
	v.intBetween("http.max_conns", c.HTTP.MaxConns, 1, 1<<20)
	for _, p := range c.HTTP.TrustedProxies {
		// The one parser the buyer check trusts them by (auth.ParseProxy).
		prefix, err := auth.ParseProxy(p)
		switch {
		case err != nil:
			v.bad("http.trusted_proxies", "want an IP address or a CIDR like 172.16.0.0/12, got %q", p)
		case coversEveryAddress(prefix):
			v.bad("http.trusted_proxies", "%q covers every address: any client could name itself by X-Forwarded-For (and X-User); name the proxy's own address", p)
		}
	}
}

func (v *checker) log(c *Config) {
	v.oneOf("log.level", c.Log.Level, logLevels, "level")
	v.oneOf("log.format", c.Log.Format, logFormats, "format")
}

// redis checks the stock Redis and its Sentinels (redis.*).
func (v *checker) redis(c *Config) {
	v.hostPort("redis.addr", c.Redis.Addr)
	if c.Redis.DB < 0 {
		v.bad("redis.db", "must not be negative, got %d", c.Redis.DB)
	}
	v.between("redis.timeout", c.Redis.Timeout, time.Millisecond, time.Minute)
	if s := c.Redis.Sentinel; s.Master != "" {
		if len(s.Addrs) == 0 {
			v.bad("redis.sentinel.addrs", "required with redis.sentinel.master")
		}
		for _, a := range s.Addrs {
			v.hostPort("redis.sentinel.addrs", a)
		}
	} else if len(s.Addrs) > 0 {
		v.bad("redis.sentinel.master", "required with redis.sentinel.addrs (the name the Sentinels monitor)")
	}
}

// lock checks lock.* and redisson.*, and returns the backend's row.
func (v *checker) lock(c *Config) (spec backendSpec, known bool) {
	spec, known = backends[c.Lock.Backend]
	if !known && slices.Contains(labBackends, c.Lock.Backend) {
		v.bad("lock.backend", "%v", errNotLabBuild(c.Lock.Backend))
	} else if !known {
		v.bad("lock.backend", "unknown backend %q (want one of %s)", c.Lock.Backend, strings.Join(backendNames(), ", "))
	}
	v.nonEmpty("lock.key", c.Lock.Key)
	// Below 100ms a lease cannot be renewed in time (Redis refuses a
	// sub-millisecond PX outright: every sale would fail).
	v.between("lock.ttl", c.Lock.TTL, 100*time.Millisecond, 10*time.Minute)
	v.between("lock.wait_timeout", c.Lock.WaitTimeout, time.Millisecond, 10*time.Minute)
	if c.Lock.RedisAddr != "" {
		v.hostPort("lock.redis_addr", c.Lock.RedisAddr)
	}
	v.between("redisson.watchdog", c.Redisson.Watchdog, 100*time.Millisecond, 10*time.Minute)
	if c.Redisson.LeaseTime != 0 {
		v.between("redisson.lease_time", c.Redisson.LeaseTime, 100*time.Millisecond, 10*time.Minute)
	}
	return spec, known
}

// servers checks the servers the backend, the election and the witness
// talk to: etcd, ZooKeeper, MySQL.
func (v *checker) servers(c *Config, spec backendSpec, known bool) {
	needEtcd := (known && spec.needs == needsEtcd) || c.Election.Backend == backend.Etcd || c.Stock.Witness == "etcd"
	needZK := (known && spec.needs == needsZK) || c.Election.Backend == backend.ZooKeeper
	if needEtcd {
		v.list("etcd.endpoints", c.Etcd.Endpoints, "http://", "https://")
	}
	// etcd leases are whole seconds: a shorter TTL would be rounded away,
	// a fraction rounded up (etcdsess) into a lease longer than the one
	// configured, which the write timeout rule and the docs would not see.
	switch ttl := c.Etcd.SessionTTL; {
	case ttl < time.Second:
		v.bad("etcd.session_ttl", "must be at least 1s (etcd leases are whole seconds), got %s", ttl)
	case ttl%time.Second != 0:
		v.bad("etcd.session_ttl", "must be whole seconds (etcd leases are), got %s", ttl)
	default:
		v.between("etcd.session_ttl", ttl, time.Second, 10*time.Minute)
	}
	v.between("etcd.dial_timeout", c.Etcd.DialTimeout, 10*time.Millisecond, time.Minute)
	if needZK {
		v.list("zookeeper.servers", c.ZooKeeper.Servers)
	}
	v.between("zookeeper.session_timeout", c.ZooKeeper.SessionTimeout, 100*time.Millisecond, 10*time.Minute)
	v.znodePath("zookeeper.root", c.ZooKeeper.Root)
	if known && spec.needs == needsMySQL {
		validateMySQL(c, v.bad)
	} else if c.Stock.Witness == "mysql" {
		if c.MySQL.DSN == "" {
			v.bad("mysql.dsn", "must be set for stock.witness mysql, e.g. user:password@tcp(host:3306)/seckill")
		} else {
			validateMySQL(c, v.bad)
		}
	}
}

// stock checks stock.* but the ledger's and the keys' (validateLedger,
// validateKeys).
func (v *checker) stock(c *Config) {
	v.nonEmpty("stock.key", c.Stock.Key)
	// Items name their witness registers and locks "<name>:item:<id>"
	// (redisstore.ItemWitnessName, ItemLockKey) on servers other deployments
	// may share: a sale named so would hold item <id>'s register or lock
	// of the deployment named by the part before.
	for _, k := range []struct{ name, val string }{{"stock.key", c.Stock.Key}, {"lock.key", c.Lock.Key}} {
		if strings.Contains(k.val, redisstore.ItemNameInfix) {
			v.bad(k.name, "%q holds %q, which names items' witness registers and locks (<name>%s<id>): it could be another deployment's item", k.val, redisstore.ItemNameInfix, redisstore.ItemNameInfix)
		}
	}
	v.nonEmpty("stock.lucky_key", c.Stock.LuckyKey)
	v.nonEmpty("stock.fence_key", c.Stock.FenceKey)
	v.oneOf("stock.mode", c.Stock.Mode, stockModes, "mode")
	v.between("stock.confirm_timeout", c.Stock.ConfirmTimeout, 10*time.Millisecond, 10*time.Minute)
	v.intBetween("stock.combine_max", c.Stock.CombineMax, 1, 4096)
	v.intBetween("lock.max_queue", c.Lock.MaxQueue, 1, 1<<20)
	if c.Stock.Combine && c.Lock.Shed && c.Lock.MaxQueue < c.Stock.CombineMax {
		// A batch could never fill: the queue would shed what it would sell.
		v.bad("lock.max_queue", "%d is below stock.combine_max (%d): a combined batch could never fill", c.Lock.MaxQueue, c.Stock.CombineMax)
	}
	v.intBetween("stock.segments", c.Stock.Segments, 1, 256)
	v.intBetween("stock.min_replica_acks", c.Stock.MinReplicaAcks, -1, 16)
	v.between("stock.replica_ack_timeout", c.Stock.ReplicaAckTimeout, time.Millisecond, time.Minute)
	// WAIT shares the sale's pipeline, which redis.timeout bounds; and a
	// sale unanswered for stock.confirm_timeout is given up anyway.
	if minReplicaAcks(c) > 0 && c.Redis.Timeout > 0 && c.Stock.ReplicaAckTimeout >= min(c.Redis.Timeout, c.Stock.ConfirmTimeout) {
		v.bad("stock.replica_ack_timeout", "%s must stay below redis.timeout (%s) and stock.confirm_timeout (%s)",
			c.Stock.ReplicaAckTimeout, c.Redis.Timeout, c.Stock.ConfirmTimeout)
	}
	v.oneOf("stock.witness", c.Stock.Witness, stockWitnesses, "witness")
	v.between("stock.witness_timeout", c.Stock.WitnessTimeout, 10*time.Millisecond, time.Minute)
	if c.Stock.MaxClockSkew != 0 {
		v.between("stock.max_clock_skew", c.Stock.MaxClockSkew, time.Millisecond, time.Hour)
	}
}

// work checks work.delay, and that a sale is answered within
// http.write_timeout.
func (v *checker) work(c *Config) {
	if c.Work.Delay.Min < 0 || c.Work.Delay.Max < c.Work.Delay.Min {
		v.bad("work.delay", "invalid range %s", c.Work.Delay)
	} else if c.Work.Delay.Max > maxWorkDelay {
		v.bad("work.delay", "must not exceed %s (it is spent holding the lock), got %s", maxWorkDelay, c.Work.Delay)
	}
	// A sale waits for the lock, then works: it must be answered before
	// the write deadline cuts its connection (and the proxy's read timeout,
	// which http.write_timeout must not exceed, answers 504 instead).
	// Reading and writing may each be retried until stock.confirm_timeout.
	// The witness's wait, after the lock, is bounded by stock.confirm_timeout too.
	if c.Lock.WaitTimeout > 0 && saleBound(c, c.Work.Delay.Max) >= c.HTTP.WriteTimeout {
		v.bad("lock.wait_timeout", "lock.wait_timeout + work.delay + %d x stock.confirm_timeout (%s) must stay below http.write_timeout (%s)", confirms(c), saleBound(c, c.Work.Delay.Max), c.HTTP.WriteTimeout)
	}
}

// confirms is how many stock.confirm_timeout a sale may spend after its
// lock wait: its read and its write may each be retried until then, and
// the witness's wait, after the lock, is bounded by it too.
func confirms(c *Config) int {
	n := 2
	if c.Orders.PaymentWindow > 0 {
		// A return between a section's read and its write makes it read
		// and write again, up to stock.MaxReadsAfterReturn times.
		n *= stock.MaxReadsAfterReturn
	}
	if c.Stock.Witness != "none" {
		n++
	}
	return n
}

// saleBound is the longest a sale may take that works for work: its lock
// wait, the work, its confirms.
func saleBound(c *Config, work time.Duration) time.Duration {
	return c.Lock.WaitTimeout + work + time.Duration(confirms(c))*c.Stock.ConfirmTimeout
}

// combineMax is the largest combined batch the service forms: at most
// stock.combine_max, and no more buyers than fit http.write_timeout. A
// batch works for each buyer it may sell to (stock.Service), so its last
// member is answered after all their work; with a long work.delay the
// batch shrinks rather than the start being refused (Validate refuses
// only a sale that one buyer's work does not fit).
func combineMax(c *Config) int {
	n := c.Stock.CombineMax
	if c.Work.Delay.Max <= 0 || c.Lock.WaitTimeout <= 0 {
		return n
	}
	// The largest k with saleBound(k × work) < write_timeout.
	room := c.HTTP.WriteTimeout - saleBound(c, 0) - 1
	return max(1, min(n, int(room/c.Work.Delay.Max)))
}

func (v *checker) election(c *Config) {
	v.oneOf("election.backend", c.Election.Backend, electionBackends, "backend")
	v.znodePath("election.path", c.Election.Path)
	v.between("election.job_interval", c.Election.JobInterval, 100*time.Millisecond, time.Hour)
}

// weakSecretsOptOut is what a weak secret's refusal offers.
const weakSecretsOptOut = " (or set auth.allow_weak_secrets: true, in a lab only)"

// adminToken refuses an empty admin.token, and a weak one (auth.SecretBits)
// unless allowWeak (auth.allow_weak_secrets). The bound on failed admin
// tries cannot be the guard: the right token always passes, so every guess
// is answered.
func adminToken(tok string, allowWeak bool, bad func(key, format string, args ...any)) {
	switch {
	case tok == "":
		bad("admin.token", "must be set (it guards POST /stock/reset), e.g. STOCKD_ADMIN_TOKEN=$(openssl rand -hex 16)")
	case !allowWeak:
		weakSecret("admin.token", tok, "openssl rand -hex 16", bad)
	}
}

// weakSecret refuses secret, the value of key, if it is weaker than
// auth.MinSecretBits; gen says how to make a strong one.
func weakSecret(key, secret, gen string, bad func(key, format string, args ...any)) {
	if bits := auth.SecretBits(secret); bits < auth.MinSecretBits {
		bad(key, "too weak: about %.0f bits by estimate, want %d+ (random, no repeats, runs or words like changeme); e.g. %s"+weakSecretsOptOut,
			bits, auth.MinSecretBits, gen)
	}
}

// weakSecrets names the secrets of c accepted only because of
// auth.allow_weak_secrets, so that stockd can say so loudly.
func weakSecrets(c *Config) []string {
	var keys []string
	collect := func(key, _ string, _ ...any) { keys = append(keys, key) }
	if c.Admin.Token != "" {
		weakSecret("admin.token", c.Admin.Token, "", collect)
	}
	if c.Auth.JWTSecret != "" {
		weakSecret("auth.jwt_secret", c.Auth.JWTSecret, "", collect)
	}
	if c.Orders.PaymentSecret != "" {
		weakSecret("orders.payment_secret", c.Orders.PaymentSecret, "", collect)
	}
	return keys
}

// coversEveryAddress reports whether p holds every IPv4 or every IPv6
// address (0.0.0.0/0, ::/0, or ::ffff:0:0/96 and shorter, every IPv4
// address mapped).
func coversEveryAddress(p netip.Prefix) bool {
	return p.Bits() == 0 || (p.Addr().Is4In6() && p.Bits() <= 96)
}

// validateAuth checks the auth section: each mode has what it needs, and
// nothing is configured that the mode would silently ignore.
func validateAuth(c *Config, bad func(key, format string, args ...any)) {
	a := c.Auth
	if !slices.Contains(auth.Modes, a.Buyers) {
		bad("auth.buyers", "unknown mode %q (want one of %s)", a.Buyers, strings.Join(auth.Modes, ", "))
		return
	}
	// A key is set when it is not its default: jwt_leeway has one (30s),
	// the others are empty.
	jwtKeys := a.JWTSecret != "" || a.JWTKeys != "" || a.JWTIssuer != "" || a.JWTAudience != "" ||
		a.JWTLeeway != defaultDuration("auth.jwt_leeway")
	switch a.Buyers {
	case auth.ModeJWT:
		if a.JWTSecret == "" && a.JWTKeys == "" {
			bad("auth.jwt_secret", "auth.buyers jwt needs auth.jwt_secret (HS256) or auth.jwt_keys (RS256/ES256)")
		}
		if a.JWTSecret != "" && len(a.JWTSecret) < auth.MinSecretLen {
			bad("auth.jwt_secret", "too short: want at least %d bytes, got %d (e.g. openssl rand -hex 32)", auth.MinSecretLen, len(a.JWTSecret))
		} else if a.JWTSecret != "" && !a.AllowWeakSecrets {
			weakSecret("auth.jwt_secret", a.JWTSecret, "openssl rand -hex 32", bad)
		}
		nonEmptyKey(bad, "auth.jwt_issuer", a.JWTIssuer, "the one issuer accepted: a buyer is (iss, sub)")
		nonEmptyKey(bad, "auth.jwt_audience", a.JWTAudience, "tokens for another service must not buy here")
		if a.JWTLeeway < 0 || a.JWTLeeway > auth.MaxLeeway {
			bad("auth.jwt_leeway", "must be between 0s and %s, got %s", auth.MaxLeeway, a.JWTLeeway)
		}
	case auth.ModeProxy:
		if len(c.HTTP.TrustedProxies) == 0 {
			bad("http.trusted_proxies", "auth.buyers proxy needs the gateway's addresses here: X-User from anyone else is refused")
		}
		if jwtKeys {
			bad("auth.buyers", "proxy ignores the auth.jwt_* keys that are set; use jwt, or clear them")
		}
	case auth.ModeNone:
		if jwtKeys {
			bad("auth.buyers", "none ignores the auth.jwt_* keys that are set; set jwt")
		}
		if a.Required {
			bad("auth.required", "with auth.buyers none no buyer can ever authenticate: nothing could be sold")
		}
		if c.Stock.PerUserLimit > 0 {
			bad("stock.per_user_limit", "binds named buyers, and auth.buyers none names none; set auth.buyers jwt or proxy")
		}
	}
}

func nonEmptyKey(bad func(key, format string, args ...any), key, val, why string) {
	if val == "" {
		bad(key, "required with auth.buyers jwt (%s)", why)
	}
}
