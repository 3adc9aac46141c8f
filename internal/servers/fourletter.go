package servers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// fourLetterTimeout bounds a four-letter command (or ctx, if sooner): the
// server answers at once or not at all.
const fourLetterTimeout = 5 * time.Second

// FourLetter sends one of ZooKeeper's four-letter commands ("srvr", "mntr",
// "ruok"; the server's 4lw.commands.whitelist must allow it) to the server
// at addr and returns its whole reply. The server closes the connection
// after answering, which ends the read.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, fourLetterTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zookeeper %s: %w", cmd, err)
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("zookeeper %s: %w", cmd, err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return string(b), fmt.Errorf("zookeeper %s: %w", cmd, err)
	}
	return string(b), nil
}

// ZooKeeperStat reads one integer of the server's mntr report, e.g.
// "zk_packets_received" or "zk_watch_count".
func ZooKeeperStat(ctx context.Context, addr, name string) (int64, error) {
	out, err := FourLetter(ctx, addr, "mntr")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "\t"); ok && k == name {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("zookeeper mntr: %s %q: %w", name, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("zookeeper mntr: no %s in %q", name, out)
}

// zookeeperReady is true once the server serves requests, not merely
// listens: srvr answers "This ZooKeeper instance is not currently serving
// requests" until then (ruok answers imok before that), and a session
// asked for in between waits on a server still loading.
func zookeeperReady(ctx context.Context, addr string) error {
	out, err := FourLetter(ctx, addr, "srvr")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(out, "Zookeeper version:") {
		first, _, _ := strings.Cut(out, "\n")
		return fmt.Errorf("zookeeper srvr: %q, not serving yet", first)
	}
	return nil
}
