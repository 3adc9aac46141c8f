#!/usr/bin/env bash
# Installs what seckill's tests and demo run for real: redis-server and
# redis-sentinel, etcd, ZooKeeper (+ a JRE), MariaDB, nginx, Chromium (the
# dashboard's browser test), and a C toolchain for `go test -race`.
# Idempotent: apt-get runs only for what is missing, `apt-get update` only
# when something is. Uses sudo only when not root. Debian/Ubuntu only.
set -euo pipefail

cd "$(dirname "$0")/.."

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "install-deps: need root or sudo to run: $*" >&2
		exit 1
	fi
}

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }

missing=()
have redis-server || missing+=(redis-server)
# Sentinel for the stock Redis's failover tests (internal/servers' Sentinel
# harness): the same binary as redis-server, packaged apart.
have redis-sentinel || missing+=(redis-sentinel)
have etcd || missing+=(etcd-server)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
have java || missing+=(default-jre-headless)
have make || missing+=(make)
have openssl || missing+=(openssl) # the README's token recipe, run by a test
have curl || missing+=(curl)
have jq || missing+=(jq) # compose-test reads JSON with it
# MariaDB for the mysql lock backends: mariadbd and mariadb-install-db
# (/usr/sbin and /usr/bin); the client for poking at a test server by hand.
have mariadbd || missing+=(mariadb-server)
have mariadb || missing+=(mariadb-client)
# Headless Chromium for the dashboard's browser test (chromedp drives it).
have chromium || missing+=(chromium)
# stress-ng only for scripts/test-stress.sh (make test-stress), which asks.
if [ -n "${WITH_STRESS:-}" ]; then
	have stress-ng || missing+=(stress-ng)
fi
# -race needs cgo: a C compiler and libc headers.
have gcc || missing+=(gcc libc6-dev)
if ! have nginx; then
	# nginx-light is the smallest build with the proxy and upstream modules;
	# newer releases dropped it in favour of plain nginx.
	if apt-cache show nginx-light >/dev/null 2>&1; then
		missing+=(nginx-light)
	else
		missing+=(nginx)
	fi
fi

if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-deps: system packages present (redis-server, redis-sentinel, etcd, zookeeper, java, mariadb, nginx, gcc, chromium, openssl, curl, jq)"
else
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -qq
	# nginx-light may only be known after the update: re-resolve it.
	if [[ " ${missing[*]} " == *" nginx "* ]] && apt-cache show nginx-light >/dev/null 2>&1; then
		missing=("${missing[@]/#nginx/nginx-light}")
	fi
	as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
	echo "install-deps: installed ${missing[*]}"
fi

if command -v go >/dev/null 2>&1; then
	go mod download
	echo "install-deps: go modules downloaded"
else
	echo "install-deps: go not on PATH (expected /usr/local/go/bin); skipping go mod download" >&2
fi
