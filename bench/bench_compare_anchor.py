"""Rows for scripts/gpu-check.sh's bench section: gpulse bench --quick --json
run five times against bench/bench_anchor.py's PyTorch figures, and the
spread of each figure's value over the five runs (the value is made as the
figure's "estimator" says: the median of its runs, or for the host-bound
figures the fast decile of its repetitions). Beside each host-bound
figure's row an INFO row gives the spread its median would have had over
the same runs (the old estimator) and how much one run's repetitions
varied, so that the change of estimator can be judged on one call.
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
    med, medians, inside, how, size = {}, {}, {}, {}, {}
    for r in runs:
        for f in r["figures"]:
            k = (f["name"], f["variant"])
            # Results of a gpulse before figures had a value: the median.
            med.setdefault(k, []).append(f.get("value", f["median"]))
            medians.setdefault(k, []).append(f["median"])
            inside.setdefault(k, []).append(f["spread_ratio"])
            how[k] = f.get("estimator", "median of %d runs" % f["runs"])
            size[k] = f.get("size", "")
    for fig, key, limit in LIMITS:
        got = med.get(fig)
        if not got:
            print(f"bench {fig[0]} {fig[1]} vs torch\tFAIL\tno figure in the runs")
            continue
        g = statistics.median(got)  # values; for these figures the median
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
              f"{len(vals)} runs, (max-min)/median {spread * 100:.2f}% (<= 2%), {how[fig]}")
        if not how[fig].startswith("median"):
            m = medians[fig]
            ms = (max(m) - min(m)) / statistics.median(m)
            print(f"bench  ... {fig[0]} {fig[1]} by median\tINFO\t"
                  f"spread of the runs' medians {ms * 100:.2f}%; value/median "
                  f"{statistics.median(vals) / statistics.median(m):.3f}; inside one run "
                  f"{min(inside[fig]) * 100:.1f}-{max(inside[fig]) * 100:.1f}%"
                  + (f"; {size[fig]}" if "pages" in size[fig] else ""))
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
