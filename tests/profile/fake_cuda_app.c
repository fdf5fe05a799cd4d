/* A stand-in CUDA application for tests/integration/test_inject_e2e.sh:
 * it loads the CUPTI stand-in (tests/fake_cupti) and the real
 * libgpulse-inject.so, starts the library as the CUDA driver would
 * (InitializeInjection), then launches known kernels and copies through
 * the stand-in, so the real library talks to a real gpulsed in CI.
 *   fake_cuda_app FAKE_CUPTI.so LIBGPULSE_INJECT.so SECONDS [uvm|names]
 * Launches k_e2e(float*) 1000 times a second (paced by the clock) and
 * one 1 MiB H2D copy a second, for SECONDS; prints the totals on its last line, then exits
 * (the library's exit flush sends the rest). With `uvm` it first
 * migrates 256 MiB of managed memory to the device in 2 MiB steps and
 * 64 MiB back (the totals line then ends "uvm_h2d N uvm_d2h N"). With
 * `names` it also launches, with each burst of k_e2e, once, twice and
 * three times: two kernels whose 400-byte names share their first 301
 * bytes ('x' * 301 + "<1>(float*)" or "<2>(float*)", padded with '1' or
 * '2'), and one of 10239 bytes of 'L' (the totals line then ends
 * "names N", the bursts). The library's settings
 * come from the environment (GPULSE_MODE, GPULSE_SOCKET, ...). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../fake_cupti/fake_cupti.h"

/* 'x' * 301, then tail, then fill up to len bytes. */
static void long_name(char *out, size_t len, char fill, const char *tail)
{
	memset(out, fill, len);
	memset(out, 'x', 301);
	memcpy(out + 301, tail, strlen(tail));
	out[len] = '\0';
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "fake_cuda_app: %s missing\n", name);
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	int uvm = argc == 5 && strcmp(argv[4], "uvm") == 0;
	int names = argc == 5 && strcmp(argv[4], "names") == 0;
	if (argc != 4 && !uvm && !names) {
		fprintf(stderr, "usage: fake_cuda_app FAKE_CUPTI.so LIBGPULSE_INJECT.so SECONDS [uvm|names]\n");
		return 2;
	}
	void *fc = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
	if (!fc || !lib) {
		fprintf(stderr, "fake_cuda_app: %s\n", dlerror());
		return 2;
	}
	setenv("GPULSE_CUPTI_PATH", argv[1], 1);
	int (*init)(void);
	void (*context_created)(void);
	void (*launch)(const char *, uint64_t, int);
	void (*copy)(int, int, uint64_t, uint64_t);
	void (*migrate)(int, uint64_t);
	*(void **)(&init) = sym(lib, "InitializeInjection");
	*(void **)(&context_created) = sym(fc, "fake_cupti_context_created");
	*(void **)(&launch) = sym(fc, "fake_cupti_launch");
	*(void **)(&copy) = sym(fc, "fake_cupti_memcpy");
	*(void **)(&migrate) = sym(fc, "fake_cupti_uvm");
	if (init() != 1)
		return 3;
	context_created();
	uint64_t uvm_h2d = 0, uvm_d2h = 0;
	if (uvm) {
		for (int i = 0; i < 128; i++, uvm_h2d += 2u << 20)
			migrate(1, 2u << 20);
		for (int i = 0; i < 32; i++, uvm_d2h += 2u << 20)
			migrate(0, 2u << 20);
	}
	/* Names live as long as CUPTI's do (the library caches by pointer). */
	static char n1[401], n2[401], n3[10240];
	if (names) {
		long_name(n1, 400, '1', "<1>(float*)");
		long_name(n2, 400, '2', "<2>(float*)");
		memset(n3, 'L', sizeof n3 - 1);
	}
	long bursts = 0;
	int seconds = atoi(argv[3]);
	long kernels = 0, copies = 0;
	/* Paced by the clock: a loaded machine that sleeps longer gets
	 * bigger bursts, not fewer launches a second. */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		double el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
		if (el >= seconds)
			break;
		long due = (long)(el * 1000);
		if (due > kernels) {
			launch("k_e2e(float*)", 50000, (int)(due - kernels)); /* 50 µs each */
			kernels = due;
			if (names) {
				launch(n1, 10000, 1);
				launch(n2, 20000, 2);
				launch(n3, 30000, 3);
				bursts++;
			}
		}
		if ((long)el >= copies) {
			copy(1, 1, 1 << 20, 100000);
			copies++;
		}
		usleep(10000);
	}
	if (uvm)
		printf("kernels %ld copies %ld uvm_h2d %llu uvm_d2h %llu\n", kernels, copies,
		       (unsigned long long)uvm_h2d, (unsigned long long)uvm_d2h);
	else if (names)
		printf("kernels %ld copies %ld names %ld\n", kernels, copies, bursts);
	else
		printf("kernels %ld copies %ld\n", kernels, copies);
	fflush(stdout);
	return 0;
}
