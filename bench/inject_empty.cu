// Launch-bound loop of empty kernels: the worst case for per-launch
// tracing cost (bench/inject_overhead.sh runs it plain and under
// libgpulse-inject.so). Prints one JSON line: median ns per launch over
// REPS timed runs of N launches each (after a warm-up), and max RSS.
//   inject_empty [N] [REPS]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

__global__ void k_empty(void) {}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200000;
	int reps = argc > 2 ? atoi(argv[2]) : 7;
	if (n <= 0 || reps <= 0 || reps > 100)
		return 2;
	double *t = (double *)calloc((size_t)reps, sizeof *t);
	for (int i = 0; i < 200000; i++) // about a second: clocks ramp, the governor settles
		k_empty<<<1, 1>>>();
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 1;
	for (int r = 0; r < reps; r++) {
		double t0 = now_s();
		for (int i = 0; i < n; i++)
			k_empty<<<1, 1>>>();
		cudaDeviceSynchronize();
		t[r] = (now_s() - t0) / n * 1e9;
	}
	if (cudaGetLastError() != cudaSuccess)
		return 1;
	qsort(t, (size_t)reps, sizeof *t, cmp);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("{\"workload\": \"empty\", \"per_iter_ms\": %.9f, \"ns_per_launch\": %.1f, "
	       "\"min_ns\": %.1f, \"max_ns\": %.1f, \"maxrss_kb\": %ld, \"checksum\": 0}\n",
	       t[reps / 2] / 1e6, t[reps / 2], t[0], t[reps - 1], ru.ru_maxrss);
	return 0;
}
