package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type fixedSource struct {
	st       State
	replicas []string
}

func (f fixedSource) Latest() State      { return f.st }
func (f fixedSource) Replicas() []string { return f.replicas }

func do(t *testing.T, h http.Handler, method, path string, hdr map[string]string, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// The page and its assets are embedded and served with a CSP that allows
// nothing from another origin; the state is the source's latest, as JSON.
func TestHandlerServesPageAndState(t *testing.T) {
	src := fixedSource{st: State{Backend: "redis", Books: Books{Known: true, Stock: 3, Lucky: 5, Initial: 8}}}
	h := Handler(src, nil)
	for path, want := range map[string]string{
		"/":          `<script src="app.js"`,
		"/app.js":    "api/state",
		"/style.css": ".banner",
	} {
		rec := do(t, h, http.MethodGet, path, nil, "")
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, rec.Code, want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	// Nothing on the page may come from elsewhere: no CDN, no remote font.
	for _, f := range []string{"index.html", "app.js", "style.css"} {
		b, err := staticFS.ReadFile("static/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "https://") || strings.Contains(string(b), "//cdn") {
			t.Errorf("%s refers to another origin", f)
		}
	}

	rec := do(t, h, http.MethodGet, "/api/state", nil, "")
	var got State
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET /api/state: %d %v", rec.Code, err)
	}
	if got.Backend != "redis" || got.Books.Stock != 3 || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("state %+v cache %q", got, rec.Header().Get("Cache-Control"))
	}
	if rec := do(t, h, http.MethodPost, "/api/state", nil, ""); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /api/state: %d, want 405", rec.Code)
	}
}

// The reset is refused without a token, with another content type or from
// another site, and never reaches a replica then; with a token it goes to
// the first replica that answers, carrying the token, and its answer comes
// back.
func TestHandlerReset(t *testing.T) {
	r1 := newFakeReplica(t, "stockd-1", "redis")
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	h := Handler(fixedSource{replicas: []string{deadURL, r1.URL}}, nil)
	json := map[string]string{"Content-Type": "application/json"}
	withToken := map[string]string{"Content-Type": "application/json", "X-Admin-Token": "seckill-local-admin"}

	refused := []struct {
		name string
		hdr  map[string]string
		body string
		want int
	}{
		{"no token", json, `{"stock":5}`, http.StatusUnauthorized},
		{"form post", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Admin-Token": "t"}, "stock=5", http.StatusUnsupportedMediaType},
		{"cross-site", map[string]string{"Content-Type": "application/json", "X-Admin-Token": "t", "Sec-Fetch-Site": "cross-site"}, `{"stock":5}`, http.StatusForbidden},
		{"negative", withToken, `{"stock":-1}`, http.StatusBadRequest},
		{"unknown field", withToken, `{"stock":1,"lucky":2}`, http.StatusBadRequest},
	}
	for _, c := range refused {
		if rec := do(t, h, http.MethodPost, "/api/reset", c.hdr, c.body); rec.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, rec.Code, rec.Body, c.want)
		}
	}
	if rec := do(t, h, http.MethodGet, "/api/reset", nil, ""); rec.Code == http.StatusOK {
		t.Errorf("GET /api/reset answered 200")
	}
	r1.mu.Lock()
	n := len(r1.resets)
	r1.mu.Unlock()
	if n != 0 {
		t.Fatalf("a refused reset reached the replica %d times", n)
	}

	rec := do(t, h, http.MethodPost, "/api/reset", withToken, `{"stock":200}`)
	var ans ResetAnswer
	if err := jsonUnmarshal(rec.Body, &ans); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("reset: %d %s %v", rec.Code, rec.Body, err)
	}
	if ans.Replica != r1.URL || ans.Status != http.StatusOK || !strings.Contains(string(ans.Body), `"stock":200`) {
		t.Fatalf("reset answer %+v, want stockd-1's 200 with stock 200", ans)
	}
	r1.mu.Lock()
	resets := append([]string(nil), r1.resets...)
	r1.mu.Unlock()
	if len(resets) != 1 || resets[0] != "seckill-local-admin application/json" {
		t.Fatalf("replica got %q, want one reset with the token", resets)
	}

	// The replica refuses the token: its 401 comes back as is.
	r1.set(func(f *fakeReplica) { f.status = http.StatusUnauthorized })
	if rec := do(t, h, http.MethodPost, "/api/reset", withToken, `{"stock":200}`); rec.Code != http.StatusUnauthorized {
		t.Fatalf("refused token: %d, want 401", rec.Code)
	}
	// No replica answers at all.
	h = Handler(fixedSource{replicas: []string{deadURL}}, nil)
	if rec := do(t, h, http.MethodPost, "/api/reset", withToken, `{"stock":200}`); rec.Code != http.StatusBadGateway {
		t.Fatalf("no replica: %d, want 502", rec.Code)
	}
}

func jsonUnmarshal(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
