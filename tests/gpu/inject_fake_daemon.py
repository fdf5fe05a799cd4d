#!/usr/bin/env python3
"""A stand-in for gpulsed's injection socket, for the GPU check: accepts
connections on SOCKET, reads frames (header: u32 magic "GPLW", u16
version, u16 type, u32 length), answers the first HELLO with a CAPTURE
(id 42, SECONDS seconds), and when the last client is gone (or after
TIMEOUT seconds) writes a summary to OUT.json: frames by type, HELLO
pids, TRACE_END totals, bad frames.
  inject_fake_daemon.py SOCKET OUT.json [SECONDS] [TIMEOUT]"""
import json
import os
import re
import selectors
import socket
import struct
import sys
import time

path, out = sys.argv[1], sys.argv[2]
seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 60
MAGIC = 0x574C5047
# WIRE_VERSION, read from the tree this script is in (src/wire/wire.h), so
# the stand-in follows the format's version without a copy to keep.
_wire_h = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "wire", "wire.h")
VERSION = int(re.search(r"^#define WIRE_VERSION\s+(\d+)", open(_wire_h).read(), re.M).group(1))
NAMES = {1: "HELLO", 2: "STATUS", 3: "KERNELS", 4: "COPIES", 5: "UVM", 6: "STREAMS",
         7: "RANGES", 8: "TRACE_EVENTS", 9: "TRACE_END"}
try:
    os.unlink(path)
except FileNotFoundError:
    pass
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(8)
srv.setblocking(False)
sel = selectors.DefaultSelector()
sel.register(srv, selectors.EVENT_READ)
summary = {"frames": {}, "hello_pids": [], "trace_end": [], "bad": 0, "connections": 0,
           "trace_event_frames_bytes": 0}
bufs = {}
sent_capture = False
deadline = time.time() + timeout
ever = False
while time.time() < deadline:
    for key, _ in sel.select(timeout=0.2):
        if key.fileobj is srv:
            c, _ = srv.accept()
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ)
            bufs[c] = b""
            summary["connections"] += 1
            ever = True
            continue
        c = key.fileobj
        try:
            data = c.recv(1 << 20)
        except BlockingIOError:
            continue
        if not data:
            sel.unregister(c)
            c.close()
            del bufs[c]
            continue
        b = bufs[c] + data
        while len(b) >= 12:
            magic, ver, typ, n = struct.unpack("<IHHI", b[:12])
            if magic != MAGIC or ver != VERSION:
                summary["bad"] += 1
                b = b""
                break
            if len(b) < 12 + n:
                break
            payload = b[12:12 + n]
            b = b[12 + n:]
            name = NAMES.get(typ, str(typ))
            summary["frames"][name] = summary["frames"].get(name, 0) + 1
            if name == "HELLO":
                summary["hello_pids"].append(struct.unpack("<I", payload[:4])[0])
                if not sent_capture:
                    cap = struct.pack("<QII", 42, seconds, 100000)
                    c.sendall(struct.pack("<IHHI", MAGIC, VERSION, 64, len(cap)) + cap)
                    sent_capture = True
            elif name == "TRACE_END":
                cid, total, dropped = struct.unpack("<QQQ", payload[:24])
                summary["trace_end"].append({"id": cid, "events_total": total, "events_dropped": dropped})
            elif name == "TRACE_EVENTS":
                summary["trace_event_frames_bytes"] += n
        bufs[c] = b
    if ever and not bufs:
        break
json.dump(summary, open(out, "w"), indent=1)
print("fake daemon:", json.dumps(summary))
