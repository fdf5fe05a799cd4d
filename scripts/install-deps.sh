#!/usr/bin/env bash
# Install the Debian packages gpulse needs to build and test, only those
# missing. Runs as root (CI) or through sudo.
#
# Build: a C compiler, CMake, pkg-config and the libraries CMakeLists.txt
# asks pkg-config for (libcrypt-dev: bcrypt for HTTP Basic auth;
# libgnutls28-dev: its cache's HMAC; libpcre2-dev: the regular expressions
# of matchers, label_replace and templates, in RE2's dialect, src/common/regex.c). `make fuzz`: clang and its sanitizer runtimes
# (libclang-rt-dev follows the default clang of the release). `make test`
# (scripts/test.sh and the tests): cmocka; promtool (package prometheus),
# prometheus and prometheus-alertmanager; curl and python3 (standard
# library only) in the integration tests; sqlite3; openssl (test_http
# makes a certificate to test TLS); procps (pgrep in test_profiling);
# libfaketime (the clock+400d and clock-400d stages); valgrind
# (test_valgrind runs gpulsed under memcheck); chromium (the web page
# tests, driven by playwright-core from the npm registry, pinned in
# tests/browser/package-lock.json and installed there with `npm ci`; it
# needs Node.js 20 or later, which this script checks but does not
# install); tmux (the terminal UI's tests); clang-format (14, lint/format:
# scripts/format.sh). wrk: bench/.
# libncurses-dev: `gpulse top` (ncursesw, the wide-character build).
# Remote write (src/remote/): libprotobuf-c-dev and protobuf-c-compiler
# (protoc-c generates the WriteRequest code at build time), libsnappy-dev
# (the snappy block format of the request bodies).
# libsystemd-dev: gpulsed's readiness and watchdog under systemd
# (sd_notify, src/daemon/sdnotify.c); help2man: the man pages, generated
# from each program's --help at build time. Deployment (docs/DEPLOY.md)
# and its tests: debhelper, dpkg-dev and lintian (`make deb`,
# test_deb_package); systemd (systemd-analyze, test_systemd_unit); man-db,
# bash-completion and zsh (test_completion_manpages); ansible-core
# and python3-apt, which its apt module needs (ansible-playbook,
# test_ansible_role); python3-jsonschema and
# python3-yaml (test_kubernetes_manifests); kubectl for `kubectl kustomize`,
# from kubernetes-client unless a kubectl is already installed (one from
# another source holds /usr/bin/kubectl, and any kubectl with kustomize
# will do).
# libnghttp2-dev, libprotobuf-c-dev, protobuf-c-compiler: the client of the
# kubelet's pod-resources API (gRPC over HTTP/2, src/attrib/podres.c);
# python3-grpcio: the stand-in pod-resources server of test_attribution.
# libgpulse-inject.so and the tests of it need CUPTI's headers, which come
# with the CUDA toolkit, not from Debian main: without them they are not
# built, and say so.
#
# --run: only what `make run` needs, the daemon and the CLI (the build
# tools and libraries above, help2man); no test, fuzz or deployment tools.
set -euo pipefail
run_only=0
[ "${1:-}" = --run ] && run_only=1
run_pkgs=(build-essential cmake pkg-config help2man
      libmicrohttpd-dev libyaml-dev libcurl4-openssl-dev libjansson-dev libcrypt-dev libgnutls28-dev libpcre2-dev
      libncurses-dev libprotobuf-c-dev protobuf-c-compiler libsnappy-dev libnghttp2-dev
      libsqlite3-dev zlib1g-dev libsystemd-dev)
pkgs=(build-essential cmake pkg-config clang libclang-rt-dev
      libmicrohttpd-dev libyaml-dev libcurl4-openssl-dev libjansson-dev libcrypt-dev libgnutls28-dev libpcre2-dev
      libncurses-dev libprotobuf-c-dev protobuf-c-compiler libsnappy-dev libnghttp2-dev python3-grpcio
      libcmocka-dev libsqlite3-dev zlib1g-dev sqlite3 prometheus prometheus-alertmanager curl python3 wrk
      libfaketime openssl procps valgrind chromium tmux clang-format
      libsystemd-dev help2man debhelper dpkg-dev lintian systemd man-db bash-completion zsh
      ansible-core python3-apt python3-jsonschema python3-yaml)
command -v kubectl >/dev/null || pkgs+=(kubernetes-client)
[ $run_only = 1 ] && pkgs=("${run_pkgs[@]}")
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "install-deps: installing ${missing[*]}"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ $run_only = 1 ] && exit 0

# playwright-core for the web page tests, at the version the lock file pins.
browser_dir="$(cd "$(dirname "$0")/../tests/browser" && pwd)"
want=$(sed -n 's/.*"playwright-core": "\(.*\)".*/\1/p' "$browser_dir/package.json")
have=$(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$browser_dir/node_modules/playwright-core/package.json" 2>/dev/null | head -1 || true)
if [ "$have" != "$want" ]; then
	node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
	if [ "$node_major" -lt 20 ]; then
		echo "install-deps: the web page tests need Node.js 20 or later (found: $(node --version 2>/dev/null || echo none))" >&2
		exit 1
	fi
	echo "install-deps: installing playwright-core $want in tests/browser (npm ci)"
	npm ci --prefix "$browser_dir" --no-audit --no-fund --loglevel=error >/dev/null
fi
