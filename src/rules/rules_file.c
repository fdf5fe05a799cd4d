/* Rule files: parse (ytree), check as Prometheus's rulefmt does, and
 * evaluate recording rules group by group (rules_file.h). */
#include "rules/rules_file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules/alert_state.h"
#include "promql/lexer.h"
#include "promql/parser.h"
#include "rules/rules_util.h"
#include "common/stale.h"
#include "common/status.h"
#include "common/str.h"
#include "rules/template.h"
#include "common/xalloc.h"
#include "rules/ytree.h"

static void rule_free(struct rules_rule *r)
{
	free(r->record);
	free(r->alert);
	free(r->expr_text);
	promql_expr_free(r->expr);
	for (size_t i = 0; r->label_tmpls && i < r->nlabels; i++)
		tmpl_free(r->label_tmpls[i]);
	for (size_t i = 0; r->ann_tmpls && i < r->nannotations; i++)
		tmpl_free(r->ann_tmpls[i]);
	free(r->label_tmpls);
	free(r->ann_tmpls);
	rules_labels_free(r->labels, r->nlabels);
	rules_labels_free(r->annotations, r->nannotations);
}

void rules_file_free(struct rules_file *f)
{
	if (!f)
		return;
	for (size_t g = 0; g < f->ngroups; g++) {
		for (size_t r = 0; r < f->groups[g].nrules; r++)
			rule_free(&f->groups[g].rules[r]);
		free(f->groups[g].rules);
		free(f->groups[g].name);
	}
	free(f->groups);
	free(f->path);
	free(f);
}

size_t rules_file_count(const struct rules_file *f)
{
	size_t n = 0;
	for (size_t g = 0; f && g < f->ngroups; g++)
		n += f->groups[g].nrules;
	return n;
}

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

static const char *const rule_keys[] = {"record", "alert", "expr", "for", "keep_firing_for",
					"labels", "annotations", NULL};
static const char *const group_keys[] = {"name", "interval", "limit", "rules", NULL};
static const char *const top_keys[] = {"groups", NULL};

/* Parse a label map into owned labels; complaints name `what`. */
static int parse_label_map(struct ctx *c, const struct ynode *n, const char *what,
			   struct label **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	if (ynode_is_null(n))
		return 0;
	if (n->kind != YNODE_MAP) {
		perr(c, n, "%s must be a mapping of strings", what);
		return GPULSE_EPARSE;
	}
	if (n->n / 2 > RULES_MAX_LABELS) {
		perr(c, n, "more than %d %s", RULES_MAX_LABELS, what);
		return GPULSE_ELIMIT;
	}
	struct label *l = xcalloc(n->n / 2 + 1, sizeof *l);
	size_t k = 0;
	int rc = 0;
	for (size_t i = 0; i + 1 < n->n; i += 2) {
		const struct ynode *key = n->items[i], *val = n->items[i + 1];
		if (key->kind != YNODE_SCALAR || (val->kind != YNODE_SCALAR && !ynode_is_null(val))) {
			perr(c, key, "%s must be a mapping of strings", what);
			rc = GPULSE_EPARSE;
			continue;
		}
		l[k].name = xstrdup(key->value);
		l[k].value = xstrdup(ynode_is_null(val) ? "" : val->value);
		k++;
	}
	*out = l;
	*nout = k;
	return rc;
}

static int parse_duration_node(struct ctx *c, const struct ynode *n, const char *what, int64_t *ms)
{
	*ms = 0;
	if (ynode_is_null(n))
		return 0;
	if (n->kind != YNODE_SCALAR || promql_parse_duration(n->value, strlen(n->value), ms)) {
		perr(c, n, "%s: not a valid duration string: \"%s\"", what,
		     n->kind == YNODE_SCALAR ? n->value : ynode_kind_name(n));
		return GPULSE_EPARSE;
	}
	return 0;
}

static const char *scalar_or_null(struct ctx *c, const struct ynode *n, const char *what)
{
	if (ynode_is_null(n))
		return NULL;
	if (n->kind != YNODE_SCALAR) {
		perr(c, n, "%s must be a string, not %s", what, ynode_kind_name(n));
		return NULL;
	}
	return n->value;
}

/* Parse the templates of an alerting rule's label or annotation values
 * (map node n, already read into l[nl]) as Prometheus does when it loads
 * the rule, so a bad template is refused at load: promtool's message,
 * with the value's FILE:LINE:COL in front. */
static struct tmpl **parse_templates(struct ctx *c, const struct rules_group *g, size_t idx,
				     const char *rname, const struct ynode *n,
				     const struct label *l, size_t nl, const char *what)
{
	if (!nl)
		return NULL;
	struct tmpl **t = xcalloc(nl, sizeof *t);
	char tname[600];
	snprintf(tname, sizeof tname, "__alert_%s", rname);
	size_t k = 0;
	for (size_t i = 0; n && i + 1 < n->n && k < nl; i += 2) {
		const struct ynode *key = n->items[i], *val = n->items[i + 1];
		if (key->kind != YNODE_SCALAR || (val->kind != YNODE_SCALAR && !ynode_is_null(val)))
			continue;
		const char *text = l[k].value;
		if (strstr(text, "{{")) {
			char e[600];
			if (tmpl_parse(tname, text, &t[k], e, sizeof e))
				perr(c, ynode_is_null(val) ? key : val, "group \"%s\", rule %zu, \"%s\": %s \"%s\": %s",
				     g->name, idx + 1, rname, what, l[k].name, e);
		}
		k++;
	}
	return t;
}

static void parse_rule(struct ctx *c, const struct rules_group *g, size_t idx,
		       const struct ynode *n, struct rules_rule *r)
{
	r->line = n->line;
	r->col = n->col;
	if (n->kind != YNODE_MAP) {
		perr(c, n, "group \"%s\", rule %zu: a rule must be a mapping", g->name, idx + 1);
		return;
	}
	if (rules_check_keys(c->path, n, rule_keys, "rulefmt.RuleNode", c->errs, &c->nerr))
		return;
	const struct ynode *record = rules_map_get(n, "record"), *alert = rules_map_get(n, "alert");
	const struct ynode *expr = rules_map_get(n, "expr"), *forn = rules_map_get(n, "for");
	const struct ynode *kff = rules_map_get(n, "keep_firing_for");
	const struct ynode *labels = rules_map_get(n, "labels"), *ann = rules_map_get(n, "annotations");
	const char *rec_s = scalar_or_null(c, record, "record");
	const char *alert_s = scalar_or_null(c, alert, "alert");
	const char *expr_s = scalar_or_null(c, expr, "expr");
	if (rec_s && !*rec_s)
		rec_s = NULL;
	if (alert_s && !*alert_s)
		alert_s = NULL;
	const char *rname = alert_s ? alert_s : rec_s ? rec_s : "";
	const struct ynode *at = rec_s ? record : alert_s ? alert : n;
	r->record = rec_s ? xstrdup(rec_s) : NULL;
	r->alert = alert_s ? xstrdup(alert_s) : NULL;
	if (rec_s && alert_s)
		perr(c, record, "group \"%s\", rule %zu, \"%s\": only one of 'record' and 'alert' must be set",
		     g->name, idx + 1, rname);
	if (!rec_s && !alert_s)
		perr(c, n, "group \"%s\", rule %zu, \"%s\": one of 'record' or 'alert' must be set", g->name,
		     idx + 1, rname);
	if (!expr_s || !*expr_s) {
		perr(c, expr ? expr : at, "group \"%s\", rule %zu, \"%s\": field 'expr' must be set in rule",
		     g->name, idx + 1, rname);
	} else {
		char e[512];
		r->expr_text = xstrdup(expr_s);
		if (promql_parse(expr_s, &r->expr, e, sizeof e))
			perr(c, expr, "group \"%s\", rule %zu, \"%s\": could not parse expression: %s",
			     g->name, idx + 1, rname, e);
	}
	parse_duration_node(c, forn, "for", &r->for_ms);
	parse_duration_node(c, kff, "keep_firing_for", &r->keep_firing_for_ms);
	parse_label_map(c, labels, "labels", &r->labels, &r->nlabels);
	parse_label_map(c, ann, "annotations", &r->annotations, &r->nannotations);
	if (rec_s) {
		if (!ynode_is_null(ann))
			perr(c, ann, "group \"%s\", rule %zu, \"%s\": invalid field 'annotations' in recording rule",
			     g->name, idx + 1, rname);
		if (!ynode_is_null(forn))
			perr(c, forn, "group \"%s\", rule %zu, \"%s\": invalid field 'for' in recording rule",
			     g->name, idx + 1, rname);
		if (!ynode_is_null(kff))
			perr(c, kff, "group \"%s\", rule %zu, \"%s\": invalid field 'keep_firing_for' in recording rule",
			     g->name, idx + 1, rname);
		if (!rules_valid_metric_name(rec_s))
			perr(c, record, "group \"%s\", rule %zu, \"%s\": invalid recording rule name: %s",
			     g->name, idx + 1, rname, rec_s);
	}
	if (alert_s) {
		r->label_tmpls = parse_templates(c, g, idx, rname, labels, r->labels, r->nlabels, "label");
		r->ann_tmpls = parse_templates(c, g, idx, rname, ann, r->annotations, r->nannotations,
					       "annotation");
	}
	for (size_t i = 0; i < r->nlabels; i++)
		if (!rules_valid_label_name(r->labels[i].name))
			perr(c, labels, "group \"%s\", rule %zu, \"%s\": invalid label name: %s", g->name,
			     idx + 1, rname, r->labels[i].name);
	for (size_t i = 0; i < r->nannotations; i++)
		if (!rules_valid_label_name(r->annotations[i].name))
			perr(c, ann, "group \"%s\", rule %zu, \"%s\": invalid annotation name: %s", g->name,
			     idx + 1, rname, r->annotations[i].name);
}

static void parse_group(struct ctx *c, const struct ynode *n, struct rules_group *g, size_t *total)
{
	g->line = n->line;
	g->col = n->col;
	if (n->kind != YNODE_MAP) {
		perr(c, n, "a group must be a mapping, not %s", ynode_kind_name(n));
		g->name = xstrdup("");
		return;
	}
	if (rules_check_keys(c->path, n, group_keys, "rulefmt.RuleGroup", c->errs, &c->nerr)) {
		g->name = xstrdup("");
		return;
	}
	const char *name = scalar_or_null(c, rules_map_get(n, "name"), "name");
	g->name = xstrdup(name ? name : "");
	parse_duration_node(c, rules_map_get(n, "interval"), "interval", &g->interval_ms);
	const char *lim = scalar_or_null(c, rules_map_get(n, "limit"), "limit");
	if (lim) {
		char *end;
		errno = 0;
		long long v = strtoll(lim, &end, 10);
		if (errno || end == lim || *end)
			perr(c, rules_map_get(n, "limit"), "limit: cannot unmarshal \"%s\" into int", lim);
		g->limit = v;
	}
	const struct ynode *rules = rules_map_get(n, "rules");
	if (ynode_is_null(rules))
		return;
	if (rules->kind != YNODE_SEQ) {
		perr(c, rules, "rules must be a sequence, not %s", ynode_kind_name(rules));
		return;
	}
	if (*total + rules->n > RULES_MAX_RULES) {
		perr(c, rules, "more than %d rules in one file", RULES_MAX_RULES);
		return;
	}
	*total += rules->n;
	g->rules = xcalloc(rules->n ? rules->n : 1, sizeof *g->rules);
	g->nrules = rules->n;
	for (size_t i = 0; i < rules->n; i++)
		parse_rule(c, g, i, rules->items[i], &g->rules[i]);
}

int rules_file_parse(const char *path, const char *data, size_t len, struct rules_file **out,
		     struct buf *errs)
{
	struct ctx c = {.path = path, .errs = errs};
	struct ynode *root = NULL;
	char e[512];
	*out = NULL;
	if (len > RULES_MAX_FILE_BYTES) {
		buf_printf(errs, "%s: file larger than %d bytes\n", path, RULES_MAX_FILE_BYTES);
		return GPULSE_ELIMIT;
	}
	int rc = ytree_parse(data, len, &root, e, sizeof e);
	if (rc) {
		buf_printf(errs, "%s:%s\n", path, e);
		return rc;
	}
	struct rules_file *f = xcalloc(1, sizeof *f);
	f->path = xstrdup(path);
	if (!ynode_is_null(root)) {
		if (root->kind != YNODE_MAP) {
			perr(&c, root, "a rule file must be a mapping with \"groups\", not %s",
			     ynode_kind_name(root));
			goto out;
		}
		if (rules_check_keys(path, root, top_keys, "rulefmt.RuleGroups", errs, &c.nerr))
			goto out;
		const struct ynode *groups = rules_map_get(root, "groups");
		if (ynode_is_null(groups))
			goto out;
		if (groups->kind != YNODE_SEQ) {
			perr(&c, groups, "groups must be a sequence, not %s", ynode_kind_name(groups));
			goto out;
		}
		if (groups->n > RULES_MAX_GROUPS) {
			perr(&c, groups, "more than %d groups", RULES_MAX_GROUPS);
			goto out;
		}
		f->groups = xcalloc(groups->n ? groups->n : 1, sizeof *f->groups);
		f->ngroups = groups->n;
		size_t total = 0;
		for (size_t i = 0; i < groups->n; i++) {
			struct rules_group *g = &f->groups[i];
			parse_group(&c, groups->items[i], g, &total);
			if (groups->items[i]->kind != YNODE_MAP)
				continue;
			if (!*g->name)
				perr(&c, groups->items[i], "Groupname must not be empty");
			for (size_t j = 0; j < i; j++)
				if (*g->name && strcmp(f->groups[j].name, g->name) == 0) {
					perr(&c, groups->items[i], "groupname: \"%s\" is repeated in the same file",
					     g->name);
					break;
				}
		}
	}
out:
	ytree_free(root);
	if (c.nerr) {
		rules_file_free(f);
		return GPULSE_EPARSE;
	}
	*out = f;
	return 0;
}

int rules_file_load(const char *path, struct rules_file **out, struct buf *errs)
{
	char *data = NULL;
	size_t len = 0;
	char e[300];
	*out = NULL;
	int rc = rules_read_file(path, RULES_MAX_FILE_BYTES, &data, &len, e, sizeof e);
	if (rc) {
		buf_printf(errs, "%s: %s\n", path, e);
		return rc;
	}
	rc = rules_file_parse(path, data, len, out, errs);
	free(data);
	return rc;
}

/* ---- evaluation ------------------------------------------------------ */

/* One series a rule produced at its previous evaluation. */
struct prev_series {
	struct label *labels; /* owned strings */
	size_t n;
};

struct rule_state {
	struct prev_series *series;
	size_t n;
};

struct rules_group_state {
	const struct rules_group *g;
	struct rule_state *rules; /* one per rule of g */
	struct alert_rule_state *alerts; /* one per rule of g (used by alerting rules) */
	struct label *ext;  /* owned strings */
	size_t next;
	char *url;
};

static void prev_free(struct rule_state *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		rules_labels_free(rs->series[i].labels, rs->series[i].n);
	free(rs->series);
	rs->series = NULL;
	rs->n = 0;
}

struct rules_group_state *rules_group_state_new(const struct rules_group *g)
{
	struct rules_group_state *s = xcalloc(1, sizeof *s);
	s->g = g;
	s->rules = xcalloc(g->nrules ? g->nrules : 1, sizeof *s->rules);
	s->alerts = xcalloc(g->nrules ? g->nrules : 1, sizeof *s->alerts);
	return s;
}

void rules_group_state_set_external(struct rules_group_state *s, const struct label *ext,
				    size_t next, const char *url)
{
	rules_labels_free(s->ext, s->next);
	free(s->url);
	s->ext = xcalloc(next + 1, sizeof *s->ext);
	for (size_t i = 0; i < next; i++) {
		s->ext[i].name = xstrdup(ext[i].name);
		s->ext[i].value = xstrdup(ext[i].value);
	}
	s->next = next;
	s->url = url ? xstrdup(url) : NULL;
}

const struct alert_rule_state *rules_group_state_alerts(const struct rules_group_state *s, size_t ri)
{
	if (ri >= s->g->nrules || !s->g->rules[ri].alert)
		return NULL;
	return &s->alerts[ri];
}

void rules_group_state_free(struct rules_group_state *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->g->nrules; i++) {
		prev_free(&s->rules[i]);
		alert_rule_state_clear(&s->alerts[i]);
	}
	free(s->rules);
	free(s->alerts);
	rules_labels_free(s->ext, s->next);
	free(s->url);
	free(s);
}

static int prev_cmp(const void *a, const void *b)
{
	const struct prev_series *x = a, *y = b;
	return rules_labels_cmp(x->labels, x->n, y->labels, y->n);
}

/* The labels of a recorded series: the result's labels without its name,
 * the rule's labels over them (an empty value removes the label), and
 * __name__ = record; sorted. */
static struct prev_series relabel(const struct rules_rule *r, const struct label *in, size_t nin)
{
	struct prev_series p;
	p.labels = xcalloc(nin + r->nlabels + 1, sizeof *p.labels);
	p.n = 0;
	for (size_t i = 0; i < nin; i++) {
		if (strcmp(in[i].name, "__name__") == 0)
			continue;
		bool overridden = false;
		for (size_t j = 0; j < r->nlabels && !overridden; j++)
			overridden = strcmp(r->labels[j].name, in[i].name) == 0;
		if (overridden)
			continue;
		p.labels[p.n].name = xstrdup(in[i].name);
		p.labels[p.n].value = xstrdup(in[i].value);
		p.n++;
	}
	for (size_t j = 0; j < r->nlabels; j++) {
		if (!*r->labels[j].value || strcmp(r->labels[j].name, "__name__") == 0)
			continue;
		p.labels[p.n].name = xstrdup(r->labels[j].name);
		p.labels[p.n].value = xstrdup(r->labels[j].value);
		p.n++;
	}
	p.labels[p.n].name = xstrdup("__name__");
	p.labels[p.n].value = xstrdup(r->record);
	p.n++;
	rules_labels_sort(p.labels, p.n);
	return p;
}

/* An owned copy of a label set. */
static struct prev_series copy_series(const struct label *l, size_t n)
{
	struct prev_series p = {.labels = xcalloc(n + 1, sizeof *p.labels), .n = n};
	for (size_t i = 0; i < n; i++) {
		p.labels[i].name = xstrdup(l[i].name);
		p.labels[i].value = xstrdup(l[i].value);
	}
	return p;
}

/* An alerting rule: update its alerts, then the ALERTS and
 * ALERTS_FOR_STATE series of the pending and firing ones. */
static int alert_series(const struct rules_rule *r, struct rules_group_state *gs, size_t ri,
			const struct promql_result *res, int64_t t_ms, struct prev_series **cur_out,
			double **vals_out, size_t *n_out, char *err, size_t errlen)
{
	struct alert_rule_state *as = &gs->alerts[ri];
	struct alert_opts ao = {.ext_labels = gs->ext, .next_labels = gs->next, .external_url = gs->url};
	int rc = alert_rule_eval(as, r, res, t_ms, &ao, err, errlen);
	if (rc)
		return rc;
	struct prev_series *cur = xcalloc(2 * as->n + 1, sizeof *cur);
	double *vals = xcalloc(2 * as->n + 1, sizeof *vals);
	size_t n = 0;
	struct label l[RULES_MAX_LABELS + 8];
	for (size_t i = 0; i < as->n; i++) {
		const struct alert *a = &as->alerts[i];
		if (a->state == ALERT_INACTIVE)
			continue;
		for (int fs = 0; fs < 2; fs++) {
			size_t nl = alert_series_labels(a, fs, l, sizeof l / sizeof l[0]);
			if (!nl)
				continue;
			cur[n] = copy_series(l, nl);
			vals[n] = fs ? (double)(a->active_at_ms / 1000) : 1.0;
			n++;
		}
	}
	*cur_out = cur;
	*vals_out = vals;
	*n_out = n;
	return 0;
}

static int eval_rule(const struct rules_rule *r, struct rules_group_state *gs, size_t ri,
		     struct memstore *ms, const struct promql_opts *opts, int64_t t_ms, char *err,
		     size_t errlen)
{
	struct rule_state *rs = &gs->rules[ri];
	struct promql_result *res = NULL;
	int rc = promql_eval_instant(r->expr, &memstore_queryable, ms, opts, t_ms, &res, err, errlen);
	if (rc)
		return rc;
	struct prev_series *cur = NULL;
	double *vals = NULL;
	size_t n = 0;
	if (r->alert) {
		rc = alert_series(r, gs, ri, res, t_ms, &cur, &vals, &n, err, errlen);
		promql_result_free(res);
		if (rc)
			return rc;
	} else if (res->type == PROMQL_TYPE_SCALAR) {
		cur = xcalloc(1, sizeof *cur);
		vals = xcalloc(1, sizeof *vals);
		cur[0] = relabel(r, NULL, 0);
		vals[0] = res->scalar;
		n = 1;
	} else if (res->type == PROMQL_TYPE_VECTOR) {
		cur = xcalloc(res->nseries + 1, sizeof *cur);
		vals = xcalloc(res->nseries + 1, sizeof *vals);
		for (; n < res->nseries; n++) {
			cur[n] = relabel(r, res->series[n].labels, res->series[n].nlabels);
			vals[n] = res->series[n].npoints ? res->series[n].points[0].v : NAN;
		}
	} else {
		str_errf(err, errlen, "rule result is not a vector or scalar");
		promql_result_free(res);
		return GPULSE_EINVAL;
	}
	if (!r->alert)
		promql_result_free(res);

	/* Sorted copies find duplicates and vanished series in n log n. */
	struct prev_series *sorted = xcalloc(n + 1, sizeof *sorted);
	memcpy(sorted, cur, n * sizeof *cur);
	qsort(sorted, n, sizeof *sorted, prev_cmp);
	for (size_t i = 1; i < n; i++)
		if (prev_cmp(&sorted[i - 1], &sorted[i]) == 0) {
			str_errf(err, errlen, "vector contains metrics with the same labelset after applying rule labels");
			rc = GPULSE_EINVAL;
			goto out;
		}
	for (size_t i = 0; i < n; i++) {
		int arc = memstore_add(ms, cur[i].labels, cur[i].n, t_ms, vals[i]);
		/* Prometheus drops out-of-order and duplicate samples with a
		 * warning; only a full store is an error. */
		if (arc == GPULSE_ELIMIT) {
			str_errf(err, errlen, "too many series or samples in the test store");
			rc = arc;
			goto out;
		}
	}
	for (size_t i = 0; i < rs->n; i++)
		if (!bsearch(&rs->series[i], sorted, n, sizeof *sorted, prev_cmp))
			memstore_add(ms, rs->series[i].labels, rs->series[i].n, t_ms, stale_nan());
	prev_free(rs);
	rs->series = cur;
	rs->n = n;
	cur = NULL;
	n = 0;
out:
	for (size_t i = 0; i < n; i++)
		rules_labels_free(cur[i].labels, cur[i].n);
	free(cur);
	free(sorted);
	free(vals);
	return rc;
}

int rules_group_eval(const struct rules_group *g, struct rules_group_state *s, struct memstore *ms,
		     const struct promql_opts *opts, int64_t t_ms, struct buf *errs)
{
	int first = 0;
	for (size_t i = 0; i < g->nrules; i++) {
		const struct rules_rule *r = &g->rules[i];
		if (!r->expr)
			continue;
		char err[512];
		int rc = eval_rule(r, s, i, ms, opts, t_ms, err, sizeof err);
		if (rc) {
			char ts[64];
			promql_format_duration(t_ms, ts, sizeof ts);
			buf_printf(errs, "    rule: %s, time: %s, err: %s\n", r->record ? r->record : r->alert,
				   ts, err);
			if (!first)
				first = rc;
		}
	}
	return first;
}
