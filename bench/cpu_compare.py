"""CPU time per GPU-sample on the GPU machine, side by side in one run:
gpulsed at its default tiers (10 Hz fast, 1 Hz normal with GPM, 30 s slow),
nvidia-smi --query-gpu ... -lms 100, and a pynvml loop (bench/pynvml_loop.py).
Usage: python3 bench/cpu_compare.py GPULSED SECONDS [PORT]
Prints a table; nvidia-smi is the anchor (ratio 1.0)."""
import os
import re
import resource
import subprocess
import sys
import time
import urllib.request


def child_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def metric(port, name, match=""):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in body.splitlines():
        if line.startswith(name) and match in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def run_gpulsed(binary, seconds, port):
    before = child_cpu()
    p = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}", "--log-level", "warn"])
    time.sleep(seconds)
    s0 = metric(port, "gpulse_samples_total", 'tier="fast"')
    p.terminate()
    p.wait()
    cpu = child_cpu() - before
    return cpu, s0


def run_smi(seconds):
    before = child_cpu()
    fields = ("utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,"
              "temperature.gpu,clocks.sm,clocks.mem,clocks_event_reasons.active")
    p = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
                          "-lms", "100"], stdout=subprocess.PIPE, text=True)
    time.sleep(seconds)
    p.terminate()
    out, _ = p.communicate()
    cpu = child_cpu() - before
    return cpu, len([l for l in out.splitlines() if l.strip()])


def run_pynvml(seconds):
    out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "pynvml_loop.py"),
                          str(seconds)], capture_output=True, text=True, check=True).stdout
    cpu, n = out.split()
    return float(cpu), int(n)


def main():
    binary, seconds = sys.argv[1], float(sys.argv[2])
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 9477
    rows = []
    smi = run_smi(seconds)
    rows.append(("nvidia-smi -lms 100 (9 fields, no GPM)", *smi))
    rows.append(("pynvml loop 10 Hz, GPM 1 Hz", *run_pynvml(seconds)))
    rows.append(("gpulsed default tiers (GPM 1 Hz, all tiers)", *run_gpulsed(binary, seconds, port)))
    anchor = smi[0] / smi[1]
    print(f"{'sampler':48s} {'cpu_s':>8s} {'samples':>8s} {'ms/sample':>10s} {'vs smi':>7s}")
    for name, cpu, n in rows:
        per = cpu / n if n else float("nan")
        print(f"{name:48s} {cpu:8.3f} {n:8.0f} {per * 1e3:10.3f} {per / anchor:7.2f}")


if __name__ == "__main__":
    main()
