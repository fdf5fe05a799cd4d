#!/usr/bin/env bash
# By hand, as root (not in `make test`: it downloads a Debian base system,
# about 100 MB, from the Debian mirror each time): the built package on a
# fresh Debian root. debootstrap makes a minimal bookworm root; apt installs
# the .deb there with the dependencies it declares, from the mirror; the
# packaged gpulsed then runs as the package's gpulse user on the packaged
# replay recording (no NVIDIA driver there) and must answer /metrics.
# test_deb_package covers install, upgrade and purge in CI, on an overlay
# of the CI machine's own root, where the dependencies are already there;
# this covers what that cannot: that the declared dependencies suffice.
#   scripts/deb-fresh-root.sh PATH/TO/gpulse_VERSION_amd64.deb [MIRROR]
set -euo pipefail
deb=$(realpath "${1:?usage: $0 PATH/TO/gpulse.deb [MIRROR]}")
mirror=${2:-http://deb.debian.org/debian}
[ "$(id -u)" = 0 ] || { echo "deb-fresh-root: run as root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
root=$(mktemp -d /tmp/gpulse-fresh.XXXXXX)
chmod 755 "$root" # mktemp makes it 0700: the gpulse user could not reach /bin/sh
port=19555
cleanup() {
	pkill -f "gpulsed --listen 127.0.0.1:$port" 2>/dev/null || true
	rm -rf "$root"
}
trap cleanup EXIT
echo "deb-fresh-root: debootstrap --variant=minbase bookworm into $root"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
	{ tail -n 5 "$root.debootstrap.log" >&2; exit 1; }
cp "$deb" "$root/tmp/gpulse.deb"
cp /etc/resolv.conf "$root/etc/resolv.conf"
unshare -m bash -c '
set -e
root=$1 port=$2
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
chroot "$root" /bin/bash -c "
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq /tmp/gpulse.deb >/tmp/install.log 2>&1 || { tail -n 20 /tmp/install.log; exit 1; }
dpkg -s gpulse | grep -E \"^(Status|Version):\"
id gpulse
su -s /bin/sh gpulse -c \"/usr/bin/gpulsed --listen 127.0.0.1:$port --replay /usr/share/gpulse/recordings/h200-phases-10hz.csv >/tmp/gpulsed.log 2>&1 &\"
for i in \$(seq 1 50); do
	if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then break; fi
	sleep 0.2
done
sleep 2
exec 3<>/dev/tcp/127.0.0.1/$port
printf \"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n\" >&3
cat <&3 >/tmp/metrics.txt
head -n 1 /tmp/metrics.txt | grep -q \" 200 \" || { echo \"no 200 from /metrics:\"; head -n 5 /tmp/metrics.txt; cat /tmp/gpulsed.log; exit 1; }
grep -q \"^gpulse_gpu_utilization_ratio{\" /tmp/metrics.txt || { echo \"no GPU series on /metrics\"; exit 1; }
echo \"/metrics: HTTP 200, \$(grep -c ^gpulse_ /tmp/metrics.txt) gpulse_ samples\"
"
' _ "$root" "$port"
echo "deb-fresh-root: ok"
