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
#   - the two were sold at once: the ranges in which each run was
#     certainly selling (from its answers' times) overlap (sold_at_once).
# ~30 s after the cluster is up.

ITEMS=${ITEMS:-1}
ITEMS_STOCK=${ITEMS_STOCK:-300}

# items_load ID: the tools service sells item ID through nginx -> $OUT/item-ID.json
items_load() {
	local rc=0
	timeout -k 10 "$LOAD_TIMEOUT_S" "${COMPOSE[@]}" -p "$PROJECT" "${FILES[@]}" --profile tools run --rm -T seckill \
		run --url http://nginx --item "$1" --requests $((ITEMS_STOCK * 2)) --concurrency 20 --stock "$ITEMS_STOCK" \
		--timeout "${FIRE_TIMEOUT_S}s" --admin-token "$ADMIN_TOKEN" --json >"$OUT/item-$1.json" 2>"$OUT/item-$1.err" || rc=$?
	echo "$rc" >"$OUT/item-$1.rc"
}

# items_verdict VARIANT BACKEND ID OTHER: one row for item ID, sold at
# once with item OTHER.
items_verdict() {
	local id=$3 stock lucky
	read -r stock lucky <<<"$(docker exec "$(cids redis)" redis-cli --raw mget "{item:$id}:stock" "{item:$id}:lucky" | tr '\n' ' ')"
	item_row "$1" "$2" "item $id (witness)" "item-$id" "$id" "$ITEMS_STOCK" "$stock" "$lucky" \
		"/seckill/witness/stock:item:$id" "$(check "sold at once with $4" sold_at_once "$OUT/item-$id.json" "$OUT/item-$4.json")"
}

scenario_items() {
	local v=items b=redis rc=0 id created pids=()
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
	for id in ct-a ct-b; do
		items_load "$id" &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	items_verdict "$v" "$b" ct-a ct-b
	items_verdict "$v" "$b" ct-b ct-a
	FILES=("${files_before[@]}")
}

if [[ "$ITEMS" == 1 ]]; then
	scenario_items
fi
