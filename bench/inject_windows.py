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
import os
import random
import statistics
import sys

runs = [json.loads(l) for l in open(sys.argv[1])]


def windows_of(r):
    if not r.get("dump"):
        return [], None
    path = r["dump"]
    if not os.path.exists(path):  # the files brought back beside the runs
        path = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), os.path.basename(path))
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"{r['config']} round {r['round']}: dump unreadable: {e}", file=sys.stderr)
        return [], None
    gv = d.get("governor", {})
    # What the governor priced a window's time at (rate x cost per launch),
    # to set against the slowdown measured inside windows.
    priced = gv.get("rate_hz", 0) * gv.get("cost_ns", 0) / 1e9
    windows_of.priced = priced, d.get("census", {}).get("lib_cpu_in_windows_ppm")
    return d.get("window_log_mono_ns", []), gv.get("duty_ppm")


def boot_median(xs, n=2000):
    rnd = random.Random(1)
    ms = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return ms[int(0.025 * n)], ms[int(0.975 * n) - 1]


# Within each process: its iterations (chunks of the series) inside the
# library's windows against those outside (from 100 ms after a window's
# close to the next one's open), and the whole run's mean against that
# outside median: what the windows cost the process, free of the spread
# between processes. (A cost paid outside the windows too is not in it:
# the ratio to plain in the overhead table covers that.)
print("within each run (median over runs, 95% interval): mean inside windows / median outside;")
print("the run's mean / outside; and 1 + steady duty x (inside - 1)")
print("priced: the governor's own figure for a window's time (launch rate x cost per launch);")
print("lib cpu: the library thread's CPU time inside windows, per window time")
print(f"{'workload':9s} {'config':28s} {'runs':>4s} {'inside/outside':>26s} {'run mean/outside':>26s} "
      f"{'at steady duty':>26s} {'priced':>18s} {'lib cpu':>10s}")
groups = {}
for r in runs:
    if r["rc"] != 0 or not r["result"] or not r["result"].get("series") or r["config"] == "plain":
        continue
    wins, duty = windows_of(r)
    if not wins:
        continue
    series = r["result"]["series"]
    inside, outside = [], []
    for i, (t0, v) in enumerate(series):
        t1 = series[i + 1][0] if i + 1 < len(series) else t0 + (t0 - series[i - 1][0] if i else 0)
        if any(a < t1 and (b == 0 or b > t0) for a, b in wins):
            inside.append(v)
        elif any(b and 0 <= t0 - b < 100_000_000 for a, b in wins):
            continue
        else:
            outside.append(v)
    if len(inside) < 3 or len(outside) < 3:
        continue
    out = statistics.median(outside)
    g = groups.setdefault((r["workload"], r["config"]), {"in": [], "mean": [], "steady": [],
                                                         "priced": [], "lib": []})
    priced, lib = windows_of.priced
    g["priced"].append(priced)
    if lib is not None:
        g["lib"].append(lib)
    # Mean, not median, inside: a window's edges cost in a few chunks.
    g["in"].append(statistics.mean(inside) / out)
    g["mean"].append(statistics.mean(v for _, v in series) / out)
    if duty is not None:
        # At the governor's steady plan (the run's first seconds hold the
        # rate-finding windows, more often than later ones).
        g["steady"].append(1 + duty / 1e6 * (g["in"][-1] - 1))
for (w, c), g in sorted(groups.items()):
    def iv(xs):
        lo, hi = boot_median(xs) if len(xs) > 1 else (xs[0], xs[0])
        return f"{statistics.median(xs):8.4f} ({lo:.4f}-{hi:.4f})"
    pr = f"{100 * min(g['priced']):.2f}-{100 * max(g['priced']):.2f}%"
    lib = f"{statistics.median(g['lib']) / 1e4:.2f}%" if g["lib"] else "-"
    print(f"{w:9s} {c:28s} {len(g['in']):4d} {iv(g['in']):>26s} {iv(g['mean']):>26s} "
          f"{iv(g['steady']) if g['steady'] else '-':>26s} {pr:>18s} {lib:>10s}")
print()

# Across processes, in the same round: the median step outside windows
# against the plain run's median. The within-run figures above cannot see
# a cost the library adds to every step, inside windows or not (a kind
# left on, a callback that stays subscribed, the library's thread); this
# can, at the price of the spread between processes of one binary, which
# is why it is given per round and with its range.
print("outside windows against plain in the same round (median over rounds, range):")
plain_med = {(r["workload"], r["round"]): statistics.median(v for _, v in r["result"]["series"])
             for r in runs if r["config"] == "plain" and r["rc"] == 0 and r["result"]
             and r["result"].get("series")}
across = {}
for r in runs:
    if r["config"] == "plain" or r["rc"] != 0 or not r["result"] or not r["result"].get("series"):
        continue
    base = plain_med.get((r["workload"], r["round"]))
    if not base:
        continue
    wins, _ = windows_of(r)
    series = r["result"]["series"]
    outside = [v for i, (t0, v) in enumerate(series)
               if not any(a <= t0 and (b == 0 or t0 < b + 100_000_000) for a, b in wins)]
    if len(outside) >= 3:
        across.setdefault((r["workload"], r["config"]), []).append(statistics.median(outside) / base)
print(f"{'workload':9s} {'config':28s} {'rounds':>6s} {'outside / plain':>16s} {'range':>17s}")
for (w, c), xs in sorted(across.items()):
    print(f"{w:9s} {c:28s} {len(xs):6d} {statistics.median(xs):16.4f} {min(xs):8.4f}-{max(xs):.4f}")
print()

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
    wins, _ = windows_of(r)
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
