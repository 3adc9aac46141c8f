package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"text/template"
	"time"

	"seckill/internal/servers"
	"seckill/nginx"
)

// nginxConf is the data of nginx.LocalTemplate.
type nginxConf struct {
	Dir         string
	Listen      string
	Replicas    []string
	ReadTimeout string
	User        string
}

var localTmpl = template.Must(template.New("nginx").Option("missingkey=error").Parse(nginx.LocalTemplate))

// renderNginx writes the local nginx.conf into dir and returns its path.
func renderNginx(dir string, conf nginxConf) (string, error) {
	if conf.User == "" && os.Geteuid() == 0 {
		// As root, workers drop to "nobody" unless told otherwise, and nobody
		// cannot write into a 0700 temp directory.
		if u, err := user.Current(); err == nil {
			conf.User = u.Username
		}
	}
	var buf bytes.Buffer
	if err := localTmpl.Execute(&buf, conf); err != nil {
		return "", fmt.Errorf("localcluster: render nginx.conf: %w", err)
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("localcluster: %w", err)
	}
	return path, nil
}

// NginxPath finds the nginx binary: on PATH, else /usr/sbin/nginx (Debian
// installs it there, and /usr/sbin is not on an ordinary user's PATH).
func NginxPath() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	const sbin = "/usr/sbin/nginx"
	if _, err := os.Stat(sbin); err == nil {
		return sbin, nil
	}
	return "", fmt.Errorf("nginx: %w (apt-get install nginx-light)", servers.ErrNotInstalled)
}

// nginxArgs runs nginx with dir as its prefix, so relative paths and the
// start-up error log (-e) stay out of /var/log/nginx, which a normal user
// cannot write.
func nginxArgs(dir, conf string) []string {
	return []string{"-p", dir + "/", "-c", conf, "-e", filepath.Join(dir, "error.log")}
}

func (c *Cluster) startNginx(ctx context.Context) error {
	path, err := NginxPath()
	if err != nil {
		return err
	}
	dir := filepath.Join(c.cfg.Dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}
	listen, err := servers.LoopbackAddr()
	if err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}
	conf, err := renderNginx(dir, nginxConf{
		Dir:         dir,
		Listen:      listen,
		Replicas:    c.addrs,
		ReadTimeout: nginxDuration(c.cfg.ProxyTimeout),
	})
	if err != nil {
		return err
	}
	p, err := servers.Start(ctx, servers.Spec{
		Name:  "nginx",
		Path:  path,
		Args:  nginxArgs(dir, conf),
		Dir:   dir,
		Addr:  listen,
		Ready: servers.HTTPReady("/nginx-health"),
	})
	if err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}
	c.mu.Lock()
	c.nginx = p
	c.mu.Unlock()
	return nil
}

// CheckNginxConf renders the local template for the given replicas into dir
// and runs `nginx -t` on it: the template's syntax test without a cluster.
func CheckNginxConf(ctx context.Context, dir string, replicas []string) error {
	path, err := NginxPath()
	if err != nil {
		return err
	}
	conf, err := renderNginx(dir, nginxConf{Dir: dir, Listen: "127.0.0.1:1", Replicas: replicas, ReadTimeout: "30s"})
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, path, append(nginxArgs(dir, conf), "-t", "-q")...).CombinedOutput()
	if err != nil {
		return errors.Join(fmt.Errorf("localcluster: nginx -t: %w", err), errors.New(string(out)))
	}
	return nil
}

// nginxDuration formats d for nginx ("1500ms").
func nginxDuration(d time.Duration) string {
	return fmt.Sprintf("%dms", max(d.Milliseconds(), 1))
}
