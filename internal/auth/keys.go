package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
)

// KeySet holds the public keys tokens are verified with, some named by a
// kid.
type KeySet struct {
	keys []namedKey
}

type namedKey struct {
	kid string
	key any // *rsa.PublicKey or *ecdsa.PublicKey
}

func (s KeySet) has(ok func(any) bool) bool {
	for _, k := range s.keys {
		if ok(k.key) {
			return true
		}
	}
	return false
}

// find is the key named kid of the wanted kind; a token without a kid
// gets the only key of that kind, and none when there are several (a
// guess among keys would let any of them sign for any other).
func (s KeySet) find(kid string, ok func(any) bool) (any, error) {
	var match []any
	for _, k := range s.keys {
		if ok(k.key) && (kid == "" || k.kid == kid) {
			match = append(match, k.key)
		}
	}
	switch {
	case len(match) == 1:
		return match[0], nil
	case len(match) == 0 && kid != "":
		return nil, fmt.Errorf("no key with kid %q", kid)
	case len(match) == 0:
		return nil, errors.New("no key for this algorithm")
	}
	return nil, errors.New("several keys and no kid in the token")
}

// KeySetOf is a key set of the given public keys, without kids.
func KeySetOf(keys ...any) KeySet {
	var s KeySet
	for _, k := range keys {
		s.keys = append(s.keys, namedKey{key: k})
	}
	return s
}

// LoadKeys reads public keys from path: PEM (PUBLIC KEY or RSA PUBLIC
// KEY blocks, no kid) or a JWKS document ({"keys": [...]}, RSA and P-256
// EC keys, kid kept). A static file, not a URL: a key fetched at run time
// is a dependency that can fail mid-sale, and key rotation is a restart.
func LoadKeys(path string) (KeySet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return KeySet{}, err
	}
	var set KeySet
	if strings.HasPrefix(strings.TrimSpace(string(b)), "{") {
		set, err = parseJWKS(b)
	} else {
		set, err = parsePEM(b)
	}
	if err != nil {
		return KeySet{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(set.keys) == 0 {
		return KeySet{}, fmt.Errorf("%s: no public key in it", path)
	}
	return set, nil
}

func parsePEM(b []byte) (KeySet, error) {
	var set KeySet
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return set, nil
		}
		var key any
		var err error
		switch blk.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(blk.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(blk.Bytes)
		default:
			return KeySet{}, fmt.Errorf("PEM block %q: want PUBLIC KEY (a private key does not belong here)", blk.Type)
		}
		if err != nil {
			return KeySet{}, err
		}
		if err := usable(key); err != nil {
			return KeySet{}, err
		}
		set.keys = append(set.keys, namedKey{key: key})
	}
}

// usable refuses keys tokens cannot be verified with safely here.
func usable(key any) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("RSA key of %d bits, want at least 2048", k.N.BitLen())
		}
		return nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("EC key on %s, want P-256 (ES256)", k.Curve.Params().Name)
		}
		return nil
	}
	return fmt.Errorf("key of type %T: want RSA or P-256 EC", key)
}

type jwk struct {
	Kty, Kid, Use, Alg string
	N, E               string // RSA
	Crv, X, Y          string // EC
}

func parseJWKS(b []byte) (KeySet, error) {
	var doc struct{ Keys []jwk }
	if err := json.Unmarshal(b, &doc); err != nil {
		return KeySet{}, fmt.Errorf("JWKS: %w", err)
	}
	var set KeySet
	for i, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue // an encryption key verifies nothing
		}
		key, err := k.public()
		if err == nil {
			err = usable(key)
		}
		if err != nil {
			return KeySet{}, fmt.Errorf("JWKS key %d (kid %q): %w", i, k.Kid, err)
		}
		set.keys = append(set.keys, namedKey{kid: k.Kid, key: key})
	}
	return set, nil
}

func (k jwk) public() (any, error) {
	num := func(name, v string) (*big.Int, error) {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("bad %s", name)
		}
		return new(big.Int).SetBytes(b), nil
	}
	switch k.Kty {
	case "RSA":
		n, err := num("n", k.N)
		if err != nil {
			return nil, err
		}
		e, err := num("e", k.E)
		if err != nil {
			return nil, err
		}
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 {
			return nil, errors.New("bad e")
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		if k.Crv != "P-256" {
			return nil, fmt.Errorf("curve %q, want P-256", k.Crv)
		}
		x, err := num("x", k.X)
		if err != nil {
			return nil, err
		}
		y, err := num("y", k.Y)
		if err != nil {
			return nil, err
		}
		if x.BitLen() > 256 || y.BitLen() > 256 {
			return nil, errors.New("EC coordinates longer than P-256's")
		}
		// Through the uncompressed point encoding, which ecdh checks is
		// on the curve: a JWKS may not hand us an invalid point.
		pt := make([]byte, 65)
		pt[0] = 4
		x.FillBytes(pt[1:33])
		y.FillBytes(pt[33:])
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pt)
		if err != nil {
			return nil, fmt.Errorf("EC point: %w", err)
		}
		return pub, nil
	}
	return nil, fmt.Errorf("kty %q, want RSA or EC", k.Kty)
}
