/* Tests for src/rules/: rule files (valid, and the errors promtool's
 * rulefmt gives, with FILE:LINE:COL), unit-test files, recording rules
 * evaluated group by group (chaining within one evaluation, rule labels,
 * staleness when a series disappears), Go's %E value format and a whole
 * test file run end to end. */
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

#include "common/buf.h"
#include "promql/eval.h"
#include "promql/memstore.h"
#include "promql/parser.h"
#include "rules/rules_file.h"
#include "rules/rules_test.h"
#include "rules/rules_util.h"
#include "promql/series.h"
#include "common/status.h"

static int parse_rules(const char *text, struct rules_file **f, struct buf *errs)
{
	buf_init(errs, 1 << 16);
	return rules_file_parse("r.yml", text, strlen(text), f, errs);
}

static void test_rule_file_valid(void **state)
{
	(void)state;
	struct rules_file *f;
	struct buf errs;
	const char *text =
		"groups:\n"
		"  - name: g\n"
		"    interval: 30s\n"
		"    rules:\n"
		"      - record: job:x:sum\n"
		"        expr: sum by (job) (x)\n"
		"        labels: {team: gpu}\n"
		"      - alert: Hot\n"
		"        expr: x > 85\n"
		"        for: 5m\n"
		"        keep_firing_for: 1m\n"
		"        annotations: {summary: \"hot {{ $labels.gpu }}\"}\n"
		"  - name: h\n"
		"    rules: []\n";
	assert_int_equal(parse_rules(text, &f, &errs), 0);
	assert_int_equal(f->ngroups, 2);
	assert_string_equal(f->groups[0].name, "g");
	assert_int_equal(f->groups[0].interval_ms, 30000);
	assert_int_equal(rules_file_count(f), 2);
	assert_string_equal(f->groups[0].rules[0].record, "job:x:sum");
	assert_non_null(f->groups[0].rules[0].expr);
	assert_int_equal(f->groups[0].rules[0].nlabels, 1);
	assert_string_equal(f->groups[0].rules[1].alert, "Hot");
	assert_int_equal(f->groups[0].rules[1].for_ms, 300000);
	assert_int_equal(f->groups[0].rules[1].keep_firing_for_ms, 60000);
	assert_int_equal(f->groups[0].rules[1].nannotations, 1);
	rules_file_free(f);
	buf_free(&errs);

	/* An empty file is valid and has no rules, as for promtool. */
	assert_int_equal(parse_rules("", &f, &errs), 0);
	assert_int_equal(rules_file_count(f), 0);
	rules_file_free(f);
	buf_free(&errs);
}

static void expect_error(const char *text, const char *msg)
{
	struct rules_file *f = (struct rules_file *)1;
	struct buf errs;
	assert_int_not_equal(parse_rules(text, &f, &errs), 0);
	assert_null(f);
	assert_non_null(errs.data);
	if (!strstr(errs.data, msg))
		fail_msg("expected \"%s\" in \"%s\"", msg, errs.data);
	buf_free(&errs);
}

static void test_rule_file_errors(void **state)
{
	(void)state;
	expect_error("groups:\n  - name: g\n    rules:\n      - record: a:b\n        expr: x\n        colour: red\n",
		     "r.yml:6:9: field colour not found in type rulefmt.RuleNode");
	expect_error("groups:\n  - rules:\n      - record: a:b\n        expr: x\n",
		     "r.yml:2:5: Groupname must not be empty");
	expect_error("groups:\n  - name: g\n  - name: g\n", "r.yml:3:5: groupname: \"g\" is repeated in the same file");
	expect_error("groups:\n  - name: g\n    rules:\n      - record: a:b\n        expr: sum(x\n",
		     "r.yml:5:15: group \"g\", rule 1, \"a:b\": could not parse expression: parse error at char");
	expect_error("groups:\n  - name: g\n    rules:\n      - record: a b\n        expr: x\n",
		     "invalid recording rule name: a b");
	expect_error("groups:\n  - name: g\n    rules:\n      - expr: x\n", "one of 'record' or 'alert' must be set");
	expect_error("groups:\n  - name: g\n    rules:\n      - record: a\n        alert: b\n        expr: x\n",
		     "only one of 'record' and 'alert' must be set");
	expect_error("groups:\n  - name: g\n    rules:\n      - record: a\n", "field 'expr' must be set in rule");
	expect_error("groups:\n  - name: g\n    rules:\n      - record: a\n        expr: x\n        for: 1m\n",
		     "invalid field 'for' in recording rule");
	expect_error("groups:\n  - name: g\n    rules:\n      - alert: a\n        expr: x\n        for: soon\n",
		     "not a valid duration string");
	expect_error("groups: [\n", "r.yml:");
	expect_error("groups: &a [*a]\n", "aliases are not supported");
	expect_error("- 1\n", "must be a mapping");
	/* Nesting is bounded. */
	char deep[400];
	memset(deep, '[', 300);
	deep[300] = '\0';
	expect_error(deep, "nested more than");
}

/* Load promtool-notation values every minute from t = 0. */
static void load(struct memstore *ms, const char *series, const char *values)
{
	struct label *l;
	size_t nl, nv;
	struct promql_series_value *v;
	char err[256];
	assert_int_equal(promql_parse_series_labels(series, &l, &nl, err, sizeof err), 0);
	assert_int_equal(promql_parse_series_values(values, &v, &nv, err, sizeof err), 0);
	for (size_t i = 0; i < nv; i++)
		if (!v[i].omitted)
			assert_int_equal(memstore_add(ms, l, nl, (int64_t)i * 60000, v[i].v), 0);
	free(l);
	free(v);
}

/* The value of `expr` at t (one series or a scalar), NAN when empty. */
static double query(struct memstore *ms, const char *expr, int64_t t, size_t *nseries)
{
	struct promql_expr *e;
	struct promql_result *r;
	struct promql_opts o;
	char err[256];
	promql_opts_default(&o);
	assert_int_equal(promql_parse(expr, &e, err, sizeof err), 0);
	assert_int_equal(promql_eval_instant(e, &memstore_queryable, ms, &o, t, &r, err, sizeof err), 0);
	double v = NAN;
	*nseries = r->nseries;
	if (r->type == PROMQL_TYPE_SCALAR)
		v = r->scalar;
	else if (r->nseries)
		v = r->series[0].points[0].v;
	promql_result_free(r);
	promql_expr_free(e);
	return v;
}

static void test_recording_chain(void **state)
{
	(void)state;
	struct rules_file *f;
	struct buf errs;
	const char *text =
		"groups:\n"
		"  - name: g\n"
		"    rules:\n"
		"      - record: job:x:sum\n"
		"        expr: sum by (job) (x)\n"
		"      - record: job:x:double\n"
		"        expr: job:x:sum * 2\n"
		"        labels: {unit: twice, job: \"\"}\n"
		"      - record: total\n"
		"        expr: scalar(sum(x))\n";
	assert_int_equal(parse_rules(text, &f, &errs), 0);
	struct memstore *ms = memstore_new(100, 10000);
	load(ms, "x{job=\"a\", i=\"0\"}", "1 2 stale");
	load(ms, "x{job=\"a\", i=\"1\"}", "3 4 stale");
	struct rules_group_state *st = rules_group_state_new(&f->groups[0]);
	struct promql_opts o;
	promql_opts_default(&o);
	for (int64_t t = 0; t <= 180000; t += 60000)
		assert_int_equal(rules_group_eval(&f->groups[0], st, ms, &o, t, &errs), 0);
	size_t n;
	/* The second rule sees the first's output of the same evaluation. */
	assert_true(query(ms, "job:x:double{unit=\"twice\"}", 0, &n) == 8);
	assert_int_equal(n, 1);
	/* The rule's empty label removed `job`. */
	assert_true(query(ms, "job:x:double{job=\"\"}", 60000, &n) == 12);
	assert_true(query(ms, "job:x:sum{job=\"a\"}", 60000, &n) == 6);
	assert_true(query(ms, "total", 60000, &n) == 6);
	/* Inputs went stale at 2m: the recorded series went stale with them. */
	query(ms, "job:x:sum", 120000, &n);
	assert_int_equal(n, 0);
	query(ms, "job:x:double", 180000, &n);
	assert_int_equal(n, 0);
	rules_group_state_free(st);
	memstore_free(ms);
	rules_file_free(f);
	buf_free(&errs);
}

static void test_recording_errors(void **state)
{
	(void)state;
	struct rules_file *f;
	struct buf errs;
	const char *text =
		"groups:\n"
		"  - name: g\n"
		"    rules:\n"
		"      - record: r\n"
		"        expr: x\n"
		"        labels: {i: same}\n";
	assert_int_equal(parse_rules(text, &f, &errs), 0);
	struct memstore *ms = memstore_new(100, 10000);
	load(ms, "x{i=\"0\"}", "1");
	load(ms, "x{i=\"1\"}", "1");
	struct rules_group_state *st = rules_group_state_new(&f->groups[0]);
	struct promql_opts o;
	promql_opts_default(&o);
	assert_int_not_equal(rules_group_eval(&f->groups[0], st, ms, &o, 0, &errs), 0);
	assert_non_null(strstr(errs.data, "rule: r, time: 0s, err: vector contains metrics with the same labelset"));
	rules_group_state_free(st);
	memstore_free(ms);
	rules_file_free(f);
	buf_free(&errs);
}

static void test_format_e(void **state)
{
	(void)state;
	static const struct {
		double v;
		const char *s;
	} cases[] = {
		{0.3, "3E-01"}, {0.1 + 0.2, "3.0000000000000004E-01"}, {0, "0E+00"}, {1, "1E+00"},
		{16, "1.6E+01"}, {-2.5e-300, "-2.5E-300"}, {1e21, "1E+21"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct buf b;
		buf_init(&b, 64);
		rules_format_e(&b, cases[i].v);
		assert_string_equal(b.data, cases[i].s);
		buf_free(&b);
	}
	struct buf b;
	buf_init(&b, 64);
	rules_format_e(&b, NAN);
	rules_format_e(&b, INFINITY);
	rules_format_e(&b, -INFINITY);
	assert_string_equal(b.data, "NaN+Inf-Inf");
	buf_free(&b);
}

static void test_test_file_parse(void **state)
{
	(void)state;
	struct rules_test_file *f;
	struct buf errs;
	buf_init(&errs, 1 << 16);
	const char *text =
		"rule_files: [a.yml, b.yml]\n"
		"evaluation_interval: 30s\n"
		"group_eval_order: [x, y]\n"
		"tests:\n"
		"  - interval: 15s\n"
		"    input_series:\n"
		"      - series: 'up{job=\"a\"}'\n"
		"        values: '1+1x3 _ stale'\n"
		"    promql_expr_test:\n"
		"      - expr: up\n"
		"        eval_time: 1m30s\n"
		"        exp_samples:\n"
		"          - labels: 'up{job=\"a\"}'\n"
		"            value: .nan\n"
		"          - value: -1.5e3\n"
		"    alert_rule_test:\n"
		"      - eval_time: 1m\n";
	assert_int_equal(rules_test_parse("t.yml", text, strlen(text), &f, &errs), 0);
	assert_int_equal(f->nrule_files, 2);
	assert_int_equal(f->eval_interval_ms, 30000);
	assert_int_equal(f->ngroup_order, 2);
	assert_int_equal(f->ntests, 1);
	assert_int_equal(f->tests[0].interval_ms, 15000);
	assert_int_equal(f->tests[0].ninputs, 1);
	assert_int_equal(f->tests[0].nexprs, 1);
	assert_int_equal(f->tests[0].exprs[0].eval_time_ms, 90000);
	assert_int_equal(f->tests[0].exprs[0].nexp, 2);
	assert_true(isnan(f->tests[0].exprs[0].exp[0].value));
	assert_true(f->tests[0].exprs[0].exp[1].value == -1500);
	assert_int_equal(f->tests[0].nalerts, 1);
	rules_test_file_free(f);

	/* promtool (Go's yaml.v2) refuses "NaN" as a float and unknown fields. */
	static const char *const bad[] = {
		"tests:\n  - promql_expr_test:\n      - expr: x\n        exp_samples:\n          - value: NaN\n",
		"tests:\n  - intervals: 1m\n",
		"evaluation_interval: 1 minute\n",
		"tests: {a: 1}\n",
	};
	static const char *const where[] = {"t.yml:5:20: value", "t.yml:2:5: field intervals",
					    "t.yml:1:22:", "t.yml:1:8:"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		buf_reset(&errs);
		assert_int_not_equal(rules_test_parse("t.yml", bad[i], strlen(bad[i]), &f, &errs), 0);
		if (!strstr(errs.data, where[i]))
			fail_msg("expected \"%s\" in \"%s\"", where[i], errs.data);
	}
	buf_free(&errs);
}

/* A whole file: rules written to a temporary folder and run. */
static int run_text(const char *rules, const char *test, char *out, size_t outlen)
{
	char dir[] = "/tmp/gpulse-rules-ut.XXXXXX";
	assert_non_null(mkdtemp(dir));
	char rp[64], tp[64];
	snprintf(rp, sizeof rp, "%s/r.yml", dir);
	snprintf(tp, sizeof tp, "%s/t.yml", dir);
	FILE *f = fopen(rp, "w");
	fputs(rules, f);
	fclose(f);
	f = fopen(tp, "w");
	fputs(test, f);
	fclose(f);
	FILE *o = fmemopen(out, outlen, "w");
	int rc = rules_test_run_file(tp, o);
	fclose(o);
	unlink(rp);
	unlink(tp);
	rmdir(dir);
	return rc;
}

static void test_run_file(void **state)
{
	(void)state;
	char out[4096];
	const char *rules = "groups:\n  - name: g\n    rules:\n      - record: s\n        expr: sum(x)\n";
	const char *ok =
		"rule_files: [r.yml]\n"
		"tests:\n"
		"  - interval: 1m\n"
		"    input_series:\n"
		"      - series: 'x{i=\"0\"}'\n"
		"        values: '0.1 1'\n"
		"      - series: 'x{i=\"1\"}'\n"
		"        values: '0.2 2'\n"
		"    promql_expr_test:\n"
		"      - expr: s\n"
		"        eval_time: 0s\n"
		"        exp_samples:\n"
		"          - labels: s\n"
		"            value: 0.30000000000000004\n"
		"      - expr: s\n"
		"        eval_time: 1m\n"
		"        exp_samples:\n"
		"          - labels: s\n"
		"            value: 3\n";
	assert_int_equal(run_text(rules, ok, out, sizeof out), 0);
	assert_non_null(strstr(out, "  SUCCESS\n"));

	const char *wrong =
		"rule_files: [r.yml]\n"
		"tests:\n"
		"  - interval: 1m\n"
		"    input_series:\n"
		"      - series: 'x{i=\"0\"}'\n"
		"        values: '0.1'\n"
		"      - series: 'x{i=\"1\"}'\n"
		"        values: '0.2'\n"
		"    promql_expr_test:\n"
		"      - expr: s\n"
		"        eval_time: 1m\n"
		"        exp_samples:\n"
		"          - labels: s\n"
		"            value: 0.3\n"
		"      - expr: x\n"
		"        eval_time: 1m\n";
	assert_int_equal(run_text(rules, wrong, out, sizeof out), GPULSE_EINVAL);
	assert_non_null(strstr(out, "    expr: \"s\", time: 1m,\n"
				    "        exp: {__name__=\"s\"} 3E-01\n"
				    "        got: {__name__=\"s\"} 3.0000000000000004E-01\n"));
	assert_non_null(strstr(out, "        exp: nil\n"
				    "        got: {__name__=\"x\", i=\"0\"} 1E-01, {__name__=\"x\", i=\"1\"} 2E-01\n"));

	/* An alert test: no rule defines the alert, so the expected one is
	 * missing, reported as promtool reports it. */
	const char *alerts = "rule_files: [r.yml]\ntests:\n  - alert_rule_test:\n      - eval_time: 1m\n"
			     "        alertname: Nope\n        exp_alerts:\n          - exp_labels: {a: b}\n";
	assert_int_equal(run_text(rules, alerts, out, sizeof out), GPULSE_EINVAL);
	assert_non_null(strstr(out, "    alertname: Nope, time: 1m, \n        exp:[\n"
				    "            0:\n              Labels:{a=\"b\", alertname=\"Nope\"}\n"));
	assert_non_null(strstr(out, "        got:[]\n"));

	const char *missing = "rule_files: [nope.yml]\ntests: []\n";
	assert_int_not_equal(run_text(rules, missing, out, sizeof out), 0);
	assert_non_null(strstr(out, "nope.yml"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule_file_valid),
		cmocka_unit_test(test_rule_file_errors),
		cmocka_unit_test(test_recording_chain),
		cmocka_unit_test(test_recording_errors),
		cmocka_unit_test(test_format_e),
		cmocka_unit_test(test_test_file_parse),
		cmocka_unit_test(test_run_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
