package stockd

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"

	"seckill/internal/stock"
)

// tokenEnv sets the one key without a usable default.
var tokenEnv = []string{"STOCKD_ADMIN_TOKEN=" + testAdminToken}

// validConfig is the defaults as loaded with no file and only an admin token
// in the environment.
func validConfig(t *testing.T) *Config {
	t.Helper()
	c, err := Load("", tokenEnv)
	if err != nil {
		t.Fatalf("load defaults: %v", err)
	}
	if err := Validate(c); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	return c
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		mut     func(c *Config)
		wantKey string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"every backend name", func(c *Config) { c.Lock.Backend = "zookeeper" }, ""},
		{"atomic mode", func(c *Config) { c.Stock.Mode = "atomic" }, ""},
		{"etcd URL endpoints", func(c *Config) {
			c.Lock.Backend = "etcd"
			c.Etcd.Endpoints = []string{"http://127.0.0.1:2379", "10.0.0.2:2379"}
		}, ""},
		{"unknown backend", func(c *Config) { c.Lock.Backend = "redsi" }, "lock.backend"},
		{"unknown mode", func(c *Config) { c.Stock.Mode = "optimistic" }, "stock.mode"},
		{"combining, 8 segments", func(c *Config) { c.Stock.Combine, c.Stock.CombineMax, c.Stock.Segments = true, 16, 8 }, ""},
		{"empty combined batch", func(c *Config) { c.Stock.CombineMax = 0 }, "stock.combine_max"},
		{"lock queue below a batch", func(c *Config) { c.Stock.Combine, c.Stock.CombineMax, c.Lock.MaxQueue = true, 64, 32 }, "lock.max_queue"},
		{"lock queue below a batch, no shedding", func(c *Config) { c.Stock.Combine, c.Lock.Shed, c.Lock.MaxQueue = true, false, 32 }, ""},
		{"no lock queue", func(c *Config) { c.Lock.MaxQueue = 0 }, "lock.max_queue"},
		{"no segment", func(c *Config) { c.Stock.Segments = 0 }, "stock.segments"},
		{"payment window", func(c *Config) { c.Orders.PaymentWindow = 15 * time.Minute }, ""},
		{"payment window under a second", func(c *Config) { c.Orders.PaymentWindow = 500 * time.Millisecond }, "orders.payment_window"},
		{"payment window over a day", func(c *Config) { c.Orders.PaymentWindow = 25 * time.Hour }, "orders.payment_window"},
		{"payment window without the ledger", func(c *Config) { c.Orders.PaymentWindow, c.Stock.Ledger = time.Minute, false }, "orders.payment_window"},
		{"payment secret", func(c *Config) {
			c.Orders.PaymentWindow, c.Orders.PaymentSecret = time.Minute, "9c2e7a1f4b8d3e6a0f5c9b2d7e1a4f8c"
		}, ""},
		{"payment secret without a window", func(c *Config) { c.Orders.PaymentSecret = "9c2e7a1f4b8d3e6a0f5c9b2d7e1a4f8c" }, "orders.payment_secret"},
		{"short payment secret", func(c *Config) { c.Orders.PaymentWindow, c.Orders.PaymentSecret = time.Minute, "9c2e7a1f" }, "orders.payment_secret"},
		{"weak payment secret", func(c *Config) {
			c.Orders.PaymentWindow, c.Orders.PaymentSecret = time.Minute, "changeme-changeme-changeme-changeme"
		}, "orders.payment_secret"},
		{"payment window, segments", func(c *Config) { c.Orders.PaymentWindow, c.Stock.Segments = time.Minute, 2 }, "orders.payment_window"},
		{"payment window, Sentinel without acks", func(c *Config) {
			c.Orders.PaymentWindow, c.Redis.Sentinel.Master, c.Redis.Sentinel.Addrs, c.Stock.MinReplicaAcks = time.Minute, "m", []string{"127.0.0.1:26379"}, 0
		}, "stock.min_replica_acks"},
		{"payment window, Redis Cluster without acks", func(c *Config) {
			c.Orders.PaymentWindow, c.Redis.Cluster.Addrs, c.Stock.Key, c.Stock.MinReplicaAcks = time.Minute, []string{"127.0.0.1:7000"}, "{stock}", 0
		}, "stock.min_replica_acks"},
		{"payment window, Sentinel with the default acks", func(c *Config) {
			c.Orders.PaymentWindow, c.Redis.Sentinel.Master, c.Redis.Sentinel.Addrs = time.Minute, "m", []string{"127.0.0.1:26379"}
		}, ""},
		{"payment window, witness", func(c *Config) { // its ceilings are the fresh stock's
			c.Orders.PaymentWindow, c.Stock.Witness = time.Minute, "etcd"
			c.Etcd.Endpoints = []string{"127.0.0.1:2379"}
		}, ""},
		{"too many segments", func(c *Config) { c.Stock.Segments = 257 }, "stock.segments"},
		{"unknown level", func(c *Config) { c.Log.Level = "verbose" }, "log.level"},
		{"unknown format", func(c *Config) { c.Log.Format = "xml" }, "log.format"},
		{"unknown election", func(c *Config) { c.Election.Backend = "consul" }, "election.backend"},
		{"empty admin token", func(c *Config) { c.Admin.Token = "" }, "admin.token"},
		{"short admin token", func(c *Config) { c.Admin.Token = "k3Y!x9" }, "admin.token: too weak"},
		{"placeholder changeme", func(c *Config) { c.Admin.Token = "changeme" }, "admin.token: too weak"},
		{"placeholder change-me", func(c *Config) { c.Admin.Token = "change-me" }, "admin.token: too weak"},
		{"long placeholder", func(c *Config) { c.Admin.Token = "CHANGE_ME-1234567890" }, "admin.token: too weak"},
		{"a repeated word", func(c *Config) { c.Admin.Token = "changeme-changeme" }, "admin.token: too weak"},
		{"a run", func(c *Config) { c.Admin.Token = strings.Repeat("a", 32) }, "admin.token: too weak"},
		{"16 random characters", func(c *Config) { c.Admin.Token = "k3Y!x9-q7Lm2Vb0Z" }, "admin.token: too weak"},
		{"compose's lab default", func(c *Config) { c.Admin.Token = "seckill-compose-lab" }, "admin.token: too weak"},
		{"32 random hex digits", func(c *Config) { c.Admin.Token = "3f9c2a71e0b84d5f96c13a8e7b2d4f60" }, ""},
		{"43 random base64url characters", func(c *Config) { c.Admin.Token = "q8Z0m1vKx3LtR9bNw2Yc5HsD7gJf4PeA_u-6iOkTnVo" }, ""},
		{"weak allowed: changeme", func(c *Config) { c.Admin.Token, c.Auth.AllowWeakSecrets = "changeme", true }, ""},
		{"weak allowed: short", func(c *Config) { c.Admin.Token, c.Auth.AllowWeakSecrets = "demo", true }, ""},
		{"weak allowed: still not empty", func(c *Config) { c.Admin.Token, c.Auth.AllowWeakSecrets = "", true }, "admin.token"},
		{"trusted proxy CIDR and IP", func(c *Config) { c.HTTP.TrustedProxies = []string{"172.16.0.0/12", "10.0.0.7", "::1"} }, ""},
		{"bad trusted proxy", func(c *Config) { c.HTTP.TrustedProxies = []string{"nginx"} }, "http.trusted_proxies"},
		{"trusted proxies: every IPv4 address", func(c *Config) { c.HTTP.TrustedProxies = []string{"10.0.0.7", "0.0.0.0/0"} }, "http.trusted_proxies: \"0.0.0.0/0\" covers every address"},
		{"trusted proxies: every IPv6 address", func(c *Config) { c.HTTP.TrustedProxies = []string{"::/0"} }, "http.trusted_proxies: \"::/0\" covers every address"},
		{"trusted proxies: every mapped IPv4 address", func(c *Config) { c.HTTP.TrustedProxies = []string{"::ffff:0.0.0.0/96"} }, "http.trusted_proxies"},
		{"trusted proxies: a private range", func(c *Config) { c.HTTP.TrustedProxies = []string{"10.0.0.0/8"} }, ""},
		{"zero ttl", func(c *Config) { c.Lock.TTL = 0 }, "lock.ttl"},
		{"negative wait", func(c *Config) { c.Lock.WaitTimeout = -time.Second }, "lock.wait_timeout"},
		{"zero shutdown", func(c *Config) { c.HTTP.ShutdownTimeout = 0 }, "http.shutdown_timeout"},
		{"zero redis timeout", func(c *Config) { c.Redis.Timeout = 0 }, "redis.timeout"},
		{"negative lease time", func(c *Config) { c.Redisson.LeaseTime = -1 }, "redisson.lease_time"},
		{"zero watchdog", func(c *Config) { c.Redisson.Watchdog = 0 }, "redisson.watchdog"},
		{"sub-second etcd ttl", func(c *Config) { c.Etcd.SessionTTL = 500 * time.Millisecond }, "etcd.session_ttl"},
		{"fractional etcd ttl", func(c *Config) { c.Etcd.SessionTTL = 1500 * time.Millisecond }, "etcd.session_ttl"},
		{"whole-second etcd ttl", func(c *Config) { c.Etcd.SessionTTL = 2 * time.Second }, ""},
		{"zero job interval", func(c *Config) { c.Election.JobInterval = 0 }, "election.job_interval"},
		{"empty stock key", func(c *Config) { c.Stock.Key = "" }, "stock.key"},
		{"empty lucky key", func(c *Config) { c.Stock.LuckyKey = "" }, "stock.lucky_key"},
		{"empty fence key", func(c *Config) { c.Stock.FenceKey = "" }, "stock.fence_key"},
		{"clashing keys", func(c *Config) { c.Stock.LuckyKey = c.Stock.Key }, "stock.lucky_key"},
		{"empty lock key", func(c *Config) { c.Lock.Key = "" }, "lock.key"},
		{"stock key in items' family", func(c *Config) { c.Stock.Key = "shop:item:a" }, "stock.key"},
		{"lock key in items' family", func(c *Config) { c.Lock.Key = "seckill:lock:item:a" }, "lock.key"},
		{"missing redis addr", func(c *Config) { c.Redis.Addr = "" }, "redis.addr"},
		{"bad lock redis addr", func(c *Config) { c.Lock.RedisAddr = "nohost" }, "lock.redis_addr"},
		{"lab-only backend", func(c *Config) { c.Lock.Backend = "local" }, "lock.backend"},
		{"flawed backend", func(c *Config) { c.Lock.Backend = "redis-checkdel" }, "lock.backend"},
		{"lab-only backend in the lab", func(c *Config) { c.Lock.Backend = "setnx"; c.Lab.Unsafe = true }, ifProduct("lock.backend")},
		{"unfenced", func(c *Config) { c.Stock.Fencing = false }, "stock.fencing"},
		{"unfenced in the lab", func(c *Config) { c.Stock.Fencing = false; c.Lab.Unsafe = true }, ifProduct("stock.fencing")},
		{"unfenced atomic mode", func(c *Config) { c.Stock.Fencing = false; c.Stock.Mode = "atomic" }, ""},
		{"failpoint outside the lab", func(c *Config) { c.Lab.Failpoints = "setnx/afterSetNX=1*exit" }, "SECKILL_FAILPOINTS"},
		{"unknown failpoint", func(c *Config) { c.Lab.Unsafe = true; c.Lab.Failpoints = "setnx/afterSetNX=exit;x/y=exit" }, "SECKILL_FAILPOINTS"},
		{"known failpoints in the lab", func(c *Config) {
			c.Lab.Unsafe = true
			c.Lab.Failpoints = "setnx/afterSetNX=1*exit; nocheck/beforeDel=sleep(1ms);checkdel/beforeDel=off"
		}, ifProduct("SECKILL_FAILPOINTS")},
		{"bad http addr", func(c *Config) { c.HTTP.Addr = "8080" }, "http.addr"},
		{"negative db", func(c *Config) { c.Redis.DB = -1 }, "redis.db"},
		{"etcd without endpoints", func(c *Config) { c.Lock.Backend = "etcd"; c.Etcd.Endpoints = nil }, "etcd.endpoints"},
		{"etcd election without endpoints", func(c *Config) { c.Election.Backend = "etcd"; c.Etcd.Endpoints = nil }, "etcd.endpoints"},
		{"zk without servers", func(c *Config) { c.Lock.Backend = "zookeeper"; c.ZooKeeper.Servers = nil }, "zookeeper.servers"},
		{"redis backend ignores zk servers", func(c *Config) { c.ZooKeeper.Servers = nil }, ""},
		{"relative zk root", func(c *Config) { c.ZooKeeper.Root = "seckill" }, "zookeeper.root"},
		{"relative election path", func(c *Config) { c.Election.Path = "leader" }, "election.path"},
		{"inverted delay", func(c *Config) { c.Work.Delay = stock.Delay{Min: 2, Max: 1} }, "work.delay"},
		// Ranges: each of these once started a broken stockd.
		{"nanosecond ttl", func(c *Config) { c.Lock.TTL = time.Nanosecond }, "lock.ttl"},
		{"ten-year wait", func(c *Config) { c.Lock.WaitTimeout = 87600 * time.Hour }, "lock.wait_timeout"},
		{"wait above write timeout", func(c *Config) { c.Lock.WaitTimeout = 40 * time.Second }, "lock.wait_timeout"},
		{"wait plus delay above write timeout", func(c *Config) {
			c.Lock.WaitTimeout = 25 * time.Second
			c.Work.Delay = stock.Delay{Min: time.Second, Max: 5 * time.Second}
		}, "lock.wait_timeout"},
		// A combined batch works for each buyer: with a long work.delay
		// it forms smaller batches (combineMax), it is not refused.
		{"a batch's work above write timeout", func(c *Config) {
			c.Stock.Combine, c.Work.Delay = true, stock.FixedDelay(300*time.Millisecond)
		}, ""},
		{"the same work without combining", func(c *Config) {
			c.Stock.Combine, c.Work.Delay = false, stock.FixedDelay(300*time.Millisecond)
		}, ""},
		{"long wait with a long write timeout", func(c *Config) { c.Lock.WaitTimeout = time.Minute; c.HTTP.WriteTimeout = 5 * time.Minute }, ""},
		{"ten-minute work", func(c *Config) { c.Work.Delay = stock.Delay{Min: 10 * time.Minute, Max: 10 * time.Minute} }, "work.delay"},
		{"nanosecond redis timeout", func(c *Config) { c.Redis.Timeout = time.Nanosecond }, "redis.timeout"},
		{"tiny lease time", func(c *Config) { c.Redisson.LeaseTime = time.Millisecond }, "redisson.lease_time"},
		{"day-long etcd ttl", func(c *Config) { c.Etcd.SessionTTL = 24 * time.Hour }, "etcd.session_ttl"},
		{"tiny zk session", func(c *Config) { c.ZooKeeper.SessionTimeout = time.Millisecond }, "zookeeper.session_timeout"},
		{"tiny read timeout", func(c *Config) { c.HTTP.ReadTimeout = time.Millisecond }, "http.read_timeout"},
		{"header timeout above read timeout", func(c *Config) { c.HTTP.ReadHeaderTimeout = time.Minute }, "http.read_header_timeout"},
		{"tiny write timeout", func(c *Config) { c.HTTP.WriteTimeout = time.Millisecond }, "http.write_timeout"},
		{"zero idle timeout", func(c *Config) { c.HTTP.IdleTimeout = 0 }, "http.idle_timeout"},
		{"1 MB headers", func(c *Config) { c.HTTP.MaxHeaderBytes = 2 << 20 }, "http.max_header_bytes"},
		{"tiny body limit", func(c *Config) { c.HTTP.MaxBodyBytes = 10 }, "http.max_body_bytes"},
		{"no connections", func(c *Config) { c.HTTP.MaxConns = 0 }, "http.max_conns"},
		// mysql.*: checked only for the mysql backends.
		{"mysql", mysqlConfigured, ""},
		{"mysql-row", func(c *Config) { mysqlConfigured(c); c.Lock.Backend = "mysql-row" }, ""},
		{"mysql without dsn", func(c *Config) { mysqlConfigured(c); c.MySQL.DSN = "" }, "mysql.dsn"},
		{"mysql bad dsn", func(c *Config) { mysqlConfigured(c); c.MySQL.DSN = "seckill@mysql:3306" }, "mysql.dsn"},
		{"mysql dsn bad param", func(c *Config) { mysqlConfigured(c); c.MySQL.DSN += "?timeout=soon" }, "mysql.dsn"},
		{"mysql dsn without database", func(c *Config) { mysqlConfigured(c); c.MySQL.DSN = "u:p@tcp(db:3306)/" }, "mysql.dsn"},
		{"mysql readTimeout below the slice", func(c *Config) { mysqlConfigured(c); c.MySQL.DSN += "?readTimeout=2s" }, "mysql.dsn"},
		{"mysql readTimeout above the slice", func(c *Config) { mysqlConfigured(c); c.MySQL.DSN += "?readTimeout=30s" }, ""},
		{"mysql no pool", func(c *Config) { mysqlConfigured(c); c.MySQL.PoolSize = 0 }, "mysql.pool_size"},
		{"mysql sub-second session", func(c *Config) { mysqlConfigured(c); c.MySQL.SessionTTL = 500 * time.Millisecond }, "mysql.session_ttl"},
		{"mysql day-long session", func(c *Config) { mysqlConfigured(c); c.MySQL.SessionTTL = 24 * time.Hour }, "mysql.session_ttl"},
		{"mysql fractional session", func(c *Config) { mysqlConfigured(c); c.MySQL.SessionTTL = 1500 * time.Millisecond }, "mysql.session_ttl"},
		{"mysql fractional wait slice", func(c *Config) { mysqlConfigured(c); c.MySQL.WaitSlice = 2500 * time.Millisecond }, "mysql.wait_slice"},
		{"mysql keep-alive above ttl/2", func(c *Config) { mysqlConfigured(c); c.MySQL.KeepAlive = 6 * time.Second }, "mysql.keep_alive"},
		{"mysql negative keep-alive", func(c *Config) { mysqlConfigured(c); c.MySQL.KeepAlive = -time.Second }, "mysql.keep_alive"},
		{"mysql keep-alive", func(c *Config) { mysqlConfigured(c); c.MySQL.KeepAlive = time.Second }, ""},
		{"mysql zero wait slice", func(c *Config) { mysqlConfigured(c); c.MySQL.WaitSlice = 0 }, "mysql.wait_slice"},
		{"redis backend ignores mysql.dsn", func(c *Config) { c.MySQL.DSN = "not a dsn" }, ""},
		// The ledger and durable orders.
		{"per-user limit", func(c *Config) {
			c.Stock.PerUserLimit, c.Auth.Buyers, c.HTTP.TrustedProxies = 1, "proxy", []string{"10.0.0.1"}
		}, ""},
		{"per-user limit, no buyers", func(c *Config) { c.Stock.PerUserLimit = 1 }, "stock.per_user_limit"},
		// Buyers.
		{"jwt", func(c *Config) { jwtConfig(c) }, ""},
		{"jwt by keys", func(c *Config) { jwtConfig(c); c.Auth.JWTSecret, c.Auth.JWTKeys = "", "/etc/keys.pem" }, ""},
		{"jwt without a key", func(c *Config) { jwtConfig(c); c.Auth.JWTSecret = "" }, "auth.jwt_secret"},
		{"jwt short secret", func(c *Config) { jwtConfig(c); c.Auth.JWTSecret = "short" }, "auth.jwt_secret: too short"},
		{"jwt weak secret", func(c *Config) { jwtConfig(c); c.Auth.JWTSecret = "0123456789abcdef0123456789abcdef" }, "auth.jwt_secret: too weak"},
		{"jwt words", func(c *Config) {
			jwtConfig(c)
			c.Auth.JWTSecret = "seckill-compose-lab-jwt-secret-not-for-production"
		}, "auth.jwt_secret: too weak"},
		{"jwt weak secret allowed", func(c *Config) {
			jwtConfig(c)
			c.Auth.JWTSecret, c.Auth.AllowWeakSecrets = "0123456789abcdef0123456789abcdef", true
		}, ""},
		{"jwt short secret allowed: still too short", func(c *Config) {
			jwtConfig(c)
			c.Auth.JWTSecret, c.Auth.AllowWeakSecrets = "short", true
		}, "auth.jwt_secret: too short"},
		{"jwt without an issuer", func(c *Config) { jwtConfig(c); c.Auth.JWTIssuer = "" }, "auth.jwt_issuer"},
		{"jwt without an audience", func(c *Config) { jwtConfig(c); c.Auth.JWTAudience = "" }, "auth.jwt_audience"},
		{"jwt long leeway", func(c *Config) { jwtConfig(c); c.Auth.JWTLeeway = time.Hour }, "auth.jwt_leeway"},
		{"unknown buyers mode", func(c *Config) { c.Auth.Buyers = "header" }, "auth.buyers"},
		{"proxy without proxies", func(c *Config) { c.Auth.Buyers = "proxy" }, "http.trusted_proxies"},
		{"proxy with jwt keys", func(c *Config) { jwtConfig(c); c.Auth.Buyers, c.HTTP.TrustedProxies = "proxy", []string{"10.0.0.1"} }, "auth.buyers"},
		{"none with jwt keys", func(c *Config) { jwtConfig(c); c.Auth.Buyers = "none" }, "auth.buyers"},
		// jwt_leeway has a default: set is other than it, even in range.
		{"none with a jwt leeway", func(c *Config) { c.Auth.JWTLeeway = time.Minute }, "auth.buyers"},
		{"none with an out-of-range jwt leeway", func(c *Config) { c.Auth.JWTLeeway = 6 * time.Minute }, "auth.buyers"},
		{"proxy with a jwt leeway", func(c *Config) {
			c.Auth.Buyers, c.HTTP.TrustedProxies, c.Auth.JWTLeeway = "proxy", []string{"10.0.0.1"}, time.Minute
		}, "auth.buyers"},
		{"none with the default jwt leeway", func(c *Config) { c.Auth.JWTLeeway = 30 * time.Second }, ""},
		{"required with none", func(c *Config) { c.Auth.Required = true }, "auth.required"},
		{"negative per-user limit", func(c *Config) { c.Stock.PerUserLimit = -1 }, "stock.per_user_limit"},
		{"per-user limit without the ledger", func(c *Config) { c.Stock.PerUserLimit, c.Stock.Ledger = 2, false }, "stock.per_user_limit"},
		{"no ledger", func(c *Config) { c.Stock.Ledger = false }, ""},
		{"sub-second idempotency ttl", func(c *Config) { c.Stock.IdempotencyTTL = time.Millisecond }, "stock.idempotency_ttl"},
		{"31-day idempotency ttl", func(c *Config) { c.Stock.IdempotencyTTL = 721 * time.Hour }, "stock.idempotency_ttl"},
		{"30-day idempotency ttl", func(c *Config) { c.Stock.IdempotencyTTL = 720 * time.Hour }, ""},
		{"durable orders", func(c *Config) { c.Orders.Durable, c.MySQL.DSN = true, "u:p@tcp(db:3306)/seckill" }, ""},
		{"durable orders without dsn", func(c *Config) { c.Orders.Durable = true }, "orders.durable"},
		{"durable orders, bad dsn", func(c *Config) { c.Orders.Durable, c.MySQL.DSN = true, "u@db:3306" }, "mysql.dsn"},
		{"durable orders, dsn without database", func(c *Config) { c.Orders.Durable, c.MySQL.DSN = true, "u:p@tcp(db:3306)/" }, "mysql.dsn"},
		{"durable orders without the ledger", func(c *Config) {
			c.Orders.Durable, c.MySQL.DSN, c.Stock.Ledger = true, "u:p@tcp(db:3306)/seckill", false
		}, "orders.durable"},
		{"durable orders on the mysql lock's dsn", func(c *Config) { mysqlConfigured(c); c.Orders.Durable = true }, ""},
		{"empty orders group", func(c *Config) { c.Orders.Group = "" }, "orders.group"},
		// The stock Redis behind Sentinel, and replica acks.
		{"sentinel", func(c *Config) {
			c.Redis.Sentinel.Master, c.Redis.Sentinel.Addrs = "seckill", []string{"s1:26379", "s2:26379"}
		}, ""},
		{"sentinel without addrs", func(c *Config) { c.Redis.Sentinel.Master = "seckill" }, "redis.sentinel.addrs"},
		{"sentinel addrs without master", func(c *Config) { c.Redis.Sentinel.Addrs = []string{"s1:26379"} }, "redis.sentinel.master"},
		{"sentinel addr without port", func(c *Config) { c.Redis.Sentinel.Master, c.Redis.Sentinel.Addrs = "seckill", []string{"s1"} }, "redis.sentinel.addrs"},
		// A Redis Cluster: one hash tag per family of keys written together.
		{"cluster", clusterConfigured, ""},
		{"cluster, atomic, untagged lock key unused", func(c *Config) {
			clusterConfigured(c)
			c.Stock.Mode, c.Lock.Key = "atomic", "lock"
		}, ""},
		{"cluster, etcd lock, untagged lock key", func(c *Config) {
			clusterConfigured(c)
			c.Lock.Backend, c.Lock.Key = "etcd", "lock"
		}, ""},
		{"cluster addr without port", func(c *Config) { clusterConfigured(c); c.Redis.Cluster.Addrs = []string{"r1"} }, "redis.cluster.addrs"},
		{"cluster, untagged stock key", func(c *Config) {
			clusterConfigured(c)
			c.Stock.Key, c.Stock.LuckyKey, c.Stock.FenceKey = "stock", "lucky", "stock:fence"
		}, "stock.key"},
		{"cluster, lucky key off the tag", func(c *Config) { clusterConfigured(c); c.Stock.LuckyKey = "lucky" }, "stock.lucky_key"},
		{"cluster, redis lock tags its own keys", func(c *Config) {
			clusterConfigured(c)
			c.Lock.Backend, c.Lock.Key = "redis", "lock"
		}, ""},
		{"cluster, untagged redisson lock key", func(c *Config) {
			clusterConfigured(c)
			c.Lock.Backend, c.Lock.Key = "redisson", "lock"
		}, "lock.key"},
		{"cluster and sentinel", func(c *Config) {
			clusterConfigured(c)
			c.Redis.Sentinel.Master, c.Redis.Sentinel.Addrs = "seckill", []string{"s1:26379"}
		}, "redis.cluster.addrs"},
		{"cluster, database 1", func(c *Config) { clusterConfigured(c); c.Redis.DB = 1 }, "redis.db"},
		{"cluster's default acks bound the timeout", func(c *Config) {
			clusterConfigured(c)
			c.Stock.ReplicaAckTimeout = time.Second
		}, "stock.replica_ack_timeout"},
		{"replica acks", func(c *Config) { c.Stock.MinReplicaAcks = 2 }, ""},
		{"negative replica acks", func(c *Config) { c.Stock.MinReplicaAcks = -2 }, "stock.min_replica_acks"},
		{"ack timeout above redis timeout", func(c *Config) { c.Stock.MinReplicaAcks, c.Stock.ReplicaAckTimeout = 1, 2*time.Second }, "stock.replica_ack_timeout"},
		{"ack timeout unused without acks", func(c *Config) { c.Stock.MinReplicaAcks, c.Stock.ReplicaAckTimeout = 0, 2*time.Second }, ""},
		{"sentinel's default acks bound the timeout", func(c *Config) {
			c.Redis.Sentinel.Master, c.Redis.Sentinel.Addrs = "seckill", []string{"s1:26379"}
			c.Stock.ReplicaAckTimeout = time.Second
		}, "stock.replica_ack_timeout"},
		{"zero claim idle", func(c *Config) { c.Orders.ClaimIdle = 0 }, "orders.claim_idle"},
		{"clock check off", func(c *Config) { c.Stock.MaxClockSkew = 0 }, ""},
		{"negative clock skew", func(c *Config) { c.Stock.MaxClockSkew = -time.Second }, "stock.max_clock_skew"},
		{"clock skew past an hour", func(c *Config) { c.Stock.MaxClockSkew = time.Hour + time.Second }, "stock.max_clock_skew"},
		{"trim off", func(c *Config) { c.Orders.TrimInterval = 0 }, ""},
		{"trim interval too short", func(c *Config) { c.Orders.TrimInterval = time.Millisecond }, "orders.trim_interval"},
		{"negative trim interval", func(c *Config) { c.Orders.TrimInterval = -time.Second }, "orders.trim_interval"},
		{"payment wait for MySQL past the answer's deadline", func(c *Config) { c.Orders.DurableTimeout = c.HTTP.WriteTimeout }, "orders.durable_timeout"},
		{"no payment wait for MySQL", func(c *Config) { c.Orders.DurableTimeout = 0 }, "orders.durable_timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig(t)
			tc.mut(c)
			err := Validate(c)
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "config: "+tc.wantKey+": ") {
				t.Fatalf("got %v, want an error naming %s", err, tc.wantKey)
			}
		})
	}
}

// mysqlConfigured selects the mysql backend with a valid DSN.
// clusterConfigured is a valid configuration on a Redis Cluster: the
// sale's and the Redis lock's keys each under one hash tag.
func clusterConfigured(c *Config) {
	c.Redis.Cluster.Addrs = []string{"r1:7000", "r2:7000"}
	c.Stock.Key, c.Stock.LuckyKey, c.Stock.FenceKey = "{stock}", "{stock}:lucky", "{stock}:fence"
	c.Lock.Backend, c.Lock.Key = "redisson", "{lock}"
}

func mysqlConfigured(c *Config) {
	c.Lock.Backend = "mysql"
	c.MySQL.DSN = "seckill:secret@tcp(mysql:3306)/seckill"
}

// A DSN error names the key and never quotes the DSN: it holds a password.
func TestValidateMySQLDSNHidesThePassword(t *testing.T) {
	for _, dsn := range []string{"seckill:hunter2@mysql:3306", "seckill:hunter2@tcp(db:3306)/", "seckill:hunter2@tcp(db)/x?timeout=soon"} {
		c := validConfig(t)
		mysqlConfigured(c)
		c.MySQL.DSN = dsn
		err := Validate(c)
		if err == nil || !strings.Contains(err.Error(), "config: mysql.dsn: ") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: got %v, want an error naming mysql.dsn without the password", dsn, err)
		}
	}
}

func TestValidateUnknownBackendMessage(t *testing.T) {
	c := validConfig(t)
	c.Lock.Backend = "redsi"
	err := Validate(c)
	want := `config: lock.backend: unknown backend "redsi" (want one of `
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "zookeeper") {
		t.Fatalf("got %v, want it to start with %s and list the backends", err, want)
	}
}

func TestLoadDefaultsMatchTheShippedFile(t *testing.T) {
	fromDefaults := validConfig(t)
	fromFile, err := Load(shippedFile, tokenEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromDefaults, fromFile) {
		t.Fatalf("configs/stockd.yaml and the built-in defaults differ:\nfile     %+v\ndefaults %+v", fromFile, fromDefaults)
	}
}

func TestLoadEnvOverrides(t *testing.T) {
	c, err := Load("", []string{
		"STOCKD_LOCK_BACKEND=etcd",
		"STOCKD_LOCK_REDIS_ADDR=127.0.0.1:7000",
		"STOCKD_ETCD_ENDPOINTS=http://a:2379, b:2379",
		"STOCKD_ZOOKEEPER_SERVERS=z1:2181",
		"STOCKD_WORK_DELAY=2ms-6ms",
		"STOCKD_STOCK_FENCING=false",
		"STOCKD_REDIS_DB=3",
		"STOCKD_LOCK_WAIT_TIMEOUT=60s",
		"STOCKD_REPLICA=r1",
		"PATH=/usr/bin", // not ours
	})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.Lock.Backend, c.Lock.RedisAddr, c.Etcd.Endpoints, c.ZooKeeper.Servers, c.Work.Delay,
		c.Stock.Fencing, c.Redis.DB, c.Lock.WaitTimeout, c.Replica}
	want := []any{"etcd", "127.0.0.1:7000", []string{"http://a:2379", "b:2379"}, []string{"z1:2181"},
		stock.Delay{Min: 2 * time.Millisecond, Max: 6 * time.Millisecond}, false, 3, time.Minute, "r1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, file string
		env        []string
		wantKey    string
	}{
		{"bad duration env", "", []string{"STOCKD_LOCK_TTL=ten"}, "lock.ttl"},
		{"unitless duration", "", []string{"STOCKD_HTTP_SHUTDOWN_TIMEOUT=10"}, "http.shutdown_timeout"},
		{"bad delay", "", []string{"STOCKD_WORK_DELAY=5ms-1ms"}, "work.delay"},
		{"bad bool", "", []string{"STOCKD_STOCK_FENCING=yes please"}, "stock.fencing"},
		{"bad int", "", []string{"STOCKD_REDIS_DB=zero"}, "redis.db"},
		{"unknown env", "", []string{"STOCKD_LOCK_BACKEDN=redis"}, "STOCKD_LOCK_BACKEDN"},
		{"unknown file key", "lock:\n  backed: etcd\n", nil, "lock.backed"},
		{"bad file duration", "lock:\n  ttl: soon\n", nil, "lock.ttl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(path, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.wantKey) {
				t.Fatalf("got %v, want an error naming %s", err, tc.wantKey)
			}
		})
	}
}

// ifProduct is want for a product build (without -tags lab), "" (valid)
// for a lab build.
func ifProduct(want string) string {
	if LabBuild {
		return ""
	}
	return want
}

// The product backends are always wired; the lab's only in a lab build,
// and each of its rows is one labBackends names (for the product's
// refusal) and is marked labOnly (for lab.unsafe).
func TestEveryBackendNameIsWired(t *testing.T) {
	for _, name := range []string{"redis", "redisson", "etcd", "zookeeper", "mysql", "mysql-row"} {
		if spec, ok := backends[name]; !ok || spec.labOnly {
			t.Errorf("backend %q missing from the wiring table, or lab-only", name)
		}
	}
	for _, name := range labBackends {
		if spec, ok := backends[name]; ok != LabBuild || (ok && !spec.labOnly) {
			t.Errorf("lab backend %q: wired %v in a build with the lab %v, lab-only %v", name, ok, LabBuild, spec.labOnly)
		}
	}
	for name, spec := range backends {
		if spec.labOnly && !slices.Contains(labBackends, name) {
			t.Errorf("lab-only backend %q is not in labBackends", name)
		}
	}
}

const shippedFile = "../../configs/stockd.yaml"

// configs/stockd.yaml documents exactly the keys of Config: every key is in
// the file, and the file has no key Config lacks. (That its values are the
// defaults is TestLoadDefaultsMatchTheShippedFile.)
func TestShippedFileDocumentsEveryKey(t *testing.T) {
	v := viper.New()
	v.SetConfigFile(shippedFile)
	if err := v.ReadInConfig(); err != nil {
		t.Fatal(err)
	}
	inFile := v.AllKeys()
	for _, k := range keys {
		if !slices.Contains(inFile, k.name) {
			t.Errorf("key %s is not documented in configs/stockd.yaml", k.name)
		}
	}
	for _, k := range inFile {
		if !knownKey(k) {
			t.Errorf("configs/stockd.yaml documents %s, which is no key of Config", k)
		}
	}
}

// The key list is Config's fields: every one named once, with an
// environment variable that maps back to it.
func TestKeysAreConfigFields(t *testing.T) {
	if len(keys) < 40 {
		t.Fatalf("only %d keys read from Config", len(keys))
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.name] {
			t.Errorf("key %s declared twice", k.name)
		}
		seen[k.name] = true
		if got := envKeys[envName(k.name)]; got != k.name {
			t.Errorf("%s maps to %q, want %s", envName(k.name), got, k.name)
		}
	}
	for _, want := range []string{"replica", "lock.redis_addr", "http.trusted_proxies", "work.delay", "lab.unsafe"} {
		if !seen[want] {
			t.Errorf("key %s missing", want)
		}
	}
	if seen["lab.failpoints"] {
		t.Error("lab.failpoints is SECKILL_FAILPOINTS, not a key")
	}
}

// weakSecrets names the secrets accepted only by auth.allow_weak_secrets,
// which stockd then warns about.
func TestWeakSecrets(t *testing.T) {
	for _, tc := range []struct {
		token, secret string
		want          []string
	}{
		{"changeme", "", []string{"admin.token"}},
		{testAdminToken, "", nil},
		{testAdminToken, testJWTSecret, nil},
		{"demo-token", "0123456789abcdef0123456789abcdef", []string{"admin.token", "auth.jwt_secret"}},
	} {
		c := &Config{}
		c.Admin.Token, c.Auth.JWTSecret = tc.token, tc.secret
		if got := weakSecrets(c); !slices.Equal(got, tc.want) {
			t.Errorf("weakSecrets(%q, %q) = %v, want %v", tc.token, tc.secret, got, tc.want)
		}
	}
}

// Every key can be set from the environment alone, no file: each one set to
// its own default yields the defaults.
func TestEveryKeyFromTheEnvironment(t *testing.T) {
	want := validConfig(t)
	for _, k := range keys {
		if k.name == "admin.token" {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			got, err := Load("", append([]string{envName(k.name) + "=" + k.def}, tokenEnv...))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s=%q: got %+v, want the defaults %+v", envName(k.name), k.def, got, want)
			}
		})
	}
}

// A broken configuration is reported in full: one line per bad key.
func TestLoadNamesEveryBadKey(t *testing.T) {
	_, err := Load("", []string{
		"STOCKD_LOCK_TTL=ten", "STOCKD_REDIS_DB=zero", "STOCKD_STOCK_FENCING=", "STOCKD_ETCD_DIAL_TIMEOUT=2",
	})
	for _, key := range []string{"lock.ttl", "redis.db", "stock.fencing", "etcd.dial_timeout"} {
		if err == nil || !strings.Contains(err.Error(), "config: "+key+": ") {
			t.Errorf("got %v, want a line naming %s", err, key)
		}
	}
}

// YAML's own types are accepted where they mean the same as the env form.
func TestLoadYAMLTypes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stockd.yaml")
	yaml := "replica: 7\nredis:\n  db: 2\nstock:\n  fencing: false\nhttp:\n  trusted_proxies: [10.0.0.1, ' 172.16.0.0/12 ']\n" +
		"etcd:\n  endpoints: a:1, b:2\nwork:\n  delay: 1ms-2ms\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.Replica, c.Redis.DB, c.Stock.Fencing, c.HTTP.TrustedProxies, c.Etcd.Endpoints, c.Work.Delay}
	want := []any{"7", 2, false, []string{"10.0.0.1", "172.16.0.0/12"}, []string{"a:1", "b:2"},
		stock.Delay{Min: time.Millisecond, Max: 2 * time.Millisecond}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// jwtConfig sets a valid auth.buyers jwt.
func jwtConfig(c *Config) {
	c.Auth.Buyers, c.Auth.JWTSecret = "jwt", testJWTSecret
	c.Auth.JWTIssuer, c.Auth.JWTAudience = "shop", "seckill"
}

// A combined batch's last member is answered after every member's work:
// combineMax is stock.combine_max, or the most buyers whose work fits
// http.write_timeout, whichever is smaller, and never below 1.
func TestCombineMaxFitsTheWriteTimeout(t *testing.T) {
	c := validConfig(t)
	if got := combineMax(c); got != c.Stock.CombineMax {
		t.Fatalf("no work: combineMax %d, want stock.combine_max %d", got, c.Stock.CombineMax)
	}
	c.Work.Delay = stock.FixedDelay(300 * time.Millisecond)
	k := combineMax(c)
	if k >= c.Stock.CombineMax || k < 1 {
		t.Fatalf("300ms of work: combineMax %d, want below %d", k, c.Stock.CombineMax)
	}
	if saleBound(c, time.Duration(k)*c.Work.Delay.Max) >= c.HTTP.WriteTimeout ||
		saleBound(c, time.Duration(k+1)*c.Work.Delay.Max) < c.HTTP.WriteTimeout {
		t.Fatalf("combineMax %d is not the most buyers whose work fits %s", k, c.HTTP.WriteTimeout)
	}
	c.Work.Delay = stock.FixedDelay(c.HTTP.WriteTimeout - saleBound(c, 0) - time.Millisecond)
	if got := combineMax(c); got != 1 {
		t.Fatalf("work that only one buyer fits: combineMax %d, want 1", got)
	}
}
