"""CPU time per GPU-sample on the GPU machine, side by side in one run:
gpulsed at its default tiers (10 Hz fast, 1 Hz normal with GPM, 30 s slow),
nvidia-smi --query-gpu ... -lms 100, and a pynvml loop (bench/pynvml_loop.py).
Each runs alone; after a warm-up (start-up costs excluded: nvmlInit alone
is tens of ms), CPU is read at the start and end of a window from every
thread's /proc/PID/task/TID/schedstat (nanoseconds on CPU) and divided by
the samples taken in it. gpulsed's time is also shown per thread.
gpulsed runs twice: at its defaults (adaptive tiers: memory and GPM at
their floors while the GPU is steady) and with sampling.adaptive: false
(every read at its tier period, as before issue 37).
Usage: python3 bench/cpu_compare.py GPULSED SECONDS [PORT [LOAD]]
LOAD: a bench/gpu_load.py kind (train, flip, matmul...) run on the GPU
for the whole comparison, so every sampler sees the same workload;
default none (an idle GPU).
Prints a table; nvidia-smi is the anchor (ratio 1.0)."""
import os
import subprocess
import sys
import threading
import time
import urllib.request

WARMUP = 3.0


def threads(pid):
    """{tid: (name, seconds on CPU)} for every thread of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        out[tid] = (name, ns / 1e9)
    return out


def cpu_s(pid):
    return sum(v[1] for v in threads(pid).values())


def metric(port, name, match=""):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in body.splitlines():
        if line.startswith(name + "{") and match in line:
            return float(line.rsplit(" ", 1)[1])
    return None


BREAKDOWN = {}


def window(proc, seconds, count, breakdown=False):
    time.sleep(WARMUP)
    t0, n0 = threads(proc.pid), count()
    time.sleep(seconds)
    t1, n1 = threads(proc.pid), count()
    proc.terminate()
    proc.wait()
    if breakdown:
        for tid, (name, s1) in t1.items():
            s0 = t0.get(tid, (name, 0.0))[1]
            BREAKDOWN[f"{name}[{tid}]"] = s1 - s0
    return (sum(v[1] for v in t1.values()) - sum(v[1] for v in t0.values()), n1 - n0)


def run_gpulsed(binary, seconds, port, adaptive=True):
    args = [binary, "--listen", f"127.0.0.1:{port}", "--log-level", "warn"]
    if not adaptive:
        cfg = f"/tmp/gpulse-cpu-compare-{os.getpid()}.yml"
        with open(cfg, "w") as f:
            f.write("sampling:\n  adaptive: false\n")
        args += ["--config", cfg]
    p = subprocess.Popen(args)
    return window(p, seconds, lambda: metric(port, "gpulse_samples_total", 'tier="fast"'), adaptive)


def run_smi(seconds):
    fields = ("utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,"
              "temperature.gpu,clocks.sm,clocks.mem,clocks_event_reasons.active")
    p = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
                          "-lms", "100"], stdout=subprocess.PIPE, text=True)
    lines = [0]

    def reader():
        for _ in p.stdout:
            lines[0] += 1
    threading.Thread(target=reader, daemon=True).start()
    return window(p, seconds, lambda: lines[0])


def run_pynvml(seconds):
    p = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "pynvml_loop.py"),
                          str(seconds + WARMUP + 5)], stdout=subprocess.DEVNULL)
    t = [0.0]

    def count():
        t[0] = time.monotonic()
        return t[0] * 10  # the loop samples at 10 Hz
    return window(p, seconds, count)


def main():
    binary, seconds = sys.argv[1], float(sys.argv[2])
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 9477
    load = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "none" else None
    loader = None
    if load:
        # Long enough for the four samplers, their warm-ups and start-ups.
        loader = subprocess.Popen([sys.executable,
                                   os.path.join(os.path.dirname(__file__), "gpu_load.py"), load,
                                   str(4 * (seconds + WARMUP + 5) + 30)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(10)  # CUDA context and the workload's first steps
    rows = []
    smi = run_smi(seconds)
    rows.append(("nvidia-smi -lms 100 (9 fields, no GPM)", *smi))
    rows.append(("pynvml loop 10 Hz, GPM 1 Hz", *run_pynvml(seconds)))
    rows.append(("gpulsed defaults (adaptive tiers)", *run_gpulsed(binary, seconds, port)))
    rows.append(("gpulsed sampling.adaptive: false", *run_gpulsed(binary, seconds, port, False)))
    if loader:
        loader.terminate()
        loader.wait()
    anchor = smi[0] / smi[1]
    print(f"GPU load: {load or 'none (idle)'}")
    print(f"steady state over {seconds:.0f} s after {WARMUP:.0f} s warm-up; "
          "CPU from /proc/PID/task/*/schedstat")
    print(f"{'sampler':48s} {'cpu_s':>8s} {'samples':>8s} {'ms/sample':>10s} {'vs smi':>7s}")
    for name, cpu, n in rows:
        per = cpu / n if n else float("nan")
        print(f"{name:48s} {cpu:8.4f} {n:8.0f} {per * 1e3:10.3f} {per / anchor:7.2f}")
    print("gpulsed per thread over the window (ms of CPU per second):")
    for name, sec in sorted(BREAKDOWN.items(), key=lambda kv: -kv[1]):
        print(f"  {name:40s} {sec / seconds * 1e3:8.3f}")


if __name__ == "__main__":
    main()
