package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"seckill/internal/api"
)

//go:embed static
var staticFS embed.FS

// Source is what the Handler serves: the latest state, and the replicas a
// reset may be sent to. An *Aggregator is one.
type Source interface {
	Latest() State
	Replicas() []string
}

// Handler serves the page (GET /), its state (GET /api/state) and the
// guarded reset (POST /api/reset). client forwards the reset; nil uses a
// client with a 5s timeout.
func Handler(src Source, client *http.Client) http.Handler {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	files := http.FileServerFS(static)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, src.Latest())
	})
	mux.HandleFunc("POST /api/reset", func(w http.ResponseWriter, r *http.Request) {
		reset(w, r, src, client)
	})
	mux.Handle("GET /", files)
	return secure(mux)
}

// secure adds the headers every answer carries: no script, style or image
// from anywhere but this origin (the page has no inline code, so the CSP
// costs nothing), and no framing (the reset button is not clickjackable).
func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

// resetRequest is the body of POST /api/reset; the token travels in the
// X-Admin-Token header, as stockd's own reset takes it.
type resetRequest struct {
	Stock int64 `json:"stock"`
}

// ResetAnswer is what POST /api/reset answers: the replica's status and
// body, or why nothing was sent.
type ResetAnswer struct {
	Replica string          `json:"replica,omitempty"` // the URL it went to
	Status  int             `json:"status"`
	Body    json.RawMessage `json:"body,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// reset forwards one reset to the first replica that answers. The custom
// header and the JSON body make a cross-site form unable to send it (a
// browser preflights both), and a request another site's page makes is
// refused by Sec-Fetch-Site before anything is forwarded.
func reset(w http.ResponseWriter, r *http.Request, src Source, client *http.Client) {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		writeJSON(w, http.StatusForbidden, ResetAnswer{Error: "cross-site reset refused"})
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeJSON(w, http.StatusUnsupportedMediaType, ResetAnswer{Error: "want Content-Type: application/json"})
		return
	}
	token := r.Header.Get("X-Admin-Token")
	if token == "" {
		writeJSON(w, http.StatusUnauthorized, ResetAnswer{Error: "the admin token is required (X-Admin-Token)"})
		return
	}
	var req resetRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Stock < 0 {
		writeJSON(w, http.StatusBadRequest, ResetAnswer{Error: `want {"stock": N} with N >= 0`})
		return
	}
	body, _ := json.Marshal(api.Reset{Stock: req.Stock})
	var errs []error
	for _, base := range src.Replicas() {
		ans, err := forwardReset(r.Context(), client, base, token, body)
		if err != nil {
			// Unreachable: nothing was reset there, try the next one.
			errs = append(errs, err)
			continue
		}
		status := http.StatusOK
		if ans.Status >= 300 {
			status = http.StatusBadGateway
			if ans.Status == http.StatusUnauthorized || ans.Status == http.StatusTooManyRequests || ans.Status == http.StatusBadRequest {
				status = ans.Status
			}
		}
		writeJSON(w, status, ans)
		return
	}
	writeJSON(w, http.StatusBadGateway, ResetAnswer{Error: fmt.Sprintf("no replica answered: %v", errors.Join(errs...))})
}

func forwardReset(ctx context.Context, client *http.Client, base, token string, body []byte) (ResetAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/stock/reset", bytes.NewReader(body))
	if err != nil {
		return ResetAnswer{}, fmt.Errorf("dashboard: reset: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Token", token)
	resp, err := client.Do(req)
	if err != nil {
		return ResetAnswer{}, fmt.Errorf("dashboard: reset %s: %w", base, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	ans := ResetAnswer{Replica: base, Status: resp.StatusCode}
	if json.Valid(raw) {
		ans.Body = raw
	} else {
		ans.Error = strings.TrimSpace(string(raw))
	}
	return ans, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
