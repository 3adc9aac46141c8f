package stockd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/election/audit"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/stock/redisstore"
)

// clusterEnv runs stockd on cl, the sale's keys under the hash tag the
// docs give.
func clusterEnv(cl *servers.RedisCluster, env ...string) []string {
	return append([]string{
		"STOCKD_REDIS_CLUSTER_ADDRS=" + strings.Join(cl.Addrs(), ","),
		"STOCKD_STOCK_KEY={stock}",
		"STOCKD_STOCK_LUCKY_KEY={stock}:lucky",
		"STOCKD_STOCK_FENCE_KEY={stock}:fence",
		"STOCKD_LOCK_KEY={lock}",
		// A step that must be acknowledged waits no longer than its ack;
		// the bound is for a stopped replica, which cannot ack at all.
		"STOCKD_REDIS_TIMEOUT=3s",
		"STOCKD_STOCK_REPLICA_ACK_TIMEOUT=2s",
		"STOCKD_STOCK_CONFIRM_TIMEOUT=5s",
	}, env...)
}

// stockd on a Redis Cluster, with each lock that keeps its keys there and
// in atomic mode: the default sale and six items sell out exactly, in
// parallel, with the books of each in its own master's keys; the items
// land on more than one master; and a sale waits for a replica of the
// master that ran it (min_replica_acks is 1 by default on a cluster).
func TestBinaryOnACluster(t *testing.T) {
	cl := servertest.RedisCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	for _, mode := range []struct{ name, backend, mode string }{
		{"redis lock", "redis", "locked"},
		{"redisson lock", "redisson", "locked"},
		{"atomic", "redis", "atomic"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			p := startStockd(t, clusterEnv(cl, "STOCKD_LOCK_BACKEND="+mode.backend, "STOCKD_STOCK_MODE="+mode.mode)...)
			sellOutOnCluster(t, p.Addr(), cc, strings.ReplaceAll(mode.name, " ", "-"))
		})
	}

	t.Run("acks", func(t *testing.T) {
		p := startStockd(t, clusterEnv(cl, "STOCKD_LOCK_BACKEND=redis")...)
		resetStock(t, p.Addr(), 10)
		inf, _ := info(t, p)
		if !inf.Cluster || inf.MinReplicaAcks != 1 {
			t.Errorf("/info: cluster %v, min_replica_acks %v; want true and 1 (its default on a cluster)", inf.Cluster, inf.MinReplicaAcks)
		}
		node, err := cc.MasterForKey(t.Context(), "{stock}")
		if err != nil {
			t.Fatal(err)
		}
		var replica *servers.Process
		for _, m := range cl.Masters() {
			if m.Addr() == node.Options().Addr {
				replica = cl.ReplicaOf(m)
			}
		}
		if replica == nil {
			t.Fatalf("{stock}'s master %s is not one the cluster was formed with", node.Options().Addr)
		}
		if code, sale := reduceOn(t, p.Addr(), "/stock/reduce"); code != http.StatusOK || sale.Result != api.Sold {
			t.Fatalf("with the replica up: %d %+v, want 200 sold", code, sale)
		}
		if err := replica.Pause(); err != nil {
			t.Fatal(err)
		}
		code, sale := reduceOn(t, p.Addr(), "/stock/reduce")
		if err := replica.Resume(); err != nil {
			t.Fatal(err)
		}
		if code != http.StatusServiceUnavailable || sale.Result != api.Unconfirmed {
			t.Fatalf("with {stock}'s replica stopped: %d %+v, want 503 unconfirmed (the WAIT went to its master)", code, sale)
		}
	})

	// More acks than any master has replicas: stockd starts, and says at
	// start, master by master, that their sales will be unconfirmed.
	t.Run("too few replicas for the acks", func(t *testing.T) {
		p := startStockd(t, clusterEnv(cl, "STOCKD_LOCK_BACKEND=redis", "STOCKD_STOCK_MIN_REPLICA_ACKS=2")...)
		logs := p.LogTail(200)
		for _, m := range cl.Masters() {
			if !strings.Contains(logs, "fewer replicas than stock.min_replica_acks") || !strings.Contains(logs, "master="+m.Addr()) {
				t.Errorf("no warning naming master %s in stockd's log:\n%s", m.Addr(), logs)
			}
		}
	})

	// Every master is checked at start, not the one a command happens
	// to reach: the last may hold no key of the default sale.
	t.Run("an evicting master is refused", func(t *testing.T) {
		last := cl.Masters()[len(cl.Masters())-1]
		rdb := redis.NewClient(&redis.Options{Addr: last.Addr()})
		defer rdb.Close()
		setPolicy := func(p string) {
			if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", p).Err(); err != nil {
				t.Fatal(err)
			}
		}
		setPolicy("allkeys-lru")
		defer setPolicy("noeviction")
		addr, err := servers.LoopbackAddr()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, stockdBinary(t))
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "STOCKD_HTTP_ADDR=" + addr, "STOCKD_ADMIN_TOKEN=" + testAdminToken},
			clusterEnv(cl)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitConfig {
			t.Fatalf("got %v, want exit status 2; stderr:\n%s", err, stderr.String())
		}
		if want := "master " + last.Addr() + ": evicting: maxmemory-policy allkeys-lru"; !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not name the master (%q):\n%s", want, stderr.String())
		}
	})
}

// sellOutOnCluster sells the default sale and six items (ids prefixed by
// tag) out through the stockd at addr, 8 buyers each, and checks each
// one's books in the cluster: stock 0, lucky the initial stock.
func sellOutOnCluster(t *testing.T, addr string, cc *redis.ClusterClient, tag string) {
	const units = 20
	resetStock(t, addr, units)
	paths := []string{"/stock/reduce"}
	for i := range 6 {
		id := fmt.Sprintf("%s-%d", tag, i)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/items",
			strings.NewReader(fmt.Sprintf(`{"id":%q,"stock":%d}`, id, units)))
		req.Header.Set("X-Admin-Token", testAdminToken)
		if code, body := send(t, req); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, code, body)
		}
		paths = append(paths, "/items/"+id+"/reduce")
	}
	sold := make([]int, len(paths))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i, path := range paths {
		for range 8 {
			// Each buyer goes on until it is told sold out; a busy lock
			// (its wait ran out on a busy machine) is tried again.
			wg.Go(func() {
				for t.Context().Err() == nil {
					code, sale := reduceOn(t, addr, path)
					switch {
					case code == http.StatusOK && sale.Result == api.Sold:
						mu.Lock()
						sold[i]++
						mu.Unlock()
					case code == http.StatusServiceUnavailable && sale.Result == api.Busy:
					case code == http.StatusConflict && sale.Result == api.SoldOut:
						return
					default:
						t.Errorf("%s: %d %+v", path, code, sale)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	ctx := t.Context()
	masters := map[string]bool{}
	for i, path := range paths {
		stockKey, luckyKey := "{stock}", "{stock}:lucky"
		if i > 0 {
			id := strings.TrimSuffix(strings.TrimPrefix(path, "/items/"), "/reduce")
			stockKey, luckyKey = "{item:"+id+"}:stock", "{item:"+id+"}:lucky"
			node, err := cc.MasterForKey(ctx, stockKey)
			if err != nil {
				t.Fatal(err)
			}
			masters[node.Options().Addr] = true
		}
		left, err1 := cc.Get(ctx, stockKey).Int64()
		lucky, err2 := cc.Get(ctx, luckyKey).Int64()
		if err1 != nil || err2 != nil || sold[i] != units || left != 0 || lucky != units {
			t.Errorf("%s: %d answered sold, %s %d (%v), %s %d (%v); want %d sold, stock 0, lucky %d",
				path, sold[i], stockKey, left, err1, luckyKey, lucky, err2, units, units)
		}
	}
	if len(masters) < 2 {
		t.Errorf("six items on %d master(s) of 3: %v, want them spread", len(masters), masters)
	}
}

func reduceOn(t *testing.T, addr, path string) (int, api.Sale) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, nil)
	code, body := send(t, req)
	var sale api.Sale
	if err := json.Unmarshal(body, &sale); err != nil {
		t.Errorf("%s: %d %s: not JSON", path, code, body)
	}
	return code, sale
}

// The audit's record script writes its stream and its terms: one slot on a
// cluster, the documented names on one Redis.
func TestAuditKeysOnACluster(t *testing.T) {
	c := validConfig(t)
	if stream, term := auditKeys(c); stream != audit.DefaultStream || term != audit.DefaultTermKey {
		t.Errorf("on one Redis: %q %q, want the defaults", stream, term)
	}
	clusterConfigured(c)
	stream, term := auditKeys(c)
	if tag := redisstore.HashTag(stream); tag == "" || tag != redisstore.HashTag(term) || stream == term {
		t.Errorf("on a cluster: %q %q, want two keys under one hash tag", stream, term)
	}
}
