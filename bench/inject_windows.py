#!/usr/bin/env python3
"""Where the empty-kernel loop's time goes under libgpulse-inject.so:
lines each run's per-round series (bench/inject_empty.cu) up with the
continuous windows' edges in that run's dump (window_log_mono_ns, both
CLOCK_MONOTONIC), and gives the median ns per launch of rounds inside a
window, in the first second after one, 1-5 s after, and later, against
the plain runs of the same call.

  inject_windows.py RUNS.jsonl      (bench/inject_overhead.sh's runs)
"""
import json
import statistics
import sys

runs = [json.loads(l) for l in open(sys.argv[1])]
empty = [r for r in runs if r["workload"] == "empty" and r["rc"] == 0 and r["result"]
         and r["result"].get("series")]
plain = [p for r in empty if r["config"] == "plain" for _, p in r["result"]["series"]]
if not plain:
    sys.exit("inject_windows: no plain empty-loop runs with a series")
base = statistics.median(plain)
print(f"plain: median {base:.0f} ns per launch over {len(plain)} rounds")
print(f"{'config':16s} {'round':>5s} {'windows':>7s}  "
      + "  ".join(f"{k:>16s}" for k in ("in window", "<1 s after", "1-5 s after", "later", "before first")))
for r in empty:
    if r["config"] == "plain":
        continue
    wins = []
    if r.get("dump"):
        try:
            wins = json.load(open(r["dump"])).get("window_log_mono_ns", [])
        except (OSError, ValueError) as e:
            print(f"{r['config']} round {r['round']}: dump unreadable: {e}", file=sys.stderr)
    series = r["result"]["series"]
    bins = {"in window": [], "<1 s after": [], "1-5 s after": [], "later": [], "before first": []}
    for i, (t0, ns) in enumerate(series):
        t1 = series[i + 1][0] if i + 1 < len(series) else t0 + int(ns * 50000)
        if any(a < t1 and (b == 0 or b > t0) for a, b in wins):
            bins["in window"].append(ns)
            continue
        closes = [b for a, b in wins if b and b <= t0]
        if not closes:
            bins["before first"].append(ns)
            continue
        age = (t0 - max(closes)) / 1e9
        bins["<1 s after" if age < 1 else "1-5 s after" if age < 5 else "later"].append(ns)

    def cell(xs):
        return f"{statistics.median(xs) / base:6.3f} ({len(xs):3d})" if xs else f"{'-':>16s}"
    print(f"{r['config']:16s} {r['round']:5d} {len(wins):7d}  "
          + "  ".join(f"{cell(v):>16s}" for v in bins.values()))

# CPU time of the process's threads (inject_empty lists them at its end):
# a helper thread that takes CPU matters most when the process is pinned.
print("threads by CPU time (ms), the launching thread first:")
for r in empty:
    th = r["result"].get("threads") or []
    if not th:
        continue
    main, rest = th[0], sorted(th[1:], key=lambda x: -x[1])
    print(f"{r['config']:16s} {r['round']:5d}  {main[0]}={main[1]:.0f}  "
          + "  ".join(f"{n}={ms:.0f}" for n, ms in rest[:5] if ms > 0))
