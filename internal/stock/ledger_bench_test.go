package stock_test

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/lock/locallock"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
)

// BenchmarkLoneSale is the cost of the ledger (#13): one buyer at a time
// against a real redis-server, locked (fenced, in-process lock) and atomic,
// with the ledger off, on for an anonymous sale, and on for a named buyer
// with an idempotency key (every record written). Compare the rows of one
// run: they share the server and the machine's load.
func BenchmarkLoneSale(b *testing.B) {
	srv := servertest.Redis(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	for _, mode := range []stock.Mode{stock.ModeLocked, stock.ModeAtomic} {
		for _, ledger := range []string{"off", "anonymous", "buyer+key"} {
			b.Run(string(mode)+"/ledger="+ledger, func(b *testing.B) {
				keys := stock.Keys{Stock: "stock", Lucky: "lucky", Fence: "stock:fence"}
				if ledger != "off" {
					keys.Orders = ordersKey
				}
				s := stock.NewStore(rdb, keys)
				if err := s.Reset(b.Context(), stock.MaxStock); err != nil {
					b.Fatal(err)
				}
				if err := s.LoadScripts(b.Context()); err != nil {
					b.Fatal(err)
				}
				svc := stock.NewService(stock.ServiceConfig{Store: s, Locker: locallock.New(), Mode: mode,
					Fencing: mode == stock.ModeLocked, Backend: "local", LockKey: "seckill:lock", PerUserLimit: 1 << 30})
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
				if err := rdb.FlushAll(b.Context()).Err(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
