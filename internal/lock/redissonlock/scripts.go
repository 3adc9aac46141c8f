package redissonlock

import (
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts are the whole server-side protocol; each runs atomically,
// so check-and-modify never races with another process. Their KEYS/ARGV are
// documented in the .lua files.
var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed transfer.lua
	transferLua    string
	transferScript = redis.NewScript(transferLua)

	//go:embed abandon.lua
	abandonLua    string
	abandonScript = redis.NewScript(abandonLua)

	//go:embed forceunlock.lua
	forceUnlockLua    string
	forceUnlockScript = redis.NewScript(forceUnlockLua)
)

// Naming of the Redis objects behind a lock key.
const (
	// channelPrefix follows Redisson's naming, so the channel of key k is
	// "redisson_lock__channel:{k}": in Redis Cluster the hash tag puts it in
	// the slot of k itself.
	channelPrefix = "redisson_lock__channel:"
	// fenceSuffix names the fencing counter, as the redis backend does.
	fenceSuffix = ":fence"

	msgUnlock = "unlock" // published when a lock is freed
	msgForce  = "force"  // published by ForceUnlock
	// msgYield prefixes the message of a release while the Locker's own
	// goroutines still wait (the end of a run of hand-offs); the Locker id
	// follows, so the Locker itself can tell its yield from everyone
	// else's releases.
	msgYield = "yield:"
)

// keyNames are the Redis names derived from one lock key, built once per
// key in use and shared by the front's attempts and every hold of a run of
// hand-offs, so the hot path does not rebuild them per script call.
type keyNames struct {
	key     string
	keys    []string // {lock, fence}; keys[:1] is the lock alone
	channel any      // channelOf(key): a string, boxed once for script ARGV
}

func newKeyNames(key string) *keyNames {
	return &keyNames{key: key, keys: RedisKeys(key), channel: channelOf(key)}
}

// RedisKeys lists the Redis keys of the lock named key: the lock's hash,
// named key itself as in Redisson, and its fencing counter. A caller that
// keeps other keys in the same Redis must keep them off these.
func RedisKeys(key string) []string { return []string{key, key + fenceSuffix} }

// channelOf returns the pub/sub channel on which releases of key are announced.
func channelOf(key string) string { return channelPrefix + "{" + key + "}" }

// keyOfChannel inverts channelOf; ok is false for foreign channels.
func keyOfChannel(ch string) (key string, ok bool) {
	n := len(channelPrefix)
	if len(ch) < n+2 || ch[:n] != channelPrefix || ch[n] != '{' || ch[len(ch)-1] != '}' {
		return "", false
	}
	return ch[n+1 : len(ch)-1], true
}

// Outcomes of acquire.lua.
const (
	acqBusy     = 0  // value is the holder's remaining PTTL in ms
	acqFirst    = 1  // value is the fencing token
	acqReentry  = 2  // value is the new hold count
	acqNotOwner = -1 // re-entry found the lock not held by the owner
)

// Outcomes of transfer.lua.
const (
	xferDone     = 1  // value is the new owner's fencing token
	xferNotOwner = -1 // the current owner does not hold the lock
)

// relYielded is release.lua's answer when a yield reached another process.
const relYielded = -2

// millis renders d for PEXPIRE, never below 1ms (0 would be rejected).
func millis(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// pair decodes the {status, value} reply of acquire.lua and transfer.lua.
func pair(v any) (status, value int64, err error) {
	xs, ok := v.([]any)
	if !ok || len(xs) != 2 {
		return 0, 0, fmt.Errorf("unexpected acquire reply %#v", v)
	}
	s, ok1 := xs[0].(int64)
	n, ok2 := xs[1].(int64)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("unexpected acquire reply %#v", v)
	}
	return s, n, nil
}
