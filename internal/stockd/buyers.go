package stockd

import (
	"fmt"

	"seckill/internal/auth"
)

// BuildBuyers is the auth section made into the identity every sale and
// order read asks (package auth). A key file that cannot be read or holds
// no usable key is a configuration error like any other: stockd must not
// start selling to buyers it cannot verify.
func BuildBuyers(cfg *Config) (*auth.Identity, error) {
	a := cfg.Auth
	id := &auth.Identity{Mode: a.Buyers, Required: a.Required}
	switch a.Buyers {
	case auth.ModeJWT:
		jc := auth.JWT{Secret: []byte(a.JWTSecret), Issuer: a.JWTIssuer, Audience: a.JWTAudience, Leeway: a.JWTLeeway}
		if a.JWTKeys != "" {
			keys, err := auth.LoadKeys(a.JWTKeys)
			if err != nil {
				return nil, fmt.Errorf("config: auth.jwt_keys: %w", err)
			}
			jc.Keys = keys
		}
		v, err := auth.NewVerifier(jc)
		if err != nil {
			return nil, fmt.Errorf("config: auth: %w", err)
		}
		id.Verifier = v
	case auth.ModeProxy:
		ps, err := auth.ParseProxies(cfg.HTTP.TrustedProxies)
		if err != nil {
			return nil, fmt.Errorf("config: http.trusted_proxies: %w", err)
		}
		id.Proxies = ps
	}
	return id, nil
}
