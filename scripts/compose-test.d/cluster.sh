# compose-test variant "cluster" (sourced by scripts/compose-test.sh after
# its own variants; uses its helpers). CLUSTER=0 leaves it out.
#
# The stock on a Redis Cluster, as docker-compose.cluster.yml runs it:
# six nodes (redis-node1..3 masters at first, 4..6 their replicas), formed
# by redis-cluster-init, stockd on it with the redis lock in the cluster
# too and stock.min_replica_acks at its default (1 on a cluster). Only the
# services this uses are started (--no-deps, in dependency order): the
# nodes and one etcd (election, witness), no ZooKeeper, no MySQL, and not
# the base file's single redis.
#
#   baseline           a sale sells out exactly through nginx: stock 0,
#                      lucky = initial, read on the cluster itself
#                      (redis-cli -c mget {stock} {stock}:lucky) and
#                      through stockd (GET /stock); /info says
#                      min_replica_acks 1
#   items              two items created through nginx (POST /items) on
#                      different masters (ids picked by their slots), sold
#                      at once by two host runs of seckill --item; each
#                      sells out exactly, its books read on the cluster and
#                      through GET /items/<id>, its witness in etcd at 0
#                      (/seckill/witness/{stock}:item:<id>: named after
#                      stock.key, so {stock} here);
#                      the note names each item's master
#   failover: kill     `docker kill` the master holding {stock}'s slot
#                      mid-sale; the cluster promotes its replica; the old
#                      master is started again and rejoins as a replica of
#                      the new one by itself (its nodes.conf, in its
#                      volume, says who it was). Judged as sentinel.sh's
#                      kill: 0 oversold (books on the cluster), 0
#                      acknowledged sales lost (sold + unconfirmed_sold -
#                      lucky), the promoted node is the old master's
#                      replica and the old master replicates it. Shown: the
#                      switch, the rejoin, the first sale after the kill
#   failover: failover `CLUSTER FAILOVER` on the replica of {stock}'s master
#                      mid-sale (a manual, coordinated switch: no sale can
#                      be lost by it); judged the same
#   after each fault   a fresh sale sells out exactly
#
# CLUSTER_FAULTS="kill" leaves the manual failover out. CLUSTER_ACKS=0 runs
# the rows with min_replica_acks 0 (the control: may lose sales on the
# kill). Node timeout CLUSTER_NODE_TIMEOUT_MS, 3000 here. ~2 min.

CLUSTER=${CLUSTER:-1}
CLUSTER_NODES="redis-node1 redis-node2 redis-node3 redis-node4 redis-node5 redis-node6"
CLUSTER_ITEM_STOCK=${CLUSTER_ITEM_STOCK:-200}

# cluster_cli ARGS: redis-cli on the first node that answers (a killed one
# does not), -c so a key's command follows its slot to its master.
cluster_cli() {
	local n c
	for n in $CLUSTER_NODES; do
		c=$(cids "$n")
		[[ -n "$c" ]] || continue
		docker exec "$c" redis-cli -c --raw "$@" 2>/dev/null && return 0
	done
	return 1
}

# cluster_master_of KEY: the node (its announced name) serving KEY's slot,
# as the first live node sees it: a master, not failed, whose ranges hold
# the slot. Empty while nobody does (failed, not yet promoted).
cluster_master_of() {
	local slot
	slot=$(cluster_cli cluster keyslot "$1" | tr -d '\r') || return 0
	[[ -n "$slot" ]] || return 0
	cluster_cli cluster nodes | awk -v s="$slot" '
		$3 ~ /master/ && $3 !~ /fail/ {
			for (i = 9; i <= NF; i++) {
				if ($i ~ /^\[/) continue
				n = split($i, r, "-"); lo = r[1] + 0; hi = (n > 1 ? r[2] : r[1]) + 0
				if (s >= lo && s <= hi) { sub(/.*,/, "", $2); print $2; exit }
			}
		}' || true
}

# cluster_replica_of NODE: the announced name of NODE's replica.
cluster_replica_of() {
	cluster_cli cluster nodes | awk -v m="$1" '
		{ h = $2; sub(/.*,/, "", h); name[$1] = h; role[$1] = $3; of[$1] = $4 }
		END { for (id in name) if (name[id] == m) mid = id
			for (id in name) if (role[id] ~ /slave/ && of[id] == mid) { print name[id]; exit } }' || true
}

# cluster_books: "stock lucky" of the default sale on the cluster itself,
# past stockd: verdict's redis_state during this variant.
cluster_books() { cluster_cli mget "{stock}" "{stock}:lucky" | tr '\n' ' ' || true; }

# exited CONTAINER: 0 once it has exited.
exited() { [[ $(docker inspect -f '{{.State.Status}}' "$1" 2>/dev/null) == exited ]]; }

# cluster_up: the nodes and etcd, the init (exited 0), stockd, nginx; 0
# ready, 1 failed (a FAIL row written).
cluster_up() {
	local step c st
	export LOCK_BACKEND=redis LAB_UNSAFE=false ELECTION_BACKEND=etcd
	# shellcheck disable=SC2086 # one word per service
	if ! compose up -d --no-deps $CLUSTER_NODES etcd >>"$OUT/up-cluster.log" 2>&1 || ! wait_healthy $CLUSTER_NODES etcd; then
		row cluster redis up FAIL - - - - - - "nodes not healthy ($OUT/up-cluster.log)"
		return 1
	fi
	compose up -d --no-deps redis-cluster-init >>"$OUT/up-cluster.log" 2>&1
	c=$(cids redis-cluster-init)
	within "$WAIT_S" exited "$c" || true
	st=$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$c" 2>/dev/null || true)
	docker logs "$c" >"$OUT/cluster-init.log" 2>&1 || true
	if [[ $st != "exited 0" ]]; then
		row cluster redis up FAIL - - - - - - "redis-cluster-init: $st ($OUT/cluster-init.log)"
		return 1
	fi
	for step in stockd nginx; do
		if ! compose up -d --no-deps $step >>"$OUT/up-cluster.log" 2>&1 || ! wait_healthy $step; then
			row cluster redis up FAIL - - - - - - "$step not healthy ($OUT/up-cluster.log)"
			return 1
		fi
	done
	nginx_reload
}

# cluster_items: two items on different masters, sold at once.
cluster_items() {
	local v=cluster b=redis id ids=() masters=() m created pids=() i
	# Ids whose slots sit on different masters (the first two found).
	for id in ct-a ct-b ct-c ct-d ct-e ct-f ct-g ct-h; do
		m=$(cluster_master_of "{item:$id}:stock")
		if ((${#ids[@]} == 0)) || [[ -n "$m" && $m != "${masters[0]}" ]]; then
			ids+=("$id") masters+=("$m")
		fi
		((${#ids[@]} < 2)) || break
	done
	((${#ids[@]} == 2)) || ids+=(ct-b) masters+=("$(cluster_master_of "{item:ct-b}:stock")")
	for id in "${ids[@]}"; do
		created=$(http_post_admin /items "{\"id\":\"$id\",\"stock\":$CLUSTER_ITEM_STOCK}")
		if [[ "$(head -1 <<<"$created")" != *' 201 '* ]]; then
			row "$v" "$b" "item $id: create" FAIL - - - "$CLUSTER_ITEM_STOCK" - - \
				"POST /items through nginx: $(tr -d '\r' <<<"$created" | tr '\n' ' ' | cut -c1-200)"
			return 0
		fi
	done
	for id in "${ids[@]}"; do
		(
			rc=0
			timeout -k 10 "$LOAD_TIMEOUT_S" "$SECKILL" run --url "$URL" --item "$id" --requests $((CLUSTER_ITEM_STOCK * 2)) \
				--concurrency 20 --stock "$CLUSTER_ITEM_STOCK" --timeout "${FIRE_TIMEOUT_S}s" \
				--admin-token "$ADMIN_TOKEN" --json >"$OUT/citem-$id.json" 2>"$OUT/citem-$id.err" || rc=$?
			echo "$rc" >"$OUT/citem-$id.rc"
		) &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	for i in 0 1; do
		cluster_item_verdict "${ids[$i]}" "${masters[$i]}" "${ids[$((1 - i))]}" "${masters[$((1 - i))]}"
	done
}

# cluster_item_verdict ID MASTER OTHER OTHER_MASTER: one row.
cluster_item_verdict() {
	local id=$1 m=$2 stock lucky where
	read -r stock lucky <<<"$(cluster_cli mget "{item:$id}:stock" "{item:$id}:lucky" | tr '\n' ' ')"
	where="on $m (slot $(cluster_cli cluster keyslot "{item:$id}:stock" | tr -d '\r')), $3 on $4"
	[[ $m != "$4" ]] && where+=" (different masters)" || where+=" (same master)"
	item_row cluster redis "item $id" "citem-$id" "$id" "$CLUSTER_ITEM_STOCK" "$stock" "$lucky" \
		"/seckill/witness/{stock}:item:$id" "$where: ok" \
		"$(check "sold at once with $3" sold_at_once "$OUT/citem-$id.json" "$OUT/citem-$3.json")"
}

# cluster_logs NAME: every node's view of the cluster and its log.
cluster_logs() {
	local n c
	for n in $CLUSTER_NODES; do
		c=$(cids "$n")
		{
			docker exec "$c" redis-cli cluster nodes
			docker exec "$c" redis-cli info replication
			docker logs --tail 100 "$c"
		} >"$OUT/$1.$n.log" 2>&1 || true
	done
}

# cluster_failover FAULT ACKS: kill the master of {stock}'s slot (and start
# it again once its replica is promoted), or CLUSTER FAILOVER on that
# replica, mid-sale. See the header.
cluster_failover() {
	local v=cluster b=redis fault=$1 acks=$2 name=cfailover-$1-$2 n st m r c t_fault t_switch="" t_sold="" t_rejoin=""
	local lk lucky1="" sold us unconfirmed lost now moved=NO
	read -r n st <<<"$(size 12)"
	m=$(cluster_master_of "{stock}")
	r=$(cluster_replica_of "$m")
	if [[ -z "$m" || -z "$r" ]]; then
		row "$v" "$b" "failover: $fault" FAIL - - - "$st" - - "{stock}'s master ($m) or its replica ($r) not found"
		return 1
	fi
	c=$(cids "$m")
	bg_load "$name" "$n" 30 "$st"
	selling nginx_lucky
	if [[ $fault == kill ]]; then
		docker kill "$c" >/dev/null
	else
		docker exec "$(cids "$r")" redis-cli cluster failover >/dev/null
	fi
	t_fault=$(date +%s%N)
	# Poll 4 times a second (each an upper bound): the switch (a live node
	# names r as the slot's master), the old master replicating r, and the
	# first sale after the fault (lucky above its first reading after it).
	while (($(date +%s%N) - t_fault < 60000000000)); do
		now=$(cluster_master_of "{stock}")
		if [[ -z "$t_switch" && -n "$now" && "$now" != "$m" ]]; then
			t_switch=$(date +%s%N)
			[[ $fault != kill ]] || docker start "$c" >/dev/null || log "docker start of the old master failed"
		fi
		if [[ -n "$t_switch" && -z "$t_rejoin" ]] &&
			docker exec "$c" redis-cli info replication 2>/dev/null | grep -q 'master_link_status:up'; then
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
	cluster_logs "$name"
	if [[ -z "$t_switch" ]]; then
		[[ $fault != kill ]] || docker start "$c" >/dev/null 2>&1 || true
		fg_wait
		row "$v" "$b" "failover: $fault $m" FAIL - - - "$st" - - "no switch in 60s; nodes' views in $OUT/$name.*"
		return 1
	fi
	fg_wait
	read -r sold us unconfirmed <<<"$(jfield "$OUT/$name.json" '"\(.sold // 0) \(.unconfirmed_sold // 0) \(.unconfirmed // 0)"')"
	read -r _ lucky <<<"$(cluster_books)"
	lost=$((${sold:-0} + ${us:-0} - ${lucky:-0}))
	((lost > 0)) || lost=0
	local note
	note="min_replica_acks $acks; $r promoted in $(since_ms "$t_fault" "$t_switch"), $m replicating it $(since_ms "$t_fault" "$t_rejoin"), sales made again (lucky moving) $(since_ms "$t_fault" "$t_sold") after the $fault; unconfirmed $unconfirmed ($us sold); lost $lost"
	[[ $lost == 0 && $(cluster_master_of '{stock}') == "$r" && $(cluster_replica_of "$r") == "$m" ]] && moved=ok
	verdict "$v" "$b" "failover: $fault $m" "$name" "$st" "$note: $moved"
	wait_healthy stockd || true
	load "after-$name" 300 30 200
	verdict "$v" "$b" "after the $fault: sells out" "after-$name" 200 exact sold-out \
		"$(check "on $(cluster_master_of "{stock}"), GET /stock agrees" test "$(nginx_lucky)" = 200)"
}

cluster_variant() {
	local v=cluster b=redis t0 acks=${CLUSTER_ACKS:-1} f
	t0=$(date +%s)
	log "down; cluster variant (the stock on a Redis Cluster; redis lock, min_replica_acks ${acks})"
	compose_down
	local files_before=("${FILES[@]}")
	FILES=(-f docker-compose.yml -f docker-compose.cluster.yml)
	export CLUSTER_NODE_TIMEOUT_MS=${CLUSTER_NODE_TIMEOUT_MS:-3000} MIN_REPLICA_ACKS=$acks
	BOOKS_READER=cluster_books
	if cluster_up; then
		log "cluster up in $(($(date +%s) - t0))s: $(cluster_cli cluster nodes | awk '{ h = $2; sub(/.*,/, "", h); printf "%s=%s ", h, ($3 ~ /master/ ? "master " $9 : "replica") }')"
		load cluster-base 500 50 300
		verdict "$v" "$b" "baseline, cluster" cluster-base 300 exact \
			"$(check "GET /stock agrees" test "$(nginx_lucky)" = 300)" \
			"$(check "/info says acks $acks" test "$(http_get 127.0.0.1 "$NGINX_PORT" /info | jbody .min_replica_acks)" = "$acks")"
		# shellcheck disable=SC2034 # read by size, in compose-test.sh
		BASE_RPS=$(jfield "$OUT/cluster-base.json" '.rps | floor')
		cluster_items
		for f in ${CLUSTER_FAULTS:-kill failover}; do
			cluster_failover "$f" "$acks" || break
		done
	fi
	BOOKS_READER=
	log "cluster variant: $(($(date +%s) - t0))s"
	compose_down
	FILES=("${files_before[@]}")
	unset CLUSTER_NODE_TIMEOUT_MS MIN_REPLICA_ACKS
}

if [[ $CLUSTER == 1 ]]; then
	cluster_variant
fi
