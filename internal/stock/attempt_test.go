package stock_test

import (
	"math/bits"
	"slices"
	"testing"

	"seckill/internal/stock"
)

// Order ids are attempt ids, public in every answer: from one, no other
// may be guessed. 10,000 ids: all distinct and of one length, sorted by
// the time they were made, and any two made in a row differ in about half
// of their 96 random bits (a counter would differ in one or two).
func TestAttemptIDsUnguessable(t *testing.T) {
	const n = 10000
	ids := make([]string, n)
	seen := make(map[string]bool, n)
	for i := range ids {
		ids[i] = stock.NewAttemptID()
		if len(ids[i]) != stock.AttemptIDLen || seen[ids[i]] {
			t.Fatalf("id %d %q: length %d (want %d), seen before %v", i, ids[i], len(ids[i]), stock.AttemptIDLen, seen[ids[i]])
		}
		seen[ids[i]] = true
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	// The first 9 characters are 45 bits of the time alone.
	if sorted[0][:9] != ids[0][:9] || sorted[n-1][:9] != ids[n-1][:9] {
		t.Fatalf("ids do not sort by time: first made %q, first sorted %q", ids[0], sorted[0])
	}
	closest := 96
	for i := 1; i < n; i++ {
		closest = min(closest, randomBitsDiffer(t, ids[i-1], ids[i]))
	}
	// Two random 96-bit values differ in 16 bits or fewer with p ~ 1e-11.
	if closest < 16 {
		t.Fatalf("two ids made in a row share all but %d of their random bits", closest)
	}
}

// randomBitsDiffer counts the bits in which a's and b's random parts
// (after the 48-bit time) differ.
func randomBitsDiffer(t *testing.T, a, b string) int {
	t.Helper()
	const alphabet = "0123456789abcdefghijklmnopqrstuv"
	decode := func(s string) []byte {
		var out []byte
		var acc, nbits uint
		for i := 0; i < len(s); i++ {
			v := slices.Index([]byte(alphabet), s[i])
			if v < 0 {
				t.Fatalf("id %q: %q is not base32hex", s, s[i])
			}
			acc, nbits = acc<<5|uint(v), nbits+5
			if nbits >= 8 {
				out = append(out, byte(acc>>(nbits-8)))
				nbits -= 8
			}
		}
		return out
	}
	x, y := decode(a), decode(b)
	diff := 0
	for i := 6; i < len(x) && i < len(y); i++ {
		diff += bits.OnesCount8(x[i] ^ y[i])
	}
	return diff
}
