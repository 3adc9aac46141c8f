package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

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

// saleFormatReturns is the format of a sale whose units come back: one
// reset by a store with reservations (WithReservations). Its keys are
// format 1's and more (the orders' states, the returned count), and its
// rewind ceilings are of the fresh stock (rewind.go), so a release that
// reads only format 1 refuses it rather than selling units with no
// deadline, and so does a store of this build without reservations
// (ErrSaleKind); a store with them refuses a format-1 sale, whose units
// have no states, until a reset of its own.
const saleFormatReturns = 2

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
		{Name: "sale", Writes: saleFormatReturns, ReadsFrom: 1, What: "a sale's Redis keys and what its scripts answer (the sale's :format key): 1 a sale whose units sold are final, 2 one with reservations (orders.payment_window), whose units come back"},
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
	if n > saleFormatReturns {
		return fmt.Errorf("%w: %s is %d, this stockd reads up to %d (a newer replica reset the sale; upgrade this one)", stock.ErrSaleFormat, key, n, saleFormatReturns)
	}
	return nil
}

// format is the sale format this store's resets write.
func (s *Store) format() int {
	if s.mark.rising {
		return saleFormatReturns
	}
	return saleFormat
}

// checkKind refuses a sale of the other kind than this store's
// (ErrSaleKind): format 2 (reservations) without them, or format 1 with
// them. v is a format checkFormat accepted; a sale without the key (set
// up before formats) is left to sell as it always did.
func (s *Store) checkKind(key, v string) error {
	n, _ := strconv.Atoi(v)
	switch {
	case v == "" || n == s.format():
		return nil
	case n == saleFormatReturns:
		return fmt.Errorf("%w: %s is %d, a sale with reservations, and this replica has none (orders.payment_window 0): give every replica of the sale the same orders.payment_window", stock.ErrSaleKind, key, n)
	default:
		return fmt.Errorf("%w: %s is %d, a sale without reservations, and this replica reserves (orders.payment_window): give every replica the same orders.payment_window, or reset the sale from one with it", stock.ErrSaleKind, key, n)
	}
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
// every key of a sale shares its hash tag), and refuses a newer format
// and, when kind is set, a sale of the other kind (checkKind). A missing
// epoch reads as "".
func (s *Store) readEpoch(ctx context.Context, kind bool) (string, error) {
	vals, err := s.rdb.MGet(ctx, s.keys.Epoch, s.keys.Format).Result()
	if err != nil {
		return "", WrapRedis(ctx, "read epoch", err)
	}
	epoch, _ := vals[0].(string)
	format, _ := vals[1].(string)
	if err := checkFormat(s.keys.Format, format); err != nil || !kind {
		return epoch, err
	}
	return epoch, s.checkKind(s.keys.Format, format)
}

// Reserving reports whether the sale in Redis is one with reservations
// (sale format 2, whoever reset it): a reader that holds no setting of its
// own, the dashboard, asks before it reads the census.
func (s *Store) Reserving(ctx context.Context) (bool, error) {
	v, err := s.rdb.Get(ctx, s.keys.Format).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, WrapRedis(ctx, "sale format", err)
	}
	return v == strconv.Itoa(saleFormatReturns), nil
}
