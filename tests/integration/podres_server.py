#!/usr/bin/env python3
"""A stand-in for the kubelet's pod-resources API: a real gRPC server
(Debian's python3-grpcio) on a unix socket that answers
v1.PodResourcesLister/List with the pods of a JSON file, encoded as the
kubelet's ListPodResourcesResponse (src/attrib/podresources.proto). The
protobuf is written by hand here (a few length-delimited fields) so the
test needs no generated Python code.

    podres_server.py SOCKET PODS.json READY_FILE

PODS.json: [{"name", "namespace", "containers": [{"name", "devices":
[{"resource_name", "device_ids": [...]}]}]}]. The file is read at every
call, so a test can change the answer while the server runs. READY_FILE
is written once the server listens. Ends on SIGTERM."""
import json
import signal
import sys
import threading
from concurrent import futures

import grpc


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def encode(pods):
    out = b""
    for p in pods:
        pod = field(1, p["name"]) + field(2, p["namespace"])
        for c in p.get("containers", []):
            ctr = field(1, c["name"])
            for d in c.get("devices", []):
                dev = field(1, d["resource_name"])
                for i in d.get("device_ids", []):
                    dev += field(2, i)
                ctr += field(2, dev)
            pod += field(3, ctr)
        out += field(1, pod)
    return out


def main():
    sock, pods_file, ready = sys.argv[1:4]
    calls = [0]

    def list_handler(request, context):
        calls[0] += 1
        with open(pods_file) as f:
            return encode(json.load(f))

    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {"List": grpc.unary_unary_rpc_method_handler(
            list_handler,
            request_deserializer=lambda b: b,
            response_serializer=lambda b: b)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("unix:" + sock)
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    with open(ready, "w") as f:
        f.write("ready\n")
    done.wait()
    server.stop(0)


if __name__ == "__main__":
    main()
