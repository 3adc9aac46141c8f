package handler

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/gin-gonic/gin"
)

// replicaHeader sets X-Replica before anything else runs, so even 404s,
// 405s and recovered panics say which replica answered — the point of the
// lab is watching requests spread over replicas behind nginx.
func (a *api) replicaHeader(c *gin.Context) {
	c.Header("X-Replica", a.cfg.Replica)
	c.Next()
}

// recovery turns a panic in a handler into a 500 JSON answer and a logged
// stack, instead of a dropped connection.
func (a *api) recovery(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { // the client is gone; nothing to answer
				panic(v)
			}
			a.deps.Logger.Error("handler panic", "path", c.Request.URL.Path,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !c.Writer.Written() {
				c.Abort()
				a.json(c, http.StatusInternalServerError, gin.H{"error": "internal error"})
			}
		}
	}()
	c.Next()
}

// requestLog logs each request at debug level: under load the info level
// must stay readable, and the metrics carry the aggregate.
func (a *api) requestLog(c *gin.Context) {
	if !a.deps.Logger.Enabled(c.Request.Context(), slog.LevelDebug) {
		c.Next()
		return
	}
	start := time.Now()
	c.Next()
	a.deps.Logger.Debug("http request",
		"method", c.Request.Method,
		"path", c.Request.URL.Path,
		"status", c.Writer.Status(),
		"duration", time.Since(start),
		"remote", c.ClientIP(),
	)
}
