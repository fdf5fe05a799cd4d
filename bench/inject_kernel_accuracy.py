#!/usr/bin/env python3
"""Per-kernel accuracy of default mode against an exact trace of the same
workload (scripts/gpu-check.sh accuracy): for each workload W with dumps
DIR/dump-W-default-R.json (rounds R, merged) and DIR/dump-W-full-R.json,
the top kernels of the exact trace by GPU time, each with its mean GPU
time, share of GPU time and share of launches both ways, and the verdict
against the goals (issue 34):
  share of GPU time within 2 points (top 10);
  mean GPU time within 10% for kernels of >= 2 us, within 0.3 us below;
  launches within 5% (as shares of launches: the runs are separate
  processes of one length, not of one count).
A kernel's mean in default mode comes from its sampled launches only; the
rounds' spread of that mean (min..max over rounds) is printed as its
interval, and the census windows the default rounds spanned are counted
(the sampling error shrinks with them). With the sample log
(DIR/samples-W-default-R.tsv: name, held a->b ns, floor ns, held, idle)
the offset each kernel's samples would have needed is printed too: the
mean held interval minus the trace's mean.

  inject_kernel_accuracy.py DIR [WORKLOAD...]     exit 1 if any goal fails"""
import glob
import json
import os
import statistics
import sys

d = sys.argv[1]
only = sys.argv[2:]
TOP = 10


def dumps(pattern):
    out = []
    for f in sorted(glob.glob(os.path.join(d, pattern))):
        try:
            out.append(json.load(open(f)))
        except (OSError, ValueError):
            pass
    return out


def merge(ds):
    k = {}
    for dump in ds:
        for e in dump.get("kernels", []):
            m = k.setdefault(e["name"], [0, 0])
            m[0] += e["launches"]
            m[1] += e["total_ns"]
    return k


def short(name, n=70):
    return name if len(name) <= n else name[: n - 3] + "..."


workloads = sorted({os.path.basename(f).split("-")[1] for f in glob.glob(os.path.join(d, "dump-*-full-*.json"))})
if only:
    workloads = [w for w in workloads if w in only]
failed = False
for w in workloads:
    full = dumps(f"dump-{w}-full-*.json")
    dflt = dumps(f"dump-{w}-default-*.json")
    if not full or not dflt:
        print(f"{w}: missing dumps (full {len(full)}, default {len(dflt)})")
        failed = True
        continue
    fk, dk = merge(full), merge(dflt)
    windows = sum(x.get("windows", 0) for x in dflt)
    floor = statistics.mean(x.get("census", {}).get("floor_mean_ns", 0) for x in dflt)
    offs = [x.get("sample_offset", {}).get("offset_floors") for x in dflt]
    cals = [x.get("sample_offset", {}).get("calibration", {}) for x in dflt]
    for c in cals:
        print(f"{w}: calibration ok={c.get('ok')} {c.get('why', '')} offset {c.get('offset_ns', 0):.0f} ns "
              f"gap {c.get('gap_ns', 0):.0f} floor {c.get('floor_ns', 0):.0f} floors {c.get('floors', 0):.3f} "
              f"spread {c.get('spread_ns', 0):.0f} slope {c.get('slope', 0):.4f} "
              f"timer {c.get('timer_step_ns', 0):.0f} ns, took {c.get('took_ns', 0) / 1e6:.1f} ms")
    ft, dt = sum(v[1] for v in fk.values()), sum(v[1] for v in dk.values())
    fl, dl = sum(v[0] for v in fk.values()), sum(v[0] for v in dk.values())
    # per-round means of each kernel, for its interval
    rounds = [merge([x]) for x in dflt]
    # sample log: mean held a->b per kernel
    held = {}
    for f in glob.glob(os.path.join(d, f"samples-{w}-default-*.tsv")):
        for line in open(f, errors="replace"):
            p = line.rstrip("\n").split("\t")
            if len(p) >= 5:
                try:
                    held.setdefault(p[0], []).append(int(p[1]))
                except ValueError:
                    pass
    print(f"== {w}: {len(dflt)} default rounds, {windows} census windows, floor {floor:.0f} ns; "
          f"exact trace {len(full)} round(s); kernels {len(fk)} exact, {len(dk)} default")
    print(f"{'kernel':70s} {'mean us exact':>13s} {'default':>8s} {'interval':>15s} {'share exact':>11s} "
          f"{'default':>7s} {'launch% exact':>13s} {'default':>7s} {'needed off':>10s}  verdict")
    top = sorted(fk, key=lambda n: -fk[n][1])[:TOP]
    for n in top:
        fl_n, ft_n = fk[n]
        fm = ft_n / fl_n if fl_n else 0
        dl_n, dt_n = dk.get(n, [0, 0])
        dm = dt_n / dl_n if dl_n else float("nan")
        rm = [r[n][1] / r[n][0] for r in rounds if n in r and r[n][0]]
        iv = f"{min(rm)/1e3:.2f}..{max(rm)/1e3:.2f}" if rm else "-"
        fs, ds = 100 * ft_n / ft if ft else 0, 100 * dt_n / dt if dt else 0
        fls, dls = 100 * fl_n / fl if fl else 0, 100 * dl_n / dl if dl else 0
        need = ""
        if n in held and fm:
            need = f"{statistics.mean(held[n]) - fm:.0f}"
        bad = []
        if abs(ds - fs) > 2:
            bad.append("share")
        if not dl_n:
            bad.append("missing")
        elif fm >= 2000 and abs(dm - fm) > 0.10 * fm:
            bad.append("mean")
        elif fm < 2000 and abs(dm - fm) > 300:
            bad.append("mean")
        if fls and abs(dls - fls) > 0.05 * fls:
            bad.append("launches")
        failed |= bool(bad)
        print(f"{short(n):70s} {fm/1e3:13.2f} {dm/1e3:8.2f} {iv:>15s} {fs:11.1f} {ds:7.1f} {fls:13.2f} "
              f"{dls:7.2f} {need:>10s}  {'PASS' if not bad else 'FAIL ' + ','.join(bad)}")
    print()
sys.exit(1 if failed else 0)
