package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The files the base copies, because kustomize loads nothing outside its
// directory tree.
const (
	shippedConfig = "../../configs/stockd.yaml"
	shippedLimits = "../../nginx/limits-off.conf"
)

// kustomizations are every directory rendered, with the lock backend its
// stockd must run (the base: the config file's default).
var kustomizations = map[string]string{
	"base":                    "redis",
	"overlays/redis":          "redis",
	"overlays/redis-sentinel": "redis",
	"overlays/redisson":       "redisson",
	"overlays/etcd":           "etcd",
	"overlays/zookeeper":      "zookeeper",
	"overlays/mysql":          "mysql",
	"overlays/mysql-row":      "mysql-row",
}

// wantObjects is what every kustomization renders: kind/name, the
// generated ConfigMaps without their content hash.
var wantObjects = []string{
	"ConfigMap/nginx",
	"ConfigMap/stockd-config",
	"Deployment/nginx",
	"Deployment/stockd",
	"PodDisruptionBudget/nginx",
	"PodDisruptionBudget/stockd",
	"Service/nginx",
	"Service/stockd",
}

// secretEnv are the variables that carry a secret: never a literal value
// in a manifest.
var secretEnv = []string{"STOCKD_ADMIN_TOKEN", "STOCKD_REDIS_PASSWORD", "STOCKD_MYSQL_DSN"}

// kinds are the typed objects a manifest may be; anything else is refused.
var kinds = map[string]func() any{
	"apps/v1 Deployment":            func() any { return &appsv1.Deployment{} },
	"v1 Service":                    func() any { return &corev1.Service{} },
	"v1 ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"policy/v1 PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
}

var (
	errUnknownKind = errors.New("no typed object for this apiVersion and kind")
	errStrict      = errors.New("strict decoding")
)

// decodeStrict decodes one rendered object into its k8s.io/api type the way
// the API server's strict field validation does: case-sensitive field
// names, and an unknown or duplicated field is an error.
func decodeStrict(data []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	newObj, ok := kinds[tm.APIVersion+" "+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: %s %s", errUnknownKind, tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	if len(strictErrs) > 0 {
		return nil, fmt.Errorf("%w: %s %s: %w", errStrict, tm.APIVersion, tm.Kind, errors.Join(strictErrs...))
	}
	return obj, nil
}

// rendering is one kustomization's objects, typed.
type rendering struct {
	ids         []string
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap // by name without the hash
	pdbs        map[string]*policyv1.PodDisruptionBudget
}

// hashSuffix is what configMapGenerator appends to a name.
var hashSuffix = regexp.MustCompile(`-[a-z0-9]{10}$`)

func render(t *testing.T, dir string) *rendering {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := &rendering{
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		configMaps:  map[string]*corev1.ConfigMap{},
		pdbs:        map[string]*policyv1.PodDisruptionBudget{},
	}
	for _, res := range m.Resources() {
		data, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeStrict(data)
		if err != nil {
			t.Fatalf("%s: %s: %v", dir, res.CurId(), err)
		}
		var id string
		switch o := obj.(type) {
		case *appsv1.Deployment:
			id = "Deployment/" + o.Name
			r.deployments[o.Name] = o
		case *corev1.Service:
			id = "Service/" + o.Name
			r.services[o.Name] = o
		case *corev1.ConfigMap:
			if !hashSuffix.MatchString(o.Name) {
				t.Errorf("%s: ConfigMap %s has no content hash: a change would not roll the pods", dir, o.Name)
			}
			base := hashSuffix.ReplaceAllString(o.Name, "")
			id = "ConfigMap/" + base
			r.configMaps[base] = o
		case *policyv1.PodDisruptionBudget:
			id = "PodDisruptionBudget/" + o.Name
			r.pdbs[o.Name] = o
		}
		r.ids = append(r.ids, id)
	}
	slices.Sort(r.ids)
	return r
}

// configKeys reads every key of configs/stockd.yaml, dotted. The file holds
// exactly stockd's keys: internal/stockd's TestShippedFileDocumentsEveryKey
// fails on a key missing from it or one that Config lacks.
func configKeys(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(shippedConfig)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	keys := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			keys[prefix+k] = v
		}
	}
	walk("", tree)
	if len(keys) < 40 {
		t.Fatalf("only %d keys read from %s", len(keys), shippedConfig)
	}
	return keys
}

// envKey is the key a STOCKD_ variable sets, as stockd maps it (internal/stockd
// keys.go: the prefix, dots as underscores, upper case), or "" when it
// names none.
func envKey(name string, keys map[string]any) string {
	for k := range keys {
		if "STOCKD_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_")) == name {
			return k
		}
	}
	return ""
}

// unknownEnv lists the STOCKD_ variables of c that name no config key:
// stockd refuses to start on one.
func unknownEnv(c corev1.Container, keys map[string]any) []string {
	var bad []string
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "STOCKD_") && envKey(e.Name, keys) == "" {
			bad = append(bad, e.Name)
		}
	}
	return bad
}

// envValueProblems lists the literal STOCKD_ values of c that could not be
// their key's type, judged by the key's value in configs/stockd.yaml: a
// bool, a number, or a duration (work.delay, which may be a range, aside).
// Ranges and choices are stockd's to check.
func envValueProblems(c corev1.Container, keys map[string]any) []string {
	var bad []string
	for _, e := range c.Env {
		key := envKey(e.Name, keys)
		if key == "" || e.ValueFrom != nil {
			continue
		}
		var err error
		var want string
		switch def := keys[key].(type) {
		case bool:
			want = "bool"
			_, err = strconv.ParseBool(e.Value)
		case float64:
			want = "integer"
			_, err = strconv.Atoi(e.Value)
		case string:
			if _, derr := time.ParseDuration(def); derr == nil && key != "work.delay" {
				want = "duration"
				_, err = time.ParseDuration(e.Value)
			}
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s=%q: %s is a %s (%v in %s)", e.Name, e.Value, key, want, keys[key], shippedConfig))
		}
	}
	return bad
}

// checkNames applies the API server's rules for names, labels and ports,
// which a typed decode does not see (a 16-character port name decodes
// fine and is refused at apply).
func checkNames(t *testing.T, r *rendering) {
	t.Helper()
	report := func(what string, problems []string) {
		if len(problems) > 0 {
			t.Errorf("%s: %s", what, strings.Join(problems, "; "))
		}
	}
	meta := func(kind string, m metav1.ObjectMeta) {
		if !strings.HasSuffix(kind, " pod") { // a pod template has no name
			report(kind+" name "+m.Name, validation.IsDNS1123Subdomain(m.Name))
		}
		for k, v := range m.Labels {
			report(kind+" "+m.Name+" label "+k, append(content.IsLabelKey(k), content.IsLabelValue(v)...))
		}
		for k := range m.Annotations {
			report(kind+" "+m.Name+" annotation "+k, content.IsLabelKey(k))
		}
	}
	for _, d := range r.deployments {
		meta("Deployment", d.ObjectMeta)
		meta("Deployment "+d.Name+" pod", d.Spec.Template.ObjectMeta)
		vols := map[string]bool{}
		for _, v := range d.Spec.Template.Spec.Volumes {
			report("volume "+v.Name, validation.IsDNS1123Label(v.Name))
			vols[v.Name] = true
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			report("container "+c.Name, validation.IsDNS1123Label(c.Name))
			for _, p := range c.Ports {
				report(c.Name+" port "+p.Name, append(validation.IsValidPortName(p.Name), validation.IsValidPortNum(int(p.ContainerPort))...))
			}
			for _, e := range c.Env {
				report(c.Name+" env "+e.Name, validation.IsEnvVarName(e.Name))
			}
			for _, m := range c.VolumeMounts {
				if !vols[m.Name] {
					t.Errorf("%s/%s mounts volume %s, which the pod lacks", d.Name, c.Name, m.Name)
				}
			}
		}
	}
	for _, s := range r.services {
		meta("Service", s.ObjectMeta)
		report("Service name "+s.Name, validation.IsDNS1035Label(s.Name))
		for _, p := range s.Spec.Ports {
			report("Service "+s.Name+" port "+p.Name, validation.IsValidPortNum(int(p.Port)))
		}
	}
	for _, cm := range r.configMaps {
		meta("ConfigMap", cm.ObjectMeta)
		for k := range cm.Data {
			report("ConfigMap "+cm.Name+" key "+k, validation.IsConfigMapKey(k))
		}
	}
	for _, p := range r.pdbs {
		meta("PodDisruptionBudget", p.ObjectMeta)
	}
}

func TestEnvValueProblems(t *testing.T) {
	keys := configKeys(t)
	c := corev1.Container{Env: []corev1.EnvVar{
		{Name: "STOCKD_LOCK_TTL", Value: "10s"},
		{Name: "STOCKD_LOCK_WAIT_TIMEOUT", Value: "5"}, // no unit
		{Name: "STOCKD_STOCK_FENCING", Value: "yes"},
		{Name: "STOCKD_MYSQL_POOL_SIZE", Value: "16"},
		{Name: "STOCKD_STOCK_SEGMENTS", Value: "two"},
		{Name: "STOCKD_WORK_DELAY", Value: "2ms-10ms"},
		{Name: "STOCKD_ETCD_ENDPOINTS", Value: "http://etcd:2379,http://etcd-1:2379"},
	}}
	got := envValueProblems(c, keys)
	var names []string
	for _, p := range got {
		names = append(names, p[:strings.Index(p, "=")])
	}
	if want := []string{"STOCKD_LOCK_WAIT_TIMEOUT", "STOCKD_STOCK_FENCING", "STOCKD_STOCK_SEGMENTS"}; !slices.Equal(names, want) {
		t.Errorf("envValueProblems = %v, want problems with %v", got, want)
	}
}

func TestEveryKustomizationIsTested(t *testing.T) {
	var found []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "kustomization.yaml" {
			found = append(found, filepath.ToSlash(filepath.Dir(p)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range found {
		if _, ok := kustomizations[dir]; !ok {
			t.Errorf("%s is not in kustomizations: it would be shipped unvalidated", dir)
		}
	}
	for dir := range kustomizations {
		if !slices.Contains(found, dir) {
			t.Errorf("%s has no kustomization.yaml", dir)
		}
	}
}

func TestKustomizations(t *testing.T) {
	keys := configKeys(t)
	shipped, err := os.ReadFile(shippedConfig)
	if err != nil {
		t.Fatal(err)
	}
	limits, err := os.ReadFile(shippedLimits)
	if err != nil {
		t.Fatal(err)
	}
	for dir, backend := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			if !slices.Equal(r.ids, wantObjects) {
				t.Fatalf("objects\n got %v\nwant %v", r.ids, wantObjects)
			}
			checkNames(t, r)
			for _, name := range []string{"stockd", "nginx"} {
				checkSelectors(t, r, name)
				for _, c := range r.deployments[name].Spec.Template.Spec.Containers {
					checkHardened(t, r.deployments[name], c)
					if bad := unknownEnv(c, keys); len(bad) > 0 {
						t.Errorf("container %s: %v name no key of %s (stockd refuses to start)", c.Name, bad, shippedConfig)
					}
					for _, problem := range envValueProblems(c, keys) {
						t.Errorf("container %s: %s", c.Name, problem)
					}
				}
			}
			checkStockd(t, r, keys, backend, shipped)
			checkNginx(t, r, limits)
		})
	}
}

// checkSelectors: the Deployment, its Service and its budget all select the
// Deployment's pods, and the budget lets a drain proceed.
func checkSelectors(t *testing.T, r *rendering, name string) {
	t.Helper()
	d := r.deployments[name]
	podLabels := labels.Set(d.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("Deployment %s: selector %v does not select its pods %v (%v)", name, d.Spec.Selector, podLabels, err)
	}
	svc := r.services[name]
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service %s: selector %v does not select the pods %v", name, svc.Spec.Selector, podLabels)
	}
	pdb := r.pdbs[name]
	psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || psel.Empty() || !psel.Matches(podLabels) {
		t.Errorf("PodDisruptionBudget %s: selector %v does not select the pods %v (%v)", name, pdb.Spec.Selector, podLabels, err)
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	switch {
	case replicas < 2:
		t.Errorf("Deployment %s: %d replica(s): a drain would stop it", name, replicas)
	case pdb.Spec.MinAvailable != nil && (pdb.Spec.MinAvailable.Type != intstr.Int || pdb.Spec.MinAvailable.IntVal >= replicas):
		t.Errorf("PodDisruptionBudget %s: minAvailable %s of %d replicas blocks every drain", name, pdb.Spec.MinAvailable, replicas)
	case pdb.Spec.MaxUnavailable != nil && (pdb.Spec.MaxUnavailable.Type != intstr.Int || pdb.Spec.MaxUnavailable.IntVal < 1):
		t.Errorf("PodDisruptionBudget %s: maxUnavailable %s blocks every drain", name, pdb.Spec.MaxUnavailable)
	case pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil:
		t.Errorf("PodDisruptionBudget %s: neither minAvailable nor maxUnavailable", name)
	}
}

// checkHardened: non-root, read-only root file system, no privilege, and
// resource bounds.
func checkHardened(t *testing.T, d *appsv1.Deployment, c corev1.Container) {
	t.Helper()
	pod := d.Spec.Template.Spec.SecurityContext
	sc := c.SecurityContext
	nonRoot := (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
		(pod != nil && pod.RunAsNonRoot != nil && *pod.RunAsNonRoot)
	if !nonRoot {
		t.Errorf("%s/%s: runAsNonRoot is not set", d.Name, c.Name)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s/%s: root file system is writable", d.Name, c.Name)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s/%s: privilege escalation is allowed", d.Name, c.Name)
	}
	if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("%s/%s: capabilities are not all dropped", d.Name, c.Name)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[res]; !ok {
			t.Errorf("%s/%s: no %s request", d.Name, c.Name, res)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Errorf("%s/%s: no memory limit", d.Name, c.Name)
	}
}

// containerPort resolves a probe's or Service's port (a number or a port
// name) to the container's port number; 0 if it names none.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// mountedConfigMap returns the ConfigMap and subPath of the volume
// mounted at dir (or, for a file mounted by subPath, at that file).
func mountedConfigMap(d *appsv1.Deployment, c corev1.Container, mountPath string) (cm, subPath string, ok bool) {
	for _, m := range c.VolumeMounts {
		if m.MountPath != mountPath {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				return v.ConfigMap.Name, m.SubPath, true
			}
		}
	}
	return "", "", false
}

func checkStockd(t *testing.T, r *rendering, keys map[string]any, backend string, shipped []byte) {
	t.Helper()
	d := r.deployments["stockd"]
	c := container(t, d, "stockd")

	// The port: http.addr, the container's, the probes' and the Service's.
	addr := fmt.Sprint(keys["http.addr"])
	if e := env(c, "STOCKD_HTTP_ADDR"); e != nil {
		addr = e.Value
	}
	_, portStr, err := splitHostPort(addr)
	if err != nil {
		t.Fatalf("http.addr %q: %v", addr, err)
	}
	port, _ := strconv.Atoi(portStr)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"readiness", c.ReadinessProbe, "/readyz"},
		{"liveness", c.LivenessProbe, "/healthz"},
	} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("stockd: no HTTP %s probe", p.name)
		case p.probe.HTTPGet.Path != p.path:
			t.Errorf("stockd: %s probe on %s, want %s", p.name, p.probe.HTTPGet.Path, p.path)
		case int(containerPort(c, p.probe.HTTPGet.Port)) != port:
			t.Errorf("stockd: %s probe on port %s, stockd listens on %d", p.name, p.probe.HTTPGet.Port.String(), port)
		}
	}
	svc := r.services["stockd"]
	if len(svc.Spec.Ports) != 1 || int(containerPort(c, svc.Spec.Ports[0].TargetPort)) != port {
		t.Errorf("Service stockd: ports %+v do not reach stockd's %d", svc.Spec.Ports, port)
	}

	// The config file: --config names a file of the generated ConfigMap,
	// which is configs/stockd.yaml.
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("stockd: args %v have no --config", c.Args)
	}
	file := c.Args[i+1]
	cmName, _, ok := mountedConfigMap(d, c, path.Dir(file))
	cm := r.configMaps["stockd-config"]
	if !ok || cmName != cm.Name {
		t.Errorf("stockd: %s is not in the ConfigMap %s", path.Dir(file), cm.Name)
	}
	if got := cm.Data[path.Base(file)]; got != string(shipped) {
		t.Errorf("ConfigMap stockd-config's %s differs from %s: cp %s deploy/k8s/base/config/stockd.yaml",
			path.Base(file), shippedConfig, strings.TrimPrefix(shippedConfig, "../../"))
	}

	// The environment: a backend this kustomization is for, secrets from
	// Secrets, nothing that only the lab may set.
	if len(c.EnvFrom) > 0 {
		t.Errorf("stockd: envFrom: its variables' names cannot be checked here")
	}
	got := fmt.Sprint(keys["lock.backend"])
	if e := env(c, "STOCKD_LOCK_BACKEND"); e != nil {
		got = e.Value
	}
	if got != backend {
		t.Errorf("stockd: lock.backend %q, want %q", got, backend)
	}
	for _, name := range secretEnv {
		if e := env(c, name); e != nil && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("stockd: %s is not from a Secret", name)
		}
	}
	if e := env(c, "STOCKD_ADMIN_TOKEN"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		(e.ValueFrom.SecretKeyRef.Optional != nil && *e.ValueFrom.SecretKeyRef.Optional) {
		t.Errorf("stockd: admin.token must come from a required Secret key")
	}
	for _, name := range []string{"STOCKD_LAB_UNSAFE", "STOCKD_ADMIN_ALLOW_INSECURE_TOKEN"} {
		if e := env(c, name); e != nil && e.Value != "false" {
			t.Errorf("stockd: %s=%q: lab or demo only", name, e.Value)
		}
	}
	if e := env(c, "SECKILL_FAILPOINTS"); e != nil {
		t.Errorf("stockd: SECKILL_FAILPOINTS is set: lab only")
	}
	seen := map[string]bool{}
	for _, e := range c.Env {
		if seen[e.Name] {
			t.Errorf("stockd: %s set twice", e.Name)
		}
		seen[e.Name] = true
	}
}

func splitHostPort(addr string) (host, port string, err error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", "", errors.New("no port")
	}
	if _, err := strconv.Atoi(addr[i+1:]); err != nil {
		return "", "", err
	}
	return addr[:i], addr[i+1:], nil
}

// block returns the body of the first "<header> {" block of an nginx
// configuration, braces balanced.
func block(conf, header string) (string, bool) {
	i := strings.Index(conf, header+" {")
	if i < 0 {
		return "", false
	}
	start := i + len(header) + 2
	depth := 1
	for j := start; j < len(conf); j++ {
		switch conf[j] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return conf[start:j], true
			}
		}
	}
	return "", false
}

// directives returns the arguments of every "name args;" in conf.
func directives(conf, name string) []string {
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `\s+([^;]+);`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(conf, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

func checkNginx(t *testing.T, r *rendering, limits []byte) {
	t.Helper()
	d := r.deployments["nginx"]
	c := container(t, d, "nginx")
	cm := r.configMaps["nginx"]
	conf := cm.Data["nginx.conf"]
	if conf == "" {
		t.Fatalf("ConfigMap nginx has no nginx.conf")
	}
	if cm.Data["seckill-limits.conf"] != string(limits) {
		t.Errorf("ConfigMap nginx's seckill-limits.conf differs from %s", shippedLimits)
	}

	// Both files are mounted where nginx reads them.
	for file, at := range map[string]string{
		"nginx.conf":          "/etc/nginx/nginx.conf",
		"seckill-limits.conf": directives(conf, "include")[0],
	} {
		name, sub, ok := mountedConfigMap(d, c, at)
		if !ok || name != cm.Name || sub != file {
			t.Errorf("nginx: %s is not mounted at %s (got %q, subPath %q)", file, at, name, sub)
		}
	}

	// The upstream is the stockd Service, on its port.
	up, ok := block(conf, "upstream stockd")
	if !ok {
		t.Fatal("nginx.conf: no upstream stockd")
	}
	servers := directives(up, "server")
	if len(servers) != 1 {
		t.Fatalf("nginx.conf: upstream servers %v, want the stockd Service", servers)
	}
	host, port, err := splitHostPort(servers[0])
	if err != nil {
		t.Fatalf("nginx.conf: upstream server %q: %v", servers[0], err)
	}
	svc, ok := r.services[host]
	if !ok || len(svc.Spec.Ports) != 1 || strconv.Itoa(int(svc.Spec.Ports[0].Port)) != port {
		t.Errorf("nginx.conf: upstream %s:%s is no Service port here", host, port)
	}

	// nginx listens where its probes, its Service and its container say.
	listen := directives(conf, "listen")
	if len(listen) != 1 {
		t.Fatalf("nginx.conf: listen %v", listen)
	}
	lport, _ := strconv.Atoi(listen[0])
	nsvc := r.services["nginx"]
	if len(nsvc.Spec.Ports) != 1 || int(containerPort(c, nsvc.Spec.Ports[0].TargetPort)) != lport {
		t.Errorf("Service nginx: ports %+v do not reach nginx's %d", nsvc.Spec.Ports, lport)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || int(containerPort(c, p.HTTPGet.Port)) != lport ||
			!strings.Contains(conf, "location = "+p.HTTPGet.Path+" {") {
			t.Errorf("nginx: %s probe %+v is not on a location nginx answers on %d", name, p, lport)
		}
	}

	// The sale and the reset are never replayed on another replica.
	for _, loc := range []string{"location = /stock/reduce", "location = /stock/reset"} {
		b, ok := block(conf, loc)
		if !ok {
			t.Errorf("nginx.conf: no %s", loc)
			continue
		}
		if !slices.Contains(directives(b, "proxy_next_upstream"), "off") {
			t.Errorf("nginx.conf: %s: proxy_next_upstream is not off", loc)
		}
	}

	// With a read-only root file system, everything nginx writes must be
	// under a writable (emptyDir) mount.
	var writable []string
	for _, m := range c.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				writable = append(writable, m.MountPath+"/")
			}
		}
	}
	for _, name := range []string{"pid", "client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path", "uwsgi_temp_path", "scgi_temp_path"} {
		args := directives(conf, name)
		if len(args) != 1 {
			t.Errorf("nginx.conf: %s %v: want one, in a writable place", name, args)
			continue
		}
		if !slices.ContainsFunc(writable, func(dir string) bool { return strings.HasPrefix(args[0], dir) }) {
			t.Errorf("nginx.conf: %s %s is on the read-only root file system (writable: %v)", name, args[0], writable)
		}
	}
}

// TestNginxAcceptsTheConfig runs the rendered nginx.conf through nginx -t,
// with the two things only a cluster has replaced: the stockd Service's
// name (nginx resolves it while loading) and the absolute paths.
func TestNginxAcceptsTheConfig(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			// As the root module's servertest.SkipOrFail: CI must have it.
			if os.Getenv("CI") != "" {
				t.Fatalf("%v (CI must have it: scripts/install-deps.sh)", err)
			}
			t.Skipf("%v: install with `make deps`", err)
		}
		bin = "/usr/sbin/nginx"
	}
	r := render(t, "base")
	cm := r.configMaps["nginx"]
	dir := t.TempDir()
	conf := cm.Data["nginx.conf"]
	conf = strings.ReplaceAll(conf, "server stockd:", "server 127.0.0.1:")
	conf = strings.ReplaceAll(conf, "/tmp/", dir+"/")
	conf = strings.ReplaceAll(conf, "/etc/nginx/seckill-limits.conf", filepath.Join(dir, "seckill-limits.conf"))
	if err := os.WriteFile(filepath.Join(dir, "seckill-limits.conf"), []byte(cm.Data["seckill-limits.conf"]), 0o644); err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-q", "-e", "stderr", "-p", dir, "-c", confPath).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

// The checks above are only as strict as the decoder: it must refuse what
// the API server's strict validation refuses.
func TestDecodeStrictRefuses(t *testing.T) {
	good := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"replicas":2}}`
	if _, err := decodeStrict([]byte(good)); err != nil {
		t.Fatalf("a valid Deployment: %v", err)
	}
	for name, tc := range map[string]struct {
		doc  string
		want error
	}{
		"unknown field":   {`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"replica":2}}`, errStrict},
		"wrong case":      {`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"Replicas":2}}`, errStrict},
		"duplicate field": {`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"replicas":2,"replicas":3}}`, errStrict},
		"nested unknown":  {`{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"},"spec":{"ports":[{"port":80,"targetport":"http"}]}}`, errStrict},
		"unknown kind":    {`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"x"}}`, errUnknownKind},
		"old apiVersion":  {`{"apiVersion":"policy/v1beta1","kind":"PodDisruptionBudget","metadata":{"name":"x"}}`, errUnknownKind},
		"wrong type":      {`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"replicas":"2"}}`, nil},
	} {
		_, err := decodeStrict([]byte(tc.doc))
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: err %v, want %v", name, err, tc.want)
		}
	}
}

func TestUnknownEnvIsReported(t *testing.T) {
	keys := configKeys(t)
	c := corev1.Container{Env: []corev1.EnvVar{
		{Name: "STOCKD_LOCK_BACKEND"},
		{Name: "STOCKD_LOCK_REDIS_ADDR"},
		{Name: "STOCKD_LOCK_BACKED"},
		{Name: "STOCKD_REDIS"}, // a section, not a key
		{Name: "GOMAXPROCS"},
	}}
	if got := unknownEnv(c, keys); !slices.Equal(got, []string{"STOCKD_LOCK_BACKED", "STOCKD_REDIS"}) {
		t.Errorf("unknownEnv = %v", got)
	}
}

// The copies in base/ are byte for byte the files they copy (the
// rendering check compares what kustomize put in the ConfigMaps; this
// names the file to copy when they drift).
func TestCopiesAreCurrent(t *testing.T) {
	for copyPath, orig := range map[string]string{
		"base/config/stockd.yaml":    shippedConfig,
		"base/nginx/limits-off.conf": shippedLimits,
	} {
		a, err := os.ReadFile(copyPath)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("deploy/k8s/%s differs from %s: cp %[2]s deploy/k8s/%[1]s", copyPath, strings.TrimPrefix(orig, "../../"))
		}
	}
}
