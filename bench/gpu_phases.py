"""Labelled workload phases for a recording on the GPU machine, with other
kernels, sizes and order than data/recordings/h200-phases-10hz.csv's
(docs/RECORDING.md):
    python3 bench/gpu_phases.py LABELS.csv [SECONDS_PER_PHASE]
Runs each phase for the given time (default 10 s) and writes
`phase,start_s,end_s` (wall-clock Unix seconds, the recording's clock)."""
import sys
import time

import torch
import torch.nn as nn


def until(t_end, step):
    n = 0
    while time.time() < t_end:
        step()
        n += 1
    torch.cuda.synchronize()
    return n


def main():
    out = open(sys.argv[1], "w")
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    dev = "cuda"

    def phase(name, fn):
        torch.cuda.synchronize()
        t0 = time.time()
        n = fn(t0 + secs)
        torch.cuda.synchronize()
        t1 = time.time()
        out.write(f"{name},{t0:.3f},{t1:.3f}\n")
        out.flush()
        print(f"{name}: {n} steps in {t1 - t0:.1f} s", flush=True)
        time.sleep(1.0)  # a transition gap, as in the shared recording

    phase("idle", lambda t: (time.sleep(max(0, t - time.time())), 0)[1])

    # Memory bound: fused multiply-add over 1 GiB fp32 tensors (elementwise,
    # not copies as in the shared recording).
    a = torch.rand(1 << 28, device=dev)
    b = torch.rand(1 << 28, device=dev)
    c = torch.rand(1 << 28, device=dev)
    phase("memory_bound_fma", lambda t: until(t, lambda: torch.addcmul(c, a, b, out=a)))
    del a, b, c

    # Compute bound: fp16 6144^2 products (bf16 8192^2 in the shared one).
    x = torch.randn(6144, 6144, device=dev, dtype=torch.float16)
    y = torch.randn(6144, 6144, device=dev, dtype=torch.float16)
    phase("compute_fp16_tensor", lambda t: until(t, lambda: x @ y))
    del x, y

    # Launch bound: a Python loop of tiny kernels on 1 KiB tensors.
    s = torch.ones(256, device=dev)
    phase("launch_bound_tiny", lambda t: until(t, lambda: s.mul_(1.0000001).add_(1e-7)))

    # PCIe bound: pageable (not pinned) host-to-device copies of 512 MiB.
    h = torch.empty(1 << 29, dtype=torch.uint8)
    d = torch.empty(1 << 29, dtype=torch.uint8, device=dev)
    phase("pcie_bound_pageable", lambda t: until(t, lambda: d.copy_(h)))
    del h, d

    # Input starved: a burst of six 8192^2 bf16 products (~8 ms), then
    # 40 ms on the host, as a data loader that cannot keep up: the GPU
    # works about a sixth of the time.
    p = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

    def starved():
        for _ in range(6):
            p @ p
        torch.cuda.synchronize()
        time.sleep(0.04)
    phase("cpu_starved_40ms", lambda t: until(t, starved))
    del p

    # Compute bound through TF32 tensor cores: fp32 8192^2 with TF32 on.
    torch.backends.cuda.matmul.allow_tf32 = True
    f = torch.randn(8192, 8192, device=dev)
    phase("compute_fp32_tf32", lambda t: until(t, lambda: f @ f))
    torch.backends.cuda.matmul.allow_tf32 = False
    del f

    # Mixed: a transformer encoder (8 layers, d=1024) training in bf16 on
    # 16 x 512 tokens: attention, GEMMs, norms and the optimizer together.
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True),
                                  8).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), 1e-4)
    batch = torch.randn(16, 512, 1024, device=dev, dtype=torch.bfloat16)

    def train():
        opt.zero_grad(set_to_none=True)
        model(batch).float().pow(2).mean().backward()
        opt.step()
    phase("transformer_train_d1024", lambda t: until(t, train))
    del model, opt, batch

    # Memory pressure: hold 93% of device memory, light compute.
    free, total = torch.cuda.mem_get_info()
    hold = torch.empty(int(free * 0.93) - (1 << 30), dtype=torch.uint8, device=dev)
    q = torch.randn(1024, 1024, device=dev)

    def light():
        q @ q
        time.sleep(0.01)
    phase("memory_pressure_93", lambda t: until(t, light))
    del hold, q
    torch.cuda.empty_cache()

    phase("idle_end", lambda t: (time.sleep(max(0, t - time.time())), 0)[1])
    out.close()


if __name__ == "__main__":
    main()
