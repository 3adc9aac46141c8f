package localcluster

import "testing"

// MariaDB is started for the mysql backends' locks and for durable orders,
// whichever backend guards the sale.
func TestNeedsMariaDB(t *testing.T) {
	for _, tc := range []struct {
		backend string
		env     map[string]string
		want    bool
	}{
		{"redis", nil, false},
		{"mysql", nil, true},
		{"mysql-row", nil, true},
		{"redis", map[string]string{"orders.durable": "true"}, true},
		{"etcd", map[string]string{"STOCKD_ORDERS_DURABLE": "1"}, true},
		{"redis", map[string]string{"orders.durable": "false"}, false},
		{"redis", map[string]string{"stock.ledger": "true"}, false},
	} {
		if got := needsMariaDB(tc.backend, normalizeEnv(tc.env)); got != tc.want {
			t.Errorf("needsMariaDB(%q, %v) = %v, want %v", tc.backend, tc.env, got, tc.want)
		}
	}
}
