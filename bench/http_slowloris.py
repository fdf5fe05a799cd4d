#!/usr/bin/env python3
"""/metrics latency idle and under slow-loris connections (issue 14, item 1).

Starts gpulsed (--replay, default settings but for the listen port), then in
the same run:
  idle   N fetches of /metrics, one connection each, one after another
         (as Prometheus scrapes: a new connection per scrape);
  loaded the same N fetches while S slow connections (a request head one
         byte a second, never finished; over TLS half never finish the
         handshake) from several loopback addresses are held open, each
         reopened as soon as gpulsed closes it, by a separate process.
Prints a table of p50/p99/max latency and failures, and gpulsed's shed
counters. Not a timed test: run it by hand and paste the table into
docs/RELIABILITY.md.

  bench/http_slowloris.py --build build [--slow 500] [--fetches 300] [--tls]
                          [--busy 200]

--busy adds a third case: that many clients asking an ordinary route
(/api/v1/gpus) as fast as they are answered, over keep-alive connections.
"""
import argparse
import multiprocessing
import os
import select
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HEAD = b"GET /api/v1/gpus HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096
HELLO = bytes([0x16, 0x03, 0x01, 0x02, 0x00]) + b"\x01" * 4096


def tls_ctx():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def slow_open(port, addr, tls, k, silent=False):
    try:
        s = socket.socket()
        s.bind((addr, 0))
        s.settimeout(3)
        s.connect(("127.0.0.1", port))
        data = HEAD
        if silent:
            data = b""  # a TCP connection that never sends a byte
        elif tls and k % 2 == 0:
            s = tls_ctx().wrap_socket(s)
        elif tls:
            data = HELLO
        s.setblocking(False)
        return [s, data, 0]
    except (OSError, ssl.SSLError):
        return None


def loris(port, addrs, tls, count, stop, opened_total, silent=False):
    """Hold `count` slow connections until `stop` is set."""
    conns, k = [], 0
    while not stop.is_set():
        while len(conns) < count and not stop.is_set():
            c = slow_open(port, addrs[k % len(addrs)], tls, k, silent)
            k += 1
            if c is None:
                time.sleep(0.01)
                break
            conns.append(c)
            opened_total.value += 1
        for c in conns:
            try:
                if c[2] < len(c[1]):
                    c[2] += c[0].send(c[1][c[2]:c[2] + 1])
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                pass
            except OSError:
                c[2] = -1
        end = time.monotonic() + 1.0
        while time.monotonic() < end and not stop.is_set():
            r, _, _ = select.select([c[0] for c in conns], [], [], 0.1)
            for c in conns:
                if c[0] in r:
                    try:
                        c[0].recv(4096)
                    except (BlockingIOError, ssl.SSLWantReadError):
                        continue
                    except OSError:
                        pass
                    c[2] = -1  # closed (or answered): reopen
            dead = [c for c in conns if c[2] < 0]
            for c in dead:
                c[0].close()
            conns = [c for c in conns if c[2] >= 0]
            if dead:
                break  # reopen at once
    for c in conns:
        c[0].close()


def hammer(port, tls, token, clients, stop, done_total):
    """`clients` keep-alive connections asking for an ordinary route
    (/api/v1/gpus) as fast as they are answered, one thread each."""
    import threading

    def one():
        n = 0
        while not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if tls:
                    s = tls_ctx().wrap_socket(s)
                f = s.makefile("rb")
                auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
                while not stop.is_set():
                    s.sendall(b"GET /api/v1/gpus HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n")
                    length, close = 0, False
                    status = f.readline()
                    while True:
                        h = f.readline()
                        if h in (b"\r\n", b""):
                            break
                        if h.lower().startswith(b"content-length:"):
                            length = int(h.split(b":")[1])
                        if h.lower().startswith(b"connection: close"):
                            close = True
                    f.read(length)
                    n += 1
                    if not status or close:
                        break
                s.close()
            except (OSError, ssl.SSLError, ValueError):
                time.sleep(0.01)
        with lock:
            done_total.value += n
    lock = threading.Lock()
    ts = [threading.Thread(target=one) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def fetch(port, tls, token, timeout):
    t0 = time.perf_counter()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        # As curl and Go's net/http (Prometheus) do: without it, the request
        # written behind TLS's last handshake flight waits for the
        # server's delayed ACK (40 ms), which is the client's doing.
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            s = tls_ctx().wrap_socket(s)
        auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + auth + b"Connection: close\r\n\r\n")
        got = b""
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            got += b
        s.close()
        ok = got.startswith(b"HTTP/1.1 200")
        return (time.perf_counter() - t0, ok, got)
    except (OSError, ssl.SSLError):
        return (time.perf_counter() - t0, False, b"")


def run_fetches(args, n):
    lat, fails, last = [], 0, b""
    for _ in range(n):
        t, ok, body = fetch(args.port, args.tls, args.token, args.fetch_timeout)
        if ok:
            lat.append(t)
            last = body
        else:
            fails += 1
        time.sleep(args.gap)
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
    return pct(0.5), pct(0.99), (lat[-1] * 1000 if lat else float("nan")), fails, last


def rss_mb(pid):
    """gpulsed's resident memory now and at its peak (VmRSS, VmHWM), MB."""
    v = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                v[line.split(":")[0]] = int(line.split()[1]) / 1024
    return v.get("VmRSS", 0), v.get("VmHWM", 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--replay", default=os.path.join(os.path.dirname(__file__), "..", "data",
                                                    "recordings", "h200-phases-10hz.csv"))
    p.add_argument("--slow", type=int, default=500)
    p.add_argument("--addrs", default="127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5")
    p.add_argument("--fetches", type=int, default=300)
    p.add_argument("--gap", type=float, default=0.02)
    p.add_argument("--fetch-timeout", type=float, default=10.0)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--silent", action="store_true",
                   help="the slow connections send nothing at all (plain TCP, even with --tls)")
    p.add_argument("--busy", type=int, default=0,
                   help="also: this many clients asking /api/v1/gpus as fast as they can")
    args = p.parse_args()
    args.token = ""

    work = tempfile.mkdtemp(prefix="gpulse-bench-")
    cfg = os.path.join(work, "gpulse.yml")
    with open(cfg, "w") as f:
        f.write("log_level: info\n")
        if args.tls:
            key, cert, tok = (os.path.join(work, n) for n in ("key.pem", "cert.pem", "token"))
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                            key, "-out", cert, "-days", "1", "-subj", "/CN=localhost"],
                           check=True, capture_output=True)
            args.token = "bench-token"
            with open(tok, "w") as t:
                t.write(args.token + "\n")
            os.chmod(tok, 0o600)
            f.write("http:\n  tls_cert_file: %s\n  tls_key_file: %s\n  auth_token_file: %s\n"
                    % (cert, key, tok))
    log = open(os.path.join(work, "gpulsed.log"), "w+")
    d = subprocess.Popen([os.path.join(args.build, "gpulsed"), "--config", cfg, "--listen",
                          "127.0.0.1:0", "--replay", args.replay, "--replay-speed", "20"],
                         stderr=log)
    args.port = 0
    for _ in range(100):
        log.seek(0)
        for line in log:
            if " port " in line and "serving" in line:
                args.port = int(line.split(" port ")[1].split()[0])
        if args.port:
            break
        time.sleep(0.1)
    if not args.port:
        print("gpulsed did not start; see", log.name)
        d.kill()
        return 1
    addrs = args.addrs.split(",")
    try:
        time.sleep(1)
        idle = run_fetches(args, args.fetches)
        mem = [rss_mb(d.pid)]
        stop = multiprocessing.Event()
        opened = multiprocessing.Value("q", 0, lock=False)
        lp = multiprocessing.Process(target=loris, args=(args.port, addrs, args.tls, args.slow,
                                                          stop, opened, args.silent))
        lp.start()
        time.sleep(3)  # let the slow connections pile up
        loaded = run_fetches(args, args.fetches)
        mem.append(rss_mb(d.pid))
        stop.set()
        lp.join(10)
        busy, answered = None, multiprocessing.Value("q", 0, lock=False)
        if args.busy:
            stop = multiprocessing.Event()
            hp = multiprocessing.Process(target=hammer, args=(args.port, args.tls, args.token,
                                                               args.busy, stop, answered))
            hp.start()
            time.sleep(2)
            busy = run_fetches(args, args.fetches)
            mem.append(rss_mb(d.pid))
            stop.set()
            hp.join(30)
        last = busy[4] if busy else loaded[4]
        shed = [line.decode() for line in last.split(b"\n")
                if line.startswith(b"gpulse_http_shed_connections_total")]
    finally:
        d.terminate()
        try:
            d.wait(10)
        except subprocess.TimeoutExpired:
            print("gpulsed did not stop within 10 s of SIGTERM: killed")
            d.kill()
            d.wait()
    mode = "https + token" if args.tls else "http"
    print("| %s | case | fetches | p50 ms | p99 ms | max ms | failed | RSS at the end, MB | "
          "peak RSS so far, MB |" % mode)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    print("| | idle | %d | %.1f | %.1f | %.1f | %d | %.1f | %.1f |"
          % ((args.fetches,) + idle[:4] + mem[0]))
    print("| | %d %s connections from %d addresses (%d opened in all) | %d | %.1f | %.1f | "
          "%.1f | %d | %.1f | %.1f |"
          % ((args.slow, "silent" if args.silent else "slow", len(addrs), opened.value,
              args.fetches) + loaded[:4] + mem[1]))
    if busy:
        print("| | %d clients on /api/v1/gpus (%d answers) | %d | %.1f | %.1f | %.1f | %d | %.1f | "
              "%.1f |" % ((args.busy, answered.value, args.fetches) + busy[:4] + mem[2]))
    for line in shed:
        print("    " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
