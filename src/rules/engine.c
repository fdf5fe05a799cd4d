/* The rule engine; see engine.h. One mutex guards the rules and their
 * state: an evaluation holds it for its duration, so a reload or a
 * /api/v1/rules read waits for the group in progress, never sees it half
 * done. The sink is called with the lock held (notice.h: it must not
 * block). */
#include "rules/engine.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rules/alert_state.h"
#include "common/clock.h"
#include "promql/eval.h"
#include "common/mono_cond.h"
#include "rules/rules_util.h"
#include "common/stale.h"
#include "common/status.h"
#include "promql/tsdb_queryable.h"
#include "common/xalloc.h"

#define ERR_LEN 512

/* Samples reach the store shortly after their timestamps (a collector
 * sweep, a slow sanitizer build): a group due at t is evaluated at time t
 * but only once the wall clock has passed t + the delay, so every sample
 * stamped up to t is in. (Prometheus 2.53 added `query_offset` for the
 * same reason.) The default of rules_engine_config.eval_delay_ms; a
 * daemon that wants alerts sooner sets less. */
#define EVAL_DELAY_MS 1000

struct rule_state {
	uint32_t *prev;          /* series written at the last evaluation */
	size_t nprev;
	char last_error[ERR_LEN];
	int health;              /* 0 unknown, 1 ok, 2 err */
	double eval_s;
	int64_t last_eval_ms;    /* 0: never */
	struct alert_rule_state alerts; /* alerting rules */
	uint64_t *persisted;     /* fingerprints with a record in the store */
	size_t npersisted;
};

struct group_state {
	const struct rules_file *file;
	const struct rules_group *g;
	struct rule_state *rules;
	int64_t interval_ms;
	int64_t due_ns;          /* monotonic time of the next evaluation; 0: not scheduled */
	int64_t last_t_ms;       /* the time the last evaluation was stamped with */
	double last_duration_s;
	int64_t last_eval_ms;
	uint64_t evaluations_total, failures_total;
	bool restored;           /* alerts restored from the store (first evaluation) */
};

struct rules_engine {
	struct rules_engine_config cfg;   /* cfg.db: see db */
	/* The store: cfg.db, or one handed over later (rules_engine_set_store).
	 * Set once, never taken back: a reader that saw it keeps seeing it. */
	struct tsdb *_Atomic db;
	pthread_mutex_t lock;
	struct mono_cond wake;
	pthread_t thread;
	bool running, stop;
	struct rules_file **files;
	size_t nfiles;
	struct group_state *groups;
	size_t ngroups;
	struct promql_opts opts;
	struct label *ext;  /* copies of the configured external labels */
	size_t next;
	char *url;
	uint64_t notifications_total, flaps_held_base, restored_total, persist_errors_total;
	bool swept;                /* records of rules no longer loaded were dropped */
};

static struct tsdb *engine_store(struct rules_engine *e)
{
	return atomic_load_explicit(&e->db, memory_order_acquire);
}

void rules_engine_set_store(struct rules_engine *e, struct tsdb *db)
{
	if (e)
		atomic_store_explicit(&e->db, db, memory_order_release);
}

static int64_t engine_now_ms(const struct rules_engine *e)
{
	return e->cfg.now_ms ? e->cfg.now_ms(e->cfg.clock_ctx) : clock_wall_ns() / 1000000;
}

void rules_files_free(struct rules_file **files, size_t n)
{
	if (!files)
		return;
	for (size_t i = 0; i < n; i++)
		rules_file_free(files[i]);
	free(files);
}

int rules_files_load(const char *const *paths, size_t n, struct rules_file ***out,
		     struct buf *errs)
{
	struct rules_file **files = calloc(n ? n : 1, sizeof *files);
	if (!files)
		return GPULSE_ENOMEM;
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = rules_file_load(paths[i], &files[i], errs);
		if (rc && !first)
			first = rc;
	}
	if (first) {
		rules_files_free(files, n);
		return first;
	}
	*out = files;
	return 0;
}

static void groups_free(struct group_state *gs, size_t n)
{
	if (!gs)
		return;
	for (size_t i = 0; i < n; i++) {
		if (gs[i].rules)
			for (size_t r = 0; r < gs[i].g->nrules; r++) {
				free(gs[i].rules[r].prev);
				alert_rule_state_clear(&gs[i].rules[r].alerts);
				free(gs[i].rules[r].persisted);
			}
		free(gs[i].rules);
	}
	free(gs);
}

/* Build the group states of files[nfiles]. 0 or GPULSE_ENOMEM. */
static int groups_build(const struct rules_engine *e, struct rules_file **files, size_t nfiles,
			struct group_state **out, size_t *nout)
{
	size_t n = 0;
	for (size_t f = 0; f < nfiles; f++)
		n += files[f]->ngroups;
	struct group_state *gs = calloc(n ? n : 1, sizeof *gs);
	if (!gs)
		return GPULSE_ENOMEM;
	size_t k = 0;
	for (size_t f = 0; f < nfiles; f++)
		for (size_t i = 0; i < files[f]->ngroups; i++, k++) {
			const struct rules_group *g = &files[f]->groups[i];
			gs[k].file = files[f];
			gs[k].g = g;
			gs[k].interval_ms = g->interval_ms > 0 ? g->interval_ms : e->cfg.default_interval_ms;
			gs[k].rules = calloc(g->nrules ? g->nrules : 1, sizeof *gs[k].rules);
			if (!gs[k].rules) {
				groups_free(gs, k + 1);
				return GPULSE_ENOMEM;
			}
		}
	*out = gs;
	*nout = n;
	return 0;
}

int rules_engine_new(struct rules_engine **out, const struct rules_engine_config *c,
		     struct rules_file **files, size_t nfiles)
{
	struct rules_engine *e = calloc(1, sizeof *e);
	if (!e) {
		rules_files_free(files, nfiles);
		return GPULSE_ENOMEM;
	}
	e->cfg = *c;
	atomic_init(&e->db, c->db);
	if (e->cfg.default_interval_ms <= 0)
		e->cfg.default_interval_ms = 60000;
	if (e->cfg.resend_delay_ms <= 0)
		e->cfg.resend_delay_ms = 60000;
	if (e->cfg.eval_delay_ms == 0)
		e->cfg.eval_delay_ms = EVAL_DELAY_MS;
	else if (e->cfg.eval_delay_ms < 0)
		e->cfg.eval_delay_ms = 0;
	if (e->cfg.for_grace_period_ms <= 0)
		e->cfg.for_grace_period_ms = 10 * 60 * 1000;
	if (e->cfg.flap_max_toggles == 0)
		e->cfg.flap_max_toggles = ALERT_DEFAULT_FLAP_TOGGLES;
	if (e->cfg.flap_window_ms <= 0)
		e->cfg.flap_window_ms = ALERT_DEFAULT_FLAP_WINDOW_MS;
	e->cfg.external_labels = NULL;
	e->cfg.external_url = NULL;
	promql_opts_default(&e->opts);
	pthread_mutex_init(&e->lock, NULL);
	mono_cond_init(&e->wake);
	if (groups_build(e, files, nfiles, &e->groups, &e->ngroups)) {
		rules_files_free(files, nfiles);
		pthread_mutex_destroy(&e->lock);
		mono_cond_destroy(&e->wake);
		free(e);
		return GPULSE_ENOMEM;
	}
	/* Copied once nothing can fail any more (xalloc aborts): the failure
	 * above has nothing of them to free. */
	e->ext = xcalloc(c->nexternal_labels + 1, sizeof *e->ext);
	for (size_t i = 0; i < c->nexternal_labels; i++) {
		e->ext[i].name = xstrdup(c->external_labels[i].name);
		e->ext[i].value = xstrdup(c->external_labels[i].value);
	}
	e->next = c->nexternal_labels;
	e->url = c->external_url ? xstrdup(c->external_url) : NULL;
	e->files = files;
	e->nfiles = nfiles;
	*out = e;
	return 0;
}

void rules_engine_free(struct rules_engine *e)
{
	if (!e)
		return;
	rules_engine_stop(e);
	groups_free(e->groups, e->ngroups);
	rules_files_free(e->files, e->nfiles);
	rules_labels_free(e->ext, e->next);
	free(e->url);
	pthread_mutex_destroy(&e->lock);
	mono_cond_destroy(&e->wake);
	free(e);
}

static void record_key(const struct group_state *gs, const struct rules_rule *r, uint64_t fp,
		       struct buf *b);

/* Delete the store records of the alerts still held by gs[n] (rules a
 * reload removed: carry_state moved the others' alerts away). Held lock. */
static void drop_records(struct rules_engine *e, struct group_state *gs, size_t n)
{
	if (!engine_store(e))
		return;
	struct buf key;
	buf_init(&key, 16 * 1024);
	for (size_t i = 0; i < n; i++)
		for (size_t r = 0; r < gs[i].g->nrules; r++) {
			const struct rule_state *st = &gs[i].rules[r];
			for (size_t k = 0; gs[i].g->rules[r].alert && k < st->npersisted; k++) {
				buf_reset(&key);
				record_key(&gs[i], &gs[i].g->rules[r], st->persisted[k], &key);
				if (!key.failed)
					tsdb_record_delete(engine_store(e), "alert", key.data);
			}
		}
	buf_free(&key);
}

/* Prometheus's Group.CopyState on reload: a group of the same file and
 * name keeps the state of its rules that have the same name (the k-th
 * rule of a name takes the old k-th one's), so alerts neither restart
 * their `for` nor fire again. Held lock. */
static uint64_t flaps_of(const struct group_state *gs, size_t n)
{
	uint64_t t = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t r = 0; r < gs[i].g->nrules; r++)
			t += gs[i].rules[r].alerts.flaps_held_total;
	return t;
}

static void carry_state(struct rules_engine *e, struct group_state *gs, size_t n)
{
	/* Flap counters of rules that go away stay counted. */
	e->flaps_held_base += flaps_of(e->groups, e->ngroups);
	for (size_t i = 0; i < n; i++) {
		struct group_state *ng = &gs[i];
		struct group_state *og = NULL;
		for (size_t k = 0; k < e->ngroups && !og; k++)
			if (strcmp(e->groups[k].file->path, ng->file->path) == 0 &&
			    strcmp(e->groups[k].g->name, ng->g->name) == 0)
				og = &e->groups[k];
		if (!og)
			continue;
		ng->restored = og->restored;
		for (size_t r = 0; r < ng->g->nrules; r++) {
			const struct rules_rule *nr = &ng->g->rules[r];
			const char *name = nr->record ? nr->record : nr->alert;
			size_t nth = 0;
			for (size_t q = 0; q < r; q++) {
				const struct rules_rule *x = &ng->g->rules[q];
				if (strcmp(x->record ? x->record : x->alert, name) == 0)
					nth++;
			}
			for (size_t q = 0; q < og->g->nrules; q++) {
				const struct rules_rule *x = &og->g->rules[q];
				if (strcmp(x->record ? x->record : x->alert, name) != 0 ||
				    !x->alert != !nr->alert)
					continue;
				if (nth--)
					continue;
				struct rule_state tmp = ng->rules[r];
				ng->rules[r] = og->rules[q];
				og->rules[q] = tmp;
				break;
			}
		}
	}
	e->flaps_held_base -= flaps_of(gs, n);
}

int rules_engine_replace(struct rules_engine *e, struct rules_file **files, size_t nfiles)
{
	struct group_state *gs;
	size_t n;
	if (groups_build(e, files, nfiles, &gs, &n)) {
		rules_files_free(files, nfiles);
		return GPULSE_ENOMEM;
	}
	pthread_mutex_lock(&e->lock);
	carry_state(e, gs, n);
	drop_records(e, e->groups, e->ngroups);
	struct group_state *old = e->groups;
	size_t nold = e->ngroups;
	struct rules_file **oldf = e->files;
	size_t noldf = e->nfiles;
	e->groups = gs;
	e->ngroups = n;
	e->files = files;
	e->nfiles = nfiles;
	mono_cond_signal(&e->wake);
	pthread_mutex_unlock(&e->lock);
	groups_free(old, nold);
	rules_files_free(oldf, noldf);
	return 0;
}

size_t rules_engine_group_count(struct rules_engine *e)
{
	pthread_mutex_lock(&e->lock);
	size_t n = e->ngroups;
	pthread_mutex_unlock(&e->lock);
	return n;
}

static bool ref_in(const uint32_t *refs, size_t n, uint32_t r)
{
	for (size_t i = 0; i < n; i++)
		if (refs[i] == r)
			return true;
	return false;
}

/* Close one rule's evaluation at t_ms (started at monotonic t0): on
 * success the series it wrote (refs, taken) replace the last ones, and
 * those it no longer writes get a staleness marker; on error Prometheus
 * keeps the previous series (no staleness) and the rule records why. */
static int finish_rule(struct rules_engine *e, struct rule_state *st, int rc, const char *err,
		       uint32_t *refs, size_t nrefs, int64_t t_ms, int64_t t0)
{
	if (rc) {
		free(refs);
		snprintf(st->last_error, sizeof st->last_error, "%s",
			 err[0] ? err : gpulse_strerror(rc));
		st->health = 2;
	} else {
		for (size_t i = 0; engine_store(e) && i < st->nprev; i++)
			if (!ref_in(refs, nrefs, st->prev[i]))
				tsdb_append(engine_store(e), st->prev[i], t_ms, stale_nan());
		free(st->prev);
		st->prev = refs;
		st->nprev = nrefs;
		st->last_error[0] = '\0';
		st->health = 1;
	}
	st->eval_s = (double)(clock_mono_ns() - t0) / 1e9;
	st->last_eval_ms = engine_now_ms(e);
	return rc;
}

/* Write one result series as `record` with the rule's labels; its ref
 * goes to refs[*nrefs]. */
static int write_series(struct rules_engine *e, const struct rules_rule *r,
			const struct label *ls, size_t nls, double v, int64_t t_ms,
			uint32_t *refs, size_t *nrefs, char *err, size_t errlen)
{
	struct label out[TSDB_MAX_LABELS];
	size_t n = 0;
	out[n++] = (struct label){"__name__", r->record};
	for (size_t i = 0; i < nls; i++) {
		if (strcmp(ls[i].name, "__name__") == 0)
			continue;
		bool overridden = false;
		for (size_t j = 0; j < r->nlabels; j++)
			if (strcmp(r->labels[j].name, ls[i].name) == 0)
				overridden = true;
		if (overridden || !ls[i].value[0])
			continue;
		if (n >= TSDB_MAX_LABELS) {
			snprintf(err, errlen, "too many labels (at most %d)", TSDB_MAX_LABELS);
			return GPULSE_ELIMIT;
		}
		out[n++] = (struct label){ls[i].name, ls[i].value};
	}
	for (size_t j = 0; j < r->nlabels; j++) {
		if (!r->labels[j].value[0])
			continue;
		if (n >= TSDB_MAX_LABELS) {
			snprintf(err, errlen, "too many labels (at most %d)", TSDB_MAX_LABELS);
			return GPULSE_ELIMIT;
		}
		out[n++] = (struct label){r->labels[j].name, r->labels[j].value};
	}
	uint32_t ref;
	int rc = tsdb_series(engine_store(e), out, n, &ref, err, errlen);
	if (rc)
		return rc;
	if (ref_in(refs, *nrefs, ref)) {
		snprintf(err, errlen, "vector contains metrics with the same labelset after applying "
			 "rule labels");
		return GPULSE_EINVAL;
	}
	refs[(*nrefs)++] = ref;
	rc = tsdb_append(engine_store(e), ref, t_ms, v);
	if (rc == GPULSE_ERANGE)
		rc = 0; /* already written at this time (a repeated evaluation): keep the first */
	if (rc)
		snprintf(err, errlen, "cannot append to the store");
	return rc;
}

/* Evaluate r's expression at t_ms through the store, or the interface
 * given for its absence. */
static int eval_expr(struct rules_engine *e, const struct rules_rule *r, int64_t t_ms,
		     struct promql_result **res, char *err, size_t errlen)
{
	if (!engine_store(e) && !e->cfg.queryable) {
		snprintf(err, errlen, "no store and no other storage to read");
		return GPULSE_ESTATE;
	}
	if (!engine_store(e))
		return promql_eval_instant(r->expr, e->cfg.queryable, e->cfg.queryable_ctx, &e->opts,
					   t_ms, res, err, errlen);
	struct tsdb_queryable_ctx qc = {.db = engine_store(e), .max_series = e->opts.max_series,
					.max_samples = e->opts.max_samples};
	return promql_eval_instant(r->expr, &tsdb_queryable, &qc, &e->opts, t_ms, res, err, errlen);
}

/* Evaluate one recording rule at t_ms; its state is updated. */
static int eval_rule(struct rules_engine *e, const struct rules_rule *r, struct rule_state *st,
		     int64_t t_ms)
{
	char err[ERR_LEN] = "";
	struct promql_result *res = NULL;
	uint32_t *refs = NULL;
	size_t nrefs = 0;
	int64_t t0 = clock_mono_ns();
	int rc;
	if (!engine_store(e)) {
		snprintf(err, sizeof err, "a recording rule needs a store for its series");
		rc = GPULSE_ESTATE;
		goto out;
	}
	rc = eval_expr(e, r, t_ms, &res, err, sizeof err);
	if (rc)
		goto out;
	if (res->type == PROMQL_TYPE_SCALAR) {
		refs = malloc(sizeof *refs);
		if (!refs) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		rc = write_series(e, r, NULL, 0, res->scalar, t_ms, refs, &nrefs, err, sizeof err);
	} else if (res->type == PROMQL_TYPE_VECTOR) {
		refs = malloc((res->nseries ? res->nseries : 1) * sizeof *refs);
		if (!refs) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < res->nseries && !rc; i++) {
			const struct promql_result_series *s = &res->series[i];
			if (s->npoints == 0)
				continue;
			rc = write_series(e, r, s->labels, s->nlabels, s->points[0].v, t_ms, refs,
					  &nrefs, err, sizeof err);
		}
	} else {
		snprintf(err, sizeof err, "rule result is not a vector or scalar");
		rc = GPULSE_EINVAL;
	}
out:
	promql_result_free(res);
	return finish_rule(e, st, rc, err, refs, nrefs, t_ms, t0);
}

/* ---- alerting rules ---------------------------------------------------- */

/* "FILE;GROUP;ALERT;" : the prefix of a rule's alert records. */
static void record_prefix(const struct group_state *gs, const struct rules_rule *r, struct buf *b)
{
	buf_printf(b, "%s;%s;%s;", gs->file->path, gs->g->name, r->alert);
}

static void record_key(const struct group_state *gs, const struct rules_rule *r, uint64_t fp,
		       struct buf *b)
{
	record_prefix(gs, r, b);
	buf_printf(b, "%016llx", (unsigned long long)fp);
}

/* Labels for the store from a PromQL label set. */
static size_t to_tsdb(const struct label *in, size_t n, struct label *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (struct label){in[i].name, in[i].value};
	return n;
}

/* Write the ALERTS and ALERTS_FOR_STATE samples of a's state at t_ms;
 * their refs go to refs[*nrefs]. */
static int write_alert_series(struct rules_engine *e, struct alert *a, int64_t t_ms, uint32_t *refs,
			      size_t *nrefs, char *err, size_t errlen)
{
	if (!a->refs_valid || a->ref_state != a->state) {
		struct label l[TSDB_MAX_LABELS + 2];
		struct label tl[TSDB_MAX_LABELS + 2];
		for (int fs = 0; fs < 2; fs++) {
			size_t n = alert_series_labels(a, fs, l, TSDB_MAX_LABELS);
			if (!n) {
				snprintf(err, errlen, "too many labels (at most %d)", TSDB_MAX_LABELS);
				return GPULSE_ELIMIT;
			}
			int rc = tsdb_series(engine_store(e), tl, to_tsdb(l, n, tl), fs ? &a->ref_for_state : &a->ref_alerts,
					     err, errlen);
			if (rc)
				return rc;
		}
		a->refs_valid = true;
		a->ref_state = a->state;
	}
	refs[(*nrefs)++] = a->ref_alerts;
	refs[(*nrefs)++] = a->ref_for_state;
	int rc = tsdb_append(engine_store(e), a->ref_alerts, t_ms, 1.0);
	if (!rc || rc == GPULSE_ERANGE)
		rc = tsdb_append(engine_store(e), a->ref_for_state, t_ms, (double)(a->active_at_ms / 1000));
	if (rc == GPULSE_ERANGE)
		rc = 0; /* a repeated evaluation at the same time: keep the first */
	if (rc)
		snprintf(err, errlen, "cannot append to the store");
	return rc;
}

/* Evaluate one alerting rule at t_ms: Prometheus's AlertingRule.Eval and
 * the samples it returns. */
static int eval_alert_rule(struct rules_engine *e, const struct rules_rule *r, struct rule_state *st,
			   int64_t t_ms)
{
	char err[ERR_LEN] = "";
	struct promql_result *res = NULL;
	uint32_t *refs = NULL;
	size_t nrefs = 0;
	int64_t t0 = clock_mono_ns();
	int rc = eval_expr(e, r, t_ms, &res, err, sizeof err);
	if (!rc) {
		struct alert_opts ao = {.ext_labels = e->ext, .next_labels = e->next, .external_url = e->url,
					.ext_in_template_labels = e->cfg.ext_in_template_labels,
					.flap_max_toggles = e->cfg.flap_max_toggles,
					.flap_window_ms = e->cfg.flap_window_ms};
		rc = alert_rule_eval(&st->alerts, r, res, t_ms, &ao, err, sizeof err);
	}
	promql_result_free(res);
	if (!rc && engine_store(e)) {
		refs = xcalloc(2 * st->alerts.n + 1, sizeof *refs);
		for (size_t i = 0; i < st->alerts.n && !rc; i++) {
			struct alert *a = &st->alerts.alerts[i];
			if (a->state != ALERT_INACTIVE)
				rc = write_alert_series(e, a, t_ms, refs, &nrefs, err, sizeof err);
		}
	}
	return finish_rule(e, st, rc, err, refs, nrefs, t_ms, t0);
}

/* Prometheus's percent-encoding of a query in a generator URL. */
static void put_query_escaped(struct buf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
			buf_putc(b, (char)c);
		else if (c == ' ')
			buf_putc(b, '+');
		else
			buf_printf(b, "%%%02X", c);
	}
}

/* Hand the group's alerts that are due (Prometheus's sendAlerts) to the
 * sink. Held lock. */
static void send_alerts(struct rules_engine *e, struct group_state *gs, int64_t t_ms)
{
	size_t due = 0, nlab = 0;
	for (size_t i = 0; i < gs->g->nrules; i++) {
		const struct alert_rule_state *as = &gs->rules[i].alerts;
		for (size_t k = 0; gs->g->rules[i].alert && k < as->n; k++)
			if (alert_needs_sending(&as->alerts[k], t_ms, e->cfg.resend_delay_ms)) {
				due++;
				nlab += as->alerts[k].nlabels + as->alerts[k].nannotations;
			}
	}
	if (!due)
		return;
	struct alert_notice *nv = xcalloc(due, sizeof *nv);
	struct label *lv = xcalloc(nlab + 1, sizeof *lv);
	char **urls = xcalloc(due, sizeof *urls);
	int64_t delta = e->cfg.resend_delay_ms > gs->interval_ms ? e->cfg.resend_delay_ms : gs->interval_ms;
	size_t n = 0, li = 0;
	for (size_t i = 0; i < gs->g->nrules; i++) {
		const struct rules_rule *r = &gs->g->rules[i];
		struct alert_rule_state *as = &gs->rules[i].alerts;
		for (size_t k = 0; r->alert && k < as->n; k++) {
			struct alert *a = &as->alerts[k];
			if (!alert_needs_sending(a, t_ms, e->cfg.resend_delay_ms))
				continue;
			a->last_sent_ms = t_ms;
			a->valid_until_ms = t_ms + 4 * delta;
			a->dirty = true;
			struct alert_notice *no = &nv[n];
			no->labels = &lv[li];
			for (size_t j = 0; j < a->nlabels; j++)
				lv[li++] = (struct label){a->labels[j].name, a->labels[j].value};
			no->nlabels = a->nlabels;
			no->annotations = &lv[li];
			for (size_t j = 0; j < a->nannotations; j++)
				lv[li++] = (struct label){a->annotations[j].name, a->annotations[j].value};
			no->nannotations = a->nannotations;
			/* Prometheus: startsAt is when the alert fired. */
			no->starts_at_ms = a->fired_at_ms ? a->fired_at_ms : a->active_at_ms;
			no->resolved = a->resolved_at_ms != 0;
			no->ends_at_ms = no->resolved ? a->resolved_at_ms : a->valid_until_ms;
			no->fingerprint = a->fp;
			if (e->url) {
				struct buf u;
				buf_init(&u, 64 * 1024);
				buf_printf(&u, "%s/graph?g0.expr=", e->url);
				put_query_escaped(&u, r->expr_text);
				buf_puts(&u, "&g0.tab=1");
				urls[n] = buf_steal(&u);
			}
			no->generator_url = urls[n];
			n++;
		}
	}
	if (e->cfg.alert_sink) {
		e->cfg.alert_sink(e->cfg.alert_sink_ctx, nv, n);
		e->notifications_total += n;
	}
	for (size_t i = 0; i < n; i++)
		free(urls[i]);
	free(urls);
	free(lv);
	free(nv);
}

static bool fp_in(const uint64_t *v, size_t n, uint64_t fp)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == fp)
			return true;
	return false;
}

/* Write the changed alerts of the group to the store's records and drop
 * the records of alerts that are gone. Held lock. */
static void persist_alerts(struct rules_engine *e, struct group_state *gs, int64_t t_ms)
{
	struct buf key, json;
	buf_init(&key, 16 * 1024);
	buf_init(&json, 1024 * 1024);
	for (size_t i = 0; i < gs->g->nrules; i++) {
		const struct rules_rule *r = &gs->g->rules[i];
		struct rule_state *st = &gs->rules[i];
		if (!r->alert)
			continue;
		bool changed = st->alerts.n != st->npersisted;
		for (size_t k = 0; k < st->alerts.n && !changed; k++)
			changed = st->alerts.alerts[k].dirty;
		if (!changed)
			continue;
		uint64_t *now = xcalloc(st->alerts.n + 1, sizeof *now);
		for (size_t k = 0; k < st->alerts.n; k++) {
			struct alert *a = &st->alerts.alerts[k];
			now[k] = a->fp;
			if (!a->dirty && fp_in(st->persisted, st->npersisted, a->fp))
				continue;
			buf_reset(&key);
			buf_reset(&json);
			record_key(gs, r, a->fp, &key);
			alert_to_json(a, &json);
			if (key.failed || json.failed ||
			    tsdb_record_put(engine_store(e), "alert", key.data, t_ms, json.data) != 0)
				e->persist_errors_total++;
			else
				a->dirty = false;
		}
		for (size_t k = 0; k < st->npersisted; k++) {
			if (fp_in(now, st->alerts.n, st->persisted[k]))
				continue;
			buf_reset(&key);
			record_key(gs, r, st->persisted[k], &key);
			if (!key.failed)
				tsdb_record_delete(engine_store(e), "alert", key.data);
		}
		free(st->persisted);
		st->persisted = now;
		st->npersisted = st->alerts.n;
	}
	buf_free(&key);
	buf_free(&json);
}

/* When the ALERTS_FOR_STATE series of a last had a sample before t_ms
 * (within an hour, Prometheus's outage tolerance): the time the engine
 * went down. 0 when none. */
static int64_t last_for_state_sample(struct rules_engine *e, const struct alert *a, int64_t t_ms)
{
	struct label l[TSDB_MAX_LABELS + 2];
	size_t n = alert_series_labels(a, true, l, TSDB_MAX_LABELS);
	if (!n)
		return 0;
	struct tsdb_matcher m[TSDB_MAX_LABELS + 2];
	for (size_t i = 0; i < n; i++)
		m[i] = (struct tsdb_matcher){TSDB_MATCH_EQ, l[i].name, l[i].value};
	struct tsdb_select_opts o = {.mint = t_ms - 3600 * 1000, .maxt = t_ms, .mode = TSDB_READ_RAW};
	struct tsdb_iter *it = NULL;
	char err[256];
	int64_t last = 0;
	if (tsdb_select(engine_store(e), m, n, &o, &it, err, sizeof err) != 0)
		return 0;
	while (tsdb_iter_next_series(it) == 1) {
		size_t nl;
		tsdb_iter_labels(it, &nl);
		if (nl != n)
			continue; /* a superset of the labels: another alert */
		int64_t ts;
		double v;
		while (tsdb_iter_next_sample(it, &ts, &v) == 1)
			if (ts > last)
				last = ts;
	}
	tsdb_iter_free(it);
	return last;
}

/* Restore the group's alerts from the store's records (the first
 * evaluation after start): firing ones as they were (active, fired and
 * last-sent times kept, so nothing is sent twice), pending ones with
 * Prometheus's ALERTS_FOR_STATE rule: the time the engine was down does
 * not count toward `for` (or, for a `for` of at least the grace period
 * that would end within it, the alert waits the grace period). Held
 * lock. 0, or the store's status when the records could not be read:
 * then nothing is restored and the next evaluation tries again. */
static int restore_group(struct rules_engine *e, struct group_state *gs, int64_t t_ms)
{
	struct tsdb_record *recs = NULL;
	size_t nrec = 0;
	int rc = tsdb_record_list(engine_store(e), "alert", INT64_MIN, INT64_MAX, 0, &recs, &nrec);
	if (rc != 0)
		return rc;
	gs->restored = true;
	struct buf pre;
	buf_init(&pre, 16 * 1024);
	if (!e->swept) {
		/* Once per engine: records of alerting rules no longer loaded
		 * (removed while the daemon was down) go. */
		e->swept = true;
		for (size_t k = 0; k < nrec; k++) {
			bool known = false;
			for (size_t g = 0; g < e->ngroups && !known; g++)
				for (size_t i = 0; i < e->groups[g].g->nrules && !known; i++) {
					const struct rules_rule *r = &e->groups[g].g->rules[i];
					if (!r->alert)
						continue;
					buf_reset(&pre);
					record_prefix(&e->groups[g], r, &pre);
					known = !pre.failed && pre.data && strncmp(recs[k].key, pre.data, pre.len) == 0;
				}
			if (!known)
				tsdb_record_delete(engine_store(e), "alert", recs[k].key);
		}
	}
	for (size_t i = 0; i < gs->g->nrules; i++) {
		const struct rules_rule *r = &gs->g->rules[i];
		struct rule_state *st = &gs->rules[i];
		if (!r->alert)
			continue;
		buf_reset(&pre);
		record_prefix(gs, r, &pre);
		if (pre.failed || !pre.data)
			continue;
		for (size_t k = 0; k < nrec; k++) {
			if (strncmp(recs[k].key, pre.data, pre.len) != 0 || strchr(recs[k].key + pre.len, ';'))
				continue;
			struct alert a;
			if (alert_from_json(recs[k].json, &a) != 0) {
				tsdb_record_delete(engine_store(e), "alert", recs[k].key);
				continue;
			}
			if (a.state == ALERT_PENDING && r->for_ms > 0) {
				int64_t down = last_for_state_sample(e, &a, t_ms);
				if (down <= 0 || down > t_ms)
					down = recs[k].t_ms > a.active_at_ms ? recs[k].t_ms : a.active_at_ms;
				int64_t remaining = r->for_ms - (down - a.active_at_ms);
				if (remaining > 0) {
					if (r->for_ms >= e->cfg.for_grace_period_ms &&
					    remaining < e->cfg.for_grace_period_ms)
						a.active_at_ms = t_ms + e->cfg.for_grace_period_ms - r->for_ms;
					else
						a.active_at_ms += t_ms - down;
				}
				a.dirty = true;
			}
			uint64_t fp = a.fp;
			if (alert_rule_state_adopt(&st->alerts, &a) != 0) {
				alert_free(&a);
				continue;
			}
			e->restored_total++;
			if (!fp_in(st->persisted, st->npersisted, fp)) {
				st->persisted = xrealloc(st->persisted, (st->npersisted + 1) * sizeof *st->persisted);
				st->persisted[st->npersisted++] = fp;
			}
		}
	}
	buf_free(&pre);
	tsdb_records_free(recs, nrec);
	return 0;
}

/* An alerting rule not evaluated because its group's alerts could not be
 * restored yet: evaluating it would start them afresh (pending again, to
 * be notified anew) and overwrite their records. */
static int skip_unrestored(struct rules_engine *e, struct rule_state *st, int rc, int64_t t_ms)
{
	char err[ERR_LEN];
	snprintf(err, sizeof err, "alerts not restored from the store yet: %s", gpulse_strerror(rc));
	return finish_rule(e, st, rc, err, NULL, 0, t_ms, clock_mono_ns());
}

/* Call with the lock held. */
static int eval_group_locked(struct rules_engine *e, struct group_state *gs, int64_t t_ms)
{
	int64_t t0 = clock_mono_ns();
	int first = 0;
	bool alerting = false;
	for (size_t i = 0; i < gs->g->nrules && !alerting; i++)
		alerting = gs->g->rules[i].alert != NULL;
	/* Restored from the store at the first evaluation that has one, and
	 * tried again while its records cannot be read; a store handed
	 * over later (rules_engine_set_store) finds the alerts of this run
	 * in memory, newer than any record it holds. */
	int restore_rc = 0;
	if (alerting && !gs->restored) {
		if (engine_store(e))
			restore_rc = restore_group(e, gs, t_ms);
		else
			gs->restored = true;
	}
	for (size_t i = 0; i < gs->g->nrules; i++) {
		const struct rules_rule *r = &gs->g->rules[i];
		if (!r->expr)
			continue;
		int rc = r->record ? eval_rule(e, r, &gs->rules[i], t_ms)
			 : restore_rc ? skip_unrestored(e, &gs->rules[i], restore_rc, t_ms)
				      : eval_alert_rule(e, r, &gs->rules[i], t_ms);
		gs->evaluations_total++;
		if (rc) {
			gs->failures_total++;
			if (!first)
				first = rc;
		}
	}
	if (alerting && !restore_rc) {
		send_alerts(e, gs, t_ms);
		if (engine_store(e))
			persist_alerts(e, gs, t_ms);
	}
	gs->last_duration_s = (double)(clock_mono_ns() - t0) / 1e9;
	gs->last_eval_ms = engine_now_ms(e);
	return first;
}

int rules_engine_eval_group(struct rules_engine *e, size_t gi, int64_t t_ms)
{
	pthread_mutex_lock(&e->lock);
	int rc = gi < e->ngroups ? eval_group_locked(e, &e->groups[gi], t_ms) : GPULSE_ENOENT;
	pthread_mutex_unlock(&e->lock);
	return rc;
}


static int64_t floor_div_ms(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The latest multiple of iv that the wall clock has passed by the delay:
 * the time an evaluation now is stamped with. */
static int64_t group_stamp(const struct rules_engine *e, int64_t iv, int64_t now_ms)
{
	return floor_div_ms(now_ms - e->cfg.eval_delay_ms, iv) * iv;
}

/* Milliseconds from now until the wall clock passes the next multiple of
 * iv by the delay: in (0, iv] whatever the clock did before. */
static int64_t group_wait_ms(const struct rules_engine *e, int64_t iv, int64_t now_ms)
{
	return group_stamp(e, iv, now_ms) + iv + e->cfg.eval_delay_ms - now_ms;
}

/* The thread: wake at the earliest due group, evaluate every due group,
 * stamped with the multiple of its interval the wall clock passed, and
 * schedule it for the next. The schedule is kept on the monotonic clock,
 * each wait computed afresh from the wall clock (so evaluations stay on
 * the multiples, and a step of the wall clock moves them by at most one
 * interval): a step back no longer holds every group until the clock
 * passes its old time again. Evaluation times go back with the clock, as
 * Prometheus's (its group ticker is monotonic, its timestamps the wall
 * clock's); the store takes their samples within its out-of-order window.
 * Not common/periodic: one thread serves many groups, each with its own
 * interval and wall-clock phase, so the wait is to the earliest of them. */
static void *engine_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-rules");
	struct rules_engine *e = arg;
	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		int64_t mono = clock_mono_ns();
		int64_t next_due = mono + NS_PER_SEC;
		for (size_t i = 0; i < e->ngroups; i++) {
			struct group_state *gs = &e->groups[i];
			int64_t iv = gs->interval_ms;
			if (gs->due_ns == 0)
				gs->due_ns = mono + group_wait_ms(e, iv, engine_now_ms(e)) * NS_PER_MS;
			if (gs->due_ns <= mono) {
				int64_t t = group_stamp(e, iv, engine_now_ms(e));
				/* Woken a hair early by the wall clock's slew: the
				 * last stamp again, so wait for the next instead. */
				if (t != gs->last_t_ms) {
					eval_group_locked(e, gs, t);
					gs->last_t_ms = t;
				}
				/* Missed iterations are skipped, as Prometheus does. */
				mono = clock_mono_ns();
				gs->due_ns = mono + group_wait_ms(e, iv, engine_now_ms(e)) * NS_PER_MS;
			}
			if (gs->due_ns < next_due)
				next_due = gs->due_ns;
		}
		if (next_due > clock_mono_ns())
			mono_cond_wait_until(&e->wake, &e->lock, next_due);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int rules_engine_start(struct rules_engine *e)
{
	pthread_mutex_lock(&e->lock);
	if (e->running) {
		pthread_mutex_unlock(&e->lock);
		return GPULSE_ESTATE;
	}
	e->stop = false;
	int rc = pthread_create(&e->thread, NULL, engine_main, e);
	if (rc == 0)
		e->running = true;
	pthread_mutex_unlock(&e->lock);
	return rc ? GPULSE_ENOMEM : 0;
}

void rules_engine_stop(struct rules_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	bool was = e->running;
	e->stop = true;
	mono_cond_signal(&e->wake);
	pthread_mutex_unlock(&e->lock);
	if (was)
		pthread_join(e->thread, NULL);
	e->running = false;
}

size_t rules_engine_stats(struct rules_engine *e, struct rules_group_stats *out, size_t max)
{
	pthread_mutex_lock(&e->lock);
	size_t n = e->ngroups;
	for (size_t i = 0; i < n && i < max; i++) {
		const struct group_state *gs = &e->groups[i];
		snprintf(out[i].name, sizeof out[i].name, "%s;%s", gs->file->path, gs->g->name);
		out[i].last_duration_s = gs->last_duration_s;
		out[i].evaluations_total = gs->evaluations_total;
		out[i].failures_total = gs->failures_total;
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

/* RFC 3339 with milliseconds, UTC, quoted; Go's zero time when never. */
static int put_rfc3339(struct buf *b, int64_t t_ms)
{
	buf_putc(b, '"');
	buf_put_rfc3339(b, t_ms, false);
	return buf_putc(b, '"');
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

static bool rule_listed(const struct rules_filter *f, const struct rules_rule *r)
{
	if (!f)
		return true;
	if (r->alert ? !f->alerting : !f->recording)
		return false;
	return in_list(r->record ? r->record : r->alert, f->names, f->nnames);
}

int rules_engine_write_json(struct rules_engine *e, const struct rules_filter *f, struct buf *b)
{
	pthread_mutex_lock(&e->lock);
	buf_putc(b, '[');
	size_t ng = 0;
	for (size_t i = 0; i < e->ngroups; i++) {
		const struct group_state *gs = &e->groups[i];
		if (f && (!in_list(gs->g->name, f->groups, f->ngroups) ||
			  !in_list(gs->file->path, f->files, f->nfiles)))
			continue;
		size_t listed = 0;
		for (size_t k = 0; k < gs->g->nrules; k++)
			listed += rule_listed(f, &gs->g->rules[k]);
		if (f && listed == 0)
			continue;
		size_t nr = 0;
		if (ng++)
			buf_putc(b, ',');
		buf_puts(b, "{\"name\":");
		buf_put_json_string(b, gs->g->name);
		buf_puts(b, ",\"file\":");
		buf_put_json_string(b, gs->file->path);
		buf_puts(b, ",\"interval\":");
		buf_put_double(b, (double)gs->interval_ms / 1000.0);
		buf_puts(b, ",\"rules\":[");
		for (size_t k = 0; k < gs->g->nrules; k++) {
			const struct rules_rule *r = &gs->g->rules[k];
			const struct rule_state *st = &gs->rules[k];
			if (!rule_listed(f, r))
				continue;
			if (nr++)
				buf_putc(b, ',');
			buf_puts(b, "{\"name\":");
			buf_put_json_string(b, r->record ? r->record : r->alert);
			buf_puts(b, ",\"query\":");
			buf_put_json_string(b, r->expr_text);
			buf_puts(b, ",\"labels\":");
			promql_put_json_labels(b, r->labels, r->nlabels);
			if (r->alert) {
				buf_puts(b, ",\"annotations\":");
				promql_put_json_labels(b, r->annotations, r->nannotations);
				buf_puts(b, ",\"duration\":");
				buf_put_double(b, (double)r->for_ms / 1000.0);
				buf_puts(b, ",\"keepFiringFor\":");
				buf_put_double(b, (double)r->keep_firing_for_ms / 1000.0);
				buf_puts(b, ",\"alerts\":[");
				size_t na = 0;
				for (size_t a = 0; a < st->alerts.n; a++) {
					if (st->alerts.alerts[a].state == ALERT_INACTIVE)
						continue;
					if (na++)
						buf_putc(b, ',');
					alert_write_json(b, &st->alerts.alerts[a]);
				}
				buf_printf(b, "],\"state\":\"%s\"",
					   alert_state_name(alert_rule_state_max(&st->alerts)));
			}
			buf_puts(b, ",\"health\":");
			buf_puts(b, st->health == 1 ? "\"ok\"" : st->health == 2 ? "\"err\"" : "\"unknown\"");
			if (st->health == 2) {
				buf_puts(b, ",\"lastError\":");
				buf_put_json_string(b, st->last_error);
			}
			buf_puts(b, ",\"evaluationTime\":");
			buf_put_double(b, st->eval_s);
			buf_puts(b, ",\"lastEvaluation\":");
			put_rfc3339(b, st->last_eval_ms);
			buf_printf(b, ",\"type\":\"%s\"}", r->alert ? "alerting" : "recording");
		}
		buf_puts(b, "],\"evaluationTime\":");
		buf_put_double(b, gs->last_duration_s);
		buf_puts(b, ",\"lastEvaluation\":");
		put_rfc3339(b, gs->last_eval_ms);
		buf_putc(b, '}');
	}
	int rc = buf_putc(b, ']');
	pthread_mutex_unlock(&e->lock);
	return b->failed ? GPULSE_ELIMIT : rc;
}

int rules_engine_write_alerts_json(struct rules_engine *e, struct buf *b)
{
	pthread_mutex_lock(&e->lock);
	buf_putc(b, '[');
	size_t n = 0;
	for (size_t i = 0; i < e->ngroups; i++) {
		const struct group_state *gs = &e->groups[i];
		for (size_t k = 0; k < gs->g->nrules; k++) {
			const struct alert_rule_state *as = &gs->rules[k].alerts;
			for (size_t a = 0; gs->g->rules[k].alert && a < as->n; a++) {
				if (as->alerts[a].state == ALERT_INACTIVE)
					continue;
				if (n++)
					buf_putc(b, ',');
				alert_write_json(b, &as->alerts[a]);
			}
		}
	}
	buf_putc(b, ']');
	pthread_mutex_unlock(&e->lock);
	return b->failed ? GPULSE_ELIMIT : 0;
}

void rules_engine_alert_stats(struct rules_engine *e, struct rules_alert_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < e->ngroups; i++) {
		const struct group_state *gs = &e->groups[i];
		for (size_t k = 0; k < gs->g->nrules; k++) {
			const struct alert_rule_state *as = &gs->rules[k].alerts;
			for (size_t a = 0; gs->g->rules[k].alert && a < as->n; a++) {
				const struct alert *x = &as->alerts[a];
				out->pending += x->state == ALERT_PENDING;
				out->firing += x->state == ALERT_FIRING;
				out->held += x->state == ALERT_FIRING && x->held;
			}
		}
	}
	out->notifications_total = e->notifications_total;
	out->flaps_held_total = e->flaps_held_base + flaps_of(e->groups, e->ngroups);
	out->restored_total = e->restored_total;
	out->persist_errors_total = e->persist_errors_total;
	pthread_mutex_unlock(&e->lock);
}
