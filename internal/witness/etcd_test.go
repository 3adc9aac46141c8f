package witness_test

import (
	"testing"

	"seckill/internal/servers/servertest"
	"seckill/internal/witness"
)

// One real etcd for the whole test: the contract on a key of its own, then
// the server killed under a register that had been talking to it.
func TestEtcd(t *testing.T) {
	t.Parallel()
	p := servertest.Etcd(t)
	cli := servertest.EtcdClient(t, p.Addr())

	r := witness.NewEtcd(cli, "/seckill/witness/contract")
	if got, want := r.Name(), "etcd /seckill/witness/contract"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	t.Run("contract", func(t *testing.T) { testRegister(t, r) })
	t.Run("server down", func(t *testing.T) {
		testUnavailable(t, witness.NewEtcd(cli, "/seckill/witness/down"), func() {
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
		})
	})
}
