# HTTP Basic authentication with bcrypt hashes (issue 14), as Prometheus's
# web configuration has it: http.basic_auth_users maps names to hashes
# (fixed test vectors: alice's is "hunter2" at cost 10, as htpasswd -B
# makes them). A user reads; writes still take the write token. A flood of
# wrong passwords from one address gets 429 after a burst of 5, while
# /metrics keeps answering with a cached user and with the token. What
# bcrypt costs is read as the CPU time of gpulsed's bcrypt threads
# (gpulse-auth), not as wall time: a loaded machine stretches wall time
# (50 refusals took 5 s at load 17) but not the CPU a bcrypt run takes.
source "$(dirname "$0")/lib.sh"

printf 'read-tok\n' >"$WORK/read.token"
chmod 600 "$WORK/read.token"
cat >"$WORK/g.yml" <<'YML'
http:
  basic_auth_users:
    alice: "$2y$10$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e"
    bob: "$2b$04$gpulsetestsaltgpulse.usdyC1vXtlPhUkTAUkyESI9kLY5zIeCe"
YML
printf '  auth_token_file: "%s"\n' "$WORK/read.token" >>"$WORK/g.yml"
start_daemon a --config "$WORK/g.yml" --replay "$REC"
code() { curl -s --max-time 20 -o "$WORK/body" -D "$WORK/head" -w '%{http_code}' "$@"; }
# auth_cpu : CPU time (clock ticks, user + system) the gpulse-auth threads
# have spent, which is bcrypt's and nothing else's.
auth_cpu() {
	local t n=0 f
	for t in /proc/"$DAEMON_PID"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = gpulse-auth ] || continue
		f=$(sed 's/.*) //' "$t/stat") # fields from the 3rd on: utime is the 14th
		set -- $f
		n=$((n + ${12} + ${13}))
	done
	echo "$n"
}

[ "$(code "$URL/metrics")" = 401 ] || fail "/metrics without credentials"
grep -qi '^WWW-Authenticate: Basic realm="gpulse"' "$WORK/head" || fail "no Basic challenge: $(cat "$WORK/head")"
[ "$(code -u alice:hunter2 "$URL/metrics")" = 200 ] || fail "alice: $(cat "$WORK/body")"
grep -q '^gpulse_' "$WORK/body" || fail "alice's /metrics: $(head -c 200 "$WORK/body")"
[ "$(code -u "bob:correct horse" "$URL/api/v1/gpus")" = 200 ] || fail "bob"
[ "$(code -u alice:wrong "$URL/metrics")" = 401 ] || fail "a wrong password passed"
[ "$(code -u mallory:hunter2 "$URL/metrics")" = 401 ] || fail "an unknown user passed"
[ "$(code -H 'Authorization: Bearer read-tok' "$URL/metrics")" = 200 ] || fail "the token beside the users"
# A Basic user is a reader: the trace is a write (no write token, but
# numeric loopback: open to readers, as the token's holder would be).
[ "$(code -u alice:hunter2 "$URL/api/v1/trace?pid=1&seconds=1")" != 401 ] || fail "alice on the trace"

# A flood of wrong passwords: the address has 3 failures left of 5, then
# 429 with Retry-After at once (no bcrypt); scrapes go on meanwhile. The
# 3 failures left are bcrypt runs: what one costs in CPU.
cpu0=$(auth_cpu)
for i in 1 2 3; do
	[ "$(code -u "alice:wrong$i" "$URL/metrics")" = 401 ] || fail "failure $i"
done
runs3=$(($(auth_cpu) - cpu0))
[ "$runs3" -ge 6 ] || fail "3 bcrypt runs at cost 10 took $runs3 ticks of the auth threads' CPU"
# drain : 8 wrong passwords sent at once, of which some are refused
# (a try is taken before bcrypt runs), which leaves the bucket less than
# a try; sets T0 (ms) to when they were sent. (One after another would not
# do: on a loaded machine a bcrypt run at nice 10 can take as long as the
# bucket takes to refill a try. And the bucket refills while requests are
# answered: at load 11, the 3 bcrypt runs above took long enough to give
# the flood 2 tries more than its own time allowed.)
ms_now() { echo $(($(date +%s%N) / 1000000)); }
drain() {
	local i c refused=0 pids=()
	T0=$(ms_now)
	for i in $(seq 1 8); do
		curl -s --max-time 60 -o "$WORK/drainbody$i" -D "$WORK/drainhead$i" -w '%{http_code}' \
			-u "alice:drain$1$i" "$URL/metrics" >"$WORK/drain$i" &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	for i in $(seq 1 8); do
		c=$(cat "$WORK/drain$i")
		case $c in
		429) refused=$((refused + 1)); cp "$WORK/drainhead$i" "$WORK/head429"; cp "$WORK/drainbody$i" "$WORK/body429" ;;
		401) ;;
		*) fail "drain request $i: $c" ;;
		esac
	done
	[ "$refused" -ge 1 ] || fail "8 wrong passwords at once, none refused: the bucket holds more than its burst of 5"
}
drain a
cpu1=$(auth_cpu)
refused=0
for i in $(seq 1 50); do
	c=$(code -u "alice:flood$i" "$URL/metrics")
	case $c in
	429) refused=$((refused + 1)); cp "$WORK/head" "$WORK/head429"; cp "$WORK/body" "$WORK/body429" ;;
	401) ;; # the bucket's one try per 2 s
	*) fail "flood request $i: $c" ;;
	esac
done
flood_ms=$(($(ms_now) - T0))
flood_cpu=$(($(auth_cpu) - cpu1))
# At most one verified try per 2 s since the bucket was found empty, the
# first 2 s included.
max_tried=$(( flood_ms / 2000 + 1 ))
tried=$((50 - refused))
[ "$tried" -le "$max_tried" ] || fail "$tried of 50 verified in $flood_ms ms"
grep -qi '^Retry-After: 2' "$WORK/head429" || fail "429 without Retry-After: $(cat "$WORK/head429")"
grep -q 'too many failed logins' "$WORK/body429" || fail "429 body: $(cat "$WORK/body429")"
# Refusals cost no bcrypt: the auth threads spent what the tries verified
# cost, and less than half a run for each refusal (bcrypt on every request
# would spend a whole one on each).
[ $((flood_cpu * 6)) -lt $(((2 * tried + refused) * runs3)) ] ||
	fail "50 logins ($refused refused) took $flood_cpu ticks of bcrypt CPU; 3 runs took $runs3"
[ "$(code -u alice:hunter2 "$URL/metrics")" = 200 ] || fail "cached alice during the flood"
[ "$(code -H 'Authorization: Bearer read-tok' "$URL/metrics")" = 200 ] || fail "the token during the flood"
# Counted by reason on /metrics.
denied() { curl -s --max-time 5 -H 'Authorization: Bearer read-tok' "$URL/metrics" |
	sed -n "s/^gpulse_http_denied_total{reason=\"$1\"} //p"; }
# (/metrics is rendered at most every 50 ms: the counts may lag a little.)
wait_for '[ "$(denied login_limited)" -ge "$refused" ]' || fail "login_limited: $(denied login_limited)"
wait_for '[ "$(denied unauthorized)" -ge 5 ]' || fail "unauthorized: $(denied unauthorized)"
# The bucket refills, one failure per 2 s. Emptied first (the waits
# above may have left it a try or more: they take as long as the machine
# makes them), then tried until a try comes back; over the whole stretch
# since the bucket was last found empty, no more tries than one per 2 s
# (and the one whose fraction was left when it was found empty).
drain b
tried=0
for i in $(seq 1 300); do
	c=$(code -u "alice:again$i" "$URL/metrics")
	[ "$c" = 401 ] && { tried=1; break; }
	[ "$c" = 429 ] || fail "refill request $i: $c"
	sleep 0.2
done
[ "$tried" = 1 ] || fail "no try after $i requests over $(($(ms_now) - T0)) ms: the bucket does not refill"
# ...and no more than that: of the next two, at most one is tried (a
# fraction of a try may have been left over when the bucket was found
# empty, and may grow to a whole one while the first of the two is
# answered, so either one may be the try; never both, unless the machine
# took 2 s more to send them).
c1=$(code -u alice:next1 "$URL/metrics"); c2=$(code -u alice:next2 "$URL/metrics")
span=$(($(ms_now) - T0))
for c in "$c1" "$c2"; do
	case $c in 401) tried=$((tried + 1)) ;; 429) ;; *) fail "after the refill: $c" ;; esac
done
[ "$tried" -le $((span / 2000 + 1)) ] || fail "$tried tries in $span ms after the bucket was empty: $c1 $c2"
echo "ok: $refused of 50 flood logins refused without bcrypt: $flood_cpu ticks of bcrypt CPU (3 runs: $runs3) in $flood_ms ms"
