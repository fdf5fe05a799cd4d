/* The rules' in-memory history without a store (src/daemon/livestore.h):
 * exposition lines become series (escapes, empty labels, comments, bad
 * lines), only the metric names the rules read are kept, a series a
 * scrape lacks ends with a staleness marker, history is cut at the reach
 * of the rules; and the rule engine without a store runs alerting rules
 * over it while a recording rule fails. Fixed times: nothing depends on
 * the clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/engine.h"
#include "daemon/livestore.h"
#include "promql/parser.h"
#include "promql/queryable.h"
#include "common/status.h"

static int no_render(void *ctx, struct buf *out)
{
	(void)ctx;
	(void)out;
	return GPULSE_EIO;
}

static struct livestore *new_store(void)
{
	struct livestore *ls = NULL;
	struct livestore_opts o = {.interval_ms = 1000};
	assert_int_equal(livestore_create(&ls, &o, no_render, NULL), 0);
	return ls;
}

static struct promql_expr *parse(const char *text)
{
	struct promql_expr *e = NULL;
	char err[256] = "";
	if (promql_parse(text, &e, err, sizeof err) != 0)
		fail_msg("%s: %s", text, err);
	return e;
}

static void follow(struct livestore *ls, const char *expr)
{
	struct promql_expr *e = parse(expr);
	const struct promql_expr *v[1] = {e};
	livestore_set_queries(ls, v, 1);
	promql_expr_free(e);
}

static void put(struct livestore *ls, const char *text, int64_t t_ms)
{
	livestore_ingest(ls, text, strlen(text), t_ms);
}

/* The result of `expr` at t_ms: how many series, the first one's value. */
static size_t query(struct livestore *ls, const char *expr, int64_t t_ms, double *v)
{
	struct promql_expr *e = parse(expr);
	struct promql_opts o;
	promql_opts_default(&o);
	struct promql_result *r = NULL;
	char err[256] = "";
	if (promql_eval_instant(e, &livestore_queryable, ls, &o, t_ms, &r, err, sizeof err) != 0)
		fail_msg("%s: %s", expr, err);
	size_t n = r->nseries;
	if (v)
		*v = n ? r->series[0].points[0].v : NAN;
	promql_result_free(r);
	promql_expr_free(e);
	return n;
}

static const char scrape[] =
	"# HELP gpulse_gpu_power_watts Power.\n"
	"# TYPE gpulse_gpu_power_watts gauge\n"
	"gpulse_gpu_power_watts{gpu=\"0\",uuid=\"GPU-a\",model=\"H200 \\\"x\\\" \\\\ y\"} 100\n"
	"gpulse_gpu_power_watts{gpu=\"1\",uuid=\"GPU-b\",pci_bus_id=\"\"} 200.5\n"
	"gpulse_gpu_up{gpu=\"0\"} 1\n"
	"gpulse_self_uptime_seconds 12\n"
	"\n"
	"this is { not a sample\n";

static void test_series_and_names(void **state)
{
	(void)state;
	struct livestore *ls = new_store();
	follow(ls, "gpulse_gpu_power_watts > 0");
	put(ls, scrape, 10000);
	struct livestore_stats st;
	livestore_get_stats(ls, &st);
	assert_int_equal(st.series, 2); /* only the name the rule reads */
	assert_int_equal(st.samples, 2);
	assert_int_equal(st.bad_lines_total, 1);

	/* Labels as written, escapes undone, an empty value no label. */
	struct promql_matcher m = {.op = PROMQL_MATCH_EQ, .name = "gpu", .value = "1"};
	struct promql_series_set set;
	char err[64];
	assert_int_equal(livestore_queryable.select(ls, &m, 1, 0, 20000, &set, err, sizeof err), 0);
	assert_int_equal(set.nseries, 1);
	assert_int_equal(set.series[0].nlabels, 3);
	assert_string_equal(set.series[0].labels[0].name, "__name__");
	assert_string_equal(set.series[0].labels[1].name, "gpu");
	assert_string_equal(set.series[0].labels[2].name, "uuid");
	assert_int_equal(set.series[0].nsamples, 1);
	assert_true(set.series[0].samples[0].t_ms == 10000 && set.series[0].samples[0].v == 200.5);
	livestore_queryable.release(ls, &set);
	m.value = "0";
	assert_int_equal(livestore_queryable.select(ls, &m, 1, 0, 20000, &set, err, sizeof err), 0);
	assert_int_equal(set.nseries, 1);
	assert_string_equal(set.series[0].labels[2].name, "model");
	assert_string_equal(set.series[0].labels[2].value, "H200 \"x\" \\ y");
	livestore_queryable.release(ls, &set);

	double v;
	assert_int_equal(query(ls, "gpulse_gpu_up", 10500, NULL), 0); /* not kept */
	assert_int_equal(query(ls, "sum(gpulse_gpu_power_watts)", 10500, &v), 1);
	assert_true(v == 300.5);

	/* A selector without a metric name keeps every series. */
	follow(ls, "{gpu=\"0\"}");
	put(ls, scrape, 11000);
	assert_int_equal(query(ls, "gpulse_gpu_up", 11500, &v), 1);
	assert_true(v == 1);
	livestore_get_stats(ls, &st);
	assert_int_equal(st.series, 4);
	livestore_destroy(ls);
}

static void test_staleness_and_window(void **state)
{
	(void)state;
	struct livestore *ls = new_store();
	follow(ls, "avg_over_time(gpulse_gpu_power_watts[10s])");
	struct livestore_stats st;
	livestore_get_stats(ls, &st);
	assert_int_equal(st.window_ms, 12000); /* the range and two scrapes */
	char line[128];
	for (int64_t t = 1000; t <= 30000; t += 1000) {
		snprintf(line, sizeof line, "gpulse_gpu_power_watts{gpu=\"0\"} %lld\n", (long long)(t / 1000));
		put(ls, line, t);
	}
	/* Samples at 18 s .. 30 s are held, no older. */
	livestore_get_stats(ls, &st);
	assert_int_equal(st.samples, 13);
	double v;
	assert_int_equal(query(ls, "avg_over_time(gpulse_gpu_power_watts[10s])", 30000, &v), 1);
	assert_true(fabs(v - 25) < 1e-9); /* [20 s, 30 s] as Prometheus 2.x reads it: mean 25 */
	put(ls, line, 30000);                /* not after the last: ignored */

	/* A scrape without the series ends it: the instant selector sees
	 * nothing at once, not after the lookback. */
	put(ls, "gpulse_gpu_up{gpu=\"0\"} 1\n", 31000);
	assert_int_equal(query(ls, "gpulse_gpu_power_watts", 30500, NULL), 1);
	assert_int_equal(query(ls, "gpulse_gpu_power_watts", 31000, NULL), 0);
	/* ... and the series goes once its samples are out of the window. */
	put(ls, "", 60000);
	livestore_get_stats(ls, &st);
	assert_int_equal(st.series, 0);
	assert_int_equal(st.samples, 0);
	livestore_destroy(ls);
}

static void test_reach(void **state)
{
	(void)state;
	const struct {
		const char *expr;
		int64_t reach_ms;
	} cases[] = {
		{"up", 2000},
		{"up offset 1m", 62000},
		{"rate(x[5m] offset 1m) > on(gpu) up", 362000},
		{"max_over_time(rate(x[1m])[10m:1m])", 600000 + 62000},
		{"sum by (gpu) (histogram_quantile(0.9, rate(h[30s])))", 32000},
		{"vector(1)", 0},
		{"up @ 100", INT64_MAX},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct promql_expr *e = parse(cases[i].expr);
		int64_t r = livestore_reach_ms(e, 1000);
		if (r != cases[i].reach_ms)
			fail_msg("%s: reach %lld, want %lld", cases[i].expr, (long long)r,
				 (long long)cases[i].reach_ms);
		promql_expr_free(e);
	}
	/* The window is capped. */
	struct livestore *ls = new_store();
	follow(ls, "avg_over_time(x[1d])");
	struct livestore_stats st;
	livestore_get_stats(ls, &st);
	assert_int_equal(st.window_ms, LIVESTORE_MAX_WINDOW_MS);
	livestore_destroy(ls);
}

/* The engine without a store: its alerting rules read the live history
 * and fire; a recording rule fails, naming why. */
static void test_engine_without_store(void **state)
{
	(void)state;
	static const char rules_text[] =
		"groups:\n"
		"  - name: g\n"
		"    interval: 1s\n"
		"    rules:\n"
		"      - alert: PowerHigh\n"
		"        expr: avg_over_time(gpulse_gpu_power_watts[5s]) > 120\n"
		"      - record: r\n"
		"        expr: gpulse_gpu_power_watts\n";
	struct livestore *ls = new_store();
	struct buf errs;
	buf_init(&errs, 1 << 16);
	struct rules_file **files = calloc(1, sizeof *files);
	assert_non_null(files);
	assert_int_equal(rules_file_parse("t.yml", rules_text, strlen(rules_text), &files[0], &errs), 0);
	buf_free(&errs);
	const struct promql_expr *exprs[2] = {files[0]->groups[0].rules[0].expr,
					      files[0]->groups[0].rules[1].expr};
	livestore_set_queries(ls, exprs, 2);
	struct rules_engine_config c = {.db = NULL, .queryable = &livestore_queryable,
					.queryable_ctx = ls};
	struct rules_engine *e = NULL;
	assert_int_equal(rules_engine_new(&e, &c, files, 1), 0);
	char line[128];
	for (int64_t t = 1000; t <= 10000; t += 1000) {
		snprintf(line, sizeof line, "gpulse_gpu_power_watts{gpu=\"0\"} %d\n", t <= 5000 ? 100 : 200);
		put(ls, line, t);
	}
	/* At 8 s, [3 s, 8 s] holds three 100s and three 200s: mean 150. */
	assert_int_equal(rules_engine_eval_group(e, 0, 8000), GPULSE_ESTATE);
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(rules_engine_write_alerts_json(e, &b), 0);
	assert_non_null(strstr(b.data, "\"alertname\":\"PowerHigh\""));
	assert_non_null(strstr(b.data, "\"state\":\"firing\""));
	buf_reset(&b);
	assert_int_equal(rules_engine_write_json(e, NULL, &b), 0);
	assert_non_null(strstr(b.data, "a recording rule needs a store"));
	buf_free(&b);
	struct rules_alert_stats as;
	rules_engine_alert_stats(e, &as);
	assert_int_equal(as.firing, 1);
	rules_engine_free(e);
	livestore_destroy(ls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_series_and_names),
		cmocka_unit_test(test_staleness_and_window),
		cmocka_unit_test(test_reach),
		cmocka_unit_test(test_engine_without_store),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
