/* TSDB_READ_LATEST, what instant selectors read: for any range, each
 * series' newest sample in it is exactly the last sample a raw read of
 * the same range returns, whether it lies in the open chunk, the head's
 * full chunks or on disk, across gaps and staleness markers; and the
 * PromQL queryable's select_latest gives the evaluator the same instant
 * answers as select. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "promql/eval.h"
#include "promql/parser.h"
#include "promql/queryable.h"
#include "common/stale.h"
#include "common/status.h"
#include "store/tsdb.h"
#include "promql/tsdb_queryable.h"

#define T0 1700000000000LL
#define NSERIES 3

static int64_t last_raw(struct tsdb *db, const char *name, int64_t lo, int64_t hi, double *v,
			bool latest)
{
	struct tsdb_matcher m = {TSDB_MATCH_EQ, "__name__", name};
	struct tsdb_select_opts so = {.mint = lo, .maxt = hi,
				      .mode = latest ? TSDB_READ_LATEST : TSDB_READ_RAW};
	struct tsdb_iter *it;
	char err[128];
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), GPULSE_OK);
	int64_t t = INT64_MIN, tt;
	double vv;
	size_t n = 0;
	if (tsdb_iter_next_series(it) == 1)
		while (tsdb_iter_next_sample(it, &tt, &vv) == 1) {
			t = tt;
			*v = vv;
			n++;
		}
	if (latest)
		assert_true(n <= 1);
	tsdb_iter_free(it);
	return t;
}

static bool same_value(double a, double b)
{
	uint64_t x, y;
	memcpy(&x, &a, sizeof x);
	memcpy(&y, &b, sizeof y);
	return x == y;
}

static void latest_matches_raw(void **state)
{
	(void)state;
	char dir[] = "/tmp/gpulse-latest-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof path, "%s/db", dir);
	struct tsdb_opts o = {.path = path};
	char err[256];
	struct tsdb *db;
	assert_int_equal(tsdb_open(&db, &o, err, sizeof err), GPULSE_OK);
	uint32_t ref[NSERIES];
	const char *names[NSERIES] = {"a", "b", "c"};
	for (int i = 0; i < NSERIES; i++) {
		struct label l = {"__name__", names[i]};
		assert_int_equal(tsdb_series(db, &l, 1, &ref[i], err, sizeof err), GPULSE_OK);
	}
	/* 10 Hz for 40 minutes with gaps and staleness markers; flushed at
	 * 15 and 30 minutes, so the data lies on disk, in full head chunks
	 * and in the open chunk. */
	srand(7);
	int64_t end = T0;
	for (int64_t k = 0; k < 24000; k++) {
		int64_t t = T0 + k * 100;
		for (int i = 0; i < NSERIES; i++) {
			if ((k / 600) % 7 == (unsigned)i + 2)
				continue;  /* a minute-long gap, different per series */
			double v = (rand() % 1000) / 8.0;
			if (k % 997 == (unsigned)i)
				v = stale_nan();
			assert_int_equal(tsdb_append(db, ref[i], t, v), GPULSE_OK);
		}
		if (k == 9000 || k == 18000)
			assert_int_equal(tsdb_flush(db), GPULSE_OK);
		end = t;
	}
	for (int trial = 0; trial < 600; trial++) {
		int64_t hi = T0 - 60000 + rand() % (end - T0 + 120000);
		int64_t lo = hi - (trial % 3 == 0 ? 300000 : 1000 + rand() % 60000);
		for (int i = 0; i < NSERIES; i++) {
			double vr = 0, vl = 0;
			int64_t tr = last_raw(db, names[i], lo, hi, &vr, false);
			int64_t tl = last_raw(db, names[i], lo, hi, &vl, true);
			assert_int_equal(tl, tr);
			if (tr != INT64_MIN)
				assert_true(same_value(vl, vr));
		}
	}

	/* The evaluator: instant queries through select_latest agree with
	 * the same queries through select alone. */
	struct tsdb_queryable_ctx qc = {.db = db};
	struct promql_queryable plain = tsdb_queryable;
	plain.select_latest = NULL;
	const char *queries[] = {"a", "a + b", "sum(a) / count(c)", "c offset 5m", "a > 50",
				 "rate(a[1m])", "max_over_time(b[30s]) - c"};
	for (int trial = 0; trial < 60; trial++) {
		int64_t t = T0 + rand() % (end - T0 + 60000);
		for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
			struct promql_expr *e = NULL;
			char perr[256];
			assert_int_equal(promql_parse(queries[q], &e, perr, sizeof perr), GPULSE_OK);
			struct promql_result *r1 = NULL, *r2 = NULL;
			struct promql_opts po;
			promql_opts_default(&po);
			int rc1 = promql_eval_instant(e, &tsdb_queryable, &qc, &po, t, &r1, perr,
						      sizeof perr);
			int rc2 = promql_eval_instant(e, &plain, &qc, &po, t, &r2, perr, sizeof perr);
			assert_int_equal(rc1, rc2);
			if (rc1 == 0) {
				assert_int_equal(r1->type, r2->type);
				assert_int_equal(r1->nseries, r2->nseries);
				for (size_t k = 0; k < r1->nseries; k++) {
					assert_int_equal(r1->series[k].npoints, r2->series[k].npoints);
					for (size_t j = 0; j < r1->series[k].npoints; j++)
						assert_true(same_value(r1->series[k].points[j].v,
								       r2->series[k].points[j].v));
				}
			}
			promql_result_free(r1);
			promql_result_free(r2);
			promql_expr_free(e);
		}
	}
	tsdb_close(db);
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(latest_matches_raw),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
