# Configuration: bad files and flags exit 2 naming the problem; SIGHUP
# reloads, a bad reload keeps the running config and is counted; SIGTERM
# stops cleanly with status 0.
source "$(dirname "$0")/lib.sh"

expect_exit2() { # DESCRIPTION PATTERN ARGS...
	local what=$1 pat=$2
	shift 2
	set +e
	"$GPULSED" "$@" >"$WORK/out.txt" 2>&1
	local rc=$?
	set -e
	[ "$rc" = 2 ] || fail "$what: exit $rc, want 2"
	grep -q -- "$pat" "$WORK/out.txt" || fail "$what: message lacks '$pat': $(cat "$WORK/out.txt")"
	# The program's name comes once, in front.
	! grep -q 'gpulsed: gpulsed:' "$WORK/out.txt" || fail "$what: name doubled: $(cat "$WORK/out.txt")"
}

# The documented file (the package's conffile) reads as the built-in
# defaults, key for key and in the same order (list values included):
# its attribution.labels once listed the same fields in another order.
"$GPULSED" --print-config >"$WORK/builtin.yml" || fail "--print-config: exit $?"
"$GPULSED" --config "$GPULSE_SOURCE_DIR/etc/gpulse.yml" --print-config >"$WORK/shipped.yml" ||
	fail "--print-config with etc/gpulse.yml: exit $?"
diff <(grep -v '^#' "$WORK/builtin.yml") <(grep -v '^#' "$WORK/shipped.yml") >"$WORK/cfg.diff" ||
	fail "etc/gpulse.yml differs from the built-in defaults: $(cat "$WORK/cfg.diff")"

printf 'listen: "127.0.0.1:0"\nsampling:\n  fast: 10x\n' >"$WORK/bad.yml"
expect_exit2 "bad duration" "bad.yml:3:" --config "$WORK/bad.yml"
printf 'lisen: "127.0.0.1:0"\n' >"$WORK/typo.yml"
expect_exit2 "unknown key" "typo.yml:1:1" --config "$WORK/typo.yml"
expect_exit2 "missing file" "nothere.yml" --config "$WORK/nothere.yml"
expect_exit2 "bad flag" "^gpulsed: unrecognized option '--no-such-flag'" --no-such-flag
expect_exit2 "no value at the end" '^gpulsed: --listen needs a value$' --listen
# An option where a value belongs: refused, not taken as the value.
expect_exit2 "option as a value" '^gpulsed: --listen needs a value, got the option "--print-config"' \
	--listen --print-config
expect_exit2 "option as a short option's value" '^gpulsed: -c needs a value, got the option "--demo"' \
	-c --demo
expect_exit2 "bad speed" "replay-speed" --replay-speed fast
expect_exit2 "remote without TLS" "0.0.0.0" --listen 0.0.0.0:9999
# A bad flag value without a config file: the message says it came from
# the command line.
expect_exit2 "bad listen flag" '^gpulsed: command line: listen: ' --listen nope
expect_exit2 "store in a missing directory" \
	'^gpulsed: command line: storage.path: directory /nonexistent/dir does not exist' \
	--storage-path /nonexistent/dir/g.db
# A file the configuration names must be there when it is read: refused
# by --print-config as at start, with the config's FILE:LINE:COL, the key
# and the file. Each case names $WORK/gone/f where @ stands.
mkdir -p "$WORK/cfg"
missing_file_case() { # KEY-PATTERN YAML LINE:COL
	local key=$1 yaml=$2 at=$3
	printf '%s\n' "${yaml//@/$WORK/gone/f}" >"$WORK/cfg/missing.yml"
	expect_exit2 "missing $key (--print-config)" \
		"^gpulsed: $WORK/cfg/missing.yml:$at: $key: $WORK/gone/f: No such file or directory\$" \
		--config "$WORK/cfg/missing.yml" --print-config
}
missing_file_case replay.file $'replay:\n  file: @' 2:9
missing_file_case rule_files $'log_level: info\nrule_files:\n  - @' 3:5
missing_file_case http.auth_token_file $'http:\n  auth_token_file: @' 2:20
missing_file_case http.write_token_file $'http:\n  write_token_file: @' 2:21
missing_file_case http.tls_cert_file $'http:\n  tls_cert_file: @' 2:18
missing_file_case http.tls_key_file $'http:\n  tls_key_file: @' 2:17
missing_file_case http.tls_client_ca_file $'http:\n  tls_client_ca_file: @' 2:23
missing_file_case alerting.alertmanagers.bearer_token_file \
	$'alerting:\n  alertmanagers:\n    bearer_token_file: @' 3:24
missing_file_case alerting.webhooks.bearer_token_file \
	$'alerting:\n  webhooks:\n    bearer_token_file: @' 3:24
missing_file_case alerting.exec.path $'alerting:\n  exec:\n    path: @' 3:11
missing_file_case 'remote_write\[0\].basic_auth.password_file' \
	$'remote_write:\n  - url: http://127.0.0.1:1/w\n    basic_auth:\n      username: u\n      password_file: @' 5:22
missing_file_case 'remote_write\[0\].authorization.credentials_file' \
	$'remote_write:\n  - url: http://127.0.0.1:1/w\n    authorization:\n      credentials_file: @' 4:25
for k in ca_file cert_file key_file; do
	missing_file_case "remote_write\\[0\\].tls_config.$k" \
		$'remote_write:\n  - url: https://127.0.0.1:1/w\n    tls_config:\n      '"$k"': @' 4:$((9 + ${#k}))
done
missing_file_case bench.command $'bench:\n  command: @' 2:12
# At start too; and a directory is not a file.
printf 'replay:\n  file: %s\n' "$WORK/gone/f" >"$WORK/cfg/missing.yml"
expect_exit2 "missing replay.file (start)" \
	"^gpulsed: $WORK/cfg/missing.yml:2:9: replay.file: $WORK/gone/f: No such file or directory\$" \
	--config "$WORK/cfg/missing.yml" --listen 127.0.0.1:0
printf 'rule_files: [%s]\n' "$WORK" >"$WORK/cfg/dir.yml"
expect_exit2 "rule file that is a directory" \
	"^gpulsed: $WORK/cfg/dir.yml:1:14: rule_files: $WORK: is a directory, not a file\$" \
	--config "$WORK/cfg/dir.yml" --listen 127.0.0.1:0
# --replay's file is checked as well, before anything starts.
expect_exit2 "missing --replay file" \
	"^gpulsed: command line: replay.file: $WORK/gone/f: No such file or directory\$" \
	--replay "$WORK/gone/f" --print-config
# What gpulsed creates itself may be missing: the store (in a directory
# that exists), the alert queue, the profiling socket.
printf 'storage:\n  path: %s/cfg/new.db\nalerting:\n  queue:\n    path: %s/cfg/q\nprofiling:\n  socket: %s/cfg/s.sock\n' \
	"$WORK" "$WORK" "$WORK" >"$WORK/cfg/created.yml"
"$GPULSED" --config "$WORK/cfg/created.yml" --print-config >"$WORK/out.txt" 2>&1 ||
	fail "files gpulsed creates refused: $(cat "$WORK/out.txt")"

# Every relative path in the file resolves against the file's directory,
# whatever the working directory: gpulsed runs from another directory and
# the config names its files relatively.
mkdir -p "$WORK/conf/rules" "$WORK/elsewhere"
cp "$REC" "$WORK/conf/rec.csv"
printf 'groups:\n  - name: rel\n    rules:\n      - alert: Rel\n        expr: vector(1)\n' >"$WORK/conf/rules/r.yml"
printf 'read-token\n' >"$WORK/conf/token"
printf 'write-token\n' >"$WORK/conf/wtoken"
chmod 600 "$WORK/conf/token" "$WORK/conf/wtoken"
printf 'x\n' >"$WORK/conf/pem"
printf '%s\n' 'replay:' '  file: rec.csv' '  speed: 10' 'storage:' '  path: g.db' \
	'rule_files: [rules/r.yml]' 'alerting:' '  queue:' '    path: aq' 'http:' \
	'  tls_cert_file: pem' '  tls_key_file: ./pem' '  auth_token_file: token' \
	'  write_token_file: wtoken' >"$WORK/conf/rel.yml"
(cd "$WORK/elsewhere" && "$GPULSED" --config ../conf/rel.yml --print-config) >"$WORK/rel.txt" 2>&1 ||
	fail "relative paths not resolved against the config's directory: $(cat "$WORK/rel.txt")"
for want in "  file: \"$WORK/conf/rec.csv\"" "  path: \"$WORK/conf/g.db\"" \
	"rule_files: [\"$WORK/conf/rules/r.yml\"]" "  tls_cert_file: \"$WORK/conf/pem\"" \
	"  tls_key_file: \"$WORK/conf/pem\"" "  auth_token_file: \"$WORK/conf/token\"" \
	"  write_token_file: \"$WORK/conf/wtoken\"" "    path: \"$WORK/conf/aq\""; do
	grep -qxF -- "$want" "$WORK/rel.txt" || fail "--print-config lacks '$want': $(cat "$WORK/rel.txt")"
done
# The printed configuration names the same files wherever it is put.
"$GPULSED" --config "$WORK/rel.txt" --print-config >"$WORK/rel2.txt" 2>&1 ||
	fail "printed configuration refused: $(cat "$WORK/rel2.txt")"
cmp -s "$WORK/rel.txt" "$WORK/rel2.txt" ||
	fail "printed configuration reads differently: $(diff "$WORK/rel.txt" "$WORK/rel2.txt")"
# Started from elsewhere, gpulsed serves the replay, runs the rule and
# keeps its store beside the config (without the http section: the
# placeholder PEM would be refused at start).
head -n 9 "$WORK/conf/rel.yml" >"$WORK/conf/run.yml"
cd "$WORK/elsewhere"
start_daemon rel --config ../conf/run.yml
cd - >/dev/null
wait_for 'fetch /api/v1/rules | grep -q "\"Rel\""' || fail "rule file not loaded: $(fetch /api/v1/rules)"
has /metrics '^gpulse_gpu_info\{.*source="replay"' || fail "relative replay.file not served"
[ -f "$WORK/conf/g.db" ] || fail "store not beside the config: $(ls "$WORK/conf" "$WORK/elsewhere")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "the daemon started from elsewhere did not stop cleanly"

# A TLS file that is not PEM is the configuration's fault: 2.
echo "not a certificate" >"$WORK/cert.pem"
printf 'http:\n  tls_cert_file: %s\n  tls_key_file: %s\n' "$WORK/cert.pem" "$WORK/cert.pem" >"$WORK/tls.yml"
expect_exit2 "TLS file not PEM" "holds no PEM data" --config "$WORK/tls.yml" --listen 127.0.0.1:0
expect_exit2 "remote flag" '^gpulsed: command line: listen "0.0.0.0:9999"' --listen 0.0.0.0:9999

grep -q 'listen: "127.0.0.1:9401"' <<<"$("$GPULSED" --print-config)" || fail "--print-config lacks the default listen"
# --allow-insecure-remote is http.allow_insecure_remote: the remote
# address refused above passes with it, and the flag is in --help.
out=$("$GPULSED" --listen 0.0.0.0:9999 --allow-insecure-remote --print-config) ||
	fail "--allow-insecure-remote refused: $out"
grep -q '^  allow_insecure_remote: true' <<<"$out" || fail "--allow-insecure-remote not applied: $out"
"$GPULSED" --help | grep -q -- '--allow-insecure-remote' || fail "--help lacks --allow-insecure-remote"

# A store another gpulsed holds is a failure at run time: exit 1.
start_daemon holder --replay "$REC" --storage-path "$WORK/held.db"
set +e
"$GPULSED" --listen 127.0.0.1:0 --storage-path "$WORK/held.db" >"$WORK/held.txt" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "held store: exit $rc, want 1: $(cat "$WORK/held.txt")"
grep -q "in use by another gpulse store" "$WORK/held.txt" || fail "held store message: $(cat "$WORK/held.txt")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "the store's holder did not stop cleanly"
# (Its profiling socket in the file, as each rewrite below keeps it.)
printf 'log_level: info\nreplay:\n  file: "%s"\n  speed: 10\nprofiling:\n  socket: "%s"\n' "$REC" \
	"$WORK/sig.sock" >"$WORK/good.yml"
start_daemon sig --config "$WORK/good.yml"
# So is a taken port.
set +e
"$GPULSED" --listen "127.0.0.1:$PORT" >"$WORK/taken.txt" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "taken port: exit $rc, want 1: $(cat "$WORK/taken.txt")"
grep -q "127.0.0.1:$PORT: the port is already in use" "$WORK/taken.txt" ||
	fail "taken port message: $(cat "$WORK/taken.txt")"
kill -HUP "$DAEMON_PID"
wait_for '[ "$(metric gpulse_config_reloads_total result=\"success\")" = 1 ]' || fail "good reload not counted"
! grep -q 'after a restart' "$WORK/sig.log" || fail "restart warning for an unchanged file: $(cat "$WORK/sig.log")"
# One restart-only key changed, with live ones: the warning names exactly it.
printf 'log_level: debug\nsampling:\n  fast: 200ms\nhttp:\n  threads: 3\nreplay:\n  file: "%s"\n  speed: 10\nprofiling:\n  socket: "%s"\n' \
	"$REC" "$WORK/sig.sock" >"$WORK/good.yml"
kill -HUP "$DAEMON_PID"
wait_for '[ "$(metric gpulse_config_reloads_total result=\"success\")" = 2 ]' || fail "second reload not counted"
warn=$(grep 'after a restart' "$WORK/sig.log") || fail "no restart warning: $(cat "$WORK/sig.log")"
[ "$(sed 's/.*after a restart: //' <<<"$warn")" = "http.threads" ] || fail "restart warning: $warn"
cp "$WORK/good.yml" "$WORK/keep.yml"
printf 'sampling: [\n' >"$WORK/good.yml"
kill -HUP "$DAEMON_PID"
wait_for '[ "$(metric gpulse_config_reloads_total result=\"failure\")" = 1 ]' || fail "bad reload not counted"
[ "$(metric gpulse_config_last_reload_successful)" = 0 ] || fail "last reload should read failed"
grep -q 'reload refused' "$WORK/sig.log" || fail "bad reload not logged"
fetch /healthz >/dev/null || fail "daemon died on a bad reload"
kill -TERM "$DAEMON_PID"
set +e
wait "$DAEMON_PID"
rc=$?
set -e
[ "$rc" = 0 ] || fail "SIGTERM exit status $rc"
echo PASS
