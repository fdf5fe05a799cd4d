/* The launch census of continuous mode (src/inject/census.c): counts,
 * sampled GPU times, the table's bound, and the scaling to an interval. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/agg.h"
#include "inject/calib.h"
#include "inject/census.h"

static const uint32_t grid[3] = { 64, 1, 1 }, block[3] = { 128, 1, 1 };

/* The size class of the tests' usual launch. */
static uint8_t gcls(void)
{
	return census_class(grid, block);
}

static struct census *new_census(void)
{
	struct census *c = calloc(1, sizeof *c);
	assert_non_null(c);
	census_clear(c);
	return c;
}

static struct census_pool *new_pool(void)
{
	struct census_pool *p = calloc(1, sizeof *p);
	assert_non_null(p);
	return p;
}

/* The interval's estimates with `c` pooled first: its windows observed
 * `observed_ns` of `interval_ns` (all of it after the first launch). */
static uint64_t fold(struct census *c, struct census_pool *p, uint64_t observed_ns,
		     uint64_t interval_ns, const struct census_means *m, struct agg *a,
		     uint64_t *untimed)
{
	census_pool_add(p, c, observed_ns, interval_ns);
	return census_estimate(c, p, interval_ns - observed_ns, m, a, NULL, NULL, untimed);
}

/* 100 launches seen in a quarter of the interval stand for 400; GPU time
 * is the sampled mean times that. */
static void test_scales_to_interval(void **state)
{
	(void)state;
	static const char name[] = "k_gemm";
	struct census *c = new_census();
	int slot = -1;
	for (int i = 0; i < 100; i++)
		slot = census_launch(c, name, 1, 0, grid, block, 0);
	census_sample(c, slot, name, 1000);
	census_sample(c, slot, name, 3000);
	census_copy(c, 1, 0, WIRE_COPY_H2D, 4096);
	struct agg *a = agg_create();
	assert_non_null(a);
	uint64_t untimed = 0;
	struct census_pool *p = new_pool();
	assert_int_equal(fold(c, p, 250, 1000, NULL, a, &untimed), 400);
	const struct wire_kernel *k = agg_find_kernel(a, 0, 1, name);
	assert_non_null(k);
	assert_int_equal(k->launches, 400);
	assert_int_equal(k->total_ns, 400 * 2000);
	assert_int_equal(k->min_ns, 1000);
	assert_int_equal(k->max_ns, 3000);
	assert_int_equal(k->grid[0], 64);
	assert_int_equal(untimed, 0);
	const struct wire_copy *cp = agg_find_copy(a, 0, 1, WIRE_COPY_H2D, 1);
	assert_non_null(cp);
	assert_int_equal(cp->count, 4);
	assert_int_equal(cp->bytes, 4 * 4096);
	agg_destroy(a);
	free(c);
	free(p);
}

/* A kernel no launch of which was timed has launches and no time, and is
 * counted as untimed; a sample for a slot that now holds another kernel
 * is dropped. */
static void test_untimed_and_stale_samples(void **state)
{
	(void)state;
	static const char a_name[] = "k_a", b_name[] = "k_b";
	struct census *c = new_census();
	int sa = census_launch(c, a_name, 1, 0, grid, block, 0);
	census_launch(c, b_name, 1, 0, grid, block, 0);
	census_sample(c, sa, b_name, 5000); /* not k_b's slot */
	assert_int_equal(c->samples, 0);
	census_sample(c, sa, a_name, 5000);
	assert_int_equal(c->samples, 1);
	struct agg *a = agg_create();
	uint64_t untimed = 0;
	struct census_pool *p = new_pool();
	fold(c, p, 1000, 1000, NULL, a, &untimed);
	free(p);
	assert_int_equal(agg_find_kernel(a, 0, 1, b_name)->total_ns, 0);
	assert_int_equal(untimed, 1);
	assert_int_equal(agg_find_kernel(a, 0, 1, a_name)->total_ns, 5000);
	agg_destroy(a);
	free(c);
}

/* A kernel with launches but no sample read in an interval takes its
 * mean over the process's earlier samples (of its own context only), and
 * is not untimed then; with no mean kept it stays untimed. Without it, the
 * H200's inference loop lost up to 8.5% of its kernels' GPU time. */
static void test_means_carry_across_intervals(void **state)
{
	(void)state;
	static const char a_name[] = "k_a", b_name[] = "k_b";
	struct census_means *m = calloc(1, sizeof *m);
	assert_non_null(m);
	census_means_add(m, a_name, 1, gcls(), 1000);
	census_means_add(m, a_name, 1, gcls(), 3000);
	census_means_add(m, a_name, 2, gcls(), 9000); /* another context's k_a */
	double mean = 0;
	assert_true(census_means_get(m, a_name, 1, gcls(), &mean));
	assert_true(mean == 2000);
	assert_false(census_means_get(m, b_name, 1, gcls(), &mean));
	/* The count the sampler asks (a known kernel is sampled sparsely). */
	assert_int_equal(census_means_count(m, a_name, 1, gcls()), 2);
	assert_int_equal(census_means_count(m, a_name, 2, gcls()), 1);
	assert_int_equal(census_means_count(m, b_name, 1, gcls()), 0);
	assert_int_equal(census_means_count(m, NULL, 1, gcls()), 0);
	struct census *c = new_census();
	for (int i = 0; i < 10; i++) {
		census_launch(c, a_name, 1, 0, grid, block, 0);
		census_launch(c, b_name, 1, 0, grid, block, 0);
	}
	struct agg *a = agg_create();
	uint64_t untimed = 0;
	struct census_pool *p = new_pool();
	fold(c, p, 500, 1000, m, a, &untimed);
	const struct wire_kernel *ka = agg_find_kernel(a, 0, 1, a_name);
	assert_non_null(ka);
	assert_int_equal(ka->launches, 20);
	assert_int_equal(ka->total_ns, 20 * 2000);
	assert_int_equal(agg_find_kernel(a, 0, 1, b_name)->total_ns, 0);
	assert_int_equal(untimed, 20); /* k_b's, scaled */
	/* The interval's own samples win over the kept mean. */
	census_clear(c);
	int slot = census_launch(c, a_name, 1, 0, grid, block, 0);
	census_sample(c, slot, a_name, 5000);
	agg_destroy(a);
	a = agg_create();
	census_estimate(c, NULL, 0, m, a, NULL, NULL, NULL);
	assert_int_equal(agg_find_kernel(a, 0, 1, a_name)->total_ns, 5000);
	agg_destroy(a);
	free(c);
	free(m);
	free(p);
}

/* The means' table is bounded: past three quarters of its slots new
 * kernels are not kept (and their intervals without samples stay
 * untimed), the ones in it still are. */
static void test_means_bounded(void **state)
{
	(void)state;
	struct census_means *m = calloc(1, sizeof *m);
	static char names[CENSUS_SLOTS][16];
	for (int i = 0; i < CENSUS_SLOTS; i++) {
		snprintf(names[i], sizeof names[i], "k%d", i);
		census_means_add(m, names[i], 1, gcls(), 100);
	}
	assert_int_equal(m->count, CENSUS_SLOTS / 4 * 3);
	double mean;
	assert_true(census_means_get(m, names[0], 1, gcls(), &mean));
	assert_false(census_means_get(m, names[CENSUS_SLOTS - 1], 1, gcls(), &mean));
	assert_int_equal(census_means_count(m, names[CENSUS_SLOTS - 1], 1, gcls()), 0);
	free(m);
}

/* Past CENSUS_KERNELS distinct kernels, launches fold into "other",
 * counted; none is lost. */
static void test_bound_folds_into_other(void **state)
{
	(void)state;
	struct census *c = new_census();
	static char names[CENSUS_KERNELS + 10][16];
	for (int i = 0; i < CENSUS_KERNELS + 10; i++) {
		snprintf(names[i], sizeof names[i], "k%d", i);
		census_launch(c, names[i], 1, 0, grid, block, 0);
	}
	assert_int_equal(c->folded, 10);
	assert_int_equal(c->launches, CENSUS_KERNELS + 10);
	struct agg *a = agg_create();
	struct census_pool *p = new_pool();
	fold(c, p, 1000, 1000, NULL, a, NULL);
	free(p);
	const struct wire_kernel *o = agg_find_kernel(a, 0, 1, AGG_OTHER_NAME);
	assert_non_null(o);
	assert_int_equal(o->launches, 10);
	agg_destroy(a);
	free(c);
}

/* Each window weighs by the time it observed, not by its interval: a
 * 2 ms window at a program's start (its mix: one rare launch in three)
 * and a 200 ms one later (one in a hundred) stand for an interval no
 * window observed at the pooled rates, where the rare kernel's share is
 * (1 + 20) / (3 + 2000) of the launches; scaling each interval by its
 * own window would have given the first window's mix the weight of the
 * second's. */
static void test_pool_weighs_windows_by_time(void **state)
{
	(void)state;
	static const char a_name[] = "k_a", r_name[] = "k_rare";
	const uint64_t ms = 1000000, iv = 1000 * ms;
	struct census *c = new_census();
	struct census_pool *p = new_pool();
	struct agg *a = agg_create();
	census_launch(c, a_name, 1, 0, grid, block, 0);
	census_launch(c, a_name, 1, 0, grid, block, 0);
	census_launch(c, r_name, 1, 0, grid, block, 0);
	census_pool_add(p, c, 2 * ms, iv);
	census_estimate(c, p, iv - 2 * ms, NULL, a, NULL, NULL, NULL);
	census_clear(c);
	for (int i = 0; i < 1980; i++)
		census_launch(c, a_name, 1, 0, grid, block, 0);
	for (int i = 0; i < 20; i++)
		census_launch(c, r_name, 1, 0, grid, block, 0);
	census_pool_add(p, c, 200 * ms, iv);
	census_estimate(c, p, iv - 200 * ms, NULL, a, NULL, NULL, NULL);
	/* An interval no window observed. */
	census_clear(c);
	agg_destroy(a);
	a = agg_create();
	census_pool_add(p, c, 0, iv);
	uint64_t n = census_estimate(c, p, iv, NULL, a, NULL, NULL, NULL);
	const struct wire_kernel *kr = agg_find_kernel(a, 0, 1, r_name);
	const struct wire_kernel *ka = agg_find_kernel(a, 0, 1, a_name);
	assert_non_null(kr);
	assert_non_null(ka);
	assert_int_equal(kr->launches + ka->launches, n);
	/* The pooled rates: (3 + 2000) launches in 202 ms of windows, decayed
	 * alike, so an unobserved second holds ~9916 of them. */
	assert_true(n > 9800 && n < 10000);
	double share = (double)kr->launches / (double)n;
	assert_true(fabs(share - 21.0 / 2003.0) < 0.0005);
	assert_int_equal(ka->grid[0], 64); /* the shape comes from the pool */
	agg_destroy(a);
	free(c);
	free(p);
}

/* A kernel whose pooled rate is under one launch an unobserved interval
 * is not rounded away: the remainder is carried, so ten intervals at 0.3
 * publish 3 launches; an observed interval publishes exactly what it saw. */
static void test_pool_carries_fractions(void **state)
{
	(void)state;
	static const char name[] = "k_slow";
	struct census *c = new_census();
	struct census_pool *p = new_pool();
	struct agg *a = agg_create();
	census_launch(c, name, 1, 0, grid, block, 0);
	census_launch(c, name, 1, 0, grid, block, 0);
	census_launch(c, name, 1, 0, grid, block, 0);
	/* 3 launches in 10 s observed, with no decay to speak of (1 ns). */
	census_pool_add(p, c, 10000000000ull, 1);
	assert_int_equal(census_estimate(c, p, 0, NULL, a, NULL, NULL, NULL), 3);
	census_clear(c);
	uint64_t sum = 0;
	for (int i = 0; i < 10; i++) {
		census_pool_add(p, c, 0, 1);
		sum += census_estimate(c, p, 1000000000ull, NULL, a, NULL, NULL, NULL);
	}
	assert_true(sum == 3 || sum == 2); /* 10 x 0.3, floor of the running sum */
	agg_destroy(a);
	free(c);
	free(p);
}

/* A kernel no window has seen for many half-lives is let go when room is
 * needed: the pool stays bounded and its rates follow the workload; a
 * kernel that finds no room is counted, its observed launches still
 * published. */
static void test_pool_forgets_and_bounds(void **state)
{
	(void)state;
	struct census *c = new_census();
	struct census_pool *p = new_pool();
	static char names[CENSUS_SLOTS][16];
	for (int i = 0; i < CENSUS_KERNELS; i++) {
		snprintf(names[i], sizeof names[i], "old%d", i);
		census_launch(c, names[i], 1, 0, grid, block, 0);
	}
	census_pool_add(p, c, 1000, 1000);
	assert_int_equal(p->count, CENSUS_KERNELS);
	/* Ten half-lives with windows that see other kernels only. */
	census_clear(c);
	for (int i = 0; i < 50; i++) {
		snprintf(names[CENSUS_KERNELS + i], sizeof names[0], "new%d", i);
		census_launch(c, names[CENSUS_KERNELS + i], 1, 0, grid, block, 0);
	}
	census_pool_add(p, c, 1000, 10 * CENSUS_POOL_HALF_LIFE_NS);
	assert_int_equal(p->count, 50); /* the old ones decayed to 1/1024: gone */
	assert_int_equal(p->unpooled, 0);
	struct agg *a = agg_create();
	assert_int_equal(census_estimate(c, p, 0, NULL, a, NULL, NULL, NULL), 50);
	/* A full pool: fresh kernels find no room, counted, still published. */
	census_clear(c);
	for (int i = 0; i < CENSUS_KERNELS; i++)
		census_launch(c, names[i], 1, 0, grid, block, 0);
	census_pool_add(p, c, 1000, 1);
	assert_true(p->count <= CENSUS_SLOTS / 4 * 3);
	assert_true(p->unpooled > 0);
	agg_destroy(a);
	a = agg_create();
	assert_int_equal(census_estimate(c, p, 0, NULL, a, NULL, NULL, NULL), CENSUS_KERNELS);
	agg_destroy(a);
	free(c);
	free(p);
}

/* The floors off a held sample: the setting wins; then the device's
 * calibration when it succeeded; else the model's two. No figure by GPU
 * model: a calibration that failed is not replaced by one. */
static void test_offset_floors(void **state)
{
	(void)state;
	const char *src = NULL;
	struct calib_result ok = {.ok = 1, .floors = 1.37}, bad = {.ok = 0, .floors = 1.37};
	assert_true(census_offset_floors(-1, &ok, 1.9, &src) == 1.37);
	assert_string_equal(src, "calibrated");
	assert_true(census_offset_floors(-1, &bad, -1, &src) == 2.0);
	assert_string_equal(src, "model");
	assert_true(census_offset_floors(-1, NULL, -1, &src) == 2.0);
	assert_string_equal(src, "model");
	/* Refused or not yet made: an earlier process's figure before the
	 * model's. */
	assert_true(census_offset_floors(-1, &bad, 1.9, &src) == 1.9);
	assert_string_equal(src, "kept");
	assert_true(census_offset_floors(-1, NULL, 1.9, &src) == 1.9);
	assert_string_equal(src, "kept");
	assert_true(census_offset_floors(2.5, &ok, 1.9, &src) == 2.5);
	assert_string_equal(src, "configured");
	assert_true(census_offset_floors(0, NULL, -1, NULL) == 0);
}

/* Calibration samples of a GPU whose held interval is the kernel's span
 * plus 1900 ns, with a floor of 1200 ns, a 32 ns timer and +-40 ns of
 * noise, and pairs 500 ns apart: the offset lies in [1400, 1900], and the
 * fit takes the middle, 1650 ns (1.375 floors), within 250 ns; slope 1. */
static void fill_samples(struct calib_sample *s, unsigned n, double offset, double slope, double step)
{
	for (unsigned i = 0; i < n; i++) {
		double span = (double)calib_spin_ns[i % CALIB_SPINS] + 20;
		double noise = (double)((int)(i * 37 % 9) - 4) * 10; /* -40..40 */
		s[i] = (struct calib_sample){.ab_ns = span * slope + offset + noise,
					     .fa_ns = 1200 + noise / 4,
					     .span_ns = span,
					     .timer_step_ns = step};
	}
}

static void test_calib_fit(void **state)
{
	(void)state;
	enum { N = CALIB_SPINS * CALIB_PER_SPIN };
	struct calib_sample s[N];
	struct calib_result r;
	double gaps[CALIB_PAIRS], neg[CALIB_PAIRS];
	for (unsigned i = 0; i < CALIB_PAIRS; i++)
		gaps[i] = 500 + (double)(i % 3) * 10 - 10, neg[i] = -100;
	fill_samples(s, N, 1900, 1.0, 32);
	calib_fit(s, N, gaps, CALIB_PAIRS, &r);
	assert_true(r.ok);
	if (fabs(r.offset_ns - 1650) > 15 || fabs(r.gap_ns - 500) > 10 || fabs(r.bound_ns - 250) > 5 ||
	    fabs(r.excess_ns - 1900) > 15 || fabs(r.floors - 1650.0 / 1200) > 0.02 ||
	    fabs(r.slope - 1) > 0.001 ||
	    r.spread_ns > 45 || r.timer_step_ns != 32 || r.samples != N)
		fail_msg("offset %.1f gap %.1f floors %.3f slope %.4f spread %.1f step %.0f n %u", r.offset_ns,
			 r.gap_ns, r.floors, r.slope, r.spread_ns, r.timer_step_ns, r.samples);
	/* Half the kernels and pairs delayed by other work on the GPU (0.5 to
	 * 4 us: they waited for an SM): the undelayed half still gives the
	 * quiet GPU's figures, and the slope stays 1. */
	double busy_gaps[CALIB_PAIRS];
	for (unsigned i = 0; i < CALIB_PAIRS; i++)
		busy_gaps[i] = gaps[i] + (i % 2 ? 500 + (double)(i * 211 % 3500) : 0);
	fill_samples(s, N, 1900, 1.0, 32);
	for (unsigned i = 0; i < N; i++)
		if (i % 8 < 4)
			s[i].ab_ns += 500 + (double)(i * 337 % 3500);
	calib_fit(s, N, busy_gaps, CALIB_PAIRS, &r);
	if (!r.ok || fabs(r.offset_ns - 1650) > 40 || fabs(r.slope - 1) > 0.02)
		fail_msg("half delayed: ok %d (%s) offset %.1f slope %.4f, want 1650 and 1", r.ok, r.why, r.offset_ns,
			 r.slope);
	/* Nearly all delayed (the GPU full of other work): refused, to be
	 * tried again. */
	fill_samples(s, N, 1900, 1.0, 32);
	for (unsigned i = 0; i < N; i++)
		if (i % 8 != 0)
			s[i].ab_ns += 500 + (double)(i * 337 % 3500);
	calib_fit(s, N, gaps, CALIB_PAIRS, &r);
	assert_false(r.ok);
	assert_true(r.retry);
	assert_non_null(strstr(r.why, "busy with other work"));
	fill_samples(s, N, 1900, 1.0, 32);
	/* A pair whose second kernel starts before the first ends. */
	calib_fit(s, N, neg, CALIB_PAIRS, &r);
	assert_false(r.ok);
	assert_non_null(strstr(r.why, "before the one before it ended"));
	/* Too few pairs came back. */
	calib_fit(s, N, gaps, CALIB_PAIRS / 2 - 1, &r);
	assert_false(r.ok);
	assert_non_null(strstr(r.why, "calibration pairs came back"));
	/* A 1 us timer cannot measure a step of about a microsecond. */
	fill_samples(s, N, 1900, 1.0, 1000);
	calib_fit(s, N, gaps, CALIB_PAIRS, &r);
	assert_false(r.ok);
	assert_non_null(strstr(r.why, "globaltimer steps by 1000 ns"));
	/* A timer that never moved: refused too. */
	fill_samples(s, N, 1900, 1.0, 0);
	calib_fit(s, N, gaps, CALIB_PAIRS, &r);
	assert_false(r.ok);
	/* The interval not growing with the span: the events do not bracket
	 * the kernel (slope 0.5). */
	fill_samples(s, N, 1900, 0.5, 32);
	calib_fit(s, N, gaps, CALIB_PAIRS, &r);
	assert_false(r.ok);
	assert_non_null(strstr(r.why, "slope 0.5"));
	/* A negative offset (the interval shorter than the span inside). */
	fill_samples(s, N, -300, 1.0, 32);
	calib_fit(s, N, gaps, CALIB_PAIRS, &r);
	assert_false(r.ok);
	/* Too few launches came back. */
	fill_samples(s, N, 1900, 1.0, 32);
	calib_fit(s, N / 2 - 1, gaps, CALIB_PAIRS, &r);
	assert_false(r.ok);
	assert_non_null(strstr(r.why, "calibration launches came back"));
}

static void test_take_clears(void **state)
{
	(void)state;
	struct census *c = new_census(), *out = new_census();
	census_launch(c, "k", 1, 0, grid, block, 0);
	census_take(c, out);
	assert_int_equal(out->launches, 1);
	assert_int_equal(c->launches, 0);
	assert_int_equal(c->nkernels, 0);
	free(c);
	free(out);
}

/* The sampler's stride: every launch of a kernel's first 8 drawn, then
 * one in 32 / 4, then past 32 drawn one in 32 x 16. */
static void test_sample_stride(void **state)
{
	(void)state;
	for (uint64_t d = 0; d < 8; d++)
		assert_int_equal(census_sample_stride(d, 32), 1);
	assert_int_equal(census_sample_stride(8, 32), 8);
	assert_int_equal(census_sample_stride(31, 32), 8);
	assert_int_equal(census_sample_stride(32, 32), 512);
	assert_int_equal(census_sample_stride(1000000, 32), 512);
	/* GPULSE_SAMPLE_EVERY=1 and 2 keep every early launch and a stride of
	 * at least one; 0 is read as 1. */
	assert_int_equal(census_sample_stride(10, 1), 1);
	assert_int_equal(census_sample_stride(10, 2), 1);
	assert_int_equal(census_sample_stride(40, 2), 32);
	assert_int_equal(census_sample_stride(40, 0), 16);
}

/* A floor is met back to back up to half again the mean floor (1280 ns
 * here: 1920 met, 1921 not), and taken as met before 8 floors are known. */
static void test_floor_met(void **state)
{
	(void)state;
	assert_true(census_floor_met(1920, 8 * 1280, 8));
	assert_false(census_floor_met(1921, 8 * 1280, 8));
	assert_false(census_floor_met(4095, 100 * 1280, 100));
	assert_true(census_floor_met(1279, 100 * 1280, 100));
	assert_true(census_floor_met(100000, 7 * 1280, 7));
	assert_true(census_floor_met(0, 0, 0));
}

/* A launch's size class is the bit length of its threads: a one-thread
 * launch 1, 64 x 128 threads 14, none 0, more than 64 bits hold 64. */
static void test_size_class(void **state)
{
	(void)state;
	static const uint32_t one[3] = { 1, 1, 1 }, big[3] = { 1024, 1024, 64 };
	static const uint32_t huge[3] = { 0x7fffffff, 65535, 65535 }, wide[3] = { 1024, 1, 1 };
	assert_int_equal(census_class(one, one), 1);
	assert_int_equal(census_class(grid, block), 14);
	assert_int_equal(census_class(NULL, block), 0);
	assert_int_equal(census_class(big, big), 53); /* 2^52 threads */
	/* zero dimensions count as one; past 2^64 threads the class is 64 */
	static const uint32_t zero[3] = { 0, 0, 0 };
	assert_int_equal(census_class(zero, one), 1);
	assert_int_equal(census_class(huge, wide), 64);
}

/* One name at two sizes (a GEMM of a prompt and of one token): 90 small
 * launches of 1 us and 10 large ones of 100 us, three small samples and
 * one large. The name's GPU time is each size's mean times its launches,
 * 90 x 1 + 10 x 100 us, where one mean over the four samples (25.75 us)
 * would give 2.575 ms. */
static void test_sizes_kept_apart(void **state)
{
	(void)state;
	static const char name[] = "k_gemm";
	static const uint32_t small[3] = { 2, 1, 1 }, large[3] = { 512, 1, 1 };
	struct census *c = new_census();
	int s_small = -1, s_large = -1;
	for (int i = 0; i < 90; i++)
		s_small = census_launch(c, name, 1, 0, small, block, 0);
	for (int i = 0; i < 10; i++)
		s_large = census_launch(c, name, 1, 0, large, block, 0);
	assert_true(s_small != s_large);
	for (int i = 0; i < 3; i++)
		census_sample(c, s_small, name, 1000);
	census_sample(c, s_large, name, 100000);
	struct agg *a = agg_create();
	assert_non_null(a);
	uint64_t untimed = 0;
	struct census_pool *p = new_pool();
	assert_int_equal(fold(c, p, 1000, 1000, NULL, a, &untimed), 100);
	const struct wire_kernel *k = agg_find_kernel(a, 0, 1, name);
	assert_non_null(k);
	assert_int_equal(k->launches, 100);
	assert_int_equal(k->total_ns, 90 * 1000 + 10 * 100000);
	assert_int_equal(k->min_ns, 1000);
	assert_int_equal(k->max_ns, 100000);
	/* The means kept per size: an interval with launches of each and no
	 * sample takes each size's own mean. */
	struct census_means *m = calloc(1, sizeof *m);
	assert_non_null(m);
	census_means_add(m, name, 1, census_class(small, block), 1000);
	census_means_add(m, name, 1, census_class(large, block), 100000);
	assert_int_equal(census_means_count(m, name, 1, census_class(small, block)), 1);
	/* Launches drawn for timing are counted per size, apart from the
	 * samples read. */
	census_means_draw(m, name, 1, census_class(small, block));
	census_means_draw(m, name, 1, census_class(small, block));
	assert_int_equal(census_means_drawn(m, name, 1, census_class(small, block)), 2);
	assert_int_equal(census_means_drawn(m, name, 1, census_class(large, block)), 0);
	/* A draw whose sample was left out is given back, never below none;
	 * past SAMPLES_DRAWN_MAX draws in all they count whatever was left
	 * out (the kernel is sampled sparsely then). */
	census_means_discard(m, name, 1, census_class(small, block));
	assert_int_equal(census_means_drawn(m, name, 1, census_class(small, block)), 1);
	census_means_discard(m, name, 1, census_class(small, block));
	census_means_discard(m, name, 1, census_class(small, block));
	assert_int_equal(census_means_drawn(m, name, 1, census_class(small, block)), 0);
	for (int i = 0; i < SAMPLES_DRAWN_MAX - 2; i++) {
		census_means_draw(m, name, 1, census_class(large, block));
		census_means_discard(m, name, 1, census_class(large, block));
	}
	assert_int_equal(census_means_drawn(m, name, 1, census_class(large, block)), 0);
	census_means_draw(m, name, 1, census_class(large, block));
	census_means_draw(m, name, 1, census_class(large, block));
	assert_int_equal(census_means_drawn(m, name, 1, census_class(large, block)), SAMPLES_DRAWN_MAX);
	assert_true(census_sample_stride(SAMPLES_DRAWN_MAX, 32) == 512);
	assert_int_equal(census_means_count(m, name, 1, census_class(small, block)), 1);
	struct census *c2 = new_census();
	for (int i = 0; i < 90; i++)
		census_launch(c2, name, 1, 0, small, block, 0);
	for (int i = 0; i < 10; i++)
		census_launch(c2, name, 1, 0, large, block, 0);
	struct agg *a2 = agg_create();
	assert_non_null(a2);
	fold(c2, p, 1000, 1000, m, a2, &untimed);
	assert_int_equal(agg_find_kernel(a2, 0, 1, name)->total_ns, 90 * 1000 + 10 * 100000);
	assert_int_equal(untimed, 0);
	agg_destroy(a);
	agg_destroy(a2);
	free(c);
	free(c2);
	free(m);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scales_to_interval),
		cmocka_unit_test(test_sample_stride),
		cmocka_unit_test(test_floor_met),
		cmocka_unit_test(test_size_class),
		cmocka_unit_test(test_sizes_kept_apart),
		cmocka_unit_test(test_untimed_and_stale_samples),
		cmocka_unit_test(test_means_carry_across_intervals),
		cmocka_unit_test(test_means_bounded),
		cmocka_unit_test(test_bound_folds_into_other),
		cmocka_unit_test(test_take_clears),
		cmocka_unit_test(test_offset_floors),
		cmocka_unit_test(test_calib_fit),
		cmocka_unit_test(test_pool_weighs_windows_by_time),
		cmocka_unit_test(test_pool_carries_fractions),
		cmocka_unit_test(test_pool_forgets_and_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
