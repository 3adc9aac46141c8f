// Package grafana holds no code: it is the home of the tests that validate
// the files under deploy/ offline. Grafana cannot run on a machine without a
// registry, so dashboard_test.go holds the board (dashboards/seckill.json)
// to what stockd really exports, and prometheus_test.go holds the
// Prometheus config (../prometheus/prometheus.yml) and the compose services
// that mount both to each other.
package grafana
