// Package nginx holds seckill's nginx configurations: nginx.conf for the
// docker-compose cluster (used as a file) and the local-cluster template,
// embedded here because go:embed cannot reach outside a package's directory.
package nginx

import _ "embed"

// LocalTemplate is a text/template for the local cluster's nginx.conf. Its
// data: Dir (absolute directory for pid, logs and temp files), Listen
// (host:port), Replicas (host:port of each stockd), ReadTimeout (an nginx
// duration such as "30s") and User (set only when running as root).
//
//go:embed local.conf.tmpl
var LocalTemplate string
