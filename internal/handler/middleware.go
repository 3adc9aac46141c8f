package handler

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// maxSaleBody bounds a sale's body. A sale reads none: what load tools
// send ("", "{}", a small form) fits, and a kilobytes-long one is no
// sale's, so it is refused before anything is sold.
const maxSaleBody = 4 << 10

// saleRoute reports whether c is a sale (POST /stock/reduce, an item's
// POST /items/:id/reduce); gin has matched the route before any
// middleware runs.
func saleRoute(c *gin.Context) bool {
	p := c.FullPath()
	return c.Request.Method == http.MethodPost && (p == "/stock/reduce" || p == "/items/:id/reduce")
}

// bodyLimit bounds every request body: http.max_body_bytes, and
// maxSaleBody for a sale. A declared length over the limit is refused
// before anything is read; an undeclared (chunked) one is cut by
// http.MaxBytesReader as the handler reads it. A sale's handler reads no
// body, so a chunked one would never meet that cut: it is read here,
// whole and bounded, before the sale, and an oversized or unreadable one
// is refused with nothing sold.
func (a *server) bodyLimit(c *gin.Context) {
	limit, sale := a.cfg.MaxBodyBytes, saleRoute(c)
	if sale {
		limit = min(limit, maxSaleBody)
	}
	if c.Request.ContentLength > limit {
		c.Abort()
		a.refuseBody(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", limit))
		return
	}
	if c.Request.Body == nil {
		c.Next()
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	if sale && c.Request.ContentLength < 0 {
		if _, err := io.Copy(io.Discard, c.Request.Body); err != nil {
			c.Abort()
			a.unreadBody(c, err)
			return
		}
	}
	c.Next()
}

// unreadBody answers a request whose body could not be read (err from
// reading it): 413 past its limit, 408 when it did not arrive within
// http.read_timeout, else 400. Never err's text: a net error names this
// server's and the peer's socket addresses, which are no client's
// business (the log has them).
func (a *server) unreadBody(c *gin.Context, err error) {
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge):
		a.refuseBody(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit))
	case errors.As(err, &netErr) && netErr.Timeout():
		a.refuseBody(c, http.StatusRequestTimeout, "request body not received in time (http.read_timeout)")
	default:
		a.deps.Logger.Debug("could not read a request body", "path", c.Request.URL.Path, "err", err)
		a.refuseBody(c, http.StatusBadRequest, "could not read the request body")
	}
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
