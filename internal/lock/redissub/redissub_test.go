package redissub

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

type event struct{ channel, payload string }

func newConn(t *testing.T) (*Conn, *redis.Client, chan event) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: servertest.Redis(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	got := make(chan event, 16)
	c := New(rdb, Config{
		Message:      func(ch, p string) { got <- event{ch, p} },
		Resubscribed: func(ch string) { got <- event{ch, "(resubscribed)"} },
	})
	t.Cleanup(c.Close)
	return c, rdb, got
}

func ready(t *testing.T, s *Sub) {
	t.Helper()
	select {
	case <-s.Ready():
	case <-testwait.Until(t).Done():
		t.Fatal("subscription never confirmed")
	}
	if err := s.Err(); err != nil || !s.Confirmed() {
		t.Fatalf("subscription: Err %v, Confirmed %v; want confirmed", err, s.Confirmed())
	}
}

func next(t *testing.T, got <-chan event) event {
	t.Helper()
	select {
	case e := <-got:
		return e
	case <-testwait.Until(t).Done():
		t.Fatal("nothing arrived")
		return event{}
	}
}

// A confirmed subscription hears every message published after it, on
// its channel only; after Unsubscribe the channel has no listener.
func TestSubscribeMessageUnsubscribe(t *testing.T) {
	c, rdb, got := newConn(t)
	a, b := c.Subscribe("a"), c.Subscribe("b")
	ready(t, a)
	ready(t, b)
	rdb.Publish(t.Context(), "b", "2")
	rdb.Publish(t.Context(), "a", "1")
	if e := next(t, got); e != (event{"b", "2"}) {
		t.Fatalf("got %v, want b 2", e)
	}
	if e := next(t, got); e != (event{"a", "1"}) {
		t.Fatalf("got %v, want a 1", e)
	}
	c.Unsubscribe("a")
	until := testwait.Until(t)
	for rdb.PubSubNumSub(t.Context(), "a").Val()["a"] != 0 {
		if until.Err() != nil {
			t.Fatal("still subscribed to a after Unsubscribe")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// After the connection is cut, go-redis redials and resubscribes, and the
// backend hears of it.
func TestResubscribed(t *testing.T) {
	c, rdb, got := newConn(t)
	ready(t, c.Subscribe("a"))
	if err := rdb.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if e := next(t, got); e != (event{"a", "(resubscribed)"}) {
		t.Fatalf("got %v, want a resubscription", e)
	}
	rdb.Publish(t.Context(), "a", "1")
	if e := next(t, got); e != (event{"a", "1"}) {
		t.Fatalf("got %v after the reconnect, want a 1", e)
	}
}

// Close ends the goroutines; a Subscribe after it fails at once.
func TestClose(t *testing.T) {
	c, _, _ := newConn(t)
	ready(t, c.Subscribe("a"))
	c.Close()
	s := c.Subscribe("b")
	select {
	case <-s.Ready():
	default:
		t.Fatal("Subscribe after Close not ready at once")
	}
	if s.Err() == nil {
		t.Fatal("Subscribe after Close: Err nil, want an error")
	}
	c.Close() // idempotent
}
