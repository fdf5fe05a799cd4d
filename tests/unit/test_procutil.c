/* Per-process shares from NVML's sample buffer (src/collect/procutil.c):
 * the window's time-weighted mean, set against the GPU's own utilization
 * over the same window, for one process alone and two sharing a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collect/procutil.h"
#include "common/status.h"

#define P_US 166667ULL          /* the driver's period in these buffers */
#define T0 1700000000000000ULL  /* the window starts here (wall clock, µs) */
#define W_US 10000000ULL        /* a 10 s window, as the collector reads */
#define PERIODS ((int)(W_US / P_US))

static struct nvml_process_utilization_sample buf[4096];
static unsigned nbuf;

static void add(unsigned pid, int k, unsigned sm, unsigned mem)
{
	buf[nbuf++] = (struct nvml_process_utilization_sample){
		.pid = pid, .timestamp_us = T0 + (unsigned long long)(k + 1) * P_US, .sm_util = sm,
		.mem_util = mem};
}

/* The GPU's utilization in driver period k: 100% for half a second, 20%
 * for the next half, so a window's mean is 60% while any one sample reads
 * 100 or 20. Its memory utilization is half of that. */
static unsigned gpu_sm(int k)
{
	return (k / 3) % 2 == 0 ? 100 : 20;
}

static double gpu_mean(int from, int to)
{
	double s = 0;
	for (int k = from; k < to; k++)
		s += gpu_sm(k);
	return s / (to - from) / 100.0;
}

static void test_alone_follows_the_gpu(void **state)
{
	(void)state;
	nbuf = 0;
	for (int k = 0; k < PERIODS; k++)
		add(42, k, gpu_sm(k), gpu_sm(k) / 2);
	struct procutil_state st = {0};
	uint32_t pid = 42;
	double sm, mem;
	assert_int_equal(procutil_shares(&st, buf, nbuf, &pid, 1, T0, T0 + W_US, &sm, &mem),
			 GPULSE_OK);
	double g = gpu_mean(0, PERIODS);
	assert_true(sm > g - 0.05 && sm < g + 0.05);
	assert_true(mem > g / 2 - 0.05 && mem < g / 2 + 0.05);
	/* The newest sample alone (what the collector used to take) reads
	 * 20% or 100%, far from the window's 60%. */
	unsigned newest = buf[nbuf - 1].sm_util;
	assert_true(newest / 100.0 < g - 0.3 || newest / 100.0 > g + 0.3);
	assert_true(st.buffered);
	assert_int_equal(st.period_us, P_US);
}

static void test_two_share_a_gpu(void **state)
{
	(void)state;
	nbuf = 0;
	/* At each period the GPU's utilization is split 2:1, and so is its
	 * memory traffic: the shares add up to the GPU and agree with each
	 * other. */
	for (int k = 0; k < PERIODS; k++) {
		add(7, k, gpu_sm(k) * 2 / 3, gpu_sm(k) / 3);
		add(9, k, gpu_sm(k) / 3, gpu_sm(k) / 6);
	}
	struct procutil_state st = {0};
	uint32_t pids[2] = {7, 9};
	double sm[2], mem[2];
	assert_int_equal(procutil_shares(&st, buf, nbuf, pids, 2, T0, T0 + W_US, sm, mem), GPULSE_OK);
	double g = gpu_mean(0, PERIODS);
	assert_true(sm[0] + sm[1] > g - 0.05 && sm[0] + sm[1] < g + 0.05);
	assert_true(mem[0] + mem[1] > g / 2 - 0.05 && mem[0] + mem[1] < g / 2 + 0.05);
	assert_true(sm[0] / sm[1] > 1.9 && sm[0] / sm[1] < 2.1);
	assert_true(mem[0] / mem[1] > 1.9 && mem[0] / mem[1] < 2.1);
}

static void test_idle_periods_count(void **state)
{
	(void)state;
	nbuf = 0;
	/* Started 6 s into the window at 99%: NVML has no sample for a
	 * process in the periods it did nothing, and those count as idle. */
	int start = PERIODS * 6 / 10;
	for (int k = start; k < PERIODS; k++)
		add(5, k, 99, 40);
	struct procutil_state st = {0};
	uint32_t pid = 5;
	double sm, mem;
	assert_int_equal(procutil_shares(&st, buf, nbuf, &pid, 1, T0, T0 + W_US, &sm, &mem),
			 GPULSE_OK);
	double want = 0.99 * (PERIODS - start) / (double)PERIODS;
	assert_true(sm > want - 0.02 && sm < want + 0.02);
	/* A pid NVML did not mention was idle all window. */
	uint32_t other = 6;
	assert_int_equal(procutil_shares(&st, buf, nbuf, &other, 1, T0, T0 + W_US, &sm, &mem),
			 GPULSE_OK);
	assert_true(sm == 0 && mem == 0);
}

static void test_one_sample_per_pid(void **state)
{
	(void)state;
	nbuf = 0;
	/* A driver that answers one sample per process, each its figure for
	 * the window, is taken at its word. */
	add(1, PERIODS - 1, 80, 30);
	add(2, PERIODS - 2, 15, 5);
	struct procutil_state st = {0};
	uint32_t pids[2] = {1, 2};
	double sm[2], mem[2];
	assert_int_equal(procutil_shares(&st, buf, nbuf, pids, 2, T0, T0 + W_US, sm, mem), GPULSE_OK);
	assert_false(st.buffered);
	assert_true(sm[0] > 0.79 && sm[0] < 0.81 && mem[0] > 0.29 && mem[0] < 0.31);
	assert_true(sm[1] > 0.14 && sm[1] < 0.16);
	/* Once a window showed several samples per pid, a lone sample is one
	 * busy period among idle ones. */
	st.buffered = true;
	st.period_us = P_US;
	assert_int_equal(procutil_shares(&st, buf, nbuf, pids, 2, T0, T0 + W_US, sm, mem), GPULSE_OK);
	assert_true(sm[0] < 0.02);
}

static void test_bad_samples_and_clock(void **state)
{
	(void)state;
	nbuf = 0;
	for (int k = 0; k < PERIODS; k++)
		add(3, k, 50, 10);
	/* A value over 100 (a known driver fault) and samples outside the
	 * window are left out. */
	add(3, PERIODS / 2, 2147483632U, 10);
	buf[nbuf++] = (struct nvml_process_utilization_sample){
		.pid = 3, .timestamp_us = T0 - 5, .sm_util = 100, .mem_util = 100};
	struct procutil_state st = {0};
	uint32_t pid = 3;
	double sm = -1, mem = -1;
	assert_int_equal(procutil_shares(&st, buf, nbuf, &pid, 1, T0, T0 + W_US, &sm, &mem),
			 GPULSE_OK);
	assert_true(sm > 0.49 && sm < 0.51 && mem > 0.09 && mem < 0.11);
	/* The wall clock stepped back: no window, nothing written. */
	sm = -1;
	assert_int_equal(procutil_shares(&st, buf, nbuf, &pid, 1, T0, T0, &sm, &mem), GPULSE_EINVAL);
	assert_true(sm == -1);
	/* No samples at all: idle. */
	assert_int_equal(procutil_shares(&st, NULL, 0, &pid, 1, T0, T0 + W_US, &sm, &mem),
			 GPULSE_OK);
	assert_true(sm == 0 && mem == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alone_follows_the_gpu),
		cmocka_unit_test(test_two_share_a_gpu),
		cmocka_unit_test(test_idle_periods_count),
		cmocka_unit_test(test_one_sample_per_pid),
		cmocka_unit_test(test_bad_samples_and_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
