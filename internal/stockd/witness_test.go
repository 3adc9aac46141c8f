package stockd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"seckill/internal/api"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
)

// sellOnce posts one sale and returns its status and answer.
func sellOnce(t *testing.T, p *servers.Process) (int, api.Sale) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.Addr()+"/stock/reduce", nil)
	code, body := send(t, req)
	var s api.Sale
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("sale: %d %s: %v", code, body, err)
	}
	return code, s
}

// The stock Redis restarted from an older snapshot while the only stockd
// restarted too, so no running process remembers the sales it lost. With
// stock.witness etcd the new stockd learns from etcd how low the stock
// went and refuses to sell (503 store_lost, went back in time; /readyz says store_rewound); with
// none, the control, it believes the snapshot and sells its units again.
func TestBinaryWitnessCatchesRewindAcrossRestarts(t *testing.T) {
	etcd := servertest.Etcd(t)
	maria := servertest.MariaDB(t)
	for _, tc := range []struct {
		witness string
		caught  bool
		where   string
		weak    []string // what /info says the witness does not survive
	}{
		{"etcd", true, "etcd /seckill/witness/stock-etcd", []string{"a 1-member etcd", "on the stock Redis's host"}},
		{"mysql", true, "mysql stock_witness/stock-mysql", []string{"whose replication stockd does not check", "on the stock Redis's host"}},
		{"none", false, "", nil},
	} {
		t.Run(tc.witness, func(t *testing.T) {
			srv := servertest.Redis(t)
			env := []string{"STOCKD_STOCK_MODE=atomic", "STOCKD_STOCK_WITNESS=" + tc.witness,
				"STOCKD_ETCD_ENDPOINTS=http://" + etcd.Addr(), "STOCKD_STOCK_KEY=stock-" + tc.witness,
				"STOCKD_MYSQL_DSN=" + servers.MariaDBDSN(maria.Addr())}
			p := stockdOn(t, srv.Addr(), env...)
			resetStock(t, p.Addr(), 50)
			sell := func(n int) {
				for range n {
					if code, s := sellOnce(t, p); code != http.StatusOK {
						t.Fatalf("sale: %d %+v", code, s)
					}
				}
			}
			sell(3)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer rdb.Close()
			if err := rdb.Save(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			sell(4) // answered 200, lost with the snapshot
			p = restartFromSnapshot(t, p, srv, env...)
			code, s := sellOnce(t, p)
			if !tc.caught {
				if code != http.StatusOK || s.Stock == nil || *s.Stock != 46 {
					t.Fatalf("control: sale on the rewound Redis %d %+v; want 200 stock 46, a unit sold twice", code, s)
				}
				return
			}
			if code != http.StatusServiceUnavailable || s.Result != api.StoreLost || !strings.Contains(s.Error, "went back in time") {
				t.Fatalf("sale on the rewound Redis: %d %+v; want 503 %s, went back in time", code, s, api.StoreLost)
			}
			st, ready, raw := readyz(t, p)
			if st != http.StatusServiceUnavailable || !strings.HasPrefix(ready.Stock, string(api.StoreRewound)) || ready.Witness != api.OK {
				t.Fatalf("/readyz %d %s; want 503, stock %s, witness ok", st, raw, api.StoreRewound)
			}
			i, raw := info(t, p)
			if i.Durability == nil || !strings.Contains(i.Durability.Rewind, tc.where) {
				t.Fatalf("GET /info: %s; want durability.rewind naming the witness", raw)
			}
			// The lab's witness is one server on this machine: the claim
			// says so rather than "durable".
			for _, w := range tc.weak {
				if !strings.Contains(i.Durability.Rewind, w) {
					t.Fatalf("GET /info: %s; want durability.rewind to say the witness is %q", raw, w)
				}
			}
		})
	}
}

// Items under the witness, through the binary: each item has a register
// of its own beside the default sale's, so an item whose Redis restarted
// from an older snapshot, while the only stockd restarted too, halts at
// its first sale (503 store_lost, GET /items/x halted), and an item that
// sold nothing since the snapshot goes on selling.
func TestBinaryItemWitnessCatchesRewind(t *testing.T) {
	etcd := servertest.Etcd(t)
	maria := servertest.MariaDB(t)
	for _, tc := range []struct {
		witness string
		check   func(t *testing.T) // the item's own register holds its record
	}{
		{"etcd", func(t *testing.T) {
			cli := servertest.EtcdClient(t, etcd.Addr())
			resp, err := cli.Get(t.Context(), "/seckill/witness/stock-etcd:item:x")
			if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), "ceilings") {
				t.Fatalf("item x's etcd register: %v, %v; want its record", resp, err)
			}
		}},
		{"mysql", nil},
	} {
		t.Run(tc.witness, func(t *testing.T) {
			srv := servertest.Redis(t)
			env := []string{"STOCKD_STOCK_MODE=atomic", "STOCKD_STOCK_WITNESS=" + tc.witness,
				"STOCKD_ETCD_ENDPOINTS=http://" + etcd.Addr(), "STOCKD_STOCK_KEY=stock-" + tc.witness,
				"STOCKD_MYSQL_DSN=" + servers.MariaDBDSN(maria.Addr())}
			p := stockdOn(t, srv.Addr(), env...)
			call := func(method, path, body string) (int, map[string]any) {
				t.Helper()
				req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+p.Addr()+path, strings.NewReader(body))
				req.Header.Set("X-Admin-Token", testAdminToken)
				return sendJSON(t, req)
			}
			sell := func(id string, n int) {
				t.Helper()
				for range n {
					if code, v := call(http.MethodPost, "/items/"+id+"/reduce", ""); code != http.StatusOK {
						t.Fatalf("sale of %s: %d %v", id, code, v)
					}
				}
			}
			for _, id := range []string{"x", "y"} {
				if code, v := call(http.MethodPost, "/items", `{"id":"`+id+`","stock":20}`); code != http.StatusCreated {
					t.Fatalf("create %s: %d %v", id, code, v)
				}
			}
			sell("x", 2)
			sell("y", 2)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer rdb.Close()
			if err := rdb.Save(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			sell("x", 3) // answered 200, lost with the snapshot
			if tc.check != nil {
				tc.check(t)
			}
			p = restartFromSnapshot(t, p, srv, env...)
			if code, v := call(http.MethodPost, "/items/x/reduce", ""); code != http.StatusServiceUnavailable || v["result"] != string(api.StoreLost) {
				t.Fatalf("sale of the rewound item: %d %v; want 503 %s", code, v, api.StoreLost)
			}
			if code, v := call(http.MethodGet, "/items/x", ""); code != http.StatusOK || v["state"] != "halted" || v["stock"] != float64(18) {
				t.Fatalf("the rewound item: %d %v; want halted at the snapshot's 18", code, v)
			}
			sell("y", 1)
			if code, v := call(http.MethodGet, "/items/y", ""); code != http.StatusOK || v["state"] != "open" || v["stock"] != float64(17) {
				t.Fatalf("the item beside it: %d %v; want open, 17 left", code, v)
			}
		})
	}
}

// restartFromSnapshot stops stockd p, kills its Redis srv (which comes back
// from its last snapshot: what was sold since is lost) and starts a new
// stockd with env on it: every process's memory of the sale is gone too.
func restartFromSnapshot(t *testing.T, p, srv *servers.Process, env ...string) *servers.Process {
	t.Helper()
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return stockdOn(t, srv.Addr(), env...)
}

// A host crash, as compose's witness on tmpfs would meet it: the witness
// forgot (its etcd key gone), the stock Redis came back from an older
// snapshot, and the only stockd restarted. Before, the new stockd adopted
// Redis's epoch silently and sold the lost units again; now it halts the
// sale witness_lost, and the operator's adoption (who decided, the books
// then) is the way back that keeps the sale.
func TestBinaryWitnessLostHaltsUntilAdopted(t *testing.T) {
	etcd := servertest.Etcd(t)
	srv := servertest.Redis(t)
	env := []string{"STOCKD_STOCK_MODE=atomic", "STOCKD_STOCK_WITNESS=etcd",
		"STOCKD_ETCD_ENDPOINTS=http://" + etcd.Addr(), "STOCKD_STOCK_KEY=stock-lost"}
	p := stockdOn(t, srv.Addr(), env...)
	resetStock(t, p.Addr(), 50)
	sell := func(n int) {
		t.Helper()
		for range n {
			if code, s := sellOnce(t, p); code != http.StatusOK {
				t.Fatalf("sale: %d %+v", code, s)
			}
		}
	}
	sell(3)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	if err := rdb.Save(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	sell(4) // answered 200, lost with the snapshot
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Addr()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Delete(t.Context(), witnessPrefix+"/stock-lost"); err != nil {
		t.Fatal(err)
	}
	p = restartFromSnapshot(t, p, srv, env...)

	code, s := sellOnce(t, p)
	if code != http.StatusServiceUnavailable || s.Result != api.StoreLost {
		t.Fatalf("sale on a forgotten witness and a rewound Redis: %d %+v; want 503 %s, never a unit sold twice", code, s, api.StoreLost)
	}
	if why, err := rdb.Get(t.Context(), "stock-lost:halt").Result(); err != nil || !strings.HasPrefix(why, "witness_lost") {
		t.Fatalf("halt %q, %v; want witness_lost", why, err)
	}
	if st, _, raw := readyz(t, p); st != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d %s; want 503, halted", st, raw)
	}

	adopt := func(body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.Addr()+"/stock/witness/adopt", strings.NewReader(body))
		req.Header.Set("X-Admin-Token", testAdminToken)
		return send(t, req)
	}
	if code, raw := adopt(`{"by":"ops","BY":"x"}`); code != http.StatusBadRequest {
		t.Fatalf("adoption with an unknown field: %d %s; want 400", code, raw)
	}
	code, raw := adopt(`{"by":"ops@example"}`)
	var a api.Adoption
	if err := json.Unmarshal(raw, &a); code != http.StatusOK || err != nil || a.By != "ops@example" || a.Lucky != 3 || !strings.HasPrefix(a.Lifted, "witness_lost") {
		t.Fatalf("adoption: %d %s; want 200 by ops@example, lucky 3 (the snapshot's), the halt lifted", code, raw)
	}
	if code, s := sellOnce(t, p); code != http.StatusOK || s.Stock == nil || *s.Stock != 46 {
		t.Fatalf("sale after the adoption: %d %+v; want 200, stock 46", code, s)
	}
	if st, _, raw := readyz(t, p); st != http.StatusOK {
		t.Fatalf("/readyz after the adoption %d %s; want 200", st, raw)
	}
}
