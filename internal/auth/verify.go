package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MinSecretLen is the shortest HS256 secret accepted: 256 bits, the
// hash's size (RFC 7518 §3.2).
const MinSecretLen = 32

// MaxLeeway bounds Config.Leeway: clock skew is seconds; minutes of
// leeway would keep expired tokens alive.
const MaxLeeway = 5 * time.Minute

// JWT configures the verification of buyers' tokens. At least one of
// Secret and Keys is set; Issuer and Audience are required.
type JWT struct {
	// Secret verifies HS256 tokens; at least MinSecretLen bytes.
	Secret []byte
	// Keys verify RS256 (RSA keys) and ES256 (P-256 keys) tokens, by the
	// token's kid when it has one and the key set names its keys
	// (LoadKeys reads them from a PEM or JWKS file).
	Keys KeySet
	// Issuer is the one iss accepted; Audience must be among aud.
	Issuer, Audience string
	// Leeway is the clock skew allowed on exp and nbf.
	Leeway time.Duration
}

// Verifier checks buyers' tokens.
type Verifier struct {
	cfg    JWT
	parser *jwt.Parser
}

// NewVerifier checks cfg and returns its verifier.
func NewVerifier(cfg JWT) (*Verifier, error) {
	if len(cfg.Secret) == 0 && len(cfg.Keys.keys) == 0 {
		return nil, errors.New("auth: no secret and no public key to verify tokens with")
	}
	if len(cfg.Secret) > 0 && len(cfg.Secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: the HS256 secret has %d bytes, want at least %d", len(cfg.Secret), MinSecretLen)
	}
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("auth: an issuer and an audience are required")
	}
	if cfg.Leeway < 0 || cfg.Leeway > MaxLeeway {
		return nil, fmt.Errorf("auth: leeway %v outside 0..%v", cfg.Leeway, MaxLeeway)
	}
	var methods []string
	if len(cfg.Secret) > 0 {
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if cfg.Keys.has(func(k any) bool { _, ok := k.(*rsa.PublicKey); return ok }) {
		methods = append(methods, jwt.SigningMethodRS256.Alg())
	}
	if cfg.Keys.has(isP256) {
		methods = append(methods, jwt.SigningMethodES256.Alg())
	}
	return &Verifier{cfg: cfg, parser: jwt.NewParser(
		jwt.WithValidMethods(methods),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.Leeway),
	)}, nil
}

func isP256(k any) bool {
	e, ok := k.(*ecdsa.PublicKey)
	return ok && e.Curve == elliptic.P256()
}

// Buyer verifies token and returns its subject, the buyer.
func (v *Verifier) Buyer(token string) (string, error) {
	if err := checkJSON(token); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	var claims jwt.RegisteredClaims
	_, err := v.parser.ParseWithClaims(token, &claims, v.key)
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrUnauthenticated, reason(err))
	}
	if claims.Subject == "" {
		return "", fmt.Errorf("%w: the token has no sub (the buyer)", ErrUnauthenticated)
	}
	return claims.Subject, nil
}

// key is the key a token's own header asks for, of the family its alg
// names: an HMAC token gets the secret and nothing else, so a token
// "HS256-signed with the RSA public key" meets the secret and fails.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	switch t.Method.(type) {
	case *jwt.SigningMethodHMAC:
		return v.cfg.Secret, nil
	case *jwt.SigningMethodRSA:
		return v.cfg.Keys.find(kid, func(k any) bool { _, ok := k.(*rsa.PublicKey); return ok })
	case *jwt.SigningMethodECDSA:
		return v.cfg.Keys.find(kid, isP256)
	}
	return nil, fmt.Errorf("algorithm %s not accepted", t.Method.Alg())
}

// reason is what the client is told of a refused token.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// Also an algorithm outside the accepted ones ("none" among them):
		// the library reports both alike.
		return "bad signature or algorithm not accepted"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "unverifiable token (algorithm or key not accepted)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// checkJSON names the missing claim before the library looks.
		return "the token lacks a required claim"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet (nbf)"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	}
	return "invalid token"
}
