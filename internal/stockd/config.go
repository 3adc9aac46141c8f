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
// Adding a key is adding its field here and its documented line in
// configs/stockd.yaml; a test holds the file to this list and its defaults.
//
// Load fills it from a YAML file (--config), then STOCKD_* environment
// variables, over the defaults. Validate checks it; internal packages
// receive plain values derived from it, never the Config or viper.
type Config struct {
	Replica string `mapstructure:"replica" default:""` // "" = stockd-<n> in compose, else the host name (package replicaname)
	HTTP    struct {
		Addr            string        `mapstructure:"addr" default:":8080"`
		ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout" default:"10s"`
		// Limits of the public listener (see serve.go and README "Running
		// it in public").
		ReadHeaderTimeout time.Duration `mapstructure:"read_header_timeout" default:"5s"`
		ReadTimeout       time.Duration `mapstructure:"read_timeout" default:"10s"`
		WriteTimeout      time.Duration `mapstructure:"write_timeout" default:"30s"`
		IdleTimeout       time.Duration `mapstructure:"idle_timeout" default:"60s"`
		MaxHeaderBytes    int           `mapstructure:"max_header_bytes" default:"16384"`
		MaxBodyBytes      int           `mapstructure:"max_body_bytes" default:"65536"`
		MaxConns          int           `mapstructure:"max_conns" default:"4096"`
		// TrustedProxies may set the client address by X-Forwarded-For.
		TrustedProxies []string `mapstructure:"trusted_proxies" default:""`
	} `mapstructure:"http"`
	Admin struct {
		Token string `mapstructure:"token" default:""`
		// AllowInsecureToken accepts a short or placeholder token, for
		// demos only; an empty one is refused all the same.
		AllowInsecureToken bool `mapstructure:"allow_insecure_token" default:"false"`
	} `mapstructure:"admin"`
	// Auth says who a buyer is (package auth): no one (every sale
	// anonymous), the sub of a verified JWT, or the X-User a trusted proxy
	// sets. Never a header any client may write.
	Auth struct {
		Buyers      string        `mapstructure:"buyers" default:"none"`
		Required    bool          `mapstructure:"required" default:"false"`
		JWTSecret   string        `mapstructure:"jwt_secret" default:""`
		JWTKeys     string        `mapstructure:"jwt_keys" default:""`
		JWTIssuer   string        `mapstructure:"jwt_issuer" default:""`
		JWTAudience string        `mapstructure:"jwt_audience" default:""`
		JWTLeeway   time.Duration `mapstructure:"jwt_leeway" default:"30s"`
	} `mapstructure:"auth"`
	Log struct {
		Level  string `mapstructure:"level" default:"info"`
		Format string `mapstructure:"format" default:"text"`
	} `mapstructure:"log"`
	Redis struct {
		Addr     string        `mapstructure:"addr" default:"127.0.0.1:6379"`
		Password string        `mapstructure:"password" default:""`
		DB       int           `mapstructure:"db" default:"0"`
		Timeout  time.Duration `mapstructure:"timeout" default:"1s"`
		// Sentinel, when Master is set, finds the stock Redis (and the
		// Redis locks' one, unless lock.redis_addr) through these
		// Sentinels instead of redis.addr, and follows its failovers.
		Sentinel struct {
			Master string   `mapstructure:"master" default:""`
			Addrs  []string `mapstructure:"addrs" default:""`
		} `mapstructure:"sentinel"`
	} `mapstructure:"redis"`
	Lock struct {
		Backend     string        `mapstructure:"backend" default:"redis"`
		Key         string        `mapstructure:"key" default:"seckill:lock"`
		TTL         time.Duration `mapstructure:"ttl" default:"10s"`
		WaitTimeout time.Duration `mapstructure:"wait_timeout" default:"5s"`
		RedisAddr   string        `mapstructure:"redis_addr" default:""` // lock Redis, when it differs from Redis.Addr
	} `mapstructure:"lock"`
	Redisson struct {
		Watchdog  time.Duration `mapstructure:"watchdog" default:"30s"`
		LeaseTime time.Duration `mapstructure:"lease_time" default:"0s"`
	} `mapstructure:"redisson"`
	Etcd struct {
		Endpoints   []string      `mapstructure:"endpoints" default:"127.0.0.1:2379"`
		SessionTTL  time.Duration `mapstructure:"session_ttl" default:"10s"`
		DialTimeout time.Duration `mapstructure:"dial_timeout" default:"2s"`
	} `mapstructure:"etcd"`
	ZooKeeper struct {
		Servers        []string      `mapstructure:"servers" default:"127.0.0.1:2181"`
		SessionTimeout time.Duration `mapstructure:"session_timeout" default:"10s"`
		Root           string        `mapstructure:"root" default:"/seckill/locks"`
	} `mapstructure:"zookeeper"`
	// MySQL is the mysql and mysql-row backends' server (mysql.go).
	MySQL struct {
		// DSN has no default: it carries a password.
		DSN        string        `mapstructure:"dsn" default:""`
		PoolSize   int           `mapstructure:"pool_size" default:"16"`
		SessionTTL time.Duration `mapstructure:"session_ttl" default:"10s"`
		KeepAlive  time.Duration `mapstructure:"keep_alive" default:"0s"` // 0 = session_ttl/3
		WaitSlice  time.Duration `mapstructure:"wait_slice" default:"5s"`
	} `mapstructure:"mysql"`
	Stock struct {
		Key            string        `mapstructure:"key" default:"stock"`
		LuckyKey       string        `mapstructure:"lucky_key" default:"lucky"`
		FenceKey       string        `mapstructure:"fence_key" default:"stock:fence"`
		Fencing        bool          `mapstructure:"fencing" default:"true"`
		Mode           string        `mapstructure:"mode" default:"locked"`
		ConfirmTimeout time.Duration `mapstructure:"confirm_timeout" default:"3s"`
		Combine        bool          `mapstructure:"combine" default:"false"`
		CombineMax     int           `mapstructure:"combine_max" default:"64"`
		Segments       int           `mapstructure:"segments" default:"1"`
		// The order ledger: every sale leaves an order, and the
		// sale may name its buyer (X-User) and carry an Idempotency-Key.
		Ledger         bool          `mapstructure:"ledger" default:"true"`
		PerUserLimit   int           `mapstructure:"per_user_limit" default:"0"` // 0 = unlimited
		IdempotencyTTL time.Duration `mapstructure:"idempotency_ttl" default:"24h"`
		// A sale is answered sold only once this many replicas hold it
		// (WAIT); -1: 1 with Sentinel, else 0 (minReplicaAcks).
		MinReplicaAcks    int           `mapstructure:"min_replica_acks" default:"-1"`
		ReplicaAckTimeout time.Duration `mapstructure:"replica_ack_timeout" default:"500ms"`
		// AllowEviction runs on a Redis whose maxmemory-policy may evict
		// keys, which stockd otherwise refuses (eviction.go).
		AllowEviction bool `mapstructure:"allow_eviction" default:"false"`
		// RequireAOF refuses a stock Redis without an append-only file,
		// where a sale answered sold is in memory only (durability.go).
		RequireAOF bool `mapstructure:"require_aof" default:"false"`
		// Witness keeps the sale's epoch and ceilings where they do not
		// roll back with the stock Redis (witness.go).
		Witness        string        `mapstructure:"witness" default:"none"`
		WitnessTimeout time.Duration `mapstructure:"witness_timeout" default:"2s"`
	} `mapstructure:"stock"`
	// Orders is the ledger's durable copy in MySQL (mysql.dsn), written by
	// a consumer group on the ledger stream in every replica.
	Orders struct {
		Durable   bool          `mapstructure:"durable" default:"false"`
		Group     string        `mapstructure:"group" default:"orders"`
		ClaimIdle time.Duration `mapstructure:"claim_idle" default:"5s"`
	} `mapstructure:"orders"`
	Work struct {
		Delay stock.Delay `mapstructure:"delay" default:"0s"`
	} `mapstructure:"work"`
	Election struct {
		Backend     string        `mapstructure:"backend" default:"none"`
		Path        string        `mapstructure:"path" default:"/seckill/leader"`
		JobInterval time.Duration `mapstructure:"job_interval" default:"1s"`
	} `mapstructure:"election"`
	Lab struct {
		// Unsafe permits what only the lab may run (lab.go).
		Unsafe bool `mapstructure:"unsafe" default:"false"`
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
