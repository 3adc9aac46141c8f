# compose-test variant "obs" (sourced by scripts/compose-test.sh after its own
# variants; uses its helpers). OBSERVABILITY=0 leaves it out.
#
# The observability profile as a user starts it, on the redis lock: a fresh
# cluster (stockd counters from zero) with Prometheus, a sale of a known number
# of requests through nginx, then Prometheus's HTTP API must show
#   - every stockd replica as a target with up == 1 (discovered through
#     Docker's DNS, deploy/prometheus/prometheus.yml), and no other target;
#   - sum(seckill_reduce_total) == the requests sent, and the sold series'
#     sum == lucky in Redis (one scrape per replica, not one through nginx);
#   - every series the Grafana board's queries name is in what Prometheus
#     scraped (but the orders lag and sale-path events, absent by design);
#   - after `up --scale stockd=4`, four up targets without touching the config.
# Prometheus is Debian's package on the stand-in (IMAGES=standin) and
# PROMETHEUS_IMAGE otherwise. Grafana has no offline stand-in and is not
# started here: its board is validated by deploy/grafana's Go test. ~45 s.

OBSERVABILITY=${OBSERVABILITY:-1}

# prom_urlencode STRING: a query string value (bash only).
prom_urlencode() {
	local s=$1 i c out=""
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case $c in
		[a-zA-Z0-9._~-]) out+=$c ;;
		*) printf -v c '%%%02X' "'$c"; out+=$c ;;
		esac
	done
	echo "$out"
}

# prom_value QUERY: the value of an instant query's first sample ("" if none
# or Prometheus did not answer).
prom_value() {
	http_get 127.0.0.1 "$PROMETHEUS_PORT" "/api/v1/query?query=$(prom_urlencode "$1")" | jbody '.data.result[0].value[1]'
}

# prom_wait SECONDS QUERY WANT: poll until QUERY's value is WANT (a scrape
# every second, discovery every 5 s); prints the last value seen.
prom_wait() {
	within "$1" prom_is "$2" "$3" || true
	local v
	v=$(prom_value "$2")
	echo "${v:-none}"
}

# prom_is QUERY WANT: 0 when QUERY's value is WANT.
prom_is() { [[ $(prom_value "$1") == "$2" ]]; }

observability_variant() {
	local v=obs b=redis n=600 st=300 t0 replicas up all total sold lucky stock note res
	t0=$(date +%s)
	log "down; observability variant (prometheus on the redis lock)"
	compose_down
	local files_before=("${FILES[@]}")
	FILES=(-f docker-compose.yml)
	if [[ $IMAGES == standin ]]; then
		export PROMETHEUS_IMAGE=${STANDIN_IMAGE:-seckill/standin-base:bookworm}
	fi
	PROMETHEUS_PORT=$NGINX_PORT
	while ((PROMETHEUS_PORT == NGINX_PORT)); do PROMETHEUS_PORT=$(free_port); done
	export PROMETHEUS_PORT PROMETHEUS_BIND=127.0.0.1
	local rc=0
	up_backend "$v" "$b" || rc=$?
	if ((rc == 0)); then
		# The profile in FILES from here, so every compose call (teardown's
		# down too) knows the service; Prometheus alone, by name: the
		# profile's grafana has no offline image.
		FILES+=(--profile observability)
		compose up -d --no-deps prometheus >"$OUT/up-obs-prometheus.log" 2>&1 && wait_healthy prometheus || rc=$?
		if ((rc != 0)); then
			# What went wrong, in the row itself: CI shows the table's
			# failing rows, not the artifacts.
			local why
			why=$(grep -v '^\s*$' "$OUT/up-obs-prometheus.log" | tail -2 | tr '\n' ' ')
			why+=" | $(docker logs --tail 2 "$(cids prometheus | head -1)" 2>&1 | tr '\n' ' ')"
			row "$v" "$b" "prometheus up" FAIL - - - - - - "not healthy ($OUT/up-obs-prometheus.log): ${why:0:400}"
		fi
	elif ((rc == 2)); then
		row "$v" "$b" "up" FAIL - - - - - - "compose up failed ($OUT/up-$v-$b.log)"
	fi
	if ((rc == 0)); then
		replicas=$(cids stockd | wc -l)
		load obs-$b "$n" 50 "$st"
		verdict "$v" "$b" "sale, prometheus on" "obs-$b" "$st" exact
		read -r stock lucky <<<"$(redis_state)"
		# The last of the sale reaches Prometheus on the next scrape (1 s).
		total=$(prom_wait 20 'sum(seckill_reduce_total)' "$n")
		sold=$(prom_wait 5 'sum(seckill_reduce_total{result="sold"})' "$lucky")
		up=$(prom_value 'count(up{job="stockd"} == 1)')
		all=$(prom_value 'count(up)')
		res=PASS
		note="up targets $up of $all, $replicas replicas; sum(seckill_reduce_total) $total, sent $n; sold series $sold, lucky $lucky"
		[[ "$up" == "$replicas" && "$all" == "$replicas" ]] || { res=FAIL; note+="; not every replica an up target"; }
		[[ "$total" == "$n" ]] || { res=FAIL; note+="; reduce total != requests"; }
		[[ "$sold" == "$lucky" ]] || { res=FAIL; note+="; sold series != lucky"; }
		row "$v" "$b" "prometheus: targets, sums" "$res" "$sold" "$lucky" "$stock" "$st" - - "$note"

		# The Grafana board's series, live: every name its queries use must be
		# in what Prometheus scraped from the replicas (deploy/grafana's Go test
		# holds them to a registry built like stockd's; this is stockd itself).
		# Absent by design here: the orders lag (ORDERS_DURABLE=true only) and
		# sale-path events (none in a clean sale).
		local board live missing="" absent="" name
		# The metric names in the panels' expressions (PromQL, not JSON).
		board=$(jq -r '.. | .expr? // empty' deploy/grafana/dashboards/seckill.json |
			grep -oE '\b(seckill|go|process)_[a-z0-9_]+' | sort -u || true)
		live=$(http_get 127.0.0.1 "$PROMETHEUS_PORT" \
			"/api/v1/label/__name__/values?match%5B%5D=$(prom_urlencode '{job="stockd"}')" | jbody '.data[]')
		for name in $board; do
			grep -qx "$name" <<<"$live" && continue
			case $name in
			seckill_orders_lag | seckill_sale_events_total) absent+=" $name" ;;
			*) missing+=" $name" ;;
			esac
		done
		res=PASS
		[[ -z "$missing" && -n "$board" ]] || res=FAIL
		row "$v" "$b" "grafana board: series live" "$res" - - - - - - \
			"$(wc -w <<<"$board") series on the board, missing:${missing:- none}; absent by design:${absent:- none}"

		# --scale adds a target by discovery alone (refresh_interval 5 s).
		if compose up -d --no-recreate --scale stockd=4 stockd >"$OUT/up-obs-scale.log" 2>&1 && wait_healthy stockd; then
			replicas=$(cids stockd | wc -l)
			up=$(prom_wait 20 'count(up{job="stockd"} == 1)' "$replicas")
			all=$(prom_value 'count(up)')
			res=PASS
			[[ "$replicas" == 4 && "$up" == 4 && "$all" == 4 ]] || res=FAIL
			row "$v" "$b" "prometheus: --scale stockd=4" "$res" - - - - - - \
				"up targets $up of $all, $replicas replicas, no config change"
		else
			row "$v" "$b" "prometheus: --scale stockd=4" FAIL - - - - - - "scale up failed ($OUT/up-obs-scale.log)"
		fi
	fi
	log "observability variant: $(($(date +%s) - t0))s"
	compose_down
	FILES=("${files_before[@]}")
	unset PROMETHEUS_IMAGE PROMETHEUS_PORT PROMETHEUS_BIND
}

if [[ $OBSERVABILITY == 1 ]]; then
	observability_variant
fi
