#!/usr/bin/env bash
# compose-test: bring the docker-compose cluster up on this machine and prove
# that a flash sale through nginx never oversells, per lock backend, under
# faults: a killed replica, a paused replica (past the lock TTL), a replica cut
# off the network; and, with docker-compose.ha.yml, a stopped etcd leader and
# a stopped ZooKeeper leader.
#
#   scripts/compose-test.sh                 # everything
#   BACKENDS="redis etcd" HA=0 scripts/compose-test.sh
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

BACKENDS=${BACKENDS:-redis redisson etcd zookeeper}
HA=${HA:-1}
IMAGES=${IMAGES:-standin}
LOCK_TTL_S=${LOCK_TTL_S:-3}
WAIT_S=${WAIT_S:-180}      # bound on every "until healthy" wait
LOAD_TIMEOUT_S=${LOAD_TIMEOUT_S:-150}

log() { printf '%s compose-test: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

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

teardown() {
	local rc=$?
	set +e
	if [[ -n "${LOAD_PID:-}" ]]; then kill "$LOAD_PID" 2>/dev/null; fi
	docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter status=paused |
		xargs -r docker unpause >/dev/null 2>&1
	log "down -v ($PROJECT)"
	compose --profile tools down -v --remove-orphans >/dev/null 2>&1 ||
		compose down -v --remove-orphans >/dev/null 2>&1
	print_table
	log "artifacts in $OUT; total $(($(date +%s) - T_START))s"
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

row() { # variant backend scenario result sold lucky stock initial errors rps note
	ROWS+=("$(IFS='|'; echo "$*")")
	[[ "$4" != FAIL ]] || FAILED=1
	log "$3 [$2/$1]: $4 ${11:-}"
}

# ---- images --------------------------------------------------------------
[[ -d cmd/stockd && -d cmd/seckill ]] || die "cmd/stockd and cmd/seckill must exist"

T0=$(date +%s)
mkdir -p "$STAGE/etc" "$STAGE/tmp"
chmod 1777 "$STAGE/tmp"
log "go build stockd, seckill, healthcheck (static)"
gobuild() { # one retry: a build cache shared with concurrent builds can hiccup
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$STAGE/$1" "$2" ||
		{ log "go build $2 failed; retrying once"; CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$STAGE/$1" "$2"; }
}
gobuild stockd ./cmd/stockd
gobuild seckill ./cmd/seckill
gobuild healthcheck ./docker/healthcheck
SECKILL=$STAGE/seckill
T_GO=$(($(date +%s) - T0))

export ADMIN_TOKEN=ct-$RANDOM$RANDOM
# Lease lifetimes short enough that a pause can outlast them.
export LOCK_TTL=${LOCK_TTL_S}s ETCD_SESSION_TTL=${LOCK_TTL_S}s ZK_SESSION_TIMEOUT=${LOCK_TTL_S}s \
	REDISSON_WATCHDOG=${LOCK_TTL_S}s
export STOCKD_REPLICAS=3
T0=$(date +%s)
case "$IMAGES" in
standin)
	docker/build-standins.sh
	standin=${STANDIN_IMAGE:-seckill/standin-base:bookworm}
	export REDIS_IMAGE=$standin ETCD_IMAGE=$standin ZOOKEEPER_IMAGE=$standin NGINX_IMAGE=$standin
	export STOCKD_IMAGE=seckill/stockd:compose-test
	printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' >"$STAGE/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$STAGE/etc/group"
	docker build -q -f docker/Dockerfile.local -t "$STOCKD_IMAGE" "$STAGE" >/dev/null
	;;
official)
	compose build stockd
	compose pull --ignore-pull-failures redis etcd zookeeper nginx
	;;
*) die "IMAGES must be standin or official" ;;
esac
T_IMAGES=$(($(date +%s) - T0))
log "images ready in ${T_IMAGES}s (go build ${T_GO}s)"

# A free loopback port for nginx (other engineers may hold 8080).
while :; do
	NGINX_PORT=$((20000 + RANDOM % 30000))
	(exec 3<>"/dev/tcp/127.0.0.1/$NGINX_PORT") 2>/dev/null || break
done
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

# jget FILE KEY: a top-level scalar of seckill's flat JSON report (no jq needed).
jget() { grep -o "\"$2\":[^,}]*" "$1" | head -1 | cut -d: -f2 | tr -d '" '; }

redis_state() { # prints "stock lucky"
	docker exec "$(cids redis)" redis-cli --raw mget stock lucky | tr '\n' ' '
}

# load NAME REQUESTS CONCURRENCY STOCK: seckill through nginx -> $OUT/NAME.json
load() {
	local rc=0
	timeout "$LOAD_TIMEOUT_S" "$SECKILL" run --url "$URL" --requests "$2" --concurrency "$3" \
		--stock "$4" --admin-token "$ADMIN_TOKEN" --json >"$OUT/$1.json" 2>"$OUT/$1.err" || rc=$?
	echo "$rc" >"$OUT/$1.rc"
}

# verdict VARIANT BACKEND SCENARIO NAME INITIAL [LABEL=CONDITION]
# CONDITION is bash evaluated with rc, sold, errors, stock, lucky, j (the JSON).
# No oversell: stock >= 0, stock + lucky == initial (read from Redis directly,
# not trusted from the tool), sold (2xx seen by clients) <= lucky, and the
# tool did not exit 3. sold < lucky is allowed under faults: a replica that
# died after selling never answered; it is reported as "lost".
verdict() {
	local variant=$1 backend=$2 scenario=$3 name=$4 initial=$5 extra=${6:-}
	local rc j sold errors rps stock lucky res=PASS note=""
	rc=$(cat "$OUT/$name.rc")
	j=$OUT/$name.json
	read -r stock lucky <<<"$(redis_state)"
	stock=${stock:-?} lucky=${lucky:-?}
	if ! grep -q '"sold":' "$j" 2>/dev/null; then
		row "$variant" "$backend" "$scenario" FAIL - "$lucky" "$stock" "$initial" - - \
			"seckill rc=$rc: $(tail -c 200 "$OUT/$name.err" | tr '\n' ' ')"
		return
	fi
	sold=$(jget "$j" sold)
	errors=$(jget "$j" errors)
	rps=$(jget "$j" rps | cut -d. -f1)
	if [[ "$rc" == 3 ]]; then res=FAIL note="seckill: oversold;"; fi
	if ! [[ "$stock" =~ ^[0-9]+$ && "$lucky" =~ ^[0-9]+$ ]]; then
		res=FAIL note+=" redis stock/lucky unreadable;"
	else
		((stock + lucky == initial)) || { res=FAIL; note+=" stock+lucky!=initial;"; }
		((sold <= lucky)) || { res=FAIL; note+=" sold>lucky (oversell);"; }
		((sold == lucky)) || note+=" lost=$((lucky - sold)) (sold, unanswered);"
	fi
	[[ "$rc" == 0 || "$rc" == 3 ]] || note+=" seckill rc=$rc;"
	local busy fenced
	busy=$(jget "$j" busy) fenced=$(jget "$j" fenced)
	((busy + fenced == 0)) || note+=" busy=$busy fenced=$fenced;"
	if [[ -n "$extra" ]]; then
		if eval "${extra#*=}"; then note+=" ${extra%%=*}: ok;"; else res=FAIL note+=" ${extra%%=*}: NO;"; fi
	fi
	row "$variant" "$backend" "$scenario" "$res" "$sold" "$lucky" "$stock" "$initial" "$errors" "$rps" "${note# }"
}

# up_backend VARIANT BACKEND: (re)create stockd with the backend; 0 ready,
# 1 skipped (stockd refused to start), 2 failed.
up_backend() {
	export LOCK_BACKEND=$2
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

scenarios_single() {
	local v=$1 b=$2 c
	# 1. baseline
	load base-$b 500 50 300
	verdict "$v" "$b" baseline "base-$b" 300 'exact (rc 0)=[[ $rc == 0 ]]'

	# 2. kill -9 one replica mid-load; then nginx must route around it.
	c=$(replica 1)
	bg_load kill-$b 3000 50 1000
	sleep 1.5
	docker kill "$c" >/dev/null
	fg_wait
	verdict "$v" "$b" "kill $(cname "$c" | sed 's/.*_\(stockd_[0-9]*\)$/\1/')" "kill-$b" 1000
	load afterkill-$b 300 30 200
	verdict "$v" "$b" "after kill: routing" "afterkill-$b" 200 'routed around (errors under 10%)=((errors * 10 <= 300 && sold > 0))'
	docker start "$c" >/dev/null
	wait_healthy stockd || true
	nginx_reload

	# 3. pause a replica (it may hold the lock) past the TTL, then unpause.
	c=$(replica 2)
	bg_load pause-$b 3000 50 1000
	sleep 1.5
	docker pause "$c" >/dev/null
	sleep $((2 * LOCK_TTL_S + 1))
	docker unpause "$c" >/dev/null
	fg_wait
	verdict "$v" "$b" "pause $((2 * LOCK_TTL_S + 1))s (ttl ${LOCK_TTL_S}s)" "pause-$b" 1000

	# 4. cut a replica off the network mid-load, reconnect, it serves again.
	c=$(replica 3)
	local net
	net=$(network "$c")
	bg_load netcut-$b 3000 50 1000
	sleep 1.5
	# Compose's aliases (the service name nginx resolves) must be restored too.
	local aliases=() a
	for a in $(docker inspect -f "{{range .NetworkSettings.Networks}}{{range .Aliases}}{{.}} {{end}}{{end}}" "$c"); do
		aliases+=(--alias "$a")
	done
	docker network disconnect "$net" "$c"
	sleep $((2 * LOCK_TTL_S + 1))
	docker network connect "${aliases[@]}" "$net" "$c"
	fg_wait
	verdict "$v" "$b" "network disconnect" "netcut-$b" 1000
	if wait_healthy stockd; then
		nginx_reload # the reconnected replica may have a new address
		load reconnect-$b 300 30 200
		HOST=$(docker inspect -f '{{.Config.Hostname}}' "$c")
		verdict "$v" "$b" "reconnected: serving" "reconnect-$b" 200 \
			'exact, replica sold via nginx=[[ $rc == 0 ]] && grep -q "\"$HOST\":[1-9]" "$j"'
	else
		row "$v" "$b" "reconnected: serving" FAIL - - - - - - "replica not ready after reconnect"
	fi
}

# leader_of etcd|zookeeper: container id of the current leader.
leader_of() {
	local c
	case $1 in
	etcd)
		# Compare the raw JSON digits: member ids exceed 2^53 (jq would round).
		local id st
		for c in $(cids etcd) $(cids etcd2) $(cids etcd3); do
			st=$(docker exec "$c" etcdctl --endpoints=http://127.0.0.1:2379 endpoint status -w json 2>/dev/null) || continue
			id=$(grep -o '"member_id":[0-9]*' <<<"$st" | cut -d: -f2)
			if [[ -n "$id" && "$(grep -o '"leader":[0-9]*' <<<"$st" | cut -d: -f2)" == "$id" ]]; then
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

scenarios_ha() {
	local v=ha b=$1 c svc
	load base-ha-$b 500 50 300
	verdict "$v" "$b" baseline "base-ha-$b" 300 'exact (rc 0)=[[ $rc == 0 ]]'
	c=$(leader_of "$b")
	[[ -n "$c" ]] || { row "$v" "$b" "stop leader" FAIL - - - - - - "no leader found"; return; }
	svc=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$c")
	bg_load leader-ha-$b 3000 50 1000
	sleep 1.5
	docker stop -t 2 "$c" >/dev/null
	fg_wait
	# Sales continue: the whole stock is sold although the leader died early.
	verdict "$v" "$b" "stop leader ($svc)" "leader-ha-$b" 1000 'sold out after the stop=((stock == 0))'
	docker start "$c" >/dev/null
	wait_healthy "$svc" || true
}

# ---- run -----------------------------------------------------------------
log "project $PROJECT, compose: ${COMPOSE[*]}, images: $IMAGES, nginx on $URL"
T0=$(date +%s)
first=1
for b in $BACKENDS; do
	rc=0
	up_backend single "$b" || rc=$?
	if ((first && rc == 0)); then
		T_UP=$(($(date +%s) - T0))
		log "cluster up and healthy in ${T_UP}s"
		first=0
		# The tools profile works: the same check from inside the network.
		out=$(compose --profile tools run --rm -T seckill run --url http://nginx --requests 200 \
			--concurrency 20 --stock 100 --admin-token "$ADMIN_TOKEN" --json 2>"$OUT/tools.err") || true
		echo "$out" >"$OUT/tools-$b.json"; echo 0 >"$OUT/tools-$b.rc"
		verdict single "$b" "tools profile run" "tools-$b" 100
	fi
	((rc == 2)) && break
	((rc == 0)) || continue
	scenarios_single single "$b"
done

if [[ "$HA" == 1 ]]; then
	log "down; HA variant"
	compose down -v --remove-orphans >/dev/null 2>&1
	FILES=(-f docker-compose.yml -f docker-compose.ha.yml)
	# The HA file itself: 3 etcd members and a 3-server ensemble with quorum
	# (their healthchecks require it), a sale through it on the redis lock.
	if up_backend ha redis; then
		le=$(leader_of etcd) lz=$(leader_of zookeeper)
		n=$(for svc in etcd etcd2 etcd3 zookeeper zookeeper2 zookeeper3; do cids "$svc"; done | wc -l)
		ln="$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' $le $lz 2>/dev/null | tr '\n' ' ')"
		load base-ha-redis 500 50 300
		verdict ha redis "baseline, clusters up" base-ha-redis 300 \
			"$n lock members healthy, leaders: ${ln% }=[[ \$rc == 0 && $n == 6 && -n '$le' && -n '$lz' ]]"
	fi
	for b in $BACKENDS; do
		[[ "$b" == etcd || "$b" == zookeeper ]] || continue
		rc=0
		up_backend ha "$b" || rc=$?
		((rc == 2)) && break
		((rc == 0)) || continue
		scenarios_ha "$b"
	done
fi

((FAILED == 0)) || exit 1
log "PASS"
