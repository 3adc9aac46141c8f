package replicaname

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Docker's PTR names of compose containers become "<service>-<n>" whatever
// the compose version and however many dashes and underscores the project
// and the service hold; anything else is not taken for a compose name.
func TestComposeReplicaName(t *testing.T) {
	for _, tc := range []struct {
		ptr, want string
	}{
		{"seckill-stockd-1.seckill_default.", "stockd-1"},                                         // compose v2
		{"seckill_stockd_3.seckill_default.", "stockd-3"},                                         // docker-compose v1
		{"seckill-ct-1763900000-4242_stockd_12.seckill-ct-1763900000-4242_default.", "stockd-12"}, // compose-test's projects
		{"my_lab-stockd-2.my_lab_default", "stockd-2"},                                            // an underscore in the project, no final dot
		{"lab-stock-api-4.lab_backend.", "stock-api-4"},                                           // a dash in the service, a named network
		{"lab-stockd-2.lab_default.", "stockd-2"},
		{"0123456789ab.bridge.", ""},                // plain docker run: the container id
		{"seckill-stockd.seckill_default.", ""},     // no replica number
		{"other-stockd-1.seckill_default.", ""},     // not the network's project
		{"seckill-stockd-1", ""},                    // no network
		{"host-7.example.com.", ""},                 // a host's PTR outside Docker
		{"seckill-stockd-1.seckill_default.x.", ""}, // more labels than Docker's two
		{"", ""},
	} {
		got, ok := composeReplicaName(tc.ptr)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("composeReplicaName(%q) = %q, %v; want %q", tc.ptr, got, ok, tc.want)
		}
	}
}

// Only Docker's embedded DNS is asked: any other resolver configuration
// leaves the host name, without a lookup.
func TestUsesDockerDNS(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		conf string
		want bool
	}{
		{"search x\nnameserver 127.0.0.11\noptions ndots:0\n", true},
		{"nameserver 10.0.0.2\n", false},
		{"# nameserver 127.0.0.11\nnameserver 127.0.0.53\n", false},
		{"nameserver 127.0.0.110\n", false},
	} {
		p := filepath.Join(dir, "resolv.conf")
		if err := os.WriteFile(p, []byte(tc.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := usesDockerDNS(p); got != tc.want {
			t.Errorf("usesDockerDNS(%q) = %v, want %v", tc.conf, got, tc.want)
		}
	}
	if usesDockerDNS(filepath.Join(dir, "missing")) {
		t.Error("a missing resolv.conf taken for Docker's")
	}
}

// lookupPTR asks the server itself (not /etc/hosts, where Docker maps the
// address to the container id) and returns what it answers, which
// composeReplicaName then reads; a silent server costs no more than the
// context's bound.
func TestLookupPTR(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	asked := make(chan string, 4)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 || q.Questions[0].Type != dnsmessage.TypePTR {
				continue
			}
			asked <- q.Questions[0].Name.String()
			a := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true}, Questions: q.Questions}
			if q.Questions[0].Name.String() == "2.0.18.172.in-addr.arpa." {
				a.Answers = []dnsmessage.Resource{{
					Header: dnsmessage.ResourceHeader{Name: q.Questions[0].Name, Type: dnsmessage.TypePTR, Class: dnsmessage.ClassINET, TTL: 600},
					Body:   &dnsmessage.PTRResource{PTR: dnsmessage.MustNewName("seckill_stockd_2.seckill_default.")},
				}}
			} else {
				a.RCode = dnsmessage.RCodeNameError
			}
			b, _ := a.Pack()
			_, _ = pc.WriteTo(b, from)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	names, err := lookupPTR(ctx, pc.LocalAddr().String(), netip.MustParseAddr("172.18.0.2"))
	if err != nil || len(names) != 1 {
		t.Fatalf("lookupPTR: %q, %v; want one name", names, err)
	}
	if q := <-asked; q != "2.0.18.172.in-addr.arpa." {
		t.Fatalf("asked %q", q)
	}
	if got, ok := composeReplicaName(names[0]); !ok || got != "stockd-2" {
		t.Fatalf("PTR %q gave %q, %v; want stockd-2", names[0], got, ok)
	}
	if names, err := lookupPTR(ctx, pc.LocalAddr().String(), netip.MustParseAddr("172.18.0.9")); err == nil {
		t.Fatalf("NXDOMAIN: got %q, want an error", names)
	}

	// A server that never answers: the bound holds.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	short, cancel2 := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel2()
	if _, err := lookupPTR(short, silent.LocalAddr().String(), netip.MustParseAddr("172.18.0.2")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a silent server: got %v, want the context's deadline", err)
	}
}

func TestReverseName(t *testing.T) {
	for ip, want := range map[string]string{
		"172.18.0.2":  "2.0.18.172.in-addr.arpa.",
		"2001:db8::1": "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
	} {
		if got := reverseName(netip.MustParseAddr(ip)); got != want {
			t.Errorf("reverseName(%s) = %q, want %q", ip, got, want)
		}
	}
}
