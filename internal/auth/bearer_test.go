package auth_test

import (
	"errors"
	"strings"
	"testing"

	"seckill/internal/auth"
)

// The Authorization header is "Bearer <token>" or refused: never read
// loosely, never ignored.
func TestBearer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   string // the token; "!" for a malformed header
	}{
		{"absent", nil, ""},
		{"Bearer", []string{"Bearer abc.def.ghi"}, "abc.def.ghi"},
		{"bearer", []string{"bearer abc"}, "abc"},
		{"BEARER", []string{"BEARER abc"}, "abc"},
		{"a tab", []string{"Bearer\tabc"}, "!"},
		{"two spaces", []string{"Bearer  abc"}, "!"},
		{"a space inside", []string{"Bearer ab c"}, "!"},
		{"a trailing space", []string{"Bearer abc "}, "!"},
		{"no token", []string{"Bearer "}, "!"},
		{"the scheme alone", []string{"Bearer"}, "!"},
		{"Token", []string{"Token abc"}, "!"},
		{"Basic", []string{"Basic eHl6"}, "!"},
		{"empty", []string{""}, "!"},
		{"twice", []string{"Bearer a", "Bearer b"}, "!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string][]string{}
			if tc.values != nil {
				h["Authorization"] = tc.values
			}
			got, err := auth.Bearer(h)
			if tc.want == "!" {
				if !errors.Is(err, auth.ErrMalformedAuthorization) || !errors.Is(err, auth.ErrUnauthenticated) || got != "" {
					t.Fatalf("got %q, %v; want ErrMalformedAuthorization", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for tok, want := range map[string]bool{
		rawHS256(`{"alg":"HS256"}`, `{}`): true,
		"guess-2":                         false,
		"a.b.c":                           false,
		strings.Repeat("x", 20):           false,
	} {
		if got := auth.IsJWT(tok); got != want {
			t.Errorf("IsJWT(%q): got %v, want %v", tok, got, want)
		}
	}
}
