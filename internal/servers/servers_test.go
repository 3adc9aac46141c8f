package servers_test

import (
	"testing"

	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// Each server must come up, answer its probe, and come back on the same
// address after a restart — the fault tests rely on all three.
func TestServersStartAndRestart(t *testing.T) {
	for name, start := range map[string]func(testing.TB) interface {
		Addr() string
	}{
		"redis":     func(t testing.TB) interface{ Addr() string } { return servertest.Redis(t) },
		"etcd":      func(t testing.TB) interface{ Addr() string } { return servertest.Etcd(t) },
		"zookeeper": func(t testing.TB) interface{ Addr() string } { return servertest.ZooKeeper(t) },
		"mariadb":   func(t testing.TB) interface{ Addr() string } { return servertest.MariaDB(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := start(t)
			if p.Addr() == "" {
				t.Fatal("empty address")
			}
		})
	}
}

func TestRestartKeepsAddress(t *testing.T) {
	p := servertest.Redis(t)
	addr, pid := p.Addr(), p.Pid()
	if err := p.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr || p.Pid() == pid {
		t.Fatalf("after restart: addr %s pid %d, want addr %s and a new pid (was %d)", p.Addr(), p.Pid(), addr, pid)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-testwait.Until(t).Done():
		t.Fatal("process did not exit after Kill")
	}
}

// FreePort stays below the ephemeral range, where no outgoing connection
// can hold a port a restarted server must bind again.
func TestFreePortBelowTheEphemeralRange(t *testing.T) {
	hi := servers.EphemeralLow()
	for range 50 {
		port, err := servers.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < 10000 || port >= hi {
			t.Fatalf("FreePort() = %d, want in [10000, %d)", port, hi)
		}
	}
}
