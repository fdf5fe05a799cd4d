/* Long-range queries past raw retention read the store's 1-minute rollups:
 * after retention has deleted the raw chunks, PromQL over the old range
 * still answers, from the minute means. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "promql/eval.h"
#include "promql/parser.h"
#include "store/tsdb.h"
#include "promql/tsdb_queryable.h"

static double eval_at(struct tsdb *db, const char *q, int64_t t_ms, size_t *n)
{
	struct promql_expr *e = NULL;
	char err[256];
	assert_int_equal(promql_parse(q, &e, err, sizeof err), 0);
	struct promql_opts o;
	promql_opts_default(&o);
	struct tsdb_queryable_ctx qc = {.db = db, .rollups = true};
	struct promql_result *r = NULL;
	if (promql_eval_instant(e, &tsdb_queryable, &qc, &o, t_ms, &r, err, sizeof err))
		fail_msg("%s: %s", q, err);
	*n = r->nseries;
	double v = r->nseries ? r->series[0].points[0].v : 0;
	promql_result_free(r);
	promql_expr_free(e);
	return v;
}

/* A store in a new temporary folder (dir, a mkdtemp template, becomes
 * it) with 1-minute rollups and raw retention raw_ms (0: the default),
 * holding the one series m{gpu="0"} (*ref). */
static struct tsdb *temp_store(char *dir, int64_t raw_ms, uint32_t *ref)
{
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/db", dir);
	struct tsdb_opts opts = {.path = path, .raw_retention_ms = raw_ms, .rollup_step_ms = 60000};
	struct tsdb *db;
	char err[256];
	assert_int_equal(tsdb_open(&db, &opts, err, sizeof err), 0);
	struct label l[] = {{"__name__", "m"}, {"gpu", "0"}};
	assert_int_equal(tsdb_series(db, l, 2, ref, err, sizeof err), 0);
	return db;
}

static void remove_store(struct tsdb *db, const char *dir)
{
	tsdb_close(db);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_rollups_answer_past_raw_retention(void **state)
{
	(void)state;
	char dir[] = "/tmp/gpulse-rollupq-XXXXXX";
	uint32_t ref;
	struct tsdb *db = temp_store(dir, 60000, &ref);

	/* Five whole minutes, 10 and 5 minutes ago, one sample a second:
	 * value i at T0 + i s, so minute k's mean is 60k + 29.5. */
	int64_t now = clock_wall_ns() / 1000000;
	int64_t t0 = (now - 600000) / 60000 * 60000;
	for (int i = 0; i < 300; i++)
		assert_int_equal(tsdb_append(db, ref, t0 + i * 1000LL, i), 0);
	/* One more sample closes the last minute's bucket. */
	assert_int_equal(tsdb_append(db, ref, t0 + 300000, 300), 0);
	assert_int_equal(tsdb_flush(db), 0);
	int64_t at = t0 + 299000;
	size_t n;
	/* A range older than raw retention reads rollups whether or not
	 * retention has run yet, so the answer does not change when it does;
	 * a recent range reads raw samples. */
	assert_true(eval_at(db, "max_over_time(m[5m])", at, &n) == 60 * 4 + 29.5 && n == 1);
	assert_int_equal(tsdb_enforce_retention(db, now), 0);
	/* Raw chunks are gone; the rollups answer with minute means. */
	double avg = eval_at(db, "avg_over_time(m[5m])", at, &n);
	assert_int_equal(n, 1);
	assert_true(avg == 149.5);
	double mx = eval_at(db, "max_over_time(m[5m])", at, &n);
	assert_true(mx == 60 * 4 + 29.5);
	assert_true(eval_at(db, "count_over_time(m[5m])", at, &n) == 5);
	/* Recent samples are read raw: the largest sample, not a mean. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(tsdb_append(db, ref, now - 5000 + i * 1000LL, 1000 + i), 0);
	assert_true(eval_at(db, "max_over_time(m[10s])", now, &n) == 1004 && n == 1);
	remove_store(db, dir);
}

/* TSDB_READ_ROLLUP_TOTAL is the fold of the buckets TSDB_READ_ROLLUP
 * gives for the same range: rolled-up minutes and the raw tail above the
 * watermark alike, a NaN (staleness marker) counted in neither. */
static void test_total_is_the_buckets_folded(void **state)
{
	(void)state;
	char dir[] = "/tmp/gpulse-rolluptot-XXXXXX";
	uint32_t ref;
	struct tsdb *db = temp_store(dir, 0, &ref);
	char err[256];
	int64_t now = clock_wall_ns() / 1000000;
	int64_t t0 = (now - 3600000) / 60000 * 60000;
	/* 50 minutes of a sample every 10 s, flushed (rolled up), then 5 more
	 * minutes left raw in the head */
	for (int i = 0; i < 300; i++)
		assert_int_equal(tsdb_append(db, ref, t0 + i * 10000LL,
					     i == 17 ? NAN : 100 + (i * 37) % 53 - 0.25 * i), 0);
	assert_int_equal(tsdb_flush(db), 0);
	for (int i = 300; i < 330; i++)
		assert_int_equal(tsdb_append(db, ref, t0 + i * 10000LL, 3.5 * i), 0);
	struct tsdb_matcher m = {TSDB_MATCH_EQ, "__name__", "m"};
	/* from inside the first minute to inside the raw tail */
	int64_t lo = t0 + 90000, hi = t0 + 3200000;
	struct tsdb_select_opts so = {.mint = lo, .maxt = hi, .mode = TSDB_READ_ROLLUP};
	struct tsdb_iter *it;
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	struct tsdb_rollup r, want = {.min = INFINITY, .max = -INFINITY};
	size_t buckets = 0;
	while (tsdb_iter_next_rollup(it, &r) == 1) {
		want.min = r.min < want.min ? r.min : want.min;
		want.max = r.max > want.max ? r.max : want.max;
		want.sum += r.sum;
		want.count += r.count;
		buckets++;
	}
	tsdb_iter_free(it);
	assert_true(buckets > 40);
	so.mode = TSDB_READ_ROLLUP_TOTAL;
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	assert_int_equal(tsdb_iter_next_rollup(it, &r), 1);
	assert_int_equal(tsdb_iter_next_rollup(it, &r) == 1, 0);
	tsdb_iter_free(it);
	/* the same, in one bucket (the sum up to rounding: SQLite adds it) */
	assert_true(r.min == want.min && r.max == want.max);
	assert_int_equal(r.count, want.count);
	assert_float_equal(r.sum, want.sum, 1e-9 * fabs(want.sum));
	/* the raw tail counts: its samples are the range's largest */
	assert_true(r.max == 3.5 * 320);
	remove_store(db, dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rollups_answer_past_raw_retention),
		cmocka_unit_test(test_total_is_the_buckets_folded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
