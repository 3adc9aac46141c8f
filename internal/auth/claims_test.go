package auth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"seckill/internal/auth"
)

// rawHS256 signs header and payload as written, byte for byte: what
// jwt.NewWithClaims cannot make (twin names, wrong types).
func rawHS256(header, payload string) string {
	b64 := base64.RawURLEncoding.EncodeToString
	signing := b64([]byte(header)) + "." + b64([]byte(payload))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signing))
	return signing + "." + b64(mac.Sum(nil))
}

// A token's JSON is read exactly: a name twice, a registered name in
// another case (encoding/json would let "SUB" or "ſub" fill sub), or a
// registered claim of the wrong type is refused with its reason, though
// the signature is good; the claims the verifier needs are named when
// missing.
func TestVerifierReadsClaimsExactly(t *testing.T) {
	v, err := auth.NewVerifier(auth.JWT{Secret: secret, Issuer: "shop", Audience: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	const hdr = `{"alg":"HS256","typ":"JWT"}`
	// rest are the claims of a good token after sub's.
	rest := fmt.Sprintf(`"iss":"shop","aud":"seckill","exp":%d`, exp)
	for _, tc := range []struct {
		name, header, payload string
		want                  string // the sub, or the whole refusal
	}{
		{"valid", hdr, `{"sub":"bob",` + rest + `}`, "bob"},
		{"valid: aud a string, iat, nbf, nested objects",
			hdr, fmt.Sprintf(`{"sub":"bob","iss":"shop","aud":"seckill","exp":%d,"iat":1,"nbf":1,"x":{"sub":"eve","sub":"eve"}}`, exp), "bob"},
		{"valid: a kid", `{"alg":"HS256","kid":"k1"}`, `{"sub":"bob",` + rest + `}`, "bob"},

		{"sub and SUB", hdr, `{"sub":"victim","SUB":"attacker",` + rest + `}`, `claim "SUB" is not "sub": names are case-sensitive`},
		{"long s", hdr, `{"ſub":"x",` + rest + `}`, `claim "ſub" is not "sub": names are case-sensitive`},
		{"long s, escaped", hdr, `{"\u017fub":"x",` + rest + `}`, `claim "ſub" is not "sub": names are case-sensitive`},
		{"Sub alone", hdr, `{"Sub":"x",` + rest + `}`, `claim "Sub" is not "sub": names are case-sensitive`},
		{"exp and Exp", hdr, fmt.Sprintf(`{"sub":"bob","iss":"shop","aud":"seckill","exp":1,"Exp":%d}`, exp), `claim "Exp" is not "exp": names are case-sensitive`},
		{"iss and Iss", hdr, fmt.Sprintf(`{"sub":"bob","iss":"other","Iss":"shop","aud":"seckill","exp":%d}`, exp), `claim "Iss" is not "iss": names are case-sensitive`},
		{"AUD", hdr, fmt.Sprintf(`{"sub":"bob","iss":"shop","aud":"seckill","AUD":"other","exp":%d}`, exp), `claim "AUD" is not "aud": names are case-sensitive`},
		{"sub twice", hdr, `{"sub":"a","sub":"b",` + rest + `}`, `duplicate claim "sub"`},
		{"sub twice, one escaped", hdr, `{"sub":"a","s\u0075b":"b",` + rest + `}`, `duplicate claim "sub"`},
		{"exp a string", hdr, fmt.Sprintf(`{"sub":"bob","iss":"shop","aud":"seckill","exp":"%d"}`, exp), `claim "exp" must be a NumericDate (integer seconds)`},
		{"exp a float", hdr, `{"sub":"bob","iss":"shop","aud":"seckill","exp":1.5}`, `claim "exp" must be a NumericDate (integer seconds)`},
		{"exp null", hdr, `{"sub":"bob","iss":"shop","aud":"seckill","exp":null}`, `claim "exp" must be a NumericDate (integer seconds)`},
		{"nbf a float", hdr, fmt.Sprintf(`{"sub":"bob",%s,"nbf":1.5}`, rest), `claim "nbf" must be a NumericDate (integer seconds)`},
		{"iss a number", hdr, fmt.Sprintf(`{"sub":"bob","iss":7,"aud":"seckill","exp":%d}`, exp), `claim "iss" must be a string`},
		{"sub null", hdr, `{"sub":null,` + rest + `}`, `claim "sub" must be a string`},
		{"aud of numbers", hdr, fmt.Sprintf(`{"sub":"bob","iss":"shop","aud":[1],"exp":%d}`, exp), `claim "aud" must be a string or an array of strings`},
		{"no iss", hdr, fmt.Sprintf(`{"sub":"bob","aud":"seckill","exp":%d}`, exp), "the token has no iss"},
		{"no aud", hdr, fmt.Sprintf(`{"sub":"bob","iss":"shop","exp":%d}`, exp), "the token has no aud"},
		{"aud empty", hdr, fmt.Sprintf(`{"sub":"bob","iss":"shop","aud":[],"exp":%d}`, exp), "the token has no aud"},
		{"no exp", hdr, `{"sub":"bob","iss":"shop","aud":"seckill"}`, "the token has no exp"},
		{"trailing JSON", hdr, `{"sub":"bob",` + rest + `}{"sub":"eve"}`, "malformed token: the claim is not one JSON object"},
		{"payload an array", hdr, `["sub"]`, "malformed token: the claim is not one JSON object"},

		{"alg and ALG", `{"alg":"HS256","ALG":"none"}`, `{"sub":"bob",` + rest + `}`, `header "ALG" is not "alg": names are case-sensitive`},
		{"alg twice", `{"alg":"none","alg":"HS256"}`, `{"sub":"bob",` + rest + `}`, `duplicate header "alg"`},
		{"KID", `{"alg":"HS256","KID":"k1"}`, `{"sub":"bob",` + rest + `}`, `header "KID" is not "kid": names are case-sensitive`},
		{"Typ", `{"alg":"HS256","Typ":"JWT"}`, `{"sub":"bob",` + rest + `}`, `header "Typ" is not "typ": names are case-sensitive`},
		{"kid a number", `{"alg":"HS256","kid":1}`, `{"sub":"bob",` + rest + `}`, `header "kid" must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := v.Buyer(rawHS256(tc.header, tc.payload))
			if tc.want == "bob" {
				if err != nil || sub != "bob" {
					t.Fatalf("got %q, %v; want bob", sub, err)
				}
				return
			}
			want := auth.ErrUnauthenticated.Error() + ": " + tc.want
			if !errors.Is(err, auth.ErrUnauthenticated) || err.Error() != want || sub != "" {
				t.Fatalf("got %q, %v; want ErrUnauthenticated: %q", sub, err, want)
			}
		})
	}
}
