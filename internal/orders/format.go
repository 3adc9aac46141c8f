package orders

import "seckill/internal/stock/redisstore"

// RowFormat is the format of an order row this build writes, in the
// table's format column: a reader refuses a newer one (Orders answers
// stock.ErrOrderFormat) rather than read its columns as this build's.
// Rows written before the column (0.9.0, which names no format in its
// inserts) are format 1, the column's default.
const RowFormat = 1

// Formats are the stored formats this package writes and reads, in
// redisstore.Formats' form: what /info and stockd --version list beside them.
func Formats() []redisstore.Format {
	return []redisstore.Format{{Name: "orders", Writes: RowFormat, ReadsFrom: 1,
		What: "an order's row in the durable orders' tables (MySQL), its format column"}}
}
