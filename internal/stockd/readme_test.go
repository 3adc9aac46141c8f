package stockd

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"seckill/internal/servers/servertest"
)

// The recipe for a test token (docs/buyers.md), run as written (bash, openssl,
// basenc) against the real binary: the token it makes buys as alice.
func TestReadmeTokenRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	readme, err := os.ReadFile("../../docs/buyers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "**A token for a test.**")
	if !ok {
		t.Fatal(`docs/buyers.md: no "**A token for a test.**" paragraph`)
	}
	_, block, ok := strings.Cut(after, "```\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 || !strings.Contains(block, "http://127.0.0.1:8080/stock/reduce") {
		t.Fatalf("docs/buyers.md: the token recipe's code block is not where the test looks:\n%s", block)
	}
	for _, tool := range []string{"bash", "openssl", "basenc", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			servertest.SkipOrFail(t, err, tool)
		}
	}
	p := startStockd(t, "STOCKD_AUTH_BUYERS=jwt", "STOCKD_AUTH_JWT_SECRET="+testJWTSecret,
		"STOCKD_AUTH_JWT_ISSUER=seckill", "STOCKD_AUTH_JWT_AUDIENCE=seckill")
	base := "http://" + p.Addr()
	if code, _, body := stockdCall(t, base, "POST", "/stock/reset"); code != 200 {
		t.Fatalf("reset: %d %v", code, body)
	}
	script := strings.ReplaceAll(block, "http://127.0.0.1:8080", base)
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", "curl() { command curl -s \"$@\"; }\n"+script)
	cmd.Env = append(os.Environ(), "S="+testJWTSecret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the recipe: %v\n%s", err, out)
	}
	var sale struct{ Result, Order string }
	if err := json.Unmarshal(out, &sale); err != nil || sale.Result != "sold" {
		t.Fatalf("the recipe's sale: got %s (%v), want sold", out, err)
	}
	if code, _, body := stockdCall(t, base, "GET", "/orders/"+sale.Order); code != 200 || body["user"] != "alice" {
		t.Fatalf("the recipe's order: got %d %v, want alice's", code, body)
	}
}

// The items' quick start (docs/items.md), run as written against the
// real binary on the default configuration: the item is made, open,
// sells and is reset.
func TestItemsQuickStartRunsAsWritten(t *testing.T) {
	doc, err := os.ReadFile("../../docs/items.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 || !strings.Contains(block, "localhost:8080/items") {
		t.Fatalf("docs/items.md: the quick start is not its first sh block:\n%s", block)
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			servertest.SkipOrFail(t, err, tool)
		}
	}
	p := startStockd(t)
	script := strings.NewReplacer("localhost:8080", p.Addr(), "<admin.token>", testAdminToken).Replace(block)
	out, err := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start: %v\n%s", err, out)
	}
	for _, want := range []string{`"state":"open"`, `"result":"sold"`, `"stock":50`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the quick start's answers do not say %s:\n%s", want, out)
		}
	}
}
