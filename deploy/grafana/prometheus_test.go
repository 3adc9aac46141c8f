package grafana

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// The part of Prometheus's configuration deploy/prometheus/prometheus.yml
// uses, decoded with unknown keys refused (Prometheus refuses them too).
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		ScrapeTimeout      string `yaml:"scrape_timeout"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	ScrapeConfigs []struct {
		JobName     string `yaml:"job_name"`
		MetricsPath string `yaml:"metrics_path"`
		DNSSD       []struct {
			Names           []string `yaml:"names"`
			Type            string   `yaml:"type"`
			Port            int      `yaml:"port"`
			RefreshInterval string   `yaml:"refresh_interval"`
		} `yaml:"dns_sd_configs"`
		RelabelConfigs []struct {
			SourceLabels []string `yaml:"source_labels"`
			TargetLabel  string   `yaml:"target_label"`
		} `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

func strictYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func duration(t *testing.T, what, s string) model.Duration {
	t.Helper()
	d, err := model.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s: %q is not a positive Prometheus duration: %v", what, s, err)
	}
	return d
}

// compose is the part of docker-compose.yml the observability services use.
type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Profiles    []string          `yaml:"profiles"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// mounts maps a service's container paths to the repository paths mounted
// there (bind mounts "./host:/container[:ro]").
func mounts(vols []string) map[string]string {
	out := map[string]string{}
	for _, v := range vols {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && strings.HasPrefix(parts[0], "./") {
			out[parts[1]] = strings.TrimPrefix(parts[0], "./")
		}
	}
	return out
}

func TestPrometheusConfig(t *testing.T) {
	var cfg promConfig
	strictYAML(t, filepath.Join("..", "prometheus", "prometheus.yml"), &cfg)
	interval := duration(t, "global.scrape_interval", cfg.Global.ScrapeInterval)
	timeout := duration(t, "global.scrape_timeout", cfg.Global.ScrapeTimeout)
	duration(t, "global.evaluation_interval", cfg.Global.EvaluationInterval)
	if timeout > interval {
		t.Errorf("scrape_timeout %s > scrape_interval %s: Prometheus refuses to start", timeout, interval)
	}
	// stockd's port in compose: the replicas listen on STOCKD_HTTP_ADDR.
	c := loadCompose(t)
	addr := c.Services["stockd"].Environment["STOCKD_HTTP_ADDR"]
	var jobs []string
	for _, sc := range cfg.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
		if sc.JobName != "stockd" {
			continue
		}
		if sc.MetricsPath != "/metrics" {
			t.Errorf("job stockd: metrics_path %q, want /metrics", sc.MetricsPath)
		}
		if len(sc.DNSSD) != 1 {
			t.Fatalf("job stockd: want one dns_sd_config (Docker DNS, so --scale needs no edit), got %d", len(sc.DNSSD))
		}
		sd := sc.DNSSD[0]
		// Not nginx: one target behind nginx would mix every replica's counters.
		if !slices.Equal(sd.Names, []string{"stockd"}) || sd.Type != "A" {
			t.Errorf("job stockd: dns_sd names %q type %q, want the compose service [stockd], type A", sd.Names, sd.Type)
		}
		if want := ":" + strconv.Itoa(sd.Port); addr != want {
			t.Errorf("job stockd: port %d, but compose's stockd listens on STOCKD_HTTP_ADDR=%q", sd.Port, addr)
		}
		duration(t, "dns_sd refresh_interval", sd.RefreshInterval)
	}
	if !slices.Contains(jobs, "stockd") {
		t.Fatalf("no scrape job named stockd (jobs: %q); compose-test and the board query job=\"stockd\"", jobs)
	}
}

// The compose services mount these files where the configs say they are.
func TestComposeObservability(t *testing.T) {
	c := loadCompose(t)
	p, ok := c.Services["prometheus"]
	if !ok {
		t.Fatal("docker-compose.yml has no prometheus service")
	}
	g, ok := c.Services["grafana"]
	if !ok {
		t.Fatal("docker-compose.yml has no grafana service")
	}
	for name, s := range map[string]struct {
		image    string
		profiles []string
	}{"prometheus": {p.Image, p.Profiles}, "grafana": {g.Image, g.Profiles}} {
		if !slices.Equal(s.profiles, []string{"observability"}) {
			t.Errorf("%s: profiles %q, want [observability] (off by default)", name, s.profiles)
		}
		if want := "${" + strings.ToUpper(name) + "_IMAGE:-"; !strings.HasPrefix(s.image, want) {
			t.Errorf("%s: image %q, want it behind %s...} (compose-test's stand-in)", name, s.image, want)
		}
	}
	var cfgFile string
	for _, a := range p.Entrypoint {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			cfgFile = v
		}
	}
	if got := mounts(p.Volumes)[cfgFile]; got != "deploy/prometheus/prometheus.yml" {
		t.Errorf("prometheus: --config.file=%q is mounted from %q, want deploy/prometheus/prometheus.yml", cfgFile, got)
	}

	gm := mounts(g.Volumes)
	if got := gm["/etc/grafana/provisioning/datasources"]; got != "deploy/grafana/provisioning/datasources" {
		t.Errorf("grafana: datasources provisioning mounted from %q", got)
	}
	if got := gm["/etc/grafana/provisioning/dashboards"]; got != "deploy/grafana/provisioning/dashboards" {
		t.Errorf("grafana: dashboards provisioning mounted from %q", got)
	}
	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name                  string `yaml:"name"`
			Folder                string `yaml:"folder"`
			Type                  string `yaml:"type"`
			DisableDeletion       bool   `yaml:"disableDeletion"`
			AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
			UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
			Options               struct {
				Path                      string `yaml:"path"`
				FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	strictYAML(t, filepath.Join("provisioning", "dashboards", "seckill.yml"), &prov)
	if len(prov.Providers) != 1 || prov.Providers[0].Type != "file" {
		t.Fatalf("dashboard provisioning: want one file provider, got %+v", prov.Providers)
	}
	dir := prov.Providers[0].Options.Path
	if got := gm[dir]; got != "deploy/grafana/dashboards" {
		t.Errorf("grafana: the provider reads %q, mounted from %q, want deploy/grafana/dashboards", dir, got)
	}
	home := g.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if rel, ok := strings.CutPrefix(home, dir+"/"); !ok {
		t.Errorf("grafana: home dashboard %q is not under the provider's %q", home, dir)
	} else if _, err := os.Stat(filepath.Join("dashboards", rel)); err != nil {
		t.Errorf("grafana: home dashboard: %v", err)
	}
}
