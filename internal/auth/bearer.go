package auth

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

// Bearer is the token of h's Authorization header, "" when there is no
// such header. A header that is there must be exactly "Bearer <token>"
// (the scheme in any case, RFC 7235 §2.1; one space; a token without
// spaces or control characters), else the error wraps
// ErrMalformedAuthorization. Buyers and the admin read the header here
// alone, so one request cannot mean two things to them.
func Bearer(h http.Header) (string, error) {
	vs := h.Values("Authorization")
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", malformed("given more than once")
	}
	scheme, tok, ok := strings.Cut(vs[0], " ")
	switch {
	case !ok || !strings.EqualFold(scheme, "Bearer"):
		return "", malformed("want the Bearer scheme")
	case tok == "":
		return "", malformed("no token after Bearer")
	case strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return "", malformed("the token has a space or a control character")
	}
	return tok, nil
}

func malformed(why string) error {
	return fmt.Errorf("%w: %w: %s; send Authorization: Bearer <token> (one space) or no Authorization header",
		ErrUnauthenticated, ErrMalformedAuthorization, why)
}

// IsJWT reports whether tok has a JWT's form: three dot-separated parts,
// the first a base64url JSON object. It tells a buyer's token from an
// admin token guessed in the same header; it verifies nothing.
func IsJWT(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[0])
	return err == nil && len(b) > 1 && b[0] == '{'
}
