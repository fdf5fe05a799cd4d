/* The per-GPU timeline of traced intervals (profile_timeline.h): frames of
 * one interval merge, sums prorate intervals by overlap, traced time is
 * the longest of any one process while amounts add up, the heaviest
 * process is named, host<->device copies only count as PCIe, the ring
 * keeps the newest intervals, and CUDA_VISIBLE_DEVICES maps ordinals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/profile_timeline.h"
#include "common/status.h"
#include "wire/wire.h"

#define S 1000000000ull  /* ns per second */

static bool near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * fmax(1, fabs(b));
}

static void kernels(struct profile_timeline *t, uint32_t pid, uint32_t dev, uint64_t a_ns,
		    uint64_t b_ns, uint64_t traced_ns, uint64_t launches, uint64_t total_ns)
{
	struct wire_kernel k = {.launches = launches, .total_ns = total_ns};
	struct wire_msg m = {.type = WIRE_KERNELS};
	m.u.kernels.scope = (struct wire_scope){.device = dev, .interval_start_ns = a_ns,
						.interval_end_ns = b_ns, .traced_ns = traced_ns};
	m.u.kernels.count = 1;
	m.u.kernels.kernels = &k;
	profile_timeline_add(t, pid, &m);
}

static int resolve(void *ctx, const char *uuid)
{
	(void)ctx;
	if (strncmp(uuid, "MIG-cccc", 8) == 0)
		return 5;   /* a MIG instance of GPU 5, as the daemon's resolver knows it */
	return strncmp(uuid, "GPU-aaaa", 8) == 0 ? 3 : -1;
}

static void visible_devices(void **state)
{
	(void)state;
	assert_int_equal(profile_visible_device(NULL, 2, NULL, NULL), 2);
	assert_int_equal(profile_visible_device("5,1", 0, NULL, NULL), 5);
	assert_int_equal(profile_visible_device("5, 1", 1, NULL, NULL), 1);
	assert_int_equal(profile_visible_device("5,1", 2, NULL, NULL), -1);
	assert_int_equal(profile_visible_device("", 0, NULL, NULL), -1);
	assert_int_equal(profile_visible_device("GPU-aaaa1234,0", 0, resolve, NULL), 3);
	assert_int_equal(profile_visible_device("GPU-aaaa1234,0", 1, resolve, NULL), 0);
	assert_int_equal(profile_visible_device("GPU-bbbb", 0, resolve, NULL), -1);
	assert_int_equal(profile_visible_device("GPU-aaaa", 0, NULL, NULL), -1);
	assert_int_equal(profile_visible_device("MIG-1234", 0, resolve, NULL), -1);
	/* A MIG instance by its own UUID: the GPU the resolver says holds it. */
	assert_int_equal(profile_visible_device("MIG-cccc5678-0000-5000-8000-000000000001", 0, resolve,
						NULL), 5);
	assert_int_equal(profile_visible_device("0,MIG-cccc5678", 1, resolve, NULL), 5);
	assert_int_equal(profile_visible_device("MIG-cccc5678", 0, NULL, NULL), -1);
	/* A MIG instance named by its parent GPU runs on that GPU. */
	assert_int_equal(profile_visible_device("MIG-GPU-aaaa1234/1/0", 0, resolve, NULL), 3);
	assert_int_equal(profile_visible_device("0,MIG-GPU-aaaa1234/2/0", 1, resolve, NULL), 3);
	assert_int_equal(profile_visible_device("MIG-GPU-bbbb1234/1/0", 0, resolve, NULL), -1);
	assert_int_equal(profile_visible_device("MIG-GPU-aaaa1234/1/0", 0, NULL, NULL), -1);
	/* CUDA stops at the first invalid entry. */
	assert_int_equal(profile_visible_device("1,x,2", 2, NULL, NULL), -1);
	assert_int_equal(profile_visible_device("1,x,2", 0, NULL, NULL), 1);
	assert_int_equal(profile_visible_device("-1", 0, NULL, NULL), -1);
	assert_int_equal(profile_visible_device("99", 0, NULL, NULL), -1);
}

static void sums(void **state)
{
	(void)state;
	struct profile_timeline *t;
	assert_int_equal(profile_timeline_new(&t, NULL, NULL), GPULSE_OK);
	/* This test process has no CUDA_VISIBLE_DEVICES (unset below), so
	 * ordinals are GPU indices. */
	uint32_t me = (uint32_t)getpid();
	kernels(t, me, 0, 100 * S, 102 * S, 1 * S, 1000, S / 2);
	/* A second frame of the same interval merges (traced is not added). */
	kernels(t, me, 0, 100 * S, 102 * S, 1 * S, 1000, S / 2);
	struct wire_copy c[3] = {
		{.kind = WIRE_COPY_H2D, .count = 1, .bytes = 1000, .total_ns = S / 10},
		{.kind = WIRE_COPY_D2D, .count = 1, .bytes = 5000, .total_ns = S},
		{.kind = WIRE_COPY_D2H, .count = 1, .bytes = 3000, .total_ns = S / 10},
	};
	struct wire_msg m = {.type = WIRE_COPIES};
	m.u.copies.scope = (struct wire_scope){.device = 0, .interval_start_ns = 100 * S,
					       .interval_end_ns = 102 * S, .traced_ns = S};
	m.u.copies.count = 3;
	m.u.copies.copies = c;
	profile_timeline_add(t, me, &m);
	/* Another process on the same GPU, and one on GPU 1. */
	kernels(t, 4242, 0, 100 * S, 102 * S, 2 * S / 10, 10, S / 4);
	kernels(t, me, 1, 100 * S, 102 * S, S, 7, S / 100);

	struct profile_window_sum w;
	assert_true(profile_timeline_sum(t, 0, 100, 102, &w));
	assert_true(near(w.traced_s, 1));        /* the longest, not 1.2 */
	assert_true(near(w.launches, 2010));
	assert_true(near(w.kernel_s, 1.25));
	assert_true(near(w.copy_bytes, 4000));    /* H2D + D2H only */
	assert_true(near(w.copy_s, 0.2));
	assert_int_equal(w.processes, 2);
	assert_int_equal(w.top_pid, me);
	assert_true(near(w.top_kernel_s, 1.0));
	/* Half the interval: half of everything. */
	assert_true(profile_timeline_sum(t, 0, 101, 105, &w));
	assert_true(near(w.launches, 1005));
	assert_true(near(w.traced_s, 0.5));
	/* GPU 1 separately; nothing elsewhere. */
	assert_true(profile_timeline_sum(t, 1, 90, 110, &w));
	assert_true(near(w.launches, 7));
	assert_false(profile_timeline_sum(t, 0, 102, 110, &w));
	assert_false(profile_timeline_sum(t, 2, 90, 110, &w));
	assert_false(profile_timeline_sum(t, -1, 90, 110, &w));
	assert_false(profile_timeline_sum(t, 0, 105, 100, &w));
	/* A frame with an empty interval, or an unmapped device, is dropped. */
	kernels(t, me, 0, 200 * S, 200 * S, S, 5, 5);
	kernels(t, me, 99, 200 * S, 201 * S, S, 5, 5);
	assert_false(profile_timeline_sum(t, 0, 199, 202, &w));
	profile_timeline_free(t);
}

static void ring_keeps_the_newest(void **state)
{
	(void)state;
	struct profile_timeline *t;
	assert_int_equal(profile_timeline_new(&t, NULL, NULL), GPULSE_OK);
	uint32_t me = (uint32_t)getpid();
	size_t n = PROFILE_TIMELINE_SLOTS + 100;
	for (size_t i = 0; i < n; i++)
		kernels(t, me, 0, (1000 + i) * S, (1001 + i) * S, S, 1, 1000);
	struct profile_window_sum w;
	assert_false(profile_timeline_sum(t, 0, 1000, 1100, &w));  /* gone */
	assert_true(profile_timeline_sum(t, 0, 1000, (double)(1000 + n), &w));
	assert_true(near(w.launches, PROFILE_TIMELINE_SLOTS));
	profile_timeline_forget(t, me);
	kernels(t, me, 0, 5000 * S, 5001 * S, S, 3, 3000);
	assert_true(profile_timeline_sum(t, 0, 5000, 5001, &w));
	assert_true(near(w.launches, 3));
	profile_timeline_free(t);
}

int main(int argc, char **argv)
{
	(void)argc;
	/* The mapping reads this process's initial environment from /proc:
	 * start again without the variable if it was set. */
	if (getenv("CUDA_VISIBLE_DEVICES")) {
		unsetenv("CUDA_VISIBLE_DEVICES");
		execv("/proc/self/exe", argv);
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(visible_devices),
		cmocka_unit_test(sums),
		cmocka_unit_test(ring_keeps_the_newest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
