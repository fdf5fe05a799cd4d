#!/usr/bin/env python3
"""/metrics latency while the HTTP API is busy (issue 14, items 2 and 3).

One gpulsed (the bundled H200 recording replayed at 100x into a fresh
store, and a profiling socket) is scraped N times in each of three phases,
one scrape every 20 ms on a new connection, as Prometheus scrapes:

  idle      nothing else running
  queries   4 heavy range queries in flight (2 evaluating, 2 waiting with
            the default query.max_concurrency), each minutes of CPU
  captures  4 trace captures waiting on processes that never answer
            (tests/profile/fake_inject_client mute), each 60 s + 5 s

and prints one Markdown table of p50, p99 and max latency, and scrapes
that failed or took over --timeout seconds. A gpulsed without the query
limits (before issue 14) can be measured too: its scrapes time out.

Usage: bench/http_heavy_queries.py [--build DIR] [--scrapes N] [--timeout S] [--fake PATH]
"""
import argparse
import http.client
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REC = os.path.join(SRC, "data", "recordings", "h200-phases-10hz.csv")
HEAVY = "max_over_time(quantile_over_time(0.5, gpulse_gpu_power_watts[1h])[5s:1ms])"


def get(port, path, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def metric(port, name):
    try:
        _, body = get(port, "/metrics", 10)
    except OSError:
        return None
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def wait(cond, what, secs=30):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    print(f"note: {what} not reached in {secs} s", file=sys.stderr)
    return False


def scrape(port, n, timeout):
    lat, bad = [], 0
    for _ in range(n):
        t0 = time.monotonic()
        try:
            status, _ = get(port, "/metrics", timeout)
            if status != 200:
                bad += 1
        except OSError:
            bad += 1
        lat.append(time.monotonic() - t0)
        time.sleep(0.02)
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
    return q(0.5), q(0.99), lat[-1], bad


def rss_mb(pid):
    """gpulsed's resident memory now and at its peak (VmRSS, VmHWM), MB."""
    v = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                v[line.split(":")[0]] = int(line.split()[1]) / 1024
    return v.get("VmRSS", 0), v.get("VmHWM", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--scrapes", type=int, default=500)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--fake", help="fake_inject_client with the mute mode (default: the build's)")
    a = ap.parse_args()
    gpulsed = os.path.join(a.build, "gpulsed")
    fake = a.fake or os.path.join(a.build, "tests", "fake_inject_client")
    for f in (gpulsed, fake):
        if not os.access(f, os.X_OK):
            sys.exit(f"build first: {f}")
    work = tempfile.mkdtemp(prefix="gpulse-heavy.")
    procs = []
    try:
        sock = os.path.join(work, "inject.sock")
        with open(os.path.join(work, "g.yml"), "w") as f:
            f.write(f'storage:\n  path: "{work}/db"\nprofiling:\n  socket: "{sock}"\n')
        log = open(os.path.join(work, "gpulsed.log"), "w+")
        d = subprocess.Popen([gpulsed, "--listen", "127.0.0.1:0", "--config", f"{work}/g.yml",
                              "--replay", REC, "--replay-speed", "100"], stderr=log)
        procs.append(d)
        port = None
        for _ in range(100):
            log.seek(0)
            for line in log:
                if "serving http" in line and " port " in line:
                    port = int(line.split(" port ")[1].split()[0])
            if port:
                break
            time.sleep(0.1)
        if not port:
            sys.exit("gpulsed did not start")
        count = "/api/v1/query?query=" + urllib.parse.quote("count_over_time(gpulse_gpu_power_watts[1h])")

        def samples():
            try:
                r = json.loads(get(port, count, 10)[1])["data"]["result"]
                return float(r[0]["value"][1]) if r else 0
            except (OSError, ValueError, KeyError):
                return 0
        wait(lambda: samples() >= 3000, "3000 samples in the store")
        rows = [("idle", scrape(port, a.scrapes, a.timeout) + rss_mb(d.pid))]

        now = time.time()
        qpath = (f"/api/v1/query_range?query={urllib.parse.quote(HEAVY)}"
                 f"&start={now - 5:.3f}&end={now:.3f}&step=0.006")
        curls = [subprocess.Popen(["curl", "-s", "-o", "/dev/null", "--max-time", "600",
                                   f"http://127.0.0.1:{port}{qpath}"]) for _ in range(4)]
        procs += curls
        time.sleep(1)
        wait(lambda: metric(port, "gpulse_queries_running") == 2, "2 queries running", 10)
        rows.append(("4 heavy queries", scrape(port, a.scrapes, a.timeout) + rss_mb(d.pid)))
        running = metric(port, "gpulse_queries_running")
        for c in curls:
            c.kill()
            c.wait()
        wait(lambda: metric(port, "gpulse_queries_running") in (0, None), "queries stopped", 30)

        mutes = [subprocess.Popen([fake, sock, "mute"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for _ in range(4)]
        procs += mutes
        wait(lambda: metric(port, "gpulse_profile_clients") == 4, "4 libraries connected", 10)
        caps = [subprocess.Popen(["curl", "-s", "-o", "/dev/null", "--max-time", "120",
                                  f"http://127.0.0.1:{port}/api/v1/trace?pid={m.pid}&seconds=60"])
                for m in mutes]
        procs += caps
        time.sleep(1)
        wait(lambda: metric(port, "gpulse_trace_captures_running") == 4, "4 captures running", 10)
        rows.append(("4 trace captures", scrape(port, a.scrapes, a.timeout) + rss_mb(d.pid)))

        print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: nproc "
              f"{os.cpu_count()}, kernel {platform.release()}; gpulsed: {gpulsed}")
        print(f"command: bench/http_heavy_queries.py --build {a.build} --scrapes {a.scrapes} "
              f"--timeout {a.timeout:g}")
        print(f"(queries running during the query phase's end: {running})\n")
        print("| phase | scrapes | p50 ms | p99 ms | max ms | failed or over "
              f"{a.timeout:g} s | RSS at the end, MB | peak RSS so far, MB |")
        print("|---|---|---|---|---|---|---|---|")
        for name, (p50, p99, mx, bad, rss, hwm) in rows:
            print(f"| {name} | {a.scrapes} | {p50 * 1e3:.1f} | {p99 * 1e3:.1f} | {mx * 1e3:.1f} | "
                  f"{bad} | {rss:.1f} | {hwm:.1f} |")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM if p is procs[0] else signal.SIGKILL)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
