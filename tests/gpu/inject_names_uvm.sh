#!/usr/bin/env bash
# GPU check of two library behaviours (not in CI: needs a GPU, nvcc and
# PyTorch): a program of well under a second that migrates 256 MiB of
# managed memory reports its unified-memory bytes in continuous mode as in
# full mode (tests/gpu/inject_uvm_short.cu), and every kernel name
# torch.profiler prints for some PyTorch ops is in the library's dump,
# whole (tests/gpu/inject_torch_names.py).
#   tests/gpu/inject_names_uvm.sh LIBGPULSE_INJECT.so OUTDIR
set -u
L=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
OUT=$2
mkdir -p "$OUT"
cd "$(dirname "$0")"
nvcc -O2 -arch=sm_90 -o "$OUT/inject_uvm_short" inject_uvm_short.cu || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
uvm_failed=0
echo "prefetch truth: 268435456 bytes each way"
for run in full continuous full-linger continuous-linger full-prefetch continuous-prefetch; do
	m=${run%-*}; arg=${run#*-}; [ "$run" = "$m" ] && arg=
	env CUDA_INJECTION64_PATH="$L" GPULSE_MODE=$m GPULSE_INJECT_DUMP="$OUT/uvm-$run.json" \
		GPULSE_SOCKET=/nonexistent/inject.sock "$OUT/inject_uvm_short" $arg
	python3 - "$OUT/uvm-$run.json" $run <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); u = d["uvm"]
print(sys.argv[2], "uvm_state", d.get("uvm_state"), "h2d", sum(x["bytes_h2d"] for x in u),
      "d2h", sum(x["bytes_d2h"] for x in u), "cpu_faults", sum(x["cpu_page_faults"] for x in u),
      "gpu_faults", sum(x["gpu_page_faults"] for x in u),
      "kernels", [(k["name"], k["launches"]) for k in d["kernels"]])
if sys.argv[2].endswith("prefetch"):
    truth = 256 << 20
    for way in ("bytes_h2d", "bytes_d2h"):
        got = sum(x[way] for x in u)
        ok = abs(got - truth) <= truth / 100
        print(sys.argv[2], way, got, "of", truth, "PASS" if ok else "FAIL (want within 1%)")
        if not ok:
            sys.exit(1)
PY
	[ $? = 0 ] || uvm_failed=1
done
CUDA_INJECTION64_PATH="$L" GPULSE_MODE=full GPULSE_INJECT_DUMP="$OUT/names-gpulse.json" \
	GPULSE_SOCKET=/nonexistent/inject.sock python3 inject_torch_names.py ops 2>"$OUT/names-gpulse.log"
python3 inject_torch_names.py prof "$OUT/names-torch.json" 2>"$OUT/names-torch.log"
python3 - "$OUT/names-gpulse.json" "$OUT/names-torch.json" <<'PY'
import json, sys
g = {k["name"] for k in json.load(open(sys.argv[1]))["kernels"]}
# torch.profiler's CUDA rows that are not kernels (memsets, copies)
t = [n for n in json.load(open(sys.argv[2])) if not n.startswith(("Memset (", "Memcpy "))]
def fit(name, bound=4096):
    # what the library keeps of a name past its bound (src/wire/wire.c
    # wire_name_fit): a UTF-8 cut, "...#" and the FNV-1a hash of the name
    b = name.encode()
    if len(b) <= bound:
        return name
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    tail = "...#%016x" % h
    keep = bound - len(tail)
    while keep > 0 and (b[keep] & 0xC0) == 0x80:
        keep -= 1
    return b[:keep].decode() + tail
miss = [n for n in t if fit(n) not in g]
print("torch.profiler names", len(t), "gpulse names", len(g), "matched whole", len(t) - len(miss))
print("longest", max(len(n) for n in t))
for n in miss: print("MISSING", n[:300])
for n in sorted(t, key=len)[-3:]: print("EXAMPLE", len(n), n[:400])
sys.exit(1 if miss else 0)
PY
names_rc=$?
[ $uvm_failed = 0 ] && [ $names_rc = 0 ]
