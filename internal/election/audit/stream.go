package audit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReadStream returns the audit records in stream, oldest first (at most the
// stream's cap). It is for tests, the CLI and operators; the leader never
// reads the stream.
func ReadStream(ctx context.Context, rdb redis.Cmdable, stream string) ([]Record, error) {
	if stream == "" {
		stream = DefaultStream
	}
	msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrRedis, stream, err)
	}
	out := make([]Record, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, parseRecord(m))
	}
	return out, nil
}

func parseRecord(m redis.XMessage) Record {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	i64 := func(k string) int64 { n, _ := strconv.ParseInt(str(k), 10, 64); return n }
	u64, _ := strconv.ParseUint(str("term"), 10, 64)
	r := Record{
		ID: m.ID, Replica: str("replica"), Backend: str("backend"), Term: u64,
		At:    time.UnixMilli(i64("at")),
		Stock: i64("stock"), Lucky: i64("lucky"), Initial: i64("initial"), Returned: i64("returned"),
		Learned: str("learned") == "1", Fence: str("fence"), OK: str("ok") == "1",
	}
	if _, ok := m.Values["orders"]; ok {
		r.Ledger = &LedgerRecord{Sale: str("sale"), Orders: i64("orders"), Lucky: i64("ledger_lucky"), Lag: i64("lag")}
		if _, ok := m.Values["durable"]; ok {
			d := i64("durable")
			r.Ledger.Durable = &d
		}
	}
	if id := str("item_ledger"); id != "" {
		r.ItemLedger = &LedgerRecord{Item: id, Lag: i64("item_lag")}
		if _, ok := m.Values["item_durable"]; ok {
			d := i64("item_durable")
			r.ItemLedger.Durable = &d
		}
	}
	r.Items = -1 // a record made before items were audited has none
	if _, ok := m.Values["items"]; ok {
		r.Items = int(i64("items"))
	}
	if p := str("problems"); p != "" && p != "[]" {
		r.Problems = []string{p}
	}
	return r
}
