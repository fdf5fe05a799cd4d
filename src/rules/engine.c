/* The recording-rule engine; see engine.h. One mutex guards the rules and
 * their state: an evaluation holds it for its duration, so a reload or a
 * /api/v1/rules read waits for the group in progress, never sees it half
 * done. */
#include "engine.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "eval.h"
#include "status.h"
#include "tsdb_queryable.h"

#define ERR_LEN 512

struct rule_state {
	uint32_t *prev;          /* series written at the last evaluation */
	size_t nprev;
	char last_error[ERR_LEN];
	int health;              /* 0 unknown, 1 ok, 2 err */
	double eval_s;
	int64_t last_eval_ms;    /* 0: never */
};

struct group_state {
	const struct rules_file *file;
	const struct rules_group *g;
	struct rule_state *rules;
	int64_t interval_ms;
	int64_t next_ms;         /* next aligned evaluation; 0: not scheduled */
	double last_duration_s;
	int64_t last_eval_ms;
	uint64_t evaluations_total, failures_total;
};

struct rules_engine {
	struct rules_engine_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool running, stop;
	struct rules_file **files;
	size_t nfiles;
	struct group_state *groups;
	size_t ngroups;
	struct promql_opts opts;
};

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
			for (size_t r = 0; r < gs[i].g->nrules; r++)
				free(gs[i].rules[r].prev);
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
	if (e->cfg.default_interval_ms <= 0)
		e->cfg.default_interval_ms = 60000;
	promql_opts_default(&e->opts);
	pthread_mutex_init(&e->lock, NULL);
	clock_cond_init(&e->wake);
	if (groups_build(e, files, nfiles, &e->groups, &e->ngroups)) {
		rules_files_free(files, nfiles);
		pthread_mutex_destroy(&e->lock);
		pthread_cond_destroy(&e->wake);
		free(e);
		return GPULSE_ENOMEM;
	}
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
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->wake);
	free(e);
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
	struct group_state *old = e->groups;
	size_t nold = e->ngroups;
	struct rules_file **oldf = e->files;
	size_t noldf = e->nfiles;
	e->groups = gs;
	e->ngroups = n;
	e->files = files;
	e->nfiles = nfiles;
	pthread_cond_signal(&e->wake);
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

/* Write one result series as `record` with the rule's labels; its ref
 * goes to refs[*nrefs]. */
static int write_series(struct rules_engine *e, const struct rules_rule *r,
			const struct promql_label *ls, size_t nls, double v, int64_t t_ms,
			uint32_t *refs, size_t *nrefs, char *err, size_t errlen)
{
	struct tsdb_label out[TSDB_MAX_LABELS];
	size_t n = 0;
	out[n++] = (struct tsdb_label){"__name__", r->record};
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
		out[n++] = (struct tsdb_label){ls[i].name, ls[i].value};
	}
	for (size_t j = 0; j < r->nlabels; j++) {
		if (!r->labels[j].value[0])
			continue;
		if (n >= TSDB_MAX_LABELS) {
			snprintf(err, errlen, "too many labels (at most %d)", TSDB_MAX_LABELS);
			return GPULSE_ELIMIT;
		}
		out[n++] = (struct tsdb_label){r->labels[j].name, r->labels[j].value};
	}
	uint32_t ref;
	int rc = tsdb_series(e->cfg.db, out, n, &ref, err, errlen);
	if (rc)
		return rc;
	if (ref_in(refs, *nrefs, ref)) {
		snprintf(err, errlen, "vector contains metrics with the same labelset after applying "
			 "rule labels");
		return GPULSE_EINVAL;
	}
	refs[(*nrefs)++] = ref;
	rc = tsdb_append(e->cfg.db, ref, t_ms, v);
	if (rc == GPULSE_ERANGE)
		rc = 0; /* already written at this time (a repeated evaluation): keep the first */
	if (rc)
		snprintf(err, errlen, "cannot append to the store");
	return rc;
}

/* Evaluate one recording rule at t_ms; its state is updated. */
static int eval_rule(struct rules_engine *e, const struct rules_rule *r, struct rule_state *st,
		     int64_t t_ms)
{
	char err[ERR_LEN] = "";
	struct tsdb_queryable_ctx qc = {.db = e->cfg.db, .max_series = e->opts.max_series,
					.max_samples = e->opts.max_samples};
	struct promql_result *res = NULL;
	uint32_t *refs = NULL;
	size_t nrefs = 0;
	int64_t t0 = clock_mono_ns();
	int rc = promql_eval_instant(r->expr, &tsdb_queryable, &qc, &e->opts, t_ms, &res, err,
				     sizeof err);
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
	if (rc) {
		/* Prometheus keeps the previous series (no staleness) on error. */
		free(refs);
		if (!err[0])
			snprintf(err, sizeof err, "%s", gpulse_strerror(rc));
		snprintf(st->last_error, sizeof st->last_error, "%s", err);
		st->health = 2;
	} else {
		/* What the last evaluation wrote and this one did not: stale. */
		for (size_t i = 0; i < st->nprev; i++)
			if (!ref_in(refs, nrefs, st->prev[i]))
				tsdb_append(e->cfg.db, st->prev[i], t_ms, promql_stale_nan());
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

/* Call with the lock held. */
static int eval_group_locked(struct rules_engine *e, struct group_state *gs, int64_t t_ms)
{
	int64_t t0 = clock_mono_ns();
	int first = 0;
	for (size_t i = 0; i < gs->g->nrules; i++) {
		const struct rules_rule *r = &gs->g->rules[i];
		if (!r->record)
			continue;
		int rc = eval_rule(e, r, &gs->rules[i], t_ms);
		gs->evaluations_total++;
		if (rc) {
			gs->failures_total++;
			if (!first)
				first = rc;
		}
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

/* Samples reach the store shortly after their timestamps (a collector
 * sweep, a slow sanitizer build): a group due at t is evaluated at time t
 * but only once the wall clock has passed t + EVAL_DELAY_MS, so every
 * sample stamped up to t is in. (Prometheus 2.53 added `query_offset`
 * for the same reason.) */
#define EVAL_DELAY_MS 1000

/* The thread: wake at the earliest due group, evaluate every due group at
 * its aligned time, schedule it for the next multiple of its interval. */
static void *engine_main(void *arg)
{
	struct rules_engine *e = arg;
	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		int64_t now = engine_now_ms(e);
		int64_t next_due = now + 1000;
		for (size_t i = 0; i < e->ngroups; i++) {
			struct group_state *gs = &e->groups[i];
			int64_t iv = gs->interval_ms;
			if (gs->next_ms == 0)
				gs->next_ms = (now / iv + 1) * iv;
			if (gs->next_ms + EVAL_DELAY_MS <= now) {
				eval_group_locked(e, gs, gs->next_ms);
				now = engine_now_ms(e);
				/* Missed iterations are skipped, as Prometheus does. */
				gs->next_ms = ((now - EVAL_DELAY_MS) / iv + 1) * iv;
			}
			if (gs->next_ms + EVAL_DELAY_MS < next_due)
				next_due = gs->next_ms + EVAL_DELAY_MS;
		}
		int64_t wait_ms = next_due - engine_now_ms(e);
		if (wait_ms > 1000)
			wait_ms = 1000; /* the wall clock may step: look again */
		if (wait_ms > 0)
			clock_cond_wait_until(&e->wake, &e->lock, clock_mono_ns() + wait_ms * 1000000);
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
	pthread_cond_signal(&e->wake);
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

/* RFC 3339 with milliseconds, UTC; Go's zero time when never. */
static int put_rfc3339(struct buf *b, int64_t t_ms)
{
	if (t_ms <= 0)
		return buf_puts(b, "\"0001-01-01T00:00:00Z\"");
	time_t s = (time_t)(t_ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	return buf_printf(b, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"", tm.tm_year + 1900,
			  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			  (int)(t_ms % 1000));
}

static int put_labels(struct buf *b, const struct promql_label *l, size_t n)
{
	buf_putc(b, '{');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(b, ',');
		buf_put_json_string(b, l[i].name);
		buf_putc(b, ':');
		buf_put_json_string(b, l[i].value);
	}
	return buf_putc(b, '}');
}

int rules_engine_write_json(struct rules_engine *e, struct buf *b)
{
	pthread_mutex_lock(&e->lock);
	buf_putc(b, '[');
	for (size_t i = 0; i < e->ngroups; i++) {
		const struct group_state *gs = &e->groups[i];
		if (i)
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
			if (k)
				buf_putc(b, ',');
			buf_puts(b, "{\"name\":");
			buf_put_json_string(b, r->record ? r->record : r->alert);
			buf_puts(b, ",\"query\":");
			buf_put_json_string(b, r->expr_text);
			buf_puts(b, ",\"labels\":");
			put_labels(b, r->labels, r->nlabels);
			if (r->alert) {
				buf_puts(b, ",\"annotations\":");
				put_labels(b, r->annotations, r->nannotations);
				buf_puts(b, ",\"duration\":");
				buf_put_double(b, (double)r->for_ms / 1000.0);
				buf_puts(b, ",\"alerts\":[],\"state\":\"inactive\"");
			}
			buf_puts(b, ",\"health\":");
			buf_puts(b, r->alert ? "\"unknown\"" : st->health == 1 ? "\"ok\"" :
				    st->health == 2 ? "\"err\"" : "\"unknown\"");
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
