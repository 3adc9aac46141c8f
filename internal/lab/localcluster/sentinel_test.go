package localcluster

import (
	"errors"
	"testing"
)

// LagReplication needs the fault layer and a Sentinel set to act on; it
// must say which is missing rather than lag nothing.
func TestLagReplicationNeedsASet(t *testing.T) {
	if _, err := (&Cluster{}).LagReplication(); !errors.Is(err, ErrNoFaults) {
		t.Errorf("without the fault layer: got %v, want ErrNoFaults", err)
	}
	c := &Cluster{faults: newFaultNet()}
	if _, err := c.LagReplication(); !errors.Is(err, ErrConfig) {
		t.Errorf("without a Sentinel set: got %v, want ErrConfig", err)
	}
}
