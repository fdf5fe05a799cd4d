#!/usr/bin/env python3
"""`gpulse fleet` against a large fleet, by hand (docs/PERFORMANCE.md).

A stand-in Prometheus on loopback answers the instant queries that
`gpulse fleet` makes for N GPUs (8 per host, one model, values spread
so that some GPUs are outliers, a few firing alerts), as Prometheus
would shape them. Timed, in the same run: the anchor, a client that only
fetches every answer that gpulse fleet fetches (the same queries, in
order, through the same server: the transfer and the server's cost), and
`gpulse fleet --json` itself. The ratio is what fleet adds on top of
fetching.

usage: bench/fleet_scale.py GPULSE_BINARY [N_GPUS ...]   (default 1000 10000)
"""
import http.server
import json
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request


def answers(n):
    """The result of each query gpulse fleet makes, for n GPUs."""
    rnd = random.Random(42)
    gpus = [{"instance": f"node{i // 8:05d}:9401", "job": "gpulse", "gpu": str(i % 8),
             "uuid": f"GPU-{i:08x}-0000-4000-8000-000000000000", "model": "NVIDIA H200"}
            for i in range(n)]

    def vec(f, extra=None):
        out = []
        for i, g in enumerate(gpus):
            v = f(i)
            if v is None:
                continue
            m = dict(g)
            m.update(extra(i) if extra else {})
            out.append({"metric": m, "value": [time.time(), repr(float(v))]})
        return out

    odd = set(rnd.sample(range(n), max(1, n // 100)))
    info_extra = lambda i: {"__name__": "gpulse_gpu_info", "hostname": f"node{i // 8:05d}",
                            "pci_bus_id": f"00000000:{0x18 + i % 8:02X}:00.0",
                            "driver_version": "580.65.06"}
    return {
        "gpulse_gpu_info": vec(lambda i: 1, info_extra),
        "gpulse_gpu_up": vec(lambda i: 0 if i % 997 == 0 else 1),
        "gpulse_gpu_stale": vec(lambda i: 0),
        "gpulse_gpu_last_xid": vec(lambda i: 79 if i % 499 == 0 else 0),
        "xid_total": vec(lambda i: 1 if i % 499 == 0 else None),
        "ecc": vec(lambda i: 0),
        "remap": vec(lambda i: 0),
        "remap_pending": vec(lambda i: 0),
        "remap_failed": vec(lambda i: 0),
        "throttle": vec(lambda i: 1 if i % 211 == 0 else None, lambda i: {"reason": "hw_slowdown"}),
        "ALERTS": vec(lambda i: 1 if i % 499 == 0 else None,
                      lambda i: {"alertname": "GPUFallenOffBus", "alertstate": "firing"}),
        "bottleneck": vec(lambda i: 0.8, lambda i: {"class": "compute_bound"}),
        "utilization": vec(lambda i: rnd.uniform(0.85, 0.95) if i not in odd else 0.2),
        "power": vec(lambda i: rnd.uniform(600, 680) if i not in odd else 300),
        "sm_clock": vec(lambda i: 1.98e9 if i not in odd else 1.4e9),
        "temperature": vec(lambda i: rnd.uniform(55, 65) if i not in odd else 85),
        "bench": [],
    }


def which(q):
    """The answer a query gets (by what it asks for)."""
    for key, pat in (("gpulse_gpu_info", "gpulse_gpu_info"), ("gpulse_gpu_up", "gpulse_gpu_up"),
                     ("gpulse_gpu_stale", "gpulse_gpu_stale"), ("gpulse_gpu_last_xid", "last_xid"),
                     ("xid_total", "xid_errors_total"), ("ecc", "ecc_errors_total"),
                     ("remap_pending", "remapped_rows_pending"), ("remap_failed", "remapped_rows_failed"),
                     ("remap", "remapped_rows{"), ("throttle", "throttle_active"), ("ALERTS", "ALERTS"),
                     ("bottleneck", "bottleneck"), ("utilization", "utilization_ratio"),
                     ("power", "power_watts"), ("sm_clock", "sm_clock_hertz"),
                     ("temperature", "temperature_celsius"), ("bench", "bench_peak_ratio")):
        if pat in q:
            return key
    return None


def serve(bodies):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            u = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(u.query).get("query", [""])[0]
            k = which(q)
            body = bodies.get(k) if u.path == "/api/v1/query" else None
            if body is None:
                body = b'{"status":"error","errorType":"bad_data","error":"unknown query"}'
                self.send_response(400)
            else:
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            QUERIES.append(q)

        def log_message(self, *a):
            pass

    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


QUERIES = []


def main():
    gpulse = sys.argv[1]
    sizes = [int(x) for x in sys.argv[2:]] or [1000, 10000]
    for n in sizes:
        a = answers(n)
        bodies = {k: json.dumps({"status": "success", "data": {"resultType": "vector", "result": v}}).encode()
                  for k, v in a.items()}
        s = serve(bodies)
        url = f"http://127.0.0.1:{s.server_address[1]}"
        # One run to learn the queries fleet makes, then both timed.
        QUERIES.clear()
        subprocess.run([gpulse, "fleet", "--prometheus", url, "--json"], check=True,
                       stdout=subprocess.DEVNULL)
        queries = list(QUERIES)
        anchor, fleet = [], []
        for _ in range(5):
            t = time.perf_counter()
            for q in queries:
                with urllib.request.urlopen(url + "/api/v1/query?" + urllib.parse.urlencode({"query": q})) as r:
                    json.loads(r.read())
            anchor.append(time.perf_counter() - t)
            t = time.perf_counter()
            out = subprocess.run([gpulse, "fleet", "--prometheus", url, "--json"], check=True,
                                 stdout=subprocess.PIPE).stdout
            fleet.append(time.perf_counter() - t)
        doc = json.loads(out)
        nout = sum(1 for g in doc["gpus"] if g["outliers"])
        ma, mf = statistics.median(anchor), statistics.median(fleet)
        print(f"{n} GPUs, {len(queries)} queries, {sum(len(b) for b in bodies.values()) / 1e6:.1f} MB of answers: "
              f"fetch and parse only (anchor) {ma * 1000:.0f} ms, gpulse fleet --json {mf * 1000:.0f} ms, "
              f"ratio {mf / ma:.2f}; {len(doc['gpus'])} GPUs listed, {nout} with outliers")
        s.shutdown()


if __name__ == "__main__":
    main()
