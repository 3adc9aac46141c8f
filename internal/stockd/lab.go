package stockd

import (
	"fmt"
	"slices"
	"strings"

	"seckill/internal/failpoint"
	"seckill/internal/stock"
)

// The lab — backends that oversell on purpose, failpoints — is compiled
// only into a lab build (go build -tags lab): backends_lab.go adds it. A
// product build refuses to start when asked for it, and says why.

// knownFailpoints are the failpoint names this binary evaluates. A name
// not listed would arm nothing: a typo in a lab run, or a probe by someone
// who should not be arming failpoints at all. Both are refused at start.
var knownFailpoints = []string{stock.FailpointFalseSoldOut, stock.FailpointRingEarly, stock.FailpointAfterRead}

// productBuild ends every refusal of the lab by a product build.
const productBuild = "this stockd is a product build without the lab (build it with go build -tags lab)"

// errNotLabBuild is the refusal of a lab backend by a product build.
func errNotLabBuild(backend string) error {
	return fmt.Errorf("%q is lab-only and %s", backend, productBuild)
}

// failpointNames lists the names in a SECKILL_FAILPOINTS spec
// ("a=exit;b=sleep(1s)"); the actions are checked by failpoint.EnableSpec.
func failpointNames(spec string) []string {
	var names []string
	for raw := range strings.SplitSeq(spec, ";") {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		name, _, _ := strings.Cut(raw, "=")
		names = append(names, strings.TrimSpace(name))
	}
	return names
}

// validateLab refuses what only the lab may run — a backend that oversells
// on purpose, writes without fencing, armed failpoints — unless lab.unsafe
// says this is the lab. Each problem names the key that asks for it.
func validateLab(c *Config, bad func(key, format string, args ...any)) {
	const hint = "; set lab.unsafe: true (STOCKD_LAB_UNSAFE=true) only in the lab"
	if spec, ok := backends[c.Lock.Backend]; ok && spec.labOnly && !c.Lab.Unsafe {
		bad("lock.backend", "%q is lab-only: it oversells across replicas%s", c.Lock.Backend, hint)
	}
	if !c.Stock.Fencing && c.Stock.Mode == "locked" && !LabBuild {
		bad("stock.fencing", "false is lab-only and %s", productBuild)
	} else if !c.Stock.Fencing && c.Stock.Mode == "locked" && !c.Lab.Unsafe {
		bad("stock.fencing", "false is lab-only: a paused lock holder then oversells%s", hint)
	}
	names := failpointNames(c.Lab.Failpoints)
	if len(names) > 0 && !LabBuild {
		bad(failpoint.EnvVar, "failpoints are lab-only and %s", productBuild)
		return
	}
	if len(names) > 0 && !c.Lab.Unsafe {
		bad(failpoint.EnvVar, "failpoints are lab-only (an armed exit lets any buyer stop the process)%s", hint)
	}
	for _, n := range names {
		if !slices.Contains(knownFailpoints, n) {
			bad(failpoint.EnvVar, "unknown failpoint %q (known: %s)", n, strings.Join(knownFailpoints, ", "))
		}
	}
}
