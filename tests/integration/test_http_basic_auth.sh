# HTTP Basic authentication with bcrypt hashes (issue 14), as Prometheus's
# web configuration has it: http.basic_auth_users maps names to hashes
# (fixed test vectors: alice's is "hunter2" at cost 10, as htpasswd -B
# makes them). A user reads; writes still take the write token. A flood of
# wrong passwords from one address gets 429 after a burst of 5, while
# /metrics keeps answering with a cached user and with the token.
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
# 429 with Retry-After at once (no bcrypt); scrapes go on meanwhile.
for i in 1 2 3; do
	[ "$(code -u "alice:wrong$i" "$URL/metrics")" = 401 ] || fail "failure $i"
done
start=$(date +%s%N)
refused=0
for i in $(seq 1 50); do
	c=$(code -u "alice:flood$i" "$URL/metrics")
	case $c in
	429) refused=$((refused + 1)); cp "$WORK/head" "$WORK/head429"; cp "$WORK/body" "$WORK/body429" ;;
	401) ;; # the bucket's one try per 2 s
	*) fail "flood request $i: $c" ;;
	esac
done
flood_ms=$(( ($(date +%s%N) - start) / 1000000 ))
# At most one verified try per 2 s of the flood, the first 2 s included.
max_tried=$(( flood_ms / 2000 + 1 ))
[ $((50 - refused)) -le "$max_tried" ] || fail "$((50 - refused)) of 50 verified in $flood_ms ms"
grep -qi '^Retry-After: 2' "$WORK/head429" || fail "429 without Retry-After: $(cat "$WORK/head429")"
grep -q 'too many failed logins' "$WORK/body429" || fail "429 body: $(cat "$WORK/body429")"
# Refusals cost no bcrypt (50 at cost 10 would take 3-5 s).
[ "$flood_ms" -lt 4000 ] || fail "50 refused logins took $flood_ms ms"
[ "$(code -u alice:hunter2 "$URL/metrics")" = 200 ] || fail "cached alice during the flood"
[ "$(code -H 'Authorization: Bearer read-tok' "$URL/metrics")" = 200 ] || fail "the token during the flood"
# Counted by reason on /metrics.
denied() { curl -s --max-time 5 -H 'Authorization: Bearer read-tok' "$URL/metrics" |
	sed -n "s/^gpulse_http_denied_total{reason=\"$1\"} //p"; }
# (/metrics is rendered at most every 50 ms: the counts may lag a little.)
wait_for '[ "$(denied login_limited)" -ge "$refused" ]' || fail "login_limited: $(denied login_limited)"
wait_for '[ "$(denied unauthorized)" -ge 5 ]' || fail "unauthorized: $(denied unauthorized)"
# The bucket refills, one failure per 2 s.
sleep 2.1
[ "$(code -u alice:again "$URL/metrics")" = 401 ] || fail "no try after the refill"
# ...and no more than that: of the next two, at most one is tried (a
# fraction of a try may have been left over from the waits above, and may
# grow to a whole one while the first of the two is answered, so either
# one may be the try; never both).
c1=$(code -u alice:again2 "$URL/metrics"); c2=$(code -u alice:again3 "$URL/metrics")
[ "$c1" = 429 ] || [ "$c2" = 429 ] || fail "tries after one refill: $c1 $c2"
echo "ok: $refused of 50 flood logins refused without bcrypt in $flood_ms ms"
