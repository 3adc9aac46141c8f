package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/auth"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func claims(sub string, exp time.Duration) jwt.RegisteredClaims {
	now := time.Now()
	return jwt.RegisteredClaims{Issuer: "shop", Audience: jwt.ClaimStrings{"seckill"}, Subject: sub,
		NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(exp))}
}

func sign(t testing.TB, m jwt.SigningMethod, c jwt.Claims, key any, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every kind of bad token is refused, each with its reason; a good one
// names its sub.
func TestVerifier(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	b64 := base64.RawURLEncoding.EncodeToString
	ecPub, _ := ecKey.PublicKey.Bytes() // 0x04 || X || Y
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "EC", "crv": "P-256", "kid": "ec1", "x": b64(ecPub[1:33]), "y": b64(ecPub[33:])},
	}})
	rsaKeys, err := auth.LoadKeys(writeFile(t, "rsa.pem", rsaPEM))
	if err != nil {
		t.Fatal(err)
	}
	ecKeys, err := auth.LoadKeys(writeFile(t, "jwks.json", jwks))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := auth.NewVerifier(auth.JWT{Secret: secret, Issuer: "shop", Audience: "seckill", Leeway: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Both: a secret and an RSA key, where algorithm confusion could bite.
	both, err := auth.NewVerifier(auth.JWT{Secret: secret, Keys: rsaKeys, Issuer: "shop", Audience: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := auth.NewVerifier(auth.JWT{Keys: rsaKeys, Issuer: "shop", Audience: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	es, err := auth.NewVerifier(auth.JWT{Keys: ecKeys, Issuer: "shop", Audience: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	good := claims("bob", time.Minute)
	expired := claims("bob", -time.Minute)
	early := claims("bob", time.Hour)
	early.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour))
	wrongAud := claims("bob", time.Minute)
	wrongAud.Audience = jwt.ClaimStrings{"other"}
	wrongIss := claims("bob", time.Minute)
	wrongIss.Issuer = "evil"
	noExp := claims("bob", time.Minute)
	noExp.ExpiresAt = nil
	noSub := claims("", time.Minute)
	skewed := claims("bob", -2*time.Second) // expired, but within the leeway
	none := sign(t, jwt.SigningMethodNone, good, jwt.UnsafeAllowNoneSignatureType, "")

	for _, tc := range []struct {
		name, token string
		v           *auth.Verifier
		want        string // the sub, or the reason's text
	}{
		{"HS256", sign(t, jwt.SigningMethodHS256, good, secret, ""), hs, "bob"},
		{"HS256 within the leeway", sign(t, jwt.SigningMethodHS256, skewed, secret, ""), hs, "bob"},
		{"RS256 from PEM", sign(t, jwt.SigningMethodRS256, good, rsaKey, ""), rs, "bob"},
		{"RS256 beside a secret", sign(t, jwt.SigningMethodRS256, good, rsaKey, ""), both, "bob"},
		{"ES256 from JWKS by kid", sign(t, jwt.SigningMethodES256, good, ecKey, "ec1"), es, "bob"},
		{"expired", sign(t, jwt.SigningMethodHS256, expired, secret, ""), hs, "token expired"},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, early, secret, ""), hs, "not valid yet"},
		{"wrong audience", sign(t, jwt.SigningMethodHS256, wrongAud, secret, ""), hs, "wrong audience"},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, wrongIss, secret, ""), hs, "wrong issuer"},
		{"no exp", sign(t, jwt.SigningMethodHS256, noExp, secret, ""), hs, "no exp"},
		{"no sub", sign(t, jwt.SigningMethodHS256, noSub, secret, ""), hs, "no sub"},
		{"forged: another secret", sign(t, jwt.SigningMethodHS256, good, []byte(strings.Repeat("x", 32)), ""), hs, "bad signature"},
		{"forged: another RSA key", sign(t, jwt.SigningMethodRS256, good, otherRSA, ""), rs, "bad signature"},
		{"alg none", none, hs, "algorithm not accepted"},
		{"alg none, key verifier", none, rs, "algorithm not accepted"},
		{"HS256 signed with the RSA public key", sign(t, jwt.SigningMethodHS256, good, rsaPEM, ""), rs, "algorithm not accepted"},
		{"HS256 signed with the RSA public key, secret too", sign(t, jwt.SigningMethodHS256, good, rsaPEM, ""), both, "bad signature"},
		{"ES256 with an unknown kid", sign(t, jwt.SigningMethodES256, good, ecKey, "ec9"), es, "unverifiable"},
		{"RS256 at an ES256 verifier", sign(t, jwt.SigningMethodRS256, good, rsaKey, ""), es, "algorithm not accepted"},
		{"garbage", "not.a.token", hs, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := tc.v.Buyer(tc.token)
			if tc.want == "bob" {
				if err != nil || sub != "bob" {
					t.Fatalf("got %q, %v; want bob", sub, err)
				}
				return
			}
			if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) || sub != "" {
				t.Fatalf("got %q, %v; want ErrUnauthenticated saying %q", sub, err, tc.want)
			}
		})
	}
}

// A verifier that could be fooled is refused at start.
func TestNewVerifierRefuses(t *testing.T) {
	for name, cfg := range map[string]auth.JWT{
		"no key":       {Issuer: "shop", Audience: "seckill"},
		"short secret": {Secret: []byte("short"), Issuer: "shop", Audience: "seckill"},
		"no issuer":    {Secret: secret, Audience: "seckill"},
		"no audience":  {Secret: secret, Issuer: "shop"},
		"long leeway":  {Secret: secret, Issuer: "shop", Audience: "seckill", Leeway: time.Hour},
	} {
		if _, err := auth.NewVerifier(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	der, _ := x509.MarshalPKIXPublicKey(&small.PublicKey)
	if _, err := auth.LoadKeys(writeFile(t, "small.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))); err == nil {
		t.Error("a 1024-bit RSA key: accepted")
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)})
	if _, err := auth.LoadKeys(writeFile(t, "priv.pem", priv)); err == nil || !strings.Contains(err.Error(), "private") {
		t.Errorf("a private key: got %v, want a refusal naming it", err)
	}
}

// The buyer comes from a verified token or a trusted proxy's header,
// never from a header any client can write.
func TestIdentity(t *testing.T) {
	v, err := auth.NewVerifier(auth.JWT{Secret: secret, Issuer: "shop", Audience: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	proxies, err := auth.ParseProxies([]string{"10.0.0.0/8", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	m := auth.NewMinter(secret, "shop", "seckill", time.Minute)
	jwtID := &auth.Identity{Mode: auth.ModeJWT, Verifier: v}
	required := &auth.Identity{Mode: auth.ModeJWT, Verifier: v, Required: true}
	proxy := &auth.Identity{Mode: auth.ModeProxy, Proxies: proxies}
	none := &auth.Identity{Mode: auth.ModeNone}
	for _, tc := range []struct {
		name   string
		id     *auth.Identity
		remote string
		hdr    map[string]string
		want   string // the buyer; "!" for a refusal
	}{
		{"jwt: a token", jwtID, "203.0.113.1:1", map[string]string{"Authorization": "Bearer " + m.Token("bob")}, "bob"},
		{"jwt: lower-case scheme", jwtID, "203.0.113.1:1", map[string]string{"Authorization": "bearer " + m.Token("bob")}, "bob"},
		{"jwt: anonymous", jwtID, "203.0.113.1:1", nil, ""},
		{"jwt: X-User", jwtID, "203.0.113.1:1", map[string]string{"X-User": "bob"}, "!"},
		{"jwt: a token and X-User", jwtID, "203.0.113.1:1", map[string]string{"Authorization": "Bearer " + m.Token("bob"), "X-User": "eve"}, "!"},
		{"jwt required: anonymous", required, "203.0.113.1:1", nil, "!"},
		{"jwt required: a token", required, "203.0.113.1:1", map[string]string{"Authorization": "Bearer " + m.Token("bob")}, "bob"},
		{"proxy: trusted CIDR", proxy, "10.1.2.3:80", map[string]string{"X-User": "bob"}, "bob"},
		{"proxy: trusted address", proxy, "192.0.2.7:80", map[string]string{"X-User": "bob"}, "bob"},
		{"proxy: untrusted", proxy, "192.0.2.8:80", map[string]string{"X-User": "bob"}, "!"},
		{"proxy: untrusted, X-Forwarded-For a trusted one", proxy, "192.0.2.8:80", map[string]string{"X-User": "bob", "X-Forwarded-For": "10.0.0.1"}, "!"},
		{"proxy: a token", proxy, "10.1.2.3:80", map[string]string{"Authorization": "Bearer " + m.Token("bob")}, "!"},
		{"proxy: anonymous", proxy, "192.0.2.8:80", nil, ""},
		{"none: X-User", none, "10.1.2.3:80", map[string]string{"X-User": "bob"}, "!"},
		{"none: a token", none, "10.1.2.3:80", map[string]string{"Authorization": "Bearer " + m.Token("bob")}, "!"},
		{"none: anonymous", none, "10.1.2.3:80", nil, ""},
		// A malformed Authorization header is refused in every mode, as a
		// well-formed one is where it names no buyer: never ignored.
		{"none: Basic", none, "10.1.2.3:80", map[string]string{"Authorization": "Basic eHl6"}, "!"},
		{"proxy: Basic", proxy, "10.1.2.3:80", map[string]string{"Authorization": "Basic eHl6", "X-User": "bob"}, "!"},
		{"jwt: a tab after Bearer", jwtID, "203.0.113.1:1", map[string]string{"Authorization": "Bearer\t" + m.Token("bob")}, "!"},
		{"jwt: the Token scheme", jwtID, "203.0.113.1:1", map[string]string{"Authorization": "Token " + m.Token("bob")}, "!"},
		{"jwt: Bearer and no token", jwtID, "203.0.113.1:1", map[string]string{"Authorization": "Bearer "}, "!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/stock/reduce", nil)
			r.RemoteAddr = tc.remote
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			got, err := tc.id.Buyer(r)
			if tc.want == "!" {
				if !errors.Is(err, auth.ErrUnauthenticated) || got != "" {
					t.Fatalf("got %q, %v; want a refusal", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
