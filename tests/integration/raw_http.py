#!/usr/bin/env python3
"""Raw HTTP/1.1 requests against gpulsed, for test_http_framing.sh.

Each case writes bytes on one fresh connection (a request, usually with a
second, valid request pipelined behind it) and reads until the server
closes or --timeout passes; it then checks the status codes answered, in
order, and whether the server closed the connection. A request smuggled
behind an ambiguous one shows up as a second answer.

  raw_http.py --port PORT     runs every case; prints one line per case;
                              exit 0 when all pass, 1 when not.
"""
import argparse
import re
import socket
import sys
import time

STATUS = re.compile(rb"HTTP/1\.[01] (\d{3}) ")


def answers(got):
    """The status codes of the answers in `got`, and how many are whole.
    A status line counts only where an answer starts: at the beginning, or
    right after the previous answer's body (Content-Length framed)."""
    codes, whole, pos = [], 0, 0
    while pos < len(got):
        m = STATUS.match(got, pos)
        if not m:
            break
        codes.append(int(m.group(1)))
        head_end = got.find(b"\r\n\r\n", pos)
        if head_end < 0:
            break
        cl = re.search(rb"\r\ncontent-length: *(\d+)", got[pos:head_end].lower())
        pos = head_end + 4 + (int(cl.group(1)) if cl else 0)
        if pos <= len(got):
            whole += 1
    return codes, whole


def exchange(port, data, timeout, stop_after):
    """(statuses, closed, raw bytes) for `data` on one connection: read
    until the server closes, or `stop_after` whole answers are in (None:
    wait for the close), or `timeout` passes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    got, closed = b"", False
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            b = s.recv(65536)
            if not b:
                closed = True
                break
            got += b
            if stop_after is not None and answers(got)[1] >= stop_after:
                break
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    s.close()
    return answers(got)[0], closed, got


def long_target(n):
    """A query for vector(7), padded with an unused argument to n bytes."""
    t = b"/api/v1/query?query=vector(7)&pad="
    return t + b"a" * (n - len(t))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--timeout", type=float, default=5.0)
    args = p.parse_args()
    port = args.port
    ok_req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    # (name, bytes, expected statuses, must the server close, body must contain)
    cases = [
        # Controls: a pipelined second request is answered when nothing is
        # wrong, so a missing second answer below means a closed connection.
        ("pipelined", ok_req + ok_req, [200, 200], False, None),
        ("same Content-Length twice", b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
         b"Content-Length: 0\r\n\r\n" + ok_req, [200, 200], False, None),
        ("HTTP/1.0 without Host", b"GET /healthz HTTP/1.0\r\n\r\n", [200], True, None),
        # RFC 9112, section 6.1 and 6.3: refused, then closed.
        ("Transfer-Encoding and Content-Length",
         b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n"
         b"\r\n0\r\n\r\n" + ok_req, [400], True, b"Transfer-Encoding and Content-Length"),
        ("Transfer-Encoding and Content-Length, form POST",
         b"POST /api/v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded"
         b"\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nquery=1\r\n\r\n0\r\n\r\n"
         + ok_req, [400], True, b"Transfer-Encoding and Content-Length"),
        ("two Content-Lengths that differ",
         b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 37\r\n\r\n"
         + ok_req, [400], True, b"Content-Length"),
        ("two Content-Lengths that differ, form POST",
         b"POST /api/v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded"
         b"\r\nContent-Length: 7\r\nContent-Length: 0\r\n\r\nquery=1" + ok_req, [400], True,
         b"Content-Length"),
        ("Transfer-Encoding other than chunked",
         b"POST /api/v1/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
         + ok_req, [400], True, b"Transfer-Encoding"),
        # RFC 9112, section 5.1: whitespace between a field name and its colon.
        ("'Transfer-Encoding :'",
         b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + ok_req,
         [400], True, b"whitespace before its colon"),
        ("'Content-Length\\t:'",
         b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length\t: 0\r\n\r\n" + ok_req, [400], True,
         b"whitespace before its colon"),
        ("'X-Any :'", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Any : 1\r\n\r\n" + ok_req, [400], True,
         b"whitespace before its colon"),
        # RFC 9112, section 3.2: exactly one Host in HTTP/1.1.
        ("HTTP/1.1 without Host", b"GET /healthz HTTP/1.1\r\n\r\n" + ok_req, [400], True, b"Host"),
        ("two Host headers", b"GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n" + ok_req, [400],
         True, b"Host"),
        # RFC 9112, section 3.2.2: the absolute form is served as the origin form.
        ("absolute-form /metrics",
         b"GET http://127.0.0.1:%d/metrics HTTP/1.1\r\nHost: x\r\n\r\n" % port + ok_req, [200, 200],
         False, b"gpulse_http_requests_total"),
        ("absolute-form with a query",
         b"GET HTTP://127.0.0.1:%d/api/v1/query?query=vector(7) HTTP/1.1\r\nHost: x\r\n\r\n" % port,
         [200], False, b'"7"'),
        ("absolute-form, unknown path",
         b"GET http://127.0.0.1:%d/no/such/path HTTP/1.1\r\nHost: x\r\n\r\n" % port, [404], False,
         None),
        # The target limit (HTTP_MAX_URL_BYTES, 64 KiB, query included),
        # both sides; far beyond it MHD's buffer is full first and it
        # answers 414 itself.
        ("target of 64 KiB", b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % long_target(65536), [200],
         False, b'"7"'),
        ("target of 64 KiB + 1", b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % long_target(65537) + ok_req,
         [414], True, b"request target too long"),
        ("target of 256 KiB", b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % long_target(262144) + ok_req,
         [414], True, None),
    ]
    failed = 0
    for name, data, want, want_closed, needle in cases:
        codes, closed, raw = exchange(port, data, args.timeout,
                                      None if want_closed else len(want))
        good = codes == want and (closed or not want_closed) and (not needle or needle in raw)
        failed += not good
        print("%s %s: answered %s, %s%s" % ("ok  " if good else "FAIL", name, codes,
                                            "closed" if closed else "left open",
                                            "" if good else " (want %s%s%s)" % (
                                                want, ", closed" if want_closed else "",
                                                ", body with %r" % needle if needle else "")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
