package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/viper"

	"seckill/internal/failpoint"
	"seckill/internal/stock"
)

// Config is stockd's whole configuration. It is loaded from a YAML file
// (--config), then STOCKD_* environment variables (dots become underscores:
// STOCKD_LOCK_BACKEND=redis; lists are comma-separated), over the defaults in
// defaults. Validate checks it; internal packages receive plain values
// derived from it, never the Config or viper.
type Config struct {
	Replica string
	HTTP    struct {
		Addr            string
		ShutdownTimeout time.Duration
		// Limits of the public listener (see serve.go and README "Running
		// it in public").
		ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
		MaxHeaderBytes, MaxBodyBytes, MaxConns                    int
		// TrustedProxies may set the client address by X-Forwarded-For.
		TrustedProxies []string
	}
	Admin struct{ Token string }
	Log   struct{ Level, Format string }
	Redis struct {
		Addr, Password string
		DB             int
		Timeout        time.Duration
	}
	Lock struct {
		Backend     string
		Key         string
		TTL         time.Duration
		WaitTimeout time.Duration
		RedisAddr   string // lock Redis, when it differs from Redis.Addr
	}
	Redisson struct {
		Watchdog, LeaseTime time.Duration
	}
	Etcd struct {
		Endpoints               []string
		SessionTTL, DialTimeout time.Duration
	}
	ZooKeeper struct {
		Servers        []string
		SessionTimeout time.Duration
		Root           string
	}
	Stock struct {
		Key, LuckyKey, FenceKey string
		Fencing                 bool
		Mode                    string
		ConfirmTimeout          time.Duration
	}
	Work     struct{ Delay stock.Delay }
	Election struct {
		Backend     string
		Path        string
		JobInterval time.Duration
	}
	Lab struct {
		// Unsafe permits what only the lab may run (lab.go).
		Unsafe bool
		// Failpoints is $SECKILL_FAILPOINTS, read here so Validate sees it.
		Failpoints string
	}
}

// defaults lists every key with its default. SetDefault on each is what makes
// env-only configuration work: viper only consults the environment for keys
// it knows about.
var defaults = []struct {
	key string
	val any
}{
	{"replica", ""},
	{"http.addr", ":8080"},
	{"http.shutdown_timeout", "10s"},
	{"http.read_header_timeout", "5s"},
	{"http.read_timeout", "10s"},
	{"http.write_timeout", "30s"},
	{"http.idle_timeout", "60s"},
	{"http.max_header_bytes", 16 << 10},
	{"http.max_body_bytes", 64 << 10},
	{"http.max_conns", 4096},
	{"http.trusted_proxies", []string{}},
	{"admin.token", ""},
	{"log.level", "info"},
	{"log.format", "text"},
	{"redis.addr", "127.0.0.1:6379"},
	{"redis.password", ""},
	{"redis.db", 0},
	{"redis.timeout", "1s"},
	{"lock.backend", "redis"},
	{"lock.key", "seckill:lock"},
	{"lock.ttl", "10s"},
	{"lock.wait_timeout", "5s"},
	{"lock.redis_addr", ""},
	{"redisson.watchdog", "30s"},
	{"redisson.lease_time", "0s"},
	{"etcd.endpoints", []string{"127.0.0.1:2379"}},
	{"etcd.session_ttl", "10s"},
	{"etcd.dial_timeout", "2s"},
	{"zookeeper.servers", []string{"127.0.0.1:2181"}},
	{"zookeeper.session_timeout", "10s"},
	{"zookeeper.root", "/seckill/locks"},
	{"stock.key", "stock"},
	{"stock.lucky_key", "lucky"},
	{"stock.fence_key", "stock:fence"},
	{"stock.fencing", true},
	{"stock.confirm_timeout", "3s"},
	{"stock.mode", "locked"},
	{"work.delay", "0s"},
	{"election.backend", "none"},
	{"election.path", "/seckill/leader"},
	{"election.job_interval", "1s"},
	{"lab.unsafe", false},
}

// Load reads the configuration. path may be empty (defaults + environment).
// Parse errors name the key; semantic checks are left to Validate.
func Load(path string, env []string) (*Config, error) {
	v := viper.New()
	for _, d := range defaults {
		v.SetDefault(d.key, d.val)
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
	// Bind from the env slice, not os.Environ via AutomaticEnv, so tests can
	// hand in an environment without touching the process's.
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "STOCKD_") {
			continue
		}
		key := envKey(strings.TrimPrefix(name, "STOCKD_"))
		if key == "" {
			return nil, fmt.Errorf("config: environment %s: unknown key", name)
		}
		v.Set(key, val)
	}

	l := loader{v: v}
	var c Config
	c.Replica = l.str("replica")
	c.HTTP.Addr = l.str("http.addr")
	c.HTTP.ShutdownTimeout = l.duration("http.shutdown_timeout")
	c.HTTP.ReadHeaderTimeout = l.duration("http.read_header_timeout")
	c.HTTP.ReadTimeout = l.duration("http.read_timeout")
	c.HTTP.WriteTimeout = l.duration("http.write_timeout")
	c.HTTP.IdleTimeout = l.duration("http.idle_timeout")
	c.HTTP.MaxHeaderBytes = l.int("http.max_header_bytes")
	c.HTTP.MaxBodyBytes = l.int("http.max_body_bytes")
	c.HTTP.MaxConns = l.int("http.max_conns")
	c.HTTP.TrustedProxies = l.list("http.trusted_proxies")
	c.Admin.Token = l.str("admin.token")
	c.Log.Level = l.str("log.level")
	c.Log.Format = l.str("log.format")
	c.Redis.Addr = l.str("redis.addr")
	c.Redis.Password = l.str("redis.password")
	c.Redis.DB = l.int("redis.db")
	c.Redis.Timeout = l.duration("redis.timeout")
	c.Lock.Backend = l.str("lock.backend")
	c.Lock.Key = l.str("lock.key")
	c.Lock.TTL = l.duration("lock.ttl")
	c.Lock.WaitTimeout = l.duration("lock.wait_timeout")
	c.Lock.RedisAddr = l.str("lock.redis_addr")
	c.Redisson.Watchdog = l.duration("redisson.watchdog")
	c.Redisson.LeaseTime = l.duration("redisson.lease_time")
	c.Etcd.Endpoints = l.list("etcd.endpoints")
	c.Etcd.SessionTTL = l.duration("etcd.session_ttl")
	c.Etcd.DialTimeout = l.duration("etcd.dial_timeout")
	c.ZooKeeper.Servers = l.list("zookeeper.servers")
	c.ZooKeeper.SessionTimeout = l.duration("zookeeper.session_timeout")
	c.ZooKeeper.Root = l.str("zookeeper.root")
	c.Stock.Key = l.str("stock.key")
	c.Stock.LuckyKey = l.str("stock.lucky_key")
	c.Stock.FenceKey = l.str("stock.fence_key")
	c.Stock.Fencing = l.bool("stock.fencing")
	c.Stock.ConfirmTimeout = l.duration("stock.confirm_timeout")
	c.Stock.Mode = l.str("stock.mode")
	c.Work.Delay = l.delay("work.delay")
	c.Election.Backend = l.str("election.backend")
	c.Election.Path = l.str("election.path")
	c.Election.JobInterval = l.duration("election.job_interval")
	c.Lab.Unsafe = l.bool("lab.unsafe")
	c.Lab.Failpoints = lookupEnv(env, failpoint.EnvVar)
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}

	if c.Replica == "" {
		c.Replica, _ = os.Hostname()
	}
	return &c, nil
}

func knownKey(k string) bool {
	for _, d := range defaults {
		if d.key == k {
			return true
		}
	}
	return false
}

// envKey maps LOCK_REDIS_ADDR to lock.redis_addr. The mapping "_" → "." is
// ambiguous (keys contain underscores), so it is resolved against the known
// keys rather than guessed.
func envKey(name string) string {
	want := strings.ToLower(name)
	for _, d := range defaults {
		if strings.ReplaceAll(d.key, ".", "_") == want {
			return d.key
		}
	}
	return ""
}
