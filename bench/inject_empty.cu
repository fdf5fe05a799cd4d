// Launch-bound loop of empty kernels: the worst case for per-launch
// tracing cost (bench/inject_overhead.sh runs it plain and under
// libgpulse-inject.so). Prints one JSON line: ns per launch over REPS
// timed runs of N launches each (after a warm-up): the mean over all of
// them (the wall time, tracing windows included: per_iter_ms) and the
// median run; max RSS; and each run's start (CLOCK_MONOTONIC ns, the
// clock of the library's window log) with its ns per launch.
//   inject_empty [N] [REPS]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

// CPU time of each of the process's threads so far, as JSON
// [["comm", ms], ...]: whether a helper thread (CUPTI's, the library's)
// takes CPU from the launching thread (which matters most when the
// process is pinned to one core).
static void print_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	printf("[");
	int first = 1;
	long hz = sysconf(_SC_CLK_TCK);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char path[64], buf[512];
		snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[n] = 0;
		char *l = strchr(buf, '('), *r = strrchr(buf, ')');
		if (!l || !r)
			continue;
		*r = 0;
		unsigned long ut = 0, st = 0;
		// after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
		sscanf(r + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
		for (char *c = l + 1; *c; c++)
			if (*c == '"' || *c == '\\')
				*c = '_';
		printf("%s[\"%s\", %.0f]", first ? "" : ", ", l + 1, (ut + st) * 1000.0 / hz);
		first = 0;
	}
	if (d)
		closedir(d);
	printf("]");
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200000;
	int reps = argc > 2 ? atoi(argv[2]) : 7;
	if (n <= 0 || reps <= 0 || reps > 1000)
		return 2;
	double *t = (double *)calloc((size_t)reps, sizeof *t);
	double *per = (double *)calloc((size_t)reps, sizeof *per);
	long long *start = (long long *)calloc((size_t)reps, sizeof *start);
	for (int i = 0; i < 200000; i++) // about a second: clocks ramp, the governor settles
		k_empty<<<1, 1>>>();
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 1;
	for (int r = 0; r < reps; r++) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		start[r] = ts.tv_sec * 1000000000LL + ts.tv_nsec;
		double t0 = now_s();
		for (int i = 0; i < n; i++)
			k_empty<<<1, 1>>>();
		cudaDeviceSynchronize();
		t[r] = (now_s() - t0) / n * 1e9;
		per[r] = t[r];
	}
	if (cudaGetLastError() != cudaSuccess)
		return 1;
	double sum = 0;
	for (int r = 0; r < reps; r++)
		sum += t[r];
	qsort(t, (size_t)reps, sizeof *t, cmp);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("{\"workload\": \"empty\", \"per_iter_ms\": %.9f, \"median_ms\": %.9f, "
	       "\"ns_per_launch\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f, \"maxrss_kb\": %ld, "
	       "\"checksum\": 0, \"series\": [",
	       sum / reps / 1e6, t[reps / 2] / 1e6, sum / reps, t[0], t[reps - 1], ru.ru_maxrss);
	for (int r = 0; r < reps; r++)
		printf("%s[%lld, %.1f]", r ? ", " : "", start[r], per[r]);
	printf("], \"threads\": ");
	print_threads();
	printf("}\n");
	return 0;
}
