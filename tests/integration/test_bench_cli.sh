# gpulse bench on the stand-in driver and cuBLASLt (tests/fake_bench, a
# virtual clock) and the fake NVML: each figure comes back as the rate the
# stand-ins were given (FLOP counting, bytes counted, per-run statistics,
# fractions of the peak computed from the card's identity), and every bad
# condition of issue 15 item 4 says what happened and keeps nothing
# misleading: no driver, a GPU in use, MIG, not enough memory, cuBLASLt
# missing, a precision without a kernel, an interrupted run; and
# --compare judges a card against other hosts' results.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}" "${FAKE_NVML:?}"
export GPULSE_NVML_LIBRARY="$FAKE_NVML"
export GPULSE_CUDA_LIBRARY="$GPULSE_BUILD_DIR/fake_bench/libcuda.so.1"
export GPULSE_CUBLASLT="$GPULSE_BUILD_DIR/fake_bench/libcublasLt.so.13"
export GPULSE_FAKE_NVML_SPEED=0     # frozen at the first (idle) row
# No gpulsed: a local run asks one for the card's history (port 1 refuses).
export GPULSE_URL=http://127.0.0.1:1
[ -f "$GPULSE_CUDA_LIBRARY" ] && [ -f "$GPULSE_CUBLASLT" ] || fail "tests/fake_bench is not built"

# Rates unlike the stand-ins' defaults, so that a figure can only match
# by being computed from the timings.
export GPULSE_FAKE_BENCH_TFLOPS="bf16=612.5,fp16=598,fp8=1187,tf32=301,fp32=47.5,fp64=51.25"
export GPULSE_FAKE_BENCH_D2D_GBS=3111 GPULSE_FAKE_BENCH_READ_GBS=3650
export GPULSE_FAKE_BENCH_H2D_GBS=41.5 GPULSE_FAKE_BENCH_D2H_GBS=39.25
export GPULSE_FAKE_BENCH_PAGEABLE_GBS=13.5 GPULSE_FAKE_BENCH_LAUNCH_US=2.5
export GPULSE_FAKE_BENCH_JITTER=0.01

"$GPULSE" bench --json >"$WORK/r.json" 2>"$WORK/r.err" || fail "bench failed: $(cat "$WORK/r.err")"
python3 - "$WORK/r.json" <<'PY' || fail "figures: $(cat "$WORK/r.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["gpulse_bench"] == 1 and r["mode"] == "quick", r
assert r["baseline"] is True and r["interrupted"] is False, r
g = r["gpu"]
assert g["uuid"] == "GPU-fa4e0000-0000-4000-8000-000000000000", g
assert g["compute_capability"] == "9.0" and g["sm_count"] == 132, g
fig = {(f["name"], f["variant"]): f for f in r["figures"]}
def near(a, b, rel):
    assert abs(a - b) <= rel * b, (a, b, rel)
tf = dict(bf16=612.5, fp16=598, fp8=1187, tf32=301, fp32=47.5, fp64=51.25)
per_sm = dict(bf16=4096, fp16=4096, fp8=8192, tf32=2048, fp32=256, fp64=256)
for p, t in tf.items():
    f = fig[("matmul", p)]
    assert f["unit"] == "flop_per_second" and f["size"] == "8192x8192x8192", f
    near(f["median"], t * 1e12, 0.002)
    assert f["runs"] == 10 and f["min"] <= f["median"] <= f["max"], f
    peak = per_sm[p] * g["sm_count"] * g["max_sm_clock_mhz"] * 1e6
    near(f["peak"], peak, 1e-9)
    near(f["peak_fraction"], f["median"] / peak, 1e-9)
    # the watcher read NVML during every figure
    assert f["sm_clock_mhz"]["min"] <= f["sm_clock_mhz"]["max"], f
    assert "power_watts" in f and "temperature_celsius" in f, f
# The copy counts read and write; its peak is the memory's.
near(fig[("dram_copy", "")]["median"], 3111e9, 0.002)
mem_peak = 2 * g["max_mem_clock_mhz"] * 1e6 * g["memory_bus_width_bits"] / 8
near(fig[("dram_copy", "")]["peak"], mem_peak, 1e-9)
# The read kernel: bytes / (launch + bytes / rate), each launch reading
# the whole buffer.
f = fig[("dram_read", "")]
n = int(f["size"].split()[0])
near(f["median"], n / (2.5e-6 + n / 3650e9), 0.002)
for name, v, rate in (("h2d", "pinned", 41.5), ("d2h", "pinned", 39.25),
                      ("h2d", "pageable", 13.5), ("d2h", "pageable", 13.5)):
    f = fig[(name, v)]
    near(f["median"], rate * 1e9, 0.011)
    # PCIe gen 5 x16, one direction: 32 GT/s x 128/130 x 16 / 8
    near(f["peak"], 32e9 * 128 / 130 * 16 / 8, 1e-9)
# Few copies per run: the stand-in's +-1% jitter shows in the spread.
f = fig[("h2d", "pinned")]
assert 0 < f["spread_ratio"] <= 0.025, f
near(fig[("launch_rate", "")]["median"], 1 / 2.5e-6, 0.011)
lat = fig[("launch_latency", "")]
assert lat["unit"] == "seconds" and lat["higher_is_better"] is False and lat["median"] > 0, lat
assert not r["skipped"], r["skipped"]
# Each figure's value by its method: the host-bound ones (launches,
# pageable copies) the fast decile of 40 repetitions, the rest the median
# of 10 runs; min, median and max kept either way.
host_bound = {("launch_rate", ""), ("launch_latency", ""), ("h2d", "pageable"), ("d2h", "pageable")}
for k, f in fig.items():
    assert f["min"] <= f["value"] <= f["max"], f
    if k in host_bound:
        want = "p10" if k == ("launch_latency", "") else "p90"
        assert f["method"] == "fast_p90" and f["runs"] == 40, f
        assert f["estimator"] == want + " of 40 repetitions", f
    else:
        assert f["method"] == "median" and f["value"] == f["median"], f
        assert f["estimator"] == "median of %d runs" % f["runs"], f
for v in ("h2d", "d2h"):
    f = fig[(v, "pageable")]
    near(f["value"], 13.5e9, 0.011)
    assert f["size"].startswith("67108864 bytes, 4 KiB pages, "), f
    near(f["peak_fraction"], f["value"] / f["peak"], 1e-9)
near(fig[("launch_rate", "")]["value"], 1 / 2.5e-6, 0.011)
PY

# A shared host: the host-bound operations that start in half of every
# 50 ms take 30% longer (the stand-in's GPULSE_FAKE_BENCH_HOST_STALL).
# Their value is still the undisturbed rate within 1%, while their median
# (what the value was before) is off by more than 5%, as it was on the
# H200; device-timed figures are untouched.
GPULSE_FAKE_BENCH_HOST_STALL=0.3 GPULSE_FAKE_BENCH_JITTER=0 "$GPULSE" bench --json \
	--only launch,h2d,d2h >"$WORK/stall.json" 2>"$WORK/stall.err" ||
	fail "bench on a stalling host: $(cat "$WORK/stall.err")"
python3 - "$WORK/stall.json" <<'PY' || fail "stalling host: $(cat "$WORK/stall.json")"
import json, sys
r = json.load(open(sys.argv[1]))
fig = {(f["name"], f["variant"]): f for f in r["figures"]}
for k, rate in ((("h2d", "pageable"), 13.5e9), (("d2h", "pageable"), 13.5e9),
                (("launch_rate", ""), 1 / 2.5e-6)):
    f = fig[k]
    assert abs(f["value"] / rate - 1) < 0.01, (k, f["value"] / rate, f)
    assert 1 - f["median"] / rate > 0.05, (k, f["median"] / rate, f)
    assert f["spread_ratio"] > 0.2, f
f = fig[("h2d", "pinned")]
assert abs(f["value"] / 41.5e9 - 1) < 1e-3 and f["spread_ratio"] < 1e-3, f
PY

# The table names every figure and the peak share.
"$GPULSE" bench --only matmul,h2d >"$WORK/t.out" 2>&1 || fail "table: $(cat "$WORK/t.out")"
grep -Eq '^matmul +bf16 +612\.[45] TFLOP/s' "$WORK/t.out" || fail "table: $(cat "$WORK/t.out")"
grep -Eq '^h2d +pinned +41\.[45] GB/s +median of 10 runs ' "$WORK/t.out" || fail "table: $(cat "$WORK/t.out")"
grep -Eq '^h2d +pageable +1[34]\.[0-9] GB/s +p90 of 40 repetitions ' "$WORK/t.out" ||
	fail "table: no estimator for pageable: $(cat "$WORK/t.out")"
! grep -q '^dram_copy' "$WORK/t.out" || fail "--only ran dram_copy"

# The host side runs on the CPUs NVML names as the GPU's nearest, within
# those the process may use (from before the context exists); when none
# of them is allowed it stays where it was, and says where.
ranges() { python3 -c '
import os, sys
c = sorted(os.sched_getaffinity(0)) if len(sys.argv) < 2 else [int(sys.argv[1])]
out, i = [], 0
while i < len(c):
    j = i
    while j + 1 < len(c) and c[j + 1] == c[j] + 1:
        j += 1
    out.append(str(c[i]) if i == j else f"{c[i]}-{c[j]}")
    i = j + 1
print(",".join(out))' "$@"; }
one=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
for spec in "$one" 100000; do
	want=$([ "$spec" = "$one" ] && ranges "$one" || ranges)
	GPULSE_FAKE_NVML_CPU_AFFINITY=$spec "$GPULSE" bench --json --only launch >"$WORK/aff.json" \
		2>"$WORK/aff.err" || fail "bench with affinity $spec: $(cat "$WORK/aff.err")"
	got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["host_cpus"])' "$WORK/aff.json")
	[ "$got" = "$want" ] || fail "nearest CPUs $spec: host_cpus $got, wanted $want"
done
"$GPULSE" bench --only launch 2>&1 | grep -q "^host side on CPUs $(ranges)\$" ||
	fail "the table does not say where the host side ran"

# ---- bad conditions: nothing on stdout, one sentence, status 1 ----
refused() { # WANT ENV... -- ARGS...
	local want=$1
	shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	local rc=0
	env "${envs[@]}" "$GPULSE" bench --json "$@" >"$WORK/bad.out" 2>"$WORK/bad.err" || rc=$?
	[ "$rc" = 1 ] || fail "$want: status $rc: $(cat "$WORK/bad.err")"
	[ ! -s "$WORK/bad.out" ] || fail "$want: wrote a result: $(cat "$WORK/bad.out")"
	grep -q "$want" "$WORK/bad.err" || fail "wanted \"$want\": $(cat "$WORK/bad.err")"
}
refused "no NVIDIA driver: cannot load the CUDA driver library /nonexistent/libcuda.so.1" \
	GPULSE_CUDA_LIBRARY=/nonexistent/libcuda.so.1 --
refused "no NVIDIA driver" GPULSE_FAKE_NVML_FAULTS=nodriver --
refused "no CUDA-capable GPU is visible" GPULSE_FAKE_BENCH_NO_DEVICE=1 --
refused "is in MIG mode" GPULSE_FAKE_NVML_MIG=1 --
refused "not enough free memory on GPU 0: the benchmark needs 3072 MiB, 1000 MiB" \
	GPULSE_FAKE_BENCH_FREE_MIB=1000 --
refused "no GPU 3 (this machine has 1)" -- --gpu 3

# A GPU in use: another process and 85% utilization in the first row.
python3 - "$REC" "$WORK/busy.csv" <<'PY'
import sys
rows = open(sys.argv[1]).read().splitlines()
cols = rows[0].split(",")
r = rows[1].split(",")
r[cols.index("gpu_util")] = "85"
r[cols.index("proc_count")] = "2"
open(sys.argv[2], "w").write(rows[0] + "\n" + ",".join(r) + "\n")
PY
refused "GPU 0 is in use (process 4000001 (?) is on the GPU and it is busy)" \
	GPULSE_FAKE_NVML_RECORDING="$WORK/busy.csv" --
# ...and with --allow-busy it runs, marked not a baseline, saying why.
GPULSE_FAKE_NVML_RECORDING="$WORK/busy.csv" "$GPULSE" bench --json --allow-busy --only launch \
	>"$WORK/busy.json" 2>"$WORK/busy.err" || fail "--allow-busy: $(cat "$WORK/busy.err")"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["baseline"] is False, r
assert any("not a baseline: at the start process 4000001" in n for n in r["notes"]), r["notes"]
assert any("used the GPU during the run" in n for n in r["notes"]), r["notes"]
' "$WORK/busy.json" || fail "busy result: $(cat "$WORK/busy.json")"

# cuBLASLt missing: the other figures run, each matmul says why.
GPULSE_CUBLASLT=/nonexistent/libcublasLt.so "$GPULSE" bench --json --only matmul,dram_copy \
	>"$WORK/nolt.json" 2>"$WORK/nolt.err" || fail "no cuBLASLt: $(cat "$WORK/nolt.err")"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
names = [f["name"] for f in r["figures"]]
assert names == ["dram_copy"], names
sk = {s["variant"]: s["why"] for s in r["skipped"] if s["name"] == "matmul"}
assert set(sk) == {"bf16", "fp16", "fp8", "tf32", "fp32", "fp64"}, sk
assert all("/nonexistent/libcublasLt.so" in w for w in sk.values()), sk
' "$WORK/nolt.json" || fail "no cuBLASLt result: $(cat "$WORK/nolt.json")"
# A precision cuBLASLt has no kernel for is skipped, the rest measured.
GPULSE_FAKE_BENCH_NO_ALGO=fp8 "$GPULSE" bench --json --only matmul >"$WORK/nofp8.json" ||
	fail "no fp8 kernel"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
v = [f["variant"] for f in r["figures"]]
assert "fp8" not in v and "bf16" in v and "fp64" in v, v
assert any(s["variant"] == "fp8" and "no fp8 kernel" in s["why"] for s in r["skipped"]), r["skipped"]
' "$WORK/nofp8.json" || fail "no fp8: $(cat "$WORK/nofp8.json")"

# Interrupted: SIGINT mid-run ends it with status 1, a partial result
# marked interrupted and not a baseline.
GPULSE_FAKE_BENCH_REALTIME=1 "$GPULSE" bench --json >"$WORK/int.json" 2>"$WORK/int.err" &
BP=$!
PIDS+=("$BP")
# Once the run is under way (the driver stand-in loaded: the handler is
# set before), however long the start takes on a loaded machine.
wait_for 'grep -q "libcuda\.so\.1" /proc/$BP/maps 2>/dev/null' || fail "the bench run did not start"
kill -INT "$BP"
rc=0
wait "$BP" || rc=$?
[ "$rc" = 1 ] || fail "interrupted run: status $rc"
grep -q "interrupted: the figures are partial and not a baseline" "$WORK/int.err" ||
	fail "interrupted: $(cat "$WORK/int.err")"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["interrupted"] is True and r["baseline"] is False, r
assert len(r["figures"]) < 14, len(r["figures"])
' "$WORK/int.json" || fail "interrupted result: $(cat "$WORK/int.json")"

# --compare: three other H200s 8% faster at bf16 and equal elsewhere: this
# card's bf16 is flagged against the fleet, nothing else is.
for i in 1 2 3; do
	python3 - "$WORK/r.json" "$WORK/peer$i.json" "$i" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["gpu"]["uuid"] = "GPU-peer-%s" % sys.argv[3]
r["host"] = "peer%s" % sys.argv[3]
for f in r["figures"]:
    if (f["name"], f["variant"]) == ("matmul", "bf16"):
        for k in ("min", "median", "max", "value"):
            f[k] *= 1.08
json.dump(r, open(sys.argv[2], "w"))
PY
done
"$GPULSE" bench --json --only matmul --compare "$WORK"/peer*.json >"$WORK/cmp.json" ||
	fail "--compare"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
v = {(x["figure"], x["variant"]): x for x in r["verdicts"]}
b = v[("matmul", "bf16")]["fleet"]
assert b["points"] == 3 and b["regression"] is True and 0.06 < b["deficit_ratio"] < 0.09, b
f = v[("matmul", "fp16")]["fleet"]
assert f["regression"] is False and abs(f["deficit_ratio"]) < 0.01, f
' "$WORK/cmp.json" || fail "compare verdicts: $(cat "$WORK/cmp.json")"
"$GPULSE" bench --only matmul --compare "$WORK"/peer*.json >"$WORK/cmp.out" || fail "--compare table"
grep -Eq '^matmul +bf16 .*REGRESSION' "$WORK/cmp.out" || fail "compare table: $(cat "$WORK/cmp.out")"
# A peer file that is not a result is named, with the member at fault.
printf '{"gpulse_bench":1,"gpu":{"uuid":"x"},"figures":[{"name":"m"}]}' >"$WORK/bad.json"
rc=0
"$GPULSE" bench --compare "$WORK/bad.json" 2>"$WORK/bad.err" >/dev/null || rc=$?
[ "$rc" = 1 ] && grep -q "bad.json: not a gpulse bench result: figures\[0\].unit: missing" "$WORK/bad.err" ||
	fail "bad compare file: $rc $(cat "$WORK/bad.err")"

# Usage errors: status 2.
for args in "--quick --full" "--gpu x" "--gpu 1024" "--screen --gpu -1" "--via-daemon --history" "--compare" "extra"; do
	rc=0
	# shellcheck disable=SC2086
	"$GPULSE" bench $args >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || fail "gpulse bench $args: status $rc, not 2"
done
echo "ok"
