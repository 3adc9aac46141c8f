package redislock

// LockKey is the Redis key holding key's owner, for tests that delete it.
func LockKey(key string) string { return keysFor(key)[0] }

// QueueKey is the Redis sorted set of key's remote waiters.
func QueueKey(key string) string { return keysFor(key)[2] }

// Waiting reports how many goroutines of l are queued locally for key,
// including the one contending in Redis.
func Waiting(l *Locker, key string) int { return l.gate.Len(key) }
