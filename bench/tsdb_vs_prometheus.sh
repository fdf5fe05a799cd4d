#!/usr/bin/env bash
# Bytes per sample on disk: gpulse's store against Prometheus's own TSDB
# on the same samples (the real H200 recording, 22 columns as series
# gpulse_gpu_<column>{gpu="0"}), plus the store's ingest rate into the
# head on one core. Usage: bench/tsdb_vs_prometheus.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CSV=${GPULSE_RECORDING:-$SRC/data/recordings/h200-phases-10hz.csv}
BENCH="$BUILD/bench/bench_tsdb"
WORK=$(mktemp -d /tmp/gpulse-tsdb-vs-prom.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
command -v promtool >/dev/null || { echo "promtool not found (Debian package prometheus)" >&2; exit 1; }

# OpenMetrics text: one family per column, samples in time order, seconds
# with millisecond precision, values exactly as in the CSV.
python3 - "$CSV" "$WORK/samples.om" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, rows = rows[0], rows[1:]
with open(sys.argv[2], "w") as out:
    for c, name in enumerate(head):
        if c == 0:
            continue
        fam = "gpulse_gpu_" + name
        out.write(f"# TYPE {fam} gauge\n")
        for r in rows:
            t_ms = round(float(r[0]) * 1000)
            out.write(f'{fam}{{gpu="0"}} {r[c]} {t_ms // 1000}.{t_ms % 1000:03d}\n')
    out.write("# EOF\n")
PY
samples=$(grep -vc '^#' "$WORK/samples.om")
promtool tsdb create-blocks-from openmetrics "$WORK/samples.om" "$WORK/prom" >"$WORK/promtool.log" 2>&1 ||
	{ cat "$WORK/promtool.log" >&2; exit 1; }
prom_bytes=$(find "$WORK/prom" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
prom_chunks=$(find "$WORK/prom" -path '*/chunks/*' -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')

out=$("$BENCH" size "$CSV" "$WORK/gpulse.db")
out10=$("$BENCH" size "$CSV" "$WORK/gpulse1s.db" 10)
ing=$("$BENCH" ingest 20000000 1100)
ingr=$("$BENCH" ingest 20000000 1100 random)
echo "$out"
echo "$out10"
echo "$ing"
echo "$ingr"
g_file=$(sed -n 's/.*; file \([0-9]*\) bytes.*/\1/p' <<<"$out")
g_file10=$(sed -n 's/.*; file \([0-9]*\) bytes.*/\1/p' <<<"$out10")
g_payload=$(sed -n 's/.*chunk payload \([0-9]*\) bytes.*/\1/p' <<<"$out")
g_marg=$(sed -n 's/.*file less empty store \([0-9.]*\) bytes.*/\1/p' <<<"$out")
rate=$(sed -n 's/.*: \([0-9.]*\) M samples\/s.*/\1/p' <<<"$ing")
rater=$(sed -n 's/.*: \([0-9.]*\) M samples\/s.*/\1/p' <<<"$ingr")
awk -v n="$samples" -v pb="$prom_bytes" -v pc="$prom_chunks" -v gf="$g_file" -v gf10="$g_file10" \
    -v gp="$g_payload" -v gm="$g_marg" -v rate="$rate" -v rater="$rater" 'BEGIN {
	a = pb / n
	printf "\nsamples: %d\n\n", n
	printf "| store | bytes | bytes/sample | vs anchor |\n|---|---|---|---|\n"
	printf "| Prometheus TSDB block, all files (anchor) | %d | %.3f | 1.00 |\n", pb, a
	printf "| Prometheus TSDB block, chunks only | %d | %.3f | %.2f |\n", pc, pc / n, pc / n / a
	printf "| gpulse store, SQLite file (one flush) | %d | %.3f | %.2f |\n", gf, gf / n, gf / n / a
	printf "| gpulse store, SQLite file (flush every 1 s of data) | %d | %.3f | %.2f |\n", gf10, gf10 / n, gf10 / n / a
	printf "| gpulse store, SQLite file less an empty store | %d | %.3f | %.2f |\n", gm * n, gm, gm / a
	printf "| gpulse store, chunk payload only | %d | %.3f | %.2f |\n", gp, gp / n, gp / n / a
	printf "\ningest into the head, one core: %s M samples/s (recording values), %s M samples/s (random doubles)\n", rate, rater
}'
