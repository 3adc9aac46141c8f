#!/usr/bin/env bash
# Runs the test suite while stress-ng loads the machine, STRESS_RUNS times
# (default 3), and prints one line per run: wall time, pass or fail, and the
# failing tests. A test that only passes on an idle machine waits on time,
# not on the event it needs; this is how to find it before CI does.
#   STRESS_RUNS=3                     how many runs
#   STRESS_CMD='make test'            what to run under load (any command)
#   STRESS_ARGS='--cpu 2 --io 1'      stress-ng's load: a CPU hog per core, one sync() loop
# Each run's full output is kept in $STRESS_DIR (default a temp directory).
set -uo pipefail

cd "$(dirname "$0")/.."
runs=${STRESS_RUNS:-3}
cmd=${STRESS_CMD:-make test}
load=${STRESS_ARGS:---cpu 2 --io 1}
dir=${STRESS_DIR:-$(mktemp -d -t seckill-stress.XXXXXX)}
mkdir -p "$dir"

WITH_STRESS=1 scripts/install-deps.sh >/dev/null || exit 1

stress_pid=
stop_stress() {
	if [ -n "$stress_pid" ]; then
		kill "$stress_pid" 2>/dev/null
		wait "$stress_pid" 2>/dev/null
		stress_pid=
	fi
}
trap 'stop_stress; exit 130' INT TERM
trap stop_stress EXIT

failed=0
for i in $(seq 1 "$runs"); do
	out="$dir/run$i.log"
	# Bounded by its own clock too, should this script die without its trap.
	# shellcheck disable=SC2086
	stress-ng $load --timeout 90m >/dev/null 2>&1 &
	stress_pid=$!
	start=$(date +%s)
	bash -c "$cmd" >"$out" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	stop_stress
	if [ "$rc" -eq 0 ]; then
		echo "test-stress: run $i of $runs: pass in ${took}s ($out)"
	else
		failed=$((failed + 1))
		echo "test-stress: run $i of $runs: FAIL (exit $rc) in ${took}s ($out)"
		grep -E '^(--- FAIL|FAIL|panic:)' "$out" | head -20 | sed 's/^/    /'
	fi
done
echo "test-stress: $((runs - failed)) of $runs runs passed under stress-ng $load"
[ "$failed" -eq 0 ]
