#!/usr/bin/env bash
# compose-test: bring the docker-compose cluster up on this machine and prove
# that a flash sale through nginx never oversells, per lock backend, under
# faults: a killed replica, a paused replica (past the lock TTL), a replica cut
# off the network; and, with docker-compose.ha.yml, a stopped etcd leader and
# a stopped ZooKeeper leader. mysql runs against the mysql service (MariaDB on
# the stand-in, MYSQL_IMAGE otherwise).
#
#   scripts/compose-test.sh                 # everything (CI)
#   BACKENDS="redis etcd" HA=0 scripts/compose-test.sh
#   SINGLE=0 BACKENDS="etcd zookeeper" scripts/compose-test.sh   # HA only
#   FAULTS_redisson="kill pause netcut" scripts/compose-test.sh  # more faults
#   BACKENDS=redis HA=0 FAULTS_redis=" " scripts/compose-test.sh  # no faults
#   scripts/compose-test.sh --warm          # only build what the images need (cached)
#
# After the first cluster is up: the tools profile's run, and who a buyer is
# through nginx (a forged token 401, a client's X-User dropped, /ledger the
# admin's, a token signed with JWT_SECRET buys and reads only its orders).
# README's "docker compose up" blocks (the named buyers' counts by hand
# included) run as written in a variant of their own,
# scripts/compose-test.d/readme.sh, not here.
#
# Faults per backend (trimmed to keep the run near 10 minutes on 2 cores):
# FAULTS_redis and FAULTS_etcd default to "kill pause netcut", FAULTS_redisson,
# FAULTS_zookeeper and FAULTS_mysql to "pause" (the lease-expiry case that differs per
# backend; kill and netcut exercise nginx and Docker, not the lock). FULL=1
# runs every fault for every backend.
#
# Images: IMAGES=standin (default) builds the offline Debian stand-in
# (docker/build-standins.sh, cached) and a stockd image from host-built static
# binaries (docker/Dockerfile.local); IMAGES=official uses the compose file's
# defaults (official images pulled from their registries, stockd built from
# the Dockerfile).
#
# No Docker engine: skipped with a message, unless CI is set (then it fails).
# The project is always torn down (down -v), also on failure or Ctrl-C.
# Needs: docker, docker-compose v1.29 (installed with apt when missing and
# running as root) or docker compose v2, go.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

BACKENDS=${BACKENDS:-redis redisson etcd zookeeper mysql}
HA=${HA:-1}
IMAGES=${IMAGES:-standin}
LOCK_TTL_S=${LOCK_TTL_S:-3}
WAIT_S=${WAIT_S:-180}      # bound on every "until healthy" wait
FIRE_TIMEOUT_S=${FIRE_TIMEOUT_S:-60}  # seckill run --timeout (the firing phase)
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-150} # then TERM, and KILL 10 s on: its history check (Porcupine) cannot be cancelled

log() { printf '%s compose-test: %s\n' "$(date +%T)" "$*" >&2; }
die() { WHY="$*"; log "FAIL: $*"; exit 1; }

# The host-built static binaries' go build (one retry: a build cache
# shared with concurrent builds can hiccup). -tags lab: compose is the lab
# cluster (its none and setnx rows). $1: the output (/dev/null with --warm).
gobuild() {
	CGO_ENABLED=0 go build -tags lab -trimpath -ldflags='-s -w' -o "$1" "${@:2}" ||
		{ log "go build ${*:2} failed; retrying once"; CGO_ENABLED=0 go build -tags lab -trimpath -ldflags='-s -w' -o "$1" "${@:2}"; }
}

# --warm: only fill the caches the images come from (Go's build cache with
# the static binaries' packages; the stand-in image, when IMAGES=standin
# and Docker answers), then exit. .ci/run runs it beside make test, whose
# test phase mostly waits; the run after it then finds both built.
if [[ "${1:-}" == --warm ]]; then
	gobuild /dev/null ./cmd/stockd ./cmd/seckill ./docker/healthcheck
	if [[ $IMAGES == standin ]] && command -v docker >/dev/null && docker info >/dev/null 2>&1; then
		docker/build-standins.sh
	fi
	log "warm: static binaries and images cached"
	exit 0
fi

# ---- gate ----------------------------------------------------------------
if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
	if [[ -n "${CI:-}" ]]; then
		die "no Docker engine reachable and CI is set"
	fi
	log "SKIP: no Docker engine reachable (set CI=1 to make this a failure)"
	exit 0
fi
if docker compose version >/dev/null 2>&1; then
	COMPOSE=(docker compose)
	COMPOSE_V2=1
else
	if ! command -v docker-compose >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
		log "installing docker-compose (Debian package)"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
	fi
	command -v docker-compose >/dev/null || die "neither 'docker compose' nor 'docker-compose' is installed"
	COMPOSE=(docker-compose)
	COMPOSE_V2=0
fi
command -v go >/dev/null || die "go is required"

PROJECT=${PROJECT:-seckill-ct-$(date +%s)-$$}
OUT=$(mktemp -d /tmp/seckill-compose-test.XXXXXX)
STAGE=$OUT/image
FILES=(-f docker-compose.yml)
T_START=$(date +%s)
ROWS=()
FAILED=0

compose() { "${COMPOSE[@]}" -p "$PROJECT" "${FILES[@]}" "$@"; }

# compose_down: the project down with its volumes, between variants and at
# the end. A down that fails (a network with an endpoint still attached, a
# volume still in use) is logged with docker's words, the project's
# containers are removed by force and the down is tried once more. It never
# ends the run by itself: the next variant's "up" shows what was left.
compose_down() {
	local out
	out=$({ compose --profile tools down -v --remove-orphans || compose down -v --remove-orphans; } 2>&1) && return 0
	log "down failed: $(tail -3 <<<"$out" | tr '\n' ' '); removing the project's containers by force"
	docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" | xargs -r docker rm -f >/dev/null 2>&1 || true
	out=$({ compose --profile tools down -v --remove-orphans || compose down -v --remove-orphans; } 2>&1) && return 0
	log "down failed again: $(tail -3 <<<"$out" | tr '\n' ' ')"
	return 0
}

# WHY: what ended the run early. die sets it; so does any command that
# fails where set -e ends the script (errtrace carries the trap into
# functions; the first failure is the cause, the callers' returns after it
# are not), so that CI's tail, which shows the table, also shows the cause.
WHY=""
set -o errtrace
trap 'why_rc=$?; [[ -n $WHY ]] || WHY="line $LINENO in ${FUNCNAME[0]:-main}: \`$BASH_COMMAND\` exited $why_rc"' ERR

teardown() {
	local rc=$?
	set +e
	trap - ERR
	if [[ -n "${LOAD_PID:-}" ]]; then kill "$LOAD_PID" 2>/dev/null; fi
	docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter status=paused |
		xargs -r docker unpause >/dev/null 2>&1
	log "down -v ($PROJECT)"
	compose_down
	if [[ -n ${COMPOSE_TEST_ROWS:-} ]]; then
		# A lane: its rows go to its parent's table.
		((${#ROWS[@]} == 0)) || printf '%s\n' "${ROWS[@]}" >"$COMPOSE_TEST_ROWS"
	else
		print_table
	fi
	log "artifacts in $OUT; total $(($(date +%s) - T_START))s"
	((rc == 0 || rc == 130)) || log "FAIL (rc $rc): ${WHY:-no failing command recorded}"
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

print_table() {
	((${#ROWS[@]})) || return 0
	printf '\n%-8s %-10s %-22s %-6s %6s %6s %6s %7s %6s %6s  %s\n' \
		variant backend scenario result sold lucky stock initial errors rps note
	local r
	for r in "${ROWS[@]}"; do
		IFS='|' read -r v b s res sold lucky stock initial errors rps note <<<"$r"
		printf '%-8s %-10s %-22s %-6s %6s %6s %6s %7s %6s %6s  %s\n' \
			"$v" "$b" "$s" "$res" "$sold" "$lucky" "$stock" "$initial" "$errors" "$rps" "$note"
	done
	echo
}

# failed_rows: the rows marked FAIL, one line each, for WHY: CI shows only
# the run's tail, where a long table's failing row may have scrolled away.
failed_rows() {
	local r v b s res note
	for r in "${ROWS[@]}"; do
		IFS='|' read -r v b s res _ _ _ _ _ _ note <<<"$r"
		[[ $res == FAIL ]] && printf '\n  FAIL %s %s "%s": %s' "$v" "$b" "$s" "${note:0:400}"
	done
	return 0
}

row() { # variant backend scenario result sold lucky stock initial errors rps note
	ROWS+=("$(IFS='|'; echo "$*")")
	[[ "$4" != FAIL ]] || FAILED=1
	log "$3 [$2/$1]: $4 ${11:-}"
}

# ---- images --------------------------------------------------------------
[[ -d cmd/stockd && -d cmd/seckill ]] || die "cmd/stockd and cmd/seckill must exist"
command -v jq >/dev/null || die "jq is needed to read the runs' JSON (scripts/install-deps.sh installs it)"

T0=$(date +%s)
mkdir -p "$STAGE/etc" "$STAGE/tmp"
chmod 1777 "$STAGE/tmp"
log "go build stockd, seckill, healthcheck (static)"
if [[ -z ${COMPOSE_TEST_LANE:-} ]]; then
	gobuild "$STAGE/stockd" ./cmd/stockd
	gobuild "$STAGE/seckill" ./cmd/seckill
	gobuild "$STAGE/healthcheck" ./docker/healthcheck
	SECKILL=$STAGE/seckill
else
	SECKILL=$COMPOSE_TEST_SECKILL # a lane: the images are its parent's (lanes below)
fi
T_GO=$(($(date +%s) - T0))

# The admin token and the buyers' tokens' secret, made for the run (32
# random bytes, hex: stockd refuses weak ones, and the compose file's weak
# lab defaults are accepted only with ALLOW_WEAK_SECRETS, off here): the
# replicas verify with the secret, the tools service and the host's seckill
# (SECKILL_JWT_SECRET) sign with it.
ADMIN_TOKEN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
JWT_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export ADMIN_TOKEN JWT_SECRET SECKILL_JWT_SECRET=$JWT_SECRET ALLOW_WEAK_SECRETS=false
# Lease lifetimes short enough that a pause can outlast them.
export LOCK_TTL=${LOCK_TTL_S}s ETCD_SESSION_TTL=${LOCK_TTL_S}s ZK_SESSION_TIMEOUT=${LOCK_TTL_S}s \
	REDISSON_WATCHDOG=${LOCK_TTL_S}s MYSQL_SESSION_TTL=${LOCK_TTL_S}s
export STOCKD_REPLICAS=3
# ZooKeeper grants at least 2 x tickTime: tick 1s lets a 3 s session stand.
export ZK_TICK_MS=1000
FULL=${FULL:-0}
FAULTS_redis=${FAULTS_redis:-kill pause netcut}
FAULTS_etcd=${FAULTS_etcd:-kill pause netcut}
FAULTS_redisson=${FAULTS_redisson:-pause}
FAULTS_zookeeper=${FAULTS_zookeeper:-pause}
FAULTS_mysql=${FAULTS_mysql:-pause}
FAULTS_mysql_row=${FAULTS_mysql_row:-pause}
T0=$(date +%s)
case "${COMPOSE_TEST_LANE:+lane}${COMPOSE_TEST_LANE:-$IMAGES}" in
lane*) ;; # exported by the parent, built
standin)
	docker/build-standins.sh
	standin=${STANDIN_IMAGE:-seckill/standin-base:bookworm}
	export REDIS_IMAGE=$standin ETCD_IMAGE=$standin ZOOKEEPER_IMAGE=$standin NGINX_IMAGE=$standin \
		MYSQL_IMAGE=$standin
	export STOCKD_IMAGE=seckill/stockd:compose-test
	printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' >"$STAGE/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$STAGE/etc/group"
	docker build -q -f docker/Dockerfile.local -t "$STOCKD_IMAGE" "$STAGE" >/dev/null
	;;
official)
	compose build stockd
	compose pull --ignore-pull-failures redis etcd zookeeper mysql nginx
	;;
*) die "IMAGES must be standin or official" ;;
esac
T_IMAGES=$(($(date +%s) - T0))
log "images ready in ${T_IMAGES}s (go build ${T_GO}s)"

# free_port: a free loopback port, from a range of this lane's own so that
# two lanes never pick one port at the same instant, and below the kernel's
# ephemeral range: a port there may be the local end of any outgoing
# connection (the other lane's load, its TIME_WAITs), and Docker's bind of
# a published port then fails with "address already in use" although
# nothing listens on it, which the probe below cannot see. CI lost a run to
# that (lane 2 drew from 40000-49999, inside 32768-60999).
EPHEMERAL_LOW=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
((EPHEMERAL_LOW > 13000)) || die "the ephemeral port range starts at $EPHEMERAL_LOW: no room below it for 3 lanes' ports"
free_port() {
	local p width=$(((EPHEMERAL_LOW - 10000) / 3))
	while :; do
		p=$((10000 + ${COMPOSE_TEST_LANE:-0} * width + RANDOM % width))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || break
	done
	echo "$p"
}
# nginx's host port (other engineers may hold 8080).
NGINX_PORT=$(free_port)
export NGINX_PORT NGINX_BIND=127.0.0.1
URL=http://127.0.0.1:$NGINX_PORT

# ---- helpers -------------------------------------------------------------
cids() { docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" \
	${1:+--filter "label=com.docker.compose.service=$1"} | sort; }
cname() { docker inspect -f '{{.Name}}' "$1" | tr -d /; }
network() { docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "$1"; }

# wait_healthy [service...]: every running container of the project (or of the
# services) healthy; returns 2 at once when a stockd container has exited.
wait_healthy() {
	local deadline=$(($(date +%s) + WAIT_S)) c st pending
	while :; do
		pending=0
		for c in $(if (($#)); then for s in "$@"; do cids "$s"; done; else cids; fi); do
			st=$(docker inspect -f '{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$c")
			case "$st" in
			running/healthy) ;;
			exited/* | dead/*)
				[[ "$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$c")" == stockd ]] && return 2
				pending=1 ;;
			*) pending=1 ;;
			esac
		done
		((pending)) || return 0
		(($(date +%s) < deadline)) || { log "not healthy after ${WAIT_S}s: $(docker ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}={{.Status}}' | tr '\n' ' ')"; return 1; }
		sleep 1
	done
}

nginx_reload() { # re-resolve "stockd" after replicas were recreated or moved
	docker exec "$(cids nginx)" nginx -s reload >/dev/null 2>&1
	sleep 1
}

# jfield FILE FILTER: jq's FILTER on the JSON in FILE, raw; empty when the
# file is missing or not JSON, or FILTER finds null. Every JSON these
# scripts read goes through jq (jbody) or seckill verdict, never grep.
jfield() { jq -r "$2 // empty" "$1" 2>/dev/null || true; }
# jbody FILTER: the same on the JSON of stdin (an HTTP body).
jbody() { jq -r "$1 // empty" 2>/dev/null || true; }

# within SECONDS CMD...: runs CMD every 0.1 s until it succeeds (0), or 1
# once SECONDS have passed. Every wait on an event in these scripts is
# this one: bounded, and over as soon as the event is seen.
within() {
	local deadline=$(($(date +%s%N) + $1 * 1000000000))
	shift
	until "$@"; do
		(($(date +%s%N) < deadline)) || return 1
		sleep 0.1
	done
}

# nginx_lucky [PATH]: lucky of GET PATH (/stock) through nginx; empty
# when it does not answer.
nginx_lucky() { http_get 127.0.0.1 "$NGINX_PORT" "${1:-/stock}" | jbody .lucky; }

# lucky_at_least N READER...: READER prints lucky; 0 when it is N or more.
lucky_at_least() {
	local n=$1 lk
	shift
	lk=$("$@")
	[[ $lk =~ ^[0-9]+$ ]] && ((lk >= n))
}

# selling READER...: waits (up to 15 s) until the sale READER reads has
# sold 20 units, so that a fault lands mid-sale, not before the load's
# reset; says so when it did not, and the fault lands anyway.
selling() {
	within 15 lucky_at_least 20 "$@" || log "no sale seen in 15s ($*); faulting anyway"
}

# since_ms T0 T1: T1 - T0 (nanoseconds) in ms, or "never" without T1.
since_ms() { [[ -n "$2" ]] && echo "$((($2 - $1) / 1000000))ms" || echo never; }

# check LABEL CMD...: "LABEL: ok" when CMD succeeds, else "LABEL: NO": a
# condition a verdict row names and seckill verdict judges.
check() {
	local label=$1
	shift
	if "$@"; then echo "$label: ok"; else echo "$label: NO"; fi
}

# sold_at_once A.json B.json: 0 when two seckill runs' ranges in which
# each sale was certainly under way (a unit sold, a unit left:
# selling_from_ms..selling_until_ms, from its answers' times) overlap.
# Judged from the answers, not by polling both books: a poll through a
# loaded machine missed sales of a few seconds.
sold_at_once() {
	local fa ua fb ub
	read -r fa ua <<<"$(jfield "$1" '"\(.selling_from_ms) \(.selling_until_ms)"')"
	read -r fb ub <<<"$(jfield "$2" '"\(.selling_from_ms) \(.selling_until_ms)"')"
	[[ $fa =~ ^[0-9]+$ && $ua =~ ^[0-9]+$ && $fb =~ ^[0-9]+$ && $ub =~ ^[0-9]+$ ]] && ((fa < ub && fb < ua))
}

# redis_state: "stock lucky" of the default sale, read from the store
# itself: BOOKS_READER when a variant sets it (a Redis Cluster, Sentinel's
# primary), else the redis service.
redis_state() {
	if [[ -n ${BOOKS_READER:-} ]]; then
		"$BOOKS_READER"
		return
	fi
	docker exec "$(cids redis)" redis-cli --raw mget stock lucky | tr '\n' ' '
}

# item_row VARIANT BACKEND SCENARIO NAME ID INITIAL STOCK LUCKY WITNESS [CONDITION...]:
# an item's row (the run NAME sold item ID): every unit sold, exactly,
# GET /items/ID agrees, and the witness record (etcd key WITNESS) is at 0.
item_row() {
	local id=$5 initial=$6 want got wit
	want="0 $initial $initial open"
	got=$(http_get 127.0.0.1 "$NGINX_PORT" "/items/$id" | jbody '"\(.stock) \(.lucky) \(.initial) \(.state)"')
	wit=$(docker exec "$(cids etcd)" etcdctl --endpoints=http://127.0.0.1:2379 get --print-value-only "$9" 2>/dev/null |
		jbody '[.sales[]? | .ceilings | tostring] | join(" ")')
	judge "$1" "$2" "$3" "$4" "$initial" "$7" "$8" exact all-sold sold-out \
		"$(check "GET /items/$id reads stock lucky initial state: ${got:-nothing} (want $want)" test "$got" = "$want")" \
		"$(check "witness $9 ceilings ${wit:-none} (want [0])" test "${wit##* }" = "[0]")" "${@:10}"
}

# load NAME REQUESTS CONCURRENCY STOCK: seckill through nginx -> $OUT/NAME.json
# (LOAD_EXTRA: one more flag for seckill run)
load() {
	local rc=0
	timeout -k 10 "$LOAD_TIMEOUT_S" "$SECKILL" run --url "$URL" --requests "$2" --concurrency "$3" \
		--stock "$4" --timeout "${FIRE_TIMEOUT_S}s" --admin-token "$ADMIN_TOKEN" ${LOAD_EXTRA:+"$LOAD_EXTRA"} --json >"$OUT/$1.json" 2>"$OUT/$1.err" || rc=$?
	echo "$rc" >"$OUT/$1.rc"
}

# verdict VARIANT BACKEND SCENARIO NAME INITIAL [CONDITION...]: the row of
# the run NAME, its books read from Redis here (not trusted from the tool).
verdict() {
	local stock lucky
	read -r stock lucky <<<"$(redis_state)"
	judge "$1" "$2" "$3" "$4" "$5" "$stock" "$lucky" "${@:6}"
}

# judge VARIANT BACKEND SCENARIO NAME INITIAL STOCK LUCKY [CONDITION...]:
# one row, judged by seckill verdict (loadgen.Judge): no oversell (seckill's
# oversold count, stock + lucky == initial, sold <= lucky), a linearizable
# history; a sale no buyer was told of is noted as lost (a replica killed
# after selling never answers). A CONDITION is a want on the run (exact,
# sold-out, all-sold, no-lost, routed, sold-by=REPLICA) or a check the
# caller judged ("LABEL: ok" or "LABEL: NO", from check).
judge() {
	local variant=$1 backend=$2 scenario=$3 name=$4 initial=$5 stock=${6:-?} lucky=${7:-?} c res sold errors rps note
	local args=()
	for c in "${@:8}"; do
		case $c in
		*': ok' | *': NO') args+=(--check "$c") ;;
		*) args+=(--want "$c") ;;
		esac
	done
	[[ $scenario != pause* ]] || args+=(--pause)
	IFS=$'\t' read -r res sold errors rps note < <("$SECKILL" verdict --report "$OUT/$name.json" --err "$OUT/$name.err" \
		--exit "$(cat "$OUT/$name.rc" 2>/dev/null || echo 1)" --stock "$stock" --lucky "$lucky" --initial "$initial" "${args[@]}" 2>"$OUT/$name.verdict.err" ||
		printf 'FAIL\t-\t-\t-\t%s\n' "$(tr '\n' ' ' <"$OUT/$name.verdict.err")")
	[[ $res == PASS ]] || dump_state "$name"
	row "$variant" "$backend" "$scenario" "$res" "$sold" "$lucky" "$stock" "$initial" "$errors" "$rps" "$note"
}

# dump_state NAME: after a failed row, keep what the replicas logged and what
# the lock servers hold with the artifacts: the project is torn down after.
dump_state() {
	local c
	for c in $(cids stockd); do
		docker logs --tail 400 "$c" >"$OUT/$1.log.$(cname "$c")" 2>&1 || true
	done
	for c in $(cids etcd); do
		docker exec "$c" etcdctl --endpoints=http://127.0.0.1:2379 get --prefix /seckill -w json \
			>"$OUT/$1.etcd.$(cname "$c").json" 2>&1 || true
	done
	log "state after the failed row $1 kept in $OUT/$1.*"
}

# up_backend VARIANT BACKEND: (re)create stockd with the backend; 0 ready,
# 1 skipped (stockd refused to start), 2 failed.
up_backend() {
	export LOCK_BACKEND=$2
	# stockd refuses the lab-only backends unless told this is the lab.
	case $2 in none | local | setnx | redis-nocheck | redis-checkdel) export LAB_UNSAFE=true ;; *) export LAB_UNSAFE=false ;; esac
	# The election rides on the lock's own session where there is one
	# (etcd, zookeeper); the Redis locks elect through etcd.
	if [[ $2 == zookeeper ]]; then export ELECTION_BACKEND=zookeeper; else export ELECTION_BACKEND=etcd; fi
	log "up: variant=$1 backend=$2"
	local rc=0
	local wait=()
	((COMPOSE_V2)) && wait=(--wait --wait-timeout "$WAIT_S")
	compose up -d --remove-orphans "${wait[@]}" >"$OUT/up-$1-$2.log" 2>&1 || rc=$?
	if ((rc)) && ! grep -q stockd "$OUT/up-$1-$2.log"; then
		cat "$OUT/up-$1-$2.log" >&2
		return 2
	fi
	rc=0
	wait_healthy || rc=$?
	if ((rc == 2)) || { ((rc)) && [[ "$(docker inspect -f '{{.State.Status}}' $(cids stockd) | sort -u)" != running ]]; }; then
		local why
		why=$(docker logs --tail 3 "$(cids stockd | head -1)" 2>&1 | tail -1)
		[[ "$why" != *' err='* ]] || why=${why#* err=}
		why=$(cut -c1-110 <<<"$why")
		row "$1" "$2" "(all)" SKIP - - - - - - "skipped: backend not built? stockd: $why"
		return 1
	fi
	((rc == 0)) || { row "$1" "$2" "up" FAIL - - - - - - "cluster not healthy in ${WAIT_S}s"; return 2; }
	# nginx was started before a recreated stockd got its addresses.
	nginx_reload
	return 0
}

replica() { cids stockd | sed -n "${1}p"; }

# Runs the load in the background, injects the fault after DELAY seconds.
bg_load() { load "$@" & LOAD_PID=$!; }
fg_wait() { wait "$LOAD_PID" || true; LOAD_PID=; }

# http_get IP PORT PATH: the body of a GET, from the host (no curl needed).
# It never fails: no answer within 3 s is an empty body, which the caller's
# check then fails on with a row that says so, instead of set -e ending the
# whole run at the bare command.
http_get() {
	{ timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "GET %s HTTP/1.0\r\nHost: x\r\n\r\n" "$2" >&3; cat <&3' "$1" "$2" "$3" 2>/dev/null |
		sed '1,/^\r\{0,1\}$/d'; } || true
}
# http_post_admin PATH BODY: the status line and body of an admin POST
# through nginx, from the host (no curl needed).
http_post_admin() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
		printf "POST %s HTTP/1.0\r\nHost: x\r\nX-Admin-Token: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" \
			"$1" "$2" "${#3}" "$3" >&3; cat <&3' "$NGINX_PORT" "$1" "$ADMIN_TOKEN" "$2" 2>/dev/null || true
}
ip_of() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }
# replica_name CONTAINER: the name the replica gives itself (GET /info):
# stockd-<n> in compose, not the container's host name (its id).
replica_name() { http_get "$(ip_of "$1")" 8080 /info | jbody .replica; }

# check_election VARIANT BACKEND: every replica answers GET /leader, exactly
# one says is_leader, and all name that one (bounded retry: a campaign just
# started may not have a winner yet).
check_election() {
	local v=$1 b=$2
	if within 20 one_leader; then
		row "$v" "$b" "election ($ELECTION_BACKEND): 1 leader" PASS - - - - - - \
			"leader $LEADER_SELF, named by all $(cids stockd | wc -l) replicas"
	else
		row "$v" "$b" "election ($ELECTION_BACKEND): 1 leader" FAIL - - - - - - \
			"leaders claiming=$LEADERS, named: ${LEADER_NAMES% }"
	fi
}

# one_leader: 0 when exactly one replica claims the lead (GET /leader) and
# every replica names it; LEADERS, LEADER_SELF and LEADER_NAMES say what
# was read.
one_leader() {
	local c body
	LEADERS=0 LEADER_NAMES="" LEADER_SELF=""
	for c in $(cids stockd); do
		body=$(http_get "$(ip_of "$c")" 8080 /leader)
		if [[ $(jbody .is_leader <<<"$body") == true ]]; then
			LEADERS=$((LEADERS + 1)) LEADER_SELF=$(jbody .self <<<"$body")
		fi
		LEADER_NAMES+="$(jbody .leader <<<"$body") "
	done
	((LEADERS == 1)) && [[ -n "$LEADER_SELF" && "$(tr ' ' '\n' <<<"${LEADER_NAMES% }" | sort -u)" == "$LEADER_SELF" ]]
}

# holder_sig: who holds the sale lock right now, as the lock server sees it
# (empty: nobody). A frozen holder keeps the same value; a live one changes
# it within milliseconds (every acquisition has a new owner value/key/node).
zk_leader_or_standalone() {
	local c
	for c in $(cids zookeeper) $(cids zookeeper2) $(cids zookeeper3); do
		docker exec "$c" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; printf srvr >&3; cat <&3' 2>/dev/null |
			grep -qE 'Mode: (leader|standalone)' && { echo "$c"; return; }
	done
}
# The probes below end pipelines early (head, awk exit): under pipefail the
# writer's SIGPIPE (141) would abort the whole run, so each ends in || true.
holder_sig() {
	case $LOCK_BACKEND in
	redis) docker exec "$(cids redis)" redis-cli --raw get "{seckill:lock}" 2>/dev/null || true ;; # redislock keeps the owner in {key}
	redisson) docker exec "$(cids redis)" redis-cli --raw hkeys seckill:lock 2>/dev/null | sort | tr '\n' ' ' || true ;;
	etcd) docker exec "$(cids etcd)" etcdctl --endpoints=http://127.0.0.1:2379 get --prefix /seckill/locks/ \
		--keys-only --sort-by=CREATE --order=ASCEND --limit=1 2>/dev/null | head -1 || true ;;
	mysql) # the session (connection id) holding the named lock; NULL when free
		docker exec "$(cids mysql)" bash -c 'mysql -N -B --protocol=tcp -h127.0.0.1 -u"${MYSQL_USER:-seckill}" \
			-p"${MYSQL_PASSWORD:-seckill}" --connect-timeout=2 -e "SELECT IS_USED_LOCK('"'"'seckill:lock'"'"')" \
			"${MYSQL_DATABASE:-seckill}"' 2>/dev/null | grep -v NULL || true ;;
	zookeeper) # "dump" lists every session's ephemeral nodes; the lowest lock sequence holds
		docker exec "$(zk_leader_or_standalone)" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; printf dump >&3; cat <&3' 2>/dev/null |
			grep -o '/seckill/locks/[^ ]*-lock-[0-9]*' | awk -F-lock- '{print $2, $0}' | sort -n | head -1 || true ;;
	esac
}
# holder_replica SIG: for etcd, the replica owning the lock key's lease (its
# election key under /seckill/leader/ ending in /<lease> holds the
# replica's name).
holder_replica() {
	[[ $LOCK_BACKEND == etcd && -n "$1" ]] || return 0
	local lease=${1##*/}
	lease=${lease%%-*}
	# key then value; the key is <election.path>/<lease hex> (stockd's
	# election path gets one more "/" from etcd's concurrency package)
	docker exec "$(cids etcd)" etcdctl --endpoints=http://127.0.0.1:2379 get --prefix /seckill/leader/ 2>/dev/null |
		awk -v l="/$lease" 'f { print; exit } substr($0, length($0) - length(l) + 1) == l { f = 1 }' || true
}

# size SECONDS: "requests stock" for a fault load that lasts about SECONDS at
# this backend's baseline rate (etcd's cross-process FIFO is several times
# slower than Redis on this machine), stock = a third of the requests, so the
# stock sells out and every outcome (sold, sold out) is exercised.
size() {
	local r=${BASE_RPS:-100} n
	n=$((r * $1))
	((n < 600)) && n=600
	((n > 4000)) && n=4000
	echo "$n $((n / 3))"
}

fault_kill() {
	local v=$1 b=$2 c n st
	read -r n st <<<"$(size 12)"
	c=$(replica 1)
	bg_load kill-$b "$n" 50 "$st"
	selling nginx_lucky
	docker kill "$c" >/dev/null
	fg_wait
	verdict "$v" "$b" "kill $(cname "$c" | sed 's/.*_\(stockd_[0-9]*\)$/\1/')" "kill-$b" "$st"
	load afterkill-$b 300 30 200
	verdict "$v" "$b" "after kill: routing" "afterkill-$b" 200 routed
	docker start "$c" >/dev/null
	wait_healthy stockd || true
	nginx_reload
}

# Pause the LOCK HOLDER past its TTL. The holder is not known in advance (the
# lock changes hands every few ms), so: pause a replica, and if the lock
# server's holder then stays the same for a second, the paused replica holds
# it (only a frozen holder keeps it that long; with FIFO locks a paused
# waiter becomes that holder when its turn comes). Otherwise unpause and try
# the next replica. Once caught it stays paused 2 x TTL + 1 s: the lease
# expires, the others sell on, and on unpause its stale write must be fenced.
fault_pause() {
	local v=$1 b=$2 c i s1 s2 caught="" who="" hold=$((2 * LOCK_TTL_S + 1)) t0 note n st fired
	read -r n st <<<"$(size 30)"
	fired=$(date +%s)
	bg_load pause-$b "$n" 50 "$st"
	selling nginx_lucky
	# Up to 12 tries: a FIFO lock (redis, etcd, zookeeper) is caught within a
	# round or two; Redisson is not FIFO, so a paused waiter never inherits
	# the lock and each try catches the holder about one time in three.
	# And none that could outlast the load's firing phase: on a loaded
	# machine (each docker pause seconds, zookeeper's sessions expiring at
	# every try) the tries went on past it, pausing the replicas the load's
	# last reads went to, until its timeout killed it with no report.
	for i in 1 2 3 1 2 3 1 2 3 1 2 3; do
		(($(date +%s) - fired + hold + 3 < FIRE_TIMEOUT_S)) || break
		c=$(replica "$i")
		t0=$(date +%s)
		docker pause "$c" >/dev/null
		sleep 0.7
		s1=$(holder_sig)
		sleep 1
		s2=$(holder_sig)
		if [[ -n "${s1// }" && "$s1" == "$s2" ]]; then
			caught=$c who=$(holder_replica "$s1")
			sleep $((hold - ($(date +%s) - t0) > 1 ? hold - ($(date +%s) - t0) : 1))
			docker unpause "$c" >/dev/null
			break
		fi
		docker unpause "$c" >/dev/null
		kill -0 "$LOAD_PID" 2>/dev/null || break
		sleep 0.5
	done
	fg_wait
	if [[ -n "$caught" ]]; then
		note="holder $(cname "$caught" | sed 's/.*_\(stockd_[0-9]*\)$/\1/') paused ${hold}s"
		if [[ -n "$who" ]]; then
			[[ "$who" == "$(replica_name "$caught")" ]] && note+=" (etcd lease confirms)" ||
				note+=" (etcd lease says $who!)"
		fi
		verdict "$v" "$b" "pause holder > ttl ${LOCK_TTL_S}s" "pause-$b" "$st" "$note: ok"
	else
		# Missing the holder is not a safety failure: the books are still
		# checked below. The lab suite (e2e/matrix TestFaultMatrix) pauses the holder
		# deterministically for every backend; here the row says it missed.
		verdict "$v" "$b" "pause holder > ttl ${LOCK_TTL_S}s" "pause-$b" "$st" 'holder not caught (12 tries, or the firing phase over), books still checked: ok'
	fi
}

fault_netcut() {
	local v=$1 b=$2 c net a aliases=() n st
	read -r n st <<<"$(size 15)"
	c=$(replica 3)
	net=$(network "$c")
	bg_load netcut-$b "$n" 50 "$st"
	selling nginx_lucky
	# Compose's aliases (the service name nginx resolves) must be restored too.
	for a in $(docker inspect -f "{{range .NetworkSettings.Networks}}{{range .Aliases}}{{.}} {{end}}{{end}}" "$c"); do
		aliases+=(--alias "$a")
	done
	docker network disconnect "$net" "$c"
	sleep $((2 * LOCK_TTL_S + 1))
	docker network connect "${aliases[@]}" "$net" "$c"
	fg_wait
	verdict "$v" "$b" "network disconnect $((2 * LOCK_TTL_S + 1))s" "netcut-$b" "$st"
	if wait_healthy stockd; then
		nginx_reload # the reconnected replica may have a new address
		load reconnect-$b 300 30 200
		verdict "$v" "$b" "reconnected: serving" "reconnect-$b" 200 exact "sold-by=$(replica_name "$c")"
	else
		row "$v" "$b" "reconnected: serving" FAIL - - - - - - "replica not ready after reconnect"
	fi
}

scenarios_single() {
	local v=$1 b=$2 f faults
	check_election "$v" "$b"
	load base-$b 500 50 300
	verdict "$v" "$b" baseline "base-$b" 300 exact
	BASE_RPS=$(jfield "$OUT/base-$b.json" '.rps | floor')
	faults="FAULTS_${b//-/_}"
	faults=${!faults:-kill pause netcut}
	((FULL)) && faults="kill pause netcut"
	for f in $faults; do
		"fault_$f" "$v" "$b"
	done
}

# scenario_auth VARIANT BACKEND: who a buyer is, through nginx (docs/buyers.md
# "Buyers"): a forged token and an X-User-only request are answered as
# they must be, the ledger is the operator's, and a token signed with the
# compose secret (the documented recipe, openssl) buys as its sub.
scenario_auth() {
	local code order forged h p s note="" bad=0
	token() { # sub secret -> a one-hour HS256 token for iss/aud "seckill"
		h=$(printf '{"alg":"HS256","typ":"JWT"}' | basenc -w0 --base64url | tr -d '=')
		p=$(printf '{"iss":"seckill","aud":"seckill","sub":"%s","exp":%d}' "$1" $(($(date +%s) + 3600)) | basenc -w0 --base64url | tr -d '=')
		s=$(printf '%s.%s' "$h" "$p" | openssl dgst -sha256 -hmac "$2" -binary | basenc -w0 --base64url | tr -d '=')
		echo "$h.$p.$s"
	}
	post() { curl -s -o "$OUT/auth.body" -w '%{http_code}' -X POST "$@" "$URL/stock/reduce" || echo 000; }
	# Units to sell (the tools run sold out its sale).
	code=$(curl -s -o "$OUT/auth.body" -w '%{http_code}' -X POST -H "X-Admin-Token: $ADMIN_TOKEN" \
		-H 'Content-Type: application/json' -d '{"stock":10}' "$URL/stock/reset" || echo 000)
	[[ $code == 200 ]] || { bad=1; note+="reset: $code $(cat "$OUT/auth.body"); "; }
	forged=$(token mallory "not-the-secret-not-the-secret-xx")
	code=$(post -H "Authorization: Bearer $forged")
	[[ $code == 401 ]] || { bad=1; note+="forged token: $code (want 401); "; }
	# nginx drops a client's X-User: the sale is anonymous, not a 401.
	code=$(post -H "X-User: mallory")
	[[ $code == 200 || $code == 409 ]] || { bad=1; note+="X-User only: $code (want it dropped by nginx: 200/409); "; }
	code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/ledger" || echo 000)
	[[ $code == 401 ]] || { bad=1; note+="GET /ledger without the admin token: $code (want 401); "; }
	code=$(post -H "Authorization: Bearer $(token alice "$JWT_SECRET")")
	order=$(jfield "$OUT/auth.body" .order)
	if [[ $code != 200 || -z $order ]]; then
		bad=1; note+="a token signed with JWT_SECRET: $code $(cat "$OUT/auth.body") (want 200 with an order); "
	elif [[ "$(curl -s -H "Authorization: Bearer $(token alice "$JWT_SECRET")" "$URL/orders/$order" | jbody .user)" != alice ]]; then
		bad=1; note+="alice cannot read her order $order; "
	elif [[ $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(token bob "$JWT_SECRET")" "$URL/orders/$order") != 404 ]]; then
		bad=1; note+="bob reads alice's order $order (want 404); "
	fi
	if ((bad)); then
		row "$1" "$2" "auth through nginx" FAIL - - - - - - "$note"
	else
		row "$1" "$2" "auth through nginx" pass - - - - - - "forged 401, X-User dropped, /ledger 401, alice's token buys and reads her order, bob's gets 404"
	fi
}

# leader_of etcd|zookeeper: container id of the current leader.
leader_of() {
	local c
	case $1 in
	etcd)
		# endpoint status, simple: "endpoint, id, version, db size, is
		# leader, ..." (member ids exceed 2^53: not compared as JSON numbers).
		for c in $(cids etcd) $(cids etcd2) $(cids etcd3); do
			if docker exec "$c" etcdctl --endpoints=http://127.0.0.1:2379 endpoint status 2>/dev/null |
				awk -F', ' '$5 == "true" { found = 1 } END { exit !found }'; then
				echo "$c"; return
			fi
		done ;;
	zookeeper)
		for c in $(cids zookeeper) $(cids zookeeper2) $(cids zookeeper3); do
			if docker exec "$c" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; printf srvr >&3; cat <&3' |
				grep -q 'Mode: leader'; then
				echo "$c"; return
			fi
		done ;;
	esac
}

# scenarios_ha BACKEND (etcd|zookeeper): stop that lock service's LEADER
# mid-sale; the stock must still sell out, with no oversell, and the replicas
# must still agree on one leader of their own election.
scenarios_ha() {
	local v=ha b=$1 c svc le lz n ln
	le=$(leader_of etcd) lz=$(leader_of zookeeper)
	n=$(for svc in etcd etcd2 etcd3 zookeeper zookeeper2 zookeeper3; do cids "$svc"; done | wc -l)
	ln="$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' $le $lz 2>/dev/null | tr '\n' ' ')"
	check_election "$v" "$b"
	load base-ha-$b 500 50 300
	local members=NO
	[[ $n == 6 && -n $le && -n $lz ]] && members=ok
	verdict "$v" "$b" "baseline, clusters up" "base-ha-$b" 300 exact "$n lock members healthy, leaders: ${ln% }: $members"
	[[ $b == etcd || $b == zookeeper ]] || return 0
	c=$(leader_of "$b")
	[[ -n "$c" ]] || { row "$v" "$b" "stop leader" FAIL - - - - - - "no leader found"; return; }
	svc=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$c")
	BASE_RPS=$(jfield "$OUT/base-ha-$b.json" '.rps | floor')
	local n st
	read -r n st <<<"$(size 15)"
	bg_load leader-ha-$b "$n" 50 "$st"
	selling nginx_lucky
	docker stop -t 2 "$c" >/dev/null
	fg_wait
	# Mid-stop: no oversell (the stock may be left over: while ZooKeeper
	# elects, requests fail fast with 503 and a short load can burn out).
	verdict "$v" "$b" "stop $b leader ($svc)" "leader-ha-$b" "$st" \
		"new leader $(leader_of "$b" | xargs -r docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}'): ok"
	# Sales continue on the two survivors: a fresh sale sells out exactly.
	wait_healthy stockd || true
	load after-ha-$b 300 30 200
	verdict "$v" "$b" "after stop: sales go on" "after-ha-$b" 200 exact sold-out
	check_election "$v" "$b"
	# Not restarted: the next HA backend gets a fresh cluster (down -v
	# below, which also empties the members' volumes).
}

# ---- lanes ---------------------------------------------------------------
# LANES=2 (the default): the variants run in two lanes at once, each a
# compose-test of its own (its project, nginx port, tokens, log) over the
# images built above: lane 1 the single and HA variants, lane 2 the files
# of scripts/compose-test.d. A variant mostly waits (clusters starting,
# leases expiring, pauses), so the two take about the time of the longer
# rather than the sum. The lanes' rows come back to this table, their logs
# after it; LANES=1 runs every variant in turn, here.
if ((${LANES:-2} > 1)) && [[ -z ${COMPOSE_TEST_LANE:-} ]]; then
	run_lane() { # N VAR=value...: one lane, with its variables
		local n=$1
		shift
		env COMPOSE_TEST_LANE="$n" COMPOSE_TEST_SECKILL="$SECKILL" COMPOSE_TEST_ROWS="$OUT/lane-$n.rows" "$@" \
			"$ROOT/scripts/compose-test.sh" >"$OUT/lane-$n.log" 2>&1
	}
	log "two lanes at once: 1 = single + HA, 2 = scripts/compose-test.d (logs $OUT/lane-1.log, lane-2.log)"
	run_lane 1 CLUSTER=0 ITEMS=0 OBSERVABILITY=0 README_BLOCKS=0 REDIS_RESTART=0 RESERVE=0 SCALE=0 SENTINEL=0 &
	lane1=$!
	run_lane 2 SINGLE=0 HA=0 &
	lane2=$!
	rc1=0 rc2=0
	wait "$lane1" || rc1=$?
	wait "$lane2" || rc2=$?
	for n in 1 2; do
		log "---- lane $n ----"
		sed "s/^/[lane $n] /" "$OUT/lane-$n.log" >&2
		if [[ -s $OUT/lane-$n.rows ]]; then
			mapfile -t -O "${#ROWS[@]}" ROWS <"$OUT/lane-$n.rows"
		fi
	done
	for r in "${ROWS[@]}"; do
		[[ $(cut -d'|' -f4 <<<"$r") != FAIL ]] || FAILED=1
	done
	# Failing rows first: a lane that failed a row exits 1 for that reason.
	((FAILED == 0)) || { WHY="the rows marked FAIL above:$(failed_rows)"; exit 1; }
	for n in 1 2; do
		rc=rc$n
		if ((${!rc} != 0)); then
			WHY="lane $n exited ${!rc}: $(grep -o 'FAIL (rc.*\|FAIL: .*' "$OUT/lane-$n.log" | tail -1 || true)"
			exit 1
		fi
	done
	log "PASS"
	exit 0
fi

# ---- run -----------------------------------------------------------------
log "project $PROJECT, compose: ${COMPOSE[*]}, images: $IMAGES, nginx on $URL${COMPOSE_TEST_LANE:+, lane $COMPOSE_TEST_LANE}"
T0=$(date +%s)
first=1
for b in $BACKENDS; do
	[[ "${SINGLE:-1}" == 1 ]] || break
	rc=0
	up_backend single "$b" || rc=$?
	if ((first && rc == 0)); then
		T_UP=$(($(date +%s) - T0))
		log "cluster up and healthy in ${T_UP}s"
		first=0
		# The tools profile works: the same check from inside the network.
		out=$(compose --profile tools run --rm -T seckill run --url http://nginx --requests 200 \
			--concurrency 20 --stock 100 --admin-token "$ADMIN_TOKEN" --json 2>"$OUT/tools-$b.err") || true
		echo "$out" >"$OUT/tools-$b.json"; echo 0 >"$OUT/tools-$b.rc"
		verdict single "$b" "tools profile run" "tools-$b" 100
		scenario_auth single "$b"
	fi
	((rc == 2)) && break
	((rc == 0)) || continue
	scenarios_single single "$b"
done

if [[ "$HA" == 1 ]]; then
	log "down; HA variant"
	compose_down
	FILES=(-f docker-compose.yml -f docker-compose.ha.yml)
	# The HA file itself: 3 etcd members and a 3-server ensemble with quorum
	# (their healthchecks require it); the etcd and zookeeper locks lose
	# their service's leader mid-sale. Without either backend: a baseline on
	# the redis lock.
	ha=()
	for b in $BACKENDS; do [[ $b == etcd || $b == zookeeper ]] && ha+=("$b"); done
	((${#ha[@]})) || ha=(redis)
	for b in "${ha[@]}"; do
		rc=0
		[[ $b == "${ha[0]}" ]] || compose_down
		up_backend ha "$b" || rc=$?
		((rc == 2)) && break
		((rc == 0)) || continue
		scenarios_ha "$b"
	done
fi

# More variants, one file each in scripts/compose-test.d (sourced in name
# order, so they use the helpers above; each is switched off by its own
# variable, named in its header).
for extra in "$ROOT"/scripts/compose-test.d/*.sh; do
	[[ -e "$extra" ]] || continue
	# shellcheck source=/dev/null
	source "$extra"
done

((FAILED == 0)) || { WHY="the rows marked FAIL above:$(failed_rows)"; exit 1; }
log "PASS"
