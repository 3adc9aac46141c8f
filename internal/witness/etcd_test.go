package witness_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/servers/servertest"
	"seckill/internal/witness"
)

// One real etcd for the whole test: the contract on a key of its own, then
// the server killed under a register that had been talking to it.
func TestEtcd(t *testing.T) {
	t.Parallel()
	p := servertest.Etcd(t)
	cli := newEtcdClient(t, p.Addr())

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

func newEtcdClient(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{addr},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
