/* Activity per process over time (src/attrib/tenants.c): rows and owner
 * groups that sum to the device, the cap with its "other" row and
 * counter, staleness when processes end, a reused pid, MIG scopes, and
 * what a process shows alone carried into later shared intervals. */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/status.h"
#include "attrib/tenants.h"

#define SEC 1000000000LL

static void proc(struct tenants_interval *in, uint32_t pid, const char *pod, double tensor_s,
		 double memory_s)
{
	struct tenants_proc *p = &in->procs[in->n++];
	memset(p, 0, sizeof *p);
	snprintf(p->comm, sizeof p->comm, "p%u", (unsigned)pid);
	p->owner.resolved = true;
	p->owner.labels = 1u << OWNER_POD | 1u << OWNER_NAMESPACE;
	p->owner.start_ticks = pid * 10;
	snprintf(p->owner.pod, sizeof p->owner.pod, "%s", pod);
	snprintf(p->owner.namespace_, sizeof p->owner.namespace_, "ml");
	p->ev.pid = pid;
	p->ev.kernels_valid = true;
	p->ev.kernel_s[SPLIT_KIND_TENSOR] = tensor_s;
	p->ev.kernel_s[SPLIT_KIND_MEMORY] = memory_s;
	p->ev.launches = 100;
}

static void device(struct tenants_interval *in, int gpu, double sm, double tensor, double dram)
{
	memset(in, 0, sizeof *in);
	in->gpu = gpu;
	in->dev.interval_s = 1;
	in->dev.valid = 1u << SPLIT_SM | 1u << SPLIT_TENSOR | 1u << SPLIT_DRAM;
	in->dev.ratio[SPLIT_SM] = sm;
	in->dev.ratio[SPLIT_TENSOR] = tensor;
	in->dev.ratio[SPLIT_DRAM] = dram;
}

static const struct tenants_row *row(const struct tenants_row *r, size_t n, int gpu, uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].gpu == gpu && r[i].pid == pid)
			return &r[i];
	return NULL;
}

/* Rows and groups of the current interval sum to the device. */
static void expect_conserved(struct tenants *t, int gpu, const struct tenants_interval *in)
{
	struct tenants_row r[64];
	struct tenants_group g[64];
	size_t nr = tenants_rows(t, r, 64), ng = tenants_groups(t, g, 64);
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
		double sr = 0, sg = 0;
		for (size_t i = 0; i < nr; i++)
			if (r[i].gpu == gpu && r[i].current)
				sr += r[i].ratio[m];
		for (size_t i = 0; i < ng; i++)
			if (g[i].gpu == gpu && g[i].current)
				sg += g[i].ratio[m];
		assert_true(fabs(sr - in->dev.ratio[m]) < 1e-9);
		assert_true(fabs(sg - in->dev.ratio[m]) < 1e-9);
	}
}

static void test_rows_groups_gpu_time(void **state)
{
	(void)state;
	struct tenants *t;
	assert_int_equal(tenants_new(&t, 0, 0), GPULSE_OK);
	struct tenants_interval in;
	for (int s = 1; s <= 3; s++) {
		device(&in, 0, 0.9, 0.3, 0.5);
		proc(&in, 11, "train", 0.4, 0.05);
		proc(&in, 12, "train", 0.1, 0);
		proc(&in, 13, "etl", 0, 0.4);
		assert_int_equal(tenants_add(t, &in, s * SEC), GPULSE_OK);
		expect_conserved(t, 0, &in);
	}
	struct tenants_row r[16];
	size_t n = tenants_rows(t, r, 16);
	assert_int_equal(n, 3);
	const struct tenants_row *a = row(r, n, 0, 11);
	assert_non_null(a);
	assert_true(fabs(a->gpu_time_s - 3 * 0.45) < 1e-9);
	assert_int_equal(a->source, SPLIT_SOURCE_KERNELS);
	assert_string_equal(a->comm, "p11");
	struct tenants_group g[16];
	size_t ng = tenants_groups(t, g, 16);
	assert_int_equal(ng, 2);
	const struct tenants_group *train = strcmp(g[0].owner.pod, "train") == 0 ? &g[0] : &g[1];
	assert_int_equal(train->processes, 2);
	assert_true(fabs(train->gpu_time_s - 3 * 0.55) < 1e-9);
	/* The tensor work is the training pod's. */
	assert_true(train->ratio[SPLIT_TENSOR] / 0.3 > 0.95);
	tenants_free(t);
}

/* Past the cap, a process is folded into its GPU's "other" row, which
 * keeps the sums whole, and counted. */
static void test_cap_other(void **state)
{
	(void)state;
	struct tenants *t;
	assert_int_equal(tenants_new(&t, 2, 0), GPULSE_OK);
	struct tenants_interval in;
	device(&in, 1, 0.8, 0.2, 0.6);
	proc(&in, 21, "a", 0.2, 0.1);
	proc(&in, 22, "b", 0.1, 0.1);
	proc(&in, 23, "c", 0, 0.2);
	proc(&in, 24, "d", 0, 0.2);
	assert_int_equal(tenants_add(t, &in, SEC), GPULSE_OK);
	expect_conserved(t, 1, &in);
	struct tenants_row r[16];
	size_t n = tenants_rows(t, r, 16);
	assert_int_equal(n, 3);
	const struct tenants_row *o = row(r, n, 1, 0);
	assert_non_null(o);
	assert_string_equal(o->comm, "other");
	assert_true(fabs(o->gpu_time_s - 0.4) < 1e-9);
	struct tenants_stats st;
	tenants_get_stats(t, &st);
	assert_int_equal(st.folded_total, 2);
	assert_int_equal(st.intervals_total, 1);
	/* The parts of folded processes go to the GPU's "other" group, not
	 * their pods': the groups are bounded by the rows. */
	assert_int_equal(st.groups, 3);
	struct tenants_group g[8];
	size_t ng = tenants_groups(t, g, 8);
	const struct tenants_group *og = NULL;
	for (size_t i = 0; i < ng; i++)
		if (g[i].other)
			og = &g[i];
	assert_non_null(og);
	assert_string_equal(og->owner.pod, "other");
	assert_string_equal(owner_field_value(&og->owner, OWNER_NAMESPACE), "other");
	assert_int_equal(og->processes, 2);
	assert_true(fabs(og->ratio[SPLIT_SM] - o->ratio[SPLIT_SM]) < 1e-12);
	assert_true(fabs(og->gpu_time_s - 0.4) < 1e-9);
	tenants_free(t);
}

static const struct tenants_holder *holder(const struct tenants_holder *h, size_t n, int gpu,
					   const char *pod)
{
	for (size_t i = 0; i < n; i++)
		if (h[i].gpu == gpu && strcmp(h[i].pod, pod) == 0)
			return &h[i];
	return NULL;
}

/* Allocated but idle from the split: pod a runs GEMMs, pod b holds the
 * GPU with a process that runs nothing, pod c is allocated and runs
 * nothing at all. b and c are idle once the window has passed with
 * their SM part under the threshold, a never; b stops being idle the
 * interval it works. */
static void test_allocated_idle(void **state)
{
	(void)state;
	struct tenants *t;
	assert_int_equal(tenants_new(&t, 0, 0), GPULSE_OK);
	tenants_set_idle(t, 0.01, 5 * SEC);
	struct tenants_alloc al[2] = {0};
	snprintf(al[0].pod, sizeof al[0].pod, "b");
	snprintf(al[0].namespace_, sizeof al[0].namespace_, "ml");
	snprintf(al[1].pod, sizeof al[1].pod, "c");
	snprintf(al[1].namespace_, sizeof al[1].namespace_, "ml");
	struct tenants_interval in;
	struct tenants_holder h[16];
	size_t n = 0;
	for (int k = 1; k <= 6; k++) {
		device(&in, 0, 0.5, 0.35, 0.05);
		proc(&in, 1, "a", 0.5, 0);
		proc(&in, 2, "b", 0, 0);
		assert_int_equal(tenants_add(t, &in, k * SEC), GPULSE_OK);
		tenants_hold(t, 0, al, 2, true, k * SEC);
		n = tenants_holders(t, h, 16);
		assert_int_equal(n, 3);
		const struct tenants_holder *a = holder(h, n, 0, "a"), *b = holder(h, n, 0, "b"),
					    *c = holder(h, n, 0, "c");
		assert_non_null(a);
		assert_non_null(b);
		assert_non_null(c);
		assert_false(a->allocated);
		assert_true(b->allocated && c->allocated);
		assert_int_equal(a->processes, 1);
		assert_int_equal(b->processes, 1);
		assert_int_equal(c->processes, 0);
		assert_true(fabs(a->sm_active - 0.5) < 1e-9);
		assert_true(b->sm_active < 1e-9 && c->sm_active == 0);
		assert_false(a->idle);
		assert_true(a->low_s == 0);
		/* Low since k = 1: idle once 5 s have passed. */
		assert_true(fabs(b->low_s - (k - 1)) < 1e-9);
		assert_int_equal(b->idle, k >= 6);
		assert_int_equal(c->idle, k >= 6);
	}
	/* b works: no longer idle, its timer starts again. */
	device(&in, 0, 0.5, 0.2, 0.2);
	proc(&in, 1, "a", 0.25, 0);
	proc(&in, 2, "b", 0, 0.25);
	assert_int_equal(tenants_add(t, &in, 7 * SEC), GPULSE_OK);
	tenants_hold(t, 0, al, 2, true, 7 * SEC);
	n = tenants_holders(t, h, 16);
	assert_false(holder(h, n, 0, "b")->idle);
	assert_true(holder(h, n, 0, "b")->low_s == 0);
	assert_true(holder(h, n, 0, "c")->idle);
	/* A busy process in a pod whose name is unknown might be c's: no pod
	 * is low while it runs. */
	device(&in, 0, 0.5, 0.2, 0.2);
	proc(&in, 1, "a", 0.25, 0);
	proc(&in, 3, "", 0, 0.25);
	snprintf(in.procs[1].owner.pod_uid, sizeof in.procs[1].owner.pod_uid, "5f3c9a1e");
	assert_int_equal(tenants_add(t, &in, 8 * SEC), GPULSE_OK);
	tenants_hold(t, 0, al, 2, true, 8 * SEC);
	n = tenants_holders(t, h, 16);
	assert_false(holder(h, n, 0, "c")->idle);
	assert_false(holder(h, n, 0, "b")->idle);
	assert_true(holder(h, n, 0, "b")->current && !holder(h, n, 0, "b")->processes);
	/* No GPM: nothing judged, nothing idle, the timers kept. */
	tenants_clear(t, 0);
	tenants_hold(t, 0, al, 2, true, 9 * SEC);
	tenants_hold(t, 0, al, 2, false, 20 * SEC);
	n = tenants_holders(t, h, 16);
	assert_false(holder(h, n, 0, "c")->judged);
	assert_false(holder(h, n, 0, "c")->idle);
	tenants_hold(t, 0, al, 2, true, 21 * SEC);
	n = tenants_holders(t, h, 16);
	assert_true(holder(h, n, 0, "c")->idle);
	assert_true(fabs(holder(h, n, 0, "c")->low_s - 12) < 1e-9);
	/* a is gone: not current at once, dropped after stale_ns (60 s). */
	assert_false(holder(h, n, 0, "a")->current);
	tenants_hold(t, 0, al + 1, 1, true, 100 * SEC);
	n = tenants_holders(t, h, 16);
	assert_int_equal(n, 1);
	assert_non_null(holder(h, n, 0, "c"));
	tenants_free(t);
}

/* The (GPU, workload) rows are bounded: past max_rows + TENANTS_GPUS,
 * judgements are counted and left out; rows not current give way. */
static void test_holders_bound(void **state)
{
	(void)state;
	struct tenants *t;
	assert_int_equal(tenants_new(&t, 1, 0), GPULSE_OK);
	size_t cap = 1 + TENANTS_GPUS;
	struct tenants_alloc al[80];
	memset(al, 0, sizeof al);
	for (size_t i = 0; i < 80; i++)
		snprintf(al[i].pod, sizeof al[i].pod, "pod-%zu", i);
	tenants_hold(t, 0, al, 80, true, SEC);
	struct tenants_stats st;
	tenants_get_stats(t, &st);
	assert_int_equal(st.holders, cap);
	assert_int_equal(st.holders_dropped_total, 80 - cap);
	/* Another GPU's pods, once GPU 0's are no longer current, take their place. */
	tenants_hold(t, 0, NULL, 0, true, 2 * SEC);
	tenants_hold(t, 1, al, 10, true, 3 * SEC);
	tenants_get_stats(t, &st);
	assert_int_equal(st.holders, cap);
	assert_int_equal(st.holders_dropped_total, 80 - cap);
	struct tenants_holder h[128];
	size_t n = tenants_holders(t, h, 128);
	size_t on1 = 0;
	for (size_t i = 0; i < n; i++)
		on1 += h[i].gpu == 1 && h[i].current;
	assert_int_equal(on1, 10);
	tenants_free(t);
}

/* A process that ends stops being current at once (its gauges go) and
 * its row, counter and all, is dropped after stale_ns; its pid reused by
 * a new process starts a new counter. */
static void test_staleness(void **state)
{
	(void)state;
	struct tenants *t;
	assert_int_equal(tenants_new(&t, 0, 10 * SEC), GPULSE_OK);
	struct tenants_interval in;
	device(&in, 0, 0.9, 0.3, 0.5);
	proc(&in, 31, "x", 0.4, 0);
	proc(&in, 32, "y", 0, 0.4);
	assert_int_equal(tenants_add(t, &in, SEC), GPULSE_OK);
	device(&in, 0, 0.5, 0.0, 0.4);
	proc(&in, 32, "y", 0, 0.5);
	assert_int_equal(tenants_add(t, &in, 2 * SEC), GPULSE_OK);
	struct tenants_row r[16];
	size_t n = tenants_rows(t, r, 16);
	assert_int_equal(n, 2);
	assert_false(row(r, n, 0, 31)->current);
	assert_true(row(r, n, 0, 32)->current);
	assert_int_equal(row(r, n, 0, 32)->source, SPLIT_SOURCE_SOLE);
	assert_true(fabs(row(r, n, 0, 32)->ratio[SPLIT_DRAM] - 0.4) < 1e-12);
	expect_conserved(t, 0, &in);
	tenants_expire(t, 12 * SEC);
	n = tenants_rows(t, r, 16);
	assert_int_equal(n, 1);
	assert_null(row(r, n, 0, 31));
	struct tenants_stats st;
	tenants_get_stats(t, &st);
	assert_int_equal(st.expired_total, 1);
	assert_int_equal(st.groups, 1);

	/* pid 32 again, but a new process (another start time). */
	device(&in, 0, 0.5, 0.0, 0.4);
	proc(&in, 32, "y", 0, 0.5);
	in.procs[0].owner.start_ticks = 999;
	assert_int_equal(tenants_add(t, &in, 12 * SEC), GPULSE_OK);
	n = tenants_rows(t, r, 16);
	assert_int_equal(n, 2);
	int fresh = 0;
	for (size_t i = 0; i < n; i++)
		fresh += r[i].pid == 32 && r[i].current && fabs(r[i].gpu_time_s - 0.5) < 1e-9;
	assert_int_equal(fresh, 1);

	/* The GPU's process list reads empty: nothing is current, the
	 * counters stay until stale. */
	tenants_clear(t, 0);
	n = tenants_rows(t, r, 16);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++)
		assert_false(r[i].current);
	struct tenants_group g[4];
	size_t ng = tenants_groups(t, g, 4);
	for (size_t i = 0; i < ng; i++)
		assert_false(g[i].current);
	tenants_free(t);
}

/* Two MIG instances are split apart: each instance's processes share
 * only their instance's figures. */
static void test_mig_scopes(void **state)
{
	(void)state;
	struct tenants *t;
	assert_int_equal(tenants_new(&t, 0, 0), GPULSE_OK);
	struct tenants_interval in;
	device(&in, 2, 0.6, 0.4, 0.1);
	in.in_mig = true;
	in.gpu_instance = 3;
	proc(&in, 41, "a", 0.5, 0);
	proc(&in, 42, "b", 0.1, 0.1);
	assert_int_equal(tenants_add(t, &in, SEC), GPULSE_OK);
	device(&in, 2, 0.3, 0.0, 0.7);
	in.in_mig = true;
	in.gpu_instance = 5;
	proc(&in, 43, "c", 0, 0.6);
	assert_int_equal(tenants_add(t, &in, SEC), GPULSE_OK);
	struct tenants_row r[16];
	size_t n = tenants_rows(t, r, 16);
	assert_int_equal(n, 3);
	const struct tenants_row *a = row(r, n, 2, 41), *b = row(r, n, 2, 42), *c = row(r, n, 2, 43);
	assert_true(a->current && b->current && c->current);
	assert_true(fabs(a->ratio[SPLIT_TENSOR] + b->ratio[SPLIT_TENSOR] - 0.4) < 1e-9);
	assert_int_equal(c->source, SPLIT_SOURCE_SOLE);
	assert_int_equal(c->gpu_instance, 5);
	assert_true(fabs(c->ratio[SPLIT_DRAM] - 0.7) < 1e-12);
	tenants_free(t);
}

/* A process seen alone keeps what it showed: two processes whose kernels
 * have no telling names, one tensor-heavy, are told apart once each was
 * alone. */
static void test_alone_carried(void **state)
{
	(void)state;
	struct tenants *t;
	assert_int_equal(tenants_new(&t, 0, 0), GPULSE_OK);
	struct tenants_interval in;
	/* "other" kernels: the kinds say nothing. */
	device(&in, 0, 0.5, 0.3, 0.05);
	proc(&in, 51, "a", 0, 0);
	in.procs[0].ev.kernel_s[SPLIT_KIND_OTHER] = 0.5;
	assert_int_equal(tenants_add(t, &in, SEC), GPULSE_OK);
	device(&in, 0, 0.5, 0.01, 0.35);
	proc(&in, 52, "b", 0, 0);
	in.procs[0].ev.kernel_s[SPLIT_KIND_OTHER] = 0.5;
	assert_int_equal(tenants_add(t, &in, 2 * SEC), GPULSE_OK);
	/* Together, half the time each: truth tensor 0.15 + 0.005. */
	device(&in, 0, 0.5, 0.155, 0.2);
	proc(&in, 51, "a", 0, 0);
	in.procs[0].ev.kernel_s[SPLIT_KIND_OTHER] = 0.25;
	proc(&in, 52, "b", 0, 0);
	in.procs[1].ev.kernel_s[SPLIT_KIND_OTHER] = 0.25;
	assert_int_equal(tenants_add(t, &in, 3 * SEC), GPULSE_OK);
	struct tenants_row r[16];
	size_t n = tenants_rows(t, r, 16);
	assert_true(fabs(row(r, n, 0, 51)->ratio[SPLIT_TENSOR] - 0.15) < 0.002);
	assert_true(fabs(row(r, n, 0, 52)->ratio[SPLIT_DRAM] - 0.175) < 0.002);
	tenants_free(t);
}

/* What each tenant is bound by, from its own part. */
static void test_classify(void **state)
{
	(void)state;
	const uint32_t all = 1u << SPLIT_SM | 1u << SPLIT_TENSOR | 1u << SPLIT_DRAM;
	double gemm[] = {0.95, 0.6, 0.1}, stream[] = {0.95, 0.0, 0.8}, plain[] = {0.9, 0.05, 0.2};
	assert_int_equal(tenants_classify(0.5, gemm, all, 50), TENANTS_COMPUTE_TENSOR);
	assert_int_equal(tenants_classify(0.5, stream, all, 50), TENANTS_MEMORY);
	assert_int_equal(tenants_classify(0.8, plain, all, 50), TENANTS_COMPUTE_SM);
	assert_int_equal(tenants_classify(0.3, plain, all, 50), TENANTS_MIXED);
	assert_int_equal(tenants_classify(0.01, gemm, all, 0), TENANTS_IDLE);
	/* 30 000 launches a second of 5 us kernels: busy 15%, launch bound,
	 * whatever the kernels do while they run. */
	assert_int_equal(tenants_classify(0.15, stream, all, 30000), TENANTS_LAUNCH);
	/* The same rate of 50 us kernels keeps the GPU busy: not launches. */
	assert_int_equal(tenants_classify(0.45, stream, all, 9000), TENANTS_MEMORY);
	/* Without the tensor figure, tensor work is not claimed. */
	assert_int_equal(tenants_classify(0.8, gemm, 1u << SPLIT_SM, 50), TENANTS_COMPUTE_SM);
	assert_string_equal(tenants_bound_name(TENANTS_COMPUTE_TENSOR), "compute_bound");
	assert_string_equal(tenants_bound_detail(TENANTS_COMPUTE_TENSOR), "tensor cores");
	assert_string_equal(tenants_bound_name(TENANTS_LAUNCH), "launch_bound");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows_groups_gpu_time),
		cmocka_unit_test(test_cap_other),
		cmocka_unit_test(test_allocated_idle),
		cmocka_unit_test(test_holders_bound),
		cmocka_unit_test(test_staleness),
		cmocka_unit_test(test_mig_scopes),
		cmocka_unit_test(test_alone_carried),
		cmocka_unit_test(test_classify),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
