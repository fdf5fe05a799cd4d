# The Ansible role deploy/ansible/roles/gpulse, run for real with
# Debian's ansible-playbook (connection local) inside a throw-away root
# (an overlay of this machine's root in a private mount namespace,
# chrooted into; the host is untouched): the first run installs the
# package built from this build (scripts/build-deb.sh --prebuilt), writes
# the config and a rule file, and changes things; a second run changes
# nothing; a changed variable rewrites the config and its handler reloads
# the running gpulsed (SIGHUP, counted as a successful reload); a
# non-integer port and a port out of range are refused before anything
# runs, with messages naming the variable; a config key gpulsed refuses is
# stopped by the template's validation, naming the line, and the old
# config stays; a token is written for gpulsed alone and never logged.
#
# No systemd runs here (no PID 1 in CI): the role's service tasks are
# switched off (gpulse_service_manager: none) and its handler's stand-in
# is gpulse_reload_command, which signals a gpulsed this test started as
# the unit would. The systemd path of the role is not exercised here.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}" "${GPULSE_SOURCE_DIR:?}"
for tool in ansible-playbook dpkg-buildpackage unshare; do
	command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh)"
done
[ "$(id -u)" = 0 ] || skip_or_fail "the throw-away root needs root (mount, chroot)"
/usr/bin/python3 -c 'import apt' 2>/dev/null || fail "python3-apt is missing (scripts/install-deps.sh)"

# The example playbook and its inventory parse.
(cd "$GPULSE_SOURCE_DIR/deploy/ansible" && env -u LD_PRELOAD ANSIBLE_NOCOLOR=1 HOME="$WORK" \
	ansible-playbook --syntax-check -i inventory.example.ini playbook.yml) >"$WORK/syntax.log" 2>&1 ||
	fail "example playbook: $(cat "$WORK/syntax.log")"

"$GPULSE_SOURCE_DIR/scripts/build-deb.sh" --prebuilt "$GPULSE_BUILD_DIR" --out "$WORK/deb" \
	>"$WORK/build.log" 2>&1 || fail "build-deb: $(cat "$WORK/build.log")"
deb=$(ls "$WORK"/deb/gpulse_*_"$(dpkg --print-architecture)".deb | head -n1)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# What the chroot sees under /srv/t: the role, the package, a rule file
# and the playbook.
T="$WORK/upper/srv/t"
mkdir -p "$T" "$WORK/ovl" "$WORK/root"
cp -r "$GPULSE_SOURCE_DIR/deploy/ansible/roles" "$T/"
cp "$deb" "$T/gpulse.deb"
cat >"$T/site.rules.yml" <<'R'
groups:
  - name: site
    rules:
      - alert: SiteGPUHot
        expr: gpulse_gpu_temperature_celsius > 85
        for: 5m
R
cat >"$T/play.yml" <<P
- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gpulse
      vars:
        gpulse_install_method: deb
        gpulse_deb_path: /srv/t/gpulse.deb
        gpulse_service_manager: none
        gpulse_reload_command: "sh -c 'test ! -s /run/gpulse-test.pid || kill -HUP \$(cat /run/gpulse-test.pid)'"
        gpulse_extra_rule_files: [/srv/t/site.rules.yml]
        gpulse_external_labels: {cluster: test}
        gpulse_profiling_enabled: false
        gpulse_bench_enabled: false
        gpulse_listen_port: "{{ port_var | default($port) }}"
P

cat >"$WORK/inroot.sh" <<'SH'
set -euo pipefail
ROOT=$1 W=$2 PORT=$3
pid=""
trap '[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true' EXIT
mount -t overlay overlay -o lowerdir=/,upperdir="$W/upper",workdir="$W/ovl" "$ROOT"
mount -t proc proc "$ROOT/proc"
mount --rbind /dev "$ROOT/dev"
mount -t tmpfs tmpfs "$ROOT/run"
mount -t tmpfs tmpfs "$ROOT/tmp"
bad() { echo "FAIL: $*" >&2; exit 1; }
rt() { chroot "$ROOT" "$@"; }
rt dpkg-query -W gpulse >/dev/null 2>&1 && rt dpkg --purge gpulse >/dev/null
play() { # LOG EXTRA-ARGS... : one run; its recap line to LOG.recap
	local log=$1
	shift
	local rc=0
	# ansible-playbook runs without libfaketime (the shifted-clock stages
	# preload it): under it ansible's worker processes die silently. The
	# gpulsed this test starts keeps it.
	chroot "$ROOT" env -u LD_PRELOAD HOME=/root ANSIBLE_NOCOLOR=1 ANSIBLE_ROLES_PATH=/srv/t/roles \
		ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3 ANSIBLE_LOCALHOST_WARNING=0 \
		ANSIBLE_INVENTORY_UNPARSED_WARNING=0 DEBIAN_FRONTEND=noninteractive \
		ansible-playbook -i localhost, /srv/t/play.yml "$@" >"$W/$log" 2>&1 || rc=$?
	grep -E '^localhost +:' "$W/$log" >"$W/$log.recap" || true
	return $rc
}
changed() { sed -n 's/.* changed=\([0-9]*\) .*/\1/p' "$W/$1.recap"; }

# 1: converges (installs, configures).
play run1.log || bad "first run failed: $(tail -40 "$W/run1.log")"
[ "$(changed run1.log)" -gt 0 ] || bad "first run changed nothing: $(cat "$W/run1.log.recap")"
rt dpkg-query -W -f '${db:Status-Status}' gpulse | grep -qx installed || bad "gpulse not installed"
CFG="$ROOT/etc/gpulse/gpulse.yml"
grep -q "^listen: 127.0.0.1:$PORT\$" "$CFG" || bad "listen not in the config: $(cat "$CFG")"
grep -q 'cluster: test' "$CFG" || bad "external_labels not in the config"
grep -q -- '- /etc/gpulse/rules/site.rules.yml' "$CFG" || bad "rule file not configured: $(cat "$CFG")"
grep -q -- '- /usr/share/gpulse/rules/gpulse.rules.yml' "$CFG" || bad "rule pack not configured"
cmp -s "$W/upper/srv/t/site.rules.yml" "$ROOT/etc/gpulse/rules/site.rules.yml" || bad "rule file not copied"

# The stand-in for the unit: gpulsed as gpulse on the written config.
install -d -o "$(rt id -u gpulse)" -g "$(rt id -g gpulse)" "$ROOT/run/gpulse"
chroot "$ROOT" setpriv --reuid=gpulse --regid=gpulse --init-groups /usr/bin/gpulsed \
	--config /etc/gpulse/gpulse.yml 2>"$W/gpulsed.log" &
pid=$!
echo "$pid" >"$ROOT/run/gpulse-test.pid"
up=""
for _ in $(seq 1 150); do
	curl -sf --max-time 5 "http://127.0.0.1:$PORT/metrics" >"$W/m0" && { up=1; break; }
	kill -0 "$pid" 2>/dev/null || bad "gpulsed exited: $(cat "$W/gpulsed.log")"
	sleep 0.1
done
[ -n "$up" ] || bad "gpulsed on the role's config does not serve: $(cat "$W/gpulsed.log")"
rules=$(curl -sf "http://127.0.0.1:$PORT/api/v1/rules") || bad "no /api/v1/rules"
grep -q SiteGPUHot <<<"$rules" || bad "the copied rule file is not loaded"
reloads() {
	curl -sf --max-time 5 "http://127.0.0.1:$PORT/metrics" |
		sed -n 's/^gpulse_config_reloads_total{result="success"} \([0-9]*\)$/\1/p'
}
[ "$(reloads)" = 0 ] || bad "reloads before any change: $(reloads)"

# 2: idempotent, and no handler runs.
play run2.log || bad "second run failed: $(tail -40 "$W/run2.log")"
[ "$(changed run2.log)" = 0 ] || bad "second run changed: $(grep -B2 'changed:' "$W/run2.log" | head -20)"
sleep 0.5
[ "$(reloads)" = 0 ] || bad "a run without changes reloaded gpulsed"

# 3: a changed variable: the config is rewritten and gpulsed reloaded.
play run3.log -e '{"gpulse_external_labels": {"cluster": "test2"}}' ||
	bad "third run failed: $(tail -40 "$W/run3.log")"
[ "$(changed run3.log)" -gt 0 ] || bad "a changed variable changed nothing"
grep -q 'cluster: test2' "$CFG" || bad "the new label is not in the config"
grep -q 'RUNNING HANDLER \[gpulse : reload gpulsed (no systemd)\]' "$W/run3.log" || bad "no reload handler ran"
ok=""
for _ in $(seq 1 100); do [ "$(reloads)" = 1 ] && { ok=1; break; }; sleep 0.1; done
[ -n "$ok" ] || bad "gpulsed did not reload: reloads=$(reloads); $(tail -5 "$W/gpulsed.log")"

# Refused before anything runs: a port that is not an integer, one out of range.
cp "$CFG" "$W/cfg.before"
play bad1.log -e port_var=abc && bad "a non-integer port was accepted"
grep -q "gpulse_listen_port" "$W/bad1.log" && grep -qi "int" "$W/bad1.log" ||
	bad "the refusal does not name gpulse_listen_port: $(tail -20 "$W/bad1.log")"
grep -q "Validation of arguments failed" "$W/bad1.log" || bad "not the argument spec's refusal: $(tail -20 "$W/bad1.log")"
play bad2.log -e port_var=70000 && bad "port 70000 was accepted"
grep -q "gpulse_listen_port must be 1..65535 (got 70000)" "$W/bad2.log" ||
	bad "port out of range: $(tail -20 "$W/bad2.log")"
# A key gpulsed refuses: the validation names the file's line; the
# running config stays.
play bad3.log -e '{"gpulse_config_overrides": {"sampling": {"fast": "10x"}}}' && bad "a bad duration was accepted"
grep -Eq 'source:[0-9]+:[0-9]+: sampling.fast: bad duration' "$W/bad3.log" ||
	bad "the validation does not name the line: $(grep -i 'fatal\|msg' "$W/bad3.log" | head)"
cmp -s "$CFG" "$W/cfg.before" || bad "a refused run changed the config"

# The token: written root:gpulse 0640, named in the config, never logged.
play run4.log -e gpulse_auth_token=s3cret-test-token || bad "token run failed: $(tail -30 "$W/run4.log")"
[ "$(rt stat -c %U:%G:%a /etc/gpulse/token)" = root:gpulse:640 ] || bad "token file: $(rt stat -c %U:%G:%a /etc/gpulse/token)"
[ "$(cat "$ROOT/etc/gpulse/token")" = s3cret-test-token ] || bad "token content"
grep -q '^  auth_token_file: /etc/gpulse/token$' "$CFG" || bad "auth_token_file not in the config: $(cat "$CFG")"
! grep -q s3cret-test-token "$W/run4.log" || bad "the token was logged"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" = 0 ] || bad "gpulsed exited $rc"
echo "runs: first changed=$(changed run1.log), second changed=$(changed run2.log), third changed=$(changed run3.log)"
SH
unshare -m --propagation private bash "$WORK/inroot.sh" "$WORK/root" "$WORK" "$port" \
	>"$WORK/inroot.log" 2>&1 || fail "in the throw-away root: $(cat "$WORK/inroot.log")"
cat "$WORK/inroot.log"
echo ok
