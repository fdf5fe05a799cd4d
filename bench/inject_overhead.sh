#!/usr/bin/env bash
# Overhead of libgpulse-inject.so on the GPU machine: each workload runs
# plain, under gpulse at default settings (continuous, 0.5% budget),
# under gpulse full trace (GPULSE_MODE=full: every kernel traced, the
# naive always-on CUPTI trace), and under torch.profiler (PyTorch
# workloads), ROUNDS times interleaved, each a fresh process. A run
# reports the mean time per iteration of its steady state (after
# warm-up), so the windows of continuous mode count in it: runs must be
# several of the governor's periods (10 s) long to be fair to it, e.g.
# SECONDS=30. The table gives each configuration's median run as a ratio to
# the plain runs of the same call, and the memory gpulse added (max RSS
# minus plain's).
#   bench/inject_overhead.sh LIB.so INJECT_EMPTY_BIN OUTDIR [ROUNDS] [SECONDS]
# PIN=CPU runs every process on that CPU (taskset): single runs of one
# binary differed by up to 25% between processes on the H200, and pinning
# takes the choice of core out of that spread. The table gives each
# configuration's spread ((max - min) / median over its runs): a ratio is
# worth no more than the spreads of its two rows.
# WORKLOADS and CONFIGS (environment) choose a subset; config "once" is
# the library at a budget so small (1 ppm) that it traces one probe
# window at the start and then nothing: the cost of CUPTI's state after
# tracing has been on once; "skip-A+B" is default with
# GPULSE_INJECT_SKIP=A,B (which part costs what); "env-V=X+W=Y" is default
# with those variables set (e.g. env-GPULSE_BUDGET=2%+GPULSE_SAMPLE_EVERY=128:
# a fixed higher duty puts many windows in a short run). The empty loop's runs
# carry their per-round series and the dumps the windows' edges:
# bench/inject_windows.py lines them up.
set -u
LIB=$1 EMPTY=$2 OUTD=$3 ROUNDS=${4:-3} SECS=${5:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUTD"
RUNS=$OUTD/inject-overhead-runs.jsonl
: >"$RUNS"
run() { # workload config round
	local w=$1 c=$2 line rc dump="$OUTD/dump-$w-${2//[^A-Za-z0-9_-]/_}-$3.json"
	local -a env=(env -u CUDA_INJECTION64_PATH -u GPULSE_MODE -u GPULSE_INJECT_SKIP)
	local -a cmd
	case $c in
	default) env+=(CUDA_INJECTION64_PATH="$LIB" GPULSE_INJECT_DUMP="$dump") ;;
	full) env+=(CUDA_INJECTION64_PATH="$LIB" GPULSE_MODE=full GPULSE_INJECT_DUMP="$dump") ;;
	once) env+=(CUDA_INJECTION64_PATH="$LIB" GPULSE_BUDGET=1ppm GPULSE_INJECT_DUMP="$dump") ;;
	skip-*) env+=(CUDA_INJECTION64_PATH="$LIB" GPULSE_INJECT_SKIP="$(echo "${c#skip-}" | tr + ,)"
		      GPULSE_INJECT_DUMP="$dump") ;;
	env-*) local -a vars
	       IFS=+ read -r -a vars <<<"${c#env-}"
	       env+=(CUDA_INJECTION64_PATH="$LIB" GPULSE_INJECT_DUMP="$dump" "${vars[@]}") ;;
	esac
	if [ "$w" = empty ]; then
		# rounds of ~8 ms, fine enough to set those inside the
		# library's windows against those outside (inject_windows.py)
		reps=$((SECS * 125)); [ $reps -gt 1000 ] && reps=1000
		cmd=("$EMPTY" 2000 $reps)
	else
		cmd=(python3 "$HERE/inject_torch.py" "$w" --seconds "$SECS")
		[ "$c" = torchprof ] && cmd+=(--profiler)
	fi
	[ -n "${PIN:-}" ] && cmd=(taskset -c "$PIN" "${cmd[@]}")
	line=$(timeout 300 "${env[@]}" "${cmd[@]}" 2>>"$OUTD/inject-overhead-stderr.txt" | tail -n1)
	rc=$?
	[ -f "$dump" ] || dump=
	printf '{"workload":"%s","config":"%s","round":%d,"rc":%d,"dump":"%s","result":%s}\n' \
		"$w" "$c" "$3" "$rc" "$dump" "${line:-null}" >>"$RUNS"
}
for r in $(seq 1 "$ROUNDS"); do
	for w in ${WORKLOADS:-empty train infer matmul}; do
		for c in ${CONFIGS:-plain default full torchprof}; do
			[ "$w" = empty ] && [ "$c" = torchprof ] && continue
			run "$w" "$c" "$r"
		done
	done
done
python3 - "$RUNS" "$OUTD" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
res = {}
bad = []
for r in runs:
    if r["rc"] != 0 or not r["result"]:
        bad.append(f"{r['workload']}/{r['config']} rc={r['rc']}")
        continue
    res.setdefault((r["workload"], r["config"]), []).append(r["result"])
lines = ["workload  config            per-iter (median)   ratio to plain   spread   RSS added   checksum",
         "--------  ----------------  ------------------  ---------------  -------  ----------  --------"]
table = {}
for w in ["empty", "train", "infer", "matmul"]:
    plain = res.get((w, "plain"))
    if not plain:
        continue
    p = statistics.median(x["per_iter_ms"] for x in plain)
    prss = statistics.median(x["maxrss_kb"] for x in plain)
    pck = plain[0]["checksum"]
    configs = list(dict.fromkeys(r["config"] for r in runs))
    for c in configs:
        xs = res.get((w, c))
        if not xs:
            continue
        m = statistics.median(x["per_iter_ms"] for x in xs)
        spread = (max(x["per_iter_ms"] for x in xs) - min(x["per_iter_ms"] for x in xs)) / m
        rss = statistics.median(x["maxrss_kb"] for x in xs) - prss
        same = all(abs(x["checksum"] - pck) <= 1e-6 * max(1, abs(pck)) for x in xs)
        unit = f"{m*1e6:.0f} ns" if w == "empty" else f"{m:.3f} ms"
        table[f"{w}/{c}"] = {"median_ms": m, "ratio": m / p, "spread": spread, "rss_added_kb": rss,
                             "checksum_same": same,
                             "runs": [x["per_iter_ms"] for x in xs]}
        lines.append(f"{w:8s}  {c:16s}  {unit:>18s}  {m/p:15.4f}  {spread:7.3f}  {rss/1024:8.1f}MB  "
                     f"{'same' if same else 'DIFFERS'}")
if bad:
    lines.append("failed runs: " + ", ".join(bad))
open(sys.argv[2] + "/inject-overhead.txt", "w").write("\n".join(lines) + "\n")
json.dump(table, open(sys.argv[2] + "/inject-overhead.json", "w"), indent=1)
print("\n".join(lines))
PY
