// Package redissub is the one Redis pub/sub connection of a Redis lock
// backend's Locker (redislock, redissonlock). Channels are subscribed and
// unsubscribed from one goroutine, in the order asked, so no caller blocks
// on a network write under its own mutex; each SUBSCRIBE's confirmation is
// reported (a message published before it would go unheard); messages are
// handled on the reading goroutine itself, since a hop through go-redis's
// Channel would sit on the wake-up path of every hand-off; a quiet
// connection is PINGed, and a broken one redialled by go-redis, which
// resubscribes: the backend hears of that, as a message may have been
// missed meanwhile.
package redissub

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// subscribeTimeout bounds one SUBSCRIBE/UNSUBSCRIBE write.
	subscribeTimeout = 5 * time.Second

	// healthInterval is how long the connection may stay quiet before a
	// PING checks it (go-redis's Channel uses 3s too).
	healthInterval = 3 * time.Second

	// reconnectBackoff spaces reads on a broken connection.
	reconnectBackoff = 100 * time.Millisecond
)

// Config says what to do with what arrives. Both are called on the
// reading goroutine: they must not block.
type Config struct {
	// Message handles a published message.
	Message func(channel, payload string)
	// Resubscribed is called, if set, when go-redis resubscribed channel
	// after a reconnect: messages may have been missed meanwhile.
	Resubscribed func(channel string)
	// Log receives failed (un)subscriptions. The default is slog.Default().
	Log *slog.Logger
}

// Conn is the connection. It connects at the first Subscribe.
type Conn struct {
	rdb redis.UniversalClient
	cfg Config

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	ps      *redis.PubSub
	ops     []op
	sig     chan struct{}     // wakes the writer
	pending map[string][]*Sub // per channel: awaiting confirmation, in order
}

// Sub is one SUBSCRIBE: Ready closes once Redis confirmed it, or it failed.
type Sub struct {
	channel string
	once    sync.Once
	ready   chan struct{}
	err     error // set before ready closes
}

// op is a SUBSCRIBE (sub set) or an UNSUBSCRIBE.
type op struct {
	channel string
	sub     *Sub
}

// New returns a Conn on rdb, which stays the caller's.
func New(rdb redis.UniversalClient, cfg Config) *Conn {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Conn{rdb: rdb, cfg: cfg, ctx: ctx, cancel: cancel, sig: make(chan struct{}, 1), pending: make(map[string][]*Sub)}
}

// Ready is closed once the subscription is confirmed, or failed (Err).
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Err is why the subscription failed, once Ready is closed; nil if it did
// not.
func (s *Sub) Err() error {
	select {
	case <-s.ready:
		return s.err
	default:
		return nil
	}
}

// Confirmed reports whether Ready is closed without an error.
func (s *Sub) Confirmed() bool {
	select {
	case <-s.ready:
		return s.err == nil
	default:
		return false
	}
}

func (s *Sub) done(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.ready)
	})
}

var errClosed = errors.New("redissub: connection closed")

// Subscribe sends SUBSCRIBE channel, after every op asked before; it
// never blocks.
func (c *Conn) Subscribe(channel string) *Sub {
	s := &Sub{channel: channel, ready: make(chan struct{})}
	if !c.push(op{channel: channel, sub: s}) {
		s.done(errClosed)
	}
	return s
}

// Unsubscribe sends UNSUBSCRIBE channel, after every op asked before; it
// never blocks.
func (c *Conn) Unsubscribe(channel string) { c.push(op{channel: channel}) }

func (c *Conn) push(o op) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.ps == nil {
		// go-redis connects when the first SUBSCRIBE goes out.
		c.ps = c.rdb.Subscribe(context.Background())
		ps := c.ps
		c.wg.Go(func() { c.read(ps) })
		c.wg.Go(func() { c.write(ps) })
	}
	c.ops = append(c.ops, o)
	select {
	case c.sig <- struct{}{}:
	default:
	}
	return true
}

// Close closes the connection and returns once its goroutines ended.
// Subscriptions not yet confirmed fail.
func (c *Conn) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	ps := c.ps
	c.mu.Unlock()
	c.cancel()
	if ps != nil {
		_ = ps.Close() // ends read: go-redis closes its connection
	}
	c.wg.Wait()
	c.mu.Lock()
	for _, o := range c.ops {
		if o.sub != nil {
			o.sub.done(errClosed)
		}
	}
	for _, subs := range c.pending {
		for _, s := range subs {
			s.done(errClosed)
		}
	}
	c.mu.Unlock()
}

// write sends the ops until Close.
func (c *Conn) write(ps *redis.PubSub) {
	for {
		select {
		case <-c.sig:
		case <-c.ctx.Done():
			return
		}
		c.mu.Lock()
		ops := c.ops
		c.ops = nil
		c.mu.Unlock()
		for _, o := range ops {
			ctx, cancel := context.WithTimeout(c.ctx, subscribeTimeout)
			if o.sub == nil {
				if err := ps.Unsubscribe(ctx, o.channel); err != nil && c.ctx.Err() == nil {
					c.cfg.Log.Warn("redis pub/sub: unsubscribe failed", "channel", o.channel, "err", err)
				}
			} else {
				c.subscribe(ctx, ps, o.sub)
			}
			cancel()
		}
	}
}

// subscribe sends SUBSCRIBE for s. s is registered as pending first: the
// confirmation can arrive before Subscribe returns.
func (c *Conn) subscribe(ctx context.Context, ps *redis.PubSub, s *Sub) {
	c.mu.Lock()
	c.pending[s.channel] = append(c.pending[s.channel], s)
	c.mu.Unlock()
	err := ps.Subscribe(ctx, s.channel)
	if err == nil {
		return
	}
	c.mu.Lock()
	if p := c.pending[s.channel]; len(p) > 0 && p[len(p)-1] == s {
		c.pending[s.channel] = p[:len(p)-1]
		if len(p) == 1 {
			delete(c.pending, s.channel)
		}
	}
	c.mu.Unlock()
	s.done(err)
}

// read reads the connection until Close and dispatches what arrives.
func (c *Conn) read(ps *redis.PubSub) {
	pinged := false
	for {
		m, err := ps.ReceiveTimeout(c.ctx, healthInterval)
		if c.ctx.Err() != nil {
			return
		}
		var ne net.Error
		switch {
		case err == nil:
			pinged = false
			c.dispatch(m)
		case errors.As(err, &ne) && ne.Timeout() && !pinged:
			// Quiet is fine, silence is not: a PING's reply proves the
			// connection alive, and a failed write makes go-redis reconnect.
			pinged = true
			_ = ps.Ping(c.ctx)
		default:
			// Broken connection: go-redis redials and resubscribes on the
			// next call. Back off so a dead server does not spin this loop.
			pinged = false
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(reconnectBackoff):
			}
		}
	}
}

// dispatch routes one message: a publication to Config.Message; a
// subscribe confirmation to the oldest pending Sub of its channel or, when
// none is pending, to Config.Resubscribed.
func (c *Conn) dispatch(m any) {
	switch m := m.(type) {
	case *redis.Message:
		c.cfg.Message(m.Channel, m.Payload)
	case *redis.Subscription:
		if m.Kind != "subscribe" {
			return
		}
		c.mu.Lock()
		p := c.pending[m.Channel]
		switch len(p) {
		case 0:
		case 1:
			delete(c.pending, m.Channel)
		default:
			c.pending[m.Channel] = p[1:]
		}
		c.mu.Unlock()
		if len(p) > 0 {
			p[0].done(nil)
		} else if c.cfg.Resubscribed != nil {
			c.cfg.Resubscribed(m.Channel)
		}
	}
}
