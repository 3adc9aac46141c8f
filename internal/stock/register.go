package stock

import (
	"context"
	"errors"
)

// Register is one durable compare-and-set cell outside the stock Redis:
// where the witness (witness.go) keeps its record of a sale, so that the
// record does not roll back when Redis does. Implementations (package
// witness: etcd, MySQL) store bytes and nothing else; what the bytes mean,
// and how two writers' records merge, is the witness's.
//
// The compare is on the bytes, not on a version the server counts: a
// restored backup takes such a counter back too (etcd's revisions, a
// MySQL column), so a writer holding a version from before the restore
// could meet it again on another record and overwrite what it never
// read. The witness's records carry a generation that rises with every
// write, so two different records never share their bytes, and a Put
// that matches is one made on exactly the record it read.
type Register interface {
	// Name says where the register lives, for logs and GET /info
	// ("etcd /seckill/witness/stock").
	Name() string
	// Get returns the stored value; nil when nothing is stored yet (an
	// empty value stored is a non-nil empty slice). Errors wrap
	// ErrRegisterUnavailable when the server did not answer.
	Get(ctx context.Context) (value []byte, err error)
	// Put stores value only if the stored value is still expect, byte for
	// byte (nil: only if nothing is stored), and reports whether it did
	// (false: another writer's came first). A Put whose answer was lost
	// may have been stored: the caller reads again.
	Put(ctx context.Context, value, expect []byte) (stored bool, err error)
}

// ErrRegisterUnavailable: the register's server did not answer.
var ErrRegisterUnavailable = errors.New("stock: witness register unavailable")
