#!/usr/bin/env bash
# Install the Debian packages gpulse needs to build and test, only those
# missing. Runs as root (CI) or through sudo.
#
# Build: a C compiler, CMake, pkg-config and the libraries CMakeLists.txt
# asks pkg-config for (libcrypt-dev: bcrypt for HTTP Basic auth;
# libgnutls28-dev: its cache's HMAC). `make fuzz`: clang and its sanitizer runtimes
# (libclang-rt-dev follows the default clang of the release). `make test`
# (scripts/test.sh and the tests): cmocka; promtool (package prometheus),
# prometheus and prometheus-alertmanager; curl and python3 (standard
# library only) in the integration tests; sqlite3; openssl (test_http
# makes a certificate to test TLS); procps (pgrep in test_profiling);
# libfaketime (the clock+400d and clock-400d stages); valgrind
# (test_valgrind runs gpulsed under memcheck). wrk: bench/.
# libgpulse-inject.so and the tests of it need CUPTI's headers, which come
# with the CUDA toolkit, not from Debian main: without them they are not
# built, and say so.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang libclang-rt-dev
      libmicrohttpd-dev libyaml-dev libcurl4-openssl-dev libjansson-dev libcrypt-dev libgnutls28-dev
      libcmocka-dev libsqlite3-dev zlib1g-dev sqlite3 prometheus prometheus-alertmanager curl python3 wrk
      libfaketime openssl procps valgrind)
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
