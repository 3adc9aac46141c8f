package stock

import (
	"context"
	"errors"
)

// Register is one durable compare-and-set cell outside the stock Redis:
// where the witness (witness.go) keeps its record of a sale, so that the
// record does not roll back when Redis does. Implementations (package
// witness: etcd, MySQL) store bytes and a version and nothing else; what
// the bytes mean, and how two writers' records merge, is the witness's.
type Register interface {
	// Name says where the register lives, for logs and GET /info
	// ("etcd /seckill/witness/stock").
	Name() string
	// Get returns the stored value and its version; version 0 and a nil
	// value when nothing is stored yet. Errors wrap ErrRegisterUnavailable
	// when the server did not answer.
	Get(ctx context.Context) (value []byte, version int64, err error)
	// Put stores value only if the stored version is still version (0:
	// only if nothing is stored), and returns the version it now has, or 0
	// when it was refused (another writer's came first). A Put whose
	// answer was lost may have been stored: the caller reads again.
	Put(ctx context.Context, value []byte, version int64) (newVersion int64, err error)
}

// ErrRegisterUnavailable: the register's server did not answer.
var ErrRegisterUnavailable = errors.New("stock: witness register unavailable")
