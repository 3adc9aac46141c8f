package stockd

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/auth"
	"seckill/internal/stockd/stockdtest"
)

var testJWTSecret = stockdtest.JWTSecret

const (
	testIssuer   = "shop"
	testAudience = "seckill"
)

// jwtEnv runs stockd with buyers from HS256 tokens and, when keysPath is
// set, RS256 ones too; buyers must be named, and buy one unit each.
func jwtEnv(keysPath string) []string {
	env := []string{
		"STOCKD_AUTH_BUYERS=jwt", "STOCKD_AUTH_REQUIRED=true",
		"STOCKD_AUTH_JWT_SECRET=" + testJWTSecret,
		"STOCKD_AUTH_JWT_ISSUER=" + testIssuer, "STOCKD_AUTH_JWT_AUDIENCE=" + testAudience,
		"STOCKD_STOCK_PER_USER_LIMIT=1",
	}
	if keysPath != "" {
		env = append(env, "STOCKD_AUTH_JWT_KEYS="+keysPath)
	}
	return env
}

func tokenFor(t *testing.T, m jwt.SigningMethod, key any, edit func(*jwt.RegisteredClaims)) string {
	t.Helper()
	now := time.Now()
	c := jwt.RegisteredClaims{Issuer: testIssuer, Audience: jwt.ClaimStrings{testAudience}, Subject: "mallory",
		NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute))}
	if edit != nil {
		edit(&c)
	}
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every token an attacker can make without the keys is a 401 that sells
// nothing, on the real binary: forged, expired, for another audience or
// issuer, unsigned (alg none), signed by another key, and HS256 signed
// with the server's own RSA public key (algorithm confusion).
func TestBadTokensSellNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	keys := filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(keys, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startStockd(t, jwtEnv(keys)...)
	base := "http://" + p.Addr()
	if code, _, body := stockdCall(t, base, "POST", "/stock/reset"); code != 200 {
		t.Fatalf("reset: %d %v", code, body)
	}
	secret := []byte(testJWTSecret)
	for name, tok := range map[string]string{
		"forged":          tokenFor(t, jwt.SigningMethodHS256, []byte(strings.Repeat("g", 40)), nil),
		"expired":         tokenFor(t, jwt.SigningMethodHS256, secret, func(c *jwt.RegisteredClaims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour)) }),
		"wrong audience":  tokenFor(t, jwt.SigningMethodHS256, secret, func(c *jwt.RegisteredClaims) { c.Audience = jwt.ClaimStrings{"other"} }),
		"wrong issuer":    tokenFor(t, jwt.SigningMethodHS256, secret, func(c *jwt.RegisteredClaims) { c.Issuer = "evil" }),
		"alg none":        tokenFor(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil),
		"wrong RSA key":   tokenFor(t, jwt.SigningMethodRS256, otherKey, nil),
		"alg confusion":   tokenFor(t, jwt.SigningMethodHS256, pubPEM, nil),
		"not a token":     "hello",
		"no exp":          tokenFor(t, jwt.SigningMethodHS256, secret, func(c *jwt.RegisteredClaims) { c.ExpiresAt = nil }),
		"not valid yet":   tokenFor(t, jwt.SigningMethodHS256, secret, func(c *jwt.RegisteredClaims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour)) }),
		"an empty bearer": "",
	} {
		code, hdr, body := stockdCall(t, base, "POST", "/stock/reduce", "Authorization", "Bearer "+tok)
		if code != 401 || body["error"] == nil || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: got %d %v, want 401 with a reason and WWW-Authenticate", name, code, body)
		}
	}
	if code, _, body := stockdCall(t, base, "GET", "/stock"); code != 200 || body["stock"] != 5.0 || body["lucky"] != 0.0 {
		t.Fatalf("after the bad tokens: got %d %v, want stock 5, lucky 0", code, body)
	}
	// The good ones, both kinds, do sell.
	for _, tok := range []string{
		tokenFor(t, jwt.SigningMethodHS256, secret, nil),
		tokenFor(t, jwt.SigningMethodRS256, rsaKey, func(c *jwt.RegisteredClaims) { c.Subject = "rita" }),
	} {
		if code, _, body := stockdCall(t, base, "POST", "/stock/reduce", "Authorization", "Bearer "+tok); code != 200 {
			t.Fatalf("a good token: got %d %v, want 200", code, body)
		}
	}
}

// Buyers are who their tokens say: B cannot read A's order, replay A's
// key or list A's orders; the per-user limit holds against a client that
// varies every header it controls; an anonymous purchase is a 401.
func TestBuyersAreWhoTheySay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	p := startStockd(t, jwtEnv("")...)
	base := "http://" + p.Addr()
	if code, _, body := stockdCall(t, base, "POST", "/stock/reset"); code != 200 {
		t.Fatalf("reset: %d %v", code, body)
	}
	mint := auth.NewMinter([]byte(testJWTSecret), testIssuer, testAudience, time.Minute)
	// call is a buyer's request: no admin token (stockdCall's is
	// overridden by an empty one).
	call := func(method, path string, headers ...string) (int, map[string]any) {
		code, _, body := stockdCall(t, base, method, path, append([]string{"X-Admin-Token", ""}, headers...)...)
		return code, body
	}
	bearer := func(user string) []string { return []string{"Authorization", "Bearer " + mint.Token(user)} }

	if code, body := call("POST", "/stock/reduce"); code != 401 {
		t.Fatalf("anonymous: got %d %v, want 401 (auth.required)", code, body)
	}
	code, sold := call("POST", "/stock/reduce", append(bearer("alice"), "Idempotency-Key", "carol-order-1")...)
	order, _ := sold["order"].(string)
	if code != 200 || order == "" {
		t.Fatalf("alice: got %d %v, want 200 with an order", code, sold)
	}
	if code, body := call("GET", "/orders/"+order, bearer("alice")...); code != 200 || body["user"] != "alice" {
		t.Fatalf("alice reads her order: got %d %v", code, body)
	}
	if code, body := call("GET", "/orders/"+order, bearer("bob")...); code != 404 {
		t.Fatalf("bob reads alice's order: got %d %v, want 404", code, body)
	}
	if code, body := call("GET", "/orders/"+order); code != 404 {
		t.Fatalf("no one reads alice's order: got %d %v, want 404", code, body)
	}
	if code, body := call("GET", "/orders?user=alice", bearer("bob")...); code != 403 {
		t.Fatalf("bob lists alice's orders: got %d %v, want 403", code, body)
	}
	if code, body := call("GET", "/ledger", bearer("alice")...); code != 401 {
		t.Fatalf("a buyer reads the ledger: got %d %v, want 401", code, body)
	}
	// Alice's key from bob (key squatting, or a replay of her sale): his
	// own purchase, not hers.
	code, bobs := call("POST", "/stock/reduce", append(bearer("bob"), "Idempotency-Key", "carol-order-1")...)
	if code != 200 || bobs["order"] == order || bobs["replayed"] == true {
		t.Fatalf("bob with alice's key: got %d %v, want a sale of his own", code, bobs)
	}

	// Mallory varies every header she controls: she buys one unit.
	sales := 0
	for i := range 8 {
		hdr := append(bearer("mallory"),
			"X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i), "Idempotency-Key", fmt.Sprintf("m-%d", i))
		if i%2 == 1 {
			hdr = append(hdr, "X-User", fmt.Sprintf("mallory-%d", i)) // refused outright
		}
		if code, _ := call("POST", "/stock/reduce", hdr...); code == 200 {
			sales++
		}
	}
	if sales != 1 {
		t.Fatalf("mallory varying headers bought %d units, want 1 (per_user_limit)", sales)
	}
	if code, _, body := stockdCall(t, base, "GET", "/ledger"); code != 200 || body["orders"] != 3.0 || body["buyers"] != 3.0 {
		t.Fatalf("ledger (admin): got %d %v, want 3 orders by 3 buyers", code, body)
	}
}
