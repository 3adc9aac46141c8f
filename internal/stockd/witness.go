package stockd

import (
	"context"
	"log/slog"
	"path"
	"sync"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
	"seckill/internal/witness"
)

// witness.go: stock.witness, where the sale's epoch and the least stock a
// sale was answered sold with are kept outside the stock Redis, so that a
// Redis that went back in time is caught even when every stockd restarted
// with it (package stock, witness.go). etcd and MySQL are the servers the
// deployment may already run for its lock or its durable orders.

// witnessPrefix is the etcd directory of the witness records, one per
// sale: stock.key's, and each item's under it (redisstore.ItemWitnessName).
const witnessPrefix = "/seckill/witness"

// witnessRegisters makes the register of the sale named name on the
// server stock.witness names; nil for none.
type witnessRegisters func(name string) stock.Register

// buildWitness returns the registers stock.witness names, or nil for none:
// the default sale's is named stock.key. Neither server is required to
// answer now: an unreachable one shows in /readyz ("witness") and makes
// sales unconfirmed until it answers.
func buildWitness(ctx context.Context, w *wiring) (witnessRegisters, error) {
	cfg := w.cfg
	switch cfg.Stock.Witness {
	case "etcd":
		mgr, err := w.etcdSession()
		if err != nil {
			return nil, err
		}
		cli := mgr.Client()
		return func(name string) stock.Register {
			return witness.NewEtcd(cli, path.Join(witnessPrefix, name))
		}, nil
	case "mysql":
		db, err := openMySQL(w, 4, func(dsn *mysql.Config) {
			if dsn.Timeout == 0 {
				dsn.Timeout = cfg.Stock.WitnessTimeout
			}
		})
		if err != nil {
			return nil, err
		}
		table := &witnessTable{}
		return func(name string) stock.Register {
			return &initFirst{MySQL: witness.NewMySQL(db, name), table: table}
		}, nil
	default:
		return nil, nil
	}
}

// sales is every sale's register, by sale id ("": the default sale's,
// named stock.key; an item's under it, redisstore.ItemWitnessName), or
// nil for none.
func (r witnessRegisters) sales(cfg *Config) func(id string) stock.Register {
	if r == nil {
		return nil
	}
	return func(id string) stock.Register {
		if id == "" {
			return r(cfg.Stock.Key)
		}
		return r(redisstore.ItemWitnessName(cfg.Stock.Key, id))
	}
}

// witnessTable says whether the MySQL registers' table is made, shared by
// every register (the default sale's and the items'), so the table is
// created once.
type witnessTable struct {
	mu   sync.Mutex
	done bool
}

// initFirst creates the MySQL register's table before its first use,
// trying again on each use until it is made: a MySQL down at start gets
// its table once it answers, without holding stockd's start.
type initFirst struct {
	*witness.MySQL
	table *witnessTable
}

func (r *initFirst) ready(ctx context.Context) error {
	t := r.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil
	}
	if err := r.MySQL.Init(ctx); err != nil {
		return err
	}
	t.done = true
	return nil
}

func (r *initFirst) Get(ctx context.Context) ([]byte, error) {
	if err := r.ready(ctx); err != nil {
		return nil, err
	}
	return r.MySQL.Get(ctx)
}

func (r *initFirst) Put(ctx context.Context, v, expect []byte) (bool, error) {
	if err := r.ready(ctx); err != nil {
		return false, err
	}
	return r.MySQL.Put(ctx, v, expect)
}

// checkWitness logs what catches a rewound stock Redis, and whether the
// witness answers now (an unreachable one is not fatal: /readyz says so).
func checkWitness(ctx context.Context, log *slog.Logger, store *redisstore.Store) {
	if store.Witness() == "" {
		log.Warn("stock.witness is none: a stock Redis that goes back in time is caught only while a stockd that sold keeps running",
			"rewind", store.Rewind())
		return
	}
	cctx, cancel := context.WithTimeout(ctx, redisstore.DefaultWitnessTimeout)
	defer cancel()
	if err := store.PingWitness(cctx); err != nil {
		log.Warn("the witness does not answer yet: sales stay unconfirmed until it does", "witness", store.Witness(), "err", err)
		return
	}
	log.Info("witness", "register", store.Witness(), "rewind", store.Rewind())
}
