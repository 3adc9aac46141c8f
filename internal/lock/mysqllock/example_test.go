package mysqllock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"seckill/internal/lock/mysqllock"
)

// A sale under the "mysql" backend: acquire within the request's deadline,
// stop if the lease is lost, hand the token to the store that fences
// writes, release. NewRow builds the "mysql-row" backend the same way.
// (Not run: it needs a MySQL or MariaDB server.)
func ExampleNew() {
	ctx := context.Background()
	lk, err := mysqllock.New(ctx, mysqllock.Config{
		DSN:       "seckill:secret@tcp(127.0.0.1:3306)/seckill",
		TTL:       10 * time.Second, // wait_timeout of the lock sessions
		KeepAlive: 2 * time.Second,  // Done closes within about two of these
	})
	if err != nil {
		log.Fatal(err) // a bad DSN names Config.DSN; a server down wraps lock.ErrUnavailable
	}
	defer lk.Close()

	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := lk.Acquire(wait, "seckill:lock")
	if err != nil {
		log.Fatal(err) // lock.ErrNotObtained when the wait timed out
	}
	defer lease.Release(ctx)

	select {
	case <-lease.Done():
		log.Fatal(lease.Err()) // the session was lost: do not write
	default:
	}
	fmt.Println("write the stock with fencing token", lease.Token())
}
