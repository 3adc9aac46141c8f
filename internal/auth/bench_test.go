package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/auth"
)

// What verifying a buyer's token costs a sale, per algorithm: the one
// cost the auth modes add to POST /stock/reduce (run side by side with
// -bench Verify -benchtime 3s -count 3 and compare).
func BenchmarkVerify(b *testing.B) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keys := auth.KeySetOf(&rsaKey.PublicKey, &ecKey.PublicKey)
	v, err := auth.NewVerifier(auth.JWT{Secret: secret, Keys: keys, Issuer: "shop", Audience: "seckill"})
	if err != nil {
		b.Fatal(err)
	}
	c := claims("bob", time.Hour)
	for _, tc := range []struct {
		name string
		m    jwt.SigningMethod
		key  any
	}{
		{"HS256", jwt.SigningMethodHS256, secret},
		{"RS256", jwt.SigningMethodRS256, rsaKey},
		{"ES256", jwt.SigningMethodES256, ecKey},
	} {
		tok := sign(b, tc.m, c, tc.key, "")
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Buyer(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
