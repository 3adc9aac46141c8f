package auth

import (
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Minter signs HS256 tokens for test buyers: the load tools, the lab and
// the demo buy as named buyers with it. Its secret is the one the
// replicas verify with, made for the run (a lab cluster) or given by
// the operator (SECKILL_JWT_SECRET); no secret is built in.
type Minter struct {
	secret           []byte
	issuer, audience string
	ttl              time.Duration

	mu     sync.Mutex
	tokens map[string]minted
}

type minted struct {
	token string
	exp   time.Time
}

// NewMinter signs tokens valid for ttl with secret, for issuer and
// audience.
func NewMinter(secret []byte, issuer, audience string, ttl time.Duration) *Minter {
	return &Minter{secret: secret, issuer: issuer, audience: audience, ttl: ttl, tokens: map[string]minted{}}
}

// Token is a token for user, signed once and reused until half its life
// is gone: a load run of thousands of sales signs once per buyer.
func (m *Minter) Token(user string) string {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.tokens[user]; ok && now.Add(m.ttl/2).Before(t.exp) {
		return t.token
	}
	exp := now.Add(m.ttl)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Issuer: m.issuer, Audience: jwt.ClaimStrings{m.audience}, Subject: user,
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	}).SignedString(m.secret)
	if err != nil {
		// HS256 over a byte secret cannot fail; a token that does not
		// verify will say so at the server.
		return ""
	}
	m.tokens[user] = minted{tok, exp}
	return tok
}
