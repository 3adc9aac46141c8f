package stock

import (
	"crypto/rand"
	"encoding/binary"
	"strconv"
	"sync/atomic"
)

// Attempt ids name one sale: its lease in the fence and its receipt. They
// must never repeat across processes or restarts, or a retry could be taken
// for another sale's; a random 64-bit process prefix and a counter do that
// at the cost of one atomic add per sale.
var (
	attemptPrefix = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
		return strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 36)
	}()
	attemptSeq atomic.Uint64
)

// NewAttemptID returns a fresh id for one sale attempt.
func NewAttemptID() string {
	return attemptPrefix + "-" + strconv.FormatUint(attemptSeq.Add(1), 36)
}
