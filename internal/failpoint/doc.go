// Package failpoint is a small registry of named hooks that tests and lab
// runs use to force precise interleavings: stop a process between two Redis
// commands, stretch the window between a check and an action, or fail a call.
//
// It follows etcd's gofail and pingcap's failpoint in spirit, without their
// code generation: a hook is an ordinary call,
//
//	if err := failpoint.Eval(ctx, "checkdel/beforeDel"); err != nil {
//		return err
//	}
//
// that does nothing, at the cost of one atomic load, until a failpoint of that
// name is enabled. Nothing is enabled in a normal run.
//
// A failpoint is enabled with a spec (see Enable): sleep(200ms), pause,
// error(msg), panic, exit, each optionally prefixed by a count ("1*exit").
// A whole set can come from the environment, so a replica in the lab cluster
// can be started with a failpoint armed:
//
//	SECKILL_FAILPOINTS="setnx/afterSetNX=exit;checkdel/beforeDel=sleep(300ms)"
//
// Tests can also install a Go function with EnableFunc. The registry is
// process-wide: tests that enable failpoints must not run in parallel with
// others that pass the same names.
//
// The registry is compiled only into a lab build (go build -tags lab).
// In any other build Eval is an empty function the compiler inlines away,
// and EnableSpec refuses every spec: a production binary cannot be made
// to misbehave on purpose, whatever its environment says.
package failpoint

import (
	"context"
	"errors"
)

// EnvVar is the environment variable EnableFromEnv reads.
const EnvVar = "SECKILL_FAILPOINTS"

// ErrInjected is wrapped by the errors that enabled failpoints return: the
// error(msg) action, and a pause or sleep cut short by its context.
var ErrInjected = errors.New("failpoint: injected")

// ErrNotLab is returned by EnableSpec, in a build without the lab tag, for
// any spec that arms something.
var ErrNotLab = errors.New("failpoint: not compiled into this build (the lab build is go build -tags lab)")

// Func is a failpoint action written in Go. It runs with the context passed
// to Eval, the context of the call being hooked, so a test can aim at one
// caller by a value it put in that context. A non-nil result is returned by
// Eval as is.
type Func func(ctx context.Context) error
