#!/usr/bin/env python3
"""Default mode's picture against the exact one, side by side: for each
workload with dumps of both configurations from bench/inject_overhead.sh
(dump-WORKLOAD-default-R.json and dump-WORKLOAD-full-R.json), the top 10
kernels of the full trace by GPU time, each one's share of GPU time and of
launches in both, and the largest differences. The goals (issue 13): GPU
time shares within 5 percentage points, launch shares within 5% of the
truth's. Launches are compared as shares because the two runs are separate
processes of one length, not of one count. The default runs must span
MIN_WINDOWS census windows together (the issue asks for runs long enough
to span many windows): fewer are reported SHORT, not judged, since a
plan at a small duty opens a window every few seconds and a few windows'
samples do not stand for a run (on the H200, 2-3 windows an 8 s inference
run put its GPU-time shares 5-7 points off).

  inject_accuracy.py DUMP_DIR [TOP]"""
import glob
import json
import os
import sys

d = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 10
MIN_WINDOWS = 10


def load(pattern):
    """Kernels of all rounds merged (name -> [launches, total_ns]), and the
    census windows the rounds spanned together."""
    out, windows = {}, 0
    for f in sorted(glob.glob(os.path.join(d, pattern))):
        try:
            dump = json.load(open(f))
        except (OSError, ValueError):
            continue
        windows += dump.get("windows", 0)
        for k in dump.get("kernels", []):
            e = out.setdefault(k["name"], [0, 0])
            e[0] += k["launches"]
            e[1] += k["total_ns"]
    return out, windows


workloads = sorted({os.path.basename(f).split("-")[1] for f in glob.glob(os.path.join(d, "dump-*-full-*.json"))})
worst = []
for w in workloads:
    full, _ = load(f"dump-{w}-full-*.json")
    dflt, windows = load(f"dump-{w}-default-*.json")
    if not full or not dflt:
        print(f"{w}: no dumps of both configurations")
        continue
    ft = sum(v[1] for v in full.values()) or 1
    fl = sum(v[0] for v in full.values()) or 1
    dt = sum(v[1] for v in dflt.values()) or 1
    dl = sum(v[0] for v in dflt.values()) or 1
    print(f"== {w}: top {top} kernels of the full trace by GPU time")
    print(f"{'time% full':>10} {'default':>8} {'diff pp':>8} {'launch% full':>12} {'default':>8} {'rel':>7}  kernel")
    max_pp = max_rel = 0.0
    for name, (l, t) in sorted(full.items(), key=lambda kv: -kv[1][1])[:top]:
        dlaunch, dtime = dflt.get(name, [0, 0])
        sf, sd = 100.0 * t / ft, 100.0 * dtime / dt
        lf, ld = 100.0 * l / fl, 100.0 * dlaunch / dl
        rel = abs(ld - lf) / lf if lf else 0.0
        # Launch shares are held to 5% for kernels with at least 1% of
        # the launches: a kernel launched once at start-up is estimated
        # as once per share of the time observed.
        counted = lf >= 1.0
        max_pp = max(max_pp, abs(sd - sf))
        if counted:
            max_rel = max(max_rel, rel)
        print(f"{sf:10.2f} {sd:8.2f} {sd - sf:+8.2f} {lf:12.2f} {ld:8.2f} {100 * rel:6.1f}%"
              f"{'' if counted else '*'} {name[:70]}")
    print("  (* under 1% of the launches: its launch share is not held to the goal)")
    ok = max_pp <= 5.0 and max_rel <= 0.05
    if windows < MIN_WINDOWS:
        print(f"SHORT {w}: the default runs spanned {windows} census windows (at least {MIN_WINDOWS} "
              f"to judge); largest GPU-time share difference {max_pp:.2f} pp, launch-share error "
              f"{100 * max_rel:.1f}%: run longer (INJECT_SECONDS, INJECT_ROUNDS)")
        worst.append(False)
        continue
    print(f"{'PASS' if ok else 'FAIL'} {w}: largest GPU-time share difference {max_pp:.2f} pp (goal 5), "
          f"largest launch-share error {100 * max_rel:.1f}% (goal 5%)")
    worst.append(ok)
sys.exit(0 if worst and all(worst) else 1)
