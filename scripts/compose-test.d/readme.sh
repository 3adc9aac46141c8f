# compose-test variant "readme" (sourced by scripts/compose-test.sh after its
# own variants; uses its helpers). README_BLOCKS=0 leaves it out.
#
# README's "## `docker compose up`" section, run as written: its ```sh
# blocks are read from README.md itself (backslash continuations joined,
# nothing else changed; a trailing "# ..." is left to the shell, which
# ignores it), and each command line runs in the repository under a
# terminal, as typed (`script -qefc LINE /dev/null`: exec and run get
# their TTY, no -T), by /bin/sh, in an environment of its own (env -i:
# PATH, HOME, DOCKER_* if set, COMPOSE_PROJECT_NAME=$PROJECT so the
# teardown finds it, the image variables, NGINX_PORT and NGINX_BIND), not
# compose-test's: the README's defaults (--admin-token seckill-compose-lab,
# the compose file's JWT_SECRET, LOCK_TTL, ZK_TICK_MS) are the ones tested.
# Substitutions, the only ones:
#   - `docker compose build` is skipped: it needs a registry, and the
#     stockd image compose-test built (STOCKD_IMAGE) is already there;
#   - without the compose v2 plugin, `docker compose` runs as
#     `docker-compose` and `--wait` is dropped (v1.29 has none):
#     compose-test's wait for health (wait_healthy) follows that line.
# Order: block 1; then the block's commented lab-only line (`LAB_UNSAFE=true
# LOCK_BACKEND=none docker compose up -d --wait`) on the fresh cluster it
# starts: stockd healthy, /info says backend none; then block 2, whose
# first `up` recreates stockd, as its comment says. Rows:
#   block N            every command exits 0 (the seckill runs: exit 0)
#   block 1: mget      stock + lucky == 300, lucky == 300 == sold
#   block 1: --scale   `up -d --scale stockd=N`: N distinct replica names
#                      through nginx's /info on the host port within 30 s
#                      (polled, no reload), each on the block's lock backend
#   block 1: down -v   no container of the project left
#   lab-only line      up and healthy, backend none
#   block 2: mget      0 and 300
#   block 2: by hand   orders 300 (XLEN + trimmed), HLEN 300, and the mysql query's line for
#                      the sale id (GET stock:orders:sale) says 300 300
# A README without the section, a block not found, a block without a
# command asserted on, or a block (or commented alternative) this file does
# not know: a FAIL row naming it, nothing run. Each command's output (as
# its terminal showed it) is kept in $OUT/readme-<block>-<n>.out. It starts
# with a down -v of the project (the variants before may have left the HA
# files' services) and leaves it down. ~40 s with the stand-in cached.

README_BLOCKS=${README_BLOCKS:-1}
README_WANT=300 # the README's promise: 500 buyers for 300 units, every one sold

# readme_section: README's "## `docker compose up`" section, one command a
# line: "<block>\t<line>", continuations joined; a comment line holding a
# `docker compose` command (a commented alternative) as "<block>alt\t<line>"
# with its leading "#" removed.
readme_section() {
	awk '
		/^## / { insec = ($0 == "## `docker compose up`"); if (insec) print "section"; next }
		!insec { next }
		/^```sh[ \t]*$/ && !inblk { inblk = 1; n++; next }
		/^```/ && inblk { inblk = 0; cont = ""; next }
		!inblk { next }
		{
			line = cont $0
			cont = ""
			if (line ~ /\\$/) { cont = substr(line, 1, length(line) - 1); next }
			if (line ~ /^[ \t]*$/) next
			if (line ~ /^[ \t]*#/) {
				sub(/^[ \t]*#[ \t]*/, "", line)
				if (line ~ /(^|[ \t])docker compose /) print n "alt\t" line
				next
			}
			print n "\t" line
		}' README.md
}

# readme_code LINE: the line without a trailing comment (for the log and to
# tell which command it is; the line itself runs with its comment).
readme_code() { sed -E 's/[[:space:]]+#.*$//' <<<"$1"; }

# readme_role CODE: which of the asserted commands the line is ("" if none).
readme_role() {
	case $1 in
	*"docker compose build"*) echo build ;;
	*"docker compose --profile tools run --rm seckill run "*) echo run ;;
	*"docker compose up "*"--scale stockd="*) echo scale ;;
	*"docker compose up -d --wait"*) echo up ;;
	*"docker compose exec redis redis-cli mget stock lucky"*) echo mget ;;
	*"docker compose exec redis redis-cli eval "*" 2 stock:orders stock:orders:trimmed"*) echo xlen ;;
	*"docker compose exec redis redis-cli hlen stock:orders:buyers"*) echo hlen ;;
	*"docker compose exec redis redis-cli get stock:orders:sale"*) echo sale ;;
	*"docker compose exec mysql mysql "*"GROUP BY sale"*) echo mysql ;;
	*"docker compose down -v"*) echo down ;;
	esac
}

# readme_env: the commands' environment (env -i arguments).
readme_env() {
	local v
	echo "PATH=$PATH"
	echo "HOME=$HOME"
	echo "SHELL=/bin/sh"
	echo "COMPOSE_PROJECT_NAME=$PROJECT"
	for v in $(compgen -e | grep '^DOCKER_' || true) REDIS_IMAGE ETCD_IMAGE ZOOKEEPER_IMAGE NGINX_IMAGE \
		MYSQL_IMAGE STOCKD_IMAGE NGINX_PORT NGINX_BIND; do
		[[ -z "${!v+x}" ]] || echo "$v=${!v}"
	done
}

# readme_exec NAME LINE: run one README line as written (but the
# substitutions in the header); its output in $OUT/readme-NAME.out, its exit
# status in README_RC ("-" when skipped), README_SHOWN what ran, README_WHY
# the output's last line when it failed.
readme_exec() {
	local name=$1 line=$2 code run envv=() rc=0
	code=$(readme_code "$line")
	if [[ $code =~ (^|[[:space:]])docker\ compose\ build([[:space:]]|$) ]]; then
		README_RC=- README_SHOWN="(skipped) $code" README_WHY=
		log "readme: skipped (needs a registry; the stockd image is built): $code"
		return 0
	fi
	run=$line
	if ((!COMPOSE_V2)); then
		run=${run//docker compose /docker-compose }
		run=$(sed -E 's/[[:space:]]--wait([[:space:]]+--wait-timeout[[:space:]]+[0-9]+)?([[:space:]]|$)/\2/g' <<<"$run")
	fi
	README_SHOWN=$(readme_code "$run")
	log "readme: \$ $README_SHOWN"
	mapfile -t envv < <(readme_env)
	env -i "${envv[@]}" timeout "$WAIT_S" script -qefc "$run" /dev/null </dev/null >"$OUT/readme-$name.out" 2>&1 || rc=$?
	README_RC=$rc README_WHY=
	# (No "|" in a row's note: the table splits at it.)
	((rc == 0)) || README_WHY=$(readme_text "$OUT/readme-$name.out" | grep -v '^[[:space:]]*$' | tail -1 | tr '|' '/' | cut -c1-120)
	# v1: the dropped --wait, as compose-test waits (2: a stockd exited).
	if ((rc == 0 && !COMPOSE_V2)) && [[ $code =~ [[:space:]]--wait([[:space:]]|$) ]]; then
		wait_healthy || README_RC=$?
		case $README_RC in
		1) README_WHY="--wait (wait_healthy): not healthy in ${WAIT_S}s" ;;
		2) README_WHY="--wait (wait_healthy): a stockd exited" ;;
		esac
	fi
}

# readme_text FILE: a command's output as text: a terminal's CRs, NULs,
# escape sequences (colours, cursor moves) and echoed "^@" (the end of
# script's empty stdin, echoed by the container's terminal) removed.
readme_text() { tr -d '\r\000' <"$1" | sed -E $'s/\x1b\\[[0-9;?]*[A-Za-z]//g; s/\\^@//g' || true; }

# readme_value FILE: redis-cli's answers, one a line, as a terminal shows
# them (1) "0", (integer) 300, "id") or bare.
readme_value() {
	readme_text "$1" | sed -E 's/^[[:space:]]*[0-9]+\) //; s/^\(integer\) //; s/^"(.*)"$/\1/' | grep -v '^$' || true
}

# readme_scale N: poll nginx's /info on the host port until N distinct
# replicas answered; prints "names|backends|ms|why". The README promises
# 2 s; the bound is 30 s because a loaded CI machine starts two replicas
# slowly, and what the row asserts is that nginx finds them without a
# reload, not how fast (the ms is reported). Short of N, why names each
# stockd container's state and the replica its own /info names.
readme_scale() {
	local t0 names why="" c
	t0=$(date +%s%N)
	SEEN_NAMES="" SEEN_BACKENDS=""
	if ! within 30 replicas_seen "$1"; then
		for c in $(cids stockd); do
			why+=" $(cname "$c") $(docker inspect -f '{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$c" 2>/dev/null) says $(replica_name "$c" || true);"
		done
	fi
	names=$(tr ' ' '\n' <<<"$SEEN_NAMES" | sort -V | tr '\n' ' ')
	echo "${names# }|${SEEN_BACKENDS# }|$((($(date +%s%N) - t0) / 1000000))|${why}"
}

# replicas_seen N: one GET /info through nginx, its replica and backend
# added to SEEN_NAMES and SEEN_BACKENDS; 0 once N replicas were seen.
replicas_seen() {
	local n b
	read -r n b <<<"$(http_get 127.0.0.1 "$NGINX_PORT" /info | jbody '"\(.replica) \(.backend)"')"
	if [[ -n $n && $n != null && " $SEEN_NAMES " != *" $n "* ]]; then
		SEEN_NAMES+=" $n"
		[[ " $SEEN_BACKENDS " == *" $b "* ]] || SEEN_BACKENDS+=" $b"
	fi
	(($(wc -w <<<"$SEEN_NAMES") >= $1))
}

readme_variant() {
	local v=readme t0 sec blk lines=() l i role ok why note res rcs
	t0=$(date +%s)
	log "down; readme variant (README's \"docker compose up\" blocks, as written)"
	compose_down
	local files_before=("${FILES[@]}")
	FILES=(-f docker-compose.yml)

	# ---- the section, its blocks, the commands asserted on ----
	sec=$(readme_section)
	if ! grep -qx section <<<"$sec"; then
		row "$v" - "README section" FAIL - - - - - - "README.md has no '## \`docker compose up\`' section: nothing run"
		FILES=("${files_before[@]}")
		return 0
	fi
	local -A need=([1]="build up run mget scale down" [1alt]="up" [2]="up run mget xlen hlen sale mysql")
	local -A count=()
	local missing=""
	for blk in 1 1alt 2; do
		mapfile -t lines < <(awk -F'\t' -v b="$blk" '$1 == b { print $2 }' <<<"$sec")
		count[$blk]=${#lines[@]}
		local roles=""
		for l in "${lines[@]}"; do roles+=" $(readme_role "$(readme_code "$l")")"; done
		for role in ${need[$blk]}; do
			[[ " $roles " == *" $role "* ]] || missing+=" block $blk: no '$role' command;"
		done
		local want
		want=$(wc -w <<<"${need[$blk]}")
		((${#lines[@]} >= want)) || missing+=" block $blk: ${#lines[@]} commands, expected $want or more;"
	done
	# A block (or a commented alternative) this variant does not know would
	# go untested: as loud as a missing one.
	((count[1alt] <= 1)) || missing+=" block 1: ${count[1alt]} commented alternatives, expected 1;"
	while read -r blk; do
		[[ -n ${need[$blk]+x} ]] || missing+=" block $blk: not run by this variant;"
	done < <(grep -v '^section$' <<<"$sec" | cut -f1 | sort -u)
	if [[ -n $missing ]]; then
		row "$v" - "README blocks" FAIL - - - - - - "README.md's \"docker compose up\" section:${missing%;} (nothing run)"
		FILES=("${files_before[@]}")
		return 0
	fi
	log "readme: block 1 ${count[1]} commands, its commented alternative ${count[1alt]}, block 2 ${count[2]}"

	# ---- run a block: every line, outputs kept by role ----
	local -A out=() rcof=()
	local scale_res="" down_res="" tb
	# readme_block BLOCK: runs it; sets rcs (exit statuses), ok and why.
	readme_block() {
		local b=$1 i=0 line code role want backend res
		rcs="" ok=1 why="" out=() rcof=()
		mapfile -t lines < <(awk -F'\t' -v b="$b" '$1 == b { print $2 }' <<<"$sec")
		for line in "${lines[@]}"; do
			i=$((i + 1))
			code=$(readme_code "$line")
			role=$(readme_role "$code")
			readme_exec "$b-$i" "$line"
			rcs+=" $README_RC"
			if [[ $README_RC != - && $README_RC != 0 ]]; then
				ok=0 why+=" command $i exited $README_RC: $README_WHY;"
				log "readme: exit $README_RC: $README_SHOWN ($OUT/readme-$b-$i.out)"
			fi
			[[ -z $role ]] || { out[$role]=$OUT/readme-$b-$i.out; rcof[$role]=$README_RC; }
			# The lock backend of the block's up (the scale must keep it).
			[[ $role == up && $code =~ LOCK_BACKEND=([a-z-]+)\ docker\ compose\ up ]] && backend=${BASH_REMATCH[1]}
			case $role in
			scale) # at once: the time bound starts when the up returns
				want=$(grep -o 'stockd=[0-9]*' <<<"$code" | head -1 | cut -d= -f2)
				local names backends ms stale
				IFS='|' read -r names backends ms stale <<<"$(readme_scale "$want")"
				res=PASS
				[[ $README_RC == 0 && $(wc -w <<<"$names") == "$want" && $backends == "${backend:-redis}" ]] || res=FAIL
				scale_res="$res|$want replicas through nginx's /info in ${ms}ms: ${names% }; backend ${backends:-?} (the block's up: ${backend:-redis})${stale:+; containers:$stale}"
				;;
			down)
				res=PASS
				[[ $README_RC == 0 && -z $(cids) ]] || res=FAIL
				down_res="$res|exit $README_RC, $(cids | wc -l) containers of the project left"
				;;
			esac
		done
	}

	# Block 1: the cluster on the etcd lock, a sale, the books, the scale, down.
	tb=$(date +%s)
	readme_block 1
	res=PASS; ((ok)) || res=FAIL
	row "$v" etcd "block 1, as written" "$res" - - - - - - \
		"${count[1]} commands, exit status each:${rcs} ('-': build skipped); $( ((COMPOSE_V2)) && echo 'docker compose' || echo 'as docker-compose, --wait by wait_healthy'); $(($(date +%s) - tb))s${why:+;${why%;}}"
	local stock lucky sold
	{ read -r stock; read -r lucky; } < <(readme_value "${out[mget]}") || true
	sold=$(readme_text "${out[run]}" | grep -o 'sold [0-9]*  sold out' | tail -1 | cut -d' ' -f2 || true)
	res=PASS
	[[ $stock =~ ^[0-9]+$ && $lucky =~ ^[0-9]+$ ]] && ((stock + lucky == README_WANT && lucky == README_WANT)) &&
		[[ $sold == "$lucky" && ${rcof[mget]} == 0 ]] || res=FAIL
	row "$v" etcd "block 1: mget" "$res" "${sold:-?}" "${lucky:-?}" "${stock:-?}" "$README_WANT" - - \
		"redis-cli mget stock lucky: stock + lucky == $README_WANT, lucky == $README_WANT == sold (seckill run's report)"
	row "$v" etcd "block 1: --scale" "${scale_res%%|*}" - - - - - - "${scale_res#*|}"
	row "$v" etcd "block 1: down -v" "${down_res%%|*}" - - - - - - "${down_res#*|}"

	# The commented lab-only line, on the fresh cluster it starts.
	tb=$(date +%s)
	readme_exec 1alt "$(awk -F'\t' '$1 == "1alt" { print $2; exit }' <<<"$sec")"
	local info
	info=$(http_get 127.0.0.1 "$NGINX_PORT" /info | jbody .backend)
	res=PASS note="healthy"
	if [[ $README_RC != 0 || $info != none ]]; then
		# Why: what compose said, and what a stockd said last (a refusal).
		res=FAIL note="${README_WHY:-up}; stockd: $(docker logs --tail 1 "$(cids stockd | head -1)" 2>&1 | tr '|' '/' | cut -c1-120 || true)"
	fi
	row "$v" none "lab-only line: up" "$res" - - - - - - \
		"$README_SHOWN: exit $README_RC, $note, /info backend ${info:-?}; $(($(date +%s) - tb))s"

	# Block 2: named buyers, limit 1, durable orders; the counts by hand.
	tb=$(date +%s)
	readme_block 2
	res=PASS; ((ok)) || res=FAIL
	row "$v" redis "block 2, as written" "$res" - - - - - - \
		"${count[2]} commands, exit status each:${rcs}; $(($(date +%s) - tb))s${why:+;${why%;}}"
	{ read -r stock; read -r lucky; } < <(readme_value "${out[mget]}") || true
	sold=$(readme_text "${out[run]}" | grep -o 'sold [0-9]*  sold out' | tail -1 | cut -d' ' -f2 || true)
	res=PASS
	[[ $stock == 0 && $lucky == "$README_WANT" ]] || res=FAIL
	row "$v" redis "block 2: mget" "$res" "${sold:-?}" "${lucky:-?}" "${stock:-?}" "$README_WANT" - - \
		"redis-cli mget stock lucky: 0, $README_WANT"
	local xlen hlen sale myrows myusers
	xlen=$(readme_value "${out[xlen]}" | head -1)
	hlen=$(readme_value "${out[hlen]}" | head -1)
	sale=$(readme_value "${out[sale]}" | head -1)
	# The mysql client's table (a terminal) or tab-separated rows: this
	# sale's line.
	read -r myrows myusers <<<"$(readme_text "${out[mysql]}" | tr '|' ' ' | awk -v s="$sale" 's != "" && $1 == s { print $2, $3; exit }')" || true
	res=PASS
	[[ $xlen == "$README_WANT" && $hlen == "$README_WANT" && $myrows == "$README_WANT" && $myusers == "$README_WANT" ]] || res=FAIL
	row "$v" redis "block 2: by hand" "$res" - - - - - - \
		"orders (XLEN + trimmed) ${xlen:-?}, HLEN ${hlen:-?}, mysql's line for sale ${sale:-?}: ${myrows:-?} ${myusers:-?} (want $README_WANT each)"

	log "readme variant: $(($(date +%s) - t0))s"
	compose_down
	FILES=("${files_before[@]}")
}

if [[ $README_BLOCKS == 1 ]]; then
	readme_variant
fi
