#!/usr/bin/env python3
"""/metrics latency under a flood of wrong Basic passwords (issue 14).

One gpulsed (the bundled recording replayed) with a read token and two
Basic users (bcrypt cost 10, about 100 ms a verification) is scraped N
times with the token, one scrape every 20 ms on a new connection, in
three phases:

  idle      nothing else running
  flood     W workers each sending wrong passwords for a user as fast as
            they are answered (one address: after a burst of 5 failures
            they get 429 without bcrypt, one try per 2 s)
  cached    the same flood, scraped with a Basic user that verified
            before (the cache) instead of the token

and prints one Markdown table: p50, p99 and max latency, failed scrapes,
and what the flood was answered (401 verified, 429 limited).

Usage: bench/http_auth_flood.py [--build DIR] [--scrapes N] [--workers W]
"""
import argparse
import base64
import http.client
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REC = os.path.join(SRC, "data", "recordings", "h200-phases-10hz.csv")
ALICE = "$2y$10$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e"  # hunter2


def basic(user, pw):
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


def get(port, path, auth, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Authorization": auth})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def scrape(port, n, auth):
    lat, failed = [], 0
    for _ in range(n):
        t = time.monotonic()
        try:
            ok = get(port, "/metrics", auth) == 200
        except OSError:
            ok = False
        dt = (time.monotonic() - t) * 1000
        if not ok or dt > 5000:
            failed += 1
        lat.append(dt)
        time.sleep(0.02)
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
    return q(0.5), q(0.99), lat[-1], failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--workers", type=int, default=8)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gpulse-authflood.")
    tok = os.path.join(work, "token")
    with open(tok, "w") as f:
        f.write("bench-token\n")
    os.chmod(tok, 0o600)
    cfg = os.path.join(work, "g.yml")
    with open(cfg, "w") as f:
        f.write(f'http:\n  auth_token_file: "{tok}"\n  basic_auth_users:\n'
                f'    alice: "{ALICE}"\n    bob: "{ALICE}"\n')
    log = open(os.path.join(work, "d.log"), "w+")
    d = subprocess.Popen([os.path.join(a.build, "src", "gpulsed") if os.path.exists(
        os.path.join(a.build, "src", "gpulsed")) else os.path.join(a.build, "gpulsed"),
        "--config", cfg, "--listen", "127.0.0.1:0", "--replay", REC], stderr=log)
    port = None
    for _ in range(100):
        time.sleep(0.1)
        log.seek(0)
        for line in log:
            if " port " in line and "serving" in line:
                port = int(line.split(" port ")[1].split()[0])
        if port:
            break
    if not port:
        sys.exit("gpulsed did not start")
    token = "Bearer bench-token"
    rows = [("idle", "token") + scrape(port, a.scrapes, token)]
    stop = threading.Event()
    answers = {}
    lock = threading.Lock()

    def flood(i):
        k = 0
        while not stop.is_set():
            k += 1
            try:
                st = get(port, "/metrics", basic("bob", f"wrong{i}-{k}"))
            except OSError:
                st = "error"
            with lock:
                answers[st] = answers.get(st, 0) + 1

    # alice verifies once (bcrypt), then is in the cache.
    assert get(port, "/metrics", basic("alice", "hunter2")) == 200
    ts = [threading.Thread(target=flood, args=(i,)) for i in range(a.workers)]
    for t in ts:
        t.start()
    time.sleep(0.5)
    rows.append((f"flood x{a.workers}", "token") + scrape(port, a.scrapes, token))
    rows.append((f"flood x{a.workers}", "cached Basic user") +
                scrape(port, a.scrapes, basic("alice", "hunter2")))
    stop.set()
    for t in ts:
        t.join()
    d.terminate()
    d.wait()
    print(f"- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, nproc {os.cpu_count()}, "
          f"{platform.release()}, {a.scrapes} scrapes a phase")
    print("\n| phase | scraped with | p50 ms | p99 ms | max ms | failed |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]} |")
    print(f"\nflood answers: {dict(sorted((str(k), v) for k, v in answers.items()))}")


if __name__ == "__main__":
    main()
