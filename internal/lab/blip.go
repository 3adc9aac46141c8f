package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"seckill/internal/api"
	"seckill/internal/backoff"
	"seckill/internal/lab/localcluster"
)

// A blip is a partition shorter than the session: nothing expires, so
// nothing is supposed to change — and everything a lost reply or a failed
// cleanup leaves behind stays, on a session that lives on. The cell checks
// what that would break: the sale must finish, no lock artefact may outlive
// the sale, and the election must agree on one leader whose job runs.

// Blips: how many, how long (a fraction of the lease), how far apart.
const (
	blips       = 6
	blipDivisor = 3
	// finishBound is how soon after the last blip the sale is expected to
	// sell out (it has ~300 units of 50ms work to go at most, serially:
	// 15s); later is reported slow.
	finishBound = 40 * time.Second
)

func runBlip(x *run) error {
	blip, gap := (x.lease / blipDivisor).Round(time.Millisecond), x.lease/2
	all := make([]int, x.c.Replicas())
	for i := range all {
		all[i] = i
	}
	for n := range blips {
		targets := []int{n % len(all)} // one replica each, then all at once
		if n >= len(all) {
			targets = all
		}
		var restores []func() error
		for _, i := range targets {
			restore, err := x.c.Cut(i, localcluster.LinkLock)
			if err != nil {
				return errors.Join(err, restoreAll(restores))
			}
			restores = append(restores, restore)
		}
		err := x.hold(time.Now().Add(blip))
		if rerr := restoreAll(restores); rerr != nil || err != nil {
			return errors.Join(err, rerr)
		}
		x.faultEnd = time.Now()
		if n < blips-1 {
			if err := x.hold(x.faultEnd.Add(gap)); err != nil {
				return err
			}
		}
	}
	x.notef("%d blips of %v, %v apart", blips, blip, gap)
	if elects(x.cell.Backend) {
		x.checkElection() // while the sale goes on: leadership must settle under load
	}
	// The sale must finish: buyers stop at their first sold_out.
	ctx, cancel := x.until()
	defer cancel()
	r, err := x.load.waitFor(ctx, x.faultEnd, func(r response) bool { return r.Result == api.SoldOut })
	if err != nil {
		x.problemf("the sale did not finish after the last blip: %v", err)
		return nil
	}
	x.expect("sold out", x.faultEnd, r.At, finishBound)
	x.notef("sold out %dms after the last blip", ms(r.At.Sub(x.faultEnd)))
	if r, err := x.load.waitFor(ctx, x.faultEnd, response.sold); err == nil {
		x.recovered = r.At
	} else {
		x.recovered = x.faultEnd // sold out during the blips: nothing left to recover
	}
	return nil
}

func restoreAll(restores []func() error) error {
	var errs []error
	for _, r := range restores {
		errs = append(errs, r())
	}
	return errors.Join(errs...)
}

// checkBlip runs once the buyers have stopped: no lock artefact of a live
// session may remain once the sale is idle (keys and nodes whose owners
// gave up must have been swept; Redis entries expire within their TTL).
func checkBlip(x *run) {
	ctx, cancel := x.until()
	defer cancel()
	var left []string
	var err error
	poll := backoff.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}
	for {
		if left, err = x.lockArtefacts(ctx); err == nil && len(left) == 0 {
			x.notef("no lock artefact left once idle")
			return
		}
		if poll.Wait(ctx) != nil {
			if err != nil {
				x.problemf("could not list lock artefacts: %v", err)
			} else {
				x.problemf("lock artefacts left once idle: %s", strings.Join(left, ", "))
			}
			return
		}
	}
}

// lockArtefacts lists what the lock keeps on its server for the sale's lock
// key: etcd keys under the lock prefix, ZooKeeper nodes under the lock's
// node, Redis keys other than the token counters.
func (x *run) lockArtefacts(ctx context.Context) ([]string, error) {
	srv := x.c.LockServer()
	if srv == nil {
		return nil, errors.New("no lock server")
	}
	switch x.cell.Backend {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		resp, err := cli.Get(ctx, "/seckill/locks/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		var out []string
		for _, kv := range resp.Kvs {
			out = append(out, string(kv.Key))
		}
		return out, nil
	case "zookeeper":
		conn, _, err := zk.Connect([]string{srv.Addr()}, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		dir := "/seckill/locks/" + lockKey
		kids, _, err := conn.Children(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for i := range kids {
			kids[i] = dir + "/" + kids[i]
		}
		return kids, nil
	default:
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer rdb.Close()
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			return nil, err
		}
		var out []string
		for _, k := range keys {
			if !strings.HasSuffix(k, ":fence") {
				out = append(out, k)
			}
		}
		return out, nil
	}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// checkElection waits, up to one session after the last blip, until
// exactly one replica says is_leader and every replica names it; then until
// the leader-only audit job has run since the last blip.
func (x *run) checkElection() {
	ctx, cancel := x.until()
	defer cancel()
	var last string
	agreedAt := time.Time{}
	poll := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	for agreedAt.IsZero() {
		views, err := x.leaders(ctx)
		if err == nil {
			last = fmt.Sprint(views)
			leaders, names := 0, map[string]bool{}
			for _, v := range views {
				names[v.Leader] = true
				if v.IsLeader {
					leaders++
				}
			}
			if leaders == 1 && len(names) == 1 && !names[""] {
				agreedAt = time.Now()
				break
			}
		}
		if poll.Wait(ctx) != nil {
			x.problemf("no single agreed leader within %v of the last blip: %s", x.lease+5*time.Second, last)
			return
		}
	}
	x.notef("one leader agreed %dms after the last blip", ms(agreedAt.Sub(x.faultEnd)))
	ran, err := x.auditSince(ctx, x.faultEnd)
	if err != nil {
		x.problemf("the leader-only job did not run after the last blip: %v", err)
		return
	}
	x.notef("leader-only job ran %dms after the last blip", ms(ran.Sub(x.faultEnd)))
}

func (x *run) leaders(ctx context.Context) ([]api.Leader, error) {
	var out []api.Leader
	for i := range x.c.Replicas() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, x.c.ReplicaURL(i)+"/leader", nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		var v api.Leader
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// auditSince waits for an entry of the audit stream (seckill:audit in the
// stock Redis, written by the leader's job) stamped after since.
func (x *run) auditSince(ctx context.Context, since time.Time) (time.Time, error) {
	rdb := redis.NewClient(&redis.Options{Addr: x.c.Redis().Addr()})
	defer rdb.Close()
	poll := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		msgs, err := rdb.XRevRangeN(ctx, "seckill:audit", "+", "-", 1).Result()
		if err == nil && len(msgs) == 1 {
			msStr, _, _ := strings.Cut(msgs[0].ID, "-")
			if n, perr := strconv.ParseInt(msStr, 10, 64); perr == nil && time.UnixMilli(n).After(since) {
				return time.UnixMilli(n), nil
			}
		}
		if err := poll.Wait(ctx); err != nil {
			return time.Time{}, fmt.Errorf("no audit entry after %s: %w", since.Format(time.TimeOnly), err)
		}
	}
}
