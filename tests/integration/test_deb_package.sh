# The Debian package: built with debhelper from the programs of this
# build (scripts/build-deb.sh --prebuilt: a CI test cannot afford a second
# full build; `make deb` builds from scratch with Debian's flags), lintian
# clean (errors and warnings fail), holding what a host needs (a man page
# for gpulsed and every gpulse command, completion, the unit, rule pack,
# the config as a conffile). Then, in a throw-away root (an overlay of
# this machine's own root in a private mount namespace, chrooted into:
# the host is not touched), install, edit the conffile, upgrade to a newer
# version (the edit is kept), start the installed gpulsed as the package's
# user on the bundled replay and read /metrics, and purge (nothing of the
# package is left: files, conffiles, the store, the user, the unit's
# enablement).
#
# What the throw-away root does not cover: systemd itself (no PID 1 here;
# the unit is checked by test_systemd_unit.sh) and a machine without
# this one's packages (the overlay has the build's libraries installed,
# so the package's Depends are met by construction; dpkg still checks
# them).
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}" "${GPULSE_SOURCE_DIR:?}"

for tool in dpkg-buildpackage dh lintian unshare; do
	command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh)"
done
[ "$(id -u)" = 0 ] || skip_or_fail "the throw-away root needs root (mount, chroot)"

# Two versions: the changelog's, and a newer one to upgrade to.
v1=$(dpkg-parsechangelog -l "$GPULSE_SOURCE_DIR/debian/changelog" -S Version)
v2="$v1+upgrade1"
# The package's version is the project's (CMakeLists.txt).
proj=$(sed -n 's/^project(gpulse VERSION \([0-9.]*\).*/\1/p' "$GPULSE_SOURCE_DIR/CMakeLists.txt")
[ "$v1" = "$proj" ] || fail "debian/changelog says $v1, CMakeLists.txt $proj"
"$GPULSE_SOURCE_DIR/scripts/build-deb.sh" --prebuilt "$GPULSE_BUILD_DIR" --out "$WORK/v1" \
	>"$WORK/build1.log" 2>&1 || fail "build-deb: $(cat "$WORK/build1.log")"
"$GPULSE_SOURCE_DIR/scripts/build-deb.sh" --prebuilt "$GPULSE_BUILD_DIR" --out "$WORK/v2" \
	--version "$v2" >"$WORK/build2.log" 2>&1 || fail "build-deb --version: $(cat "$WORK/build2.log")"
deb1=$(ls "$WORK"/v1/gpulse_"$v1"_*.deb)
deb2=$(ls "$WORK"/v2/gpulse_"$v2"_*.deb)

# lintian: no error, no warning (overrides, each with its reason, live in
# debian/gpulse.lintian-overrides).
lintian --fail-on error,warning --tag-display-limit 0 "$deb1" >"$WORK/lintian.log" 2>&1 ||
	fail "lintian: $(cat "$WORK/lintian.log")"

# What is in it.
dpkg-deb -c "$deb1" | awk '{print $6}' | sed 's|^\./|/|' >"$WORK/contents"
want=(/usr/bin/gpulsed /usr/bin/gpulse /lib/systemd/system/gpulsed.service /etc/gpulse/gpulse.yml
	/usr/share/gpulse/rules/gpulse.rules.yml /usr/share/gpulse/rules/dcgm-compat.rules.yml
	/usr/share/man/man8/gpulsed.8.gz
	/usr/share/man/man1/gpulse.1.gz /usr/share/bash-completion/completions/gpulse
	/usr/share/zsh/vendor-completions/_gpulse /usr/share/doc/gpulse/copyright)
# A man page for every command `gpulse --help` lists.
cmds=$("$GPULSE" --help | awk '/^Commands:/ {on=1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}')
[ -n "$cmds" ] || fail "no commands in gpulse --help"
for c in $cmds; do want+=("/usr/share/man/man1/gpulse-$c.1.gz"); done
for f in "${want[@]}"; do
	grep -qx -- "$f" "$WORK/contents" || fail "the package lacks $f"
done
if [ -f "$GPULSE_BUILD_DIR/src/inject/libgpulse-inject.so" ]; then
	grep -qx /usr/lib/gpulse/libgpulse-inject.so "$WORK/contents" || fail "the package lacks the injection library"
fi
dpkg-deb -e "$deb1" "$WORK/ctl"
grep -qx /etc/gpulse/gpulse.yml "$WORK/ctl/conffiles" || fail "gpulse.yml is not a conffile"
dpkg-deb --fsys-tarfile "$deb1" | tar -xOf - ./lib/systemd/system/gpulsed.service >"$WORK/unit"
grep -q '^ExecStart=/usr/bin/gpulsed ' "$WORK/unit" || fail "the packaged unit does not start /usr/bin/gpulsed"

# The throw-away root.
ROOT="$WORK/root"
mkdir -p "$WORK/upper" "$WORK/ovl" "$ROOT"
cat >"$WORK/inroot.sh" <<'SH'
# Runs in the private mount namespace: $1 the root, $2 work dir, $3 v1 .deb, $4 v2 .deb.
set -euo pipefail
ROOT=$1 W=$2 DEB1=$3 DEB2=$4 V2=$5 REC_IN=/usr/share/gpulse/recordings/h200-phases-10hz.csv
pid=""
# The installed gpulsed must not outlive the namespace's test.
trap '[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true' EXIT
mount -t overlay overlay -o lowerdir=/,upperdir="$W/upper",workdir="$W/ovl" "$ROOT"
mount -t proc proc "$ROOT/proc"
mount --rbind /dev "$ROOT/dev"
mount -t tmpfs tmpfs "$ROOT/run"   # no systemd here: postinst must not try to start it
mount -t tmpfs tmpfs "$ROOT/tmp"
rt() { chroot "$ROOT" "$@"; }
bad() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$ROOT/pkgs"
cp "$DEB1" "$DEB2" "$ROOT/pkgs/"
# A host that already had gpulse would hide what install and purge do.
rt dpkg-query -W gpulse >/dev/null 2>&1 && rt dpkg --purge gpulse >/dev/null
rt getent passwd gpulse >/dev/null && bad "a gpulse user exists before the install"

export DEBIAN_FRONTEND=noninteractive
# man-db's index rebuild on every install is most of dpkg's time here and
# tests nothing of ours: off in the throw-away root.
echo "man-db man-db/auto-update boolean false" | rt debconf-set-selections
rt dpkg -i "/pkgs/${DEB1##*/}" >"$W/install1.log" 2>&1 || bad "dpkg -i: $(cat "$W/install1.log")"
rt getent passwd gpulse >/dev/null || bad "no gpulse user after install"
rt id -nG gpulse | grep -qw video || bad "gpulse is not in the video group: $(rt id gpulse)"
[ "$(rt stat -c %U:%a /var/lib/gpulse)" = gpulse:750 ] || bad "/var/lib/gpulse: $(rt stat -c %U:%a /var/lib/gpulse)"
[ -L "$ROOT/etc/systemd/system/multi-user.target.wants/gpulsed.service" ] || bad "gpulsed.service not enabled"
[ -f "$ROOT/usr/share/man/man1/gpulse-status.1.gz" ] || bad "no man page installed"

# A local edit of the conffile, then an upgrade: the edit stays.
sed -i 's/^log_level: info$/log_level: info  # edited on this host/' "$ROOT/etc/gpulse/gpulse.yml"
grep -q 'edited on this host' "$ROOT/etc/gpulse/gpulse.yml" || bad "the edit did not apply"
rt dpkg -i "/pkgs/${DEB2##*/}" >"$W/install2.log" 2>&1 || bad "upgrade: $(cat "$W/install2.log")"
[ "$(rt dpkg-query -W -f '${Version}' gpulse)" = "$V2" ] || bad "not upgraded: $(rt dpkg-query -W gpulse)"
grep -q 'edited on this host' "$ROOT/etc/gpulse/gpulse.yml" || bad "the upgrade lost the conffile edit"
[ ! -e "$ROOT/etc/gpulse/gpulse.yml.dpkg-dist" ] || bad "the upgrade asked about an unchanged conffile"

# Start the installed gpulsed as the unit would (its user, config,
# store, runtime directory), on the installed replay: no driver here.
install -d -o "$(rt id -u gpulse)" -g "$(rt id -g gpulse)" -m 0755 "$ROOT/run/gpulse"
chroot "$ROOT" setpriv --reuid=gpulse --regid=gpulse --init-groups /usr/bin/gpulsed --config /etc/gpulse/gpulse.yml \
	--storage-path /var/lib/gpulse/gpulse.db --listen 127.0.0.1:0 --replay "$REC_IN" --replay-speed 10 \
	2>"$W/gpulsed.log" &
pid=$!
port=""
for _ in $(seq 1 150); do
	port=$(sed -n 's/.*serving http:\/\/.* port \([0-9]*\) .*/\1/p' "$W/gpulsed.log" | head -n1)
	[ -n "$port" ] && break
	kill -0 "$pid" 2>/dev/null || bad "installed gpulsed exited: $(cat "$W/gpulsed.log")"
	sleep 0.1
done
[ -n "$port" ] || bad "installed gpulsed did not serve: $(cat "$W/gpulsed.log")"
ok=""
for _ in $(seq 1 150); do
	if curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" >"$W/metrics.txt" &&
		grep -q '^gpulse_gpu_up{.*uuid="REPLAY-.*} 1$' "$W/metrics.txt"; then ok=1; break; fi
	sleep 0.1
done
[ -n "$ok" ] || bad "no replayed GPU on /metrics: $(head -c 2000 "$W/metrics.txt" 2>/dev/null)"
# The packaged configuration runs the shipped rule pack.
curl -sf --max-time 5 "http://127.0.0.1:$port/api/v1/rules" >"$W/rules.json" || bad "/api/v1/rules"
python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["data"]["groups"]; f={x["file"] for x in g}; assert f == {"/usr/share/gpulse/rules/gpulse.rules.yml"} and sum(len(x["rules"]) for x in g) > 10, f' \
	"$W/rules.json" || bad "the installed gpulsed does not run the rule pack: $(head -c 1000 "$W/rules.json")"
# The DCGM-compatible rules load beside it.
rt /usr/bin/gpulse rules check /usr/share/gpulse/rules/dcgm-compat.rules.yml >"$W/dcgm-check.log" 2>&1 ||
	bad "gpulse rules check dcgm-compat.rules.yml: $(cat "$W/dcgm-check.log")"
[ -f "$ROOT/var/lib/gpulse/gpulse.db" ] || bad "no store in /var/lib/gpulse"
[ "$(rt stat -c %U /var/lib/gpulse/gpulse.db)" = gpulse ] || bad "the store is not gpulse's"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" = 0 ] || bad "gpulsed exited $rc on SIGTERM"

# Purge: nothing of the package stays.
rt dpkg --purge gpulse >"$W/purge.log" 2>&1 || bad "purge: $(cat "$W/purge.log")"
rt dpkg-query -W -f '${db:Status-Status}' gpulse 2>/dev/null | grep -qv not-installed &&
	bad "still known to dpkg: $(rt dpkg-query -W -f '${db:Status-Status}' gpulse)"
while read -r f; do
	[ -z "$f" ] || [ -d "$ROOT$f" ] || [ ! -e "$ROOT$f" ] || bad "left after purge: $f"
done <"$W/contents"
for f in /etc/gpulse /var/lib/gpulse /etc/systemd/system/multi-user.target.wants/gpulsed.service; do
	[ ! -e "$ROOT$f" ] || bad "left after purge: $f"
done
rt getent passwd gpulse >/dev/null && bad "the gpulse user is left after purge"
rt getent group gpulse >/dev/null && bad "the gpulse group is left after purge"
echo "throw-away root: install, upgrade, serve, purge ok"
SH
unshare -m --propagation private bash "$WORK/inroot.sh" "$ROOT" "$WORK" "$deb1" "$deb2" "$v2" \
	>"$WORK/inroot.log" 2>&1 || fail "in the throw-away root: $(cat "$WORK/inroot.log")"
cat "$WORK/inroot.log"
# The host is untouched.
! getent passwd gpulse >/dev/null || dpkg-query -W gpulse >/dev/null 2>&1 ||
	fail "a gpulse user appeared on the host"
echo ok
