#!/usr/bin/env python3
"""Compare libgpulse-inject.so's dump (GPULSE_INJECT_DUMP) with what
tests/gpu/inject_known.cu says it did. Prints one PASS/FAIL line per
check and exits 1 if any failed.

  inject_check.py EXPECTED.json DUMP.json MODE
MODE: full (everything exact), profiler-api (only the profiler region),
nvtx (only kernels inside the phase_a ranges), continuous (the census's
estimates within 5% of the truth, no kernel tracing), off (stepped aside,
nothing traced)."""
import json
import sys

exp = json.load(open(sys.argv[1]))
dump = json.load(open(sys.argv[2]))
mode = sys.argv[3]
fails = 0


def check(name, ok, detail=""):
    global fails
    print(f"{'PASS' if ok else 'FAIL'} {mode:12s} {name}: {detail}")
    if not ok:
        fails += 1


def launches(sub):
    return sum(k["launches"] for k in dump["kernels"] if sub in k["name"])


def copy(kind, pinned):
    return next((c for c in dump["copies"] if c["kind"] == kind and c["pinned"] == pinned),
                {"count": 0, "bytes": 0})


total_launches = sum(k["launches"] for k in dump["kernels"])
check("no records dropped", dump["records_dropped_total"] == 0 and dump["dropped"] == 0,
      f"records_dropped_total={dump['records_dropped_total']} bound_drops={dump['dropped']}")

if mode == "full":
    check("not stepped aside", not dump["stepped_aside"], dump.get("reason", ""))
    for sub, n in exp["kernels"].items():
        check(f"kernel {sub}", launches(sub) == n, f"{launches(sub)} launches, expected {n}")
    check("total launches", total_launches == sum(exp["kernels"].values()),
          f"{total_launches} vs {sum(exp['kernels'].values())}")
    k = next(k for k in dump["kernels"] if "k_add(" in k["name"])
    shape = exp["kernel_shape"]["k_add("]
    check("k_add grid/block", k["grid"] == shape["grid"] and k["block"] == shape["block"],
          f"grid {k['grid']} block {k['block']}")
    check("k_add p50 within [min,max]", k["min_ns"] <= k["p50_ns"] <= k["max_ns"] and
          k["p50_ns"] <= k["p99_ns"], f"min {k['min_ns']} p50 {k['p50_ns']} p99 {k['p99_ns']} max {k['max_ns']}")
    check("demangled names", any(k["name"].startswith("void k_scale<float>(float*, float, int)")
                                 for k in dump["kernels"]),
          ", ".join(sorted(k["name"] for k in dump["kernels"]))[:200])
    for c in exp["copies"]:
        got = copy(c["kind"], c["pinned"])
        check(f"copy {c['kind']} {'pinned' if c['pinned'] else 'pageable'}",
              got["count"] == c["count"] and got["bytes"] == c["bytes"],
              f"{got['count']} x, {got['bytes']} B; expected {c['count']} x, {c['bytes']} B"
              + (f", {got.get('bandwidth_gbps', 0):.1f} GB/s" if got["count"] else ""))
    for name, n in exp["ranges"].items():
        r = next((r for r in dump["ranges"] if r["name"] == name), {"count": 0})
        check(f"nvtx range {name}", r["count"] == n, f"{r['count']} vs {n}")
    uvm = dump["uvm"]
    h2d = sum(u["bytes_h2d"] for u in uvm)
    faults = sum(u["gpu_page_faults"] + u["cpu_page_faults"] for u in uvm)
    check("unified memory counters", h2d > 0 and faults > 0,
          f"h2d {h2d} B (managed {exp['managed_bytes']} B), faults {faults}, "
          f"d2h {sum(u['bytes_d2h'] for u in uvm)} B")
    syncs = sum(s["syncs"] for s in dump["streams"])
    check("synchronisation waits", syncs > 0,
          f"{syncs} syncs, {sum(s['sync_wait_ns'] for s in dump['streams'])} ns waiting")
    busy = [s for s in dump["streams"] if s["busy_ns"] > 0]
    check("per-stream busy/gap", len(busy) >= 3 and all(s["gap_ns"] >= 0 for s in busy),
          f"{len(busy)} streams with work")
elif mode == "profiler-api":
    want = exp["kernels"][exp["profiler_kernel"]]
    check("only the profiler region", launches(exp["profiler_kernel"]) == want and total_launches == want,
          f"{launches(exp['profiler_kernel'])} in region, {total_launches} total, expected {want}")
elif mode == "nvtx":
    want = exp["kernels"][exp["nvtx_kernel"]]
    check("only inside nvtx:phase_a", launches(exp["nvtx_kernel"]) == want and total_launches == want,
          f"{launches(exp['nvtx_kernel'])} in ranges, {total_launches} total, expected {want}")
elif mode == "continuous":
    # The census (launch callbacks in windows, no kernel tracing): its
    # counts, scaled by the time observed, within 5% of the truth.
    check("not stepped aside", not dump["stepped_aside"], dump.get("reason", ""))
    check("census, no kernel tracing", dump.get("source") == "census" and not dump.get("lasting_cost"),
          f"source {dump.get('source')}, lasting_cost {dump.get('lasting_cost')}")
    for sub, n in exp["kernels"].items():
        got = launches(sub)
        check(f"census kernel {sub}", abs(got - n) <= 0.05 * n, f"{got} estimated, {n} launched")
    want = sum(exp["kernels"].values())
    check("census total launches", abs(total_launches - want) <= 0.05 * want,
          f"{total_launches} estimated of {want}")
    timed = sum(1 for k in dump["kernels"] if k["total_ns"] > 0)
    check("census timed kernels", timed >= 1, f"{timed} kernels with sampled GPU time; "
          f"census {json.dumps(dump.get('census'))}")
    # A program shorter than the first window's allowance ends inside it:
    # that window, still open, is in the log with close 0.
    opened = dump["windows"] + sum(1 for w in dump.get("window_log_mono_ns", []) if w[1] == 0)
    check("census window ran", opened >= 1, f"windows {dump['windows']} closed, {opened} in all, "
          f"duty {dump['governor']['duty_ppm']} ppm, estimate {dump['governor']['estimate_ppm']} ppm")
elif mode == "off":
    check("stepped aside", dump["stepped_aside"] and total_launches == 0, dump.get("reason", ""))
sys.exit(1 if fails else 0)
