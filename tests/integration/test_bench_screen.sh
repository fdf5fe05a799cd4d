# gpulse bench --screen (issue 38) on the bench stand-in, which computes
# the screening kernels as their PTX does, at the test sizes
# (GPULSE_SCREEN_TEST_SIZES: 64 x 64 GEMMs, a 4 MiB reduction, 8 MiB of
# memory pattern):
#  - a healthy card passes, and its digests are the same in 5 runs; the
#    gemm_u32, the tensor-core GEMMs' (bf16, fp16, tf32: small integers,
#    exact in fp32) and sum_u64 digests are those this test computes itself;
#  - the test hook (GPULSE_SCREEN_CORRUPT) is caught in every test;
#  - a card that computes one element of one tile wrong
#    (GPULSE_FAKE_BENCH_SCREEN_FAULT) is caught by the CPU reference, by
#    its own earlier run (--reference) and by a peer (--compare), each
#    with the test, tile, elements and difference;
#  - a reference of another driver is not compared, and says so.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}" "${FAKE_NVML:?}"
export GPULSE_NVML_LIBRARY="$FAKE_NVML"
export GPULSE_CUDA_LIBRARY="$GPULSE_BUILD_DIR/fake_bench/libcuda.so.1"
export GPULSE_FAKE_NVML_SPEED=0 GPULSE_SCREEN_TEST_SIZES=1
[ -f "$GPULSE_CUDA_LIBRARY" ] || fail "tests/fake_bench is not built"

# A healthy card, five times.
for i in 1 2 3 4 5; do
	"$GPULSE" bench --screen --json >"$WORK/ok$i.json" 2>"$WORK/ok$i.err" ||
		fail "healthy run $i: exit $? $(cat "$WORK/ok$i.err")"
done
python3 - "$WORK" <<'PY' || fail "healthy digests"
import json, sys
w = sys.argv[1]
runs = [json.load(open(f"{w}/ok{i}.json")) for i in range(1, 6)]
for r in runs:
    assert r["passed"] and r["mismatches"] == [] and not r["test_hook"], r
    assert [t["name"] for t in r["tests"]] == ["gemm_u32", "gemm_f32", "gemm_f64", "gemm_bf16", "gemm_f16",
                                               "gemm_tf32", "sum_u64", "memory"], r["tests"]
dig = [[(t["digest"], t["tile_digests"]) for t in r["tests"]] for r in runs]
assert all(d == dig[0] for d in dig), "digests differ between runs"

M = 0xffffffff
def fmix(i, seed):
    h = (i & M) ^ seed ^ (((i >> 32) * 0x27d4eb2f) & M)
    h = (h * 0x9e3779b1) & M; h ^= h >> 16
    h = (h * 0x85ebca6b) & M; h ^= h >> 13
    h = (h * 0xc2b2ae35) & M; h ^= h >> 16
    return h
def fnv(h, data):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h
F0 = 0xcbf29ce484222325
def digest(tiles):
    return fnv(F0, b"".join(t.to_bytes(8, "little") for t in tiles))

# gemm_u32: A[i] = fmix(i, 0x5eed0001), B[i] = fmix(i, 0x5eed0002), n = 64,
# C = A x B mod 2^32, 32 x 32 tiles row-major, FNV-1a over each tile's rows.
n = 64
A = [fmix(i, 0x5eed0001) for i in range(n * n)]
B = [fmix(i, 0x5eed0002) for i in range(n * n)]
C = [[sum(A[r * n + k] * B[k * n + c] for k in range(n)) & M for c in range(n)] for r in range(n)]
tiles = []
for t in range(4):
    r0, c0 = t // 2 * 32, t % 2 * 32
    h = F0
    for r in range(r0, r0 + 32):
        h = fnv(h, b"".join(C[r][c].to_bytes(4, "little") for c in range(c0, c0 + 32)))
    tiles.append(h)
g = runs[0]["tests"][0]
assert g["tile_digests"] == ["%016x" % t for t in tiles], (g["tile_digests"], tiles)
assert g["digest"] == "%016x" % digest(tiles)

# The tensor-core GEMMs: A[i] = fmix(i, 0x5eed0001) mod 511 - 255, B likewise
# with 0x5eed0002 (|x| <= 255 at n = 64: every sum exact in fp32), the same
# integers in bf16, fp16 and tf32, so the three results are one matrix:
# the integer product, as fp32 bytes.
import struct
IA = [fmix(i, 0x5eed0001) % 511 - 255 for i in range(n * n)]
IB = [fmix(i, 0x5eed0002) % 511 - 255 for i in range(n * n)]
IC = [[sum(IA[r * n + k] * IB[k * n + c] for k in range(n)) for c in range(n)] for r in range(n)]
assert max(abs(v) for row in IC for v in row) < 1 << 24
mt = []
for t in range(4):
    r0, c0 = t // 2 * 32, t % 2 * 32
    h = F0
    for r in range(r0, r0 + 32):
        h = fnv(h, b"".join(struct.pack("<f", float(IC[r][c])) for c in range(c0, c0 + 32)))
    mt.append(h)
for i in (3, 4, 5):
    g = runs[0]["tests"][i]
    assert g["tile_digests"] == ["%016x" % t for t in mt], (g["name"], g["tile_digests"], mt)
    assert g["digest"] == "%016x" % digest(mt) and g["cpu_tiles"] == 4, g

# sum_u64: 2^20 words fmix(i, 0x5eed0003), tiles of 2^16, each sum's 8 bytes hashed.
sums = [sum(fmix(i, 0x5eed0003) for i in range(t << 16, (t + 1) << 16)) for t in range(16)]
st = [fnv(F0, s.to_bytes(8, "little")) for s in sums]
s = runs[0]["tests"][6]
assert s["tile_digests"] == ["%016x" % x for x in st] and s["digest"] == "%016x" % digest(st), s
m = runs[0]["tests"][7]
assert m["size"] == 2 * 1024 * 1024 and m["tiles"] == 8 and runs[0]["memory_bytes"] == 8 << 20, m
PY
out=$("$GPULSE" bench --screen 2>&1) || fail "healthy text run: $out"
grep -q '^screening passed$' <<<"$out" || fail "no pass line: $out"
grep -Eq '^  gemm_f64 +size 64, 4 tiles, 3 reps, 4 on the CPU  digest [0-9a-f]{16}' <<<"$out" || fail "no gemm_f64 line: $out"

# The test hook, in every test: always caught, never a pass.
for spec in gemm_u32:1:5 gemm_f32:0:0 gemm_f64:3:1023 gemm_bf16:2:17 gemm_f16:1:1000 gemm_tf32:3:0 \
	sum_u64:3 memory:2; do
	t=${spec%%:*}
	rc=0
	out=$(GPULSE_SCREEN_CORRUPT=$spec "$GPULSE" bench --screen 2>&1) || rc=$?
	[ "$rc" = 3 ] || fail "hook $spec: exit $rc, want 3: $out"
	grep -q "GPULSE_SCREEN_CORRUPT is set" <<<"$out" || fail "hook $spec: no warning"
	grep -q "^MISMATCH $t tile $(cut -d: -f2 <<<"$spec"):" <<<"$out" || fail "hook $spec not named: $out"
	grep -q '^SCREENING FAILED' <<<"$out" || fail "hook $spec: no failure line"
done
out=$(GPULSE_SCREEN_CORRUPT=gemm_f64:3:1023 "$GPULSE" bench --screen 2>&1) || true
grep -q '^MISMATCH gemm_f64 tile 3: 1 of 1024 elements differ from the CPU.s, by up to [0-9.e+-]* (first at (63,63): got ' <<<"$out" ||
	fail "hook's CPU line: $out"
grep -q '^MISMATCH gemm_f64 tile 3: 1 of 1024 elements differ from the first repetition.s.*; repetition 2 of 3$' <<<"$out" ||
	fail "hook's repeat line: $out"
out=$(GPULSE_SCREEN_CORRUPT=memory:2 "$GPULSE" bench --screen 2>&1) || true
grep -q '^MISMATCH memory tile 2: 1 of 262144 words differ from the pattern written; bytes 2097152-3145727 of the 8 MiB tested, pass 1$' <<<"$out" ||
	fail "memory line: $out"

# A card wrong in one element of gemm_f64's tile 1, every time: the CPU sees it.
rc=0
GPULSE_FAKE_BENCH_SCREEN_FAULT=gemm_f64:1 "$GPULSE" bench --screen --json >"$WORK/bad.json" 2>"$WORK/bad.err" || rc=$?
[ "$rc" = 3 ] || fail "faulty card: exit $rc, want 3"
python3 - "$WORK/bad.json" <<'PY' || fail "faulty card's mismatches: $(cat "$WORK/bad.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert not r["passed"]
m = r["mismatches"]
assert len(m) == 1, m
m = m[0]
assert (m["test"], m["basis"], m["tile"], m["elements"], m["of"], m["at_row"], m["at_col"]) == \
       ("gemm_f64", "cpu", 1, 1, 1024, 0, 32), m
assert 0 < m["max_diff"] < 1e-12 and m["max_diff"] == abs(m["got"] - m["want"]), m
PY
grep -q '^MISMATCH gemm_f64 tile 1: 1 of 1024 elements differ from the CPU' "$WORK/bad.err" || fail "no MISMATCH line on stderr with --json"
# The same for each tensor-core GEMM: tile 3's first element, one bit.
for t in gemm_bf16 gemm_f16 gemm_tf32; do
	rc=0
	GPULSE_FAKE_BENCH_SCREEN_FAULT=$t:3 "$GPULSE" bench --screen --json >"$WORK/bad.json" 2>"$WORK/bad.err" || rc=$?
	[ "$rc" = 3 ] || fail "faulty $t: exit $rc, want 3"
	python3 - "$WORK/bad.json" "$t" <<'PY' || fail "faulty $t's mismatches: $(cat "$WORK/bad.json")"
import json, sys
m = json.load(open(sys.argv[1]))["mismatches"]
assert len(m) == 1, m
m = m[0]
assert (m["test"], m["basis"], m["tile"], m["elements"], m["of"], m["at_row"], m["at_col"]) == \
       (sys.argv[2], "cpu", 3, 1, 1024, 32, 32), m
assert m["got"] != m["want"] and m["max_diff"] == abs(m["got"] - m["want"]), m
PY
done

# A card wrong in the reduction's tile 3 (not among the CPU's tiles 0, 5,
# 10, 15, and the same every repetition): only its earlier run sees it...
out=$(GPULSE_FAKE_BENCH_SCREEN_FAULT=sum_u64:3 "$GPULSE" bench --screen 2>&1) || fail "tile 3 unseen without a reference should pass: $out"
rc=0
out=$(GPULSE_FAKE_BENCH_SCREEN_FAULT=sum_u64:3 "$GPULSE" bench --screen --reference "$WORK/ok1.json" 2>&1) || rc=$?
[ "$rc" = 3 ] || fail "reference: exit $rc: $out"
grep -q '^MISMATCH sum_u64 tile 3: its digest differs from this card.s reference (the run of 20[0-9-]*T[0-9:]*Z)$' <<<"$out" ||
	fail "reference line: $out"
# ... or a peer of the same model: GPU 1 against GPU 0's run.
rc=0
out=$(GPULSE_FAKE_NVML_GPUS=2 GPULSE_FAKE_BENCH_GPUS=2 GPULSE_FAKE_BENCH_SCREEN_FAULT=sum_u64:3 \
	"$GPULSE" bench --screen --gpu 1 --compare "$WORK/ok1.json" 2>&1) || rc=$?
[ "$rc" = 3 ] || fail "peer: exit $rc: $out"
grep -q '^MISMATCH sum_u64 tile 3: its digest differs from a peer.s (GPU-fa4e0000-0000-4000-8000-000000000000 of ' <<<"$out" ||
	fail "peer line: $out"

# A reference from another driver starts a new one: not compared, said.
sed 's/"driver":"[^"]*"/"driver":"470.1"/' "$WORK/ok1.json" >"$WORK/old.json"
out=$(GPULSE_FAKE_BENCH_SCREEN_FAULT=sum_u64:3 "$GPULSE" bench --screen --reference "$WORK/old.json" 2>&1) ||
	fail "another driver's reference: $out"
grep -q 'note: reference not compared: driver 470.1, .*: this run starts a new reference' <<<"$out" || fail "no note: $out"

# Usage and bad files.
rc=0; "$GPULSE" bench --screen --quick --full >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--quick --full: exit $rc"
echo '{}' >"$WORK/junk.json"
rc=0; out=$("$GPULSE" bench --screen --compare "$WORK/junk.json" 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q "not a 'gpulse bench --screen --json' result" <<<"$out" || fail "junk file: $rc $out"
echo PASS
