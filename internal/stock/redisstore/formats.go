package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"seckill/internal/stock"
)

// formats.go: the formats of what one replica writes and another reads,
// in one table, and the sale's own format. During a rolling upgrade two
// versions share a sale: a reader that meets a format newer than it knows
// refuses (unavailable) rather than read it as something it is not, or
// write it back without what it did not understand.

// saleFormat is the format of a sale's keys and of what its scripts
// answer, written with every reset (Keys.Format). A sale without the key
// was set up before formats: format 1, which is this one.
const saleFormat = 1

// ledgerFormat is the format of an order's ledger entry (the sale's
// stream, ledger.lua), in the entry's "format" field: the scripts' run
// files get it from here (ledgerPrelude, scripts_test.go). An entry
// without the field was written before formats: format 1, which is this
// one.
const ledgerFormat = 1

// Format is one stored format: what a build writes, and the oldest it
// reads (a record without a format number reads as ReadsFrom).
type Format struct {
	Name      string `json:"name"`
	Writes    int    `json:"writes"`
	ReadsFrom int    `json:"reads_from"`
	// What it covers, for people.
	What string `json:"what"`
}

// Formats lists every format this build writes and reads: what /info and
// stockd --version print, and what CHANGELOG.md's entries name.
func Formats() []Format {
	return []Format{
		{Name: "sale", Writes: saleFormat, ReadsFrom: 1, What: "a sale's Redis keys and what its scripts answer (the sale's :format key)"},
		{Name: "witness", Writes: witnessFormat, ReadsFrom: 0, What: "the witness's record (stock.witness), its \"format\" field"},
		{Name: "ledger", Writes: ledgerFormat, ReadsFrom: 1, What: "an order's ledger entry (the sale's orders stream), its \"format\" field"},
	}
}

// checkFormat refuses a sale whose :format key is newer than saleFormat
// (ErrSaleFormat); a missing key is a sale of format 1. Read in the same
// round trip as the epoch it is learned with (learnEpoch): the format is
// the sale's, set by the reset that made it.
func checkFormat(key string, v string) error {
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("%w: %s holds %q, not a format number", stock.ErrSaleFormat, key, v)
	}
	if n > saleFormat {
		return fmt.Errorf("%w: %s is %d, this stockd reads up to %d (a newer replica reset the sale; upgrade this one)", stock.ErrSaleFormat, key, n, saleFormat)
	}
	return nil
}

// CheckLedgerFormat refuses an order's ledger entry whose "format" field
// (v) is newer than this build reads (ErrOrderFormat); an entry without
// one is format 1. Every reader of the entries calls it before it reads
// the other fields: OrderFromFields, and the durable orders' consumer,
// which leaves such an entry pending for a newer replica to store.
func CheckLedgerFormat(entry, v string) error {
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("%w: ledger entry %s: format %q is not a format number", stock.ErrOrderFormat, entry, v)
	}
	if n > ledgerFormat {
		return fmt.Errorf("%w: ledger entry %s is format %d, this stockd reads up to %d (a newer replica sold it; upgrade this one)", stock.ErrOrderFormat, entry, n, ledgerFormat)
	}
	return nil
}

// readEpoch reads the sale's epoch and format at one instant (one slot:
// every key of a sale shares its hash tag), and refuses a newer format.
// A missing epoch reads as "".
func (s *Store) readEpoch(ctx context.Context) (string, error) {
	vals, err := s.rdb.MGet(ctx, s.keys.Epoch, s.keys.Format).Result()
	if err != nil {
		return "", WrapRedis(ctx, "read epoch", err)
	}
	epoch, _ := vals[0].(string)
	format, _ := vals[1].(string)
	return epoch, checkFormat(s.keys.Format, format)
}
