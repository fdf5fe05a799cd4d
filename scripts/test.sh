#!/usr/bin/env bash
# `make test`: every stage runs, whatever an earlier one did, and each
# prints its ctest summary; then one table of the stages and a total line.
# Exit 0 only when every stage passed.
#
# Stages:
#   normal     unit, integration and fuzz-corpus tests (RelWithDebInfo build)
#   clock+400d the same with the wall clock 400 days ahead (libfaketime; the
#   clock-400d monotonic clock stays real), then 400 days back: a test that
#              meets a wall-clock rule (retention, staleness, `since`, alert
#              times) with fixed timestamps fails today, not next month
#   asan       the whole suite under AddressSanitizer and UBSan
#
# STAGES="normal asan" runs a subset.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
JOBS=${JOBS:-$(nproc)}
STAGES=${STAGES:-"normal clock+400d clock-400d asan"}
LOGDIR=${TEST_LOGDIR:-$BUILD/test-logs}
mkdir -p "$LOGDIR"

declare -a rows=()
total_pass=0
total_fail=0
total_skip=0
failed=0

# The libfaketime build that handles threads. Its monotonic-clock fix
# (FAKETIME_FORCE_MONOTONIC_FIX) would shift condition-variable deadlines
# on CLOCK_MONOTONIC by the fake offset, so it is off: only the wall clock
# moves.
faketime_lib() {
	dpkg -L libfaketime 2>/dev/null | grep -m1 '/libfaketimeMT\.so\.1$'
}

# run_ctest NAME DIR CTEST-ARGS -- [ENV...]: ctest in DIR with ENV set,
# summary recorded.
run_ctest() {
	local name=$1 dir=$2
	shift 2
	local args=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	local log="$LOGDIR/$name.log"
	echo "== stage $name"
	env "$@" ctest --test-dir "$dir" --output-on-failure -j "$JOBS" "${args[@]}" 2>&1 | tee "$log" |
		grep -E '^(The following tests FAILED|	 *[0-9]+ - )|tests passed|\*\*\*|^FAIL' || true
	local rc=${PIPESTATUS[0]}
	# "97% tests passed, 2 tests failed out of 73"
	local sum pass=0 fail=0 all=0
	sum=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
	if [ -n "$sum" ]; then
		fail=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$sum")
		all=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$sum")
		pass=$((all - fail))
	fi
	# Skipped tests (exit 77, e.g. valgrind under ASan) pass in ctest's
	# count: shown apart, never as passed.
	local skipped
	skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*Skipped' "$log" || true)
	pass=$((pass - skipped))
	if [ "$skipped" -gt 0 ]; then note="$note, $skipped skipped"; fi
	total_skip=$((total_skip + skipped))
	if [ "$rc" -ne 0 ] || [ -z "$sum" ]; then
		echo "-- stage $name failed; the end of its log:"
		tail -n 200 "$log"
		failed=1
		[ "$fail" -gt 0 ] || fail=1
		rows+=("$(printf '%-11s FAILED  %4d passed, %d failed%s (log: %s)' "$name" "$pass" "$fail" "$note" "$log")")
	else
		rows+=("$(printf '%-11s ok      %4d passed, %d failed%s' "$name" "$pass" "$fail" "$note")")
	fi
	total_pass=$((total_pass + pass))
	total_fail=$((total_fail + fail))
}

build_stage() {
	local dir=$1
	shift
	cmake -S . -B "$dir" -DCMAKE_RULE_MESSAGES=OFF -DCMAKE_TARGET_MESSAGES=OFF "$@" >/dev/null &&
		cmake --build "$dir" -j "$JOBS" -- --no-print-directory
}

normal_built=""
ensure_normal() {
	if [ -z "$normal_built" ]; then
		if build_stage "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPULSE_TESTS=ON; then
			normal_built=ok
		else
			normal_built=failed
		fi
	fi
	[ "$normal_built" = ok ]
}

for stage in $STAGES; do
	case "$stage" in
	normal)
		if ensure_normal; then
			note=""
			run_ctest normal "$BUILD"
		else
			failed=1; total_fail=$((total_fail + 1)); rows+=("normal      FAILED  (build failed)")
		fi
		;;
	clock[+-]*)
		offset=${stage#clock}
		lib=$(faketime_lib)
		if [ -z "$lib" ]; then
			failed=1; total_fail=$((total_fail + 1))
			rows+=("$(printf '%-11s FAILED  (libfaketime is not installed: make deps)' "$stage")")
		elif ensure_normal; then
			# Tests labelled real-clock run Prometheus or Alertmanager,
			# which libfaketime cannot move: left out, and counted.
			nreal=$(ctest --test-dir "$BUILD" -N -L real-clock | sed -nE 's/^Total Tests: ([0-9]+)/\1/p')
			note=", ${nreal:-0} not run (real-clock: Prometheus, Alertmanager)"
			# tests/clockshim: Python's time.sleep fails under this
			# libfaketime setting; its sitecustomize sleeps another way.
			run_ctest "$stage" "$BUILD" -LE real-clock -- LD_PRELOAD="$lib" FAKETIME="$offset" \
				FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0 \
				PYTHONPATH="$PWD/tests/clockshim${PYTHONPATH:+:$PYTHONPATH}"
		else
			failed=1; total_fail=$((total_fail + 1)); rows+=("$stage FAILED  (build failed)")
		fi
		;;
	asan)
		if build_stage "$ASAN_BUILD" -DCMAKE_BUILD_TYPE=Debug -DGPULSE_SANITIZE=ON -DGPULSE_TESTS=ON; then
			note=""
			run_ctest asan "$ASAN_BUILD" -- ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
				UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
		else
			failed=1; total_fail=$((total_fail + 1)); rows+=("asan        FAILED  (build failed)")
		fi
		;;
	*)
		echo "test.sh: unknown stage '$stage' (normal, clock+400d, clock-400d, asan)" >&2
		exit 2
		;;
	esac
done

echo
echo "== make test: every stage"
printf '%s\n' "${rows[@]}"
echo "total: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $failed
