//go:build !lab

package failpoint

import (
	"context"
	"strings"
)

// Compiled reports whether this build has the registry (the lab tag).
const Compiled = false

// Eval does nothing: this build has no failpoints.
func Eval(context.Context, string) error { return nil }

// EnableSpec refuses any spec that names a failpoint: this build has none.
func EnableSpec(specs string) ([]string, error) {
	for raw := range strings.SplitSeq(specs, ";") {
		if strings.TrimSpace(raw) != "" {
			return nil, ErrNotLab
		}
	}
	return nil, nil
}

// Active lists nothing: this build has no failpoints.
func Active() []string { return nil }
