#!/usr/bin/env python3
"""Slow-loris clients against gpulsed, for test_http_slowloris.sh.

Each slow connection sends a request head one byte per second and never
finishes it (over TLS: half finish the handshake first, half trickle a
ClientHello and never finish the handshake). Meanwhile /metrics is fetched
from 127.0.0.1 and must answer.

  deadline  N slow connections (fewer than the server's connection limit,
            so nothing is evicted); /metrics answers while they are open,
            and each is closed by the server after --header-timeout (not
            before it, and not later than a generous margin after it).
  saturate  N slow connections for --seconds, each reopened as soon as the
            server closes it; every fetch of /metrics in that time answers
            200 within --fetch-timeout.
  silent    N plain TCP connections that send nothing (also against a TLS
            port: not even a ClientHello), held by a separate process and
            each reopened as soon as the server closes it; --fetches
            fetches of /metrics meanwhile, one connection each, must all
            answer 200 within --fetch-timeout. Prints their latency.

Prints one summary line; exit 0 when the checks pass, 1 when not.
"""
import argparse
import multiprocessing
import select
import socket
import ssl
import sys
import time

HEAD = (b"GET /api/v1/gpus HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 4096)
HELLO = bytes([0x16, 0x03, 0x01, 0x02, 0x00]) + b"\x01" * 4096  # a record that never ends


def tls_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class Slow:
    """One slow connection: how far it got, when it opened and closed."""

    def __init__(self, args, addr, k):
        self.opened = time.monotonic()
        self.closed = None
        self.pos = 0
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.bind((addr, 0))
        raw.settimeout(5)
        raw.connect(("127.0.0.1", args.port))
        self.data = HEAD
        if args.tls and k % 2 == 0:
            self.sock = tls_context().wrap_socket(raw)  # full handshake, then a slow head
        else:
            self.sock = raw
            if args.tls:
                self.data = HELLO  # a handshake that never ends
        self.sock.setblocking(False)

    def drip(self):
        if self.closed is not None or self.pos >= len(self.data):
            return
        try:
            n = self.sock.send(self.data[self.pos:self.pos + 1])
            self.pos += n
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            pass
        except OSError:
            self.close()

    def poll(self):
        """Called when readable: EOF, a reset or any answer ends it."""
        try:
            self.sock.recv(4096)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError:
            pass
        self.close()

    def close(self):
        if self.closed is None:
            self.closed = time.monotonic()
            try:
                self.sock.close()
            except OSError:
                pass


FETCH_TLS = tls_context()


def fetch_metrics(args):
    """GET /metrics from 127.0.0.1; (status line or error, seconds). The TLS
    context is made once, before connecting, as a scraper's is: the
    ClientHello follows the connect at once, so the connection is silent
    for no longer than a real scrape's."""
    t0 = time.monotonic()
    try:
        raw = socket.create_connection(("127.0.0.1", args.port), timeout=args.fetch_timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as curl does
        s = FETCH_TLS.wrap_socket(raw) if args.tls else raw
        auth = b"Authorization: Bearer " + args.token.encode() + b"\r\n" if args.token else b""
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + auth + b"Connection: close\r\n\r\n")
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            if time.monotonic() - t0 > args.fetch_timeout:
                raise TimeoutError("timed out reading")
        s.close()
        status = got.split(b"\r\n", 1)[0].decode(errors="replace")
    except (OSError, ssl.SSLError) as e:
        status = "error: %s" % e
    return status, time.monotonic() - t0


def open_slow(args, addrs, k):
    try:
        return Slow(args, addrs[k % len(addrs)], k)
    except (OSError, ssl.SSLError):
        return None  # refused or reset at once: counted as not opened


def tick(conns):
    """Drip one byte on each, then wait up to 1 s for closes."""
    for c in conns:
        c.drip()
    deadline = time.monotonic() + 1.0
    while True:
        live = [c for c in conns if c.closed is None]
        left = deadline - time.monotonic()
        if not live or left <= 0:
            return
        r, _, _ = select.select([c.sock for c in live], [], [], min(left, 0.2))
        for c in live:
            if c.sock in r:
                c.poll()


def deadline_mode(args, addrs):
    conns = [c for c in (open_slow(args, addrs, k) for k in range(args.count)) if c]
    if len(conns) < args.count:
        print("FAIL: only %d of %d slow connections opened" % (len(conns), args.count))
        return 1
    tick(conns)
    status, secs = fetch_metrics(args)
    ok = status.endswith("200 OK")
    give_up = time.monotonic() + args.header_timeout + args.margin
    while time.monotonic() < give_up and any(c.closed is None for c in conns):
        tick(conns)
    open_left = sum(1 for c in conns if c.closed is None)
    lives = sorted(c.closed - c.opened for c in conns if c.closed is not None)
    early = sum(1 for t in lives if t < args.header_timeout - 0.5)
    print("deadline: %d slow connections; /metrics while open: %s (%.3f s); closed by the server: "
          "%d, still open after %.0f s: %d, closed before the deadline: %d; lifetimes %.2f..%.2f s"
          % (len(conns), status, secs, len(lives), args.header_timeout + args.margin, open_left,
             early, lives[0] if lives else 0, lives[-1] if lives else 0))
    for c in conns:
        c.close()
    return 0 if ok and open_left == 0 and early == 0 else 1


def saturate_mode(args, addrs):
    conns = [c for c in (open_slow(args, addrs, k) for k in range(args.count)) if c]
    end = time.monotonic() + args.seconds
    results, closed, k = [], 0, args.count
    next_fetch = time.monotonic() + 1.0
    while time.monotonic() < end:
        tick(conns)
        closed += sum(1 for c in conns if c.closed is not None)
        conns = [c for c in conns if c.closed is None]
        # Reopen what the server closed, so the pressure never lets up.
        while len(conns) < args.count:
            c = open_slow(args, addrs, k)
            k += 1
            if c is None:
                break
            conns.append(c)
        if time.monotonic() >= next_fetch:
            results.append(fetch_metrics(args))
            next_fetch = time.monotonic() + 0.5
    bad = [r for r in results if not r[0].endswith("200 OK")]
    worst = max((r[1] for r in results), default=0)
    print("saturate: %d slow connections over %.0f s from %s; %d fetches of /metrics, %d failed%s; "
          "slowest %.3f s; slow connections closed by the server %d"
          % (args.count, args.seconds, ",".join(addrs), len(results), len(bad),
             " (%s)" % bad[0][0] if bad else "", worst, closed))
    for c in conns:
        c.close()
    return 0 if results and not bad and closed > 0 else 1


def silent_flood(args, addrs, stop, opened):
    """Hold args.count connections that never send a byte, reopening each
    one the moment the server closes it, until `stop` is set."""
    conns, k = {}, 0
    poller = select.poll()
    while not stop.is_set():
        while len(conns) < args.count and not stop.is_set():
            try:
                c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                c.bind((addrs[k % len(addrs)], 0))
                c.settimeout(3)
                c.connect(("127.0.0.1", args.port))
            except OSError:
                c.close()
                time.sleep(0.01)
                break
            k += 1
            opened.value += 1
            c.setblocking(False)
            conns[c.fileno()] = c
            poller.register(c, select.POLLIN)
        for fd, _ in poller.poll(100):
            c = conns.pop(fd)
            poller.unregister(fd)
            c.close()  # closed (or reset) by the server: reopened above
    for c in conns.values():
        c.close()


def silent_mode(args, addrs):
    stop = multiprocessing.Event()
    opened = multiprocessing.Value("q", 0, lock=False)
    flood = multiprocessing.Process(target=silent_flood, args=(args, addrs, stop, opened))
    flood.start()
    try:
        # Until the flood holds its connections and the server has closed
        # some (so it is at its limit), or 10 s.
        give_up = time.monotonic() + 10
        while opened.value <= args.count and time.monotonic() < give_up:
            time.sleep(0.05)
        results = []
        for _ in range(args.fetches):
            results.append(fetch_metrics(args))
            time.sleep(args.gap)
        churn = opened.value
    finally:
        stop.set()
        flood.join(10)
        if flood.is_alive():
            flood.kill()
    bad = [r for r in results if not r[0].endswith("200 OK")]
    lat = sorted(r[1] for r in results if r[0].endswith("200 OK"))

    def pct(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
    print("silent: %d silent connections from %s (%d opened in all); %d fetches of /metrics, "
          "%d failed%s; p50 %.1f ms, p99 %.1f ms, max %.1f ms"
          % (args.count, ",".join(addrs), churn, len(results), len(bad),
             " (%s)" % bad[0][0] if bad else "", pct(0.5), pct(0.99),
             lat[-1] * 1000 if lat else float("nan")))
    # The flood must have been at the server's limit (connections closed
    # and reopened), or the fetches proved nothing.
    return 0 if results and not bad and churn > args.count else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["deadline", "saturate", "silent"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--token", default="")
    p.add_argument("--addrs", default="127.0.0.1")
    p.add_argument("--count", type=int, default=64)
    p.add_argument("--header-timeout", type=float, default=2.0)
    p.add_argument("--margin", type=float, default=4.0)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--fetch-timeout", type=float, default=3.0)
    p.add_argument("--fetches", type=int, default=150)
    p.add_argument("--gap", type=float, default=0.01)
    args = p.parse_args()
    addrs = args.addrs.split(",")
    modes = {"deadline": deadline_mode, "saturate": saturate_mode, "silent": silent_mode}
    return modes[args.mode](args, addrs)


if __name__ == "__main__":
    sys.exit(main())
