"""GPU workloads for the GPU checks: `python3 bench/gpu_load.py KIND SECONDS`.
KIND: matmul (bf16 8192^2 products), copy (device-to-device copies),
pcie (pinned host<->device copies), train (a steady training job: an MLP
with AdamW, the same step again and again), flip (a workload that
changes every second: a second of matmuls with 8 GiB more memory held,
then a second idle with it freed), idle. Prints what it did."""
import sys
import time

import torch


def main():
    kind, seconds = sys.argv[1], float(sys.argv[2])
    end = time.time() + seconds
    n = 0
    if kind == "matmul":
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        while time.time() < end:
            for _ in range(10):
                c = a @ b
            torch.cuda.synchronize()
            n += 10
        print(f"matmul: {n} products, {2 * 8192**3 * n / seconds / 1e12:.0f} TFLOP/s", flush=True)
        del c
    elif kind == "copy":
        a = torch.empty(2 << 30, device="cuda", dtype=torch.uint8)
        b = torch.empty_like(a)
        while time.time() < end:
            b.copy_(a)
            torch.cuda.synchronize()
            n += 1
        print(f"copy: {n} copies of 2 GiB", flush=True)
    elif kind == "pcie":
        h = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
        d = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
        while time.time() < end:
            d.copy_(h, non_blocking=True)
            h.copy_(d, non_blocking=True)
            torch.cuda.synchronize()
            n += 1
        print(f"pcie: {n} round trips of 1 GiB", flush=True)
    elif kind == "train":
        model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.GELU(),
                                    torch.nn.Linear(8192, 4096)).cuda().to(torch.bfloat16)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
        while time.time() < end:
            for _ in range(10):
                opt.zero_grad(set_to_none=True)
                model(x).float().pow(2).mean().backward()
                opt.step()
            torch.cuda.synchronize()
            n += 10
        print(f"train: {n} steps", flush=True)
    elif kind == "flip":
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        while time.time() < end:
            held = torch.empty(8 << 30, device="cuda", dtype=torch.uint8)
            t = time.time() + 1
            while time.time() < t:
                for _ in range(5):
                    c = a @ a
                torch.cuda.synchronize()
            del held, c
            torch.cuda.empty_cache()
            time.sleep(1)
            n += 1
        print(f"flip: {n} busy/idle cycles", flush=True)
    else:
        time.sleep(seconds)


if __name__ == "__main__":
    main()
