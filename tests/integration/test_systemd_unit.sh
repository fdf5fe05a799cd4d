# deploy/systemd/gpulsed.service: `systemd-analyze security --offline`
# rates its exposure at most 2.5, `systemd-analyze verify` accepts it,
# it keeps what NVML and attribution need (the NVIDIA device nodes, MIG's
# nvidia-caps, /proc not hidden), runs as Type=notify with a watchdog under
# the gpulse user with its state directory, gpulsed accepts the
# command line it starts, and `cmake --install` installs it.
source "$(dirname "$0")/lib.sh"
UNIT="$GPULSE_SOURCE_DIR/deploy/systemd/gpulsed.service"
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (package systemd)"

systemd-analyze security --offline=yes --no-pager "$UNIT" >"$WORK/security.txt" 2>&1 ||
	fail "systemd-analyze security: $(cat "$WORK/security.txt")"
exposure=$(sed -n 's/.*Overall exposure level for gpulsed.service: \([0-9.]*\) .*/\1/p' "$WORK/security.txt")
[ -n "$exposure" ] || fail "no exposure level in: $(tail -5 "$WORK/security.txt")"
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 2.5 else 1)' "$exposure" ||
	fail "exposure $exposure > 2.5: $(grep '✗' "$WORK/security.txt")"
echo "exposure: $exposure"

# verify checks that ExecStart exists: point it at the built gpulsed.
sed "s|^ExecStart=/usr/bin/gpulsed|ExecStart=$GPULSED|" "$UNIT" >"$WORK/gpulsed.service"
systemd-analyze verify --man=no "$WORK/gpulsed.service" >"$WORK/verify.txt" 2>&1 ||
	fail "systemd-analyze verify: $(cat "$WORK/verify.txt")"
[ ! -s "$WORK/verify.txt" ] || fail "systemd-analyze verify complains: $(cat "$WORK/verify.txt")"

setting() { grep -qx -- "$1" "$UNIT" || fail "the unit lacks \"$1\""; }
setting 'Type=notify'
setting 'NotifyAccess=main'
grep -q '^WatchdogSec=[1-9]' "$UNIT" || fail "no WatchdogSec"
setting 'User=gpulse'
setting 'SupplementaryGroups=video'
setting 'StateDirectory=gpulse'
setting 'DevicePolicy=closed'
setting 'DeviceAllow=/dev/nvidiactl rw'
setting 'DeviceAllow=char-nvidia-frontend rw'
setting 'DeviceAllow=char-nvidia-caps r'
setting 'ExecReload=/bin/kill -HUP $MAINPID'
# Attribution reads other processes' /proc/PID; NVML reads /proc/driver.
! grep -Eq '^(ProtectProc=(invisible|noaccess|ptraceable)|ProcSubset=pid|PrivateDevices=yes)' "$UNIT" ||
	fail "the unit hides what NVML or attribution needs: $(grep -E '^(ProtectProc|ProcSubset|PrivateDevices)=' "$UNIT")"

# The command line it starts is one gpulsed accepts (with the shipped
# config in place of /etc/gpulse/gpulse.yml).
exec_line=$(sed -n 's/^ExecStart=\/usr\/bin\/gpulsed //p' "$UNIT")
read -r -a args <<<"${exec_line//\/etc\/gpulse\/gpulse.yml/$GPULSE_SOURCE_DIR/etc/gpulse.yml}"
args=("${args[@]//\/var\/lib\/gpulse/$WORK}")
"$GPULSED" "${args[@]}" --print-config >"$WORK/config.txt" 2>&1 ||
	fail "gpulsed refuses the unit's command line: $(cat "$WORK/config.txt")"
grep -q "$WORK/gpulse.db" "$WORK/config.txt" || fail "the unit's --storage-path did not take: $(cat "$WORK/config.txt")"
# cmake --install puts the unit where systemd reads it, with ExecStart
# at the prefix it installs to.
DESTDIR="$WORK/inst" cmake --install "$GPULSE_BUILD_DIR" --prefix /usr/local --component deploy \
	>"$WORK/install.txt" 2>&1 || fail "cmake --install: $(cat "$WORK/install.txt")"
inst="$WORK/inst/usr/local/lib/systemd/system/gpulsed.service"
[ -f "$inst" ] || fail "cmake --install did not install the unit: $(cat "$WORK/install.txt")"
grep -q '^ExecStart=/usr/local/bin/gpulsed --config /etc/gpulse/gpulse.yml ' "$inst" ||
	fail "installed unit's ExecStart: $(grep ExecStart= "$inst")"
[ -f "$WORK/inst/usr/local/share/man/man8/gpulsed.8" ] || fail "cmake --install did not install gpulsed(8)"
echo ok
