package witness_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock"
	"seckill/internal/witness"
)

// One real MariaDB for the whole test: the contract on a row of its own,
// once with the driver's default (UPDATE counts changed rows) and once with
// clientFoundRows (it counts matched rows), then the server killed under a
// register that had been talking to it.
func TestMySQL(t *testing.T) {
	t.Parallel()
	p := servertest.MariaDB(t)
	db := openDB(t, servers.MariaDBDSN(p.Addr()))

	r := witness.NewMySQL(db, "contract")
	if got, want := r.Name(), "mysql stock_witness/contract"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	for range 2 { // Init is idempotent
		if err := r.Init(t.Context()); err != nil {
			t.Fatalf("Init: %v", err)
		}
	}
	t.Run("contract", func(t *testing.T) { testRegister(t, r) })
	t.Run("contract with clientFoundRows", func(t *testing.T) {
		db := openDB(t, servers.MariaDBDSN(p.Addr())+"?clientFoundRows=true")
		testRegister(t, witness.NewMySQL(db, "contract-found-rows"))
	})
	t.Run("names compare byte for byte", func(t *testing.T) {
		lower, upper := witness.NewMySQL(db, "case"), witness.NewMySQL(db, "CASE")
		for _, r := range []*witness.MySQL{lower, upper} {
			if ok, err := r.Put(t.Context(), []byte(r.Name()), nil); err != nil || !ok {
				t.Fatalf("%s: first Put stored %v, %v; want a row of its own", r.Name(), ok, err)
			}
		}
	})
	t.Run("bad names", func(t *testing.T) {
		for _, name := range []string{strings.Repeat("x", 192), "trailing ", "\xff"} {
			_, err := witness.NewMySQL(db, name).Get(t.Context())
			if err == nil || errors.Is(err, stock.ErrRegisterUnavailable) {
				t.Errorf("Get of name %q = %v, want a name error", name, err)
			}
		}
	})
	t.Run("server down", func(t *testing.T) {
		testUnavailable(t, witness.NewMySQL(db, "down"), func() {
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
