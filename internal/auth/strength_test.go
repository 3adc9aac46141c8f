package auth_test

import (
	"encoding/base64"
	"encoding/hex"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"seckill/internal/auth"
)

func TestSecretBits(t *testing.T) {
	for _, tc := range []struct {
		secret string
		strong bool
	}{
		{"changeme-changeme", false},
		{strings.Repeat("a", 32), false},
		{"aaaaaaaaaaaaaaaa", false},
		{"seckill-compose-lab", false},
		{"seckill-compose-lab-jwt-secret-not-for-production", false},
		{"0123456789abcdef0123456789abcdef", false}, // a sequence, then a repeat
		{"abcdefghijklmnopqrstuvwxyz012345", false},
		{"s3cret-token-2b7f", false},
		{strings.Repeat("Xy7!", 16), false},
		{"PleaseChangeMeToSomethingRandom1234", false},
		{"3f9c2a71e0b84d5f96c13a8e7b2d4f60", true},            // 32 hex digits: 128 bits
		{"3F9C2A71E0B84D5F96C13A8E7B2D4F60", true},            // the same, upper case
		{"q8Z0m1vKx3LtR9bNw2Yc5HsD7gJf4PeA_u-6iOkTnVo", true}, // 43 base64url characters: 256 bits
	} {
		bits := auth.SecretBits(tc.secret)
		if got := bits >= auth.MinSecretBits; got != tc.strong {
			t.Errorf("SecretBits(%q) = %.0f: strong %v, want %v (min %d)", tc.secret, bits, got, tc.strong, auth.MinSecretBits)
		}
	}
}

// Random secrets of the sizes the docs advise pass: a chance run or
// repeat must not refuse what openssl rand made. The bytes come from a
// fixed seed, so the test says the same every run: from crypto/rand, 32
// of 2,000,000 random 32-hex-digit secrets scored below MinSecretBits (a
// seven-digit run, or a run and a repeat), which made this test fail
// about one run in fifty when it drew 1,000 of them afresh each time.
func TestSecretBitsRandom(t *testing.T) {
	src := mrand.NewChaCha8([32]byte{'s', 'e', 'c', 'k', 'i', 'l', 'l'})
	for range 1000 {
		b := make([]byte, 32)
		_, _ = src.Read(b)
		for _, s := range []string{hex.EncodeToString(b[:16]), strings.ToUpper(hex.EncodeToString(b[:16])), base64.RawURLEncoding.EncodeToString(b), base64.StdEncoding.EncodeToString(b), hex.EncodeToString(b)} {
			if bits := auth.SecretBits(s); bits < auth.MinSecretBits {
				t.Fatalf("random %q: %.0f bits, want at least %d", s, bits, auth.MinSecretBits)
			}
		}
	}
}
