# Issue 36: the GPU's GPM activity apportioned across the processes that
# share it, end to end: the fake NVML serves two GPUs with constant GPM
# figures and per-process samples, stand-in injection libraries
# (tests/profile/fake_inject_client tenant) report kernel time by kind,
# and /metrics must give each process its part of the truth the figures
# were made from:
#  - GPU 0, two tenants with the library: A runs bf16 GEMMs 45% of the
#    time, B elementwise kernels 50%;
#  - GPU 1, three tenants: A' GEMMs 30% (library), B' memory-bound work
#    40% seen by NVML only (no library: its memory controller busy 38% of
#    the time), C' unnamed kernels 20% (library);
#  - every process's parts sum to the GPU's figure, sources say kernels
#    or nvml, GPU time counts up at each one's busy rate, the owner
#    rollup (user) sums to the GPU's figure too;
#  - a tenant whose library goes away falls back to NVML's samples.
# The truths use the split's priors as the GPU's true intensities: this
# checks that the right evidence reaches the split from each source; the
# estimator on truths unlike its priors is tests/unit/test_split.c's.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

# The truths (busy share and kind per tenant; intensities per kind while
# running: tensor 0.7/0.01/0.1, DRAM 0.1/0.8/0.3 for GEMM/elementwise/other;
# NVML-only time: its memory-bound part 0.01/0.8, the rest 0.3/0.15).
python3 - "$WORK/truth.json" "$WORK/rec.csv" <<'PY'
import json, sys
T = {"tensor": (0.7, 0.1), "memory": (0.01, 0.8), "other": (0.1, 0.3)}
def nvml(busy, mem):
    h = min(1, mem / busy)
    return (busy * (h * 0.01 + (1 - h) * 0.3), busy * (h * 0.8 + (1 - h) * 0.15))
gpus = {
    "0": {"A": ("tensor", 0.45), "B": ("memory", 0.50)},
    "1": {"A": ("tensor", 0.30), "B": ("nvml", 0.40, 0.38), "C": ("other", 0.20)},
}
truth = {}
for g, ts in gpus.items():
    parts = {}
    for name, t in ts.items():
        busy = t[1]
        if t[0] == "nvml":
            te, dr = nvml(busy, t[2])
        else:
            te, dr = busy * T[t[0]][0], busy * T[t[0]][1]
        parts[name] = {"busy": busy, "tensor": te, "dram": dr}
    busy = sum(p["busy"] for p in parts.values())
    dev = {"sm": 0.95 * busy, "tensor": sum(p["tensor"] for p in parts.values()),
           "dram": sum(p["dram"] for p in parts.values())}
    for p in parts.values():
        p["sm"] = dev["sm"] * p["busy"] / busy
    truth[g] = {"device": dev, "parts": parts}
json.dump(truth, open(sys.argv[1], "w"), indent=1)
with open(sys.argv[2], "w") as f:
    f.write("t_s,gpu,gpu_util,mem_util,mem_used_mib,mem_total_mib,power_w,"
            "sm_util,tensor_util,dram_bw_util\n")
    for i in range(100):
        for g in ("0", "1"):
            d = truth[g]["device"]
            f.write(f"{i / 10:.1f},{g},95,40,4096,81559,300,{100 * d['sm']:.4f},"
                    f"{100 * d['tensor']:.4f},{100 * d['dram']:.4f}\n")
PY

# The tenants wait for the daemon's socket, so that their pids can be
# given to the fake NVML before it starts.
SOCK="$WORK/tenants.inject.sock"
tenant() { # NAME GPU KIND PERCENT
	CUDA_VISIBLE_DEVICES=$2 bash -c 'while [ ! -S "$0" ]; do sleep 0.05; done; exec "$1" "$0" tenant "$2" "$3"' \
		"$SOCK" "$FAKE" "$3" "$4" >"$WORK/$1.out" 2>&1 &
	PIDS+=("$!")
	eval "$1=$!"
}
tenant A0 0 tensor 45
tenant B0 0 memory 50
tenant A1 1 tensor 30
tenant C1 1 other 20
sleep 1000 &   # B', a process without the library
B1=$!
PIDS+=("$B1")

export GPULSE_FAKE_NVML_RECORDING="$WORK/rec.csv" GPULSE_FAKE_NVML_SPEED=1
# Each process's NVML samples: SM busy share, and its memory share.
export GPULSE_FAKE_NVML_PROCESSES="$A0:1000:45:0:-:5,$B0:1000:50:0:-:48,$A1:1000:30:1:-:4,$B1:1000:40:1:-:38,$C1:1000:20:1:-:6"
cat >"$WORK/t.yml" <<EOF2
profiling:
  socket: "$SOCK"
diagnosis:
  window: 2s
EOF2
start_daemon tenants --config "$WORK/t.yml" --nvml-library "$FAKE_NVML"

cat >"$WORK/check.py" <<'PY'
import json, re, sys
truth = json.load(open(sys.argv[1]))
pids = dict(a.split("=") for a in sys.argv[2].split(","))
want_source = dict(a.split("=") for a in sys.argv[3].split(","))
fam = {"sm": "gpulse_process_sm_active_ratio", "tensor": "gpulse_process_tensor_active_ratio",
       "dram": "gpulse_process_dram_bandwidth_ratio"}
v, src, gt, wl = {}, {}, {}, {}
for line in sys.stdin:
    m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line)
    if not m:
        continue
    name, labels, val = m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2))), float(m.group(3))
    for k, f in fam.items():
        if name == f:
            v[(labels["gpu"], labels["pid"], k)] = val
            src[(labels["gpu"], labels["pid"])] = labels["source"]
        if name == f.replace("process", "workload"):
            wl[(labels["gpu"], k)] = wl.get((labels["gpu"], k), 0) + val
    if name == "gpulse_process_gpu_time_seconds_total":
        gt[(labels["gpu"], labels["pid"])] = val
for g, t in truth.items():
    for k, dev in t["device"].items():
        s = sum(x for (gg, _, kk), x in v.items() if gg == g and kk == k)
        assert abs(s - dev) < 1e-3, f"GPU {g} {k}: parts sum to {s:.4f}, the GPU's {dev:.4f}"
        assert abs(wl.get((g, k), 0) - dev) < 1e-3, f"GPU {g} {k}: rollup {wl.get((g, k))}, the GPU's {dev:.4f}"
    for name, p in t["parts"].items():
        pid = pids[name + g]
        assert src.get((g, pid)) == want_source[name + g], \
            f"{name}{g}: source {src.get((g, pid))}, want {want_source[name + g]}"
        for k in ("sm", "tensor", "dram"):
            got = v.get((g, pid, k))
            assert got is not None and abs(got - p[k]) < 0.02, \
                f"{name}{g} {k}: {got}, truth {p[k]:.4f}"
        assert gt.get((g, pid), 0) > 0, f"{name}{g}: no GPU time"
print(json.dumps({f"{g}/{p}": gt[(g, p)] for (g, p) in gt}))
PY

PIDMAP="A0=$A0,B0=$B0,A1=$A1,B1=$B1,C1=$C1"
# until_deadline SECONDS CMD...: retry CMD every half second for at most
# SECONDS of wall time (a loaded machine makes each try slow: a count of
# tries would stretch past the test's timeout without a word).
until_deadline() {
	local end=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.5
	done
	return 1
}
check() { # SOURCES
	local body
	body=$(fetch /metrics) || return 1
	python3 "$WORK/check.py" "$WORK/truth.json" "$PIDMAP" "$1" <<<"$body" >"$WORK/gt.json" 2>"$WORK/check.err"
}
SOURCES="A0=kernels,B0=kernels,A1=kernels,B1=nvml,C1=kernels"
until_deadline 90 check "$SOURCES" ||
	fail "split: $(cat "$WORK/check.err"); $(fetch /metrics | grep -E '^gpulse_(process|workload)_(sm|tensor|dram|gpu_time)')"

# The status JSON (/api/v1/gpus) and `gpulse status` show the same, with each tenant's
# class: A0 on tensor cores, B0 on DRAM bandwidth.
fetch /api/v1/gpus >"$WORK/status.json" || fail "no /api/v1/gpus"
python3 - "$WORK/status.json" "$A0" "$B0" <<'PY' || fail "status JSON tenants: $(cat "$WORK/status.json")"
import json, sys
d = json.load(open(sys.argv[1]))["data"]
g = [x for x in d["gpus"] if x["gpu"] == 0][0]
t = {str(r["pid"]): r for r in g["tenants"]}
a, b = t[sys.argv[2]], t[sys.argv[3]]
assert a["bound"] == "compute_bound" and a["bound_detail"] == "tensor cores", a
assert b["bound"] == "memory_bound", b
assert a["source"] == "kernels" and b["source"] == "kernels"
s = sum(r["tensor_active"] for r in g["tenants"])
assert abs(s - g["fields"]["gpm_tensor"]) < 1e-3, (s, g["fields"])
assert len(g["workloads"]) == 1 and g["workloads"][0]["processes"] == 2, g["workloads"]
PY
S=$("$GPULSE" status --url "$URL" --no-color) || fail "gpulse status"
grep -E "^ +$A0 +\S+ +kernels .*compute_bound \(tensor cores\)" <<<"$S" >/dev/null ||
	fail "gpulse status: no activity line for A0: $S"
grep -E "^ +$B1 +\S+ +nvml " <<<"$S" >/dev/null || fail "gpulse status: no NVML line for B1: $S"
grep -q "by owner" <<<"$S" || fail "gpulse status: no owner rollup: $S"

# The diagnosis says, per window, who holds what bounds the GPU and what
# each tenant is bound by.
diag_ok() {
	fetch "/api/v1/diagnosis?gpu=0" >"$WORK/diag.json" &&
		python3 - "$WORK/diag.json" "$A0" "$B0" 2>"$WORK/diag.err" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
assert len(d["tenants"]) == len(d["windows"]) and d["windows"], "no windows yet"
w, t = d["windows"][-1], d["tenants"][-1]
assert t["start_s"] == w["start_s"] and t["gpu"] == 0
p = {str(x["pid"]): x for x in t["processes"]}
a, b = p[sys.argv[2]], p[sys.argv[3]]
assert (a["bound"], a["bound_detail"]) == ("compute_bound", "tensor cores"), a
assert b["bound"] == "memory_bound", b
bo = t["bottleneck_owner"]
if w["bottleneck"] == "compute_bound":
    assert bo["pid"] == int(sys.argv[2]) and bo["activity"] == "tensor" and bo["share"] > 0.9, bo
elif w["bottleneck"] == "memory_bound":
    assert bo["pid"] == int(sys.argv[3]) and bo["activity"] == "dram", bo
PY
}
until_deadline 60 diag_ok || fail "diagnosis tenants: $(cat "$WORK/diag.err"); $(cat "$WORK/diag.json")"
D=$("$GPULSE" diagnose --url "$URL" --gpu 0) || fail "gpulse diagnose"
L=$(grep -E "^ +tenants: pid [0-9]+ " <<<"$D" | tail -n1)
grep -E "pid $A0 \([^)]*\): compute_bound on tensor cores, [0-9]+% of [A-Za-z ]+ activity" <<<"$L" >/dev/null &&
	grep -E "pid $B0 \([^)]*\): memory_bound on DRAM bandwidth" <<<"$L" >/dev/null ||
	fail "gpulse diagnose: no tenants line: $D"

# GPU time counts at each one's busy rate: A0 45% of the wall clock.
t0=$(date +%s.%N)
g0=$(metric gpulse_process_gpu_time_seconds_total gpu=\"0\" pid=\"$A0\")
sleep 3
g1=$(metric gpulse_process_gpu_time_seconds_total gpu=\"0\" pid=\"$A0\")
t1=$(date +%s.%N)
python3 - "$g0" "$g1" "$t0" "$t1" <<'PY' || fail "A0's GPU time rate"
import sys
g0, g1, t0, t1 = map(float, sys.argv[1:])
rate = (g1 - g0) / (t1 - t0)
assert 0.3 < rate < 0.6, f"A0's GPU time grows at {rate:.3f} s/s, want ~0.45"
PY
[ -n "$(metric gpulse_process_activity_rows)" ] || fail "no gpulse_process_activity_rows"
[ "$(metric gpulse_process_activity_folded_total)" = 0 ] || fail "folded with no bound reached"

# C1's library goes: its part now comes from NVML's samples.
kill "$C1"
wait_for '[ "$(fetch /metrics | grep "^gpulse_process_sm_active_ratio" | grep "pid=\"$C1\"" | grep -c "source=\"nvml\"")" = 1 ]' ||
	fail "C1 without its library: $(fetch /metrics | grep "^gpulse_process_sm_active_ratio" | grep "pid=\"$C1\"")"

# The families pass promtool when it is there.
if command -v promtool >/dev/null; then
	fetch /metrics | promtool check metrics 2>&1 | grep -E 'gpulse_(process|workload)_' &&
		fail "promtool objects to the new families"
fi
echo PASS
