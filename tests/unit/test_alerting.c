/* Alerting: Go templates with Prometheus's functions (outputs taken from
 * Prometheus's own template tests), the alert state machine (for,
 * keep_firing_for, resolved retention, flap holding), and the engine over
 * a real store: ALERTS series, notices to the sink with Prometheus's
 * resend and endsAt rules, persistence across a restart, the API JSON. */
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

#include "rules/alert_state.h"
#include "rules/engine.h"
#include "promql/parser.h"
#include "rules/rules_util.h"
#include "common/status.h"
#include "rules/template.h"
#include "store/tsdb.h"
#include "promql/tsdb_queryable.h"

/* ---- templates --------------------------------------------------------- */

static const struct label sample_labels[] = {
	{"__name__", "gpu_temp_celsius"}, {"gpu", "3"}, {"job", "node"}};

/* Expand `text` with $value = v; the result is static until the next call. */
static const char *expand(const char *text, double v)
{
	static char out[4096];
	struct tmpl *t = NULL;
	char err[512] = "";
	int rc = tmpl_parse("__alert_T", text, &t, err, sizeof err);
	if (rc) {
		snprintf(out, sizeof out, "PARSE: %s", err);
		return out;
	}
	struct label ext[] = {{"site", "lab"}};
	struct tmpl_data d = {.labels = sample_labels, .nlabels = 3, .ext_labels = ext, .next_labels = 1,
			      .external_url = "http://x:9090", .value = v};
	struct buf b;
	buf_init(&b, TMPL_MAX_OUTPUT + 1024);
	tmpl_expand(t, &d, &b);
	snprintf(out, sizeof out, "%s", b.data ? b.data : "");
	buf_free(&b);
	tmpl_free(t);
	return out;
}

/* The expected strings are Prometheus's (template/template_test.go). */
static void test_humanize(void **state)
{
	(void)state;
	assert_string_equal(expand("{{ humanize 0 }}", 0), "0");
	assert_string_equal(expand("{{ humanize 1234567.0 }}", 0), "1.235M");
	assert_string_equal(expand("{{ humanize 12345 }}", 0), "12.35k");
	assert_string_equal(expand("{{ humanize 0.012345 }}", 0), "12.35m");
	assert_string_equal(expand("{{ humanize 0.00012 }}", 0), "120u");
	assert_string_equal(expand("{{ humanize \"1234567\" }}", 0), "1.235M");
	assert_string_equal(expand("{{ humanize1024 1048576 }}", 0), "1Mi");
	assert_string_equal(expand("{{ humanize1024 1234567 }}", 0), "1.177Mi");
	assert_string_equal(expand("{{ humanize1024 512 }}", 0), "512");
	assert_string_equal(expand("{{ humanizeDuration 0 }}", 0), "0s");
	assert_string_equal(expand("{{ humanizeDuration 0.1 }}", 0), "100ms");
	assert_string_equal(expand("{{ humanizeDuration 0.0001 }}", 0), "100us");
	assert_string_equal(expand("{{ humanizeDuration 1 }}", 0), "1s");
	assert_string_equal(expand("{{ humanizeDuration 60 }}", 0), "1m 0s");
	assert_string_equal(expand("{{ humanizeDuration 3600 }}", 0), "1h 0m 0s");
	assert_string_equal(expand("{{ humanizeDuration 86400 }}", 0), "1d 0h 0m 0s");
	assert_string_equal(expand("{{ humanizeDuration 90061 }}", 0), "1d 1h 1m 1s");
	assert_string_equal(expand("{{ humanizeDuration -3725 }}", 0), "-1h 2m 5s");
	assert_string_equal(expand("{{ humanizePercentage 0.1234567 }}", 0), "12.35%");
	assert_string_equal(expand("{{ humanizePercentage 1 }}", 0), "100%");
	assert_string_equal(expand("{{ humanizeTimestamp 1435065584.128 }}", 0),
			    "2015-06-23 13:19:44.128 +0000 UTC");
	assert_string_equal(expand("{{ humanize $value }}", NAN), "NaN");
	assert_string_equal(expand("{{ humanize $value }}", INFINITY), "+Inf");
	/* $value prints as Go's %v: exponent form from 1e6 on. */
	assert_string_equal(expand("{{ $value }}", 90), "90");
	assert_string_equal(expand("{{ $value }}", 0.5), "0.5");
	assert_string_equal(expand("{{ $value }}", 1234567), "1.234567e+06");
	assert_string_equal(expand("{{ $value }}", 0.00001), "1e-05");
	assert_string_equal(expand("{{ $value }}", 123456), "123456");
}

static void test_template_forms(void **state)
{
	(void)state;
	assert_string_equal(expand("GPU {{ $labels.gpu }} of {{ .Labels.job }} at {{ .Value }}", 91.5),
			    "GPU 3 of node at 91.5");
	assert_string_equal(expand("[{{ $labels.missing }}]", 0), "[]");
	assert_string_equal(expand("{{ $externalLabels.site }} {{ $externalURL }}", 0), "lab http://x:9090");
	assert_string_equal(expand("{{ printf \"%.2f\" $value }}", 0.915), "0.92");
	assert_string_equal(expand("{{ $value | printf \"%.1f%%\" }}", 12.34), "12.3%");
	assert_string_equal(expand("{{ $labels.job | toUpper }}/{{ toLower \"AbC\" }}", 0), "NODE/abc");
	assert_string_equal(expand("{{ $labels.gpu | printf \"gpu%s\" }}", 0), "gpu3");
	assert_string_equal(expand("{{ if gt $value 90.0 }}hot{{ else if gt $value 80.0 }}warm{{ else }}ok{{ end }}", 85),
			    "warm");
	assert_string_equal(expand("{{ if eq $labels.gpu \"3\" }}three{{ end }}", 0), "three");
	assert_string_equal(expand("{{ if and (gt $value 1.0) (lt $value 10.0) }}mid{{ end }}", 5), "mid");
	assert_string_equal(expand("{{ $g := $labels.gpu }}{{ with $g }}<{{ . }}>{{ end }}", 0), "<3>");
	assert_string_equal(expand("a {{- \" b \" -}} c", 0), "a b c");
	assert_string_equal(expand("x{{/* a comment */}}y", 0), "xy");
	assert_string_equal(expand("{{ printf \"%d|%5s|%-4d|%q\" 7 \"ab\" 3 \"q\" }}", 0), "7|   ab|3   |\"q\"");
	assert_string_equal(expand("{{ printf \"%d\" $value }}", 2.5), "%!d(float64=2.5)");
	assert_string_equal(expand("{{ reReplaceAll \"(.*):(.*)\" \"$2\" \"host:9100\" }}", 0), "9100");
	assert_string_equal(expand("{{ title \"gpu memory\" }} {{ len \"abc\" }} {{ index $labels \"job\" }}", 0),
			    "Gpu Memory 3 node");
	assert_string_equal(expand("{{ range $k, $v := $labels }}{{ $k }}={{ $v }};{{ end }}", 0),
			    "__name__=gpu_temp_celsius;gpu=3;job=node;");
	assert_string_equal(expand("{{ range $labels.none }}x{{ else }}empty{{ end }}", 0),
			    "<error expanding template: error executing template __alert_T: template: "
			    "__alert_T:1:128: executing \"__alert_T\" at <$labels.none>: range can't iterate over >");
	assert_string_equal(expand("{{ range $externalLabels }}<{{ . }}>{{ end }}", 0), "<lab>");
	/* Go's comparisons: gt is "not le", so NaN > x is true. */
	assert_string_equal(expand("{{ gt $value 1.0 }} {{ lt $value 1.0 }}", NAN), "true false");
	/* Comparing a float with an integer is Go's execution error, shown
	 * in place of the text as Prometheus shows it. */
	const char *e = expand("{{ if gt $value 100 }}big{{ end }}", 1);
	assert_non_null(strstr(e, "<error expanding template: error executing template __alert_T: "
				  "template: __alert_T:1:118: executing \"__alert_T\" at <gt $value 100>: "
				  "error calling gt: incompatible types for comparison>"));
}

static void test_template_errors(void **state)
{
	(void)state;
	assert_string_equal(expand("{{ $value ", 0), "PARSE: template: __alert_T:1: unclosed action");
	assert_string_equal(expand("{{ nosuch $value }}", 0),
			    "PARSE: template: __alert_T:1: function \"nosuch\" not defined");
	assert_string_equal(expand("{{ $x }}", 0), "PARSE: template: __alert_T:1: undefined variable \"$x\"");
	assert_string_equal(expand("a\n{{ if true }}x", 0), "PARSE: template: __alert_T:2: unexpected EOF");
	assert_string_equal(expand("{{ end }}", 0), "PARSE: template: __alert_T:1: unexpected {{end}}");
	assert_non_null(strstr(expand("{{ query \"up\" }}", 0), "not supported by gpulse"));
	assert_non_null(strstr(expand("{{ template \"x\" }}", 0), "not supported by gpulse"));
	assert_string_equal(expand("{{ $labels.job | 3 }}", 0),
			    "PARSE: template: __alert_T:1: non executable command in pipeline stage 2");
	/* Bounds: nesting and size are refused, not recursed into. */
	char deep[4096] = "";
	for (int i = 0; i < TMPL_MAX_DEPTH + 2; i++)
		strcat(deep, "{{ if true }}");
	assert_non_null(strstr(expand(deep, 0), "levels of nesting"));
	char *big = malloc(TMPL_MAX_TEXT + 16);
	assert_non_null(big);
	memset(big, 'a', TMPL_MAX_TEXT + 8);
	memcpy(big, "{{ 1 }}", 7);
	big[TMPL_MAX_TEXT + 8] = '\0';
	struct tmpl *t = NULL;
	char err[256];
	assert_int_equal(tmpl_parse("x", big, &t, err, sizeof err), GPULSE_ELIMIT);
	free(big);
}

/* ---- the state machine -------------------------------------------------- */

static struct rules_file *parse_rules(const char *text)
{
	struct buf errs;
	buf_init(&errs, 1 << 16);
	struct rules_file *f = NULL;
	int rc = rules_file_parse("a.yml", text, strlen(text), &f, &errs);
	if (rc)
		fprintf(stderr, "%s", errs.data);
	assert_int_equal(rc, 0);
	buf_free(&errs);
	return f;
}

/* A vector result of one series {gpu="0"} = v, or empty when v is NAN. */
static void eval_at(struct alert_rule_state *s, const struct rules_rule *r, double v, int64_t t,
		    const struct alert_opts *o)
{
	static const struct label l[] = {{"__name__", "temp"}, {"gpu", "0"}};
	struct promql_sample pt = {t, v};
	struct promql_result_series rs = {l, 2, &pt, 1};
	struct promql_result res = {.type = PROMQL_TYPE_VECTOR, .series = &rs, .nseries = isnan(v) ? 0 : 1};
	char err[256];
	assert_int_equal(alert_rule_eval(s, r, &res, t, o, err, sizeof err), 0);
}

static const char sm_rules[] =
	"groups:\n"
	"  - name: g\n"
	"    rules:\n"
	"      - alert: Hot\n"
	"        expr: temp > 85\n"
	"        for: 2m\n"
	"        labels: {severity: '{{ if gt $value 95.0 }}critical{{ else }}warning{{ end }}'}\n"
	"        annotations: {summary: 'GPU {{ $labels.gpu }} at {{ $value }}'}\n"
	"      - alert: Xid\n"
	"        expr: temp > 85\n"
	"        keep_firing_for: 3m\n";

static void test_for_and_resolve(void **state)
{
	(void)state;
	struct rules_file *f = parse_rules(sm_rules);
	const struct rules_rule *r = &f->groups[0].rules[0];
	struct alert_rule_state s = {0};
	struct alert_opts o = {0};
	const int64_t m = 60000;
	eval_at(&s, r, 90, 0, &o);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.alerts[0].state, ALERT_PENDING);
	assert_int_equal(s.alerts[0].active_at_ms, 0);
	/* Labels: the series' without __name__, the templated rule label,
	 * alertname; sorted. */
	assert_int_equal(s.alerts[0].nlabels, 3);
	assert_string_equal(s.alerts[0].labels[0].name, "alertname");
	assert_string_equal(s.alerts[0].labels[0].value, "Hot");
	assert_string_equal(s.alerts[0].labels[2].value, "warning");
	assert_string_equal(s.alerts[0].annotations[0].value, "GPU 0 at 90");
	eval_at(&s, r, 91, 1 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_PENDING);
	assert_string_equal(s.alerts[0].annotations[0].value, "GPU 0 at 91");
	eval_at(&s, r, 92, 2 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING);
	assert_int_equal(s.alerts[0].fired_at_ms, 2 * m);
	assert_int_equal(s.alerts[0].active_at_ms, 0);
	/* Gone: resolved and kept for 15 minutes, then dropped. */
	eval_at(&s, r, NAN, 3 * m, &o);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.alerts[0].state, ALERT_INACTIVE);
	assert_int_equal(s.alerts[0].resolved_at_ms, 3 * m);
	eval_at(&s, r, NAN, 3 * m + ALERT_RESOLVED_RETENTION_MS, &o);
	assert_int_equal(s.n, 1);
	eval_at(&s, r, NAN, 3 * m + ALERT_RESOLVED_RETENTION_MS + 1, &o);
	assert_int_equal(s.n, 0);
	/* A pending alert that goes away is dropped at once. */
	eval_at(&s, r, 99, 30 * m, &o);
	assert_string_equal(s.alerts[0].labels[2].value, "critical");
	eval_at(&s, r, NAN, 31 * m, &o);
	assert_int_equal(s.n, 0);
	/* Back after resolving: a new alert, pending again. */
	eval_at(&s, r, 90, 40 * m, &o);
	eval_at(&s, r, 90, 42 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING);
	eval_at(&s, r, NAN, 43 * m, &o);
	eval_at(&s, r, 90, 44 * m, &o);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.alerts[0].state, ALERT_PENDING);
	assert_int_equal(s.alerts[0].active_at_ms, 44 * m);
	assert_int_equal(s.alerts[0].resolved_at_ms, 0);
	alert_rule_state_clear(&s);
	rules_file_free(f);
}

static void test_keep_firing_for(void **state)
{
	(void)state;
	struct rules_file *f = parse_rules(sm_rules);
	const struct rules_rule *r = &f->groups[0].rules[1];
	struct alert_rule_state s = {0};
	struct alert_opts o = {0};
	const int64_t m = 60000;
	eval_at(&s, r, 90, 0, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING); /* no `for` */
	eval_at(&s, r, NAN, 1 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING);
	assert_int_equal(s.alerts[0].keep_firing_since_ms, 1 * m);
	eval_at(&s, r, NAN, 3 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING);
	assert_true(s.alerts[0].value == 90); /* the last value is kept */
	eval_at(&s, r, NAN, 4 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_INACTIVE);
	assert_int_equal(s.alerts[0].resolved_at_ms, 4 * m);
	alert_rule_state_clear(&s);
	rules_file_free(f);
}

static void test_duplicate_labelset(void **state)
{
	(void)state;
	struct rules_file *f = parse_rules(
		"groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: x\n        labels: {gpu: same}\n");
	const struct rules_rule *r = &f->groups[0].rules[0];
	static const struct label l0[] = {{"gpu", "0"}}, l1[] = {{"gpu", "1"}};
	struct promql_sample pt = {0, 1};
	struct promql_result_series rs[2] = {{l0, 1, &pt, 1}, {l1, 1, &pt, 1}};
	struct promql_result res = {.type = PROMQL_TYPE_VECTOR, .series = rs, .nseries = 2};
	struct alert_rule_state s = {0};
	struct alert_opts o = {0};
	char err[256] = "";
	assert_int_equal(alert_rule_eval(&s, r, &res, 0, &o, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "same labelset after applying alert labels"));
	assert_int_equal(s.n, 0);
	rules_file_free(f);
}

/* An alert that flaps more than N times within the window is held
 * firing until its condition has been stable for the window. */
static void test_flap_holding(void **state)
{
	(void)state;
	struct rules_file *f = parse_rules(sm_rules);
	const struct rules_rule *r = &f->groups[0].rules[1]; /* Xid: no for */
	struct rules_rule nokeep = *r;
	nokeep.keep_firing_for_ms = 0;
	struct alert_rule_state s = {0};
	struct alert_opts o = {.flap_max_toggles = 3, .flap_window_ms = 10 * 60000};
	const int64_t m = 60000;
	/* fire (1), resolve (2), fire (3): not held yet */
	eval_at(&s, &nokeep, 90, 0, &o);
	eval_at(&s, &nokeep, NAN, 1 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_INACTIVE);
	eval_at(&s, &nokeep, 90, 2 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING);
	assert_int_equal(s.flaps_held_total, 0);
	/* The next resolve would be the 4th toggle: held firing. */
	eval_at(&s, &nokeep, NAN, 3 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING);
	assert_true(s.alerts[0].held);
	assert_int_equal(s.flaps_held_total, 1);
	/* It keeps toggling: still held, counted once. */
	eval_at(&s, &nokeep, 90, 4 * m, &o);
	eval_at(&s, &nokeep, NAN, 5 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING);
	assert_int_equal(s.flaps_held_total, 1);
	/* Stable (absent) for less than the window: held. */
	eval_at(&s, &nokeep, NAN, 14 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_FIRING);
	/* For the whole window: resolved. */
	eval_at(&s, &nokeep, NAN, 15 * m, &o);
	assert_int_equal(s.alerts[0].state, ALERT_INACTIVE);
	assert_false(s.alerts[0].held);
	alert_rule_state_clear(&s);

	/* With flap holding off the same sequence resolves every time. */
	struct alert_opts off = {0};
	struct alert_rule_state s2 = {0};
	for (int i = 0; i < 6; i++)
		eval_at(&s2, &nokeep, i % 2 ? NAN : 90, i * m, &off);
	assert_int_equal(s2.alerts[0].state, ALERT_INACTIVE);
	assert_int_equal(s2.flaps_held_total, 0);
	alert_rule_state_clear(&s2);
	rules_file_free(f);
}

/* Bounds: more alerts than ALERT_MAX_PER_RULE fail the evaluation and
 * leave the state as it was; an expansion past TMPL_MAX_OUTPUT becomes
 * an error text, not a larger string. */
static void test_bounds(void **state)
{
	(void)state;
	struct rules_file *f = parse_rules(
		"groups:\n  - name: g\n    rules:\n      - alert: Many\n        expr: x\n");
	const struct rules_rule *r = &f->groups[0].rules[0];
	size_t n = ALERT_MAX_PER_RULE + 1;
	struct label *l = calloc(n, sizeof *l);
	char (*vals)[16] = calloc(n, sizeof *vals);
	struct promql_result_series *rs = calloc(n, sizeof *rs);
	struct promql_sample pt = {0, 1};
	assert_non_null(l);
	assert_non_null(vals);
	assert_non_null(rs);
	for (size_t i = 0; i < n; i++) {
		snprintf(vals[i], sizeof vals[i], "%zu", i);
		l[i] = (struct label){"gpu", vals[i]};
		rs[i] = (struct promql_result_series){&l[i], 1, &pt, 1};
	}
	struct promql_result res = {.type = PROMQL_TYPE_VECTOR, .series = rs, .nseries = n};
	struct alert_rule_state s = {0};
	struct alert_opts o = {0};
	char err[256] = "";
	assert_int_equal(alert_rule_eval(&s, r, &res, 0, &o, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "more than 10000 alerts"));
	assert_int_equal(s.n, 0);
	res.nseries = n - 1;
	assert_int_equal(alert_rule_eval(&s, r, &res, 0, &o, err, sizeof err), 0);
	assert_int_equal(s.n, ALERT_MAX_PER_RULE);
	alert_rule_state_clear(&s);
	free(rs);
	free(vals);
	free(l);
	rules_file_free(f);

	char big[4096] = "";
	for (int i = 0; i < 70; i++)
		strcat(big, "{{ printf \"%1000s\" \"x\" }}");
	const char *e = expand(big, 0);
	assert_non_null(strstr(e, "<error expanding template: output longer than"));
}

static void test_persist_roundtrip(void **state)
{
	(void)state;
	struct rules_file *f = parse_rules(sm_rules);
	struct alert_rule_state s = {0};
	struct alert_opts o = {.flap_max_toggles = 4, .flap_window_ms = 600000};
	eval_at(&s, &f->groups[0].rules[0], 91.25, 0, &o);
	eval_at(&s, &f->groups[0].rules[0], 91.25, 120000, &o);
	s.alerts[0].last_sent_ms = 120000;
	struct buf b;
	buf_init(&b, 1 << 16);
	assert_int_equal(alert_to_json(&s.alerts[0], &b), 0);
	struct alert a;
	assert_int_equal(alert_from_json(b.data, &a), 0);
	assert_int_equal(a.state, ALERT_FIRING);
	assert_int_equal(a.fp, s.alerts[0].fp);
	assert_int_equal(a.fired_at_ms, 120000);
	assert_int_equal(a.last_sent_ms, 120000);
	assert_int_equal(a.nflips, 1);
	assert_true(a.value == 91.25);
	assert_string_equal(a.annotations[0].value, "GPU 0 at 91.25");
	alert_free(&a);
	assert_int_equal(alert_from_json("{\"labels\":[1]}", &a), GPULSE_EPARSE);
	assert_int_equal(alert_from_json("not json", &a), GPULSE_EPARSE);
	buf_free(&b);
	alert_rule_state_clear(&s);
	rules_file_free(f);
}

/* ---- the engine ------------------------------------------------------------ */

static char dir[64];
static char path[128];
static struct tsdb *db;
static int64_t clock_ms;
static uint32_t temp_ref;

struct sent {
	char name[64];
	char gpu[16];
	int64_t starts, ends;
	int resolved;
	char summary[128];
};
static struct sent sent[256];
static size_t nsent, ncalls;

static int64_t fake_now(void *ctx)
{
	(void)ctx;
	return clock_ms;
}

static void sink(void *ctx, const struct alert_notice *n, size_t count)
{
	(void)ctx;
	ncalls++;
	for (size_t i = 0; i < count && nsent < 256; i++) {
		struct sent *s = &sent[nsent++];
		memset(s, 0, sizeof *s);
		for (size_t k = 0; k < n[i].nlabels; k++) {
			if (strcmp(n[i].labels[k].name, "alertname") == 0)
				snprintf(s->name, sizeof s->name, "%s", n[i].labels[k].value);
			if (strcmp(n[i].labels[k].name, "gpu") == 0)
				snprintf(s->gpu, sizeof s->gpu, "%s", n[i].labels[k].value);
			if (k)
				assert_true(strcmp(n[i].labels[k - 1].name, n[i].labels[k].name) < 0);
		}
		for (size_t k = 0; k < n[i].nannotations; k++)
			if (strcmp(n[i].annotations[k].name, "summary") == 0)
				snprintf(s->summary, sizeof s->summary, "%s", n[i].annotations[k].value);
		s->starts = n[i].starts_at_ms;
		s->ends = n[i].ends_at_ms;
		s->resolved = n[i].resolved;
		assert_true(n[i].fingerprint != 0);
	}
}

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/gpulse-alertXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/store.db", dir);
	struct tsdb_opts o = {.path = path};
	char err[256] = "";
	assert_int_equal(tsdb_open(&db, &o, err, sizeof err), 0);
	struct label l[] = {{"__name__", "temp"}, {"gpu", "0"}};
	assert_int_equal(tsdb_series(db, l, 2, &temp_ref, err, sizeof err), 0);
	nsent = ncalls = 0;
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

static const char engine_rules[] =
	"groups:\n"
	"  - name: alerts\n"
	"    interval: 10s\n"
	"    rules:\n"
	"      - alert: Hot\n"
	"        expr: temp > 85\n"
	"        annotations: {summary: 'GPU {{ $labels.gpu }} at {{ $value | humanize }}C'}\n"
	"      - alert: Warm\n"
	"        expr: temp > 50\n"
	"        for: 20m\n";

static struct rules_engine *engine(int64_t resend_ms)
{
	struct buf errs;
	buf_init(&errs, 1 << 16);
	struct rules_file **files = calloc(1, sizeof *files);
	assert_non_null(files);
	assert_int_equal(rules_file_parse("e.yml", engine_rules, strlen(engine_rules), &files[0], &errs), 0);
	buf_free(&errs);
	struct rules_engine_config c = {.db = db, .now_ms = fake_now, .alert_sink = sink,
					.resend_delay_ms = resend_ms, .flap_max_toggles = -1};
	struct rules_engine *e = NULL;
	assert_int_equal(rules_engine_new(&e, &c, files, 1), 0);
	return e;
}

/* Append temp = v at t and evaluate the group at t. */
static void step(struct rules_engine *e, int64_t t, double v)
{
	clock_ms = t;
	if (!isnan(v))
		assert_int_equal(tsdb_append(db, temp_ref, t, v), 0);
	assert_int_equal(rules_engine_eval_group(e, 0, t), 0);
}

static size_t query_n(const char *expr, int64_t t, double *v)
{
	struct promql_expr *x = NULL;
	char err[256] = "";
	assert_int_equal(promql_parse(expr, &x, err, sizeof err), 0);
	struct promql_opts o;
	promql_opts_default(&o);
	struct tsdb_queryable_ctx qc = {.db = db};
	struct promql_result *r = NULL;
	assert_int_equal(promql_eval_instant(x, &tsdb_queryable, &qc, &o, t, &r, err, sizeof err), 0);
	size_t n = r->nseries;
	if (v && n)
		*v = r->series[0].points[0].v;
	promql_result_free(r);
	promql_expr_free(x);
	return n;
}

static void test_engine_sends(void **state)
{
	(void)state;
	const int64_t t0 = 1700000000000LL, s = 1000;
	struct rules_engine *e = engine(60 * s);
	step(e, t0, 90);
	/* Hot fires at once and is sent; Warm is pending and not sent. */
	assert_int_equal(nsent, 1);
	assert_string_equal(sent[0].name, "Hot");
	assert_string_equal(sent[0].summary, "GPU 0 at 90C");
	assert_int_equal(sent[0].starts, t0);
	assert_int_equal(sent[0].resolved, 0);
	/* endsAt = now + 4 × max(resend 60 s, interval 10 s). */
	assert_int_equal(sent[0].ends, t0 + 240 * s);
	double v = 0;
	assert_int_equal(query_n("ALERTS{alertname=\"Hot\",alertstate=\"firing\"}", t0, &v), 1);
	assert_true(v == 1);
	assert_int_equal(query_n("ALERTS{alertname=\"Warm\",alertstate=\"pending\"}", t0, NULL), 1);
	assert_int_equal(query_n("ALERTS_FOR_STATE{alertname=\"Warm\"}", t0, &v), 1);
	assert_true(v == (double)(t0 / 1000));
	/* Not resent within the resend delay; resent after it. */
	for (int64_t t = t0 + 10 * s; t <= t0 + 60 * s; t += 10 * s)
		step(e, t, 90);
	assert_int_equal(nsent, 1);
	step(e, t0 + 70 * s, 90);
	assert_int_equal(nsent, 2);
	assert_int_equal(sent[1].ends, t0 + 70 * s + 240 * s);
	/* Resolved: sent at once with endsAt = the resolve time, then again
	 * every resend delay while it is kept (15 minutes). */
	step(e, t0 + 80 * s, 20);
	assert_int_equal(nsent, 3);
	assert_int_equal(sent[2].resolved, 1);
	assert_int_equal(sent[2].ends, t0 + 80 * s);
	assert_int_equal(query_n("ALERTS{alertname=\"Hot\"}", t0 + 80 * s, NULL), 0); /* stale */
	assert_int_equal(query_n("ALERTS{alertname=\"Warm\"}", t0 + 80 * s, NULL), 0);
	step(e, t0 + 90 * s, 20);
	assert_int_equal(nsent, 3);
	step(e, t0 + 150 * s, 20);
	assert_int_equal(nsent, 4);
	assert_int_equal(sent[3].resolved, 1);

	struct rules_alert_stats st;
	rules_engine_alert_stats(e, &st);
	assert_int_equal(st.notifications_total, 4);
	assert_int_equal(st.firing, 0);
	assert_int_equal(st.pending, 0);
	rules_engine_free(e);
}

/* Stop the engine and start a new one over the same store: the firing
 * alert is not sent again, the pending one keeps its progress (the time
 * the engine was down does not count toward `for`, as Prometheus). */
static void test_engine_restart(void **state)
{
	(void)state;
	const int64_t t0 = 1700000000000LL, s = 1000;
	struct rules_engine *e = engine(60 * s);
	step(e, t0, 90);
	step(e, t0 + 10 * s, 90);
	step(e, t0 + 20 * s, 90);
	assert_int_equal(nsent, 1);
	struct rules_alert_stats st;
	rules_engine_alert_stats(e, &st);
	assert_int_equal(st.firing, 1);
	assert_int_equal(st.pending, 1);
	rules_engine_free(e);
	assert_int_equal(tsdb_flush(db), 0);

	/* Down for 30 s. */
	e = engine(60 * s);
	step(e, t0 + 50 * s, 90);
	assert_int_equal(nsent, 1); /* no duplicate */
	rules_engine_alert_stats(e, &st);
	assert_int_equal(st.restored_total, 2);
	assert_int_equal(st.firing, 1);
	assert_int_equal(st.pending, 1);
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(rules_engine_write_alerts_json(e, &b), 0);
	/* Hot keeps its activeAt (t0 = 2023-11-14T22:13:20Z); Warm's moves by
	 * the 30 s down (its last ALERTS_FOR_STATE sample was at t0 + 20 s). */
	assert_non_null(strstr(b.data, "{\"labels\":{\"alertname\":\"Hot\",\"gpu\":\"0\"},\"annotations\":"
				       "{\"summary\":\"GPU 0 at 90C\"},\"state\":\"firing\","
				       "\"activeAt\":\"2023-11-14T22:13:20Z\",\"value\":\"9e+01\"}"));
	assert_non_null(strstr(b.data, "\"alertname\":\"Warm\""));
	assert_non_null(strstr(b.data, "\"state\":\"pending\",\"activeAt\":\"2023-11-14T22:13:50Z\""));
	buf_reset(&b);
	assert_int_equal(rules_engine_write_json(e, NULL, &b), 0);
	assert_non_null(strstr(b.data, "\"state\":\"firing\""));
	assert_non_null(strstr(b.data, "\"duration\":1200"));
	assert_non_null(strstr(b.data, "\"health\":\"ok\""));
	buf_free(&b);
	/* The resend clock carried over: the next send is 60 s after the
	 * last one (t0), not after the restart. */
	step(e, t0 + 60 * s, 90);
	assert_int_equal(nsent, 1);
	step(e, t0 + 70 * s, 90);
	assert_int_equal(nsent, 2);
	/* The temperature falls while the engine is down: the firing alert
	 * is restored and resolved, so a resolve is sent. */
	rules_engine_free(e);
	e = engine(60 * s);
	step(e, t0 + 90 * s, 20);
	assert_int_equal(nsent, 3);
	assert_int_equal(sent[2].resolved, 1);
	rules_engine_free(e);
}

/* A reload keeps the alerts (Prometheus's CopyState): no new notice. */
static void test_engine_reload_keeps_state(void **state)
{
	(void)state;
	const int64_t t0 = 1700000000000LL, s = 1000;
	struct rules_engine *e = engine(60 * s);
	step(e, t0, 90);
	assert_int_equal(nsent, 1);
	struct buf errs;
	buf_init(&errs, 1 << 16);
	struct rules_file **files = calloc(1, sizeof *files);
	assert_non_null(files);
	assert_int_equal(rules_file_parse("e.yml", engine_rules, strlen(engine_rules), &files[0], &errs), 0);
	buf_free(&errs);
	assert_int_equal(rules_engine_replace(e, files, 1), 0);
	step(e, t0 + 10 * s, 90);
	assert_int_equal(nsent, 1);
	struct rules_alert_stats st;
	rules_engine_alert_stats(e, &st);
	assert_int_equal(st.firing, 1);
	assert_int_equal(st.restored_total, 0);
	rules_engine_free(e);
}

static size_t alert_records(void)
{
	struct tsdb_record *r = NULL;
	size_t n = 0;
	assert_int_equal(tsdb_record_list(db, "alert", INT64_MIN, INT64_MAX, 0, &r, &n), 0);
	tsdb_records_free(r, n);
	return n;
}

/* Records follow the rules: a reload that removes a rule drops its
 * alerts' records; a start drops records of rules no longer loaded. */
static void test_engine_records_follow_rules(void **state)
{
	(void)state;
	const int64_t t0 = 1700000000000LL, s = 1000;
	struct rules_engine *e = engine(60 * s);
	step(e, t0, 90);
	assert_int_equal(alert_records(), 2); /* Hot firing, Warm pending */
	static const char only_warm[] =
		"groups:\n  - name: alerts\n    interval: 10s\n    rules:\n"
		"      - alert: Warm\n        expr: temp > 50\n        for: 20m\n";
	struct buf errs;
	buf_init(&errs, 1 << 16);
	struct rules_file **files = calloc(1, sizeof *files);
	assert_non_null(files);
	assert_int_equal(rules_file_parse("e.yml", only_warm, strlen(only_warm), &files[0], &errs), 0);
	buf_free(&errs);
	assert_int_equal(rules_engine_replace(e, files, 1), 0);
	assert_int_equal(alert_records(), 1);
	step(e, t0 + 10 * s, 90);
	assert_int_equal(alert_records(), 1);
	rules_engine_free(e);
	assert_int_equal(tsdb_record_put(db, "alert", "gone.yml;g;Gone;0000000000000001", t0, "{}"), 0);
	assert_int_equal(alert_records(), 2);
	e = engine(60 * s);
	step(e, t0 + 20 * s, 90);
	assert_int_equal(alert_records(), 2); /* Warm and Hot again; Gone's dropped */
	struct tsdb_record rec;
	assert_int_equal(tsdb_record_get(db, "alert", "gone.yml;g;Gone;0000000000000001", &rec), GPULSE_ENOENT);
	rules_engine_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_humanize),
		cmocka_unit_test(test_template_forms),
		cmocka_unit_test(test_template_errors),
		cmocka_unit_test(test_for_and_resolve),
		cmocka_unit_test(test_keep_firing_for),
		cmocka_unit_test(test_duplicate_labelset),
		cmocka_unit_test(test_flap_holding),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_persist_roundtrip),
		cmocka_unit_test_setup_teardown(test_engine_sends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_engine_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_engine_reload_keeps_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_engine_records_follow_rules, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
