//go:build lab

package failpoint

import (
	"fmt"
	"os"
	"strings"
)

// EnableSpec arms every failpoint in specs, a list of name=spec separated by
// semicolons (see Enable for the spec grammar), for example
//
//	setnx/afterSetNX=exit;checkdel/beforeDel=1*sleep(300ms)
//
// Empty entries are ignored. Either all entries are valid and enabled, or
// none is and the error names the first bad one. It returns the names
// enabled (or disabled with "off"), in order.
func EnableSpec(specs string) ([]string, error) {
	type entry struct{ name, spec string }
	var entries []entry
	for raw := range strings.SplitSeq(specs, ";") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		name, spec, ok := strings.Cut(raw, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("failpoint: entry %q: want name=action", raw)
		}
		// Validate everything before arming anything.
		if _, err := parse(name, spec); err != nil {
			return nil, err
		}
		entries = append(entries, entry{name, spec})
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if err := Enable(e.name, e.spec); err != nil {
			return names, err
		}
		names = append(names, e.name)
	}
	return names, nil
}

// EnableFromEnv arms the failpoints listed in $SECKILL_FAILPOINTS (EnvVar),
// see EnableSpec. An unset or empty variable enables nothing.
func EnableFromEnv() ([]string, error) {
	return EnableSpec(os.Getenv(EnvVar))
}
