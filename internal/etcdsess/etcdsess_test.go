package etcdsess_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"seckill/internal/etcdsess"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

func leaseTTL(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	resp, err := cli.TimeToLive(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL // -1 once the lease is gone
}

func TestSession(t *testing.T) {
	cli := servertest.EtcdClient(t, servertest.Etcd(t).Addr())

	t.Run("ReusedWhileAlive", func(t *testing.T) {
		m := etcdsess.New(cli, 1500*time.Millisecond)
		t.Cleanup(func() { _ = m.Close() })
		if got, want := m.TTL(), 2*time.Second; got != want {
			t.Fatalf("TTL() = %v, want %v (rounded up to whole seconds)", got, want)
		}
		// Concurrent first callers share one grant.
		var wg sync.WaitGroup
		got := make([]*concurrency.Session, 8)
		for i := range got {
			wg.Go(func() {
				s, err := m.Session(t.Context())
				if err != nil {
					t.Error(err)
				}
				got[i] = s
			})
		}
		wg.Wait()
		for i, s := range got {
			if s != got[0] {
				t.Fatalf("caller %d got session %p, want the shared %p", i, s, got[0])
			}
		}
		if ttl := leaseTTL(t, cli, got[0].Lease()); ttl <= 0 {
			t.Fatalf("lease TTL = %d, want alive", ttl)
		}
	})

	t.Run("ReplacedAfterRevoke", func(t *testing.T) {
		m := etcdsess.New(cli, time.Second)
		t.Cleanup(func() { _ = m.Close() })
		s1, err := m.Session(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Revoke(t.Context(), s1.Lease()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s1.Done():
		case <-testwait.Until(t).Done():
			t.Fatal("session Done not closed after its lease was revoked")
		}
		s2, err := m.Session(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s2 == s1 || s2.Lease() == s1.Lease() {
			t.Fatalf("got the expired session (lease %x) back, want a new one", s1.Lease())
		}
		if ttl := leaseTTL(t, cli, s2.Lease()); ttl <= 0 {
			t.Fatalf("new lease TTL = %d, want alive", ttl)
		}
	})

	t.Run("EndRevokesAndReplaces", func(t *testing.T) {
		m := etcdsess.New(cli, 10*time.Second)
		t.Cleanup(func() { _ = m.Close() })
		s1, err := m.Session(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := m.End(t.Context(), s1); err != nil {
			t.Fatalf("End: %v", err)
		}
		select {
		case <-s1.Done():
		default:
			t.Fatal("session Done not closed after End")
		}
		if ttl := leaseTTL(t, cli, s1.Lease()); ttl != -1 {
			t.Fatalf("lease TTL after End = %d, want -1 (revoked)", ttl)
		}
		if err := m.End(t.Context(), s1); err != nil {
			t.Fatalf("second End = %v, want nil (lease already gone)", err)
		}
		s2, err := m.Session(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s2.Lease() == s1.Lease() {
			t.Fatalf("Session after End returned the ended lease %x", s1.Lease())
		}
	})

	t.Run("CloseRevokes", func(t *testing.T) {
		m := etcdsess.New(cli, 10*time.Second)
		s, err := m.Session(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if ttl := leaseTTL(t, cli, s.Lease()); ttl != -1 {
			t.Fatalf("lease TTL after Close = %d, want -1 (revoked, not left to expire)", ttl)
		}
		select {
		case <-s.Done():
		default:
			t.Fatal("session Done not closed after Close")
		}
		if _, err := m.Session(t.Context()); !errors.Is(err, etcdsess.ErrClosed) {
			t.Fatalf("Session after Close = %v, want ErrClosed", err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("second Close = %v, want nil", err)
		}
	})
}

// A Manager whose etcd does not answer fails within the caller's deadline
// and says why.
func TestSessionUnavailable(t *testing.T) {
	addr, err := servers.LoopbackAddr() // nothing listens here
	if err != nil {
		t.Fatal(err)
	}
	m := etcdsess.New(servertest.EtcdClient(t, addr), time.Second)
	t.Cleanup(func() { _ = m.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = m.Session(ctx)
	if !errors.Is(err, etcdsess.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Session = %v, want ErrUnavailable wrapping DeadlineExceeded", err)
	}
	// The error says what ended the call: the deadline (otherwise an
	// unreachable server is waited for for ever, and a hang fails the
	// test binary). How long after it the machine took is only noted.
	waited := time.Since(start)
	note := ""
	if waited > 5*time.Second {
		note = " (SLOW)"
	}
	t.Logf("Session returned after %v with a 300ms deadline%s", waited.Round(time.Millisecond), note)
}

// ValidUntil is timed from the request that proved the lease alive: never
// later than a TTL after the grant was sent, moved on by keep-alives, and
// zero once the session is over.
func TestValidUntil(t *testing.T) {
	cli := servertest.EtcdClient(t, servertest.Etcd(t).Addr())
	m := etcdsess.New(cli, time.Second)
	t.Cleanup(func() { _ = m.Close() })
	before := time.Now()
	s, err := m.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ttlResp, err := cli.TimeToLive(t.Context(), s.Lease())
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Duration(ttlResp.GrantedTTL) * time.Second
	v := m.ValidUntil(s)
	if !v.After(time.Now()) || v.After(before.Add(granted)) {
		t.Fatalf("ValidUntil right after the grant = before+%v, want in (now, before+%v]", v.Sub(before), granted)
	}
	// Two TTLs later the grant alone would have lapsed: only keep-alives
	// confirmed since can keep the validity in the future. The time passing
	// is the point: a sleep, not a bound on an event.
	time.Sleep(2 * granted)
	if v2 := m.ValidUntil(s); !v2.After(time.Now()) {
		t.Fatalf("ValidUntil two TTLs after the grant = %v ago, want in the future (kept alive)", time.Since(v2))
	}
	if err := m.End(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if v := m.ValidUntil(s); !v.IsZero() {
		t.Fatalf("ValidUntil after End = %v, want the zero time", v)
	}
}
