# Per-address request rate limit (issue 14): http.rate_limit requests/s
# with a burst of http.rate_limit_burst; beyond, 429 with Retry-After;
# /metrics and /healthz are exempt, so a scraper is never starved by a
# client on the same address.
source "$(dirname "$0")/lib.sh"

printf 'http:\n  rate_limit: 1\n  rate_limit_burst: 5\n' >"$WORK/g.yml"
start_daemon a --config "$WORK/g.yml" --replay "$REC"
code() { curl -s --max-time 10 -o "$WORK/body" -D "$WORK/head" -w '%{http_code}' "$@"; }

ok=0 limited=0
for i in $(seq 1 20); do
	case $(code "$URL/api/v1/gpus") in
	200) ok=$((ok + 1)) ;;
	429) limited=$((limited + 1)) ;;
	*) fail "request $i: $(cat "$WORK/body")" ;;
	esac
done
# The burst of 5, plus one a second while the loop ran.
[ "$ok" -ge 5 ] && [ "$ok" -le 8 ] || fail "$ok of 20 passed at 1/s with a burst of 5"
grep -qi '^Retry-After: 1' "$WORK/head" || fail "429 without Retry-After: $(cat "$WORK/head")"
grep -q 'too many requests from this address' "$WORK/body" || fail "429 body: $(cat "$WORK/body")"
# The scrape and the health check are exempt.
for i in $(seq 1 30); do
	[ "$(code "$URL/metrics")" = 200 ] || fail "scrape $i was limited"
done
[ "$(code "$URL/healthz")" = 200 ] || fail "/healthz was limited"
# Refused requests are counted as rejected.
rej=$(metric gpulse_http_rejected_total)
[ "${rej%.*}" -ge "$limited" ] || fail "gpulse_http_rejected_total $rej < $limited"
wait_for '[ "$(metric gpulse_http_denied_total "reason=\"rate_limited\"")" = "$limited" ]' ||
	fail "rate_limited: $(metric gpulse_http_denied_total 'reason="rate_limited"') != $limited"
sleep 1.1
[ "$(code "$URL/api/v1/gpus")" = 200 ] || fail "no request after a second"
echo "ok: $ok passed, $limited limited"
