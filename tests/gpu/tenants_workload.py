#!/usr/bin/env python3
"""One tenant of a shared GPU for tests/gpu/tenants_check.py (issue 36).

    tenants_workload.py KIND SECONDS RESULT.json

KIND: gemm (bf16 8192x8192 matmuls: tensor-bound), elementwise (a large
fp32 a*x+y over 1 GiB: memory-bound), launch (a loop of tiny kernels on
4 KiB: launch-bound). Runs SECONDS after a warm-up and writes
{"kind", "pid", "iterations", "seconds", "rate"} to RESULT.json: the
rate alone against the rate shared is the share of the GPU it got,
measured without gpulse.
"""
import json
import os
import sys
import time

import torch


def main():
    kind, seconds, result = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    dev = torch.device("cuda")
    if kind == "gemm":
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        step = lambda: torch.matmul(a, b)
        per_sync = 8
    elif kind == "elementwise":
        x = torch.randn(1 << 28, device=dev)
        y = torch.randn(1 << 28, device=dev)
        step = lambda: torch.add(y, x, alpha=1.0001, out=y)
        per_sync = 8
    elif kind == "launch":
        x = torch.zeros(1024, device=dev)
        step = lambda: x.add_(1.0)
        per_sync = 2000
    else:
        sys.exit(f"unknown kind {kind}")
    for _ in range(per_sync * 3):
        step()
    torch.cuda.synchronize()
    n = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(per_sync):
            step()
        torch.cuda.synchronize()
        n += per_sync
    dt = time.monotonic() - t0
    with open(result, "w") as f:
        json.dump({"kind": kind, "pid": os.getpid(), "iterations": n, "seconds": dt,
                   "rate": n / dt}, f)


if __name__ == "__main__":
    main()
