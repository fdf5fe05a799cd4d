#!/bin/sh
# /metrics byte for byte against prom.c at an earlier revision (default
# main), on the inputs of bench/prom_compare.c: for a change that must not
# change the exposition. Needs a configured build (default build/) whose
# libraries are built.
#   bench/prom_compare.sh [REV] [BUILD_DIR]
set -eu
rev=${1:-main}
build=${2:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The old prom.c with the headers of its own revision (the self-stats
# hooks' types may differ; the structs it reads must not).
mkdir "$tmp/old"
git -C "$src" archive "$rev" src | tar -x -C "$tmp/old"
cp "$tmp/old/src/export/prom.c" "$tmp/prom_old.c"
# The old prom.c gets the version the build gave the new one.
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
cflags="-O2 -std=gnu11 -D_GNU_SOURCE -DGPULSE_VERSION=\"$version\" -I$src/src -I$build/generated"
ren="-Dprom_render=old_prom_render -Dprom_format_double=old_prom_format_double
 -Dprom_render_split=old_prom_render_split -Dmetric_families=old_metric_families
 -Dprom_wants_openmetrics=old_prom_wants_openmetrics
 -Dprom_content_type_text=old_prom_content_type_text
 -Dprom_content_type_openmetrics=old_prom_content_type_openmetrics"
cc ${cflags%% -I*} -I"$tmp/old/src" -I"$build/generated" $ren -c "$tmp/prom_old.c" -o "$tmp/prom_old.o"
cc $cflags -c "$src/bench/prom_compare.c" -o "$tmp/cmp.o"
cc "$tmp/cmp.o" "$tmp/prom_old.o" -o "$tmp/prom_compare" \
  -Wl,--start-group "$build"/libgpulse_*.a -Wl,--end-group \
  -ldl -lm -lpthread -lpcre2-8 -ljansson -lprotobuf-c -lnghttp2 -lsqlite3 -lz -lcurl
"$tmp/prom_compare"
