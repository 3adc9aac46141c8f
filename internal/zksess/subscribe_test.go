package zksess

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
)

// A subscriber that never reads must neither block the connection goroutine
// nor lose the latest state; a reading subscriber still gets every event.
func TestFanOutSlowSubscriber(t *testing.T) {
	s := &Session{log: slog.New(slog.DiscardHandler), subs: make(map[*subscriber]struct{})}
	slow, cancelSlow := s.subscribe(func() zk.State { return zk.StateHasSession })
	defer cancelSlow()
	fast, cancelFast := s.subscribe(func() zk.State { return zk.StateHasSession })
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

// A transition that happens while Subscribe reads the current state must
// reach the new subscriber: either as its initial state or as an event
// after it. The fake state read runs the transition the way go-zookeeper
// does (store the state, then call onEvent) right after the read returns
// the old state; the subscriber's last event must be the new state.
func TestSubscribeSeesConcurrentTransition(t *testing.T) {
	var (
		mu      sync.Mutex
		current = zk.StateHasSession
	)
	s := &Session{log: slog.New(slog.DiscardHandler), subs: make(map[*subscriber]struct{})}
	transitioned := make(chan struct{})
	transition := func() {
		defer close(transitioned)
		mu.Lock()
		current = zk.StateDisconnected
		mu.Unlock()
		s.onEvent(zk.Event{Type: zk.EventSession, State: zk.StateDisconnected})
	}
	s.state = func() zk.State {
		mu.Lock()
		read := current
		mu.Unlock()
		if s.mu.TryLock() {
			// Read outside the subscribers' mutex: nothing stops the
			// transition from completing before the subscriber is added.
			s.mu.Unlock()
			transition()
		} else {
			// Read under the mutex: onEvent waits for Subscribe to finish.
			go transition()
		}
		return read
	}

	events, cancel := s.Subscribe()
	defer cancel()
	<-transitioned
	var last zk.Event
	for len(events) > 0 {
		last = <-events
	}
	if last.State != zk.StateDisconnected {
		t.Fatalf("subscriber's latest state = %v, want %v (the transition slipped past Subscribe)", last.State, zk.StateDisconnected)
	}
}

// Subscribing while the connection changes state, under the race detector:
// every subscriber's last event is the final state.
func TestSubscribeRacesTransitions(t *testing.T) {
	var current atomic.Int32
	current.Store(int32(zk.StateHasSession))
	s := &Session{log: slog.New(slog.DiscardHandler), subs: make(map[*subscriber]struct{})}
	s.state = func() zk.State { return zk.State(current.Load()) }
	states := []zk.State{zk.StateDisconnected, zk.StateConnecting, zk.StateConnected, zk.StateHasSession}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			st := states[i%len(states)]
			current.Store(int32(st)) // as go-zookeeper's setState: store, then call back
			s.onEvent(zk.Event{Type: zk.EventSession, State: st})
		}
	}()
	var subs []<-chan zk.Event
	for range 50 {
		ch, cancel := s.Subscribe()
		defer cancel()
		subs = append(subs, ch)
	}
	<-done
	final := zk.State(current.Load())
	for i, ch := range subs {
		var last zk.Event
		for len(ch) > 0 {
			last = <-ch
		}
		if last.State != final {
			t.Fatalf("subscriber %d: latest state = %v, want the final %v", i, last.State, final)
		}
	}
}
