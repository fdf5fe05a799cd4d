#!/usr/bin/env bash
# Build the Debian package (debian/, debhelper) from a copy of this tree,
# so dpkg-buildpackage's outputs, which it writes beside the source
# directory, stay under OUT. `make deb` runs it; the .deb lands in OUT
# (default build/deb).
#
# usage: scripts/build-deb.sh [--out DIR] [--prebuilt BUILD_DIR] [--version V]
#   --prebuilt BUILD_DIR  package an existing CMake build's programs
#                         (cmake --install) instead of building them
#                         (debian/rules, GPULSE_PREBUILT)
#   --version V           the package's version instead of debian/changelog's
#                         (a changelog entry is added to the copy; the
#                         upgrade test builds a newer one this way)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
out="$src/build/deb"
prebuilt=""
version=""
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--prebuilt) prebuilt="$(cd "$2" && pwd)"; shift 2 ;;
	--version) version=$2; shift 2 ;;
	*) echo "build-deb: unknown argument \"$1\" (see the usage at the top of $0)" >&2; exit 2 ;;
	esac
done
for tool in dpkg-buildpackage dh; do
	command -v "$tool" >/dev/null || {
		echo "build-deb: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
if [ -n "$prebuilt" ] && [ ! -x "$prebuilt/gpulsed" ]; then
	echo "build-deb: $prebuilt/gpulsed is not built (cmake --build $prebuilt first)" >&2
	exit 1
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# The tree without build directories, VCS data or node_modules.
mkdir "$stage/gpulse"
tar -C "$src" --exclude-vcs --exclude='./build*' --exclude='./tests/browser/node_modules' \
	--exclude='./.device' -cf - . | tar -C "$stage/gpulse" -xf -
if [ -n "$version" ]; then
	{
		printf 'gpulse (%s) unstable; urgency=medium\n\n  * Built by scripts/build-deb.sh --version.\n\n' "$version"
		printf ' -- %s  %s\n\n' "$(dpkg-parsechangelog -l "$src/debian/changelog" -S Maintainer)" \
			"$(date -R)"
		cat "$src/debian/changelog"
	} >"$stage/gpulse/debian/changelog"
fi
if [ -z "$prebuilt" ] && [ -d /usr/local/cuda/include ]; then
	echo "build-deb: building libgpulse-inject.so with CUPTI's headers from /usr/local/cuda"
fi
( cd "$stage/gpulse" && GPULSE_PREBUILT="$prebuilt" \
	dpkg-buildpackage -us -uc -b --no-sign -j"$(nproc)" ) >"$stage/build.log" 2>&1 || {
	echo "build-deb: dpkg-buildpackage failed; its log:" >&2
	tail -n 60 "$stage/build.log" >&2
	exit 1
}
if ! dpkg-deb -c "$stage"/gpulse_*.deb | grep 'usr/lib/gpulse/libgpulse-inject.so' >/dev/null; then
	echo "build-deb: libgpulse-inject.so left out (no CUPTI headers at build time: the CUDA toolkit's)"
fi
mv "$stage"/*.deb "$stage"/*.buildinfo "$stage"/*.changes "$out"/
ls "$out"/gpulse_*.deb
