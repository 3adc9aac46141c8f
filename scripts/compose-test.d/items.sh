# compose-test variant "items" (sourced by scripts/compose-test.sh after its
# own variants; uses its helpers). ITEMS=0 leaves it out.
#
# Two items (docs/items.md) on a fresh cluster, redis lock, compose's
# defaults: the witness in etcd, buyers named by JWT. Each item is created
# through nginx with the admin API (POST /items), then both are sold at
# once by two runs of the tools service (`seckill run --item`, which resets
# the item to --stock and judges its books). One row per item passes when:
#   - the run exited 0 (exact: sold == lucky, stock + lucky == initial)
#     with 0 oversold, and sold == its initial stock (sold out);
#   - the stock Redis holds stock 0 and lucky == initial for the item
#     ({item:<id>}:stock, {item:<id>}:lucky, read straight);
#   - GET /items/<id> through nginx says the same, and not halted;
#   - the item's own witness register is in etcd
#     (/seckill/witness/stock:item:<id>) at 0;
#   - the two were sold at once: a watcher in the redis container
#     (redis-cli -r, every 50 ms) saw both items' lucky strictly between 0
#     and the stock at one reading.
# ~30 s after the cluster is up.

ITEMS=${ITEMS:-1}
ITEMS_STOCK=${ITEMS_STOCK:-300}

# http_post_admin PATH BODY: the status line and body of an admin POST
# through nginx, from the host (no curl needed).
http_post_admin() {
	timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
		printf "POST %s HTTP/1.0\r\nHost: x\r\nX-Admin-Token: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" \
			"$1" "$2" "${#3}" "$3" >&3; cat <&3' "$NGINX_PORT" "$1" "$ADMIN_TOKEN" "$2" 2>/dev/null || true
}

# items_load ID: the tools service sells item ID through nginx -> $OUT/item-ID.json
items_load() {
	local rc=0
	timeout -k 10 "$LOAD_TIMEOUT_S" "${COMPOSE[@]}" -p "$PROJECT" "${FILES[@]}" --profile tools run --rm -T seckill \
		run --url http://nginx --item "$1" --requests $((ITEMS_STOCK * 2)) --concurrency 20 --stock "$ITEMS_STOCK" \
		--timeout "${FIRE_TIMEOUT_S}s" --admin-token "$ADMIN_TOKEN" --json >"$OUT/item-$1.json" 2>"$OUT/item-$1.err" || rc=$?
	echo "$rc" >"$OUT/item-$1.rc"
}

# items_verdict VARIANT BACKEND ID: one row for item ID.
items_verdict() {
	local v=$1 b=$2 id=$3 j=$OUT/item-$3.json rc sold errors rps oversold stock lucky body wit res=PASS note=""
	rc=$(cat "$OUT/item-$id.rc")
	read -r stock lucky <<<"$(docker exec "$(cids redis)" redis-cli --raw mget "{item:$id}:stock" "{item:$id}:lucky" | tr '\n' ' ')"
	stock=${stock:-?} lucky=${lucky:-?}
	if ! grep -q '"sold":' "$j" 2>/dev/null; then
		row "$v" "$b" "item $id" FAIL - "$lucky" "$stock" "$ITEMS_STOCK" - - \
			"seckill rc=$rc: $(tail -c 200 "$OUT/item-$id.err" | tr '\n' ' ')"
		return
	fi
	sold=$(jget "$j" sold) errors=$(jget "$j" errors) oversold=$(jget "$j" oversold)
	rps=$(jget "$j" rps | cut -d. -f1)
	[[ "$rc" == 0 ]] || { res=FAIL; note+=" seckill rc=$rc;"; }
	((${oversold:-1} == 0)) || { res=FAIL; note+=" oversold=$oversold;"; }
	((${sold:-0} == ITEMS_STOCK)) || { res=FAIL; note+=" sold $sold of $ITEMS_STOCK;"; }
	if [[ "$stock" == 0 && "$lucky" == "$ITEMS_STOCK" ]]; then
		note+=" redis: stock 0, lucky $lucky;"
	else
		res=FAIL note+=" redis: stock $stock lucky $lucky, want 0 and $ITEMS_STOCK;"
	fi
	body=$OUT/item-$id.status.json
	http_get 127.0.0.1 "$NGINX_PORT" "/items/$id" >"$body"
	if [[ "$(jget "$body" stock) $(jget "$body" lucky) $(jget "$body" initial) $(jget "$body" state)" == "0 $ITEMS_STOCK $ITEMS_STOCK open" ]]; then
		note+=" GET /items/$id agrees;"
	else
		res=FAIL note+=" GET /items/$id: $(cut -c1-160 "$body");"
	fi
	wit=$(docker exec "$(cids etcd)" etcdctl --endpoints=http://127.0.0.1:2379 get --print-value-only \
		"/seckill/witness/stock:item:$id" 2>/dev/null || true)
	if [[ "$wit" == *'"ceilings":[0]'* ]]; then
		note+=" witness etcd /seckill/witness/stock:item:$id at 0;"
	else
		res=FAIL note+=" witness record: $(cut -c1-120 <<<"${wit:-none}");"
	fi
	if sold_at_once "$OUT/item-ct-a.json" "$OUT/item-ct-b.json"; then
		note+=" sold at once with the other;"
	else
		res=FAIL note+=" not sold at once with the other (their selling ranges do not overlap; $OUT/items-watch);"
	fi
	[[ $res == PASS ]] || dump_state "item-$id"
	row "$v" "$b" "item $id (witness)" "$res" "$sold" "$lucky" "$stock" "$ITEMS_STOCK" "$errors" "$rps" "${note# }"
}

scenario_items() {
	local v=items b=redis rc=0 id created watch pids=()
	log "down; items variant (two items created through nginx and sold at once, witness etcd)"
	compose_down
	local files_before=("${FILES[@]}")
	FILES=(-f docker-compose.yml)
	up_backend "$v" "$b" || rc=$?
	if ((rc)); then
		FILES=("${files_before[@]}")
		return 0
	fi
	for id in ct-a ct-b; do
		created=$(http_post_admin /items "{\"id\":\"$id\",\"stock\":$ITEMS_STOCK}")
		if [[ "$(head -1 <<<"$created")" != *' 201 '* ]]; then
			row "$v" "$b" "item $id: create" FAIL - - - "$ITEMS_STOCK" - - \
				"POST /items through nginx: $(tr -d '\r' <<<"$created" | tr '\n' ' ' | cut -c1-200)"
			FILES=("${files_before[@]}")
			return 0
		fi
	done
	# Bounded by its count (60 s): it outlives the loads, and is stopped
	# once they end.
	docker exec "$(cids redis)" redis-cli --raw -r 1200 -i 0.05 mget "{item:ct-a}:lucky" "{item:ct-b}:lucky" \
		>"$OUT/items-watch" 2>/dev/null &
	watch=$!
	for id in ct-a ct-b; do
		items_load "$id" &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	kill "$watch" 2>/dev/null || true
	wait "$watch" 2>/dev/null || true
	for id in ct-a ct-b; do
		items_verdict "$v" "$b" "$id"
	done
	FILES=("${files_before[@]}")
}

if [[ "$ITEMS" == 1 ]]; then
	scenario_items
fi
