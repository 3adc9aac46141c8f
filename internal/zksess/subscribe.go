package zksess

import (
	"github.com/go-zookeeper/zk"
)

// subscriberBuffer is how many state changes a subscriber may fall behind
// before the oldest ones are dropped. Transitions come at most a few per
// reconnection attempt, so 16 is generous for any subscriber that reads at
// all.
const subscriberBuffer = 16

type subscriber struct {
	ch chan zk.Event
}

// Subscribe returns a channel of session-state events (Type zk.EventSession:
// Connecting, Connected, HasSession, Disconnected, Expired, …) and a cancel
// function that stops delivery and closes the channel. Node watch events are
// not sent here; they arrive on the channel of the call that set the watch.
//
// Delivery semantics ("latest state wins"):
//   - The first event on the channel is the state at the time of the call,
//     so a subscriber never has to race State() against the first change.
//   - Delivery never blocks the connection: each subscriber has a buffer of
//     16 events, and when it is full the oldest buffered event is dropped to
//     make room. Intermediate transitions of a subscriber that does not keep
//     up can therefore be lost, but the last event it receives is always the
//     latest state, so a state change is never lost as a whole.
//   - The channel is closed by cancel (idempotent) or by Session.Close.
func (s *Session) Subscribe() (events <-chan zk.Event, cancel func()) {
	return s.subscribe(s.State)
}

// subscribe registers a subscriber whose first event is initial(), read
// under s.mu. go-zookeeper stores a new state before it calls onEvent, and
// onEvent delivers under s.mu, so a state read under the mutex is at least
// as new as every event already delivered: a transition can at worst arrive
// twice (once as the initial state, once as the event), never be missed.
func (s *Session) subscribe(initial func() zk.State) (<-chan zk.Event, func()) {
	sub := &subscriber{ch: make(chan zk.Event, subscriberBuffer)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(sub.ch)
		return sub.ch, func() {}
	}
	sub.ch <- zk.Event{Type: zk.EventSession, State: initial()}
	s.subs[sub] = struct{}{}
	return sub.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[sub]; ok {
			delete(s.subs, sub)
			close(sub.ch)
		}
	}
}

// onEvent is go-zookeeper's event callback. The library calls it from its
// connection goroutine, sometimes while holding its watcher lock, so it must
// neither block nor call back into the Conn.
func (s *Session) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.logTransition(ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.State == zk.StateExpired {
		// Every node of the expired session is gone, including those of
		// settled protected creates (an unsettled one may still be sent
		// in the next session: it stays tracked).
		s.expiries++
		for p := range s.tracked {
			if p.settled {
				s.untrackLocked(p)
			}
		}
	}
	for sub := range s.subs {
		deliver(sub.ch, ev)
	}
}

// deliver sends ev without blocking, evicting the oldest buffered events
// until it fits. Only onEvent sends (under s.mu), so each pass either sends
// or frees a slot, and the loop ends after at most cap(ch)+1 passes.
func deliver(ch chan zk.Event, ev zk.Event) {
	for {
		select {
		case ch <- ev:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// logTransition logs what an operator needs to know: a session gained, a
// live session suspended, a session expired. Connection attempts before the
// first session and the disconnect of a graceful Close go to Debug.
func (s *Session) logTransition(ev zk.Event) {
	prev := s.last
	s.last = ev.State
	switch {
	case ev.State == zk.StateHasSession:
		s.log.Info("zookeeper session established", "server", ev.Server)
	case ev.State == zk.StateDisconnected && prev == zk.StateHasSession && !s.closing.Load():
		s.log.Warn("zookeeper connection lost; session suspended", "server", ev.Server)
	case ev.State == zk.StateExpired:
		s.log.Warn("zookeeper session expired; its ephemeral nodes are gone", "server", ev.Server)
	default:
		s.log.Debug("zookeeper state", "state", ev.State.String(), "server", ev.Server)
	}
}
