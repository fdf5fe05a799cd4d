"""Rows for scripts/gpu-check.sh's bench section: gpulse bench --quick --json
run five times against bench/bench_anchor.py's PyTorch figures, and the
spread of each figure's medians over the five runs.
  python3 bench/bench_compare_anchor.py ANCHOR.json RUN.json...
Prints one row per check: NAME<TAB>PASS|FAIL|INFO<TAB>detail."""
import json
import statistics
import sys

LIMITS = [  # (gpulse figure, anchor key, allowed shortfall)
    (("matmul", "bf16"), "bf16_matmul_flops", 0.05),
    (("dram_copy", ""), "d2d_copy_bytes_per_second", 0.05),
    (("h2d", "pinned"), "h2d_pinned_bytes_per_second", 0.10),
    (("d2h", "pinned"), "d2h_pinned_bytes_per_second", 0.10),
]


def unit(v, key):
    return f"{v / 1e12:.1f} TFLOP/s" if "flops" in key else f"{v / 1e9:.1f} GB/s"


def main():
    anchor = json.load(open(sys.argv[1]))
    runs = [json.load(open(p)) for p in sys.argv[2:]]
    med = {}
    for r in runs:
        for f in r["figures"]:
            med.setdefault((f["name"], f["variant"]), []).append(f["median"])
    for fig, key, limit in LIMITS:
        got = med.get(fig)
        if not got:
            print(f"bench {fig[0]} {fig[1]} vs torch\tFAIL\tno figure in the runs")
            continue
        g = statistics.median(got)
        a = anchor[key]["median"]
        ratio = g / a
        ok = ratio >= 1 - limit
        print(f"bench {fig[0]} {fig[1] or ''} vs torch\t{'PASS' if ok else 'FAIL'}\t"
              f"gpulse {unit(g, key)} / torch {unit(a, key)} = {ratio:.3f} (>= {1 - limit:.2f})")
    worst = []
    for fig, vals in sorted(med.items()):
        if len(vals) < 2:
            continue
        spread = (max(vals) - min(vals)) / statistics.median(vals)
        worst.append((spread, fig))
        print(f"bench spread {fig[0]} {fig[1]}\t{'PASS' if spread <= 0.02 else 'FAIL'}\t"
              f"{len(vals)} runs, (max-min)/median {spread * 100:.2f}% (<= 2%)")
    for r in runs:
        fr = {(f["name"], f["variant"]): f for f in r["figures"]}
        bf = fr.get(("matmul", "bf16"))
        if bf:
            print(f"bench peak share bf16\tINFO\t{bf['peak_fraction'] * 100:.0f}% of "
                  f"{bf['peak'] / 1e12:.0f} TFLOP/s ({bf['peak_source']})")
            break
    durations = [r["duration_seconds"] for r in runs]
    print(f"bench --quick duration\t{'PASS' if max(durations) <= 60 else 'FAIL'}\t"
          f"{min(durations):.0f}-{max(durations):.0f} s (<= 60 s)")
    bad = [r for r in runs if not r["baseline"]]
    print(f"bench quiet runs are baselines\t{'PASS' if not bad else 'FAIL'}\t"
          f"{len(runs) - len(bad)} of {len(runs)}" + (f": {bad[0]['notes']}" if bad else ""))


if __name__ == "__main__":
    main()
