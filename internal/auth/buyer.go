package auth

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Modes of Identity.Mode: where a buyer's identity comes from.
const (
	// ModeNone: no buyer is named; every purchase is anonymous, and a
	// buyer header or token is refused rather than ignored (a client that
	// thinks it bought as bob must learn it did not).
	ModeNone = "none"
	// ModeJWT: Authorization: Bearer <JWT>, verified.
	ModeJWT = "jwt"
	// ModeProxy: the buyer header, from a trusted proxy only.
	ModeProxy = "proxy"
)

// Modes lists the modes, for config validation.
var Modes = []string{ModeNone, ModeJWT, ModeProxy}

// HeaderBuyer is the header a trusted proxy names the buyer in.
const HeaderBuyer = "X-User"

// Identity finds the buyer of a request.
type Identity struct {
	Mode string
	// Verifier checks tokens in ModeJWT.
	Verifier *Verifier
	// Proxies may set HeaderBuyer in ModeProxy.
	Proxies Proxies
	// Required refuses anonymous purchases: with it a buyer cannot escape
	// the per-user limit by sending no credential.
	Required bool
}

// Buyer is the buyer of a purchase r: Caller's, and with Required an
// anonymous one is refused.
func (id *Identity) Buyer(r *http.Request) (string, error) {
	user, err := id.Caller(r)
	if err == nil && user == "" && id.Required {
		if _, header := r.Header[HeaderBuyer]; !header {
			return "", fmt.Errorf("%w: this sale requires an authenticated buyer (auth.required)", ErrUnauthenticated)
		}
	}
	return user, err
}

// Caller is the buyer r names, "" for none (a read of an anonymous order
// needs none). Every refusal wraps ErrUnauthenticated with what to fix;
// a malformed Authorization header is refused in every mode.
// The buyer header's own validity (printable, bounded; present but empty)
// is the caller's to check, as for any header.
func (id *Identity) Caller(r *http.Request) (string, error) {
	bearer, err := Bearer(r.Header)
	if err != nil {
		return "", err
	}
	hasBearer := bearer != ""
	_, hasHeader := r.Header[HeaderBuyer]
	var user string
	switch id.Mode {
	case ModeJWT:
		if hasHeader {
			return "", fmt.Errorf("%w: %s is not accepted here; name the buyer with Authorization: Bearer <JWT>", ErrUnauthenticated, HeaderBuyer)
		}
		if hasBearer {
			u, err := id.Verifier.Buyer(bearer)
			if err != nil {
				return "", err
			}
			user = u
		}
	case ModeProxy:
		if hasBearer {
			return "", fmt.Errorf("%w: bearer tokens are not accepted here (auth.buyers: proxy); the gateway names the buyer", ErrUnauthenticated)
		}
		if hasHeader {
			if !id.Proxies.Trusts(r.RemoteAddr) {
				return "", fmt.Errorf("%w: %s is honoured only from a trusted proxy (http.trusted_proxies)", ErrUnauthenticated, HeaderBuyer)
			}
			user = r.Header.Get(HeaderBuyer)
		}
	default:
		if hasHeader || hasBearer {
			return "", fmt.Errorf("%w: named buyers are off here (auth.buyers: none); send neither %s nor a bearer token", ErrUnauthenticated, HeaderBuyer)
		}
	}
	return user, nil
}

// Proxies are the peers trusted to name the buyer.
type Proxies []netip.Prefix

// ParseProxies reads addresses and CIDRs (what gin's trusted proxies
// take); blank entries are skipped.
func ParseProxies(list []string) (Proxies, error) {
	var ps Proxies
	for _, s := range list {
		if strings.TrimSpace(s) == "" {
			continue
		}
		p, err := ParseProxy(s)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// ParseProxy reads one address (a prefix of its full length) or CIDR.
func ParseProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("trusted proxy %q: %w", s, err)
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("trusted proxy %q: %w", s, err)
	}
	return p.Masked(), nil
}

// Trusts reports whether the peer at remoteAddr (host:port, as
// http.Request.RemoteAddr has it) is one of ps.
func (ps Proxies) Trusts(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
