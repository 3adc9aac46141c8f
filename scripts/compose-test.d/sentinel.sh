# compose-test variant "sentinel" (sourced by scripts/compose-test.sh after
# its own variants; uses its helpers). SENTINEL=0 leaves it out.
#
# The stock Redis behind Sentinel, as docker-compose.ha.yml's
# `sentinel` profile runs it: redis (primary), redis-replica, three
# Sentinels, stockd through them with the redis lock in the same Redis, so
# the stock, the fence, the lock and its token counter fail over together,
# and stock.min_replica_acks at its default (1 with Sentinel). Only the
# services this backend uses are started (--no-deps, in dependency order):
# no ZooKeeper ensemble, no MySQL.
#
#   baseline           a sale sells out exactly through the Sentinel set,
#                      and /info says min_replica_acks 1 and sentinel
#   failover: kill     `docker kill` the primary mid-sale; Sentinel promotes
#                      the replica; the old primary is started again and
#                      made a replica of the new one at once (it has no
#                      persistence: it comes back empty). Judged: 0 oversold
#                      (books read on the Sentinels' primary), 0 acknowledged
#                      sales lost (sold + unconfirmed_sold - lucky: answers
#                      told minus what the new primary holds), and shown:
#                      the switch, the rejoin, the first sale made after
#                      the kill (lucky moving; with acks on it is answered
#                      sold only once a replica is up again)
#   after the kill     a fresh sale sells out exactly on the new primary
#   failover: pause    `docker pause` (SIGSTOP) the new primary mid-sale
#                      until Sentinel has switched back, then unpause:
#                      Sentinel makes it a replica itself, after its INFO
#                      (10 s period; 15-16 s after the switch measured),
#                      so with acks on sales answer `unconfirmed` until
#                      then. Judged as the kill
#   after the pause    the same fresh sale
#
# SENTINEL_FAULTS="kill" leaves the pause out. SENTINEL_ACKS=0 runs the
# rows with min_replica_acks 0: the control, which may lose acknowledged
# sales when a fault lands in the replication lag (rare on one machine); a
# loss fails its row, as it would with acks. ~75 s.

SENTINEL=${SENTINEL:-1}

# sentinel_master: the host the first Sentinel names as the primary
# ("redis" or "redis-replica": Sentinel announces hostnames here).
sentinel_master() {
	timeout 5 docker exec "$(cids redis-sentinel1)" redis-cli --raw -p 26379 \
		sentinel get-master-addr-by-name seckill 2>/dev/null | head -1 || true
}

# sentinel_books: "stock lucky" on the Sentinels' primary itself, past
# stockd: verdict's redis_state during this variant.
sentinel_books() {
	local m
	m=$(sentinel_master)
	[[ -n "$m" ]] || return 0
	timeout 5 docker exec "$(cids "$m")" redis-cli --raw mget stock lucky 2>/dev/null | tr '\n' ' ' || true
}

# sentinel_ready SECONDS: every Sentinel knows the replica and the two other
# Sentinels (replicas are learnt from the primary's INFO, every 10 s, the
# others from hellos), so a failover can start as soon as one is needed.
sentinel_ready() { within "$1" sentinels_know; }

# sentinels_know: 0 when every Sentinel knows a replica and two others.
sentinels_know() {
	local s
	for s in redis-sentinel1 redis-sentinel2 redis-sentinel3; do
		timeout 5 docker exec "$(cids $s)" redis-cli --raw -p 26379 sentinel master seckill 2>/dev/null |
			awk 'p == "num-slaves" { r = $0 } p == "num-other-sentinels" { o = $0 } { p = $0 }
				END { exit !(r >= 1 && o >= 2) }' || return 1
	done
}

# sentinel_logs NAME: each Sentinel's log and view of the master, and each
# Redis node's replication state, kept with the artifacts.
sentinel_logs() {
	local s c
	for s in redis-sentinel1 redis-sentinel2 redis-sentinel3; do
		c=$(cids $s)
		docker logs "$c" >"$OUT/$1.$s.log" 2>&1 || true
		timeout 5 docker exec "$c" redis-cli -p 26379 sentinel master seckill >>"$OUT/$1.$s.log" 2>&1 || true
	done
	for s in redis redis-replica; do
		timeout 5 docker exec "$(cids $s)" redis-cli info replication >"$OUT/$1.$s.replication" 2>&1 || true
	done
}

# sentinel_up: start the services in dependency order, each healthy before
# the next; 0 ready, 1 failed (a FAIL row written).
sentinel_up() {
	local step
	export LOCK_BACKEND=redis LAB_UNSAFE=false ELECTION_BACKEND=etcd
	for step in "redis etcd etcd2 etcd3" redis-replica "redis-sentinel1 redis-sentinel2 redis-sentinel3" stockd nginx; do
		# shellcheck disable=SC2086 # one word per service
		if ! compose up -d --no-deps $step >>"$OUT/up-sentinel.log" 2>&1 || ! wait_healthy $step; then
			row sentinel redis up FAIL - - - - - - "$step not healthy ($OUT/up-sentinel.log)"
			return 1
		fi
	done
	sentinel_ready 30 || { row sentinel redis up FAIL - - - - - - "the Sentinels did not learn the replica and each other in 30s"; return 1; }
	nginx_reload
}

# sentinel_failover FAULT ACKS: fault the Sentinels' primary mid-sale
# (kill: docker kill, then started again and made a replica of the new
# primary at once, as README says to; pause: docker pause until the first
# Sentinel has switched, then unpause, and Sentinel itself makes it a
# replica, 15-16 s later as measured). See the header.
sentinel_failover() {
	local v=sentinel b=redis fault=$1 acks=$2 name=failover-$1-$2 n st m other c t_fault t_switch="" t_sold="" t_rejoin=""
	local lk lucky1="" sold us unconfirmed lost now moved=NO
	# Long enough to outlast the failover: with acks on, requests answer
	# 503 unconfirmed at the ack timeout while no replica is up, so the
	# load keeps going through the outage and sells out after it.
	read -r n st <<<"$(size 12)"
	m=$(sentinel_master)
	[[ $m == redis ]] && other=redis-replica || other=redis
	c=$(cids "$m")
	bg_load "$name" "$n" 30 "$st"
	selling nginx_lucky
	docker "$fault" "$c" >/dev/null
	t_fault=$(date +%s%N)
	# Poll, 4 times a second (each time taken after the observation, so an
	# upper bound): the switch (the first Sentinel names the other node),
	# the old primary replicating from it, and the first sale made after
	# the fault: lucky above its first reading after the fault (no sale is
	# made between the fault and that reading: the primary is gone, and
	# with acks on nothing is sold before the rejoin), read through nginx.
	while (($(date +%s%N) - t_fault < 60000000000)); do
		now=$(sentinel_master)
		if [[ -z "$t_switch" && -n "$now" && "$now" != "$m" ]]; then
			t_switch=$(date +%s%N)
			if [[ $fault == kill ]]; then
				docker start "$c" >/dev/null || log "docker start of the old primary failed"
				# At once: it is empty, and a master until told otherwise.
				for _ in 1 2 3 4 5 6 7 8 9 10; do
					timeout 5 docker exec "$c" redis-cli replicaof "$other" 6379 >/dev/null 2>&1 && break
					sleep 0.2
				done
			else
				docker unpause "$c" >/dev/null
			fi
		fi
		if [[ -n "$t_switch" && -z "$t_rejoin" ]] &&
			timeout 5 docker exec "$c" redis-cli info replication 2>/dev/null | grep -q 'master_link_status:up'; then
			t_rejoin=$(date +%s%N)
		fi
		if [[ -z "$t_sold" ]]; then
			lk=$(nginx_lucky)
			if [[ -n "$lk" && -z "$lucky1" ]]; then
				lucky1=$lk
			elif [[ -n "$lk" ]] && ((lk > lucky1)); then
				t_sold=$(date +%s%N)
			fi
		fi
		[[ -n "$t_switch" && -n "$t_rejoin" && -n "$t_sold" ]] && break
		sleep 0.25
	done
	sentinel_logs "$name"
	if [[ -z "$t_switch" ]]; then
		[[ $fault != pause ]] || docker unpause "$c" >/dev/null 2>&1 || true
		fg_wait
		row "$v" "$b" "failover: $fault $m" FAIL - - - "$st" - - "no Sentinel switch in 60s; Sentinels' logs and state in $OUT/$name.sentinel*"
		return 1
	fi
	fg_wait
	read -r sold us unconfirmed <<<"$(jfield "$OUT/$name.json" '"\(.sold // 0) \(.unconfirmed_sold // 0) \(.unconfirmed // 0)"')"
	read -r _ lucky <<<"$(sentinel_books)"
	lost=$((${sold:-0} + ${us:-0} - ${lucky:-0}))
	((lost > 0)) || lost=0
	local note="min_replica_acks $acks; switch $(since_ms "$t_fault" "$t_switch"), old primary replicating $(since_ms "$t_fault" "$t_rejoin"), sales made again (lucky moving) $(since_ms "$t_fault" "$t_sold") after the $fault; unconfirmed $unconfirmed ($us sold); lost $lost"
	# Oversold and the books are verdict's (stock + lucky == initial on the
	# new primary, seckill's oversold, sold <= lucky); lost is judged here
	# too, counting the unconfirmed answers that sold by their receipts.
	# Sentinel names each node as it announces itself: the other's name,
	# not an address (docker-compose.ha.yml's replica-announce-ip).
	[[ $lost == 0 && $(sentinel_master) == "$other" ]] && moved=ok
	verdict "$v" "$b" "failover: $fault $m" "$name" "$st" "$note: $moved"
	wait_healthy stockd || true
	load "after-$name" 300 30 200
	verdict "$v" "$b" "after the $fault: sells out" "after-$name" 200 exact sold-out "on $(sentinel_master): ok"
}

sentinel_variant() {
	local v=sentinel b=redis t0 acks=${SENTINEL_ACKS:-1} f
	t0=$(date +%s)
	log "down; sentinel variant (the stock Redis fails over; redis lock, min_replica_acks ${acks})"
	compose_down
	local files_before=("${FILES[@]}")
	FILES=(-f docker-compose.yml -f docker-compose.ha.yml --profile sentinel)
	# 3 s, not 1: a just-switched Sentinel can miss the new primary's first
	# PONG and fail over a second time (docs/faults.md, the empty primary).
	export REDIS_SENTINEL_MASTER=seckill SENTINEL_DOWN_AFTER_MS=${SENTINEL_DOWN_AFTER_MS:-3000} \
		REDIS_SENTINEL_ADDRS=redis-sentinel1:26379,redis-sentinel2:26379,redis-sentinel3:26379 \
		ETCD_ENDPOINTS=http://etcd:2379,http://etcd2:2379,http://etcd3:2379 MIN_REPLICA_ACKS=$acks
	# verdict reads the books where Sentinel says the primary is.
	BOOKS_READER=sentinel_books
	if sentinel_up; then
		load sentinel-base 500 50 300
		verdict "$v" "$b" "baseline, sentinel" sentinel-base 300 exact \
			"$(check "/info says acks $acks via sentinel" test "$(http_get 127.0.0.1 "$NGINX_PORT" /info | jbody '"\(.min_replica_acks) \(.sentinel)"')" = "$acks true")"
		BASE_RPS=$(jfield "$OUT/sentinel-base.json" '.rps | floor')
		for f in ${SENTINEL_FAULTS:-kill pause}; do
			sentinel_failover "$f" "$acks" || break
		done
	fi
	BOOKS_READER=
	log "sentinel variant: $(($(date +%s) - t0))s"
	compose_down
	FILES=("${files_before[@]}")
	unset REDIS_SENTINEL_MASTER REDIS_SENTINEL_ADDRS SENTINEL_DOWN_AFTER_MS ETCD_ENDPOINTS MIN_REPLICA_ACKS
}

if [[ $SENTINEL == 1 ]]; then
	sentinel_variant
fi
