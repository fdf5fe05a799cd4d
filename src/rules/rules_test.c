/* promtool's rule unit tests (rules_test.h). The order of work follows
 * promtool 2.42's cmd/promtool/unittest.go: load the rule files, then for
 * each test group feed the input series in step by step while every group
 * is evaluated from t = 0 to the last eval_time, then query each
 * promql_expr_test and compare the sorted sample sets exactly (promtool
 * uses reflect.DeepEqual on float64: 0.1+0.2 is not 0.3, NaN never
 * matches), printing values as Go's %E-style FormatFloat. */
#include "rules/rules_test.h"

#include <glob.h>
#include <libgen.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rules/alert_state.h"
#include "promql/eval.h"
#include "promql/lexer.h"
#include "promql/memstore.h"
#include "promql/parser.h"
#include "rules/rules_file.h"
#include "rules/rules_util.h"
#include "promql/series.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "rules/ytree.h"

#define DEFAULT_EVAL_INTERVAL_MS (60 * 1000)
#define TEST_MAX_SERIES  100000
#define TEST_MAX_SAMPLES 20000000
#define MAX_ERRS_BYTES   (4 * 1024 * 1024)

/* ---- parsing --------------------------------------------------------- */

struct ctx {
	const char *path;
	struct buf *errs;
	int nerr;
};

static void perr(struct ctx *c, const struct ynode *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void perr(struct ctx *c, const struct ynode *n, const char *fmt, ...)
{
	va_list ap;
	c->nerr++;
	buf_printf(c->errs, "%s:%d:%d: ", c->path, n ? n->line : 1, n ? n->col : 1);
	va_start(ap, fmt);
	buf_vprintf(c->errs, fmt, ap);
	va_end(ap);
	buf_putc(c->errs, '\n');
}

void rules_test_file_free(struct rules_test_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nrule_files; i++)
		free(f->rule_files[i]);
	free(f->rule_files);
	for (size_t i = 0; i < f->ngroup_order; i++)
		free(f->group_order[i]);
	free(f->group_order);
	for (size_t t = 0; t < f->ntests; t++) {
		struct rules_test_group *g = &f->tests[t];
		for (size_t i = 0; i < g->ninputs; i++) {
			free(g->inputs[i].series);
			free(g->inputs[i].values);
		}
		free(g->inputs);
		for (size_t i = 0; i < g->nexprs; i++) {
			for (size_t j = 0; j < g->exprs[i].nexp; j++)
				free(g->exprs[i].exp[j].labels);
			free(g->exprs[i].exp);
			free(g->exprs[i].expr);
		}
		free(g->exprs);
		for (size_t i = 0; i < g->nalerts; i++) {
			for (size_t j = 0; j < g->alerts[i].nexp; j++) {
				rules_labels_free(g->alerts[i].exp[j].labels, g->alerts[i].exp[j].nlabels);
				rules_labels_free(g->alerts[i].exp[j].ann, g->alerts[i].exp[j].nann);
			}
			free(g->alerts[i].exp);
			free(g->alerts[i].alertname);
		}
		free(g->alerts);
		rules_labels_free(g->ext_labels, g->next_labels);
		free(g->external_url);
		free(g->name);
	}
	free(f->tests);
	free(f->path);
	free(f);
}

/* A string field: NULL and "" for null; complaint for non-scalars. */
static char *str_field(struct ctx *c, const struct ynode *n, const char *what)
{
	if (ynode_is_null(n))
		return xstrdup("");
	if (n->kind != YNODE_SCALAR) {
		perr(c, n, "%s: cannot unmarshal %s into string", what, ynode_kind_name(n));
		return xstrdup("");
	}
	return xstrdup(n->value);
}

static int64_t dur_field(struct ctx *c, const struct ynode *n, const char *what)
{
	int64_t ms = 0;
	if (ynode_is_null(n))
		return 0;
	if (n->kind != YNODE_SCALAR || promql_parse_duration(n->value, strlen(n->value), &ms))
		perr(c, n, "%s: not a valid duration string: \"%s\"", what,
		     n->kind == YNODE_SCALAR ? n->value : ynode_kind_name(n));
	return ms;
}

/* YAML 1.1's float for a plain scalar, as Go's yaml.v2 reads one into a
 * float64: decimal and hex numbers, .inf, -.inf, .nan; never "NaN". */
static int float_field(struct ctx *c, const struct ynode *n, const char *what, double *v)
{
	*v = 0;
	if (ynode_is_null(n))
		return 0;
	if (n->kind == YNODE_SCALAR && n->plain) {
		const char *s = n->value;
		static const char *const inf[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"};
		static const char *const nan[] = {".nan", ".NaN", ".NAN"};
		for (size_t i = 0; i < sizeof inf / sizeof inf[0]; i++) {
			if (strcmp(s, inf[i]) == 0) {
				*v = INFINITY;
				return 0;
			}
			if (s[0] == '-' && strcmp(s + 1, inf[i]) == 0) {
				*v = -INFINITY;
				return 0;
			}
		}
		for (size_t i = 0; i < sizeof nan / sizeof nan[0]; i++)
			if (strcmp(s, nan[i]) == 0) {
				*v = NAN;
				return 0;
			}
		char *end;
		double d = strtod(s, &end);
		if (end != s && *end == '\0' && isfinite(d)) {
			*v = d;
			return 0;
		}
	}
	perr(c, n, "%s: cannot unmarshal !!str `%s` into float64", what,
	     n->kind == YNODE_SCALAR ? n->value : ynode_kind_name(n));
	return GPULSE_EPARSE;
}

static const struct ynode *seq_field(struct ctx *c, const struct ynode *n, const char *what)
{
	if (ynode_is_null(n))
		return NULL;
	if (n->kind != YNODE_SEQ) {
		perr(c, n, "%s must be a sequence, not %s", what, ynode_kind_name(n));
		return NULL;
	}
	return n;
}

static const char *const top_keys[] = {"rule_files", "evaluation_interval", "group_eval_order", "tests", NULL};
static const char *const group_keys[] = {"name", "interval", "input_series", "alert_rule_test",
					 "promql_expr_test", "external_labels", "external_url", NULL};
static const char *const input_keys[] = {"series", "values", NULL};
static const char *const expr_keys[] = {"expr", "eval_time", "exp_samples", NULL};
static const char *const sample_keys[] = {"labels", "value", NULL};
static const char *const alert_test_keys[] = {"eval_time", "alertname", "exp_alerts", NULL};
static const char *const exp_alert_keys[] = {"exp_labels", "exp_annotations", NULL};

/* A map of strings (exp_labels, external_labels) into owned labels. */
static void string_map(struct ctx *c, const struct ynode *n, const char *what, struct label **out,
		       size_t *nout)
{
	*out = NULL;
	*nout = 0;
	if (ynode_is_null(n))
		return;
	if (n->kind != YNODE_MAP) {
		perr(c, n, "%s: cannot unmarshal %s into map[string]string", what, ynode_kind_name(n));
		return;
	}
	struct label *l = xcalloc(n->n / 2 + 1, sizeof *l);
	size_t k = 0;
	for (size_t i = 0; i + 1 < n->n; i += 2) {
		const struct ynode *key = n->items[i], *val = n->items[i + 1];
		if (key->kind != YNODE_SCALAR || (val->kind != YNODE_SCALAR && !ynode_is_null(val))) {
			perr(c, key, "%s: cannot unmarshal %s into string", what, ynode_kind_name(val));
			continue;
		}
		l[k].name = xstrdup(key->value);
		l[k].value = xstrdup(ynode_is_null(val) ? "" : val->value);
		k++;
	}
	rules_labels_sort(l, k);
	*out = l;
	*nout = k;
}

static void parse_alert_test(struct ctx *c, const struct ynode *n, struct rules_alert_test *a)
{
	a->line = n->line;
	a->col = n->col;
	if (n->kind != YNODE_MAP) {
		perr(c, n, "an alert_rule_test must be a mapping");
		a->alertname = xstrdup("");
		return;
	}
	if (rules_check_keys(c->path, n, alert_test_keys, "main.alertTestCase", c->errs, &c->nerr)) {
		a->alertname = xstrdup("");
		return;
	}
	a->eval_time_ms = dur_field(c, rules_map_get(n, "eval_time"), "eval_time");
	a->alertname = str_field(c, rules_map_get(n, "alertname"), "alertname");
	const struct ynode *s = seq_field(c, rules_map_get(n, "exp_alerts"), "exp_alerts");
	if (!s)
		return;
	a->exp = xcalloc(s->n + 1, sizeof *a->exp);
	for (size_t i = 0; i < s->n; i++) {
		const struct ynode *m = s->items[i];
		struct rules_exp_alert *x = &a->exp[a->nexp++];
		if (ynode_is_null(m))
			continue;
		if (m->kind != YNODE_MAP) {
			perr(c, m, "an exp_alerts entry must be a mapping");
			continue;
		}
		rules_check_keys(c->path, m, exp_alert_keys, "main.alert", c->errs, &c->nerr);
		string_map(c, rules_map_get(m, "exp_labels"), "exp_labels", &x->labels, &x->nlabels);
		string_map(c, rules_map_get(m, "exp_annotations"), "exp_annotations", &x->ann, &x->nann);
	}
}

static void parse_expr_test(struct ctx *c, const struct ynode *n, struct rules_expr_test *e)
{
	e->line = n->line;
	e->col = n->col;
	if (n->kind != YNODE_MAP) {
		perr(c, n, "a promql_expr_test must be a mapping");
		return;
	}
	if (rules_check_keys(c->path, n, expr_keys, "main.promqlTestCase", c->errs, &c->nerr))
		return;
	e->expr = str_field(c, rules_map_get(n, "expr"), "expr");
	e->eval_time_ms = dur_field(c, rules_map_get(n, "eval_time"), "eval_time");
	const struct ynode *s = seq_field(c, rules_map_get(n, "exp_samples"), "exp_samples");
	if (!s)
		return;
	e->exp = xcalloc(s->n + 1, sizeof *e->exp);
	for (size_t i = 0; i < s->n; i++) {
		const struct ynode *m = s->items[i];
		struct rules_test_sample *x = &e->exp[e->nexp++];
		x->line = m->line;
		x->col = m->col;
		if (m->kind != YNODE_MAP) {
			perr(c, m, "an exp_samples entry must be a mapping");
			x->labels = xstrdup("");
			continue;
		}
		rules_check_keys(c->path, m, sample_keys, "main.sample", c->errs, &c->nerr);
		x->labels = str_field(c, rules_map_get(m, "labels"), "labels");
		float_field(c, rules_map_get(m, "value"), "value", &x->value);
	}
}

static void parse_group(struct ctx *c, const struct ynode *n, struct rules_test_group *g)
{
	g->line = n->line;
	g->col = n->col;
	if (n->kind != YNODE_MAP) {
		perr(c, n, "a test must be a mapping, not %s", ynode_kind_name(n));
		return;
	}
	if (rules_check_keys(c->path, n, group_keys, "main.testGroup", c->errs, &c->nerr))
		return;
	g->name = str_field(c, rules_map_get(n, "name"), "name");
	g->interval_ms = dur_field(c, rules_map_get(n, "interval"), "interval");
	const struct ynode *in = seq_field(c, rules_map_get(n, "input_series"), "input_series");
	if (in) {
		g->inputs = xcalloc(in->n + 1, sizeof *g->inputs);
		for (size_t i = 0; i < in->n; i++) {
			const struct ynode *m = in->items[i];
			struct rules_input_series *s = &g->inputs[g->ninputs++];
			s->line = m->line;
			s->col = m->col;
			if (m->kind != YNODE_MAP) {
				perr(c, m, "an input_series entry must be a mapping");
				s->series = xstrdup("");
				s->values = xstrdup("");
				continue;
			}
			rules_check_keys(c->path, m, input_keys, "main.series", c->errs, &c->nerr);
			s->series = str_field(c, rules_map_get(m, "series"), "series");
			s->values = str_field(c, rules_map_get(m, "values"), "values");
		}
	}
	const struct ynode *ex = seq_field(c, rules_map_get(n, "promql_expr_test"), "promql_expr_test");
	if (ex) {
		g->exprs = xcalloc(ex->n + 1, sizeof *g->exprs);
		for (size_t i = 0; i < ex->n; i++)
			parse_expr_test(c, ex->items[i], &g->exprs[g->nexprs++]);
	}
	const struct ynode *al = seq_field(c, rules_map_get(n, "alert_rule_test"), "alert_rule_test");
	if (al) {
		g->alerts = xcalloc(al->n + 1, sizeof *g->alerts);
		for (size_t i = 0; i < al->n; i++)
			parse_alert_test(c, al->items[i], &g->alerts[g->nalerts++]);
	}
	string_map(c, rules_map_get(n, "external_labels"), "external_labels", &g->ext_labels,
		   &g->next_labels);
	const struct ynode *url = rules_map_get(n, "external_url");
	if (!ynode_is_null(url))
		g->external_url = str_field(c, url, "external_url");
}

static char **string_list(struct ctx *c, const struct ynode *n, const char *what, size_t *count)
{
	*count = 0;
	const struct ynode *s = seq_field(c, n, what);
	if (!s)
		return NULL;
	char **out = xcalloc(s->n + 1, sizeof *out);
	for (size_t i = 0; i < s->n; i++)
		out[(*count)++] = str_field(c, s->items[i], what);
	return out;
}

int rules_test_parse(const char *path, const char *data, size_t len, struct rules_test_file **out,
		     struct buf *errs)
{
	struct ctx c = {.path = path, .errs = errs};
	struct ynode *root = NULL;
	char e[512];
	*out = NULL;
	int rc = ytree_parse(data, len, &root, e, sizeof e);
	if (rc) {
		buf_printf(errs, "%s:%s\n", path, e);
		return rc;
	}
	struct rules_test_file *f = xcalloc(1, sizeof *f);
	f->path = xstrdup(path);
	f->eval_interval_ms = DEFAULT_EVAL_INTERVAL_MS;
	if (ynode_is_null(root))
		goto out;
	if (root->kind != YNODE_MAP) {
		perr(&c, root, "a test file must be a mapping, not %s", ynode_kind_name(root));
		goto out;
	}
	if (rules_check_keys(path, root, top_keys, "main.unitTestFile", errs, &c.nerr))
		goto out;
	f->rule_files = string_list(&c, rules_map_get(root, "rule_files"), "rule_files", &f->nrule_files);
	f->group_order = string_list(&c, rules_map_get(root, "group_eval_order"), "group_eval_order",
				     &f->ngroup_order);
	int64_t ei = dur_field(&c, rules_map_get(root, "evaluation_interval"), "evaluation_interval");
	if (ei > 0)
		f->eval_interval_ms = ei;
	const struct ynode *tests = seq_field(&c, rules_map_get(root, "tests"), "tests");
	if (tests) {
		f->tests = xcalloc(tests->n + 1, sizeof *f->tests);
		for (size_t i = 0; i < tests->n; i++)
			parse_group(&c, tests->items[i], &f->tests[f->ntests++]);
	}
out:
	ytree_free(root);
	if (c.nerr) {
		rules_test_file_free(f);
		return GPULSE_EPARSE;
	}
	*out = f;
	return 0;
}

/* ---- running --------------------------------------------------------- */

struct sample_set {
	struct label *labels; /* one allocation per sample (series.h) or owned by res */
	size_t n;
	double v;
};

static int sample_cmp(const void *a, const void *b)
{
	const struct sample_set *x = a, *y = b;
	return rules_labels_cmp(x->labels, x->n, y->labels, y->n);
}

static void put_samples(struct buf *b, const struct sample_set *s, size_t n)
{
	if (n == 0) {
		buf_puts(b, "nil");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_puts(b, ", ");
		promql_format_labels(b, s[i].labels, s[i].n);
		buf_putc(b, ' ');
		rules_format_e(b, s[i].v);
	}
}

static void expr_head(struct buf *b, const struct rules_expr_test *e)
{
	char ts[64];
	promql_format_duration(e->eval_time_ms, ts, sizeof ts);
	buf_puts(b, "    expr: ");
	promql_quote(b, e->expr);
	buf_printf(b, ", time: %s", ts);
}

/* Parse an expected sample's labels; "" and "{}" are the empty set. */
static int parse_exp_labels(const char *text, struct label **l, size_t *n, char *err,
			    size_t errlen)
{
	const char *p = text;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0' || strcmp(p, "{}") == 0) {
		*l = NULL;
		*n = 0;
		return 0;
	}
	return promql_parse_series_labels(text, l, n, err, errlen);
}

static void run_expr_test(const struct rules_expr_test *e, struct memstore *ms,
			  const struct promql_opts *opts, struct buf *errs)
{
	char err[512];
	struct promql_expr *x = NULL;
	struct promql_result *res = NULL;
	struct sample_set *exp = xcalloc(e->nexp + 1, sizeof *exp);
	struct sample_set *got = NULL;
	size_t ngot = 0, nexp = 0;
	int rc = promql_parse(e->expr, &x, err, sizeof err);
	if (!rc)
		rc = promql_eval_instant(x, &memstore_queryable, ms, opts, e->eval_time_ms, &res, err, sizeof err);
	if (!rc && res->type != PROMQL_TYPE_SCALAR && res->type != PROMQL_TYPE_VECTOR) {
		str_errf(err, sizeof err, "rule result is not a vector or scalar");
		rc = GPULSE_EINVAL;
	}
	if (rc) {
		expr_head(errs, e);
		buf_printf(errs, ", err: %s\n\n", err);
		goto out;
	}
	for (; nexp < e->nexp; nexp++) {
		if (parse_exp_labels(e->exp[nexp].labels, &exp[nexp].labels, &exp[nexp].n, err, sizeof err)) {
			expr_head(errs, e);
			buf_printf(errs, ", err: labels \"%s\": %s\n\n", e->exp[nexp].labels, err);
			goto out;
		}
		exp[nexp].v = e->exp[nexp].value;
	}
	if (res->type == PROMQL_TYPE_SCALAR) {
		got = xcalloc(1, sizeof *got);
		got[0].v = res->scalar;
		ngot = 1;
	} else {
		got = xcalloc(res->nseries + 1, sizeof *got);
		for (; ngot < res->nseries; ngot++) {
			/* The result owns these labels; got never frees them. */
			got[ngot].labels = (struct label *)(uintptr_t)res->series[ngot].labels;
			got[ngot].n = res->series[ngot].nlabels;
			got[ngot].v = res->series[ngot].npoints ? res->series[ngot].points[0].v : NAN;
		}
	}
	qsort(exp, nexp, sizeof *exp, sample_cmp);
	qsort(got, ngot, sizeof *got, sample_cmp);
	bool same = nexp == ngot;
	for (size_t i = 0; same && i < nexp; i++)
		same = sample_cmp(&exp[i], &got[i]) == 0 && exp[i].v == got[i].v;
	if (!same) {
		expr_head(errs, e);
		buf_puts(errs, ",\n        exp: ");
		put_samples(errs, exp, nexp);
		buf_puts(errs, "\n        got: ");
		put_samples(errs, got, ngot);
		buf_puts(errs, "\n\n");
	}
out:
	for (size_t i = 0; i < nexp; i++)
		free(exp[i].labels);
	free(exp);
	free(got);
	promql_result_free(res);
	promql_expr_free(x);
}

struct input {
	struct label *labels;
	size_t nlabels;
	struct promql_series_value *vals;
	size_t nvals;
	size_t next; /* first value not yet loaded */
};

/* Load every input value whose time is at most till_ms. */
static int load_till(struct input *in, size_t n, int64_t interval_ms, int64_t till_ms,
		     struct memstore *ms, struct buf *errs)
{
	for (size_t i = 0; i < n; i++) {
		struct input *s = &in[i];
		for (; s->next < s->nvals && (int64_t)s->next * interval_ms <= till_ms; s->next++) {
			if (s->vals[s->next].omitted)
				continue;
			int rc = memstore_add(ms, s->labels, s->nlabels, (int64_t)s->next * interval_ms,
					      s->vals[s->next].v);
			if (rc == GPULSE_ELIMIT) {
				buf_puts(errs, "    too many input series or samples\n");
				return rc;
			}
		}
	}
	return 0;
}

static int i64_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* promtool's labelAndAnnotation. The strings are borrowed. */
struct la {
	const struct label *labels;
	size_t nlabels;
	const struct label *ann;
	size_t nann;
};

static int la_cmp(const void *a, const void *b)
{
	const struct la *x = a, *y = b;
	int c = rules_labels_cmp(x->labels, x->nlabels, y->labels, y->nlabels);
	return c ? c : rules_labels_cmp(x->ann, x->nann, y->ann, y->nann);
}

/* Go's labelsAndAnnotations.String(), each line after the first
 * indented by 12 spaces (promtool's indentLines). */
static void put_las(struct buf *b, const struct la *l, size_t n)
{
	static const char ind[] = "            ";
	if (n == 0) {
		buf_puts(b, "[]");
		return;
	}
	buf_puts(b, "[");
	for (size_t i = 0; i < n; i++) {
		buf_printf(b, "%s\n%s%zu:\n%s  Labels:", i ? "," : "", ind, i, ind);
		promql_format_labels(b, l[i].labels, l[i].nlabels);
		buf_printf(b, "\n%s  Annotations:", ind);
		promql_format_labels(b, l[i].ann, l[i].nann);
	}
	buf_printf(b, "\n%s]", ind);
}

/* Compare the firing alerts at alert eval time t with every
 * alert_rule_test of that time, as promtool does. */
static void check_alerts(const struct rules_test_group *tg, int64_t t,
			 const struct rules_group *const *groups, struct rules_group_state **st,
			 size_t ngroups, struct buf *errs)
{
	for (size_t k = 0; k < tg->nalerts; k++) {
		const struct rules_alert_test *at = &tg->alerts[k];
		if (at->eval_time_ms != t)
			continue;
		size_t cap = 16, ngot = 0;
		struct la *got = xcalloc(cap, sizeof *got);
		for (size_t g = 0; g < ngroups; g++)
			for (size_t r = 0; r < groups[g]->nrules; r++) {
				const struct rules_rule *rule = &groups[g]->rules[r];
				if (!rule->alert || strcmp(rule->alert, at->alertname) != 0)
					continue;
				const struct alert_rule_state *as = rules_group_state_alerts(st[g], r);
				for (size_t i = 0; as && i < as->n; i++) {
					const struct alert *a = &as->alerts[i];
					if (a->state != ALERT_FIRING)
						continue;
					if (ngot == cap) {
						cap *= 2;
						got = xrealloc(got, cap * sizeof *got);
					}
					got[ngot++] = (struct la){a->labels, a->nlabels, a->annotations, a->nannotations};
				}
			}
		/* Expected labels get alertname added, as promtool adds it. */
		struct la *exp = xcalloc(at->nexp + 1, sizeof *exp);
		struct label **owned = xcalloc(at->nexp + 1, sizeof *owned);
		for (size_t i = 0; i < at->nexp; i++) {
			const struct rules_exp_alert *x = &at->exp[i];
			struct label *l = xcalloc(x->nlabels + 1, sizeof *l);
			size_t n = 0;
			for (size_t j = 0; j < x->nlabels; j++)
				if (strcmp(x->labels[j].name, "alertname") != 0)
					l[n++] = x->labels[j];
			l[n++] = (struct label){"alertname", at->alertname};
			rules_labels_sort(l, n);
			owned[i] = l;
			exp[i] = (struct la){l, n, x->ann, x->nann};
		}
		qsort(got, ngot, sizeof *got, la_cmp);
		qsort(exp, at->nexp, sizeof *exp, la_cmp);
		bool same = ngot == at->nexp;
		for (size_t i = 0; same && i < ngot; i++)
			same = la_cmp(&got[i], &exp[i]) == 0;
		if (!same) {
			char ts[64];
			promql_format_duration(t, ts, sizeof ts);
			if (tg->name && *tg->name)
				buf_printf(errs, "    name: %s,\n", tg->name);
			buf_printf(errs, "    alertname: %s, time: %s, \n        exp:", at->alertname, ts);
			put_las(errs, exp, at->nexp);
			buf_puts(errs, ", \n        got:");
			put_las(errs, got, ngot);
			buf_puts(errs, "\n\n");
		}
		for (size_t i = 0; i < at->nexp; i++)
			free(owned[i]);
		free(owned);
		free(exp);
		free(got);
	}
}

static void run_group(const struct rules_test_file *f, const struct rules_test_group *tg,
		      const struct rules_group *const *groups, size_t ngroups, struct buf *errs)
{
	/* promtool 2.42 does not default the input interval: without
	 * `interval` every value lands at t = 0 and the first one wins. */
	int64_t interval = tg->interval_ms;
	int64_t ei = f->eval_interval_ms;
	struct memstore *ms = memstore_new(TEST_MAX_SERIES, TEST_MAX_SAMPLES);
	struct input *in = xcalloc(tg->ninputs + 1, sizeof *in);
	struct rules_group_state **st = xcalloc(ngroups + 1, sizeof *st);
	struct promql_opts opts;
	promql_opts_default(&opts);
	size_t len0 = errs->len;
	char err[512];
	int64_t *aet = NULL;
	size_t naet = 0, curr = 0;
	for (size_t i = 0; i < tg->ninputs; i++) {
		const struct rules_input_series *s = &tg->inputs[i];
		if (promql_parse_series_labels(s->series, &in[i].labels, &in[i].nlabels, err, sizeof err) ||
		    promql_parse_series_values(s->values, &in[i].vals, &in[i].nvals, err, sizeof err)) {
			buf_printf(errs, "    %s:%d:%d: %s\n", f->path, s->line, s->col, err);
			goto out;
		}
	}
	int64_t maxt = 0;
	for (size_t i = 0; i < tg->nexprs; i++)
		if (tg->exprs[i].eval_time_ms > maxt)
			maxt = tg->exprs[i].eval_time_ms;
	/* The distinct alert eval times, ascending (promtool's alertEvalTimes). */
	aet = xcalloc(tg->nalerts + 1, sizeof *aet);
	for (size_t i = 0; i < tg->nalerts; i++) {
		int64_t t = tg->alerts[i].eval_time_ms;
		if (t > maxt)
			maxt = t;
		bool seen = false;
		for (size_t k = 0; k < naet && !seen; k++)
			seen = aet[k] == t;
		if (!seen)
			aet[naet++] = t;
	}
	qsort(aet, naet, sizeof *aet, i64_cmp);
	if (maxt / ei >= RULES_TEST_MAX_EVAL_STEPS) {
		buf_printf(errs, "    more than %d rule evaluations up to the last eval_time\n",
			   RULES_TEST_MAX_EVAL_STEPS);
		goto out;
	}
	for (size_t g = 0; g < ngroups; g++) {
		st[g] = rules_group_state_new(groups[g]);
		rules_group_state_set_external(st[g], tg->ext_labels, tg->next_labels, tg->external_url);
	}
	/* As promtool: inputs are fed up to each evaluation time only, so a
	 * query after the last evaluation sees nothing newer than it. */
	for (int64_t ts = 0; ts <= maxt; ts += ei) {
		if (load_till(in, tg->ninputs, interval, ts, ms, errs))
			goto out;
		for (size_t g = 0; g < ngroups; g++)
			rules_group_eval(groups[g], st[g], ms, &opts, ts, errs);
		if (errs->len != len0)
			goto out;
		/* Alert tests whose eval_time falls in [ts, ts + interval) look
		 * at this evaluation. */
		for (; curr < naet && ts <= aet[curr] && aet[curr] < ts + ei; curr++)
			check_alerts(tg, aet[curr], groups, st, ngroups, errs);
	}
	for (size_t i = 0; i < tg->nexprs; i++)
		run_expr_test(&tg->exprs[i], ms, &opts, errs);
out:
	free(aet);
	for (size_t g = 0; g < ngroups; g++)
		rules_group_state_free(st[g]);
	free(st);
	for (size_t i = 0; i < tg->ninputs; i++) {
		free(in[i].labels);
		free(in[i].vals);
	}
	free(in);
	memstore_free(ms);
}

/* Resolve rule_files against the test file's folder (globs allowed, as
 * promtool's filepath.Glob) and load them. */
static int load_rule_files(const struct rules_test_file *f, struct rules_file ***out, size_t *nout,
			   struct buf *errs)
{
	char *copy = xstrdup(f->path);
	const char *dir = dirname(copy);
	struct rules_file **files = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (size_t i = 0; i < f->nrule_files && !rc; i++) {
		const char *rf = f->rule_files[i];
		struct buf p;
		buf_init(&p, 8192);
		/* filepath.Join cleans "./x" to "x"; so do we, for messages. */
		if (rf[0] == '/' || strcmp(dir, ".") == 0)
			buf_puts(&p, rf);
		else
			buf_printf(&p, "%s/%s", dir, rf);
		glob_t gl;
		int grc = p.failed ? GLOB_NOMATCH : glob(p.data, 0, NULL, &gl);
		if (grc == GLOB_NOMATCH) {
			/* promtool passes a pattern matching nothing through to
			 * the loader, which cannot open it. */
			gl.gl_pathc = 0;
			struct rules_file *rfile;
			rc = rules_file_load(p.data ? p.data : rf, &rfile, errs);
			if (!rc) {
				rules_file_free(rfile);
			}
			if (!rc)
				rc = GPULSE_ENOENT;
			buf_free(&p);
			break;
		}
		if (grc) {
			buf_printf(errs, "%s: cannot expand rule file pattern\n", rf);
			rc = GPULSE_EIO;
			buf_free(&p);
			break;
		}
		for (size_t k = 0; k < gl.gl_pathc && !rc; k++) {
			struct rules_file *rfile;
			rc = rules_file_load(gl.gl_pathv[k], &rfile, errs);
			if (rc)
				break;
			if (n == cap) {
				cap = cap ? cap * 2 : 4;
				files = xrealloc(files, cap * sizeof *files);
			}
			files[n++] = rfile;
		}
		globfree(&gl);
		buf_free(&p);
	}
	free(copy);
	*out = files;
	*nout = n;
	return rc;
}

int rules_test_run_file(const char *path, FILE *out)
{
	struct buf errs;
	buf_init(&errs, MAX_ERRS_BYTES);
	struct rules_test_file *f = NULL;
	struct rules_file **files = NULL;
	const struct rules_group **groups = NULL;
	size_t nfiles = 0, ngroups = 0;
	char *data = NULL;
	size_t len = 0;
	char e[300];
	int rc;

	fprintf(out, "Unit Testing:  %s\n", path);
	rc = rules_read_file(path, RULES_TEST_MAX_FILE_BYTES, &data, &len, e, sizeof e);
	if (rc) {
		buf_printf(&errs, "%s: %s\n", path, e);
		goto out;
	}
	if ((rc = rules_test_parse(path, data, len, &f, &errs)))
		goto out;
	if ((rc = load_rule_files(f, &files, &nfiles, &errs)))
		goto out;

	/* Groups in group_eval_order first, in that order, then the rest in
	 * file order. */
	size_t total = 0;
	for (size_t i = 0; i < nfiles; i++)
		total += files[i]->ngroups;
	groups = xcalloc(total + 1, sizeof *groups);
	bool *taken = xcalloc(total + 1, sizeof *taken);
	for (size_t o = 0; o < f->ngroup_order; o++) {
		size_t k = 0;
		for (size_t i = 0; i < nfiles; i++)
			for (size_t g = 0; g < files[i]->ngroups; g++, k++)
				if (!taken[k] && strcmp(files[i]->groups[g].name, f->group_order[o]) == 0) {
					taken[k] = true;
					groups[ngroups++] = &files[i]->groups[g];
				}
	}
	size_t k = 0;
	for (size_t i = 0; i < nfiles; i++)
		for (size_t g = 0; g < files[i]->ngroups; g++, k++)
			if (!taken[k])
				groups[ngroups++] = &files[i]->groups[g];
	free(taken);

	for (size_t t = 0; t < f->ntests; t++)
		run_group(f, &f->tests[t], groups, ngroups, &errs);
	rc = errs.len ? GPULSE_EINVAL : 0;
out:
	if (errs.len || rc) {
		fprintf(out, "  FAILED:\n%s", errs.data ? errs.data : "");
		if (errs.failed)
			fprintf(out, "    (more failures left out)\n");
		fputc('\n', out);
		if (!rc)
			rc = GPULSE_EINVAL;
	} else {
		fprintf(out, "  SUCCESS\n");
	}
	buf_free(&errs);
	free(groups);
	for (size_t i = 0; i < nfiles; i++)
		rules_file_free(files[i]);
	free(files);
	rules_test_file_free(f);
	free(data);
	return rc;
}
