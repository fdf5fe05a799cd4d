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

#include "buf.h"
#include "engine.h"
#include "parser.h"
#include "status.h"
#include "torture.h"
#include "tsdb.h"

#define T0 1795965289000LL

static char dir[80];
static char path[128];

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

static void remove_store(void)
{
	char p[160];
	static const char *const sfx[] = {"", "-wal", "-shm", "-journal", ".lock"};
	for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
		snprintf(p, sizeof p, "%s%s", path, sfx[i]);
		unlink(p);
	}
}

static int setup(void **state)
{
	(void)state;
	/* Thousands of stores are made and removed: in memory where there
	 * is a tmpfs, as fsync there costs nothing. */
	strcpy(dir, access("/dev/shm", W_OK) == 0 ? "/dev/shm/gpulse-torturerXXXXXX"
						     : "/tmp/gpulse-torturerXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/store.db", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	remove_store();
	rmdir(dir);
	return 0;
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
	remove_store();
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
		struct tsdb_label l[] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", gpu}};
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
	static const struct promql_label ext[] = {{"site", "lab"}};
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
	rc = rules_engine_write_json(e, &b);
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
		rules_engine_write_json(e, &b);
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
	rc = rules_engine_write_json(e, &b);
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
		cmocka_unit_test_setup_teardown(test_rules_recoverable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rules_all, setup, teardown),
		cmocka_unit_test(test_promql_parse_all),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
