package main

import (
	"slices"
	"strings"

	"seckill/internal/failpoint"
	"seckill/internal/lock/flawedlock"
	"seckill/internal/stock"
)

// knownFailpoints are the failpoint names this binary evaluates. A name
// not listed would arm nothing: a typo in a lab run, or a probe by someone
// who should not be arming failpoints at all. Both are refused at start.
var knownFailpoints = []string{
	flawedlock.FailpointAfterSetNX,
	flawedlock.FailpointNoCheckBeforeDel,
	flawedlock.FailpointCheckDelBeforeDel,
	stock.FailpointFalseSoldOut,
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
	if !c.Stock.Fencing && c.Stock.Mode == "locked" && !c.Lab.Unsafe {
		bad("stock.fencing", "false is lab-only: a paused lock holder then oversells%s", hint)
	}
	names := failpointNames(c.Lab.Failpoints)
	if len(names) > 0 && !c.Lab.Unsafe {
		bad(failpoint.EnvVar, "failpoints are lab-only (an armed exit lets any buyer stop the process)%s", hint)
	}
	for _, n := range names {
		if !slices.Contains(knownFailpoints, n) {
			bad(failpoint.EnvVar, "unknown failpoint %q (known: %s)", n, strings.Join(knownFailpoints, ", "))
		}
	}
}
