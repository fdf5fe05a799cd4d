/* Quantiles (common/quantile.c). Interpolated quantiles against
 * Prometheus's definition (promql/quantile.go: rank q*(n-1), the two
 * values around it weighted), which is also Hyndman and Fan's type 7,
 * Python's statistics.quantiles(method="inclusive"): the expected values
 * below are that function's. The nearest rank against the worked example
 * of its textbook definition (Wikipedia, "Percentile", nearest-rank
 * method: 15 20 35 40 50). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/quantile.h"

static void near(double got, double want)
{
	if (!(fabs(got - want) <= 1e-12 * fmax(1, fabs(want))))
		fail_msg("got %.17g, want %.17g", got, want);
}

static void test_interpolated(void **state)
{
	(void)state;
	double a[] = {4, 1, 3, 2};
	near(quantile_of(a, 4, 0.5), 2.5);  /* an even count: the middle two's mean */
	/* statistics.quantiles(range(1, 11), n=10, method="inclusive") */
	static const double deciles[9] = {1.9, 2.8, 3.7, 4.6, 5.5, 6.4, 7.3, 8.2, 9.1};
	for (int k = 1; k <= 9; k++) {
		double v[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
		near(quantile_of(v, 10, k / 10.0), deciles[k - 1]);
	}
	/* statistics.quantiles([0.5, 8, -3, 2.25, 100], n=4, method="inclusive") */
	static const double quartiles[3] = {0.5, 2.25, 8.0};
	for (int k = 1; k <= 3; k++) {
		double v[5] = {0.5, 8, -3, 2.25, 100};
		near(quantile_of(v, 5, k / 4.0), quartiles[k - 1]);
	}
	double one[] = {7};
	assert_true(quantile_of(one, 1, 0.3) == 7);
	double ends[] = {5, -1, 2};
	assert_true(quantile_of(ends, 3, 0) == -1);
	assert_true(quantile_of(ends, 3, 1) == 5);
}

/* Prometheus's edges: no values or a NaN q give NaN, q outside [0, 1]
 * the infinity on its side; NaN values sort first. */
static void test_edges(void **state)
{
	(void)state;
	double v[] = {1, 2, 3};
	assert_true(isnan(quantile_of(v, 0, 0.5)));
	assert_true(isnan(quantile_of(v, 3, NAN)));
	assert_true(quantile_of(v, 3, -0.1) == -INFINITY);
	assert_true(quantile_of(v, 3, 1.1) == INFINITY);
	double w[] = {3, NAN, 1, 2};
	quantile_sort(w, 4);
	assert_true(isnan(w[0]) && w[1] == 1 && w[2] == 2 && w[3] == 3);
	assert_true(quantile_sorted(w, 4, 1) == 3);
	assert_true(isnan(quantile_sorted(w, 4, 0))); /* as Prometheus: the NaN is the minimum */
}

static void test_nearest_rank(void **state)
{
	(void)state;
	static const double v[5] = {15, 20, 35, 40, 50};
	static const struct {
		double q, want;
	} rows[] = {{0.05, 15}, {0.30, 20}, {0.40, 20}, {0.50, 35}, {1.00, 50}, {0, 15}, {0.99, 50}};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		double got = v[quantile_rank_index(5, rows[i].q)];
		if (got != rows[i].want)
			fail_msg("q %g: %g, want %g", rows[i].q, got, rows[i].want);
	}
	assert_int_equal(quantile_rank_index(5, 7), 4);
	assert_int_equal(quantile_rank_index(5, INFINITY), 4);
	assert_int_equal(quantile_rank_index(5, NAN), 0);
	/* 0.95 of 20 is rank 19 exactly: no rounding up past it. */
	assert_int_equal(quantile_rank_index(20, 0.95), 18);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interpolated),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_nearest_rank),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
