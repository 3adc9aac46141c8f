#!/usr/bin/env bash
# failures.sh LOG: what failed in a go test log, for the end of CI's output.
# CI shows only the tail of what it printed, and go test prints the
# failing package first and the passing ones after it: a failed cell's
# message, or a timeout's list of the tests still running, scrolls out of
# sight behind a goroutine dump and fifty "ok" lines. This prints each
# "--- FAIL", "panic:" and "running tests:" line with what follows it
# (up to 20 lines, to the next package's line), and each failed package.
set -euo pipefail
log=${1:?usage: failures.sh LOG}
echo "=== what failed (from $log) ==="
awk '
	/^(ok|\?) / { left = 0; next }
	/^FAIL\t/ { print; left = 0; next }
	/--- FAIL|^panic: |running tests:/ { left = 20 }
	left > 0 && printed < 300 { print; left--; printed++ }
' "$log"
