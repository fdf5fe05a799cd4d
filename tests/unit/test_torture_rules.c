/* Torture of the rule engine and the PromQL parser (issue 14;
 * torture_shim.c says how). The scenario: a store in a temporary directory
 * with a minute of samples, a rule file (recording rules, a chained one,
 * an alerting rule with `for`, a template), the engine over them evaluated
 * at four times (the alert goes pending, then firing, and is persisted),
 * its /api/v1/rules and /api/v1/alerts JSON, a reload, the engine freed
 * and the store closed.
 *
 * What may fail where: the rule file's parser, the PromQL parser and
 * evaluator, the alert state and the templates allocate through xalloc
 * and abort on out-of-memory by design (STYLE.md); the engine's own
 * tables (rules_engine_new, _replace, a recording rule's reference list)
 * and the store under it return GPULSE_ENOMEM. So:
 *  - TORTURE_RECOVERABLE, in this process: every allocation of the
 *    second kind fails in turn (the store's and SQLite's included, once
 *    the store is open: opening is test_torture_store's); each
 *    run must end in success or a clean error and leave nothing live;
 *  - TORTURE_ALL, a child per point: every allocation fails in turn, and
 *    each run must end in success, a clean error or xalloc's abort,
 *    never another signal (an unchecked pointer); PromQL parsing the same,
 *    which is xalloc's alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "rules/engine.h"
#include "promql/parser.h"
#include "common/status.h"
#include "torture.h"
#include "store/tsdb.h"

#define T0 1795965289000LL

static const char *const path = torture_store_path;

static const char rules_text[] =
	"groups:\n"
	"  - name: power\n"
	"    interval: 10s\n"
	"    rules:\n"
	"      - record: job:power:avg\n"
	"        expr: avg_over_time(gpulse_gpu_power_watts[30s])\n"
	"        labels:\n"
	"          job: gpu\n"
	"      - record: job:power:avg_x2\n"
	"        expr: job:power:avg * 2\n"
	"      - record: job:power:total\n"
	"        expr: sum(gpulse_gpu_power_watts)\n"
	"      - alert: Hot\n"
	"        expr: gpulse_gpu_power_watts > 20\n"
	"        for: 10s\n"
	"        labels:\n"
	"          severity: page\n"
	"        annotations:\n"
	"          summary: 'GPU {{ $labels.gpu }} draws {{ $value | humanize }} W'\n";

static int64_t test_now(void *ctx)
{
	(void)ctx;
	return T0 + 120 * 1000;
}

static int parse_rules(struct rules_file ***files)
{
	struct buf errs;
	buf_init(&errs, 1 << 16);
	*files = calloc(1, sizeof **files);
	if (!*files) {
		buf_free(&errs);
		return GPULSE_ENOMEM;
	}
	int rc = rules_file_parse("t.yml", rules_text, strlen(rules_text), &(*files)[0], &errs);
	buf_free(&errs);
	if (rc != 0) {
		free(*files);
		fprintf(stderr, "the rule file was refused (%d)\n", rc);
		return -1;
	}
	return 0;
}

static int rules_scenario(void *ctx)
{
	(void)ctx;
	torture_store_remove();
	struct tsdb_opts o = {.path = path, .clock = {.now_ms = test_now}};
	struct tsdb *db = NULL;
	struct rules_engine *e = NULL;
	char err[256] = "";
	/* Opening a store is test_torture_store's (some 1700 points, most of
	 * them SQLite's): here it is set-up. */
	torture_pause(true);
	int rc = tsdb_open(&db, &o, err, sizeof err);
	torture_pause(false);
	if (rc != 0) {
		fprintf(stderr, "tsdb_open: %s\n", err);
		return -1;
	}
	for (int g = 0; g < 2 && rc == 0; g++) {
		char gpu[2] = {(char)('0' + g), 0};
		struct label l[] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", gpu}};
		uint32_t ref;
		rc = tsdb_series(db, l, 2, &ref, err, sizeof err);
		for (int64_t t = 500; rc == 0 && t < 60000; t += 1000)
			tsdb_append(db, ref, T0 + t, (double)t / 1000.0 + g);
	}
	if (rc != 0)
		goto out;
	struct rules_file **files;
	if ((rc = parse_rules(&files)) != 0)
		goto out;
	static const struct label ext[] = {{"site", "lab"}};
	struct rules_engine_config c = {.db = db, .now_ms = test_now, .eval_delay_ms = -1,
					.external_labels = ext, .nexternal_labels = 1,
					.external_url = "http://gpulse.test"};
	if ((rc = rules_engine_new(&e, &c, files, 1)) != 0) {
		e = NULL;
		goto out;
	}
	/* Rule failures are counted in the group's stats and the loop goes
	 * on: the evaluation's status is not a verdict on the run. */
	for (int64_t t = 30000; t <= 60000; t += 10000)
		rules_engine_eval_group(e, 0, T0 + t);
	struct buf b;
	buf_init(&b, 1 << 20);
	rc = rules_engine_write_json(e, NULL, &b);
	if (rc == 0)
		rc = rules_engine_write_alerts_json(e, &b);
	buf_free(&b);
	if (rc != 0)
		goto out;
	if ((rc = parse_rules(&files)) != 0)
		goto out;
	if ((rc = rules_engine_replace(e, files, 1)) != 0)
		goto out;
	rules_engine_eval_group(e, 0, T0 + 70000);
	/* The one failure has come and gone: the next evaluation, with
	 * nothing failing (paused), is whole, every rule healthy again. */
	torture_pause(true);
	struct rules_group_stats st[2];
	if (rules_engine_stats(e, st, 2) != 1) {
		rc = -1;
		goto out;
	}
	uint64_t failures = st[0].failures_total;
	if ((rc = rules_engine_eval_group(e, 0, T0 + 80000)) != 0) {
		buf_init(&b, 1 << 20);
		rules_engine_write_json(e, NULL, &b);
		fprintf(stderr, "the evaluation after the failure failed (%d): %s\n", rc,
			b.data ? b.data : "");
		buf_free(&b);
		rc = -1;
		goto out;
	}
	rules_engine_stats(e, st, 2);
	if (st[0].failures_total != failures) {
		fprintf(stderr, "a rule failed after the failure had passed\n");
		rc = -1;
		goto out;
	}
	buf_init(&b, 1 << 20);
	rc = rules_engine_write_json(e, NULL, &b);
	if (rc == 0 && strstr(b.data, "\"health\":\"err\"")) {
		fprintf(stderr, "a rule still unhealthy: %s\n", b.data);
		rc = -1;
	}
	buf_free(&b);
out:
	torture_pause(false);
	rules_engine_free(e);
	tsdb_close(db);
	return rc;
}

static void test_rules_recoverable(void **state)
{
	(void)state;
	struct torture_report r;
	time_t t0 = time(NULL);
	assert_int_equal(torture_run("rules", TORTURE_RECOVERABLE, rules_scenario, NULL, 0, &r), 0);
	assert_true(r.points > 100);
	fprintf(stderr, "rules, recoverable allocations: %lld s\n", (long long)(time(NULL) - t0));
}

static void test_rules_all(void **state)
{
	(void)state;
	struct torture_report r;
	time_t t0 = time(NULL);
	/* A child per point: every point (about 1300), or under ASan, whose
	 * forks are dear (its shadow memory), every third. */
#ifdef __SANITIZE_ADDRESS__
	const long max_runs = 450;
#else
	const long max_runs = 0;
#endif
	assert_int_equal(torture_run("rules-all", TORTURE_ALL, rules_scenario, NULL, max_runs, &r), 0);
	assert_true(r.aborted > 0);
	fprintf(stderr, "rules, every allocation: %lld s\n", (long long)(time(NULL) - t0));
}

/* ---- SQLite writes under the engine ---- */

static const char alert_text[] =
	"groups:\n"
	"  - name: hot\n"
	"    interval: 10s\n"
	"    rules:\n"
	"      - record: job:power:max\n"
	"        expr: max(gpulse_gpu_power_watts)\n"
	"      - alert: Hot\n"
	"        expr: gpulse_gpu_power_watts > 20\n"
	"        for: 10s\n";

static int new_engine(struct tsdb *db, struct rules_engine **e)
{
	struct buf errs;
	buf_init(&errs, 1 << 16);
	struct rules_file **files = calloc(1, sizeof *files);
	if (!files) {
		buf_free(&errs);
		return GPULSE_ENOMEM;
	}
	if (rules_file_parse("a.yml", alert_text, strlen(alert_text), &files[0], &errs)) {
		free(files);
		buf_free(&errs);
		return -1;
	}
	buf_free(&errs);
	struct rules_engine_config c = {.db = db, .now_ms = test_now, .eval_delay_ms = -1};
	return rules_engine_new(e, &c, files, 1);
}

/* The alert records as one string of "key json;" (times left out: they
 * are the times of the writes), into out[cap]. */
static void alert_records(struct tsdb *db, char *out, size_t cap)
{
	struct tsdb_record *r = NULL;
	size_t n = 0;
	out[0] = '\0';
	if (tsdb_record_list(db, "alert", INT64_MIN, INT64_MAX, 0, &r, &n) != 0) {
		snprintf(out, cap, "(unreadable)");
		return;
	}
	size_t len = 0;
	for (size_t i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s %s;", r[i].key, r[i].json);
	tsdb_records_free(r, n);
}

/* Samples above 20 W for 55 s, then below; the store committed. Then,
 * with the k-th write, sync or truncate failing (or every one from the
 * k-th on): evaluations at 30 s (pending), 40 s and 50 s (firing,
 * persisted), 70 s and 80 s (resolved), a flush. Then, nothing failing:
 * one more evaluation and flush, the engine freed, the store closed; the
 * file passes integrity_check and opens, and its alert records are the
 * clean run's (a failed write is retried, so what the next start restores
 * is the alerts' true state), and a new engine on it evaluates whole with
 * the clean run's alerts. */
static int rules_io_scenario(long k, bool sticky, long *ops)
{
	torture_store_remove();
	struct tsdb_opts o = {.path = path, .clock = {.now_ms = test_now}};
	struct tsdb *db = NULL;
	struct rules_engine *e = NULL;
	char err[256] = "";
	if (tsdb_open(&db, &o, err, sizeof err) != 0)
		return -1;
	struct label l[] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", "0"}};
	uint32_t ref;
	if (tsdb_series(db, l, 2, &ref, err, sizeof err) != 0)
		return -1;
	for (int64_t t = 500; t < 100000; t += 1000)
		tsdb_append(db, ref, T0 + t, t < 55000 ? 30.0 : 5.0);
	(void)sticky;
	if (tsdb_flush(db) != 0 || new_engine(db, &e) != 0)
		return -1;
	torture_io_arm(k, sticky);
	static const int64_t at[] = {30000, 40000, 50000, 70000, 80000};
	for (size_t i = 0; i < sizeof at / sizeof *at; i++)
		rules_engine_eval_group(e, 0, T0 + at[i]);
	int frc = tsdb_flush(db);
	*ops = torture_io_disarm();
	int bad = 0;
	if (rules_engine_eval_group(e, 0, T0 + 90000) != 0 || tsdb_flush(db) != 0) {
		fprintf(stderr, "write %ld: no recovery once the writes succeed\n", k);
		bad = 1;
	}
	struct rules_alert_stats as;
	rules_engine_alert_stats(e, &as);
	rules_engine_free(e);
	e = NULL;
	tsdb_close(db);
	db = NULL;
	if (frc != 0 && frc != GPULSE_EIO) {
		fprintf(stderr, "write %ld: flush returned %d\n", k, frc);
		bad = 1;
	}
	sqlite3 *s = NULL;
	sqlite3_stmt *q = NULL;
	bool ok = sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
		  sqlite3_prepare_v2(s, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK &&
		  sqlite3_step(q) == SQLITE_ROW &&
		  strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0;
	sqlite3_finalize(q);
	sqlite3_close(s);
	if (!ok) {
		fprintf(stderr, "write %ld: integrity_check failed\n", k);
		return -1;
	}
	if (tsdb_open(&db, &o, err, sizeof err) != 0) {
		fprintf(stderr, "write %ld: the store does not open again: %s\n", k, err);
		return -1;
	}
	static char clean[4096];   /* the clean run's, which comes first */
	char recs[4096];
	alert_records(db, recs, sizeof recs);
	if (k == 0)
		snprintf(clean, sizeof clean, "%s", recs);
	else if (strcmp(recs, clean) != 0) {
		fprintf(stderr, "write %ld: alert records\n  %s\nnot the clean run's\n  %s\n"
			"(%llu persist errors counted)\n", k, recs, clean,
			(unsigned long long)as.persist_errors_total);
		bad = 1;
	}
	if (new_engine(db, &e) != 0 || rules_engine_eval_group(e, 0, T0 + 100000) != 0) {
		fprintf(stderr, "write %ld: the engine does not evaluate after the failure\n", k);
		bad = 1;
	}
	static uint64_t clean_firing, clean_pending;
	rules_engine_alert_stats(e, &as);
	if (k == 0) {
		clean_firing = as.firing;
		clean_pending = as.pending;
	} else if (as.firing != clean_firing || as.pending != clean_pending) {
		fprintf(stderr, "write %ld: after a restart %llu firing, %llu pending; clean: %llu, %llu\n",
			k, (unsigned long long)as.firing, (unsigned long long)as.pending,
			(unsigned long long)clean_firing, (unsigned long long)clean_pending);
		bad = 1;
	}
	rules_engine_free(e);
	tsdb_close(db);
	return bad ? -1 : k > 0 && *ops >= k;
}

static void test_rules_sqlite_writes(void **state)
{
	(void)state;
	assert_int_equal(torture_io_install(), SQLITE_OK);
	for (int sticky = 0; sticky < 2; sticky++) {
		long ops = 0, bad = 0;
		assert_int_equal(rules_io_scenario(0, sticky, &ops), 0);
		assert_true(ops > 3);
		for (long k = 1; k <= ops; k++) {
			long seen;
			bad += rules_io_scenario(k, sticky, &seen) < 0;
		}
		fprintf(stderr, "rules sqlite write torture (%s): %ld points, %ld bad\n",
			sticky ? "every one from k on" : "the k-th alone", ops, bad);
		assert_int_equal(bad, 0);
	}
	torture_io_uninstall();
}

/* ---- a restart: the alerts restored from the store ---- */

static char tmpl[160];   /* a store with a firing alert persisted */

static int copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char b[8192];
	size_t n;
	int rc = in && out ? 0 : -1;
	while (rc == 0 && (n = fread(b, 1, sizeof b, in)) > 0)
		if (fwrite(b, 1, n, out) != n)
			rc = -1;
	if (in)
		fclose(in);
	if (out && fclose(out) != 0)
		rc = -1;
	return rc;
}

/* gpulsed starting again on a store whose alert fires: the engine's first
 * evaluation restores it. With an allocation failing there, the alert
 * must still come back firing (once the failure has passed, at the
 * latest at the next evaluation): a restore given up would start it
 * pending again and notify it anew when `for` ends. */
static int restart_scenario(void *ctx)
{
	(void)ctx;
	torture_pause(true);
	torture_store_remove();
	struct tsdb_opts o = {.path = path, .clock = {.now_ms = test_now}};
	struct tsdb *db = NULL;
	struct rules_engine *e = NULL;
	char err[256] = "";
	int rc = copy_file(tmpl, path) == 0 ? tsdb_open(&db, &o, err, sizeof err) : -1;
	torture_pause(false);
	if (rc != 0)
		return -1;
	if ((rc = new_engine(db, &e)) != 0)
		goto out;
	rules_engine_eval_group(e, 0, T0 + 50000);
	/* Within `for` of that first evaluation: firing only if restored. */
	torture_pause(true);
	rules_engine_eval_group(e, 0, T0 + 55000);
	struct rules_alert_stats as;
	rules_engine_alert_stats(e, &as);
	if (as.firing != 1) {
		fprintf(stderr, "after a restart: %llu firing, %llu pending, %llu restored\n",
			(unsigned long long)as.firing, (unsigned long long)as.pending,
			(unsigned long long)as.restored_total);
		rc = -1;
	}
out:
	torture_pause(false);
	rules_engine_free(e);
	tsdb_close(db);
	return rc;
}

static void test_rules_restart(void **state)
{
	(void)state;
	/* The template: samples above 20 W from 0 to 100 s, the alert firing
	 * at 40 s, persisted; a clean close (the WAL checkpointed away). */
	snprintf(tmpl, sizeof tmpl, "%s/tmpl.db", torture_store_dir);
	struct tsdb_opts o = {.path = tmpl, .clock = {.now_ms = test_now}};
	struct tsdb *db = NULL;
	char err[256] = "";
	assert_int_equal(tsdb_open(&db, &o, err, sizeof err), 0);
	struct label l[] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", "0"}};
	uint32_t ref;
	assert_int_equal(tsdb_series(db, l, 2, &ref, err, sizeof err), 0);
	for (int64_t t = 500; t < 100000; t += 1000)
		tsdb_append(db, ref, T0 + t, 30.0);
	struct rules_engine *e = NULL;
	assert_int_equal(new_engine(db, &e), 0);
	rules_engine_eval_group(e, 0, T0 + 30000);
	rules_engine_eval_group(e, 0, T0 + 40000);
	struct rules_alert_stats as;
	rules_engine_alert_stats(e, &as);
	assert_int_equal(as.firing, 1);
	rules_engine_free(e);
	tsdb_close(db);
	struct torture_report r;
	long bad = torture_run("restart", TORTURE_RECOVERABLE, restart_scenario, NULL, 0, &r);
	unlink(tmpl);
	assert_int_equal(bad, 0);
}

static const char *const exprs[] = {
	"sum by (gpu) (rate(gpulse_gpu_energy_joules_total{gpu=~\"0|1\"}[5m])) > 300",
	"histogram_quantile(0.9, sum by (le) (rate(x_bucket[1m]))) or vector(0)",
	"avg_over_time(up[10m:1m] offset 5m) / on(instance) group_left(job) max(y) unless z",
	"label_replace(a, \"dst\", \"$1\", \"src\", \"(.*)\") * -1 ^ 2 % 3",
};

static int parse_scenario(void *ctx)
{
	(void)ctx;
	for (size_t i = 0; i < sizeof exprs / sizeof *exprs; i++) {
		struct promql_expr *e = NULL;
		char err[256] = "";
		int rc = promql_parse(exprs[i], &e, err, sizeof err);
		/* The regex engine (rx.c) does not abort: its ENOMEM is a
		 * clean error. */
		if (rc == GPULSE_ENOMEM)
			return 1;
		if (rc != 0) {
			fprintf(stderr, "%s: %s\n", exprs[i], err);
			return -1;
		}
		promql_expr_free(e);
	}
	return 0;
}

static void test_promql_parse_all(void **state)
{
	(void)state;
	struct torture_report r;
	assert_int_equal(torture_run("promql-parse", TORTURE_ALL, parse_scenario, NULL, 0, &r), 0);
	assert_true(r.points > 20);
}

int main(void)
{
	if (torture_route_sqlite() != SQLITE_OK) {
		fprintf(stderr, "sqlite3_config(SQLITE_CONFIG_MALLOC) refused\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rules_recoverable, torture_store_setup, torture_store_teardown),
		cmocka_unit_test_setup_teardown(test_rules_all, torture_store_setup, torture_store_teardown),
		cmocka_unit_test(test_promql_parse_all),
		cmocka_unit_test_setup_teardown(test_rules_sqlite_writes, torture_store_setup, torture_store_teardown),
		cmocka_unit_test_setup_teardown(test_rules_restart, torture_store_setup, torture_store_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
