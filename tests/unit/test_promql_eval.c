/* Tests for the PromQL evaluator (src/promql/eval.c) against the memstore:
 * every function and operator of the subset on cases whose answers are
 * worked out here from Prometheus's definitions (lookback and staleness,
 * rate/increase/delta extrapolation including Prometheus's own test data,
 * *_over_time, aggregations with topk ties, vector matching and its
 * errors, absent, time/vector/scalar), range queries, limits, and the
 * number formatting of Prometheus's API. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "promql/eval.h"
#include "promql/memstore.h"
#include "promql/parser.h"
#include "promql/series.h"
#include "common/status.h"

#define MIN_MS 60000LL

static struct memstore *ms;

/* Load one series in promtool's notation, a value every interval_ms
 * from t = 0. */
static void load(int64_t interval_ms, const char *series, const char *values)
{
	struct label *l = NULL;
	struct promql_series_value *v = NULL;
	size_t nl = 0, nv = 0;
	char err[256];
	if (promql_parse_series_labels(series, &l, &nl, err, sizeof err) ||
	    promql_parse_series_values(values, &v, &nv, err, sizeof err))
		fail_msg("%s", err);
	for (size_t i = 0; i < nv; i++)
		if (!v[i].omitted)
			assert_int_equal(memstore_add(ms, l, nl, (int64_t)i * interval_ms, v[i].v), 0);
	free(l);
	free(v);
}

static int setup(void **state)
{
	(void)state;
	ms = memstore_new(1000, 100000);
	/* lookback and staleness */
	load(MIN_MS, "m{a=\"1\"}", "1 2 3 stale _x6 5");
	load(MIN_MS, "old", "7");
	/* Prometheus's promql/testdata/functions.test, "load 5m" */
	load(5 * MIN_MS, "http_requests{path=\"/foo\"}", "0+10x10");
	load(5 * MIN_MS, "http_requests{path=\"/bar\"}", "0+10x5 0+10x5");
	/* extrapolation cases */
	load(MIN_MS, "e", "_ 10+10x3");
	load(MIN_MS, "late", "_ _ _ 30 40");
	load(MIN_MS, "g", "_ _ 5 3 8");
	load(MIN_MS, "r", "5 10 2 6");
	load(MIN_MS, "one", "_ _ _ 4");
	load(MIN_MS, "z", "_ 5 105");
	/* *_over_time */
	load(MIN_MS, "w{k=\"v\"}", "1 2 4 8");
	/* aggregation */
	load(MIN_MS, "x{job=\"a\", i=\"1\"}", "1");
	load(MIN_MS, "x{job=\"a\", i=\"2\"}", "3");
	load(MIN_MS, "x{job=\"b\", i=\"1\"}", "10");
	load(MIN_MS, "x{job=\"b\", i=\"2\"}", "10");
	load(MIN_MS, "x{job=\"b\", i=\"3\"}", "4");
	/* vector matching */
	load(MIN_MS, "req{job=\"a\", code=\"200\"}", "10");
	load(MIN_MS, "req{job=\"a\", code=\"500\"}", "2");
	load(MIN_MS, "lim{job=\"a\"}", "5");
	load(MIN_MS, "info{job=\"a\", team=\"x\"}", "1");
	load(MIN_MS, "m1{a=\"1\"}", "5");
	load(MIN_MS, "m1{a=\"2\"}", "1");
	load(MIN_MS, "m2{a=\"1\"}", "3");
	load(MIN_MS, "m2{a=\"2\"}", "3");
	load(MIN_MS, "m3{a=\"3\"}", "9");
	load(MIN_MS, "m4{a=\"1\"}", "7");
	/* math functions */
	load(MIN_MS, "f{s=\"pos\"}", "2.5");
	load(MIN_MS, "f{s=\"neg\"}", "-2.5");
	load(MIN_MS, "f{s=\"frac\"}", "1.234");
	/* two histograms differing only by name */
	load(MIN_MS, "hq1_bucket{le=\"1\"}", "5");
	load(MIN_MS, "hq1_bucket{le=\"+Inf\"}", "10");
	load(MIN_MS, "hq2_bucket{le=\"1\"}", "1");
	load(MIN_MS, "hq2_bucket{le=\"+Inf\"}", "10");
	/* sort with NaN */
	load(MIN_MS, "srt{k=\"a\"}", "3");
	load(MIN_MS, "srt{k=\"b\"}", "NaN");
	load(MIN_MS, "srt{k=\"c\"}", "1");
	load(MIN_MS, "srt{k=\"d\"}", "NaN");
	load(MIN_MS, "srt{k=\"e\"}", "2");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	memstore_free(ms);
	return 0;
}

static struct promql_result *query_opts(const char *expr, int64_t t_ms, const struct promql_opts *o)
{
	struct promql_expr *e;
	struct promql_result *r;
	char err[512];
	if (promql_parse(expr, &e, err, sizeof err))
		fail_msg("%s: %s", expr, err);
	if (promql_eval_instant(e, &memstore_queryable, ms, o, t_ms, &r, err, sizeof err))
		fail_msg("%s: %s", expr, err);
	promql_expr_free(e);
	return r;
}

static struct promql_result *query(const char *expr, int64_t t_ms)
{
	return query_opts(expr, t_ms, NULL);
}

static void expect_error(const char *expr, int64_t t_ms, int status, const char *want)
{
	struct promql_expr *e;
	struct promql_result *r = (struct promql_result *)1;
	char err[512];
	if (promql_parse(expr, &e, err, sizeof err))
		fail_msg("%s: %s", expr, err);
	int rc = promql_eval_instant(e, &memstore_queryable, ms, NULL, t_ms, &r, err, sizeof err);
	promql_expr_free(e);
	if (rc != status || r != NULL || !strstr(err, want))
		fail_msg("%s: rc %d '%s', want %d '%s'", expr, rc, err, status, want);
}

static bool close(double got, double want)
{
	if (isnan(want))
		return isnan(got);
	if (isinf(want) || want == 0)
		return got == want;
	return fabs(got - want) <= 1e-12 * fabs(want);
}

/* The value of the series printed as `labels` ({__name__="x", a="b"}). */
static void expect_sample(const struct promql_result *r, const char *labels, double want)
{
	struct buf b;
	buf_init(&b, 4096);
	for (size_t i = 0; i < r->nseries; i++) {
		buf_reset(&b);
		promql_format_labels(&b, r->series[i].labels, r->series[i].nlabels);
		if (strcmp(b.data, labels) == 0) {
			assert_int_equal(r->series[i].npoints, 1);
			if (!close(r->series[i].points[0].v, want))
				fail_msg("%s: got %.17g, want %.17g", labels, r->series[i].points[0].v, want);
			buf_free(&b);
			return;
		}
	}
	fail_msg("no series %s", labels);
}

/* Instant query that must give exactly one series. */
static void expect1(const char *expr, int64_t t_ms, const char *labels, double want)
{
	struct promql_result *r = query(expr, t_ms);
	assert_int_equal(r->type, PROMQL_TYPE_VECTOR);
	if (r->nseries != 1)
		fail_msg("%s: %zu series", expr, r->nseries);
	expect_sample(r, labels, want);
	promql_result_free(r);
}

static void expect_empty(const char *expr, int64_t t_ms)
{
	struct promql_result *r = query(expr, t_ms);
	if (r->nseries != 0)
		fail_msg("%s: %zu series, want none", expr, r->nseries);
	promql_result_free(r);
}

static void expect_scalar(const char *expr, int64_t t_ms, double want)
{
	struct promql_result *r = query(expr, t_ms);
	assert_int_equal(r->type, PROMQL_TYPE_SCALAR);
	if (!close(r->scalar, want))
		fail_msg("%s: got %.17g, want %.17g", expr, r->scalar, want);
	promql_result_free(r);
}

static void test_lookback_staleness(void **state)
{
	(void)state;
	expect1("m", 150000, "{__name__=\"m\", a=\"1\"}", 3);
	/* A staleness marker at 3m hides the series at once... */
	expect_empty("m", 3 * MIN_MS);
	expect_empty("m", 9 * MIN_MS);
	/* ...until a new sample comes. */
	expect1("m", 10 * MIN_MS, "{__name__=\"m\", a=\"1\"}", 5);
	/* The lookback delta is 5m, inclusive of its start (Prometheus 2.x). */
	expect1("old", 5 * MIN_MS, "{__name__=\"old\"}", 7);
	expect_empty("old", 5 * MIN_MS + 1);
	expect1("m offset 1m", 2 * MIN_MS, "{__name__=\"m\", a=\"1\"}", 2);
	expect_empty("m offset 1m", 0);
	/* Regex and negative matchers. */
	expect1("{__name__=~\"m|old\", a!=\"\"}", MIN_MS, "{__name__=\"m\", a=\"1\"}", 2);
	expect1("{__name__=~\"o.d\"}", MIN_MS, "{__name__=\"old\"}", 7);
	expect_empty("{__name__=~\"ol\"}", MIN_MS); /* anchored */
	expect1("m{a!~\"2|3\"}", MIN_MS, "{__name__=\"m\", a=\"1\"}", 2);
	/* Stale markers are not samples in a range either: 1, 2, 3. */
	expect1("count_over_time(m[5m])", 5 * MIN_MS, "{a=\"1\"}", 3);
	/* An instant query of a range selector is a matrix of raw samples,
	 * the window's start included. */
	struct promql_result *r = query("m[2m]", 2 * MIN_MS);
	assert_int_equal(r->type, PROMQL_TYPE_MATRIX);
	assert_int_equal(r->nseries, 1);
	assert_int_equal(r->series[0].npoints, 3);
	assert_int_equal(r->series[0].points[0].t_ms, 0);
	assert_true(r->series[0].points[2].v == 3);
	promql_result_free(r);
}

static void test_rate_family(void **state)
{
	(void)state;
	/* From Prometheus's functions.test: the whole range is covered, so
	 * no extrapolation; /bar has a reset from 50 to 0. */
	struct promql_result *r = query("increase(http_requests[50m])", 50 * MIN_MS);
	assert_int_equal(r->nseries, 2);
	expect_sample(r, "{path=\"/foo\"}", 100);
	expect_sample(r, "{path=\"/bar\"}", 90);
	promql_result_free(r);
	r = query("rate(http_requests[50m])", 50 * MIN_MS);
	expect_sample(r, "{path=\"/foo\"}", 100.0 / 3000);
	expect_sample(r, "{path=\"/bar\"}", 90.0 / 3000);
	promql_result_free(r);
	/* A range reaching before the first sample: the start is at the
	 * counter's zero point (0 at t=0), so still 100. */
	r = query("increase(http_requests[100m])", 50 * MIN_MS);
	expect_sample(r, "{path=\"/foo\"}", 100);
	promql_result_free(r);
	/* delta ignores resets: 40 - 0. */
	r = query("delta(http_requests[50m])", 50 * MIN_MS);
	expect_sample(r, "{path=\"/bar\"}", 40);
	promql_result_free(r);

	/* e: 10 20 30 40 at 1m..4m, window [0, 5m]. Sampled 180 s over 3
	 * intervals (avg 60 s, threshold 66 s); 60 s to either edge: both
	 * extrapolated, and the zero point (180 * 10/30 = 60 s back) does
	 * not cut the start. 30 * 300/180 = 50. */
	expect1("increase(e[5m])", 5 * MIN_MS, "{}", 50);
	expect1("rate(e[5m])", 5 * MIN_MS, "{}", 50.0 / 300);
	/* late: 30, 40 at 3m, 4m. Start gap 180 s > 66 s: extrapolate only
	 * half an interval (30 s); end gap 60 s: all of it. 10 * 150/60. */
	expect1("increase(late[5m])", 5 * MIN_MS, "{}", 25);
	/* g: gauge 5 3 8 at 2m..4m. Start gap 120 s: 30 s; end 60 s.
	 * 3 * 210/120. */
	expect1("delta(g[5m])", 5 * MIN_MS, "{}", 5.25);
	/* e = 10, 20 at 1m, 2m in [60 s, 150 s]: the window starts on the
	 * first sample (gap 0); the end gap of 30 s is extrapolated. */
	expect1("increase(e[1m30s])", 2 * MIN_MS + 30000, "{}", 10.0 * (60 + 0 + 30) / 60);
	/* A counter does not extrapolate below zero: z = 5, 105 at 1m, 2m
	 * in [0, 150 s]. The start gap (60 s) is under the threshold, but
	 * the zero point is 60 * 5/100 = 3 s before the first sample, so
	 * the start moves there: 100 * (60 + 3 + 30)/60. */
	expect1("increase(z[2m30s])", 2 * MIN_MS + 30000, "{}", 100.0 * (60 + 3 + 30) / 60);
	/* A gauge has no such floor: 60 s, the threshold allows it. */
	expect1("delta(z[2m30s])", 2 * MIN_MS + 30000, "{}", 100.0 * (60 + 60 + 30) / 60);
	/* r: 5 10 2 6 at 0..3m: 6 - 5 + 10 (the reset) = 11, edges covered. */
	expect1("increase(r[3m])", 3 * MIN_MS, "{}", 11);
	expect1("rate(r[3m])", 3 * MIN_MS, "{}", 11.0 / 180);
	/* irate: the last two samples; a reset counts from zero. */
	expect1("irate(r[3m])", 3 * MIN_MS, "{}", 4.0 / 60);
	expect1("irate(r[3m])", 2 * MIN_MS, "{}", 2.0 / 60);
	/* Fewer than two samples: nothing. */
	expect_empty("rate(one[5m])", 5 * MIN_MS);
	expect_empty("irate(one[5m])", 5 * MIN_MS);
	expect_empty("rate(nothing[5m])", 5 * MIN_MS);
	/* offset moves the window. */
	expect1("increase(r[1m] offset 2m)", 3 * MIN_MS, "{}", 5);
}

static void test_over_time(void **state)
{
	(void)state;
	int64_t t = 3 * MIN_MS; /* w: 1 2 4 8 at 0..3m */
	expect1("avg_over_time(w[3m])", t, "{k=\"v\"}", 3.75);
	expect1("min_over_time(w[3m])", t, "{k=\"v\"}", 1);
	expect1("max_over_time(w[3m])", t, "{k=\"v\"}", 8);
	expect1("sum_over_time(w[3m])", t, "{k=\"v\"}", 15);
	expect1("count_over_time(w[3m])", t, "{k=\"v\"}", 4);
	expect1("count_over_time(w[2m])", t, "{k=\"v\"}", 3);
	/* population: deviations -2.75 -1.75 .25 4.25, squares sum 28.75 */
	expect1("stddev_over_time(w[3m])", t, "{k=\"v\"}", sqrt(28.75 / 4));
	/* rank 0.5 * 3 = 1.5 between 2 and 4; 0.9 * 3 = 2.7 between 4, 8 */
	expect1("quantile_over_time(0.5, w[3m])", t, "{k=\"v\"}", 3);
	expect1("quantile_over_time(0.9, w[3m])", t, "{k=\"v\"}", 4 * 0.3 + 8 * 0.7);
	expect1("quantile_over_time(0, w[3m])", t, "{k=\"v\"}", 1);
	expect1("quantile_over_time(1, w[3m])", t, "{k=\"v\"}", 8);
	expect1("quantile_over_time(-1, w[3m])", t, "{k=\"v\"}", -INFINITY);
	expect1("quantile_over_time(2, w[3m])", t, "{k=\"v\"}", INFINITY);
	/* last_over_time alone keeps the metric name. */
	expect1("last_over_time(w[3m])", t, "{__name__=\"w\", k=\"v\"}", 8);
	expect_empty("avg_over_time(w[1m])", 10 * MIN_MS);
}

static void test_aggregation(void **state)
{
	(void)state;
	/* x: a/1 = 1, a/2 = 3, b/1 = 10, b/2 = 10, b/3 = 4 */
	expect1("sum(x)", 0, "{}", 28);
	struct promql_result *r = query("sum by (job) (x)", 0);
	assert_int_equal(r->nseries, 2);
	expect_sample(r, "{job=\"a\"}", 4);
	expect_sample(r, "{job=\"b\"}", 24);
	promql_result_free(r);
	r = query("sum without (i) (x)", 0); /* without drops the name too */
	assert_int_equal(r->nseries, 2);
	expect_sample(r, "{job=\"a\"}", 4);
	promql_result_free(r);
	r = query("sum by (__name__) (x)", 0);
	expect_sample(r, "{__name__=\"x\"}", 28);
	promql_result_free(r);
	r = query("avg by (job) (x)", 0);
	expect_sample(r, "{job=\"a\"}", 2);
	expect_sample(r, "{job=\"b\"}", 8);
	promql_result_free(r);
	expect1("count(x)", 0, "{}", 5);
	expect1("min(x)", 0, "{}", 1);
	expect1("max(x)", 0, "{}", 10);
	r = query("stddev by (job) (x)", 0);
	expect_sample(r, "{job=\"a\"}", 1);
	expect_sample(r, "{job=\"b\"}", sqrt(8));
	promql_result_free(r);
	expect1("quantile(0.5, x)", 0, "{}", 4);
	r = query("quantile by (job) (0.5, x)", 0);
	expect_sample(r, "{job=\"a\"}", 2);
	expect_sample(r, "{job=\"b\"}", 10);
	promql_result_free(r);
	/* topk keeps every label; on a tie the series seen first stays. */
	r = query("topk by (job) (1, x)", 0);
	assert_int_equal(r->nseries, 2);
	expect_sample(r, "{__name__=\"x\", i=\"2\", job=\"a\"}", 3);
	expect_sample(r, "{__name__=\"x\", i=\"1\", job=\"b\"}", 10);
	promql_result_free(r);
	r = query("topk(3, x)", 0); /* sorted by value, highest first */
	assert_int_equal(r->nseries, 3);
	assert_true(r->series[0].points[0].v == 10 && r->series[1].points[0].v == 10);
	assert_true(r->series[2].points[0].v == 4);
	promql_result_free(r);
	r = query("bottomk(2, x)", 0);
	assert_int_equal(r->nseries, 2);
	assert_true(r->series[0].points[0].v == 1 && r->series[1].points[0].v == 3);
	expect_sample(r, "{__name__=\"x\", i=\"1\", job=\"a\"}", 1);
	promql_result_free(r);
	expect_empty("topk(0, x)", 0);
	r = query("topk(100, x)", 0);
	assert_int_equal(r->nseries, 5);
	promql_result_free(r);
	expect_error("topk(scalar(nothing), x)", 0, GPULSE_EINVAL, "overflows int64");
	expect_empty("sum(nothing)", 0);
}

static void test_binary(void **state)
{
	(void)state;
	expect_scalar("2 ^ 3 ^ 2", 0, 512);
	expect_scalar("-2 ^ 2", 0, -4);
	expect_scalar("7 % 3 + 2 * 3", 0, 7);
	expect_scalar("5 % -3", 0, 2);
	expect_scalar("1 == bool 1", 0, 1);
	expect_scalar("1 > bool 2", 0, 0);
	expect_scalar("1 / 0", 0, INFINITY);
	/* vector and scalar: arithmetic drops the name, comparison filters
	 * and keeps it (and the vector's value, whichever side it is on). */
	struct promql_result *r = query("m1 * 2", 0);
	expect_sample(r, "{a=\"1\"}", 10);
	expect_sample(r, "{a=\"2\"}", 2);
	promql_result_free(r);
	expect1("m1 > 3", 0, "{__name__=\"m1\", a=\"1\"}", 5);
	expect1("3 < m1", 0, "{__name__=\"m1\", a=\"1\"}", 5);
	expect1("2 - m1 > 0", 0, "{a=\"2\"}", 1); /* (2 - m1) > 0 */
	r = query("m1 > bool 3", 0);
	expect_sample(r, "{a=\"1\"}", 1);
	expect_sample(r, "{a=\"2\"}", 0);
	promql_result_free(r);
	/* one-to-one on all labels but the name */
	r = query("m1 - m2", 0);
	assert_int_equal(r->nseries, 2);
	expect_sample(r, "{a=\"1\"}", 2);
	expect_sample(r, "{a=\"2\"}", -2);
	promql_result_free(r);
	expect1("m1 > m2", 0, "{__name__=\"m1\", a=\"1\"}", 5);
	r = query("m1 > bool m2", 0);
	expect_sample(r, "{a=\"1\"}", 1);
	expect_sample(r, "{a=\"2\"}", 0);
	promql_result_free(r);
	expect_empty("m1 + m3", 0);
	/* on() keeps only the listed labels; ignoring() drops the listed */
	expect1("req{code=\"200\"} / on(job) lim", 0, "{job=\"a\"}", 2);
	expect1("req{code=\"500\"} / ignoring(code) lim", 0, "{job=\"a\"}", 0.4);
	/* many-to-one and one-to-many, with a label copied from the "one" */
	r = query("req / ignoring(code) group_left lim", 0);
	assert_int_equal(r->nseries, 2);
	expect_sample(r, "{code=\"200\", job=\"a\"}", 2);
	expect_sample(r, "{code=\"500\", job=\"a\"}", 0.4);
	promql_result_free(r);
	r = query("lim * on(job) group_right req", 0);
	expect_sample(r, "{code=\"200\", job=\"a\"}", 50);
	expect_sample(r, "{code=\"500\", job=\"a\"}", 10);
	promql_result_free(r);
	r = query("req * on(job) group_left(team) info", 0);
	expect_sample(r, "{code=\"200\", job=\"a\", team=\"x\"}", 10);
	expect_sample(r, "{code=\"500\", job=\"a\", team=\"x\"}", 2);
	promql_result_free(r);
	/* group_right's many side is the right operand: one result per
	 * right-hand sample, however few samples the left has (the result
	 * was once sized by the left and written past its end; run under
	 * ASan, whose arena poisoning reports such a write). */
	r = query("vector(1) + on() group_right x", 0);
	assert_int_equal(r->nseries, 5);
	expect_sample(r, "{i=\"1\", job=\"a\"}", 2);
	expect_sample(r, "{i=\"3\", job=\"b\"}", 5);
	promql_result_free(r);
	r = query("x{i=\"1\"} - ignoring(i) group_right x", 0);
	assert_int_equal(r->nseries, 5);
	expect_sample(r, "{i=\"2\", job=\"a\"}", 1 - 3);
	expect_sample(r, "{i=\"3\", job=\"b\"}", 10 - 4);
	promql_result_free(r);
	/* a comparison keeps the left operand's value and the right's labels */
	r = query("x{i=\"1\"} > ignoring(i) group_right(team) x", 0);
	assert_int_equal(r->nseries, 1);
	expect_sample(r, "{__name__=\"x\", i=\"3\", job=\"b\"}", 10);
	promql_result_free(r);
	/* comparisons with group_left keep the name of the many side */
	r = query("req > on(job) group_left lim", 0);
	assert_int_equal(r->nseries, 1);
	expect_sample(r, "{__name__=\"req\", code=\"200\", job=\"a\"}", 10);
	promql_result_free(r);
	/* matching errors, worded as Prometheus words them */
	expect_error("lim / on(job) req", 0, GPULSE_EINVAL,
		     "found duplicate series for the match group {job=\"a\"} on the right hand-side of the operation: "
		     "[{__name__=\"req\", code=\"500\", job=\"a\"}, {__name__=\"req\", code=\"200\", job=\"a\"}]"
		     ";many-to-many matching not allowed: matching labels must be unique on one side");
	expect_error("req / on(job) group_right lim", 0, GPULSE_EINVAL, "on the left hand-side of the operation");
	expect_error("req / on(job) lim", 0, GPULSE_EINVAL,
		     "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)");
	expect_error("{__name__=~\"m1|m4\"} + on(a) group_left m2", 0, GPULSE_EINVAL,
		     "multiple matches for labels: grouping labels must ensure unique matches");
	expect_error("-{__name__=~\"m1|m2\"}", 0, GPULSE_EINVAL, "vector cannot contain metrics with the same labelset");
	/* no error when a side is empty */
	expect_empty("lim / on(job) nothing", 0);
	/* set operators keep the left side's labels, name included */
	expect1("m1 and m2{a=\"1\"}", 0, "{__name__=\"m1\", a=\"1\"}", 5);
	expect1("m1 unless m2{a=\"2\"}", 0, "{__name__=\"m1\", a=\"1\"}", 5);
	r = query("m1 or m3", 0);
	assert_int_equal(r->nseries, 3);
	expect_sample(r, "{__name__=\"m3\", a=\"3\"}", 9);
	promql_result_free(r);
	r = query("m1 or m2", 0); /* same labels but the name: left wins */
	assert_int_equal(r->nseries, 2);
	expect_sample(r, "{__name__=\"m1\", a=\"2\"}", 1);
	promql_result_free(r);
	r = query("req and on(job) lim", 0);
	assert_int_equal(r->nseries, 2);
	promql_result_free(r);
	expect_empty("req unless on(job) lim", 0);
	r = query("req unless ignoring(job) lim", 0);
	assert_int_equal(r->nseries, 2);
	promql_result_free(r);
}

static void test_functions(void **state)
{
	(void)state;
	/* round: floor(v * 1/to_nearest + 0.5) / (1/to_nearest) */
	struct promql_result *r = query("round(f)", 0);
	expect_sample(r, "{s=\"pos\"}", 3);
	expect_sample(r, "{s=\"neg\"}", -2);
	expect_sample(r, "{s=\"frac\"}", 1);
	promql_result_free(r);
	r = query("round(f, 0.1)", 0);
	expect_sample(r, "{s=\"frac\"}", floor(1.234 * 10 + 0.5) / 10);
	promql_result_free(r);
	r = query("round(f, 5)", 0);
	expect_sample(r, "{s=\"neg\"}", 0);
	promql_result_free(r);
	r = query("abs(f)", 0);
	expect_sample(r, "{s=\"neg\"}", 2.5);
	promql_result_free(r);
	r = query("clamp_min(f, 0)", 0);
	expect_sample(r, "{s=\"neg\"}", 0);
	expect_sample(r, "{s=\"pos\"}", 2.5);
	promql_result_free(r);
	r = query("clamp_max(f, 2)", 0);
	expect_sample(r, "{s=\"pos\"}", 2);
	expect_sample(r, "{s=\"frac\"}", 1.234);
	promql_result_free(r);
	r = query("clamp_max(f, NaN)", 0); /* Go's math.Min: NaN wins */
	expect_sample(r, "{s=\"pos\"}", NAN);
	promql_result_free(r);
	/* absent: labels from the equality matchers, none for others */
	expect1("absent(nothing{job=\"x\", a=~\"y\"})", 0, "{job=\"x\"}", 1);
	expect1("absent(nothing{job=\"x\", job=\"y\"})", 0, "{}", 1);
	expect1("absent(sum(nothing))", 0, "{}", 1);
	expect_empty("absent(m1)", 0);
	/* time, vector, scalar */
	expect_scalar("time()", 90000, 90);
	expect1("vector(2)", 0, "{}", 2);
	expect1("vector(time())", 120000, "{}", 120);
	expect_scalar("scalar(m4)", 0, 7);
	expect_scalar("scalar(m1)", 0, NAN);
	expect_scalar("scalar(nothing)", 0, NAN);
	/* sort and sort_desc keep their order in the result (promtool
	 * compares sets, so the conformance test cannot see it) */
	r = query("sort(x)", 0);
	assert_int_equal(r->nseries, 5);
	for (size_t i = 1; i < r->nseries; i++)
		assert_true(r->series[i - 1].points[0].v <= r->series[i].points[0].v);
	assert_true(r->series[0].points[0].v == 1 && r->series[4].points[0].v == 10);
	promql_result_free(r);
	r = query("sort_desc(x)", 0);
	for (size_t i = 1; i < r->nseries; i++)
		assert_true(r->series[i - 1].points[0].v >= r->series[i].points[0].v);
	assert_true(r->series[0].points[0].v == 10 && r->series[4].points[0].v == 1);
	promql_result_free(r);
	/* histogram_quantile keeps histograms differing only by name apart
	 * and then refuses their equal label sets, as Prometheus 2.42 does
	 * (asked: "vector cannot contain metrics with the same labelset") */
	expect1("histogram_quantile(0.05, hq1_bucket)", 0, "{}", 0.5 / 5);
	expect1("histogram_quantile(0.05, hq2_bucket)", 0, "{}", 0.5 / 1);
	expect_error("histogram_quantile(0.5, {__name__=~\"hq1_bucket|hq2_bucket\"})", 0, GPULSE_EINVAL,
		     "vector cannot contain metrics with the same labelset");
	/* NaN last in both orders, as Prometheus 2.42 answers (asked with
	 * srt's five samples: sort gives 1 2 3 NaN NaN, sort_desc 3 2 1 NaN NaN) */
	static const char *const sorts[] = {"sort(srt)", "sort_desc(srt)"};
	for (int k = 0; k < 2; k++) {
		r = query(sorts[k], 0);
		assert_int_equal(r->nseries, 5);
		for (size_t i = 0; i < 3; i++)
			assert_true(r->series[i].points[0].v == (k ? 3.0 - (double)i : 1.0 + (double)i));
		assert_true(isnan(r->series[3].points[0].v) && isnan(r->series[4].points[0].v));
		promql_result_free(r);
	}
	/* errors, worded as Prometheus words them */
	expect_error("label_replace(x, \"1bad\", \"v\", \"job\", \"(.*)\")", 0, GPULSE_EINVAL,
		     "invalid destination label name in label_replace(): 1bad");
	expect_error("label_replace(x, \"d\", \"v\", \"job\", \"(a\")", 0, GPULSE_EINVAL,
		     "invalid regular expression in label_replace()");
	expect_error("label_replace(x, \"d\", \"v\", \"job\", \"a(?=b)\")", 0,
		     GPULSE_EINVAL, "invalid regular expression in label_replace(): error parsing "
		     "regexp: invalid or unsupported Perl syntax (lookahead): `(?=` at byte 2");
	expect_error("label_join(x, \"d\", \",\", \"job\", \"no-good\")", 0, GPULSE_EINVAL,
		     "invalid source label name in label_join(): no-good");
	expect_error("label_replace(x, \"i\", \"\", \"i\", \".*\")", 0, GPULSE_EINVAL,
		     "vector cannot contain metrics with the same labelset");
	expect_error("count_values(\"1x\", x)", 0, GPULSE_EINVAL, "invalid label name \"1x\"");
	expect1("count_values by (job) (\"v\", x{job=\"b\"} > 5)", 0, "{job=\"b\", v=\"10\"}", 2);
	/* the factors' errors and their Go %f wording, as promtool 2.42 gives
	 * them; no error over a window without samples, nor for a NaN */
	expect_error("holt_winters(w[5m], 1, 0.5)", 4 * MIN_MS, GPULSE_EINVAL,
		     "invalid smoothing factor. Expected: 0 < sf < 1, got: 1.000000");
	expect_error("holt_winters(w[5m], 0.5, 0)", 4 * MIN_MS, GPULSE_EINVAL,
		     "invalid trend factor. Expected: 0 < tf < 1, got: 0.000000");
	expect_error("holt_winters(w[5m], -Inf, 0.5)", 4 * MIN_MS, GPULSE_EINVAL, "got: -Inf");
	expect_error("holt_winters(w[5m:1m], 0.5, 1)", 4 * MIN_MS, GPULSE_EINVAL, "invalid trend factor");
	expect_empty("holt_winters(nothing[5m], 2, 0.5)", 4 * MIN_MS);
	expect_empty("holt_winters(w[5m] offset 1h, 0.5, 7)", 4 * MIN_MS);
	expect1("holt_winters(w[5m], 0.5, NaN)", 4 * MIN_MS, "{k=\"v\"}", NAN);
	/* label_replace keeps the metric name and leaves what does not match */
	r = query("label_replace(x, \"jj\", \"<$1$1>\", \"job\", \"(a)\")", 0);
	expect_sample(r, "{__name__=\"x\", i=\"1\", jj=\"<aa>\", job=\"a\"}", 1);
	expect_sample(r, "{__name__=\"x\", i=\"3\", job=\"b\"}", 4);
	promql_result_free(r);
	/* a subquery as the whole query: its points, at absolute multiples
	 * of the step (the default step is a minute) */
	r = query("w[3m:]", 3 * MIN_MS + 30000);
	assert_int_equal(r->type, PROMQL_TYPE_MATRIX);
	assert_int_equal(r->nseries, 1);
	assert_int_equal(r->series[0].npoints, 3);
	assert_true(r->series[0].points[0].t_ms == MIN_MS && r->series[0].points[0].v == 2);
	assert_true(r->series[0].points[2].t_ms == 3 * MIN_MS && r->series[0].points[2].v == 8);
	promql_result_free(r);
	/* timestamp: a selector's own sample time, not the evaluation's */
	expect1("timestamp(old)", 5 * MIN_MS, "{}", 0);
	expect1("timestamp(vector(1))", 5 * MIN_MS, "{}", 300);
	r = query("\"hello\"", 0);
	assert_int_equal(r->type, PROMQL_TYPE_STRING);
	assert_string_equal(r->string, "hello");
	promql_result_free(r);
}

static void test_range_query(void **state)
{
	(void)state;
	struct promql_expr *e;
	struct promql_result *r;
	char err[256];
	/* m: 1 2 3 at 0..2m, stale at 3m, 5 at 10m */
	assert_int_equal(promql_parse("m", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, NULL, 0, 10 * MIN_MS, MIN_MS, &r, err, sizeof err), 0);
	assert_int_equal(r->type, PROMQL_TYPE_MATRIX);
	assert_int_equal(r->nseries, 1);
	assert_int_equal(r->series[0].npoints, 4);
	assert_int_equal(r->series[0].points[2].t_ms, 2 * MIN_MS);
	assert_int_equal(r->series[0].points[3].t_ms, 10 * MIN_MS);
	assert_true(r->series[0].points[3].v == 5);
	promql_result_free(r);
	promql_expr_free(e);
	/* a scalar becomes one series without labels; steps are independent */
	assert_int_equal(promql_parse("time() * 2", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, NULL, 0, 60000, 30000, &r, err, sizeof err), 0);
	assert_int_equal(r->nseries, 1);
	assert_int_equal(r->series[0].nlabels, 0);
	assert_int_equal(r->series[0].npoints, 3);
	assert_true(r->series[0].points[2].v == 120);
	promql_result_free(r);
	promql_expr_free(e);
	/* series sorted by labels; rate at every step */
	assert_int_equal(promql_parse("rate(http_requests[50m])", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, NULL, 40 * MIN_MS, 50 * MIN_MS, 5 * MIN_MS, &r, err, sizeof err), 0);
	assert_int_equal(r->nseries, 2);
	assert_string_equal(r->series[0].labels[0].value, "/bar");
	assert_int_equal(r->series[1].npoints, 3);
	assert_true(close(r->series[1].points[2].v, 100.0 / 3000));
	promql_result_free(r);
	promql_expr_free(e);
	/* @ start() is the range query's start at every step; @ T a fixed time */
	assert_int_equal(promql_parse("m @ start() + 0 * m", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, NULL, MIN_MS, 2 * MIN_MS, MIN_MS, &r, err, sizeof err), 0);
	assert_int_equal(r->nseries, 1);
	assert_int_equal(r->series[0].npoints, 2);
	assert_true(r->series[0].points[0].v == 2 && r->series[0].points[1].v == 2);
	promql_result_free(r);
	promql_expr_free(e);
	assert_int_equal(promql_parse("m @ 120", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, NULL, 0, 10 * MIN_MS, 5 * MIN_MS, &r, err, sizeof err), 0);
	assert_int_equal(r->series[0].npoints, 3);
	assert_true(r->series[0].points[0].v == 3 && r->series[0].points[2].v == 3);
	promql_result_free(r);
	/* only scalar and instant vector expressions */
	promql_expr_free(e);
	assert_int_equal(promql_parse("m[5m]", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, NULL, 0, 1, 1, &r, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "invalid expression type \"range vector\" for range query"));
	assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, NULL, 0, 1, 0, &r, err, sizeof err), GPULSE_EINVAL);
	promql_expr_free(e);
	assert_int_equal(promql_parse("m", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, NULL, 0, 100000000, 1, &r, err, sizeof err), GPULSE_ELIMIT);
	promql_expr_free(e);
}

static void test_limits(void **state)
{
	(void)state;
	struct promql_opts o;
	struct promql_expr *e;
	struct promql_result *r = NULL;
	char err[256];
	promql_opts_default(&o);
	o.max_series = 2;
	assert_int_equal(promql_parse("x", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_instant(e, &memstore_queryable, ms, &o, 0, &r, err, sizeof err), GPULSE_ELIMIT);
	assert_null(r);
	assert_non_null(strstr(err, "more than 2 series"));
	promql_opts_default(&o);
	o.max_samples = 4; /* x has 5 */
	assert_int_equal(promql_eval_instant(e, &memstore_queryable, ms, &o, 0, &r, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "too many samples"));
	promql_expr_free(e);
	/* a subquery's steps count against the sample limit */
	promql_opts_default(&o);
	o.max_samples = 10;
	assert_int_equal(promql_parse("max_over_time(w[3m:10s])", &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_instant(e, &memstore_queryable, ms, &o, 3 * MIN_MS, &r, err, sizeof err),
			 GPULSE_ELIMIT);
	assert_non_null(strstr(err, "subquery of 19 steps"));
	promql_expr_free(e);
	/* a shorter lookback */
	promql_opts_default(&o);
	o.lookback_ms = MIN_MS;
	r = query_opts("old", MIN_MS, &o);
	assert_int_equal(r->nseries, 1);
	promql_result_free(r);
	r = query_opts("old", 2 * MIN_MS, &o);
	assert_int_equal(r->nseries, 0);
	promql_result_free(r);
}

static void expect_format(double v, const char *want)
{
	struct buf b;
	buf_init(&b, 4096);
	assert_int_equal(promql_format_value(&b, v), 0);
	assert_string_equal(b.data, want);
	buf_free(&b);
}

static void test_format_value(void **state)
{
	(void)state;
	/* strconv.FormatFloat(v, 'f', -1, 64) */
	expect_format(1, "1");
	expect_format(0, "0");
	expect_format(0.1, "0.1");
	expect_format(-2.5, "-2.5");
	expect_format(1.0 / 3, "0.3333333333333333");
	expect_format(100.0 / 3000, "0.03333333333333333");
	expect_format(1e21, "1000000000000000000000");
	expect_format(1e-7, "0.0000001");
	expect_format(123456.789, "123456.789");
	expect_format(0.1 + 0.2, "0.30000000000000004");
	expect_format(NAN, "NaN");
	expect_format(INFINITY, "+Inf");
	expect_format(-INFINITY, "-Inf");
	struct buf b;
	buf_init(&b, 4096);
	promql_format_value(&b, 5e-324);
	assert_int_equal(b.len, 326);
	assert_memory_equal(b.data, "0.000", 5);
	assert_int_equal(b.data[325], '5');
	buf_free(&b);
	buf_init(&b, 4096);
	struct label l[2] = {{"__name__", "up"}, {"job", "a\"b"}};
	promql_format_labels(&b, l, 2);
	assert_string_equal(b.data, "{__name__=\"up\", job=\"a\\\"b\"}");
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookback_staleness),
		cmocka_unit_test(test_rate_family),
		cmocka_unit_test(test_over_time),
		cmocka_unit_test(test_aggregation),
		cmocka_unit_test(test_binary),
		cmocka_unit_test(test_functions),
		cmocka_unit_test(test_range_query),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_format_value),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
