"""The comparison sampler for bench/cpu_compare.py: a pynvml loop reading
what gpulsed's fast tier reads at 10 Hz, and GPM metrics at 1 Hz, like a
hand-written Python exporter would. Runs for SECONDS, prints CPU seconds
used and samples taken."""
import resource
import sys
import time

import pynvml as N

GPM = [N.NVML_GPM_METRIC_SM_UTIL, N.NVML_GPM_METRIC_SM_OCCUPANCY,
       N.NVML_GPM_METRIC_ANY_TENSOR_UTIL, N.NVML_GPM_METRIC_DRAM_BW_UTIL,
       N.NVML_GPM_METRIC_FP64_UTIL, N.NVML_GPM_METRIC_FP32_UTIL,
       N.NVML_GPM_METRIC_FP16_UTIL, N.NVML_GPM_METRIC_PCIE_TX_PER_SEC,
       N.NVML_GPM_METRIC_PCIE_RX_PER_SEC]


def main():
    seconds = float(sys.argv[1])
    N.nvmlInit()
    h = N.nvmlDeviceGetHandleByIndex(0)
    s1, s2 = N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()
    N.nvmlGpmSampleGet(h, s1)
    start = time.monotonic()
    nxt, samples = start, 0
    while time.monotonic() - start < seconds:
        N.nvmlDeviceGetUtilizationRates(h)
        N.nvmlDeviceGetMemoryInfo(h)
        N.nvmlDeviceGetPowerUsage(h)
        N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM)
        N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_MEM)
        if samples % 10 == 0:
            N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU)
            N.nvmlDeviceGetCurrentClocksEventReasons(h)
            N.nvmlGpmSampleGet(h, s2)
            q = N.c_nvmlGpmMetricsGet_t()
            q.version = N.NVML_GPM_METRICS_GET_VERSION
            q.numMetrics = len(GPM)
            q.sample1, q.sample2 = s1, s2
            for i, m in enumerate(GPM):
                q.metrics[i].metricId = m
            N.nvmlGpmMetricsGet(q)
            s1, s2 = s2, s1
        samples += 1
        nxt += 0.1
        time.sleep(max(0.0, nxt - time.monotonic()))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{ru.ru_utime + ru.ru_stime:.6f} {samples}")


if __name__ == "__main__":
    main()
