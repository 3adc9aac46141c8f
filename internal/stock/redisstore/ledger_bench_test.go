package redisstore_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// BenchmarkLoneSale is the cost of the ledger: one buyer at a time
// against a real redis-server, locked (fenced, in-process lock) and atomic,
// with the ledger off, on for an anonymous sale, and on for a named buyer
// with an idempotency key (every record written). Compare the rows of one
// run: they share the server and the machine's load. redis-us/sale is the
// server's own time in the sale's scripts (INFO commandstats), which other
// load on the machine disturbs far less than ns/op.
func BenchmarkLoneSale(b *testing.B) {
	srv := servertest.Redis(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	for _, mode := range []stock.Mode{stock.ModeLocked, stock.ModeAtomic} {
		for _, ledger := range []string{"off", "anonymous", "buyer+key"} {
			b.Run(string(mode)+"/ledger="+ledger, func(b *testing.B) {
				keys := redisstore.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
				if ledger != "off" {
					keys.Orders = ordersKey
				}
				s := redisstore.NewStore(rdb, keys)
				if err := s.Reset(b.Context(), redisstore.MaxStock); err != nil {
					b.Fatal(err)
				}
				if err := s.LoadScripts(b.Context()); err != nil {
					b.Fatal(err)
				}
				svc := stock.NewService(stock.ServiceConfig{Store: s, Locker: locallock.New(), Mode: mode,
					Fencing: mode == stock.ModeLocked, Backend: "local", LockKey: "seckill:lock", PerUserLimit: 1 << 30})
				if err := rdb.ConfigResetStat(b.Context()).Err(); err != nil {
					b.Fatal(err)
				}
				i := 0
				for b.Loop() {
					var buyer stock.Buyer
					if ledger == "buyer+key" {
						buyer = stock.Buyer{User: "u" + strconv.Itoa(i%1000), Key: "k" + strconv.Itoa(i)}
					}
					i++
					if _, err := svc.ReduceFor(b.Context(), buyer); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(scriptMicros(b, rdb)/float64(i), "redis-us/sale")
				if err := rdb.FlushAll(b.Context()).Err(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// scriptMicros is the server's total time in scripts run by EVALSHA since
// the last CONFIG RESETSTAT, in microseconds.
func scriptMicros(b *testing.B, rdb *redis.Client) float64 {
	b.Helper()
	info, err := rdb.Info(b.Context(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "usec="); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				return n
			}
		}
	}
	b.Fatalf("no evalsha in commandstats: %q", info)
	return 0
}
