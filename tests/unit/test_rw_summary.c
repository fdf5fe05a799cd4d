/* Edge aggregation (src/remote/rw_summary.c): summaries against the same
 * figures computed here from the same samples, counters sent raw at the
 * interval's end, and every raw sample of a GPU while an alert is pending
 * or firing for it or its anomaly score is over the threshold. Times are
 * relative to an arbitrary base, never today's date. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "remote/rw_summary.h"
#include "common/status.h"

struct got {
	char name[128];
	char gpu[16];
	int64_t t;
	double v;
};
static struct got got[100000];
static size_t ngot;

static void emit(void *ctx, const void *key, const struct label *l, size_t n, int64_t t,
		 double v)
{
	(void)ctx;
	(void)key;
	struct got *g = &got[ngot++];
	memset(g, 0, sizeof *g);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(l[i].name, "__name__") == 0)
			snprintf(g->name, sizeof g->name, "%s", l[i].value);
		if (strcmp(l[i].name, "gpu") == 0)
			snprintf(g->gpu, sizeof g->gpu, "%s", l[i].value);
	}
	g->t = t;
	g->v = v;
}

static const struct got *find(const char *name, const char *gpu, size_t from)
{
	for (size_t i = from; i < ngot; i++)
		if (strcmp(got[i].name, name) == 0 && strcmp(got[i].gpu, gpu) == 0)
			return &got[i];
	return NULL;
}

static size_t count(const char *name, const char *gpu)
{
	size_t c = 0;
	for (size_t i = 0; i < ngot; i++)
		c += strcmp(got[i].name, name) == 0 && strcmp(got[i].gpu, gpu) == 0;
	return c;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static const int64_t base = 1000LL * 3600 * 24 * 1000;  /* a whole minute, any day */

static void test_summaries(void **state)
{
	(void)state;
	ngot = 0;
	struct rw_summary *s = NULL;
	struct rw_summary_opts o = {.interval_ms = 60000, .quantile = 0.95};
	assert_int_equal(rw_summary_create(&s, &o), 0);
	struct label g[] = {{"__name__", "gpulse_gpu_utilization_ratio"}, {"gpu", "0"}};
	struct label c[] = {{"__name__", "gpulse_gpu_xid_errors_total"}, {"gpu", "0"}};
	double vals[600];
	srand(7);
	for (int i = 0; i < 600; i++) {   /* 10 Hz for one minute */
		vals[i] = (double)rand() / RAND_MAX;
		assert_int_equal(rw_summary_add(s, 1, g, 2, base + i * 100, vals[i], emit, NULL), 0);
		assert_int_equal(rw_summary_add(s, 2, c, 2, base + i * 100, (double)(i / 100), emit, NULL), 0);
	}
	/* Nothing sent within the interval: no raw gauge, no summary yet. */
	assert_int_equal(ngot, 0);
	/* The next interval's first sample closes the first. */
	rw_summary_add(s, 1, g, 2, base + 60000, 0.5, emit, NULL);
	rw_summary_add(s, 2, c, 2, base + 60000, 6, emit, NULL);
	double mn = vals[0], mx = vals[0], sum = 0;
	for (int i = 0; i < 600; i++) {
		mn = fmin(mn, vals[i]);
		mx = fmax(mx, vals[i]);
		sum += vals[i];
	}
	qsort(vals, 600, sizeof vals[0], dcmp);
	double rank = 0.95 * 599, w = rank - floor(rank);
	double p95 = vals[(int)rank] * (1 - w) + vals[(int)rank + 1] * w;
	const struct got *x;
	assert_non_null(x = find("gpulse_gpu_utilization_ratio:min1m", "0", 0));
	assert_true(x->v == mn);
	assert_true(x->t < base + 60000 && x->t >= base + 59000);
	assert_non_null(x = find("gpulse_gpu_utilization_ratio:max1m", "0", 0));
	assert_true(x->v == mx);
	assert_non_null(x = find("gpulse_gpu_utilization_ratio:mean1m", "0", 0));
	assert_true(fabs(x->v - sum / 600) < 1e-12);
	assert_non_null(x = find("gpulse_gpu_utilization_ratio:p95_1m", "0", 0));
	assert_true(fabs(x->v - p95) < 1e-12);
	/* The counter: its last sample of the interval, raw, under its name. */
	assert_non_null(x = find("gpulse_gpu_xid_errors_total", "0", 0));
	assert_int_equal(x->t, base + 59900);
	assert_true(x->v == 5);
	assert_int_equal(count("gpulse_gpu_utilization_ratio", "0"), 0);
	/* A quiet series is closed by the sweep once its interval is over. */
	size_t before = ngot;
	rw_summary_sweep(s, base + 119999, emit, NULL);
	assert_int_equal(ngot, before);
	rw_summary_sweep(s, base + 120000, emit, NULL);
	assert_non_null(x = find("gpulse_gpu_utilization_ratio:max1m", "0", before));
	assert_true(x->v == 0.5);
	rw_summary_destroy(s);
}

static void test_hot_gpu_passthrough(void **state)
{
	(void)state;
	ngot = 0;
	struct rw_summary *s = NULL;
	struct rw_summary_opts o = {.interval_ms = 60000, .hold_ms = 5000, .anomaly_threshold = 4};
	assert_int_equal(rw_summary_create(&s, &o), 0);
	struct label g0[] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", "0"}};
	struct label g1[] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", "1"}};
	struct label al[] = {{"__name__", "ALERTS"}, {"alertname", "GPUHot"},
				  {"alertstate", "firing"}, {"gpu", "1"}};
	struct label an[] = {{"__name__", "gpulse_anomaly_score"}, {"gpu", "0"},
				  {"metric", "power"}};
	for (int i = 0; i < 100; i++) {   /* 10 s at 10 Hz */
		int64_t t = base + i * 100;
		/* An alert fires for GPU 1 from 2 s to 4 s (one ALERTS sample a second). */
		if (i % 10 == 0 && i >= 20 && i <= 40) {
			rw_summary_observe(s, al, 4, t, 1);
			rw_summary_add(s, 3, al, 4, t, 1, emit, NULL);
		}
		/* GPU 0's anomaly score: low, then over the threshold at 6 s. */
		if (i % 10 == 0) {
			rw_summary_observe(s, an, 3, t, i == 60 ? 7 : 1);
			rw_summary_add(s, 4, an, 3, t, i == 60 ? 7 : 1, emit, NULL);
		}
		/* The GPUs' series after the state's samples of the same instant. */
		rw_summary_add(s, 1, g0, 2, t, 100 + i, emit, NULL);
		rw_summary_add(s, 2, g1, 2, t, 200 + i, emit, NULL);
	}
	/* ALERTS are sent raw, every sample. */
	assert_int_equal(count("ALERTS", "1"), 3);
	/* GPU 1: raw from the first ALERTS sample (2 s) to the last plus the
	 * hold (4 s + 5 s), i.e. samples 2.0 .. 9.0 s. */
	size_t n1 = count("gpulse_gpu_power_watts", "1");
	assert_int_equal(n1, 71);
	const struct got *x = find("gpulse_gpu_power_watts", "1", 0);
	assert_int_equal(x->t, base + 2000);
	/* GPU 0: from the anomalous score at 6 s to the end (within the hold). */
	size_t n0 = count("gpulse_gpu_power_watts", "0");
	assert_int_equal(n0, 40);
	assert_int_equal(find("gpulse_gpu_power_watts", "0", 0)->t, base + 6000);
	/* The anomalous score itself went raw too (a GPU 0 series). */
	assert_non_null(find("gpulse_anomaly_score", "0", 0));
	struct rw_summary_stats st;
	rw_summary_get_stats(s, &st);
	assert_true(st.raw_passthrough_total >= n0 + n1);
	rw_summary_destroy(s);
}

/* Past RW_SUMMARY_MAX_VALUES values in an interval the quantile comes
 * from a uniform reservoir: close to the exact one, min/max/mean exact. */
static void test_reservoir(void **state)
{
	(void)state;
	ngot = 0;
	struct rw_summary *s = NULL;
	struct rw_summary_opts o = {.interval_ms = 600000, .quantile = 0.95};
	assert_int_equal(rw_summary_create(&s, &o), 0);
	struct label g[] = {{"__name__", "gpulse_gpu_sm_clock_hertz"}, {"gpu", "3"}};
	int n = 6000;   /* 10 Hz for 10 minutes, three times the bound */
	for (int i = 0; i < n; i++)
		rw_summary_add(s, 1, g, 2, base + i * 100, (double)((i * 7919) % n) / n, emit, NULL);
	rw_summary_sweep(s, base + 600000, emit, NULL);
	const struct got *x = find("gpulse_gpu_sm_clock_hertz:p95_10m", "3", 0);
	assert_non_null(x);
	assert_true(fabs(x->v - 0.95) < 0.03);
	assert_non_null(x = find("gpulse_gpu_sm_clock_hertz:max10m", "3", 0));
	assert_true(x->v == (double)(n - 1) / n);
	assert_non_null(x = find("gpulse_gpu_sm_clock_hertz:min10m", "3", 0));
	assert_true(x->v == 0);
	struct rw_summary_stats st;
	rw_summary_get_stats(s, &st);
	assert_int_equal(st.reservoir_total, (uint64_t)(n - RW_SUMMARY_MAX_VALUES));
	rw_summary_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_summaries),
		cmocka_unit_test(test_hot_gpu_passthrough),
		cmocka_unit_test(test_reservoir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
