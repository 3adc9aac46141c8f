package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// claims.go: the token's JSON read exactly, before the library reads it.
// jwt.RegisteredClaims is filled by encoding/json, which matches names
// without case (under Unicode folding: "SUB", "Sub" and "ſub" with a long
// s all fill Subject) and lets the last of two equal names win. A token
// that says sub twice, or "sub" and "SUB", means one buyer to this
// service and maybe another to the next reader (a gateway, an audit
// tool); so it means nothing, and is refused.

// Registered names, compared exactly: JWS header parameters (RFC 7515
// §4.1) and JWT claims (RFC 7519 §4.1).
var (
	headerNames = []string{"alg", "jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256", "typ", "cty", "crit"}
	claimNames  = []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti"}
)

// checkJSON refuses a token whose header or payload is not one JSON
// object with distinct, exactly spelled names and registered claims of
// their RFC 7519 types, or that lacks iss, aud or exp. Its errors are the
// reasons a client is told. The signature is not its business.
func checkJSON(token string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("malformed token")
	}
	header, err := members("header", parts[0], headerNames, checkHeader)
	if err != nil {
		return err
	}
	if _, ok := header["alg"]; !ok {
		return errors.New("malformed token: the header has no alg")
	}
	claims, err := members("claim", parts[1], claimNames, checkClaim)
	if err != nil {
		return err
	}
	for _, name := range []string{"iss", "aud", "exp"} {
		if _, ok := claims[name]; !ok {
			return fmt.Errorf("the token has no %s", name)
		}
	}
	return nil
}

// members walks the top-level object of the base64url segment seg, kind
// naming it in reasons, checks each registered member's value with
// check, and returns the names it holds.
func members(kind, seg string, registered []string, check func(name string, v json.RawMessage) error) (map[string]bool, error) {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return nil, fmt.Errorf("malformed token: the %s is not base64url", kind)
	}
	notJSON := fmt.Errorf("malformed token: the %s is not one JSON object", kind)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, notJSON
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, notJSON
		}
		name := t.(string) // json.Decoder yields object keys as strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, notJSON
		}
		if seen[name] {
			return nil, fmt.Errorf("duplicate %s %q", kind, name)
		}
		seen[name] = true
		for _, r := range registered {
			if name == r {
				if err := check(name, v); err != nil {
					return nil, err
				}
			} else if strings.EqualFold(name, r) {
				return nil, fmt.Errorf("%s %q is not %q: names are case-sensitive", kind, name, r)
			}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, notJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notJSON // trailing data, which the library would skip
	}
	return seen, nil
}

// checkHeader holds the header parameters the verifier reads to strings.
func checkHeader(name string, v json.RawMessage) error {
	switch name {
	case "alg", "kid", "typ", "cty":
		if _, ok := decode(v).(string); !ok {
			return fmt.Errorf("header %q must be a string", name)
		}
	}
	return nil
}

// checkClaim holds a registered claim to its RFC 7519 type.
func checkClaim(name string, v json.RawMessage) error {
	x := decode(v)
	switch name {
	case "iss", "sub", "jti":
		if _, ok := x.(string); !ok {
			return fmt.Errorf("claim %q must be a string", name)
		}
	case "aud":
		if _, ok := x.(string); ok {
			return nil
		}
		many, ok := x.([]any)
		for _, a := range many {
			if _, s := a.(string); !s {
				ok = false
			}
		}
		if !ok {
			return fmt.Errorf("claim %q must be a string or an array of strings", name)
		}
		if len(many) == 0 {
			return errors.New("the token has no aud")
		}
	case "exp", "nbf", "iat":
		// A NumericDate in whole seconds: "123" (a string) and 1.5 are
		// read differently by different libraries, so by none here.
		n, ok := x.(json.Number)
		if _, err := strconv.ParseInt(n.String(), 10, 64); !ok || err != nil {
			return fmt.Errorf("claim %q must be a NumericDate (integer seconds)", name)
		}
	}
	return nil
}

// decode is v as encoding/json reads it into an interface, numbers kept
// as json.Number; nil for null (v was decoded once already).
func decode(v json.RawMessage) any {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	_ = d.Decode(&x)
	return x
}
