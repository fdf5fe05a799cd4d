# Shared helpers for integration tests: start gpulsed on a free loopback
# port, wait until it serves, fetch, and clean up on exit. Sourced.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/need.sh"

: "${GPULSED:?}" "${GPULSE:?}" "${GPULSE_TEST_DATA:?}"
REC="$GPULSE_TEST_DATA/recordings/h200-phases-10hz.csv"
WORK=$(mktemp -d /tmp/gpulse-it.XXXXXX)
PIDS=()

# VALGRIND=1: start_daemon runs gpulsed under valgrind's memcheck (as
# test_valgrind.sh does), waits longer for it, and at exit stops each
# daemon with SIGTERM and fails the test when a valgrind log counts an
# error or a definite leak. By hand, to look for memory errors in any
# test; tests that time the daemon closely may fail for speed alone.
VG_OPTS=(--tool=memcheck --leak-check=full --show-leak-kinds=definite
	--errors-for-leak-kinds=definite --num-callers=40)
cleanup() {
	local rc=$?
	if [ "${VALGRIND:-0}" = 1 ]; then
		for p in "${PIDS[@]:-}"; do
			[ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
		done
		for p in "${PIDS[@]:-}"; do
			for _ in $(seq 1 600); do
				[ -n "$p" ] && kill -0 "$p" 2>/dev/null || break
				sleep 0.1
			done
		done
		for f in "$WORK"/*.vg.log; do
			[ -f "$f" ] || continue
			# No summary: the test killed that daemon with SIGKILL
			# (memcheck writes one on every other end, a crash too).
			echo "valgrind: ${f##*/}: $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$f" ||
				echo 'no summary (killed with SIGKILL)')"
			if grep -q 'ERROR SUMMARY: [1-9]' "$f"; then
				echo "FAIL: valgrind: $f" >&2
				cat "$f" >&2
				rc=1
			fi
		done
	fi
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
	done
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	for f in "$WORK"/*.log; do
		[ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
	done
	exit 1
}

# own_socket NAME ARGS... : sets DAEMON_ARGS to ARGS with the profiling
# socket put at $WORK/NAME.inject.sock unless the configuration names one:
# gpulsed's default, /run/gpulse/inject.sock, is one per machine, and two
# tests running at once there would find it taken ("another gpulsed
# serves ..."). Without --config, a configuration of that one key is
# given; a --config file without profiling.socket gets the key written
# into it, at its top (so that a reload, which rereads the file, keeps
# it; a test that rewrites its configuration writes the key itself; a
# test that appends to its last block still appends there).
own_socket() {
	local name=$1 cfg="" i
	shift
	DAEMON_ARGS=("$@")
	for ((i = 0; i < ${#DAEMON_ARGS[@]}; i++)); do
		case ${DAEMON_ARGS[i]} in
		--config | -c) cfg=${DAEMON_ARGS[i + 1]:-} ;;
		--config=*) cfg=${DAEMON_ARGS[i]#--config=} ;;
		esac
	done
	local sock="$WORK/$name.inject.sock"
	if [ -z "$cfg" ]; then
		printf 'profiling:\n  socket: "%s"\n' "$sock" >"$WORK/$name.socket.yml"
		DAEMON_ARGS+=(--config "$WORK/$name.socket.yml")
	elif [ -f "$cfg" ] && [ ! -p "$cfg" ]; then
		python3 - "$cfg" "$sock" <<'PY' || fail "cannot give $cfg a profiling socket of its own"
import re, sys, yaml
path, sock = sys.argv[1], sys.argv[2]
text = open(path).read()
try:
    doc = yaml.safe_load(text)
except yaml.YAMLError:
    sys.exit(0)  # a test of a bad file: gpulsed says what is wrong with it
if not isinstance(doc, dict):
    sys.exit(0)
prof = doc.get("profiling")
if isinstance(prof, dict) and "socket" in prof:
    sys.exit(0)  # the test chose its socket
line = 'socket: "%s"' % sock
m = re.search(r"^profiling:[ \t]*(#.*)?\n", text, re.M)
if prof is None and not m:
    # First, not last: a test may append to the file's last block.
    head = re.match(r"(---[^\n]*\n)?", text).group(0)
    text = head + "profiling:\n  " + line + "\n" + text[len(head):]
elif m and (prof is None or isinstance(prof, dict)):
    rest = text[m.end():]
    ind = re.match(r"([ \t]+)\S", rest)
    text = text[:m.end()] + (ind.group(1) if ind else "  ") + line + "\n" + rest
else:
    sys.exit("profiling: is not a block this helper can add to")
open(path, "w").write(text)
PY
	fi
}

# start_daemon NAME ARGS... : starts gpulsed on 127.0.0.1:0 with ARGS
# (and a profiling socket of its own: own_socket); sets PORT and
# DAEMON_PID; its stderr goes to $WORK/NAME.log.
start_daemon() {
	local name=$1
	shift
	own_socket "$name" "$@"
	set -- "${DAEMON_ARGS[@]}"
	# The log exists before the daemon does: the background job opens it
	# only when it runs, and the reader below must not race that open.
	: >"$WORK/$name.log"
	local vg=() tries=100
	if [ "${VALGRIND:-0}" = 1 ]; then
		vg=(valgrind "${VG_OPTS[@]}" --log-file="$WORK/$name.%p.vg.log")
		tries=1800
	fi
	"${vg[@]}" "$GPULSED" --listen 127.0.0.1:0 "$@" 2>"$WORK/$name.log" &
	DAEMON_PID=$!
	PIDS+=("$DAEMON_PID")
	PORT=""
	for _ in $(seq 1 $tries); do
		PORT=$(sed -n 's/.*serving http[s]*:\/\/.* port \([0-9]*\) .*/\1/p' "$WORK/$name.log" | head -n1)
		[ -n "$PORT" ] && break
		kill -0 "$DAEMON_PID" 2>/dev/null || fail "gpulsed exited early: $(cat "$WORK/$name.log")"
		sleep 0.1
	done
	[ -n "$PORT" ] || fail "gpulsed did not start serving"
	URL="http://127.0.0.1:$PORT"
}

fetch() { curl -sf --max-time 5 "$URL$1"; }

# has PATH PATTERN : true when the body of PATH has a line matching the
# extended regex PATTERN. The body is fetched whole first: `fetch | grep -q`
# would make curl die of SIGPIPE and fail the pipeline under pipefail.
has() {
	local body
	body=$(fetch "$1") || return 1
	grep -Eq -- "$2" <<<"$body"
}

# ASAN_OPTIONS for a gpulsed started with a library preloaded (libfaketime):
# under ASan its runtime refuses to come after another preload unless told
# the order is intended. The suite's own options are kept.
preload_asan_options() {
	echo "${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
}

# faketime_gpulsed : GPULSED becomes a wrapper that runs gpulsed (and the
# children it starts) on libfaketime's wall clock, which faketime_offset
# SECONDS then moves (the monotonic clock stays real), on top of the offset
# the shifted-clock stages of scripts/test.sh give every test (FAKETIME,
# e.g. +400d: FAKETIME_BASE, in seconds). Exits 77 (fails under CI) when
# libfaketime is missing.
faketime_gpulsed() {
	local lib
	lib=$(dpkg -L libfaketime 2>/dev/null | grep -m1 '/libfaketimeMT\.so\.1$' || true)
	if [ -z "$lib" ]; then
		[ "${CI:-}" = true ] && fail "libfaketime is not installed (make deps)"
		echo "skipped: libfaketime is not installed"
		exit 77
	fi
	FAKETIME_BASE=$(python3 -c '
import re, sys
m = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)([smhdy]?)", sys.argv[1].strip() or "0")
if not m: sys.exit("unknown FAKETIME offset: " + sys.argv[1])
k = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "y": 31536000}[m.group(2)]
print(int(float(m.group(1)) * k))' "${FAKETIME:-0}")
	FAKETIME_CLOCK="$WORK/faketime"
	faketime_offset 0
	local real="$GPULSED"
	GPULSED="$WORK/gpulsed-faketime"
	cat >"$GPULSED" <<SH
#!/bin/sh
unset FAKETIME
export ASAN_OPTIONS="$(preload_asan_options)"
export LD_PRELOAD="$lib" FAKETIME_TIMESTAMP_FILE="$FAKETIME_CLOCK" FAKETIME_CACHE_DURATION=0 \
	FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0
exec "$real" "\$@"
SH
	chmod +x "$GPULSED"
}
faketime_offset() {
	printf '%+ds\n' "$((FAKETIME_BASE + $1))" >"$FAKETIME_CLOCK.new" && mv "$FAKETIME_CLOCK.new" "$FAKETIME_CLOCK"
}

# metric NAME [MATCH...] : prints the value of the first sample of NAME
# whose line contains every MATCH (e.g. 'gpu="0"' 'tier="fast"'), or
# nothing. The exposition is fetched whole first: awk leaving early must
# not break the pipe under pipefail.
metric() {
	local name=$1 body
	shift
	body=$(fetch /metrics) || return 0
	awk -v n="$name" -v m="$(printf '%s\034' "$@")" '
		BEGIN { k = split(m, want, "\034") }
		$0 !~ /^#/ { split($0, a, " "); name=a[1]; sub(/\{.*/, "", name);
		  if (name != n) next
		  for (i = 1; i <= k; i++) if (want[i] != "" && index($0, want[i]) == 0) next
		  print $NF; exit }' <<<"$body"
}

# wait_for CMD... : retry a shell condition for up to 15 s.
wait_for() {
	for _ in $(seq 1 150); do
		if eval "$*"; then return 0; fi
		sleep 0.1
	done
	return 1
}

# approx A B [REL] : true when |A-B| <= REL*max(|A|,|B|,1e-12)
approx() {
	python3 -c 'import sys; a,b,r=float(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]); sys.exit(0 if abs(a-b) <= r*max(abs(a),abs(b),1e-12) else 1)' "$1" "$2" "${3:-1e-9}"
}

# free_port : prints a TCP port free on 127.0.0.1 now.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_prometheus CONFIG [NAME] : starts Debian's prometheus with CONFIG
# on a free loopback port, its TSDB in $WORK/NAME (default prom), its log
# in $WORK/NAME.log, and waits until it is ready; sets PROM (its URL) and
# PROM_PID. Callers skip the test first when prometheus is missing.
start_prometheus() {
	local cfg=$1 name=${2:-prom} port
	port=$(free_port)
	prometheus --config.file="$cfg" --storage.tsdb.path="$WORK/$name" \
		--web.listen-address="127.0.0.1:$port" --log.level=warn 2>"$WORK/$name.log" &
	PROM_PID=$!
	PIDS+=("$PROM_PID")
	PROM="http://127.0.0.1:$port"
	wait_for 'curl -sf --max-time 2 "$PROM/-/ready" >/dev/null' || fail "prometheus did not start"
}

# alertmanager_bin : prints Debian's Alertmanager binary ($ALERTMANAGER
# first), or fails the test: scripts/install-deps.sh installs it.
alertmanager_bin() {
	local b=${ALERTMANAGER:-$(command -v prometheus-alertmanager || command -v alertmanager || true)}
	[ -n "$b" ] || fail "prometheus-alertmanager is not installed (scripts/install-deps.sh installs it)"
	echo "$b"
}

# start_alertmanager CONFIG [NAME] : starts Alertmanager with CONFIG on a
# free loopback port, clustering off, its data in $WORK/NAME (default am),
# its log in $WORK/NAME.log, and waits until it is ready; sets AM (its
# URL) and AM_PID.
start_alertmanager() {
	local cfg=$1 name=${2:-am} bin port
	bin=$(alertmanager_bin)
	port=$(free_port)
	mkdir -p "$WORK/$name"
	"$bin" --config.file="$cfg" --storage.path="$WORK/$name" \
		--web.listen-address="127.0.0.1:$port" --cluster.listen-address= --log.level=warn \
		2>"$WORK/$name.log" &
	AM_PID=$!
	PIDS+=("$AM_PID")
	AM="http://127.0.0.1:$port"
	wait_for 'curl -sf --max-time 2 "$AM/-/ready" >/dev/null' || fail "Alertmanager did not become ready"
}
