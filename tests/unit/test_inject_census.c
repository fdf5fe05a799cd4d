/* The launch census of continuous mode (src/inject/census.c): counts,
 * sampled GPU times, the table's bound, and the scaling to an interval. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "census.h"

static const uint32_t grid[3] = { 64, 1, 1 }, block[3] = { 128, 1, 1 };

static struct census *new_census(void)
{
	struct census *c = calloc(1, sizeof *c);
	assert_non_null(c);
	census_clear(c);
	return c;
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
	census_estimate(c, 0.25, NULL, a, NULL, NULL, &untimed);
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
	census_estimate(c, 1.0, NULL, a, NULL, NULL, &untimed);
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
	census_means_add(m, a_name, 1, 1000);
	census_means_add(m, a_name, 1, 3000);
	census_means_add(m, a_name, 2, 9000); /* another context's k_a */
	double mean = 0;
	assert_true(census_means_get(m, a_name, 1, &mean));
	assert_true(mean == 2000);
	assert_false(census_means_get(m, b_name, 1, &mean));
	struct census *c = new_census();
	for (int i = 0; i < 10; i++) {
		census_launch(c, a_name, 1, 0, grid, block, 0);
		census_launch(c, b_name, 1, 0, grid, block, 0);
	}
	struct agg *a = agg_create();
	uint64_t untimed = 0;
	census_estimate(c, 0.5, m, a, NULL, NULL, &untimed);
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
	census_estimate(c, 1.0, m, a, NULL, NULL, NULL);
	assert_int_equal(agg_find_kernel(a, 0, 1, a_name)->total_ns, 5000);
	agg_destroy(a);
	free(c);
	free(m);
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
		census_means_add(m, names[i], 1, 100);
	}
	assert_int_equal(m->count, CENSUS_SLOTS / 4 * 3);
	double mean;
	assert_true(census_means_get(m, names[0], 1, &mean));
	assert_false(census_means_get(m, names[CENSUS_SLOTS - 1], 1, &mean));
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
	census_estimate(c, 1.0, NULL, a, NULL, NULL, NULL);
	const struct wire_kernel *o = agg_find_kernel(a, 0, 1, AGG_OTHER_NAME);
	assert_non_null(o);
	assert_int_equal(o->launches, 10);
	agg_destroy(a);
	free(c);
}

/* Take hands the interval over and leaves the census empty. */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scales_to_interval),
		cmocka_unit_test(test_untimed_and_stale_samples),
		cmocka_unit_test(test_means_carry_across_intervals),
		cmocka_unit_test(test_means_bounded),
		cmocka_unit_test(test_bound_folds_into_other),
		cmocka_unit_test(test_take_clears),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
