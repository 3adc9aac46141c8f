# compose-test variant "reserve" (sourced by scripts/compose-test.sh after
# its own variants; uses its helpers). RESERVE=0 leaves it out.
#
# Reservations (docs/reservations.md) on a fresh cluster, redis lock:
# PAYMENT_WINDOW=2s, ORDERS_DURABLE=true (each order's end in MySQL), the
# witness in etcd (compose's default), buyers named by JWT. The tools
# service runs the demo's row through nginx: `seckill run --never-pay 3`,
# 300 units, 600 buyers, every third winner never paying.
# The row passes when:
#   - the run exited 0: every unit paid, none twice, nothing left, the
#     books (stock + lucky - returned = initial) and the census exact, each
#     order's lifecycle as its buyer was told;
#   - every unpaid unit came back once (returned = never paid + refunds);
#   - the stock Redis holds stock 0, read straight, and the witness's
#     ceiling is 0 (the fresh stock, stock less returned, is below it);
#   - MySQL's orders_ends holds a paid row for every payment answered paid
#     when the run ends (a payment's 200 waits for it), and an expired or
#     cancelled row for every unit returned once the replicas copied them.
# ~40 s after the cluster is up (six rounds of 2 s windows).

RESERVE=${RESERVE:-1}
RESERVE_STOCK=${RESERVE_STOCK:-300}

# reserve_ends STATE...: how many rows of orders_ends are in one of STATEs.
reserve_ends() {
	local in
	in=$(printf "'%s'," "$@")
	# shellcheck disable=SC2016 # expanded by the inner bash
	docker exec "$(cids mysql)" bash -c 'mysql -N -B --protocol=tcp -h127.0.0.1 -u"${MYSQL_USER:-seckill}" \
		-p"${MYSQL_PASSWORD:-seckill}" --connect-timeout=2 -e "SELECT COUNT(*) FROM orders_ends WHERE state IN ($0)" \
		"${MYSQL_DATABASE:-seckill}"' "${in%,}" 2>/dev/null || true
}

# reserve_returned_in_mysql N: 0 once orders_ends holds N unpaid ends.
reserve_returned_in_mysql() { [[ "$(reserve_ends expired cancelled)" == "$1" ]]; }

scenario_reserve() {
	local v=reserve b=redis rc=0 run_rc=0 json paid never refunds returned lucky left redis_stock paid_mysql wit
	log "down; reserve variant (payment window 2s, durable ends in MySQL, witness etcd, every third winner never pays)"
	compose_down
	local files_before=("${FILES[@]}")
	FILES=(-f docker-compose.yml)
	export PAYMENT_WINDOW=2s ORDERS_DURABLE=true
	up_backend "$v" "$b" || rc=$?
	if ((rc == 0)); then
		json=$OUT/reserve.json
		timeout -k 10 "$LOAD_TIMEOUT_S" "${COMPOSE[@]}" -p "$PROJECT" "${FILES[@]}" --profile tools run --rm -T seckill \
			run --url http://nginx --never-pay 3 --requests $((RESERVE_STOCK * 2)) --concurrency 20 --stock "$RESERVE_STOCK" \
			--timeout 120s --admin-token "$ADMIN_TOKEN" --json >"$json" 2>"$OUT/reserve.err" || run_rc=$?
		paid_mysql=$(reserve_ends paid)
		read -r paid never refunds returned lucky left <<<"$(jfield "$json" '"\(.paid) \(.never_pay) \(.refunds) \(.returned) \(.lucky) \(.left)"')"
		redis_stock=$(docker exec "$(cids redis)" redis-cli --raw get stock 2>/dev/null || true)
		wit=$(docker exec "$(cids etcd)" etcdctl --endpoints=http://127.0.0.1:2379 get --print-value-only /seckill/witness/stock 2>/dev/null |
			jbody '[.sales[]? | .ceilings | tostring] | join(" ")')
		local notes=() verdict=PASS
		notes+=("$(check "seckill run exit $run_rc (want 0: all paid once, books, census, lifecycles)" test "$run_rc" = 0)")
		notes+=("$(check "returned ${returned:-?} = never paid ${never:-?} + refunds ${refunds:-?}" test "${returned:-x}" = "$((${never:-0} + ${refunds:-0}))")")
		notes+=("$(check "Redis stock ${redis_stock:-?} (want 0)" test "$redis_stock" = 0)")
		notes+=("$(check "witness ceilings ${wit:-none} (want [0])" test "${wit##* }" = "[0]")")
		notes+=("$(check "MySQL paid rows ${paid_mysql:-?} at the run's end (want ${paid:-?})" test "${paid_mysql:-x}" = "${paid:-y}")")
		notes+=("$(check "MySQL unpaid rows = returned ${returned:-?}" within 20 reserve_returned_in_mysql "${returned:-x}")")
		[[ "${notes[*]}" != *": NO"* ]] || verdict=FAIL
		[[ $verdict == PASS ]] || { tail -3 "$OUT/reserve.err" >&2 || true; }
		row "$v" "$b" "reservations: 2s window, every 3rd never pays" "$verdict" "${paid:--}" "${lucky:--}" "${left:--}" \
			"$RESERVE_STOCK" - - "$(IFS=';'; echo "${notes[*]}")"
	fi
	export PAYMENT_WINDOW=0s ORDERS_DURABLE=false
	FILES=("${files_before[@]}")
}

if [[ "$RESERVE" == 1 ]]; then
	scenario_reserve
fi
