# compose-test variant "scale" (sourced by scripts/compose-test.sh after its
# own variants; uses its helpers). SCALE=0 leaves it out.
#
# On the redis lock, a fresh cluster at the default replica count N, then
# `up --scale stockd=N+1` and NO nginx reload. The row passes when:
#   - every replica names itself stockd-1..stockd-N+1 (GET /stock on each,
#     straight to its address): the compose names, not container ids;
#   - nginx's workers are the ones from before the scale (no reload);
#   - a sale through nginx is exact (0 oversold, sold == lucky) and
#     stockd-N+1 sold some of it: nginx found the new replica through
#     Docker's DNS (nginx.conf: resolver valid=2s).
# ~30 s after the cluster is up.

SCALE=${SCALE:-1}

# scale_names: the replica names the stockd containers give themselves,
# sorted, space-separated.
scale_names() {
	local c
	for c in $(cids stockd); do
		http_get "$(ip_of "$c")" 8080 /stock | jbody .replica
	done | sort -V | tr '\n' ' ' || true # a replica that did not answer is missing from the list
}

# scale_workers: nginx's worker processes (pids), which a reload replaces.
scale_workers() {
	docker top "$(cids nginx)" -eo pid,args | awk '/worker process/ { print $1 }' | sort | tr '\n' ' ' || true
}

scenario_scale() {
	local v=scale b=redis rc=0 n want0 want1 workers0 workers1 names0 names1 i
	log "down; scale variant (redis lock, stockd scaled up without an nginx reload)"
	compose_down
	local files_before=("${FILES[@]}")
	FILES=(-f docker-compose.yml)
	up_backend "$v" "$b" || rc=$?
	if ((rc)); then
		FILES=("${files_before[@]}")
		return 0
	fi
	n=$(cids stockd | wc -l)
	want0=""
	for ((i = 1; i <= n; i++)); do want0+="stockd-$i "; done
	want1="${want0}stockd-$((n + 1)) "
	names0=$(scale_names)
	# up_backend reloaded nginx once (the base script's habit); from here on
	# nothing does.
	workers0=$(scale_workers)
	local wait=()
	((COMPOSE_V2)) && wait=(--wait --wait-timeout "$WAIT_S")
	if ! compose up -d --no-recreate --scale stockd=$((n + 1)) "${wait[@]}" stockd >"$OUT/up-scale.log" 2>&1 ||
		! wait_healthy stockd; then
		row "$v" "$b" "scale $n -> $((n + 1))" FAIL - - - - - - "the added replica did not come up ($OUT/up-scale.log)"
		FILES=("${files_before[@]}")
		return 0
	fi
	names1=$(scale_names)
	load scale-$b 600 30 400
	workers1=$(scale_workers)
	local same=NO
	[[ $names0 == "$want0" && $names1 == "$want1" && -n $workers0 && $workers0 == "$workers1" ]] && same=ok
	verdict "$v" "$b" "scale $n -> $((n + 1)), no reload" "scale-$b" 400 exact "sold-by=stockd-$((n + 1))" \
		"names before: ${names0% }, after: ${names1% }; nginx workers ${workers0% } -> ${workers1% }: $same"
	FILES=("${files_before[@]}")
}

if [[ "$SCALE" == 1 ]]; then
	scenario_scale
fi
