# compose-test variant "redis-restart" (sourced by scripts/compose-test.sh
# after its own variants; uses its helpers). REDIS_RESTART=0 leaves it out.
#
# The stock Redis as docker-compose.yml runs it (an append-only file in the
# redis-data volume, fsync everysec), killed and started again mid-sale:
#
#   baseline           a fresh cluster on the redis lock sells out exactly,
#                      and /info says the AOF is on with fsync everysec
#   kill + start       SIGKILL of the redis container's process and
#                      `docker start` mid-sale (nothing flushed at exit;
#                      what `docker compose kill redis && docker compose
#                      start redis` do, without the compose CLI's and
#                      docker kill's latency, seconds on a loaded machine).
#                      Judged: 0 acknowledged sales lost (lucky on the
#                      restarted Redis >= the 200 answers + the unconfirmed
#                      ones whose receipts say sold), stock + lucky ==
#                      initial, 0 oversold, and sales made after the
#                      restart (lucky at the end above its first reading,
#                      taken with nginx paused from just after the kill)
#   after the restart  a fresh sale sells out exactly
#   kill + start etcd  the witness (compose's etcd, its data in the etcd-data
#                      volume) killed and started mid-sale: the sale goes on
#                      and sells out (stock 0), and the witness's record is
#                      there after it; on a tmpfs it came back empty and the
#                      sale halted `witness_lost`
#
# A kill of the container's process keeps the kernel's page cache, so this
# shows the AOF at work, not everysec against always (README, "Redis
# requirements"). ~40 s after the cluster is up.
#
# REDIS_RESTART_AOF=no runs the control: Redis as compose ran it before
# (REDIS_APPENDONLY=no, stockd with REQUIRE_AOF=false), which restarts
# empty; its kill row must FAIL (the acknowledged sales are gone, and the
# sale stops until a reset), the others pass.

REDIS_RESTART=${REDIS_RESTART:-1}
REDIS_RESTART_AOF=${REDIS_RESTART_AOF:-yes}

# restart_lucky: lucky read from the stock Redis itself: empty while it does
# not answer or answers LOADING (reading its AOF), 0 when it answers without
# the key (restarted empty, as the control's does). Read from the host with
# redis-cli (redis-server's package brings it) at the container's address,
# looked up each time: a started container may get another. Not through
# nginx, which the load keeps busy (reads timed out, 3 s, while the whole
# sale went by), nor with docker exec, which took seconds a read on a
# loaded machine: the remaining units sold between the restart and the
# first read, and the row saw no sale "after" it. restart_lucky IP reads
# it at IP, with no docker call: before the kill, where the two lookups'
# seconds on a loaded machine let the sale sell out first.
restart_lucky() {
	local ip=${1:-} v
	[[ -n $ip ]] || ip=$(ip_of "$(cids redis)" 2>/dev/null) || return 0
	[[ -n $ip ]] || return 0
	v=$(timeout 2 redis-cli -h "$ip" --raw get lucky 2>/dev/null) || return 0
	v=${v//$'\r'/}
	if [[ -z $v ]]; then
		echo 0
	elif [[ $v =~ ^[0-9]+$ ]]; then
		echo "$v"
	fi
}

# restart_mid_sale NAME REQUESTS STOCK [IP]: the load in the background,
# and back once it has sold 20 units (15 s at most; lucky read at the
# stock Redis's IP when given), so that the fault lands mid-sale. The
# sale is reset first: the last sale's lucky, read before the load's own
# reset, said 20 were sold when none was.
restart_mid_sale() {
	http_post_admin /stock/reset "{\"stock\":$3}" >/dev/null
	bg_load "$1" "$2" 50 "$3"
	selling restart_lucky "${4:-}"
}

# restart_answers: 0 once the restarted Redis answers; its lucky in LUCKY0.
restart_answers() {
	LUCKY0=$(restart_lucky)
	[[ -n $LUCKY0 ]]
}

# restart_witness_record: the start of the sale's witness record in etcd
# ("" when there is none).
restart_witness_record() {
	docker exec "$(cids etcd)" etcdctl --endpoints=http://127.0.0.1:2379 get --print-value-only /seckill/witness/stock 2>/dev/null |
		tr -d "\n" | cut -c1-60 || true
}

# restart_witness VARIANT BACKEND: the witness (compose's etcd) killed and
# started again mid-sale. Its record is in the etcd-data volume, so the
# sale goes on and sells out; on the tmpfs compose used before, it came
# back empty and the sale halted witness_lost until an operator adopted.
restart_witness() {
	local v=$1 b=$2 n st name=restart-etcd rev0 rev1
	read -r n st <<<"$(size 15)"
	rev0=$(restart_witness_record)
	restart_mid_sale "$name" "$n" "$st"
	compose kill etcd >/dev/null 2>&1
	compose start etcd >/dev/null 2>&1
	fg_wait
	rev1=$(restart_witness_record)
	docker logs "$(cids etcd)" >"$OUT/$name.etcd.log" 2>&1 || true
	verdict "$v" "$b" "kill + start etcd (witness)" "$name" "$st" sold-out \
		"$(check "record kept in the volume; witness before: ${rev0:-none}, after: ${rev1:-none}" test -n "$rev1")"
}

scenario_redis_restart() {
	local v=restart b=redis rc=0 n st name=restart-kill t0 t_up="" lk_kill front lucky0="" sold us unconfirmed lucky stock
	local want="aof true fsync everysec" what="AOF on"
	if [[ $REDIS_RESTART_AOF == no ]]; then
		export REDIS_APPENDONLY=no REQUIRE_AOF=false
		v=restart-control want="aof false" what="no AOF (control)"
	fi
	log "down; redis-restart variant (the stock Redis killed and started again mid-sale, compose defaults, $what)"
	compose_down
	local files_before=("${FILES[@]}")
	FILES=(-f docker-compose.yml)
	up_backend "$v" "$b" || rc=$?
	if ((rc)); then
		FILES=("${files_before[@]}")
		unset REDIS_APPENDONLY REQUIRE_AOF
		return 0
	fi
	load restart-base 500 50 300
	local said
	said=$(http_get 127.0.0.1 "$NGINX_PORT" /info | jbody '.durability | "aof \(.aof) fsync \(.fsync // "-")"')
	verdict "$v" "$b" "baseline, $what" restart-base 300 exact \
		"$(check "/info says $what (${said:-nothing})" test "${said#"$want"}" != "$said")"
	BASE_RPS=$(jfield "$OUT/restart-base.json" '.rps | floor')
	# The sale sized for 15 s, with twice the requests it needs: the ones
	# sent while Redis is down answer 503 at once and use up requests. Its
	# stock twice size's third (about 10 s of sales): on a loaded machine
	# a third sold out before the kill landed, and no sale came after it.
	read -r n st <<<"$(size 15)"
	st=$((2 * st))
	# The control's history cannot be linearized (its Redis forgot sales),
	# and the search for a witness of that ran past LOAD_TIMEOUT_S: the
	# row judges the books, so the control skips it.
	[[ $REDIS_RESTART_AOF == no ]] && LOAD_EXTRA=--check=false
	# The kill is the shell's, of the container's process, everything it
	# needs looked up before the sale: `docker kill` took seconds on a
	# loaded machine, and the 340 units left sold out before it landed;
	# then the lookups themselves (docker inspect, docker ps) took seconds,
	# and all 1650 did. Where the pid cannot be killed from here (not
	# root), docker kills it.
	local rc_id pid ip0
	rc_id=$(cids redis)
	front=$(cids nginx)
	pid=$(docker inspect -f '{{.State.Pid}}' "$rc_id" 2>/dev/null) || pid=
	ip0=$(ip_of "$rc_id" 2>/dev/null) || ip0=
	restart_mid_sale "$name" "$((2 * n))" "$st" "$ip0"
	LOAD_EXTRA=
	# What was sold just before the kill: the fault lands mid-sale only if
	# stock was left.
	lk_kill=$(restart_lucky "$ip0")
	t0=$(date +%s%N)
	if [[ $pid =~ ^[1-9][0-9]*$ ]] && kill -KILL "$pid" 2>/dev/null; then
		docker wait "$rc_id" >/dev/null 2>&1 || true
	else
		docker kill "$rc_id" >/dev/null 2>&1
	fi
	# The front door held (docker pause: its buyers wait, none is refused)
	# from just after the kill until the restarted Redis has been read: the
	# first reading is then what the AOF kept, before any sale after it.
	# Read while the load ran on, it raced the sale: on a loaded machine the
	# remaining units sold between a slow `compose start` and the first
	# read, and the row saw no sale "after" the restart.
	docker pause "$front" >/dev/null 2>&1 || true
	docker start "$rc_id" >/dev/null 2>&1
	if within 60 restart_answers; then
		t_up=$(date +%s%N) lucky0=$LUCKY0
	fi
	docker unpause "$front" >/dev/null 2>&1 || true
	fg_wait
	docker logs "$(cids redis)" >"$OUT/$name.redis.log" 2>&1 || true
	read -r sold us unconfirmed <<<"$(jfield "$OUT/$name.json" '"\(.sold // 0) \(.unconfirmed_sold // 0) \(.unconfirmed // 0)"')"
	read -r stock lucky <<<"$(redis_state)"
	local note="lucky ${lk_kill:-?} of $st just before the kill; Redis answering $(since_ms "$t0" "$t_up") after the kill with lucky ${lucky0:-?} (front door held till then); $((${lucky:-0} - ${lucky0:-0})) sold after it; unconfirmed ${unconfirmed:-?} (${us:-0} sold); acknowledged $((${sold:-0} + ${us:-0})), lucky ${lucky:-?} after the restart"
	# verdict checks stock + lucky == initial and sold <= lucky on the
	# restarted Redis; the unconfirmed answers settled sold count too.
	local kept=NO
	[[ -n $lucky0 && $lucky =~ ^[0-9]+$ ]] && ((lucky > lucky0 && lucky >= ${sold:-0} + ${us:-0})) && kept=ok
	judge "$v" "$b" "kill + start redis" "$name" "$st" "$stock" "$lucky" "$note: $kept"
	wait_healthy || true
	load restart-after 300 30 200
	verdict "$v" "$b" "after the restart: sells out" restart-after 200 exact sold-out
	[[ $REDIS_RESTART_AOF == no ]] || restart_witness "$v" "$b"
	FILES=("${files_before[@]}")
	unset REDIS_APPENDONLY REQUIRE_AOF
}

if [[ "$REDIS_RESTART" == 1 ]]; then
	scenario_redis_restart
fi
