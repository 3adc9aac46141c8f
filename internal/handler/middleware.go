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
func (a *server) replicaHeader(c *gin.Context) {
	c.Header("X-Replica", a.cfg.Replica)
	c.Next()
}

// recovery turns a panic in a handler into a 500 JSON answer and a logged
// stack, instead of a dropped connection.
func (a *server) recovery(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { // the client is gone; nothing to answer
				panic(v)
			}
			a.deps.Logger.Error("handler panic", "path", c.Request.URL.Path,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !c.Writer.Written() {
				c.Abort()
				a.problem(c, http.StatusInternalServerError, "internal error")
			}
		}
	}()
	c.Next()
}

// requestLog logs each request at debug level: under load the info level
// must stay readable, and the metrics carry the aggregate.
func (a *server) requestLog(c *gin.Context) {
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

// bodyLimit bounds every request body. A declared length over the limit is
// refused before anything is read; an undeclared (chunked) one is cut by
// http.MaxBytesReader.
func (a *server) bodyLimit(c *gin.Context) {
	if c.Request.ContentLength > a.cfg.MaxBodyBytes {
		c.Abort()
		a.refuseBody(c, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, a.cfg.MaxBodyBytes)
	}
	c.Next()
}

// refuseBody answers a request whose body will not be read, and closes the
// connection instead of draining that body: net/http would otherwise read
// up to 256 KiB of it after the answer, at whatever pace the client chooses
// (a body trickled at 1 byte/s held the connection until the read timeout).
func (a *server) refuseBody(c *gin.Context, status int, msg string) {
	c.Header("Connection", "close")
	a.problem(c, status, msg)
	// The answer is flushed before the server drains the body; a read
	// deadline in the past makes that drain fail at once, which closes the
	// connection.
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
}
