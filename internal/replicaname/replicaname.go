// Package replicaname names a replica that was not given a name: in a
// compose container, the "<service>-<n>" compose numbers it by, learned
// from Docker's DNS; elsewhere the host name.
package replicaname

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dockerDNS is Docker's embedded DNS server, which every container on a
// user-defined network (every compose network) has as its only nameserver.
const dockerDNS = "127.0.0.11:53"

// lookupTimeout bounds the whole reverse lookup at start-up: a
// replica must not hang on a slow resolver to learn a cosmetic name.
const lookupTimeout = 2 * time.Second

// Default is the replica name when none is configured: in a
// compose container, "<service>-<n>" (stockd-1, stockd-2, …) as compose
// numbers its containers; elsewhere, or when that fails within the timeout,
// the host name (a container id under plain Docker, the pod name in
// Kubernetes).
//
// Compose sets no per-replica variable and a scaled service cannot have a
// per-replica hostname, so the name comes from Docker's DNS: the PTR record
// of the container's own address is "<container>.<network>", and compose's
// container names end in the service and the replica number.
func Default(ctx context.Context) string {
	host, _ := os.Hostname()
	if !usesDockerDNS("/etc/resolv.conf") {
		return host
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	for _, ip := range ownAddrs() {
		names, err := lookupPTR(ctx, dockerDNS, ip)
		if err != nil {
			continue
		}
		for _, n := range names {
			if name, ok := composeReplicaName(n); ok {
				return name
			}
		}
	}
	return host
}

// lookupPTR asks server for ip's PTR records. Not net.Resolver: Go's
// resolver answers a reverse lookup from /etc/hosts first, where Docker
// maps the container's address to its id.
func lookupPTR(ctx context.Context, server string, ip netip.Addr) ([]string, error) {
	arpa, err := dnsmessage.NewName(reverseName(ip))
	if err != nil {
		return nil, err
	}
	id := uint16(time.Now().UnixNano())
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: arpa, Type: dnsmessage.TypePTR, Class: dnsmessage.ClassINET}},
	}
	req, err := q.Pack()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	buf := make([]byte, 1500)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) != nil || m.ID != id || !m.Response {
			continue // not the answer to this query
		}
		var names []string
		for _, a := range m.Answers {
			if ptr, ok := a.Body.(*dnsmessage.PTRResource); ok {
				names = append(names, ptr.PTR.String())
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("PTR %s: %v, no record", ip, m.RCode)
		}
		return names, nil
	}
}

// reverseName is ip's name under in-addr.arpa or ip6.arpa.
func reverseName(ip netip.Addr) string {
	var b strings.Builder
	if ip.Is4() {
		a := ip.As4()
		fmt.Fprintf(&b, "%d.%d.%d.%d.in-addr.arpa.", a[3], a[2], a[1], a[0])
		return b.String()
	}
	a := ip.As16()
	for i := len(a) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "%x.%x.", a[i]&0xf, a[i]>>4)
	}
	b.WriteString("ip6.arpa.")
	return b.String()
}

// usesDockerDNS reports whether the resolver configuration names Docker's
// embedded DNS: outside a compose network no PTR record would carry a
// compose name, and asking another resolver could only cost start-up time.
func usesDockerDNS(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" && f[1] == "127.0.0.11" {
			return true
		}
	}
	return false
}

// ownAddrs is this host's non-loopback unicast addresses.
func ownAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

var serviceNumber = regexp.MustCompile(`^([a-zA-Z0-9][a-zA-Z0-9_-]*?)[-_]([0-9]+)$`)

// composeReplicaName derives "<service>-<n>" from a PTR name of Docker's DNS,
// "<container>.<network>[.]". Compose names the network "<project>_<name>"
// and the container "<project>-<service>-<n>" (compose v2) or
// "<project>_<service>_<n>" (docker-compose v1); the project, which may
// itself hold dashes and underscores, is found as the network's prefix, so
// a service name with dashes survives whole. false: not a compose name.
func composeReplicaName(ptr string) (string, bool) {
	container, network, ok := strings.Cut(strings.TrimSuffix(ptr, "."), ".")
	if !ok || container == "" || network == "" || strings.Contains(network, ".") {
		return "", false
	}
	// The longest project first: "a_b_default" may be project "a_b".
	for i := len(network) - 1; i > 0; i-- {
		if network[i] != '_' {
			continue
		}
		project := network[:i]
		if len(container) <= len(project)+1 || !strings.HasPrefix(container, project) {
			continue
		}
		if sep := container[len(project)]; sep != '-' && sep != '_' {
			continue
		}
		if m := serviceNumber.FindStringSubmatch(container[len(project)+1:]); m != nil {
			return m[1] + "-" + m[2], true
		}
	}
	return "", false
}
