//go:build lab

package stockd

import (
	"context"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock"
	"seckill/internal/lock/backend"
	"seckill/internal/lock/flawedlock"
	"seckill/internal/lock/locallock"
	"seckill/internal/lock/nolock"
)

// The lab's backends, compiled only with -tags lab: each oversells across
// replicas on purpose, so a product build must not be able to run one
// whatever its configuration says.
func init() {
	lab := map[string]backendSpec{
		// none and local show the overselling the articles start from.
		backend.None: {needs: needsNothing, labOnly: true, build: func(context.Context, *wiring) (lock.Locker, error) { return nolock.New(), nil }},
		backend.Local: {needs: needsNothing, labOnly: true, build: func(_ context.Context, w *wiring) (lock.Locker, error) {
			return locallock.NewWith(locallock.Options{LocalHandoffs: localHandoffs(w.cfg)}), nil
		}},
		// Broken Redis locks: each fails in the way one of the articles'
		// versions does. Never safe; they exist to be watched failing.
		"setnx":          {needs: needsRedis, labOnly: true, build: flawed(flawedlock.NewSetNX), redisKeys: flawedKeys(flawedlock.NameSetNX)},
		"redis-nocheck":  {needs: needsRedis, labOnly: true, build: flawed(flawedlock.NewNoCheck), redisKeys: flawedKeys(flawedlock.NameNoCheck)},
		"redis-checkdel": {needs: needsRedis, labOnly: true, build: flawed(flawedlock.NewCheckDel), redisKeys: flawedKeys(flawedlock.NameCheckDel)},
	}
	for name, spec := range lab {
		backends[name] = spec
	}
	knownFailpoints = append(knownFailpoints,
		flawedlock.FailpointAfterSetNX,
		flawedlock.FailpointNoCheckBeforeDel,
		flawedlock.FailpointCheckDelBeforeDel,
	)
}

func flawedKeys(name string) func(string) []string {
	return func(key string) []string { return flawedlock.RedisKeys(name, key) }
}

func flawed(newFn func(redis.UniversalClient, flawedlock.Options) *flawedlock.Locker) func(context.Context, *wiring) (lock.Locker, error) {
	return func(_ context.Context, w *wiring) (lock.Locker, error) {
		return newFn(w.lockRedis(), flawedlock.Options{TTL: w.cfg.Lock.TTL}), nil
	}
}
