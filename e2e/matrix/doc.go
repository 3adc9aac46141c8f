// Package matrix runs the fault matrix (package lab) end to end, each cell
// on a fault cluster of real processes: its own package, beside e2e's
// sale tests, so that go test runs the two at once.
package matrix
