package zksess

import (
	"log/slog"
	"testing"

	"github.com/go-zookeeper/zk"
)

// A subscriber that never reads must neither block the connection goroutine
// nor lose the latest state; a reading subscriber still gets every event.
func TestFanOutSlowSubscriber(t *testing.T) {
	s := &Session{log: slog.New(slog.DiscardHandler), subs: make(map[*subscriber]struct{})}
	slow, cancelSlow := s.subscribe(zk.StateHasSession)
	defer cancelSlow()
	fast, cancelFast := s.subscribe(zk.StateHasSession)
	defer cancelFast()

	if ev := <-fast; ev.State != zk.StateHasSession {
		t.Fatalf("first event = %v, want the initial %v", ev.State, zk.StateHasSession)
	}
	states := []zk.State{zk.StateDisconnected, zk.StateConnecting, zk.StateConnected}
	const n = 10 * subscriberBuffer
	for i := range n {
		want := states[i%len(states)]
		s.onEvent(zk.Event{Type: zk.EventSession, State: want})
		if got := (<-fast).State; got != want {
			t.Fatalf("fast subscriber event %d = %v, want %v", i, got, want)
		}
	}
	s.onEvent(zk.Event{Type: zk.EventNodeDeleted, Path: "/x"}) // not a session event
	s.onEvent(zk.Event{Type: zk.EventSession, State: zk.StateExpired})
	if got := (<-fast).State; got != zk.StateExpired {
		t.Fatalf("fast subscriber's last event = %v, want %v", got, zk.StateExpired)
	}

	var last zk.Event
	count := 0
	for len(slow) > 0 {
		last = <-slow
		count++
		if last.Type != zk.EventSession {
			t.Fatalf("slow subscriber got a %v event, want session events only", last.Type)
		}
	}
	if count != subscriberBuffer {
		t.Fatalf("slow subscriber buffered %d events, want %d", count, subscriberBuffer)
	}
	if last.State != zk.StateExpired {
		t.Fatalf("slow subscriber's last event = %v, want the latest %v", last.State, zk.StateExpired)
	}
}
