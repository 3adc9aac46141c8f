package servers_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// The account logs in over TCP with its password (no skip-grant-tables),
// committed rows survive a clean restart and a crash (the lock tokens rely
// on it).
func TestMariaDBLoginAndDurability(t *testing.T) {
	p := servertest.MariaDB(t)
	db, err := sql.Open("mysql", servers.MariaDBDSN(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var grants string
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&grants); err != nil {
		t.Fatalf("login as %s: %v", servers.MariaDBUser, err)
	}
	if want := servers.MariaDBUser + "@127.0.0.1"; grants != want {
		t.Fatalf("CURRENT_USER() = %q, want %q", grants, want)
	}
	// A wrong password must be refused: the grant tables are in force.
	bad, err := sql.Open("mysql", "seckill:wrong@tcp("+p.Addr()+")/seckill")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.PingContext(ctx); err == nil {
		t.Fatal("login with a wrong password succeeded")
	}

	if _, err := db.ExecContext(ctx, "CREATE TABLE t (n INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("rows after a restart and a crash: %d, want 2", n)
	}
}
