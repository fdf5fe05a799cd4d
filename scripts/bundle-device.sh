#!/usr/bin/env bash
# Build gpulse here (Release) and gather what the GPU machine needs into
# .device/: the programs, the fake-free build, and the shared libraries
# they link that the GPU machine's image lacks (libmicrohttpd, libyaml,
# ...; glibc and the NVIDIA driver stay theirs). Then run there:
#   scripts/gpu-check.sh     (with .device carried)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-device -j "$(nproc)" --target gpulsed gpulse bench_nvml_costs bench_procutil_probe >/dev/null
# libgpulse-inject.so (needs CUPTI's headers here; links only libc).
cmake --build build-device -j "$(nproc)" --target gpulse_inject >/dev/null 2>&1 ||
	echo "bundle: no libgpulse-inject.so (CUPTI headers not found here)" >&2
rm -rf .device && mkdir -p .device/lib
cp build-device/gpulsed build-device/gpulse build-device/bench/bench_nvml_costs \
	build-device/bench/bench_procutil_probe .device/
[ -f build-device/src/inject/libgpulse-inject.so ] && cp build-device/src/inject/libgpulse-inject.so .device/
for bin in .device/gpulsed .device/gpulse; do
	ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
		case "$(basename "$lib")" in
		libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libnvidia*) ;;
		*) cp -Ln "$lib" .device/lib/ ;;
		esac
	done
done
# Wrappers point only our programs at the bundled libraries, so Python and
# PyTorch on the GPU machine keep their own.
mkdir -p .device/bin
for prog in gpulsed gpulse; do
	printf '#!/bin/sh\nd=$(cd "$(dirname "$0")/.." && pwd)\nLD_LIBRARY_PATH="$d/lib" exec "$d/%s" "$@"\n' "$prog" >.device/bin/$prog
	chmod +x .device/bin/$prog
done
du -sh .device
