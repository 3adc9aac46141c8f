package locallock

// QueueLen reports how many goroutines hold or wait for key, for tests that
// must know a waiter has queued before they go on.
func QueueLen(l *Locker, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.keys[key]; q != nil {
		return q.Len()
	}
	return 0
}
