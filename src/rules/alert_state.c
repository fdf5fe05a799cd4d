/* The alert state machine (alert_state.h), after Prometheus's
 * rules/alerting.go: Eval, needsSending, the ALERTS series, and the API's
 * alert objects. */
#include "rules/alert_state.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/hash.h"
#include "rules/rules_util.h"
#include "common/status.h"
#include "common/str.h"
#include "rules/template.h"
#include "common/xalloc.h"

const char *alert_state_name(enum alert_state s)
{
	return s == ALERT_FIRING ? "firing" : s == ALERT_PENDING ? "pending" : "inactive";
}

/* FNV-1a over the label set, but from 1469598103934665603, not FNV's
 * offset basis (14695981039346656037: the first copy dropped a digit).
 * The fingerprint names alert records in the store and goes out in the
 * webhook's "fingerprint", so an upgrade must not change it. */
#define ALERT_FP_SEED 1469598103934665603ULL

uint64_t alert_fingerprint(const struct label *l, size_t n)
{
	uint64_t h = ALERT_FP_SEED;
	for (size_t i = 0; i < n; i++)
		h = fnv1a64_add_field(fnv1a64_add_field(h, l[i].name), l[i].value);
	return h;
}

void alert_free(struct alert *a)
{
	if (!a)
		return;
	rules_labels_free(a->labels, a->nlabels);
	rules_labels_free(a->annotations, a->nannotations);
	a->labels = a->annotations = NULL;
	a->nlabels = a->nannotations = 0;
}

void alert_rule_state_clear(struct alert_rule_state *s)
{
	for (size_t i = 0; i < s->n; i++)
		alert_free(&s->alerts[i]);
	free(s->alerts);
	s->alerts = NULL;
	s->n = s->cap = 0;
}

static struct alert *find(struct alert_rule_state *s, uint64_t fp)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->alerts[i].fp == fp)
			return &s->alerts[i];
	return NULL;
}

static struct alert *add_slot(struct alert_rule_state *s)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 8;
		s->alerts = xrealloc(s->alerts, s->cap * sizeof *s->alerts);
	}
	struct alert *a = &s->alerts[s->n++];
	memset(a, 0, sizeof *a);
	return a;
}

int alert_rule_state_adopt(struct alert_rule_state *s, struct alert *a)
{
	if (s->n >= ALERT_MAX_PER_RULE)
		return GPULSE_ELIMIT;
	struct alert *old = find(s, a->fp);
	if (old) {
		alert_free(old);
		*old = *a;
	} else {
		*add_slot(s) = *a;
	}
	memset(a, 0, sizeof *a);
	return 0;
}

/* The expanded value of a rule label or annotation. */
static char *expand(const struct tmpl *t, const char *text, const struct tmpl_data *d)
{
	if (!t)
		return xstrdup(text);
	struct buf b;
	buf_init(&b, TMPL_MAX_OUTPUT + 1024);
	tmpl_expand(t, d, &b);
	char *s = buf_steal(&b);
	return s ? s : xstrdup("");
}

/* One sample of the result turned into an alert's labels and annotations
 * (not yet in the state). */
struct candidate {
	struct label *labels;
	size_t nlabels;
	struct label *ann;
	size_t nann;
	uint64_t fp;
	double value;
};

static void candidate_free(struct candidate *c)
{
	rules_labels_free(c->labels, c->nlabels);
	rules_labels_free(c->ann, c->nann);
}

static void make_candidate(const struct rules_rule *r, const struct label *in, size_t nin,
			   double v, const struct alert_opts *o, struct candidate *c)
{
	/* $labels: the sample's, then (ext_in_template_labels) each external
	 * label it lacks, as alert_item_new adds them on the way out. */
	struct label *tl = NULL;
	size_t ntl = nin;
	if (o->ext_in_template_labels && o->next_labels) {
		tl = xcalloc(nin + o->next_labels, sizeof *tl);
		memcpy(tl, in, nin * sizeof *tl);
		for (size_t k = 0; k < o->next_labels; k++) {
			bool have = false;
			for (size_t i = 0; i < nin && !have; i++)
				have = strcmp(in[i].name, o->ext_labels[k].name) == 0 && in[i].value[0];
			if (!have && o->ext_labels[k].value[0])
				tl[ntl++] = o->ext_labels[k];
		}
	}
	struct tmpl_data d = {.labels = tl ? tl : in, .nlabels = ntl, .ext_labels = o->ext_labels,
			      .next_labels = o->next_labels, .external_url = o->external_url, .value = v};
	c->value = v;
	c->labels = xcalloc(nin + r->nlabels + 2, sizeof *c->labels);
	c->nlabels = 0;
	/* Rule labels first, expanded; they replace the sample's. */
	char **rv = xcalloc(r->nlabels + 1, sizeof *rv);
	for (size_t j = 0; j < r->nlabels; j++)
		rv[j] = expand(r->label_tmpls ? r->label_tmpls[j] : NULL, r->labels[j].value, &d);
	for (size_t i = 0; i < nin; i++) {
		if (strcmp(in[i].name, "__name__") == 0 || strcmp(in[i].name, "alertname") == 0)
			continue;
		bool over = false;
		for (size_t j = 0; j < r->nlabels && !over; j++)
			over = strcmp(r->labels[j].name, in[i].name) == 0;
		if (over || !in[i].value[0])
			continue;
		c->labels[c->nlabels].name = xstrdup(in[i].name);
		c->labels[c->nlabels].value = xstrdup(in[i].value);
		c->nlabels++;
	}
	for (size_t j = 0; j < r->nlabels; j++) {
		if (!rv[j][0] || strcmp(r->labels[j].name, "alertname") == 0 ||
		    strcmp(r->labels[j].name, "__name__") == 0) {
			free(rv[j]);
			continue;
		}
		c->labels[c->nlabels].name = xstrdup(r->labels[j].name);
		c->labels[c->nlabels].value = rv[j];
		c->nlabels++;
	}
	free(rv);
	c->labels[c->nlabels].name = xstrdup("alertname");
	c->labels[c->nlabels].value = xstrdup(r->alert);
	c->nlabels++;
	rules_labels_sort(c->labels, c->nlabels);
	c->fp = alert_fingerprint(c->labels, c->nlabels);
	c->ann = xcalloc(r->nannotations + 1, sizeof *c->ann);
	c->nann = 0;
	for (size_t j = 0; j < r->nannotations; j++) {
		c->ann[c->nann].name = xstrdup(r->annotations[j].name);
		c->ann[c->nann].value = expand(r->ann_tmpls ? r->ann_tmpls[j] : NULL,
					       r->annotations[j].value, &d);
		c->nann++;
	}
	free(tl);
	rules_labels_sort(c->ann, c->nann);
}

static int cand_cmp(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	return x->fp < y->fp ? -1 : x->fp > y->fp;
}

static void flip(struct alert *a, int64_t t_ms)
{
	a->flips[a->nflips % ALERT_FLAP_RING] = t_ms;
	a->nflips++;
}

/* Toggles of a within (t - window, t]. */
static size_t flips_within(const struct alert *a, int64_t t_ms, int64_t window_ms)
{
	size_t have = a->nflips < ALERT_FLAP_RING ? a->nflips : ALERT_FLAP_RING;
	size_t n = 0;
	for (size_t i = 0; i < have; i++)
		if (a->flips[i] > t_ms - window_ms)
			n++;
	return n;
}

static int64_t last_flip(const struct alert *a)
{
	return a->nflips ? a->flips[(a->nflips - 1) % ALERT_FLAP_RING] : 0;
}

int alert_rule_eval(struct alert_rule_state *s, const struct rules_rule *r,
		    const struct promql_result *res, int64_t t_ms, const struct alert_opts *o,
		    char *err, size_t errlen)
{
	size_t nin = 0;
	if (res->type == PROMQL_TYPE_SCALAR)
		nin = 1;
	else if (res->type == PROMQL_TYPE_VECTOR)
		nin = res->nseries;
	else {
		str_errf(err, errlen, "rule result is not a vector or scalar");
		return GPULSE_EINVAL;
	}
	struct candidate *c = xcalloc(nin + 1, sizeof *c);
	size_t nc = 0;
	int rc = 0;
	for (size_t i = 0; i < nin; i++) {
		if (res->type == PROMQL_TYPE_SCALAR) {
			make_candidate(r, NULL, 0, res->scalar, o, &c[nc++]);
		} else {
			const struct promql_result_series *rs = &res->series[i];
			if (!rs->npoints)
				continue;
			make_candidate(r, rs->labels, rs->nlabels, rs->points[0].v, o, &c[nc++]);
		}
	}
	/* Sorted by fingerprint: duplicates are neighbours, lookups binary. */
	qsort(c, nc, sizeof *c, cand_cmp);
	for (size_t i = 1; i < nc; i++)
		if (c[i].fp == c[i - 1].fp) {
			str_errf(err, errlen, "vector contains metrics with the same labelset after applying "
				 "alert labels");
			rc = GPULSE_EINVAL;
			goto out;
		}
	size_t newcount = 0;
	for (size_t i = 0; i < nc; i++)
		if (!find(s, c[i].fp))
			newcount++;
	if (s->n + newcount > ALERT_MAX_PER_RULE) {
		str_errf(err, errlen, "more than %d alerts for one rule", ALERT_MAX_PER_RULE);
		rc = GPULSE_ELIMIT;
		goto out;
	}
	bool flap = o->flap_max_toggles > 0 && o->flap_window_ms > 0;
	for (size_t i = 0; i < nc; i++) {
		struct alert *a = find(s, c[i].fp);
		if (a && a->state != ALERT_INACTIVE) {
			a->value = c[i].value;
			rules_labels_free(a->annotations, a->nannotations);
			a->annotations = c[i].ann;
			a->nannotations = c[i].nann;
			c[i].ann = NULL;
			c[i].nann = 0;
			continue;
		}
		/* New, or back after resolving: a new alert, pending from now.
		 * The flap history of a resolved one carries over. */
		int64_t flips[ALERT_FLAP_RING];
		size_t nflips = 0;
		if (a) {
			memcpy(flips, a->flips, sizeof flips);
			nflips = a->nflips;
			alert_free(a);
			memset(a, 0, sizeof *a);
		} else {
			a = add_slot(s);
		}
		a->labels = c[i].labels;
		a->nlabels = c[i].nlabels;
		a->annotations = c[i].ann;
		a->nannotations = c[i].nann;
		c[i].labels = c[i].ann = NULL;
		c[i].nlabels = c[i].nann = 0;
		a->fp = c[i].fp;
		a->state = ALERT_PENDING;
		a->active_at_ms = t_ms;
		a->value = c[i].value;
		memcpy(a->flips, flips, sizeof flips);
		a->nflips = nflips;
		a->dirty = true;
	}
	/* Walk every alert: resolve, keep firing, hold, fire. */
	for (size_t i = 0; i < s->n;) {
		struct alert *a = &s->alerts[i];
		struct candidate key = {.fp = a->fp};
		bool present = bsearch(&key, c, nc, sizeof *c, cand_cmp) != NULL;
		bool was_cond = a->last_cond;
		a->last_cond = present;
		if (!present) {
			bool keep = false;
			if (a->state == ALERT_FIRING && r->keep_firing_for_ms > 0) {
				if (a->keep_firing_since_ms == 0) {
					a->keep_firing_since_ms = t_ms;
					a->dirty = true;
				}
				keep = t_ms - a->keep_firing_since_ms < r->keep_firing_for_ms;
			}
			if (a->state == ALERT_FIRING && !keep && flap) {
				if (!a->held) {
					/* This resolve would be one more toggle. */
					if (flips_within(a, t_ms, o->flap_window_ms) + 1 >
					    (size_t)o->flap_max_toggles) {
						a->held = true;
						a->dirty = true;
						s->flaps_held_total++;
						flip(a, t_ms);
					}
				} else if (was_cond) {
					flip(a, t_ms);
				}
				if (a->held) {
					if (t_ms - last_flip(a) < o->flap_window_ms)
						keep = true;
					else
						a->held = false;
				}
			}
			if (a->state == ALERT_PENDING ||
			    (a->resolved_at_ms && t_ms - a->resolved_at_ms > ALERT_RESOLVED_RETENTION_MS)) {
				alert_free(a);
				s->alerts[i] = s->alerts[--s->n];
				continue;
			}
			if (a->state != ALERT_INACTIVE && !keep) {
				if (flap && a->state == ALERT_FIRING)
					flip(a, t_ms);
				a->state = ALERT_INACTIVE;
				a->resolved_at_ms = t_ms;
				a->held = false;
				a->dirty = true;
			}
			i++;
			continue;
		}
		if (a->keep_firing_since_ms) {
			a->keep_firing_since_ms = 0;
			a->dirty = true;
		}
		if (a->held && !was_cond)
			flip(a, t_ms);
		if (a->held && t_ms - last_flip(a) >= o->flap_window_ms) {
			a->held = false; /* stable (firing) for the window */
			a->dirty = true;
		}
		if (a->state == ALERT_PENDING && t_ms - a->active_at_ms >= r->for_ms) {
			a->state = ALERT_FIRING;
			a->fired_at_ms = t_ms;
			a->dirty = true;
			if (flap)
				flip(a, t_ms);
		}
		i++;
	}
out:
	for (size_t i = 0; i < nc; i++)
		candidate_free(&c[i]);
	free(c);
	return rc;
}

bool alert_needs_sending(const struct alert *a, int64_t t_ms, int64_t resend_ms)
{
	if (a->state == ALERT_PENDING)
		return false;
	if (a->resolved_at_ms > a->last_sent_ms)
		return true;
	return a->last_sent_ms + resend_ms < t_ms;
}

size_t alert_series_labels(const struct alert *a, bool for_state, struct label *out,
			   size_t max)
{
	if (a->nlabels + 2 > max)
		return 0;
	size_t n = 0;
	out[n++] = (struct label){"__name__", for_state ? "ALERTS_FOR_STATE" : "ALERTS"};
	for (size_t i = 0; i < a->nlabels; i++)
		if (strcmp(a->labels[i].name, "alertstate") != 0)
			out[n++] = a->labels[i];
	if (!for_state)
		out[n++] = (struct label){"alertstate", alert_state_name(a->state)};
	rules_labels_sort(out, n);
	return n;
}

enum alert_state alert_rule_state_max(const struct alert_rule_state *s)
{
	enum alert_state m = ALERT_INACTIVE;
	for (size_t i = 0; i < s->n; i++)
		if (s->alerts[i].state > m)
			m = s->alerts[i].state;
	return m;
}

void alert_format_value(struct buf *b, double v)
{
	if (isnan(v)) {
		buf_puts(b, "NaN");
		return;
	}
	if (isinf(v)) {
		buf_puts(b, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	struct buf t;
	buf_init(&t, 64);
	rules_format_e(&t, v);
	for (size_t i = 0; t.data && i < t.len; i++)
		t.data[i] = (char)tolower((unsigned char)t.data[i]);
	if (t.data)
		buf_puts(b, t.data);
	buf_free(&t);
}

void alert_format_time(struct buf *b, int64_t t_ms)
{
	buf_put_rfc3339(b, t_ms, true);
}

void alert_write_json(struct buf *b, const struct alert *a)
{
	buf_puts(b, "{\"labels\":");
	promql_put_json_labels(b, a->labels, a->nlabels);
	buf_puts(b, ",\"annotations\":");
	promql_put_json_labels(b, a->annotations, a->nannotations);
	buf_printf(b, ",\"state\":\"%s\",\"activeAt\":\"", alert_state_name(a->state));
	alert_format_time(b, a->active_at_ms);
	buf_puts(b, "\",\"value\":\"");
	alert_format_value(b, a->value);
	buf_putc(b, '"');
	if (a->keep_firing_since_ms) {
		buf_puts(b, ",\"keepFiringSince\":\"");
		alert_format_time(b, a->keep_firing_since_ms);
		buf_putc(b, '"');
	}
	buf_putc(b, '}');
}

/* ---- persistence ------------------------------------------------------- */

int alert_to_json(const struct alert *a, struct buf *b)
{
	buf_puts(b, "{\"labels\":");
	promql_put_json_labels(b, a->labels, a->nlabels);
	buf_puts(b, ",\"annotations\":");
	promql_put_json_labels(b, a->annotations, a->nannotations);
	buf_printf(b, ",\"state\":\"%s\",\"value\":", alert_state_name(a->state));
	if (isfinite(a->value))
		buf_put_double(b, a->value);
	else
		buf_puts(b, "null");
	buf_printf(b, ",\"active_at_ms\":%" PRId64 ",\"fired_at_ms\":%" PRId64
		   ",\"resolved_at_ms\":%" PRId64 ",\"last_sent_ms\":%" PRId64
		   ",\"valid_until_ms\":%" PRId64 ",\"keep_firing_since_ms\":%" PRId64
		   ",\"held\":%s,\"flips\":[",
		   a->active_at_ms, a->fired_at_ms, a->resolved_at_ms, a->last_sent_ms,
		   a->valid_until_ms, a->keep_firing_since_ms, a->held ? "true" : "false");
	size_t have = a->nflips < ALERT_FLAP_RING ? a->nflips : ALERT_FLAP_RING;
	for (size_t k = 0; k < have; k++) {
		size_t idx = (a->nflips - have + k) % ALERT_FLAP_RING;
		buf_printf(b, "%s%" PRId64, k ? "," : "", a->flips[idx]);
	}
	return buf_puts(b, "]}");
}

static int labels_from(json_t *o, struct label **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!json_is_object(o) || json_object_size(o) > RULES_MAX_LABELS + 2)
		return GPULSE_EPARSE;
	struct label *l = xcalloc(json_object_size(o) + 1, sizeof *l);
	size_t k = 0;
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		if (!json_is_string(v)) {
			rules_labels_free(l, k);
			return GPULSE_EPARSE;
		}
		l[k].name = xstrdup(key);
		l[k].value = xstrdup(json_string_value(v));
		k++;
	}
	rules_labels_sort(l, k);
	*out = l;
	*n = k;
	return 0;
}

static int64_t jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

int alert_from_json(const char *text, struct alert *a)
{
	memset(a, 0, sizeof *a);
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return GPULSE_EPARSE;
	}
	int rc = GPULSE_EPARSE;
	const char *st = json_string_value(json_object_get(o, "state"));
	if (!st || labels_from(json_object_get(o, "labels"), &a->labels, &a->nlabels) ||
	    labels_from(json_object_get(o, "annotations"), &a->annotations, &a->nannotations))
		goto out;
	a->state = strcmp(st, "firing") == 0 ? ALERT_FIRING : strcmp(st, "pending") == 0 ? ALERT_PENDING
											   : ALERT_INACTIVE;
	json_t *v = json_object_get(o, "value");
	a->value = json_is_number(v) ? json_number_value(v) : NAN;
	a->active_at_ms = jint(o, "active_at_ms");
	a->fired_at_ms = jint(o, "fired_at_ms");
	a->resolved_at_ms = jint(o, "resolved_at_ms");
	a->last_sent_ms = jint(o, "last_sent_ms");
	a->valid_until_ms = jint(o, "valid_until_ms");
	a->keep_firing_since_ms = jint(o, "keep_firing_since_ms");
	a->held = json_is_true(json_object_get(o, "held"));
	json_t *fl = json_object_get(o, "flips");
	if (json_is_array(fl)) {
		size_t n = json_array_size(fl);
		for (size_t i = n > ALERT_FLAP_RING ? n - ALERT_FLAP_RING : 0; i < n; i++)
			flip(a, (int64_t)json_integer_value(json_array_get(fl, i)));
	}
	a->fp = alert_fingerprint(a->labels, a->nlabels);
	a->last_cond = a->state != ALERT_INACTIVE;
	rc = 0;
out:
	if (rc)
		alert_free(a);
	json_decref(o);
	return rc;
}
