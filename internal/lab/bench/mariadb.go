package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"seckill/internal/servers"
)

// mariadb is the MySQL-protocol server of a run, started beside the local
// cluster (which has no database) for the mysql subjects.
type mariadb struct {
	p   *servers.Process
	dir string
}

// startMariaDB runs a MariaDB on a free loopback port in a temp dir.
func startMariaDB(ctx context.Context) (*mariadb, error) {
	dir, err := os.MkdirTemp("", "seckill-bench-mariadb-")
	if err != nil {
		return nil, err
	}
	addr, err := servers.LoopbackAddr()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	p, err := servers.StartMariaDB(sctx, dir, addr)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return &mariadb{p: p, dir: dir}, nil
}

func (m *mariadb) dsn() string { return servers.MariaDBDSN(m.p.Addr()) }

// stop shuts the server down and removes its files.
func (m *mariadb) stop() error {
	err := m.p.Stop(10 * time.Second)
	return errors.Join(err, os.RemoveAll(m.dir))
}
