package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"seckill/internal/servers"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Machine describes where a run happened.
type Machine struct {
	CPUs      int    `json:"cpus"` // runtime.NumCPU, i.e. nproc
	CPUModel  string `json:"cpu_model,omitempty"`
	MemoryMiB int64  `json:"memory_mib"`
	Kernel    string `json:"kernel"`
	OS        string `json:"os"`
	Go        string `json:"go"`
	// LoadStart and LoadEnd are /proc/loadavg's 1-minute figures: other work
	// on the machine during the run, which skews absolute numbers.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
}

func machineInfo() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if v, ok := procField("/proc/meminfo", "MemTotal"); ok {
		var kb int64
		if _, err := fmt.Sscan(v, &kb); err == nil {
			m.MemoryMiB = kb / 1024
		}
	}
	if v, ok := procField("/proc/cpuinfo", "model name"); ok {
		m.CPUModel = v
	}
	return m
}

// procField returns the value of the first "key: value" line with key.
func procField(path, key string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Versions are the servers' own version strings.
type Versions struct {
	Redis     string `json:"redis"`
	Etcd      string `json:"etcd"`
	ZooKeeper string `json:"zookeeper"`
	MySQL     string `json:"mysql"`
	Nginx     string `json:"nginx"`
}

func serverVersions(ctx context.Context, s Servers) Versions {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v := Versions{Redis: "unavailable", Etcd: "unavailable", ZooKeeper: "unavailable", MySQL: "unavailable", Nginx: "unavailable"}
	if s.Redis != "" {
		rdb := redis.NewClient(&redis.Options{Addr: s.Redis})
		if info, err := rdb.Info(ctx, "server").Result(); err == nil {
			for _, line := range strings.Split(info, "\n") {
				if after, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
					v.Redis = after
				}
			}
		}
		_ = rdb.Close()
	}
	if s.Etcd != "" {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Etcd}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err == nil {
			if st, err := cli.Status(ctx, s.Etcd); err == nil {
				v.Etcd = st.Version
			}
			_ = cli.Close()
		}
	}
	if s.ZooKeeper != "" {
		if out, err := servers.FourLetter(ctx, s.ZooKeeper, "srvr"); err == nil {
			line, _, _ := strings.Cut(out, "\n")
			v.ZooKeeper = strings.TrimPrefix(line, "Zookeeper version: ")
		}
	}
	if s.MySQL != "" {
		if ver, err := mysqlVersion(ctx, s.MySQL); err == nil {
			v.MySQL = ver
		}
	}
	// nginx -v prints "nginx version: nginx/1.22.1" on stderr.
	if out, err := exec.CommandContext(ctx, "nginx", "-v").CombinedOutput(); err == nil {
		v.Nginx = strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
	}
	return v
}
