/* What shape the driver's per-process utilization buffer has, to settle
 * what src/collect/procutil.c assumes (docs/internals/collection.md,
 * "Per-process shares"). Run on the GPU machine while a CUDA program
 * runs (bench/gpu_load.py matmul 30):
 *   build/bench_procutil_probe [GPU] [SECONDS]
 * Every SECONDS (default 10) it asks for the samples since the previous
 * ask, and prints: how many, per pid (count, min/mean/max SM and memory),
 * the distinct sample times and their median spacing (the driver's
 * period), gpulse's share for each pid, and the GPU's own utilization
 * averaged over the same window at 10 Hz. The first ask also shows what
 * lastSeenTimeStamp 0 returns (the whole buffer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "nvml/nvml_shim.h"
#include "collect/procutil.h"

#define CAP 16384

static struct nvml_process_utilization_sample s[CAP];

static unsigned long long wall_us(void)
{
	return (unsigned long long)(clock_wall_ns() / 1000);
}

static void report(struct procutil_state *st, unsigned n, unsigned long long since,
		   unsigned long long end, double gpu_util)
{
	uint32_t pids[64] = {0};
	unsigned npids = 0;
	for (unsigned i = 0; i < n && npids < 64; i++) {
		unsigned k = 0;
		while (k < npids && pids[k] != s[i].pid)
			k++;
		if (k == npids)
			pids[npids++] = s[i].pid;
	}
	double sm[64], mem[64];
	procutil_shares(st, s, n, pids, npids, since, end, sm, mem);
	printf("  window %.3f s: %u samples, %u pids, driver period %.1f ms, %s; GPU util %.1f%%\n",
	       (double)(end - since) / 1e6, n, npids, (double)st->period_us / 1000,
	       st->buffered ? "several samples per pid" : "one sample per pid", gpu_util * 100);
	for (unsigned k = 0; k < npids; k++) {
		unsigned c = 0, smin = 101, smax = 0;
		double ssum = 0, msum = 0;
		unsigned long long tmin = ~0ULL, tmax = 0;
		for (unsigned i = 0; i < n; i++) {
			if (s[i].pid != pids[k])
				continue;
			c++;
			ssum += s[i].sm_util;
			msum += s[i].mem_util;
			smin = s[i].sm_util < smin ? s[i].sm_util : smin;
			smax = s[i].sm_util > smax ? s[i].sm_util : smax;
			tmin = s[i].timestamp_us < tmin ? s[i].timestamp_us : tmin;
			tmax = s[i].timestamp_us > tmax ? s[i].timestamp_us : tmax;
		}
		printf("    pid %u: %u samples over %.3f s (newest %.3f s before the ask), SM min/mean/max "
		       "%u/%.1f/%u, mem mean %.1f -> share SM %.1f%% mem %.1f%%\n",
		       pids[k], c, (double)(tmax - tmin) / 1e6, (double)(end - tmax) / 1e6, smin,
		       ssum / c, smax, msum / c, sm[k] * 100, mem[k] * 100);
	}
}

int main(int argc, char **argv)
{
	int gpu = argc > 1 ? atoi(argv[1]) : 0;
	int secs = argc > 2 ? atoi(argv[2]) : 10;
	char err[256];
	struct nvml_lib *nv;
	nvml_device_t dev;
	if (secs < 1 || secs > 600) {
		fprintf(stderr, "SECONDS must be 1..600\n");
		return 2;
	}
	if (nvml_lib_open(&nv, NULL, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (nv->device_get_handle_by_index((unsigned)gpu, &dev) || !nv->device_get_process_utilization) {
		fprintf(stderr, "no GPU %d, or no nvmlDeviceGetProcessUtilization\n", gpu);
		return 1;
	}
	struct procutil_state st = {0};
	unsigned n = CAP;
	unsigned long long t = wall_us();
	nvml_return_t r = nv->device_get_process_utilization(dev, s, &n, 0);
	printf("lastSeenTimeStamp 0: return %d\n", (int)r);
	if (r == NVML_ABI_SUCCESS) {
		struct procutil_state st0 = {0};
		unsigned long long oldest = t;
		for (unsigned i = 0; i < n; i++)
			oldest = s[i].timestamp_us < oldest ? s[i].timestamp_us : oldest;
		report(&st0, n, oldest - 1, wall_us(), -0.01);
	}
	unsigned long long since = wall_us();
	for (int round = 0; round < 6; round++) {
		double util_sum = 0;
		int util_n = 0;
		int64_t until = clock_mono_ns() + (int64_t)secs * NS_PER_SEC;
		while (clock_mono_ns() < until) {
			struct nvml_utilization u;
			if (nv->device_get_utilization_rates(dev, &u) == NVML_ABI_SUCCESS) {
				util_sum += u.gpu / 100.0;
				util_n++;
			}
			clock_sleep_until(clock_mono_ns() + 100 * NS_PER_MS);
		}
		n = CAP;
		r = nv->device_get_process_utilization(dev, s, &n, since);
		unsigned long long end = wall_us();
		printf("round %d: return %d\n", round, (int)r);
		if (r == NVML_ABI_SUCCESS)
			report(&st, n, since, end, util_n ? util_sum / util_n : 0);
		since = end;
	}
	nvml_lib_close(nv);
	return 0;
}
