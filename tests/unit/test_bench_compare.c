/* The regression logic of src/bench/bench_compare.c on synthetic
 * histories (issue 15): a 7% drop is flagged, normal noise is not, a
 * driver change starts a new baseline, a noisy history widens the band
 * but never past the ceiling, runs marked not a baseline do not count,
 * latency (lower is better) is judged the other way, and the fleet
 * median flags a card that its own history would not; a change of the
 * way a figure is made (its method) starts a new baseline as a driver
 * change does, and the host-bound figures' fast decile, on repetitions
 * delayed as a shared host delays them, keeps a band that catches a 5%
 * loss where their median cannot. The histories are
 * drawn from a seeded generator so that "noise" is noise, not a pattern
 * chosen to pass. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <jansson.h>

#include "bench/bench_compare.h"
#include "bench/bench_math.h"

#define BASE 780e12 /* bf16 FLOP/s */

/* xorshift: the same sequence every run. */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* Roughly normal, mean 0, sd 1 (sum of 12 uniforms). */
static double normal(void)
{
	double s = 0;
	for (int i = 0; i < 12; i++)
		s += uniform();
	return s - 6;
}

static size_t history(struct bench_point *h, size_t n, double sd_ratio, const char *driver)
{
	for (size_t i = 0; i < n; i++) {
		h[i] = (struct bench_point){.t_ms = (int64_t)i * 7 * 86400000, .baseline = true,
					    .value = BASE * (1 + sd_ratio * normal())};
		strcpy(h[i].driver, driver);
	}
	return n;
}

static void seven_percent_drop_is_flagged(void **state)
{
	(void)state;
	struct bench_point h[8];
	struct bench_verdict v;
	for (int trial = 0; trial < 200; trial++) {
		size_t n = history(h, 8, 0.005, "580.65.06");
		bench_compare(h, n, "580.65.06", NULL, BASE * 0.93, true, NULL, 0, NULL, &v);
		assert_true(v.have_own);
		assert_true(v.own_regression);
		assert_true(v.own_deficit > 0.05 && v.own_deficit < 0.09);
		assert_false(v.new_baseline);
	}
}

static void normal_noise_is_not_flagged(void **state)
{
	(void)state;
	struct bench_point h[8];
	struct bench_verdict v;
	int flagged = 0;
	/* A new run drawn from the same distribution as its history (0.5%
	 * sd, what --quick's 5-run spread of <= 2% allows): flagged at most
	 * rarely. */
	for (int trial = 0; trial < 1000; trial++) {
		size_t n = history(h, 8, 0.005, "580.65.06");
		bench_compare(h, n, "580.65.06", NULL, BASE * (1 + 0.005 * normal()), true, NULL, 0, NULL, &v);
		assert_true(v.have_own);
		assert_true(v.noise_ratio >= 0.02 - 1e-12 && v.noise_ratio <= 0.05 + 1e-12);
		flagged += v.own_regression;
	}
	assert_true(flagged <= 5); /* under 0.5% false alarms */
}

static void driver_change_starts_a_new_baseline(void **state)
{
	(void)state;
	struct bench_point h[12];
	struct bench_verdict v;
	history(h, 8, 0.005, "570.86.15");
	/* The new driver is 7% slower: not a regression of the card, a new
	 * baseline, until enough runs on it exist. */
	bench_compare(h, 8, "580.65.06", NULL, BASE * 0.93, true, NULL, 0, NULL, &v);
	assert_true(v.new_baseline);
	assert_string_equal(v.previous_driver, "570.86.15");
	assert_false(v.have_own);
	assert_false(v.own_regression);
	assert_int_equal(v.own_points, 0);
	/* Three runs on the new driver make a baseline of their own... */
	for (int i = 8; i < 11; i++) {
		h[i] = (struct bench_point){.t_ms = i, .baseline = true, .value = BASE * 0.93};
		strcpy(h[i].driver, "580.65.06");
	}
	bench_compare(h, 11, "580.65.06", NULL, BASE * 0.93, true, NULL, 0, NULL, &v);
	assert_false(v.new_baseline);
	assert_true(v.have_own);
	assert_int_equal(v.own_points, 3);
	assert_false(v.own_regression);
	/* ...against which a further 7% drop is flagged. */
	bench_compare(h, 11, "580.65.06", NULL, BASE * 0.93 * 0.93, true, NULL, 0, NULL, &v);
	assert_true(v.own_regression);
}

static void too_few_runs_build_a_baseline(void **state)
{
	(void)state;
	struct bench_point h[2];
	struct bench_verdict v;
	history(h, 2, 0.005, "d");
	bench_compare(h, 2, "d", NULL, BASE * 0.5, true, NULL, 0, NULL, &v);
	assert_false(v.have_own);
	assert_false(v.own_regression);
	assert_int_equal(v.own_points, 2);
}

static void not_baseline_runs_do_not_count(void **state)
{
	(void)state;
	struct bench_point h[8];
	struct bench_verdict v;
	history(h, 8, 0.002, "d");
	/* Five runs taken while something else loaded the GPU read low; they
	 * must neither drag the median down nor widen the band. */
	for (int i = 3; i < 8; i++) {
		h[i].value = BASE * 0.6;
		h[i].baseline = false;
	}
	bench_compare(h, 8, "d", NULL, BASE * 0.93, true, NULL, 0, NULL, &v);
	assert_true(v.have_own);
	assert_int_equal(v.own_points, 3);
	assert_true(fabs(v.own_median / BASE - 1) < 0.01);
	assert_true(v.own_regression);
}

static void noisy_history_widens_the_band_within_the_ceiling(void **state)
{
	(void)state;
	struct bench_point h[8];
	struct bench_verdict v;
	history(h, 8, 0.012, "d"); /* 1.2% sd: a card noisier than the floor */
	bench_compare(h, 8, "d", NULL, BASE * 0.99, true, NULL, 0, NULL, &v);
	assert_true(v.noise_ratio > 0.02);
	assert_true(v.noise_ratio <= 0.05);
	assert_false(v.too_noisy);
	bench_compare(h, 8, "d", NULL, v.own_median * 0.93, true, NULL, 0, NULL, &v);
	assert_true(v.own_regression);
}

/* A figure noisier than the ceiling (pageable copies spread 35-52% over
 * five runs on the H200) is said to be too noisy: its ordinary runs are
 * not regressions, only a loss past its own band is. */
static void history_past_the_ceiling_is_too_noisy(void **state)
{
	(void)state;
	struct bench_point h[8];
	struct bench_verdict v;
	int flagged = 0;
	for (int trial = 0; trial < 500; trial++) {
		history(h, 8, 0.12, "d");
		bench_compare(h, 8, "d", NULL, BASE * (1 + 0.12 * normal()), true, NULL, 0, NULL, &v);
		assert_true(v.too_noisy);
		assert_true(v.noise_ratio > 0.05);
		flagged += v.own_regression;
	}
	if (flagged > 25) /* 5%: the band is three deviations wide */
		fail_msg("%d of 500 ordinary runs of a noisy figure flagged", flagged);
	history(h, 8, 0.12, "d");
	bench_compare(h, 8, "d", NULL, BASE * 0.93, true, NULL, 0, NULL, &v);
	assert_true(v.too_noisy);
	double band = v.noise_ratio;
	bench_compare(h, 8, "d", NULL, v.own_median * (1 - band - 0.05), true, NULL, 0, NULL, &v);
	assert_true(v.own_regression);
	struct bench_figure f = {.name = "h2d", .variant = "pageable", .median = BASE};
	struct buf b;
	buf_init(&b, 4096);
	bench_verdict_to_json(&f, &v, &b);
	buf_putc(&b, '\0');
	assert_non_null(strstr(b.data, "\"too_noisy\":true"));
	buf_free(&b);
}

static void latency_is_judged_the_other_way(void **state)
{
	(void)state;
	struct bench_point h[6];
	struct bench_verdict v;
	for (int i = 0; i < 6; i++) {
		h[i] = (struct bench_point){.t_ms = i, .baseline = true, .value = 4e-6 * (1 + 0.001 * i)};
		strcpy(h[i].driver, "d");
	}
	bench_compare(h, 6, "d", NULL, 4e-6 * 1.10, false, NULL, 0, NULL, &v);
	assert_true(v.own_regression);
	assert_true(v.own_deficit > 0.08);
	bench_compare(h, 6, "d", NULL, 4e-6 * 0.90, false, NULL, 0, NULL, &v);
	assert_false(v.own_regression);
	assert_true(v.own_deficit < 0);
}

static void fleet_median_flags_a_slow_card(void **state)
{
	(void)state;
	double peers[5] = {BASE, BASE * 1.01, BASE * 0.99, BASE * 1.005, BASE * 0.995};
	struct bench_verdict v;
	/* No own history (a new card) but 7% below the fleet: flagged. */
	bench_compare(NULL, 0, "d", NULL, BASE * 0.93, true, peers, 5, NULL, &v);
	assert_false(v.have_own);
	assert_true(v.have_fleet);
	assert_int_equal(v.fleet_points, 5);
	assert_true(fabs(v.fleet_median - BASE) < 1);
	assert_true(v.fleet_regression);
	/* 2% below: within the fleet tolerance. */
	bench_compare(NULL, 0, "d", NULL, BASE * 0.98, true, peers, 5, NULL, &v);
	assert_false(v.fleet_regression);
	/* One peer is not a fleet. */
	bench_compare(NULL, 0, "d", NULL, BASE * 0.5, true, peers, 1, NULL, &v);
	assert_false(v.have_fleet);
	assert_false(v.fleet_regression);
}

static void verdict_json_carries_the_numbers(void **state)
{
	(void)state;
	struct bench_point h[4];
	struct bench_verdict v;
	history(h, 4, 0.0, "d");
	bench_compare(h, 4, "d", NULL, BASE * 0.9, true, NULL, 0, NULL, &v);
	struct bench_figure f = {.name = "matmul", .variant = "bf16", .median = BASE * 0.9,
				 .value = BASE * 0.9};
	struct buf b;
	buf_init(&b, 4096);
	bench_verdict_to_json(&f, &v, &b);
	buf_putc(&b, '\0');
	assert_non_null(strstr(b.data, "\"figure\":\"matmul\""));
	assert_non_null(strstr(b.data, "\"regression\":true"));
	const char *d = strstr(b.data, "\"deficit_ratio\":");
	assert_non_null(d);
	assert_true(fabs(strtod(d + strlen("\"deficit_ratio\":"), NULL) - 0.1) < 1e-9);
	buf_free(&b);
}

/* Every field of both bases, parsed back: own with its flag, the fleet's
 * numbers only once it has a reference, a driver change named. */
static void verdict_json_has_both_bases(void **state)
{
	(void)state;
	struct bench_point h[6];
	history(h, 6, 0.01, "d");
	double peers[3] = {BASE * 1.1, BASE * 1.12, BASE * 1.08};
	for (int k = 0; k < 3; k++) {
		struct bench_verdict v;
		bench_compare(h, 6, k == 2 ? "e" : "d", NULL, BASE * 0.95, true, k ? peers : NULL, k ? 3 : 0,
			      NULL, &v);
		/* The verdict's value is the figure's value, not its median. */
		struct bench_figure f = {.name = "dram_copy", .variant = "none", .median = BASE * 0.93,
					 .value = BASE * 0.95};
		struct buf b;
		buf_init(&b, 4096);
		bench_verdict_to_json(&f, &v, &b);
		buf_putc(&b, '\0');
		json_error_t je;
		json_t *j = json_loads(b.data, 0, &je);
		if (!j)
			fail_msg("%s: %s", b.data, je.text);
		assert_true(json_real_value(json_object_get(j, "value")) == f.value ||
			    json_integer_value(json_object_get(j, "value")) == (json_int_t)f.value);
		assert_string_equal(json_string_value(json_object_get(j, "method")), "median");
		assert_null(json_object_get(j, "previous_method"));
		assert_int_equal(json_is_true(json_object_get(j, "new_baseline")), v.new_baseline);
		assert_int_equal(json_object_get(j, "previous_driver") != NULL, v.new_baseline);
		json_t *own = json_object_get(j, "own"), *fl = json_object_get(j, "fleet");
		assert_int_equal(json_integer_value(json_object_get(own, "points")), v.own_points);
		assert_int_equal(json_is_true(json_object_get(own, "regression")), v.own_regression);
		assert_int_equal(json_object_get(own, "median") != NULL, v.have_own);
		if (v.have_own) {
			assert_float_equal(json_number_value(json_object_get(own, "noise_ratio")),
					   v.noise_ratio, 1e-12);
			assert_float_equal(json_number_value(json_object_get(own, "deficit_ratio")),
					   v.own_deficit, 1e-12);
			assert_int_equal(json_is_true(json_object_get(own, "too_noisy")), v.too_noisy);
		}
		assert_int_equal(json_integer_value(json_object_get(fl, "points")), v.fleet_points);
		assert_int_equal(json_is_true(json_object_get(fl, "regression")), v.fleet_regression);
		assert_int_equal(json_object_get(fl, "median") != NULL, v.have_fleet);
		assert_int_equal(k >= 1, v.have_fleet);
		assert_int_equal(k == 2, v.new_baseline);
		if (v.have_fleet) {
			assert_float_equal(json_number_value(json_object_get(fl, "median")), v.fleet_median,
					   1e-9);
			assert_float_equal(json_number_value(json_object_get(fl, "deficit_ratio")),
					   v.fleet_deficit, 1e-12);
			assert_float_equal(json_number_value(json_object_get(fl, "tolerance_ratio")),
					   v.fleet_tolerance, 1e-12);
		}
		json_decref(j);
		buf_free(&b);
	}
}

static void method_change_starts_a_new_baseline(void **state)
{
	(void)state;
	struct bench_point h[12];
	struct bench_verdict v;
	/* Eight runs of an older gpulse: launch rate as a median, no method
	 * recorded (""). */
	history(h, 8, 0.005, "d");
	/* The fast decile reads above the old median: judged against it, a
	 * loss of as much would hide. Not compared; a new baseline, named. */
	bench_compare(h, 8, "d", "fast_p90", BASE * 0.95, true, NULL, 0, NULL, &v);
	assert_true(v.new_baseline);
	assert_string_equal(v.previous_method, BENCH_METHOD_LEGACY);
	assert_string_equal(v.previous_driver, "");
	assert_false(v.have_own);
	assert_int_equal(v.own_points, 0);
	/* "" and "median" are the same method: no new baseline. */
	bench_compare(h, 8, "d", "median", BASE * 0.93, true, NULL, 0, NULL, &v);
	assert_false(v.new_baseline);
	assert_true(v.have_own && v.own_regression);
	assert_true(bench_same_method("", NULL) && bench_same_method(NULL, "median"));
	assert_false(bench_same_method("fast_p90", ""));
	/* Three runs by the new method judge again, against themselves only. */
	for (int i = 8; i < 11; i++) {
		h[i] = (struct bench_point){.t_ms = i, .baseline = true, .value = BASE * 1.06};
		strcpy(h[i].driver, "d");
		strcpy(h[i].method, "fast_p90");
	}
	bench_compare(h, 11, "d", "fast_p90", BASE * 1.06, true, NULL, 0, NULL, &v);
	assert_false(v.new_baseline);
	assert_true(v.have_own);
	assert_int_equal(v.own_points, 3);
	assert_true(fabs(v.own_median / (BASE * 1.06) - 1) < 1e-12);
	assert_false(v.own_regression);
	bench_compare(h, 11, "d", "fast_p90", BASE * 1.06 * 0.95, true, NULL, 0, NULL, &v);
	assert_true(v.own_regression);
	/* ...and going back to the old method is a change too. */
	bench_compare(h, 11, "d", NULL, BASE, true, NULL, 0, NULL, &v);
	assert_true(v.new_baseline);
	assert_string_equal(v.previous_method, "fast_p90");
	assert_false(v.have_own);
	/* The verdict says so. */
	struct bench_figure f = {.name = "launch_rate", .median = BASE, .value = BASE,
				 .method = "median"};
	struct buf b;
	buf_init(&b, 4096);
	bench_verdict_to_json(&f, &v, &b);
	buf_putc(&b, '\0');
	json_t *j = json_loads(b.data, 0, NULL);
	assert_non_null(j);
	assert_true(json_is_true(json_object_get(j, "new_baseline")));
	assert_string_equal(json_string_value(json_object_get(j, "previous_method")), "fast_p90");
	assert_null(json_object_get(j, "previous_driver"));
	json_decref(j);
	buf_free(&b);
}

/* One run's value of a host-bound figure (launch rate, 250 k/s
 * undisturbed, times `loss`): 40 repetitions within +-0.2% of it, a share
 * of them delayed by 2-30% that changes from run to run (15-85% here; the
 * H200's runs varied 3-22% inside and their medians 29% between runs). */
static double host_bound_run(enum bench_estimator est, double loss)
{
	double v[40];
	size_t delayed = 6 + (size_t)(uniform() * 29); /* 6..34 of 40 */
	bool hit[40] = {false};
	for (size_t k = 0; k < delayed;) {
		size_t i = (size_t)(uniform() * 40) % 40;
		if (!hit[i])
			hit[i] = true, k++;
	}
	for (size_t i = 0; i < 40; i++) {
		double t = (1 + 0.004 * (uniform() - 0.5)) / (250e3 * loss);
		if (hit[i])
			t *= 1.02 + 0.28 * uniform();
		v[i] = 1 / t;
	}
	return bench_estimate(v, 40, est, true);
}

static void fast_decile_catches_a_five_percent_loss(void **state)
{
	(void)state;
	struct bench_point h[8];
	struct bench_verdict v;
	int caught = 0, false_alarms = 0, median_caught = 0, median_noisy = 0;
	for (int trial = 0; trial < 100; trial++) {
		for (int est = 0; est < 2; est++) {
			enum bench_estimator e = est ? BENCH_EST_FAST_P90 : BENCH_EST_MEDIAN;
			for (int i = 0; i < 8; i++) {
				h[i] = (struct bench_point){.t_ms = i, .baseline = true,
							    .value = host_bound_run(e, 1.0)};
				strcpy(h[i].driver, "d");
				strcpy(h[i].method, bench_estimator_name(e));
			}
			bench_compare(h, 8, "d", bench_estimator_name(e), host_bound_run(e, 0.95), true,
				      NULL, 0, NULL, &v);
			if (est) {
				caught += v.own_regression && !v.too_noisy;
				bench_compare(h, 8, "d", bench_estimator_name(e), host_bound_run(e, 1.0),
					      true, NULL, 0, NULL, &v);
				false_alarms += v.own_regression;
			} else {
				median_caught += v.own_regression;
				median_noisy += v.too_noisy;
			}
		}
	}
	/* The fast decile: every 5% loss caught inside a band under the
	 * ceiling, no alarm without one. The median of the same repetitions
	 * (the old estimator) misses many of them (this generator: 43 of 100
	 * caught, 59 histories too noisy to judge a 5% loss). */
	if (caught != 100 || false_alarms != 0 || median_noisy < 40 || median_caught > 60)
		fail_msg("fast: %d of 100 caught, %d false alarms; median: %d too noisy, %d caught",
			 caught, false_alarms, median_noisy, median_caught);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(seven_percent_drop_is_flagged),
		cmocka_unit_test(normal_noise_is_not_flagged),
		cmocka_unit_test(driver_change_starts_a_new_baseline),
		cmocka_unit_test(too_few_runs_build_a_baseline),
		cmocka_unit_test(not_baseline_runs_do_not_count),
		cmocka_unit_test(noisy_history_widens_the_band_within_the_ceiling),
		cmocka_unit_test(history_past_the_ceiling_is_too_noisy),
		cmocka_unit_test(latency_is_judged_the_other_way),
		cmocka_unit_test(fleet_median_flags_a_slow_card),
		cmocka_unit_test(verdict_json_carries_the_numbers),
		cmocka_unit_test(verdict_json_has_both_bases),
		cmocka_unit_test(method_change_starts_a_new_baseline),
		cmocka_unit_test(fast_decile_catches_a_five_percent_loss),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
