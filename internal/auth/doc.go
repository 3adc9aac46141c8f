// Package auth says who a buyer is: from a verified JWT (Authorization:
// Bearer), or from a buyer header that only a trusted proxy — a gateway
// that authenticated the buyer itself — may set. Nothing else names a
// buyer: a header any client can write is no identity, and a per-user
// limit keyed by one limits nothing.
//
// The buyer of a token is its sub under the one issuer the service
// accepts (Config.Issuer), so (iss, sub) and sub name the same buyer.
// Tokens are checked with github.com/golang-jwt/jwt/v5: the signature by
// the algorithms the configured keys allow and no other (so "none", and
// HS256 signed with a public key, fail), exp required, nbf, iss and aud
// checked, within a small clock-skew leeway. Before the library reads a
// token, its header and claims are read exactly (claims.go): encoding/json
// matches names without case and lets a repeated name win, so a token
// with "sub" and "SUB" could name two buyers to two readers.
//
// The Authorization header is read in one place (Bearer), for buyers and
// the admin alike: "Bearer <token>" or refused, never ignored.
package auth
