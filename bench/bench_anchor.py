"""The anchor for `gpulse bench` on the GPU machine (scripts/gpu-check.sh,
section bench): the same figures measured with PyTorch in the same call,
so that gpulse's numbers are judged against a known implementation rather
than a datasheet. Prints one JSON object:
  bf16_matmul_flops  random (randn) bf16 8192^3 matmul, FLOP/s
  d2d_copy_bytes_per_second  1 GiB device-to-device copy, read + write counted
  h2d_pinned_bytes_per_second, d2h_pinned_bytes_per_second  1 GiB pinned
Each is the median of 10 timed batches (CUDA events) after a warm-up, with
min and max. `python3 bench/bench_anchor.py [--gpu N]`."""
import json
import statistics
import sys

import torch


def timed(fn, iters, batches=10, warm_s=1.0):
    """Median, min and max seconds per iteration over `batches` batches."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    spent = 0.0
    while spent < warm_s:
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        spent += start.elapsed_time(end) / 1e3
    per = []
    for _ in range(batches):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        per.append(start.elapsed_time(end) / 1e3 / iters)
    return statistics.median(per), min(per), max(per)


def rate(work, t):
    med, lo, hi = t
    return {"median": work / med, "min": work / hi, "max": work / lo}


def main():
    gpu = int(sys.argv[sys.argv.index("--gpu") + 1]) if "--gpu" in sys.argv else 0
    torch.cuda.set_device(gpu)
    out = {"device": torch.cuda.get_device_name(gpu), "torch": torch.__version__,
           "cuda": torch.version.cuda}
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    out["bf16_matmul_flops"] = rate(2 * n ** 3, timed(lambda: torch.matmul(a, b, out=c), 20))
    del a, b, c
    size = 1 << 30
    src = torch.empty(size, device="cuda", dtype=torch.uint8).random_()
    dst = torch.empty_like(src)
    out["d2d_copy_bytes_per_second"] = rate(2 * size, timed(lambda: dst.copy_(src), 10))
    host = torch.empty(size, dtype=torch.uint8).pin_memory()
    out["h2d_pinned_bytes_per_second"] = rate(size, timed(lambda: src.copy_(host, non_blocking=True), 3))
    out["d2h_pinned_bytes_per_second"] = rate(size, timed(lambda: host.copy_(src, non_blocking=True), 3))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
