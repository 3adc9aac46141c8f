package auth

import (
	"crypto/rand"
	"encoding/hex"
	"math"
	"strings"
	"unicode/utf8"
)

// MinSecretBits is the least strength a shared secret (the admin token,
// an HS256 secret) is accepted with, by SecretBits. It is 128 bits less
// the two hex digits of structure (a run, a repeat) that a random string
// shows now and then by chance: 32 random hex digits (openssl rand -hex
// 16) pass but for about 1 in 60,000 (measured: 32 of 2,000,000, with a
// longer run or more repeats than that; stockd's refusal says to make
// another), 43 random base64 characters (openssl rand -base64 32) pass;
// a secret made to be remembered does not.
const MinSecretBits = 120

// NewSecret returns a strong secret: 32 random bytes, hex (256 bits). The
// lab's harnesses make their admin tokens and JWT secrets so.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// placeholders are the words a made-up secret is made of: what examples
// and other tools' defaults say, so what is guessed first.
var placeholders = []string{
	"changeme", "changeit", "change", "replace", "password", "passwd", "secret", "admin", "token",
	"default", "example", "test", "todo", "please", "your", "here", "letmein", "qwerty", "welcome",
	"master", "super", "root", "user", "login", "random", "something", "string", "value",
	"seckill", "compose", "stockd", "flash", "sale", "shop", "production", "prod", "stage", "local",
	"demo", "lab", "jwt", "key", "not", "for", "the", "and", "only", "never", "this", "that",
}

// SecretBits estimates the strength of secret s in bits, as if each of
// its characters were drawn at random from the classes it uses (hex
// digits 16; digits 10; lower-case, upper-case letters 26 each; other
// ASCII 33; anything else 128), minus the characters that follow from
// those before: the 5th and later of a run ("aaaaa") or a sequence
// ("abcde", "54321"), each character that ends a 4-character repeat of
// earlier text ("changeme-changeme"), and all but the first of a
// placeholder word ("changeme", "secret", ...). It is an estimate of an
// upper bound: it cannot see that a random-looking string was typed by a
// person, only what makes one guessable at a glance.
func SecretBits(s string) float64 {
	rs := []rune(s)
	if len(rs) == 0 {
		return 0
	}
	free := make([]bool, len(rs)) // follows from what came before
	for i := 3; i < len(rs); i++ {
		if d := rs[i] - rs[i-1]; i >= 4 && d >= -1 && d <= 1 &&
			rs[i-1]-rs[i-2] == d && rs[i-2]-rs[i-3] == d && rs[i-3]-rs[i-4] == d {
			free[i] = true // a run (d 0) or a sequence (d ±1)
		}
		if strings.Contains(string(rs[:i]), string(rs[i-3:i+1])) {
			free[i] = true // repeats earlier text
		}
	}
	lower := []rune(strings.ToLower(s))
	if len(lower) == len(rs) {
		for _, w := range placeholders {
			ww := []rune(w)
			for i := 0; i+len(ww) <= len(lower); i++ {
				if string(lower[i:i+len(ww)]) == w {
					for j := i + 1; j < i+len(ww); j++ {
						free[j] = true
					}
				}
			}
		}
	}
	n := 0
	for _, f := range free {
		if !f {
			n++
		}
	}
	return float64(n) * math.Log2(float64(alphabet(s)))
}

// alphabet is the size of the character classes s draws from.
func alphabet(s string) int {
	var digit, lowerHex, upperHex, lower, upper, other, wide bool
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r >= 'a' && r <= 'f':
			lowerHex = true
		case r >= 'A' && r <= 'F':
			upperHex = true
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r < utf8.RuneSelf:
			other = true
		default:
			wide = true
		}
	}
	if !lower && !upper && !other && !wide && (lowerHex != upperHex) {
		return 16 // hex, one case
	}
	n := 0
	for _, c := range []struct {
		used bool
		size int
	}{{digit, 10}, {lowerHex || lower, 26}, {upperHex || upper, 26}, {other, 33}, {wide, 128}} {
		if c.used {
			n += c.size
		}
	}
	return max(n, 1)
}
