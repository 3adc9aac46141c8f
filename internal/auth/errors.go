package auth

import "errors"

// ErrUnauthenticated wraps every refusal of a credential; its text says
// why (expired, wrong audience, bad signature…), which is safe to tell
// the client: it names what the client sent, nothing of the keys.
var ErrUnauthenticated = errors.New("not authenticated")
