/* The capacity report's percentiles, taken by selection (report.c,
 * select_kth), against a full sort of the same slot values: a source
 * that lays crafted values on the slots (ascending, descending, constant,
 * a few distinct values in long runs, an idle GPU's zeros with rare
 * peaks, pseudo-random, organ pipe, and lengths around the small-range
 * cut-off) must give the very p50, p95, p99, mean and max that sorting
 * them and taking the nearest ranks gives. Times are relative to now. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "report/report.h"
#include "common/status.h"
#include "common/xalloc.h"

#define MIN_MS 60000LL

struct fake {
	const double *v;             /* one value per slot; NaN: no data */
	size_t n;
};

static int no_range(void *ctx, const char *expr, int64_t start_ms, int64_t end_ms,
		    int64_t step_ms, bool rollups, struct report_matrix *out, char *err,
		    size_t errlen)
{
	(void)ctx, (void)expr, (void)start_ms, (void)end_ms, (void)step_ms, (void)rollups;
	(void)out, (void)err, (void)errlen;
	return 0;
}

/* Utilization of GPU 0 only: the report then takes it as the busy metric
 * (no GPM). */
static int fake_slots(void *ctx, const char *metric, int gpu, int64_t start_ms, int64_t end_ms,
		      int64_t step_ms, bool rollups, bool want_max, struct report_matrix *out,
		      char *err, size_t errlen)
{
	const struct fake *f = ctx;
	(void)gpu, (void)rollups, (void)want_max, (void)err, (void)errlen;
	if (strcmp(metric, "gpulse_gpu_utilization_ratio") != 0)
		return 0;
	out->series = xrealloc(out->series, (out->n + 1) * sizeof *out->series);
	struct report_series *s = &out->series[out->n++];
	memset(s, 0, sizeof *s);
	s->nlabels = 3;
	s->labels = xcalloc(3, sizeof *s->labels);
	const char *kv[3][2] = {{"gpu", "0"}, {"uuid", "GPU-dist"}, {"model", "NVIDIA H200"}};
	for (size_t i = 0; i < 3; i++) {
		s->labels[i].name = xstrdup(kv[i][0]);
		s->labels[i].value = xstrdup(kv[i][1]);
	}
	size_t n = (size_t)((end_ms - start_ms) / step_ms);
	s->t_ms = xmalloc((n ? n : 1) * sizeof *s->t_ms);
	s->v = xmalloc((n ? n : 1) * sizeof *s->v);
	for (size_t k = 0; k < n && k < f->n; k++) {
		if (!isfinite(f->v[k]))
			continue;
		s->t_ms[s->n] = start_ms + (int64_t)k * step_ms + step_ms - 1;
		s->v[s->n++] = f->v[k];
	}
	return 0;
}

static const struct report_source_ops fake_ops = {
	.kind = "store",
	.query_range = no_range,
	.slots = fake_slots,
};

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest rank of the sorted values, computed here on its own. */
static double rank_of(const double *sorted, size_t n, double p)
{
	size_t r = (size_t)ceil(p / 100.0 * (double)n);
	return sorted[r < 1 ? 0 : r - 1];
}

static void check(const double *v, size_t n)
{
	double *sorted = malloc(n * sizeof *sorted);
	size_t m = 0;
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i])) {
			sorted[m++] = v[i];
			sum += v[i];
		}
	assert_true(m > 0);
	qsort(sorted, m, sizeof *sorted, cmp);

	struct fake f = {v, n};
	struct report_source src = {.ops = &fake_ops, .ctx = &f, .where = "fake"};
	int64_t end = (clock_wall_ms(NULL) / MIN_MS) * MIN_MS;
	struct report_opts o = {.start_ms = end - (int64_t)n * MIN_MS, .end_ms = end,
				.now_ms = end, .gpu = -1};
	struct report *r = NULL;
	char err[256];
	assert_int_equal(report_build(&src, &o, &r, err, sizeof err), 0);
	assert_int_equal(r->ngpus, 1);
	const struct report_dist *d = &r->gpus[0].util;
	assert_int_equal(d->n, m);
	/* the same elements, not merely close ones */
	assert_true(d->p50 == rank_of(sorted, m, 50));
	assert_true(d->p95 == rank_of(sorted, m, 95));
	assert_true(d->p99 == rank_of(sorted, m, 99));
	assert_true(d->max == sorted[m - 1]);
	assert_float_equal(d->mean, sum / (double)m, 1e-12);
	/* the busy figures are the utilization's here (no GPM) */
	assert_true(r->gpus[0].busy.p95 == d->p95);
	assert_true(r->hosts[0].busy.p99 == rank_of(sorted, m, 99));
	report_free(r);
	free(sorted);
}

#define N 5000

static void test_orders(void **state)
{
	(void)state;
	static double v[N];
	for (size_t i = 0; i < N; i++)
		v[i] = (double)i / N;
	check(v, N); /* ascending */
	for (size_t i = 0; i < N; i++)
		v[i] = (double)(N - i) / N;
	check(v, N); /* descending */
	for (size_t i = 0; i < N; i++)
		v[i] = (double)(i < N / 2 ? i : N - i) / N;
	check(v, N); /* organ pipe */
}

static void test_duplicates(void **state)
{
	(void)state;
	static double v[N];
	for (size_t i = 0; i < N; i++)
		v[i] = 0.42;
	check(v, N); /* constant */
	for (size_t i = 0; i < N; i++)
		v[i] = (double)(i % 3) / 3;
	check(v, N); /* three values, interleaved */
	for (size_t i = 0; i < N; i++)
		v[i] = i < N / 3 ? 0.1 : i < 2 * N / 3 ? 0.5 : 0.9;
	check(v, N); /* three values in long runs */
	for (size_t i = 0; i < N; i++)
		v[i] = i % 97 == 0 ? 0.97 : 0;
	check(v, N); /* an idle GPU: zeros, rare peaks */
}

static void test_random_and_gaps(void **state)
{
	(void)state;
	static double v[N];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int round = 0; round < 4; round++) {
		for (size_t i = 0; i < N; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* coarse values (many ties) in two rounds, fine in two */
			v[i] = round % 2 ? (double)(x % 1000003) / 1000003 : (double)(x % 20) / 20;
			if (round >= 2 && x % 11 == 0)
				v[i] = NAN; /* a slot with no data */
		}
		check(v, N);
	}
}

static void test_small(void **state)
{
	(void)state;
	/* around the cut-off below which the selection sorts */
	double v[40];
	for (size_t n = 1; n <= 40; n++) {
		for (size_t i = 0; i < n; i++)
			v[i] = (double)((i * 7) % 5) / 5;
		check(v, n);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_orders),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_random_and_gaps),
		cmocka_unit_test(test_small),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
