// Package stockd is the flash-sale service one replica runs: its
// configuration (Config, Load, Validate: viper lives here and nowhere
// else), the table of lock backends, the wiring of clients, store, lock,
// election and orders, and Serve, which runs the HTTP API until its
// context ends and then shuts down in order. cmd/stockd is only the
// process around it: flags, signals, exit codes.
//
// The lab's backends (none, local, the articles' flawed Redis locks) and
// the failpoints are compiled in only with -tags lab (backends_lab.go): a
// product build refuses them at start, naming itself, whatever lab.unsafe
// says. The tools import Config to describe the clusters they start.
package stockd
