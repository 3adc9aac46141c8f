package stockd

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/api"
	"seckill/internal/docblocks"
	"seckill/internal/servers/servertest"
)

// CHANGELOG.md's newest entry is this build: its release, what it runs
// beside, and every format it writes; docs/versions.md shows
// stockd --version as it prints.
func TestChangelogNamesThisBuild(t *testing.T) {
	log := readDoc(t, "../../CHANGELOG.md")
	_, rest, ok := strings.Cut(log, "\n## ")
	if !ok {
		t.Fatal("CHANGELOG.md: no entry (## heading)")
	}
	entry, _, _ := strings.Cut(rest, "\n## ")
	heading, _, _ := strings.Cut(entry, "\n")
	if release, _, _ := strings.Cut(heading, " "); release != Release {
		t.Errorf("CHANGELOG.md's newest entry is %q, want this build's release %s", heading, Release)
	}
	if want := "Runs beside: " + RunsBeside + " and later."; !strings.Contains(entry, want) {
		t.Errorf("CHANGELOG.md's %s entry does not say %q", Release, want)
	}
	var formats []string
	for _, f := range Formats() {
		formats = append(formats, fmt.Sprintf("%s %d", f.Name, f.Writes))
	}
	if want := "Formats: " + strings.Join(formats, ", ") + "."; !strings.Contains(entry, want) {
		t.Errorf("CHANGELOG.md's %s entry does not say %q", Release, want)
	}

	// release/previous names the release this one runs beside: the one
	// the upgrade cell starts from.
	var previous string
	for _, line := range strings.Split(readDoc(t, "../../release/previous"), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			previous, _, _ = strings.Cut(line, " ")
			break
		}
	}
	if previous != RunsBeside {
		t.Errorf("release/previous names %q, want this build's RunsBeside %s (make release writes it)", previous, RunsBeside)
	}

	block := docblocks.For(t, "docs/versions.md")
	shown := regexp.MustCompile(`\(build .*?\); runs`).ReplaceAllString(VersionLine(), "(build …); runs")
	if block != shown+"\n" {
		t.Errorf("docs/versions.md shows stockd --version as\n%s\nwhich prints\n%s", block, shown)
	}
}

// The binary, selling, meets a sale a newer replica reset in a newer
// format: every sale 503 with the reason, logged, nothing sold, and
// /readyz 503 naming the key; the same sale without the key (an older
// replica's) sells again.
func TestBinaryRefusesASaleOfANewerFormat(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.MSet(t.Context(), "stock", 10, "lucky", 0, "stock:epoch", "reset-by-this-build").Err(); err != nil {
		t.Fatal(err)
	}
	p := stockdOn(t, srv.Addr())
	if code, sale := reduceOn(t, p.Addr(), "/stock/reduce"); code != http.StatusOK || sale.Result != api.Sold {
		t.Fatalf("a sale of this build's format: %d %+v; want sold", code, sale)
	}
	// A newer replica's reset: a new epoch, and its format.
	if err := rdb.MSet(t.Context(), "stock", 10, "lucky", 0, "stock:epoch", "reset-by-a-newer-replica", "stock:format", 3).Err(); err != nil {
		t.Fatal(err)
	}
	code, sale := reduceOn(t, p.Addr(), "/stock/reduce")
	if code != http.StatusServiceUnavailable || !strings.Contains(sale.Error, "older than the sale's stored format") {
		t.Fatalf("a sale of format 3: %d %+v; want 503 saying the replica is older than the sale", code, sale)
	}
	if n, err := rdb.Get(t.Context(), "stock").Int64(); err != nil || n != 10 {
		t.Fatalf("stock after the refusal: %d, %v; want 10 untouched", n, err)
	}
	logs, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logs, []byte("stock:format is 3, this stockd reads up to 2")) {
		t.Fatalf("no log line naming the format:\n%s", logs)
	}
	// Unready, saying why, where probes and people look.
	if code, r, body := readyz(t, p); code != http.StatusServiceUnavailable || !strings.Contains(r.Stock, "stock:format is 3") {
		t.Fatalf("/readyz on a sale of format 3: %d %s; want 503 naming stock:format", code, body)
	}
	if err := rdb.Del(t.Context(), "stock:format").Err(); err != nil {
		t.Fatal(err)
	}
	if code, sale := reduceOn(t, p.Addr(), "/stock/reduce"); code != http.StatusOK || sale.Result != api.Sold {
		t.Fatalf("the same sale without stock:format: %d %+v; want sold", code, sale)
	}
	if code, _, body := readyz(t, p); code != http.StatusOK {
		t.Fatalf("/readyz on the sale without stock:format: %d %s; want 200", code, body)
	}
}

// A replica without reservations meets a sale reset with them (sale
// format 2): 503 naming the setting, nothing sold (stock.ErrSaleKind,
// TestSaleOfAnotherKindIsRefused); ready all the same, and a reset
// through it makes the sale its own.
func TestBinaryRefusesASaleOfAnotherKind(t *testing.T) {
	srv := servertest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.MSet(t.Context(), "stock", 10, "lucky", 0, "stock:epoch", "reset-with-reservations", "stock:format", 2).Err(); err != nil {
		t.Fatal(err)
	}
	p := stockdOn(t, srv.Addr())
	code, sale := reduceOn(t, p.Addr(), "/stock/reduce")
	if code != http.StatusServiceUnavailable || !strings.Contains(sale.Error, "orders.payment_window") {
		t.Fatalf("a sale with reservations, on a replica without: %d %+v; want 503 naming orders.payment_window", code, sale)
	}
	if n, err := rdb.Get(t.Context(), "stock").Int64(); err != nil || n != 10 {
		t.Fatalf("stock after the refusal: %d, %v; want 10 untouched", n, err)
	}
	// Ready: a reset through it makes the sale its own.
	if code, _, body := readyz(t, p); code != http.StatusOK {
		t.Fatalf("/readyz: %d %s; want 200, so that the operator's reset reaches it", code, body)
	}
	resetStock(t, p.Addr(), 10)
	if code, sale := reduceOn(t, p.Addr(), "/stock/reduce"); code != http.StatusOK || sale.Result != api.Sold {
		t.Fatalf("after the reset: %d %+v; want sold", code, sale)
	}
}
