#!/usr/bin/env python3
"""Issue 36 on a real GPU: gpulsed's split of the device's GPM activity
across two processes sharing GPU 0 by time-slicing, against the truth
of each workload alone (tests/gpu/tenants_workload.py).

    tenants_check.py --url URL --gpulsed-pid PID --inject-lib LIB --out DIR [--seconds S]

Scenarios: A bf16 GEMMs + B large elementwise; A a launch-bound loop of
tiny kernels + B large elementwise; each with the library in both and
with B without it (NVML's samples only). For each: A alone, B alone,
then both, S seconds each (default 20; the first 5 s of each run are
left out: warm-up and the library's first intervals).

The truth of a process's part while shared: its device figures alone
times the share of its alone throughput it kept while shared (its own
iteration rate, measured without gpulse), normalised to the parts'
sum; that is what time-slicing gives each when a context runs alone on
the GPU while it holds it. Printed per scenario: each process's share
of SM active, tensor and DRAM bandwidth from gpulse and from the truth,
its GPU-time share, the parts' sum against the device's figure, the
class gpulse gives each tenant, and the CPU the split costs gpulsed.
Checks (issue 36): >= 90% of the tensor activity to A and >= 90% of the
DRAM bandwidth to B (GEMM scenario), each SM-active share within 5
points of its GPU-time share, parts within 1 point of the device's
figure, the class of each tenant; the scenarios without the library in
B say their error against the truth. Writes DIR/tenants.txt and
DIR/tenants.json as it goes; exit status 1 when a check failed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
METRICS = ("sm", "tensor", "dram")
DEVICE = {"sm": "gpulse_gpu_sm_active_ratio", "tensor": "gpulse_gpu_tensor_active_ratio",
          "dram": "gpulse_gpu_dram_bandwidth_ratio"}
PROC = {"sm": "gpulse_process_sm_active_ratio", "tensor": "gpulse_process_tensor_active_ratio",
        "dram": "gpulse_process_dram_bandwidth_ratio"}
LINE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

out_lines = []


def say(args, text=""):
    print(text, flush=True)
    out_lines.append(text)
    with open(os.path.join(args.out, "tenants.txt"), "w") as f:
        f.write("\n".join(out_lines) + "\n")


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def scrape(url):
    rows = []
    for line in get(url + "/metrics").splitlines():
        m = LINE.match(line)
        if m and not line.startswith("#"):
            rows.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return rows


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def run(args, tenants, tag):
    """tenants: [(name, kind, with_library)]. Runs them together, samples
    gpulsed each second after the warm-up; returns the samples and each
    one's result."""
    procs = {}
    for name, kind, lib in tenants:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="0")
        env.pop("CUDA_INJECTION64_PATH", None)
        if lib:
            env["CUDA_INJECTION64_PATH"] = args.inject_lib
            env["GPULSE_SOCKET"] = args.socket
        res = os.path.join(args.out, f"{tag}-{name}.json")
        log = open(os.path.join(args.out, f"{tag}-{name}.log"), "w")
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "tenants_workload.py"), kind,
                              str(args.seconds), res], env=env, stdout=log, stderr=log)
        procs[name] = (p, res)
    time.sleep(5)
    samples = []
    cpu0, split0 = cpu_s(args.gpulsed_pid), None
    t_end = time.monotonic() + args.seconds - 7
    while time.monotonic() < t_end:
        t = time.monotonic()
        try:
            rows = scrape(args.url)
            gpus = json.loads(get(args.url + "/api/v1/gpus"))["data"]["gpus"]
        except OSError as e:
            say(args, f"  {tag}: scrape failed: {e}")
            time.sleep(1)
            continue
        s = {"device": {}, "procs": {}, "time": {}, "tenants": {}}
        for name, lab, v in rows:
            if lab.get("gpu") != "0":
                if name == "gpulse_process_activity_split_seconds_total":
                    s["split_s"] = v
                continue
            for m in METRICS:
                if name == DEVICE[m]:
                    s["device"][m] = v
                if name == PROC[m]:
                    s["procs"].setdefault(lab["pid"], {})[m] = v
                    s["procs"][lab["pid"]]["source"] = lab.get("source")
            if name == "gpulse_process_gpu_time_seconds_total":
                s["time"][lab["pid"]] = v
        for name, lab, v in rows:
            if name == "gpulse_process_activity_split_seconds_total":
                s["split_s"] = v
        for g in gpus:
            if g["gpu"] == 0:
                for r in g.get("tenants", []):
                    s["tenants"][str(r["pid"])] = r["bound"] + (
                        f" ({r['bound_detail']})" if r.get("bound_detail") else "")
        s["t"] = t
        samples.append(s)
        if split0 is None:
            split0 = s.get("split_s", 0)
        time.sleep(max(0, 1 - (time.monotonic() - t)))
    cpu1 = cpu_s(args.gpulsed_pid)
    results = {}
    for name, (p, res) in procs.items():
        p.wait(timeout=args.seconds + 120)
        try:
            results[name] = json.load(open(res))
        except (OSError, ValueError):
            results[name] = None
    cost = None
    if samples and split0 is not None and cpu1 > cpu0:
        cost = (samples[-1].get("split_s", 0) - split0) / (cpu1 - cpu0)
    return samples, results, cost


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def scenario(args, title, a_kind, b_kind, b_lib, checks):
    say(args, f"== {title} (B {'with' if b_lib else 'without'} the library)")
    tag = f"{a_kind}-{b_kind}-{'lib' if b_lib else 'nolib'}"
    alone = {}
    for name, kind, lib in (("A", a_kind, True), ("B", b_kind, b_lib)):
        smp, res, _ = run(args, [(name, kind, lib)], f"{tag}-alone")
        alone[name] = ({m: mean([s["device"].get(m) for s in smp]) for m in METRICS}, res[name])
        say(args, f"  {name} alone ({kind}): " + " ".join(
            f"{m}={alone[name][0][m]:.3f}" for m in METRICS) +
            f" rate={res[name]['rate'] if res[name] else 'n/a'}")
    smp, res, cost = run(args, [("A", a_kind, True), ("B", b_kind, b_lib)], f"{tag}-shared")
    if not res["A"] or not res["B"] or not smp:
        say(args, "  FAIL: a workload did not finish")
        return {"title": title, "ok": False}
    pid = {n: str(res[n]["pid"]) for n in ("A", "B")}
    dev = {m: mean([s["device"].get(m) for s in smp]) for m in METRICS}
    part = {n: {m: mean([s["procs"].get(pid[n], {}).get(m) for s in smp]) for m in METRICS}
            for n in pid}
    source = {n: [s["procs"].get(pid[n], {}).get("source") for s in smp] for n in pid}
    source = {n: max(set(v), key=v.count) for n, v in source.items()}
    span = smp[-1]["t"] - smp[0]["t"]
    gtime = {n: (smp[-1]["time"].get(pid[n], 0) - smp[0]["time"].get(pid[n], 0)) / span
             if span > 0 else float("nan") for n in pid}
    bound = {}
    for n in pid:
        v = [s["tenants"].get(pid[n]) for s in smp if s["tenants"].get(pid[n])]
        bound[n] = max(set(v), key=v.count) if v else "-"
    kept = {n: res[n]["rate"] / alone[n][1]["rate"] if alone[n][1] else float("nan") for n in pid}
    truth = {n: {m: alone[n][0][m] * kept[n] for m in METRICS} for n in pid}
    say(args, f"  shared: device " + " ".join(f"{m}={dev[m]:.3f}" for m in METRICS) +
        f"; throughput kept A {kept['A']:.2f} B {kept['B']:.2f}")
    say(args, f"  {'metric':8} {'proc':4} {'gpulse':>7} {'truth':>7} {'error':>7}")
    ok = True
    shares = {}
    for m in METRICS:
        tot_g = sum(part[n][m] for n in pid)
        tot_t = sum(truth[n][m] for n in pid)
        for n in pid:
            g = part[n][m] / tot_g if tot_g > 0 else float("nan")
            t = truth[n][m] / tot_t if tot_t > 0 else float("nan")
            shares[(n, m)] = (g, t)
            say(args, f"  {m:8} {n:4} {100 * g:6.1f}% {100 * t:6.1f}% {100 * (g - t):+6.1f}")
        gap = abs(tot_g - dev[m])
        line = f"  {m}: parts sum {tot_g:.4f}, device {dev[m]:.4f} ({100 * gap:.2f} points)"
        if gap > 0.01:
            ok = False
            line += "  FAIL"
        say(args, line)
    tot_time = sum(gtime.values())
    for n in pid:
        ts = gtime[n] / tot_time if tot_time > 0 else float("nan")
        d = abs(shares[(n, "sm")][0] - ts)
        line = (f"  {n} ({res[n]['kind']}, source {source[n]}): GPU time {gtime[n]:.3f} s/s "
                f"(share {100 * ts:.1f}%), SM share within {100 * d:.1f} points; bound: {bound[n]}")
        if d > 0.05:
            ok = False
            line += "  FAIL (SM vs GPU time)"
        say(args, line)
    for what, n, m, floor in checks.get("share", []):
        g = shares[(n, m)][0]
        line = f"  check: {n} holds {100 * g:.1f}% of {m} (want >= {100 * floor:.0f}%)"
        if not g >= floor:
            ok = False
            line += "  FAIL"
        say(args, line)
    for n, want in checks.get("bound", {}).items():
        line = f"  check: {n} is {bound[n]} (want {want})"
        if not bound[n].startswith(want):
            ok = False
            line += "  FAIL"
        say(args, line)
    if cost is not None:
        say(args, f"  split cost: {100 * cost:.2f}% of gpulsed's CPU while shared")
    err = max(abs(g - t) for g, t in shares.values())
    say(args, f"  largest error against the truth: {100 * err:.1f} points; {'PASS' if ok else 'FAIL'}")
    return {"title": title, "b_library": b_lib, "ok": ok, "device": dev, "parts": part,
            "truth": truth, "alone": {n: alone[n][0] for n in pid}, "kept": kept,
            "gpu_time": gtime, "bound": bound, "source": source, "split_cpu_share": cost,
            "max_error": err}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--gpulsed-pid", type=int, required=True)
    ap.add_argument("--inject-lib", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report = []
    for b_lib in (True, False):
        gemm = {"share": [("tensor", "A", "tensor", 0.9), ("dram", "B", "dram", 0.9)],
                "bound": {"A": "compute_bound (tensor cores)", "B": "memory_bound"}}
        report.append(scenario(args, "A bf16 GEMMs, B large elementwise", "gemm", "elementwise",
                               b_lib, gemm if b_lib else {"bound": {"A": gemm["bound"]["A"]}}))
        json.dump(report, open(os.path.join(args.out, "tenants.json"), "w"), indent=1)
        launch = {"bound": {"A": "launch_bound", "B": "memory_bound"} if b_lib
                  else {"A": "launch_bound"}}
        report.append(scenario(args, "A launch-bound small kernels, B large elementwise",
                               "launch", "elementwise", b_lib, launch))
        json.dump(report, open(os.path.join(args.out, "tenants.json"), "w"), indent=1)
    ok = all(r["ok"] for r in report)
    say(args, f"tenants: {sum(r['ok'] for r in report)}/{len(report)} scenarios pass; "
        f"largest error {100 * max(r.get('max_error', 1) for r in report):.1f} points")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
