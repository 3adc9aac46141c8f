//go:build lab

package failpoint_test

import (
	"context"
	"errors"
	"fmt"

	"seckill/internal/failpoint"
)

// A hook in the code under test, and a spec arming it the way
// SECKILL_FAILPOINTS would in a lab replica.
func ExampleEnableSpec() {
	release := func(ctx context.Context) error {
		// ... GET and compare ...
		if err := failpoint.Eval(ctx, "checkdel/beforeDel"); err != nil {
			return err
		}
		// ... DEL ...
		return nil
	}
	fmt.Println(release(context.Background())) // nothing armed: a no-op

	if _, err := failpoint.EnableSpec("checkdel/beforeDel=1*error(connection reset)"); err != nil {
		panic(err)
	}
	defer failpoint.DisableAll()
	err := release(context.Background())
	fmt.Println(errors.Is(err, failpoint.ErrInjected), err)
	fmt.Println(release(context.Background())) // the count of 1 is used up
	// Output:
	// <nil>
	// true failpoint checkdel/beforeDel: failpoint: injected: connection reset
	// <nil>
}
