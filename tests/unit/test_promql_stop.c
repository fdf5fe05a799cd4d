/* Tests for the evaluator's deadline and cancel test (promql_opts's
 * deadline_ns and cancelled, issue 14 item 2): a query that would run for
 * minutes stops within a generous margin of its deadline or of its caller
 * going away, with Prometheus's messages; the cancel test is rate-limited;
 * and with neither set (the defaults, as the rule engine uses them)
 * results are unchanged. Margins are seconds where the stop takes
 * milliseconds, and the heavy query's unbounded run is far longer than
 * any margin, so a slow or busy machine cannot flip a result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "promql/eval.h"
#include "promql/memstore.h"
#include "promql/parser.h"
#include "common/status.h"
#include "store/tsdb.h"
#include "promql/tsdb_queryable.h"

#define SEC_NS 1000000000LL
#define HOUR_MS (3600 * 1000LL)
/* Stopping takes milliseconds; this is what the tests allow. */
#define MARGIN_NS (5 * SEC_NS)

static struct memstore *ms;

/* One series every 100 ms over 2 h, and a few small ones. */
static int setup(void **state)
{
	(void)state;
	ms = memstore_new(100, 200000);
	struct label heavy[] = {{"__name__", "heavy"}, {"job", "x"}};
	for (int64_t t = 0; t <= 2 * HOUR_MS; t += 100)
		if (memstore_add(ms, heavy, 2, t, (double)t / 1000) != 0)
			return -1;
	for (int i = 0; i < 3; i++) {
		char v[2] = {(char)('a' + i), 0};
		struct label small[] = {{"__name__", "small"}, {"i", v}};
		for (int64_t t = 0; t <= 600000; t += 15000)
			if (memstore_add(ms, small, 2, t, i + (double)t / 15000) != 0)
				return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	memstore_free(ms);
	return 0;
}

static struct promql_expr *parse(const char *q)
{
	struct promql_expr *e;
	char err[256];
	if (promql_parse(q, &e, err, sizeof err) != 0)
		fail_msg("%s: %s", q, err);
	return e;
}

/* Unbounded, this range query evaluates 721 steps x 3600 subquery steps,
 * each a rate over 6000 samples: about 1.5e10 samples copied, minutes of
 * CPU on any machine. */
static const char HEAVY[] = "max_over_time(rate(heavy[10m])[1h:1s])";

static int range_heavy(struct promql_opts *o, char *err, size_t errlen)
{
	struct promql_expr *e = parse(HEAVY);
	struct promql_result *r = NULL;
	int rc = promql_eval_range(e, &memstore_queryable, ms, o, HOUR_MS, 2 * HOUR_MS, 10000, &r,
				   err, errlen);
	promql_result_free(r);
	promql_expr_free(e);
	return rc;
}

static void test_defaults_never_stop(void **state)
{
	(void)state;
	struct promql_opts o;
	promql_opts_default(&o);
	assert_int_equal(o.deadline_ns, 0);
	assert_null(o.cancelled);
	int64_t next = 0;
	char err[128] = "";
	assert_int_equal(promql_check_stop(&o, &next, "expression evaluation", err, sizeof err), 0);
	assert_string_equal(err, "");
}

static void test_deadline_stops_range_query(void **state)
{
	(void)state;
	struct promql_opts o;
	promql_opts_default(&o);
	int64_t t0 = clock_mono_ns();
	o.deadline_ns = t0 + 100 * 1000000LL;
	char err[256] = "";
	int rc = range_heavy(&o, err, sizeof err);
	int64_t took = clock_mono_ns() - t0;
	assert_int_equal(rc, GPULSE_ETIMEDOUT);
	assert_string_equal(err, "query timed out in expression evaluation");
	if (took > MARGIN_NS)
		fail_msg("the query ran %.1f s past a 0.1 s deadline", (double)took / 1e9);
}

static void test_deadline_stops_instant_subquery(void **state)
{
	(void)state;
	struct promql_opts o;
	promql_opts_default(&o);
	/* One instant evaluation of a subquery of 7200 steps, each a rate
	 * over 72000 samples: 5e8 samples copied unbounded. */
	struct promql_expr *e = parse("max_over_time(rate(heavy[2h])[2h:1s])");
	struct promql_result *r = NULL;
	char err[256] = "";
	int64_t t0 = clock_mono_ns();
	o.deadline_ns = t0 + 50 * 1000000LL;
	int rc = promql_eval_instant(e, &memstore_queryable, ms, &o, 2 * HOUR_MS, &r, err,
				     sizeof err);
	int64_t took = clock_mono_ns() - t0;
	promql_expr_free(e);
	assert_null(r);
	assert_int_equal(rc, GPULSE_ETIMEDOUT);
	assert_string_equal(err, "query timed out in expression evaluation");
	if (took > MARGIN_NS)
		fail_msg("the query ran %.1f s past a 0.05 s deadline", (double)took / 1e9);
}

static void test_past_deadline_stops_at_once(void **state)
{
	(void)state;
	struct promql_opts o;
	promql_opts_default(&o);
	o.deadline_ns = clock_mono_ns() - 1;
	struct promql_expr *e = parse("sum(small)");
	struct promql_result *r = NULL;
	char err[256];
	assert_int_equal(promql_eval_instant(e, &memstore_queryable, ms, &o, 600000, &r, err,
					     sizeof err), GPULSE_ETIMEDOUT);
	assert_null(r);
	promql_expr_free(e);
}

struct gone {
	atomic_int calls;
	int64_t gone_after_ns; /* clock_mono_ns() from which it says gone */
};

static bool client_gone(void *ctx)
{
	struct gone *g = ctx;
	atomic_fetch_add(&g->calls, 1);
	return clock_mono_ns() >= g->gone_after_ns;
}

static void test_cancel_stops_range_query(void **state)
{
	(void)state;
	struct promql_opts o;
	promql_opts_default(&o);
	int64_t t0 = clock_mono_ns();
	struct gone g = {.gone_after_ns = t0 + 200 * 1000000LL};
	o.cancelled = client_gone;
	o.cancelled_ctx = &g;
	char err[256] = "";
	int rc = range_heavy(&o, err, sizeof err);
	int64_t took = clock_mono_ns() - t0;
	assert_int_equal(rc, GPULSE_ECANCELED);
	assert_string_equal(err, "query was canceled in expression evaluation");
	if (took > MARGIN_NS)
		fail_msg("the query ran %.1f s after its caller went", (double)took / 1e9);
	/* Asked at most once per PROMQL_CANCEL_POLL_NS (and once at the
	 * start): a poll(2) per series would cost more than the work. */
	int most = (int)(took / PROMQL_CANCEL_POLL_NS) + 2;
	if (atomic_load(&g.calls) > most)
		fail_msg("the cancel test ran %d times in %.3f s (at most %d)", atomic_load(&g.calls),
			 (double)took / 1e9, most);
	assert_true(atomic_load(&g.calls) >= 2);
}

/* A deadline far off and a cancel test that never fires change nothing:
 * the same values as with neither. */
static void test_unfired_limits_change_nothing(void **state)
{
	(void)state;
	const char *qs[] = {"sum by (i) (rate(small[2m]))", "max_over_time(small[5m:30s])",
			    "small * 2 > 10"};
	for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
		struct promql_expr *e = parse(qs[k]);
		struct promql_opts plain, watched;
		promql_opts_default(&plain);
		promql_opts_default(&watched);
		struct gone g = {.gone_after_ns = INT64_MAX};
		watched.deadline_ns = clock_mono_ns() + 3600 * SEC_NS;
		watched.cancelled = client_gone;
		watched.cancelled_ctx = &g;
		struct promql_result *a = NULL, *b = NULL;
		char err[256];
		assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, &plain, 120000, 600000,
						   15000, &a, err, sizeof err), 0);
		assert_int_equal(promql_eval_range(e, &memstore_queryable, ms, &watched, 120000, 600000,
						   15000, &b, err, sizeof err), 0);
		assert_int_equal(a->nseries, b->nseries);
		assert_true(a->nseries > 0);
		for (size_t i = 0; i < a->nseries; i++) {
			assert_int_equal(a->series[i].npoints, b->series[i].npoints);
			for (size_t j = 0; j < a->series[i].npoints; j++) {
				assert_int_equal(a->series[i].points[j].t_ms, b->series[i].points[j].t_ms);
				assert_memory_equal(&a->series[i].points[j].v, &b->series[i].points[j].v,
						    sizeof(double));
			}
		}
		promql_result_free(a);
		promql_result_free(b);
		promql_expr_free(e);
	}
}

/* The store adapter looks too (the select of a long range is the other
 * slow part), with the query's message; without a deadline the same
 * query answers. */
static void test_tsdb_select_stops(void **state)
{
	(void)state;
	char dir[] = "/tmp/gpulse-stop-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/db", dir);
	struct tsdb_opts topts = {.path = path};
	struct tsdb *db;
	char err[256] = "";
	if (tsdb_open(&db, &topts, err, sizeof err) != 0)
		fail_msg("tsdb_open: %s", err);
	struct label l[] = {{"__name__", "m"}, {"gpu", "0"}};
	uint32_t ref;
	assert_int_equal(tsdb_series(db, l, 2, &ref, err, sizeof err), 0);
	int64_t now = clock_wall_ns() / 1000000;
	for (int i = 0; i < 20000; i++)
		assert_int_equal(tsdb_append(db, ref, now - 200000 + i * 10LL, i), 0);
	assert_int_equal(tsdb_flush(db), 0);

	struct promql_expr *e = parse("count_over_time(m[1h])");
	struct promql_opts o;
	promql_opts_default(&o);
	struct tsdb_queryable_ctx qc = {.db = db, .stop = &o};
	struct promql_result *r = NULL;
	assert_int_equal(promql_eval_instant(e, &tsdb_queryable, &qc, &o, now, &r, err, sizeof err), 0);
	assert_int_equal(r->nseries, 1);
	assert_true(r->series[0].points[0].v == 20000);
	promql_result_free(r);
	r = NULL;
	o.deadline_ns = clock_mono_ns() - 1;
	assert_int_equal(promql_eval_instant(e, &tsdb_queryable, &qc, &o, now, &r, err, sizeof err),
			 GPULSE_ETIMEDOUT);
	assert_string_equal(err, "query timed out in query execution");
	assert_null(r);
	promql_expr_free(e);
	tsdb_close(db);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_never_stop),
		cmocka_unit_test(test_deadline_stops_range_query),
		cmocka_unit_test(test_deadline_stops_instant_subquery),
		cmocka_unit_test(test_past_deadline_stops_at_once),
		cmocka_unit_test(test_cancel_stops_range_query),
		cmocka_unit_test(test_unfired_limits_change_nothing),
		cmocka_unit_test(test_tsdb_select_stops),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
