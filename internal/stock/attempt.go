package stock

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
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

// A combined sale (ServiceConfig.Combine) makes one fenced write for a
// batch of buyers under one attempt id, the batch's; member i's own attempt
// id is the batch's with ".i" appended, and its receipt is read from the
// batch's (Store.Receipt). Attempt ids from NewAttemptID never hold a '.'.
const memberSep = "."

// MemberAttempt is the attempt id of member i of the combined sale batch.
func MemberAttempt(batch string, i int) string {
	return batch + memberSep + strconv.Itoa(i)
}

// splitMemberAttempt parses a member's attempt id into its batch and index;
// ok is false for any other id.
func splitMemberAttempt(id string) (batch string, i int, ok bool) {
	batch, idx, found := strings.Cut(id, memberSep)
	if !found {
		return id, 0, false
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 {
		return id, 0, false
	}
	return batch, n, true
}

// parseReceipt reads a receipt's value: "<stock after>" for a single sale,
// "<stock after the batch>:<units sold>" for a combined one.
func parseReceipt(v string) (after int64, units int, err error) {
	a, u, batch := strings.Cut(v, ":")
	if after, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, err
	}
	if !batch {
		return after, 1, nil
	}
	if units, err = strconv.Atoi(u); err != nil || units < 1 {
		return 0, 0, fmt.Errorf("bad units in receipt %q", v)
	}
	return after, units, nil
}
