package auth

import "errors"

// ErrUnauthenticated wraps every refusal of a credential; its text says
// why (expired, wrong audience, bad signature…), which is safe to tell
// the client: it names what the client sent, nothing of the keys.
var ErrUnauthenticated = errors.New("not authenticated")

// ErrMalformedAuthorization is an Authorization header that is not
// "Bearer <token>"; it is always wrapped with ErrUnauthenticated. A
// credential the server cannot read is refused, not ignored: ignored, a
// buyer who meant to buy as bob would buy anonymously.
var ErrMalformedAuthorization = errors.New("malformed Authorization header")
