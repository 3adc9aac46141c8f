package stock

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"strconv"
	"strings"
	"time"
)

// Attempt ids name one sale: its lease in the fence, its receipt and, once
// it sold, its order. They must never repeat across processes or restarts,
// or a retry could be taken for another sale's; and since an order id is
// one, they must not be guessable from another: a buyer holding order N
// must not find order N-1 (ids are public in answers, and receipts are
// read by id). So an id is 96 random bits after the time in milliseconds,
// the layout of a ULID with a wider random part: unique without
// coordination, sortable by time between milliseconds.
const attemptRandomBytes = 12

// attemptEncoding is base32hex in lower case: its alphabet is in ASCII
// order, so ids sort as their bytes do.
var attemptEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// AttemptIDLen is the length of every id NewAttemptID returns.
var AttemptIDLen = attemptEncoding.EncodedLen(6 + attemptRandomBytes)

// NewAttemptID returns a fresh id for one sale attempt.
func NewAttemptID() string {
	var b [6 + attemptRandomBytes]byte
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ms[2:])
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails on supported platforms
	return attemptEncoding.EncodeToString(b[:])
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

// SplitMemberAttempt parses a member's attempt id into its batch and index;
// ok is false for any other id.
func SplitMemberAttempt(id string) (batch string, i int, ok bool) {
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
