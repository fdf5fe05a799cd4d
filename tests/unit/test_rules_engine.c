/* The recording-rule engine over a real store in a temporary directory:
 * a rule's value at fixed times, chained rules, staleness, and a store
 * handed over after creation (rules_engine_set_store). */
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

#include "rules/engine.h"
#include "promql/parser.h"
#include "promql/queryable.h"
#include "common/stale.h"
#include "common/status.h"
#include "store/tsdb.h"
#include "promql/tsdb_queryable.h"

static char dir[64];
static char path[128];
static struct tsdb *db;

static const char rules_text[] =
	"groups:\n"
	"  - name: power\n"
	"    interval: 10s\n"
	"    rules:\n"
	"      - record: job:power:avg\n"
	"        expr: avg_over_time(gpulse_gpu_power_watts[10s])\n"
	"        labels:\n"
	"          job: gpu\n"
	"      - record: job:power:avg_x2\n"
	"        expr: job:power:avg * 2\n"
	"      - record: test:low\n"
	"        expr: gpulse_gpu_power_watts < 15\n"
	"      - alert: Hot\n"
	"        expr: gpulse_gpu_power_watts > 1000\n";

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/gpulse-rengineXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/store.db", dir);
	struct tsdb_opts o = {.path = path};
	char err[256] = "";
	assert_int_equal(tsdb_open(&db, &o, err, sizeof err), 0);
	/* gpulse_gpu_power_watts{gpu="0"} = t/1000 at t = 500, 1500, ... 19500 ms. */
	struct label l[] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", "0"}};
	uint32_t ref;
	assert_int_equal(tsdb_series(db, l, 2, &ref, err, sizeof err), 0);
	for (int64_t t = 500; t < 20000; t += 1000)
		assert_int_equal(tsdb_append(db, ref, t, (double)t / 1000.0), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tsdb_close(db);
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* The value of `expr` at t_ms; NAN when the result is empty. */
static double query(const char *expr, int64_t t_ms, size_t *nseries)
{
	struct promql_expr *e = NULL;
	char err[256] = "";
	assert_int_equal(promql_parse(expr, &e, err, sizeof err), 0);
	struct promql_opts o;
	promql_opts_default(&o);
	struct tsdb_queryable_ctx qc = {.db = db};
	struct promql_result *r = NULL;
	assert_int_equal(promql_eval_instant(e, &tsdb_queryable, &qc, &o, t_ms, &r, err, sizeof err), 0);
	assert_int_equal(r->type, PROMQL_TYPE_VECTOR);
	double v = r->nseries ? r->series[0].points[0].v : NAN;
	if (nseries)
		*nseries = r->nseries;
	promql_result_free(r);
	promql_expr_free(e);
	return v;
}

static struct rules_engine *new_engine_with(const struct rules_engine_config *c);

static struct rules_engine *new_engine(void)
{
	struct rules_engine_config c = {.db = db};
	return new_engine_with(&c);
}

static struct rules_engine *new_engine_with(const struct rules_engine_config *c)
{
	struct buf errs;
	buf_init(&errs, 1 << 16);
	struct rules_file **files = calloc(1, sizeof *files);
	assert_non_null(files);
	assert_int_equal(rules_file_parse("test.yml", rules_text, strlen(rules_text), &files[0], &errs), 0);
	buf_free(&errs);
	struct rules_engine *e = NULL;
	assert_int_equal(rules_engine_new(&e, c, files, 1), 0);
	return e;
}

static void test_value_and_chain(void **state)
{
	(void)state;
	struct rules_engine *e = new_engine();
	assert_int_equal(rules_engine_group_count(e), 1);
	assert_int_equal(rules_engine_eval_group(e, 0, 12000), 0);
	/* [2000, 12000]: 2.5 .. 11.5, mean 7. */
	assert_true(fabs(query("job:power:avg{job=\"gpu\",gpu=\"0\"}", 12000, NULL) - 7.0) < 1e-9);
	assert_true(fabs(query("job:power:avg_x2", 12000, NULL) - 14.0) < 1e-9);
	assert_int_equal(rules_engine_eval_group(e, 0, 20000), 0);
	/* [10000, 20000]: 10.5 .. 19.5, mean 15; the chained rule saw it. */
	assert_true(fabs(query("job:power:avg", 20000, NULL) - 15.0) < 1e-9);
	assert_true(fabs(query("job:power:avg_x2{job=\"gpu\"}", 20000, NULL) - 30.0) < 1e-9);

	struct rules_group_stats st[2];
	assert_int_equal(rules_engine_stats(e, st, 2), 1);
	assert_string_equal(st[0].name, "test.yml;power");
	assert_int_equal(st[0].evaluations_total, 8); /* 3 recording rules and an alert, twice */
	assert_int_equal(st[0].failures_total, 0);

	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(rules_engine_write_json(e, NULL, &b), 0);
	assert_non_null(strstr(b.data, "\"name\":\"power\""));
	assert_non_null(strstr(b.data, "\"interval\":10"));
	assert_non_null(strstr(b.data, "\"type\":\"recording\""));
	assert_non_null(strstr(b.data, "\"state\":\"inactive\""));
	assert_non_null(strstr(b.data, "\"health\":\"ok\""));
	buf_free(&b);
	rules_engine_free(e);
}

static void test_staleness(void **state)
{
	(void)state;
	struct rules_engine *e = new_engine();
	assert_int_equal(rules_engine_eval_group(e, 0, 12000), 0);
	size_t n = 0;
	assert_true(fabs(query("test:low", 12000, &n) - 11.5) < 1e-9);
	assert_int_equal(n, 1);
	/* At 20000 the input is 19.5: the series disappears and is marked stale. */
	assert_int_equal(rules_engine_eval_group(e, 0, 20000), 0);
	assert_true(isnan(query("test:low", 20000, &n)));
	assert_int_equal(n, 0);

	struct tsdb_matcher m = {TSDB_MATCH_EQ, "__name__", "test:low"};
	struct tsdb_select_opts so = {.mint = 0, .maxt = 30000, .mode = TSDB_READ_RAW};
	struct tsdb_iter *it = NULL;
	char err[256];
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	int64_t t, last_t = 0;
	double v, last_v = 0;
	int count = 0;
	while (tsdb_iter_next_sample(it, &t, &v) == 1) {
		last_t = t;
		last_v = v;
		count++;
	}
	tsdb_iter_free(it);
	assert_int_equal(count, 2);
	assert_int_equal(last_t, 20000);
	assert_true(stale_nan_is(last_v));
	rules_engine_free(e);
}

/* Created without a store (gpulsed on a full disk), reading another
 * interface: the recording rules fail, counted, and write nothing; once
 * the store is handed over (rules_engine_set_store) the next evaluation
 * reads it and writes every recorded series. */
static void test_store_late(void **state)
{
	(void)state;
	static struct tsdb_queryable_ctx qc;
	qc = (struct tsdb_queryable_ctx){.db = db};
	struct rules_engine_config c = {.queryable = &tsdb_queryable, .queryable_ctx = &qc};
	struct rules_engine *e = new_engine_with(&c);
	assert_int_not_equal(rules_engine_eval_group(e, 0, 12000), 0);
	struct rules_group_stats st[1];
	assert_int_equal(rules_engine_stats(e, st, 1), 1);
	assert_int_equal(st[0].failures_total, 3);   /* the recording rules; the alert ran */
	size_t n = 1;
	assert_true(isnan(query("job:power:avg", 12000, &n)) && n == 0);
	rules_engine_set_store(e, db);
	assert_int_equal(rules_engine_eval_group(e, 0, 20000), 0);
	assert_true(fabs(query("job:power:avg", 20000, NULL) - 15.0) < 1e-9);
	assert_true(fabs(query("job:power:avg_x2{job=\"gpu\"}", 20000, NULL) - 30.0) < 1e-9);
	assert_int_equal(rules_engine_stats(e, st, 1), 1);
	assert_int_equal(st[0].failures_total, 3);
	rules_engine_free(e);
}

static void test_thread_runs(void **state)
{
	(void)state;
	struct rules_engine *e = new_engine();
	assert_int_equal(rules_engine_start(e), 0);
	assert_int_equal(rules_engine_start(e), GPULSE_ESTATE);
	rules_engine_stop(e);
	rules_engine_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_value_and_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_staleness, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_late, setup, teardown),
		cmocka_unit_test_setup_teardown(test_thread_runs, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
