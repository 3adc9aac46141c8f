package stockd

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"seckill/internal/docblocks"
	"seckill/internal/servers"
	"seckill/internal/servers/servertest"
	"seckill/internal/testwait"
)

// These tests run the command blocks of the docs as written (each block
// marked <!-- runs in TestName --> above its fence, taken from the page by
// docblocks.For), against the real binary. What they change is only where
// a server is: its address put for the page's localhost:8080 or
// 127.0.0.1:6379, and the secrets the page leaves to the reader.

// needTools skips (or, in CI, fails) a test whose block needs tools the
// machine lacks.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			servertest.SkipOrFail(t, err, tool)
		}
	}
}

// runBlock runs script with bash, failing on its first failed command.
func runBlock(t *testing.T, script string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the block: %v\n%s\n---\n%s", err, script, out)
	}
	return string(out)
}

// The recipe for a test token (docs/buyers.md): the token it makes (bash,
// openssl, basenc) buys as alice.
func TestTokenRecipeRunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	block := docblocks.For(t, "docs/buyers.md")
	needTools(t, "bash", "openssl", "basenc", "curl")
	p := startStockd(t, "STOCKD_AUTH_BUYERS=jwt", "STOCKD_AUTH_JWT_SECRET="+testJWTSecret,
		"STOCKD_AUTH_JWT_ISSUER=seckill", "STOCKD_AUTH_JWT_AUDIENCE=seckill")
	base := "http://" + p.Addr()
	if code, _, body := stockdCall(t, base, "POST", "/stock/reset"); code != 200 {
		t.Fatalf("reset: %d %v", code, body)
	}
	// curl -s: the page's curl shows its progress meter, which is noise
	// around the JSON here.
	script := "curl() { command curl -s \"$@\"; }\n" + strings.ReplaceAll(block, "http://127.0.0.1:8080", base)
	out := runBlock(t, script, "S="+testJWTSecret)
	var sale struct{ Result, Order string }
	if err := json.Unmarshal([]byte(out), &sale); err != nil || sale.Result != "sold" {
		t.Fatalf("the recipe's sale: got %s (%v), want sold", out, err)
	}
	if code, _, body := stockdCall(t, base, "GET", "/orders/"+sale.Order); code != 200 || body["user"] != "alice" {
		t.Fatalf("the recipe's order: got %d %v, want alice's", code, body)
	}
}

// The items' quick start (docs/items.md), on the default configuration:
// the item is made, open, sells and is reset.
func TestItemsQuickStartRunsAsWritten(t *testing.T) {
	block := docblocks.For(t, "docs/items.md")
	needTools(t, "bash", "curl")
	p := startStockd(t)
	out := runBlock(t, strings.NewReplacer("localhost:8080", p.Addr(), "<admin.token>", testAdminToken).Replace(block))
	for _, want := range []string{`"state":"open"`, `"result":"sold"`, `"stock":50`} {
		if !strings.Contains(out, want) {
			t.Errorf("the quick start's answers do not say %s:\n%s", want, out)
		}
	}
}

// The environment overrides the file (docs/config.md): the block's
// command line, run where bin/stockd and configs/stockd.yaml are what
// the page means (the built binary, the repository's file), starts a
// replica on the redisson lock with the work delay it sets. The
// environment around it names the Redis, the listener and the admin
// token, which the shipped file leaves to the deployment.
func TestEnvOverridesRunAsWritten(t *testing.T) {
	block := docblocks.For(t, "docs/config.md")
	needTools(t, "bash")
	dir := t.TempDir()
	for link, target := range map[string]string{
		"bin/stockd":          stockdBinary(t),
		"configs/stockd.yaml": shippedFileAbs(t),
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	rds := servertest.Redis(t)
	addr, err := servers.LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := servers.Start(t.Context(), servers.Spec{
		Name: "stockd", Path: "bash", Args: []string{"-euc", block}, Dir: dir, Addr: addr,
		Env: []string{
			"STOCKD_REDIS_ADDR=" + rds.Addr(), "STOCKD_HTTP_ADDR=" + addr,
			"STOCKD_ADMIN_TOKEN=" + testAdminToken, "STOCKD_REPLICA=config-doc",
		},
		Ready: servers.HTTPReady("/readyz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	if code, _, info := stockdCall(t, "http://"+addr, "GET", "/info"); code != 200 || info["backend"] != "redisson" {
		t.Fatalf("/info: %d %v, want backend redisson", code, info)
	}
	logs, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "work_delay=2ms-10ms") {
		t.Fatalf("the start line does not say work_delay=2ms-10ms:\n%s", logs)
	}
}

// shippedFileAbs is configs/stockd.yaml's absolute path.
func shippedFileAbs(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(shippedFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The cluster's settings (docs/cluster.md), as a file of their own,
// load and validate; the same with the stock key's hash tag taken off
// is refused naming it, as the page says.
func TestClusterConfigLoadsAsWritten(t *testing.T) {
	block := docblocks.For(t, "docs/cluster.md")
	env := []string{"STOCKD_REPLICA=r1", "STOCKD_ADMIN_TOKEN=" + testAdminToken}
	load := func(yaml string) error {
		path := filepath.Join(t.TempDir(), "stockd.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, env)
		if err != nil {
			return err
		}
		if len(c.Redis.Cluster.Addrs) != 3 {
			t.Fatalf("redis.cluster.addrs: %v, want the block's three seeds", c.Redis.Cluster.Addrs)
		}
		return Validate(c)
	}
	if err := load(block); err != nil {
		t.Fatalf("the block does not validate: %v\n%s", err, block)
	}
	untagged := strings.Replace(block, `key: "{stock}"`, `key: "stock"`, 1)
	if untagged == block {
		t.Fatalf("the block sets no stock.key \"{stock}\":\n%s", block)
	}
	if err := load(untagged); err == nil || !strings.Contains(err.Error(), "stock.key") {
		t.Fatalf("stock.key without a hash tag: %v, want a refusal naming stock.key", err)
	}
}

// The leader loop (docs/compose.md), against each of two replicas
// electing on etcd in turn (where compose has nginx pick one): every
// answer names the same leader, which only the leader says it is.
func TestLeaderLoopRunsAsWritten(t *testing.T) {
	block := docblocks.For(t, "docs/compose.md")
	needTools(t, "bash", "curl")
	rds, etcd := servertest.Redis(t), servertest.Etcd(t)
	var replicas []*servers.Process
	for _, name := range []string{"leader-a", "leader-b"} {
		replicas = append(replicas, stockdOn(t, rds.Addr(), "STOCKD_REPLICA="+name,
			"STOCKD_ELECTION_BACKEND=etcd", "STOCKD_ETCD_ENDPOINTS=http://"+etcd.Addr()))
	}
	type answer struct {
		Leader, Self string
		IsLeader     bool `json:"is_leader"`
	}
	read := func(p *servers.Process) []answer {
		var out []answer
		sc := bufio.NewScanner(strings.NewReader(runBlock(t, strings.ReplaceAll(block, "localhost:8080", p.Addr()))))
		for sc.Scan() {
			var a answer
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Fatalf("a line that is no /leader answer: %q: %v", sc.Text(), err)
			}
			out = append(out, a)
		}
		if len(out) != 3 {
			t.Fatalf("%d answers, want the loop's 3: %+v", len(out), out)
		}
		return out
	}
	// The election takes a moment after /readyz: wait until a leader
	// is named.
	var all []answer
	for until := testwait.Until(t); ; {
		all = slices.Concat(read(replicas[0]), read(replicas[1]))
		if !slices.ContainsFunc(all, func(a answer) bool { return a.Leader == "" }) {
			break
		}
		if until.Err() != nil {
			t.Fatalf("no leader named: %+v", all)
		}
		time.Sleep(50 * time.Millisecond) // polling the election: no event to wait on
	}
	leaders := 0
	for _, a := range all {
		if a.Leader != all[0].Leader || a.IsLeader != (a.Self == a.Leader) {
			t.Fatalf("answers disagree on the leader: %+v", all)
		}
		if a.IsLeader {
			leaders++
		}
	}
	if leaders != 3 {
		t.Fatalf("%d answers say is_leader, want the leader's 3: %+v", leaders, all)
	}
}
