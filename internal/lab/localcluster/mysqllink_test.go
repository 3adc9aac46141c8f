package localcluster

import (
	"errors"
	"testing"
)

// CutMySQL refuses what it cannot cut: a cluster without the fault layer,
// a replica that does not exist, a MariaDB that was never started. Its
// effect on real processes is the lab's consumerkill and mysqldown cells.
func TestCutMySQLRefuses(t *testing.T) {
	if _, err := (&Cluster{}).CutMySQL(0); !errors.Is(err, ErrNoFaults) {
		t.Fatalf("no fault layer: got %v, want ErrNoFaults", err)
	}
	c := &Cluster{faults: newFaultNet(), addrs: []string{"127.0.0.1:1"}}
	for _, i := range []int{-1, 1} {
		if _, err := c.CutMySQL(i); !errors.Is(err, ErrConfig) {
			t.Errorf("replica %d of 1: got %v, want ErrConfig", i, err)
		}
	}
	if _, err := c.CutMySQL(0); !errors.Is(err, ErrConfig) {
		t.Errorf("no MariaDB proxy: got %v, want ErrConfig", err)
	}
}
