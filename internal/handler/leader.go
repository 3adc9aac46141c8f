package handler

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"seckill/internal/api"
	"seckill/internal/election"
)

// LeaderStatus is the election as GET /leader reports it. A struct embedding
// the *election.Runner and its election.Elector implements it.
type LeaderStatus interface {
	// Status is what this replica believes locally (the Runner's view).
	Status() election.Status
	// Leader reads who leads now from the coordination server
	// (election.ErrNoLeader when nobody does).
	Leader(ctx context.Context) (election.Leader, error)
	// Backend names the election's implementation ("etcd", "zookeeper"),
	// which /leader reports: terms compare only within one backend.
	Backend() string
}

// leaderReadTimeout bounds the fresh read: /leader is polled by
// `seckill leader` and the lab, which must see an unreachable server as a
// prompt 503, not a hung request.
const leaderReadTimeout = 2 * time.Second

// leader answers GET /leader, naming the election's backend; without an
// election (Deps.Leader nil) that is "none".
func (a *server) leader(c *gin.Context) {
	v := api.Leader{Self: a.cfg.Replica}
	ls := a.deps.Leader
	if ls == nil {
		v.Backend = "none"
		c.JSON(http.StatusOK, v)
		return
	}
	v.Backend = ls.Backend()
	ctx, cancel := context.WithTimeout(c.Request.Context(), leaderReadTimeout)
	defer cancel()
	v.IsLeader = ls.Status().Leading
	l, err := ls.Leader(ctx)
	switch {
	case err == nil:
		v.Leader, v.Term = l.ID, l.Term
		// A replica paused past its session keeps its local flag until it
		// processes the expiry; the fresh read is authoritative, so never
		// claim a leadership it contradicts.
		v.IsLeader = v.IsLeader && l.ID == a.cfg.Replica
	case errors.Is(err, election.ErrNoLeader):
		v.IsLeader = false
	default:
		v.IsLeader = false
		v.Error = err.Error()
		if ok, suppressed := a.logs.Allow("leader_read"); ok {
			a.deps.Logger.Warn("leader read failed", "err", err, "suppressed", suppressed)
		}
		c.JSON(http.StatusServiceUnavailable, v)
		return
	}
	c.JSON(http.StatusOK, v)
}
