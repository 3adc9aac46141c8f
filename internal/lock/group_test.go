package lock

import (
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/testwait"
)

// Close waits for the work under way and refuses new work.
func TestGroup(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var ran atomic.Int32
	if !g.Go(func() { <-release; ran.Add(1) }) {
		t.Fatal("Go on an open Group = false")
	}
	done, ok := g.Add()
	if !ok {
		t.Fatal("Add on an open Group = false")
	}
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with work under way")
	case <-testwait.MustNotWithin(20 * time.Millisecond):
	}
	close(release)
	done()
	<-closed
	if ran.Load() != 1 {
		t.Fatal("the goroutine did not run")
	}
	if g.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("Go after Close = true")
	}
	if _, ok := g.Add(); ok {
		t.Fatal("Add after Close = true")
	}
}
