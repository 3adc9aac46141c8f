package stockd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// witnesssurvey.go: what the witness itself survives. A witness lost with
// its host (a one-member etcd, a MySQL on the stock Redis's machine) no
// longer sells anything twice, but halts the sale (witness_lost) until an
// operator adopts it: stockd says so at start, and /info's rewind claims
// only what holds.

// surveyWitness reads what stockd can tell of the witness's servers now:
// how many members an etcd has, and whether one shares the stock Redis's
// host. It returns the note for the store's claim ("" when nothing is
// amiss or nothing could be read) and logs a WARN for each weakness.
func surveyWitness(ctx context.Context, w *wiring, log *slog.Logger) string {
	cfg := w.cfg
	redisHosts := stockRedisHosts(cfg)
	var notes []string
	switch cfg.Stock.Witness {
	case "etcd":
		mgr, err := w.etcdSession()
		if err != nil {
			return ""
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.Stock.WitnessTimeout)
		defer cancel()
		members, err := mgr.Client().MemberList(cctx)
		if err != nil {
			log.Info("could not list the witness etcd's members: what it survives is unchecked", "err", err)
			return ""
		}
		var hosts []string
		for _, m := range members.Members {
			for _, u := range m.ClientURLs {
				if p, err := url.Parse(u); err == nil {
					hosts = append(hosts, p.Hostname())
				}
			}
		}
		if n := len(members.Members); n < 3 {
			notes = append(notes, fmt.Sprintf("a %d-member etcd: the loss of %s halts the sale (witness_lost) until an operator adopts it",
				n, map[bool]string{true: "its host", false: "a member's host"}[n == 1]))
		}
		if sharedHost(hosts, redisHosts) {
			notes = append(notes, "an etcd member on the stock Redis's host: one machine's loss takes both")
		}
	case "mysql":
		dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
		if err != nil {
			return ""
		}
		host, _, _ := net.SplitHostPort(dsn.Addr)
		notes = append(notes, "a MySQL server whose replication stockd does not check: its loss halts the sale (witness_lost) until an operator adopts it")
		if sharedHost([]string{host}, redisHosts) {
			notes = append(notes, "the MySQL on the stock Redis's host: one machine's loss takes both")
		}
	}
	for _, n := range notes {
		log.Warn("WITNESS: "+n, "witness", cfg.Stock.Witness)
	}
	return strings.Join(notes, "; ")
}

// stockRedisHosts are the hosts of the stock Redis as configured.
func stockRedisHosts(cfg *Config) []string {
	addrs := []string{cfg.Redis.Addr}
	if len(cfg.Redis.Cluster.Addrs) > 0 {
		addrs = cfg.Redis.Cluster.Addrs
	} else if cfg.Redis.Sentinel.Master != "" {
		return nil // the primary moves: no host to compare
	}
	var out []string
	for _, a := range addrs {
		if h, _, err := net.SplitHostPort(a); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// sharedHost says whether a host of a is one of b's, loopback names all
// being this machine.
func sharedHost(a, b []string) bool {
	norm := func(h string) string {
		if h == "localhost" || h == "" {
			return "loopback"
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			return "loopback"
		}
		return strings.ToLower(h)
	}
	for _, x := range a {
		for _, y := range b {
			if norm(x) == norm(y) {
				return true
			}
		}
	}
	return false
}
