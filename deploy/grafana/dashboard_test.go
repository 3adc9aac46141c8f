package grafana

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"seckill/internal/api"
	"seckill/internal/election"
	"seckill/internal/metrics"
)

// The dashboard's JSON, as much of Grafana's model as the board uses. It is
// decoded with unknown fields refused, so a misspelt key (say "expresion")
// fails here instead of showing an empty panel in Grafana.
type dashboard struct {
	UID           string                    `json:"uid"`
	Title         string                    `json:"title"`
	Tags          []string                  `json:"tags"`
	Description   string                    `json:"description"`
	Editable      bool                      `json:"editable"`
	GraphTooltip  int                       `json:"graphTooltip"`
	Refresh       string                    `json:"refresh"`
	SchemaVersion int                       `json:"schemaVersion"`
	Version       int                       `json:"version"`
	Time          struct{ From, To string } `json:"time"`
	Timezone      string                    `json:"timezone"`
	Annotations   struct {
		List []json.RawMessage `json:"list"`
	} `json:"annotations"`
	Templating struct {
		List []json.RawMessage `json:"list"`
	} `json:"templating"`
	Links  []json.RawMessage `json:"links"`
	Panels []panel           `json:"panels"`
}

type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *datasource `json:"datasource"`
	GridPos     struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets     []target        `json:"targets"`
	FieldConfig json.RawMessage `json:"fieldConfig"`
	Options     json.RawMessage `json:"options"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	Datasource   *datasource `json:"datasource"`
	RefID        string      `json:"refId"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	Instant      bool        `json:"instant"`
}

// Series Prometheus makes itself for every target; a panel may name them.
var synthetic = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

// exported gathers the metric families a stockd replica exports: the
// registry built as internal/stockd builds it (metrics.New, the orders lag, the
// election's instruments on the same registry), every vector touched once,
// since a vector with no child is not gathered. It maps each family's name
// to its type.
func exported(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	labels := prometheus.Labels{"replica": "r1", "backend": "redis"}
	m := metrics.New(labels)
	for _, r := range api.Results {
		m.Results.WithLabelValues(string(r)).Inc()
	}
	m.ObserveLockWait(0)
	m.SaleDuration.Observe(0)
	m.CountEvent("retried")
	m.LogSuppressed.WithLabelValues("x").Inc()
	if err := m.Registry().Register(m.OrdersLag); err != nil {
		t.Fatalf("register the orders lag as SampleOrdersLag does: %v", err)
	}
	m.RegisterStock(func(context.Context) (int64, int64, error) { return 1, 0, nil }, time.Second)
	em := election.NewMetrics(m.Registry(), prometheus.Labels{"replica": "r1", "election": "etcd"})
	em.ObserveStatus(election.Status{Leading: true, Term: 1})
	em.ObserveRun("ok")

	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]dto.MetricType, len(fams))
	for _, f := range fams {
		out[f.GetName()] = f.GetType()
	}
	return out
}

// known reports whether a series name in a query is one stockd exports (or
// Prometheus adds): a histogram's series are its _bucket, _sum and _count.
func known(name string, fams map[string]dto.MetricType) bool {
	if synthetic[name] {
		return true
	}
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if typ, ok := fams[base]; ok && (typ == dto.MetricType_HISTOGRAM || (suf != "_bucket" && typ == dto.MetricType_SUMMARY)) {
				return true
			}
		}
	}
	return false
}

// PromQL words that are not series names.
var keywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
}

// PromQL's aggregation operators, which may take their by/without clause
// before the parenthesis.
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// hasWordAt reports whether the word w stands at expr[i:].
func hasWordAt(expr string, i int, w string) bool {
	if !strings.HasPrefix(expr[i:], w) {
		return false
	}
	j := i + len(w)
	return j == len(expr) || !(expr[j] == '_' || expr[j] >= 'a' && expr[j] <= 'z' || expr[j] >= 'A' && expr[j] <= 'Z' || expr[j] >= '0' && expr[j] <= '9')
}

// seriesNames returns the series names a PromQL expression selects. It is a
// small lexer, not a parser: string literals, label matchers {...}, ranges
// [...], Grafana variables ($__rate_interval) and numbers are skipped; a word
// followed by "(" is a function or an aggregation, one after by/without/on/
// ignoring/group_left/group_right opens a label list, which is skipped.
func seriesNames(expr string) ([]string, error) {
	var names []string
	isWord := func(c byte) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	skipTo := func(i int, closing byte) (int, error) {
		for j := i + 1; j < len(expr); j++ {
			switch expr[j] {
			case closing:
				return j + 1, nil
			case '"', '\'', '`':
				k := strings.IndexByte(expr[j+1:], expr[j])
				if k < 0 {
					return 0, fmt.Errorf("unterminated string at %d", j)
				}
				j += k + 1
			}
		}
		return 0, fmt.Errorf("no %q after %d", closing, i)
	}
	labelList := false
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{':
			j, err := skipTo(i, '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j, err := skipTo(i, ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '"' || c == '\'' || c == '`':
			k := strings.IndexByte(expr[i+1:], c)
			if k < 0 {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			i += k + 2
		case c == '(' && labelList:
			j, err := skipTo(i, ')')
			if err != nil {
				return nil, err
			}
			i, labelList = j, false
		case c == '$':
			i++
			for i < len(expr) && isWord(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// a number (1e6, 0.99) or a duration (5m)
			for i < len(expr) && (isWord(expr[i]) || expr[i] == '.') {
				i++
			}
		case isWord(c):
			j := i
			for j < len(expr) && isWord(expr[j]) {
				j++
			}
			w := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			switch {
			case w == "by" || w == "without" || w == "on" || w == "ignoring" || w == "group_left" || w == "group_right":
				labelList = true
			case keywords[strings.ToLower(w)]:
			case k < len(expr) && expr[k] == '(':
				// a function or aggregation
			case aggregations[w] && (hasWordAt(expr, k, "by") || hasWordAt(expr, k, "without")):
				// an aggregation with its modifier first: sum by (x) (...)
			default:
				names = append(names, w)
			}
			i = j
		default:
			i++
		}
	}
	return names, nil
}

func TestSeriesNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum(seckill_reduce_total{result="sold"})`, []string{"seckill_reduce_total"}},
		{`histogram_quantile(0.99, sum by (replica, le) (rate(a_bucket{x="}"}[$__rate_interval])))`, []string{"a_bucket"}},
		{`count(up{job="stockd"} == 1) or vector(0)`, []string{"up"}},
		{`max by (replica) (b) / 1e6 + on (replica) group_left (backend) c offset 5m`, []string{"b", "c"}},
		{`sum without (result) (increase(d[5m]))`, []string{"d"}},
	} {
		got, err := seriesNames(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("seriesNames(%q) = %q, %v; want %q", c.expr, got, err, c.want)
		}
	}
	if _, err := seriesNames(`sum(a{b="c)`); err == nil {
		t.Error("an unterminated matcher was accepted")
	}
}

// The checker itself must refuse what the dashboard test exists to catch.
func TestKnownRefusesUnexported(t *testing.T) {
	fams := exported(t)
	for _, name := range []string{"seckill_stocks", "seckill_reduce", "seckill_lock_wait_seconds_total", "seckill_reduce_total_bucket", "seckill_orders_lag_count"} {
		if known(name, fams) {
			t.Errorf("%s accepted as exported", name)
		}
	}
	for _, name := range []string{"seckill_reduce_total", "seckill_lock_wait_seconds_bucket", "seckill_election_is_leader", "seckill_orders_lag", "go_goroutines", "up"} {
		if !known(name, fams) {
			t.Errorf("%s refused; stockd exports it", name)
		}
	}
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("dashboards", "seckill.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboards/seckill.json: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("dashboards/seckill.json: trailing data after the dashboard object")
	}
	return d
}

// provisionedUID is the datasource uid the provisioning file gives Grafana.
func provisionedUID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("provisioning", "datasources", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name      string         `yaml:"name"`
			UID       string         `yaml:"uid"`
			Type      string         `yaml:"type"`
			Access    string         `yaml:"access"`
			URL       string         `yaml:"url"`
			IsDefault bool           `yaml:"isDefault"`
			Editable  bool           `yaml:"editable"`
			JSONData  map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("datasource provisioning: %v", err)
	}
	if f.APIVersion != 1 || len(f.Datasources) != 1 {
		t.Fatalf("datasource provisioning: want apiVersion 1 and one datasource, got %+v", f)
	}
	ds := f.Datasources[0]
	if ds.Type != "prometheus" || ds.URL != "http://prometheus:9090" || ds.UID == "" {
		t.Fatalf("datasource provisioning: want the compose service prometheus:9090 with a uid, got %+v", ds)
	}
	return ds.UID
}

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	uid := provisionedUID(t)
	fams := exported(t)
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard needs a uid, a title and panels: uid=%q title=%q panels=%d", d.UID, d.Title, len(d.Panels))
	}
	results := map[string]bool{}
	for _, r := range api.Results {
		results[string(r)] = true
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: id used twice", where)
		}
		ids[p.ID] = true
		if p.Title == "" || p.Type == "" {
			t.Errorf("%s: needs a title and a type", where)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v outside Grafana's 24 columns", where, p.GridPos)
		}
		if p.Datasource == nil || p.Datasource.UID != uid {
			t.Errorf("%s: datasource %+v, want the provisioned uid %q", where, p.Datasource, uid)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s: target %q has no expr", where, tg.RefID)
				continue
			}
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: refId %q empty or repeated", where, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource != nil && tg.Datasource.UID != uid {
				t.Errorf("%s: target %s datasource %q, want %q", where, tg.RefID, tg.Datasource.UID, uid)
			}
			names, err := seriesNames(tg.Expr)
			if err != nil {
				t.Errorf("%s: %q: %v", where, tg.Expr, err)
				continue
			}
			if len(names) == 0 {
				t.Errorf("%s: %q selects no series", where, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
				if !known(n, fams) {
					t.Errorf("%s: %q names %s, which stockd does not export", where, tg.Expr, n)
				}
			}
			// A result matcher must name a result stockd answers.
			for _, v := range resultMatchers(tg.Expr) {
				if !results[v] {
					t.Errorf("%s: %q matches result=%q, not one of api.Results", where, tg.Expr, v)
				}
			}
		}
	}
	// What an operator opens the board for must be on it.
	for _, want := range []string{
		"up", "seckill_reduce_total", "seckill_lock_wait_seconds_bucket", "seckill_election_is_leader",
		"seckill_election_term", "seckill_orders_lag", "seckill_audit_last_ok", "seckill_stock", "seckill_lucky",
	} {
		if !used[want] {
			t.Errorf("no panel queries %s", want)
		}
	}
	var all []string
	for n := range used {
		all = append(all, n)
	}
	sort.Strings(all)
	t.Logf("%d panels; series queried: %s", len(d.Panels), strings.Join(all, " "))
}

// resultMatchers returns the values of result="..." matchers in expr.
func resultMatchers(expr string) []string {
	var out []string
	for rest := expr; ; {
		i := strings.Index(rest, `result="`)
		if i < 0 {
			return out
		}
		rest = rest[i+len(`result="`):]
		j := strings.IndexByte(rest, '"')
		if j < 0 {
			return out
		}
		out = append(out, rest[:j])
		rest = rest[j:]
	}
}
