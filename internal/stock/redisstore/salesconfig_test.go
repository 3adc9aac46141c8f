package redisstore_test

import (
	"context"
	"testing"

	"seckill/internal/stock"
	"seckill/internal/stock/redisstore"
)

// namedRegister is a witness register that only has a name.
type namedRegister string

func (r namedRegister) Name() string                                    { return string(r) }
func (namedRegister) Get(context.Context) ([]byte, error)               { return nil, nil }
func (namedRegister) Put(context.Context, []byte, []byte) (bool, error) { return true, nil }

// namedUnits are durable orders that only have a sale's id.
type namedUnits string

func (namedUnits) HighestUnit(context.Context, string) (int64, error) { return 0, nil }

// Every sale's store and service are built by one recipe, the default
// sale's (id "") as an item's: the same acks, witness, durable copy and
// service template, each named for its sale. The default keeps the
// articles' names (its keys, its lock key, its register).
func TestSalesConfigBuildsEverySale(t *testing.T) {
	base := defaultBase.Derive(true)
	acks := redisstore.ReplicaAcks{Replicas: 1}
	c := redisstore.ItemsConfig{
		Base: base, Acks: acks,
		Witness: func(id string) stock.Register { return namedRegister("w/" + id) },
		Units:   func(id string) redisstore.DurableUnits { return namedUnits(id) },
		Service: stock.ServiceConfig{LockKey: "seckill:lock", PerUserLimit: 2, Fencing: true},
	}
	for _, tc := range []struct {
		id           string
		keys         redisstore.Keys
		lockKey, wit string
		units        redisstore.DurableUnits
	}{
		{id: "", keys: base, lockKey: "seckill:lock", wit: "w/", units: namedUnits("")},
		{id: "a", keys: redisstore.ItemKeys(base, "a"), lockKey: redisstore.ItemLockKey("seckill:lock", "a"), wit: "w/a", units: namedUnits("a")},
	} {
		st := c.Store(tc.id)
		if st.KeysOf() != tc.keys || st.Witness() != tc.wit || st.UnitsOf() != tc.units || st.ReplicaAcks() != acks {
			t.Errorf("sale %q: store keys %+v witness %q units %v acks %+v; want %+v, %q, %v, %+v",
				tc.id, st.KeysOf(), st.Witness(), st.UnitsOf(), st.ReplicaAcks(), tc.keys, tc.wit, tc.units, acks)
		}
		svc := c.ServiceFor(tc.id, st)
		if svc.Store != st || svc.LockKey != tc.lockKey || svc.PerUserLimit != 2 || !svc.Fencing {
			t.Errorf("sale %q: service %+v; want the template's, sold from its store, locked by %q", tc.id, svc, tc.lockKey)
		}
	}
}
