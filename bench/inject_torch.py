#!/usr/bin/env python3
"""PyTorch workloads for libgpulse-inject.so's overhead and correctness
(bench/inject_overhead.sh, scripts/gpu-check.sh section inject).

  inject_torch.py WORKLOAD [--seconds S] [--warmup S] [--profiler] [--early-profiler]

WORKLOAD: train (transformer encoder training step, bf16 autocast,
AdamW), infer (many small kernels: a deep narrow MLP at batch 8, launch
bound), matmul (8192^3 bf16 products), gen1 and gen32 (a GPT-2 of
transformers' default configuration, weights random, nothing fetched:
generate 32 tokens greedily at batch 1 and 32, the launch-bound decode of
HF-style inference), vision (torchvision's resnet50, weights random,
inference at batch 32 in fp16). Prints one JSON line: the mean
time per iteration over 7 timed rounds of about S/7 seconds (after a
warm-up), tracing windows included, and the median round; a checksum of the
results (fixed seed, so every configuration must agree), max RSS, and
with --profiler the number of CUDA kernel events torch.profiler saw.
--early-profiler starts torch.profiler before CUDA is initialised (so
torch owns CUPTI first and gpulse must step aside at its start).
--warmup S: seconds of steps before the rounds (and before --profiler
starts torch.profiler), default 1."""
import argparse
import json
import resource
import statistics
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("workload", choices=["train", "infer", "matmul", "gen1", "gen32", "vision"])
ap.add_argument("--seconds", type=float, default=3.0)
ap.add_argument("--warmup", type=float, default=1.0)
ap.add_argument("--profiler", action="store_true")
ap.add_argument("--early-profiler", action="store_true")
a = ap.parse_args()

early = None
if a.early_profiler:
    early = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                               torch.profiler.ProfilerActivity.CUDA])
    early.__enter__()

torch.manual_seed(1234)
dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False

if a.workload == "train":
    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048,
                                             batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, num_layers=4).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 256, 512, device=dev)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
elif a.workload == "infer":
    layers = []
    for _ in range(48):
        layers += [torch.nn.Linear(256, 256), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(dev).eval()
    x = torch.randn(8, 256, device=dev)

    def step():
        with torch.no_grad():
            return model(x).sum()
elif a.workload in ("gen1", "gen32"):
    import transformers
    transformers.logging.set_verbosity_error()
    cfg = transformers.GPT2Config()
    model = transformers.GPT2LMHeadModel(cfg).to(dev).eval()
    batch = 1 if a.workload == "gen1" else 32
    ids = torch.randint(0, cfg.vocab_size, (batch, 16), device=dev)
    mask = torch.ones_like(ids)

    def step():
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, max_new_tokens=32, min_new_tokens=32,
                                 do_sample=False, pad_token_id=0)
        return out.float().sum()
elif a.workload == "vision":
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(dev).half().eval()
    x = torch.randn(32, 3, 224, 224, device=dev, dtype=torch.half)

    def step():
        with torch.no_grad():
            return model(x).float().sum()
else:
    A = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    B = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

    def step():
        return (A @ B)[0, :16].float().sum()


def checksum():
    # The same computation from the same seed, before any timing.
    torch.manual_seed(99)
    v = step()
    torch.cuda.synchronize()
    return float(v)


first = checksum()
# Warm up (a second by default): clocks ramp up and the governor settles.
t0 = time.perf_counter()
while time.perf_counter() - t0 < a.warmup:
    step()
torch.cuda.synchronize()
# Size a round to about seconds/7.
t0 = time.perf_counter()
k = 0
while time.perf_counter() - t0 < 0.2:
    step()
    k += 1
torch.cuda.synchronize()
per = (time.perf_counter() - t0) / k
iters = max(3, int(a.seconds / 7 / per))

prof = None
if a.profiler:
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                              torch.profiler.ProfilerActivity.CUDA])
    prof.__enter__()
rounds = []
# series: [CLOCK_MONOTONIC ns at a chunk's start, ns per iteration in it]
# for chunks of about 5 ms, so that bench/inject_windows.py can set the
# iterations inside the library's windows against those outside, in the
# same process (processes of one binary differ more than the windows do).
chunk = max(1, int(0.005 / per))
series = []
for _ in range(7):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    c0, n = time.monotonic_ns(), 0
    for _ in range(iters):
        step()
        n += 1
        if n == chunk:
            c1 = time.monotonic_ns()
            series.append([c0, (c1 - c0) / n])
            c0, n = c1, 0
    torch.cuda.synchronize()
    rounds.append((time.perf_counter() - t0) / iters)
cuda_events = None
if prof is not None:
    prof.__exit__(None, None, None)
    cuda_events = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
if early is not None:
    early.__exit__(None, None, None)
    cuda_events = sum(1 for e in early.events() if e.device_type == torch.autograd.DeviceType.CUDA)
# per_iter_ms is the mean over every timed round (rounds have equal
# iterations): the wall time, tracing windows included; median_ms the
# median round.
print(json.dumps({"workload": a.workload, "per_iter_ms": statistics.mean(rounds) * 1e3,
                  "median_ms": statistics.median(rounds) * 1e3,
                  "min_ms": min(rounds) * 1e3, "max_ms": max(rounds) * 1e3, "iters": iters,
                  "checksum": first, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "profiler_cuda_events": cuda_events, "series": series}), flush=True)
