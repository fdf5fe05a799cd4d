#!/usr/bin/env bash
# Install the Debian packages gpulse needs to build and test, only those
# missing. Runs as root (CI) or through sudo.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev
      libmicrohttpd-dev libyaml-dev libcurl4-openssl-dev libjansson-dev
      libcmocka-dev libsqlite3-dev sqlite3 prometheus prometheus-alertmanager curl python3 wrk
      libfaketime)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
