#!/usr/bin/env bash
# Run every libFuzzer target built in BUILD_DIR/fuzz for a while each,
# starting from its seed corpus (copied, so the repository's stays small).
#   scripts/run-fuzzers.sh BUILD_DIR [SECONDS_EACH]
set -euo pipefail
B=${1:?build dir}
SECS=${2:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
status=0
for t in "$B"/fuzz/fuzz_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	work=$(mktemp -d)
	cp -r "$ROOT/fuzz/corpus/$name/." "$work/" 2>/dev/null || true
	echo "== $name ($SECS s)"
	if ! "$t" -max_total_time="$SECS" -print_final_stats=1 -artifact_prefix="$ROOT/fuzz/" "$work" 2>&1 | tail -n 4; then
		echo "$name: FAILED (artifact in fuzz/)"
		status=1
	fi
	rm -rf "$work"
done
exit $status
