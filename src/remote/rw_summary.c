/* Per-interval summaries and hot-GPU passthrough (rw_summary.h). */
#include "remote/rw_summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/quantile.h"
#include "common/status.h"

enum { AGG_MIN, AGG_MAX, AGG_MEAN, AGG_Q, NAGG };

struct series_state {
	bool init;
	bool counter;
	int gpu;                        /* index into gpus, -1: none */
	int64_t bucket;                 /* start of the open interval */
	double min, max, sum;
	uint64_t count, seen;
	double *vals;                   /* grows to RW_SUMMARY_MAX_VALUES */
	size_t nvals, capvals;
	bool have_last;
	int64_t last_t;
	double last_v;
	/* The summaries' label sets: labels with __name__ replaced. */
	struct label *agg_labels[NAGG];
	char *agg_names[NAGG];
	const struct label *labels;
	size_t n;
};

struct gpu_hot {
	char gpu[32];
	int64_t hot_until;
};

struct rw_summary {
	struct rw_summary_opts o;
	char suffix[NAGG][64];
	struct series_state *st;        /* by ref - 1 */
	size_t nst;
	struct gpu_hot gpus[RW_SUMMARY_MAX_GPUS];
	size_t ngpus;
	uint64_t rng;
	struct rw_summary_stats stats;
};

static void format_interval(int64_t ms, char *out, size_t len)
{
	if (ms % 3600000 == 0)
		snprintf(out, len, "%lldh", (long long)(ms / 3600000));
	else if (ms % 60000 == 0)
		snprintf(out, len, "%lldm", (long long)(ms / 60000));
	else if (ms % 1000 == 0)
		snprintf(out, len, "%llds", (long long)(ms / 1000));
	else
		snprintf(out, len, "%lldms", (long long)ms);
}

int rw_summary_create(struct rw_summary **out, const struct rw_summary_opts *o)
{
	struct rw_summary *s = calloc(1, sizeof *s);
	if (!s)
		return GPULSE_ENOMEM;
	s->o = *o;
	if (s->o.interval_ms <= 0)
		s->o.interval_ms = 60000;
	if (!(s->o.quantile > 0 && s->o.quantile < 1))
		s->o.quantile = 0.95;
	if (s->o.anomaly_threshold <= 0)
		s->o.anomaly_threshold = 4;
	if (s->o.hold_ms <= 0)
		s->o.hold_ms = 5000;
	char iv[24];
	format_interval(s->o.interval_ms, iv, sizeof iv);
	snprintf(s->suffix[AGG_MIN], sizeof s->suffix[0], ":min%s", iv);
	snprintf(s->suffix[AGG_MAX], sizeof s->suffix[0], ":max%s", iv);
	snprintf(s->suffix[AGG_MEAN], sizeof s->suffix[0], ":mean%s", iv);
	double pct = s->o.quantile * 100;
	if (pct == floor(pct))
		snprintf(s->suffix[AGG_Q], sizeof s->suffix[0], ":p%.0f_%s", pct, iv);
	else
		snprintf(s->suffix[AGG_Q], sizeof s->suffix[0], ":p%g_%s", pct, iv);
	for (char *p = s->suffix[AGG_Q]; *p; p++)
		if (*p == '.')
			*p = '_';
	s->rng = 0x9e3779b97f4a7c15ull;
	*out = s;
	return 0;
}

void rw_summary_destroy(struct rw_summary *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nst; i++) {
		free(s->st[i].vals);
		for (int a = 0; a < NAGG; a++) {
			free(s->st[i].agg_labels[a]);
			free(s->st[i].agg_names[a]);
		}
	}
	free(s->st);
	free(s);
}

static const char *label(const struct label *l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].name, name) == 0)
			return l[i].value;
	return NULL;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

static int gpu_index(struct rw_summary *s, const char *gpu)
{
	if (!gpu)
		return -1;
	for (size_t i = 0; i < s->ngpus; i++)
		if (strcmp(s->gpus[i].gpu, gpu) == 0)
			return (int)i;
	if (s->ngpus == RW_SUMMARY_MAX_GPUS || strlen(gpu) >= sizeof s->gpus[0].gpu)
		return -1;
	snprintf(s->gpus[s->ngpus].gpu, sizeof s->gpus[0].gpu, "%s", gpu);
	s->gpus[s->ngpus].hot_until = INT64_MIN;
	return (int)s->ngpus++;
}

static int state_init(struct rw_summary *s, struct series_state *st, const struct label *l,
		      size_t n)
{
	const char *name = label(l, n, "__name__");
	if (!name)
		name = "";
	st->counter = ends_with(name, "_total") || ends_with(name, "_count") ||
		      ends_with(name, "_sum") || ends_with(name, "_bucket") ||
		      strcmp(name, "ALERTS") == 0 || strcmp(name, "ALERTS_FOR_STATE") == 0;
	st->gpu = gpu_index(s, label(l, n, "gpu"));
	st->labels = l;
	st->n = n;
	if (!st->counter) {
		for (int a = 0; a < NAGG; a++) {
			size_t len = strlen(name) + strlen(s->suffix[a]) + 1;
			st->agg_names[a] = malloc(len);
			st->agg_labels[a] = malloc(n * sizeof *st->agg_labels[a]);
			if (!st->agg_names[a] || !st->agg_labels[a])
				return GPULSE_ENOMEM;
			snprintf(st->agg_names[a], len, "%s%s", name, s->suffix[a]);
			for (size_t i = 0; i < n; i++) {
				st->agg_labels[a][i] = l[i];
				if (strcmp(l[i].name, "__name__") == 0)
					st->agg_labels[a][i].value = st->agg_names[a];
			}
		}
	}
	st->init = true;
	st->bucket = INT64_MIN;
	return 0;
}

/* The open interval of st ended: emit it, reset. */
static void close_bucket(struct rw_summary *s, struct series_state *st, rw_summary_emit_fn *emit,
			 void *ctx)
{
	if (st->bucket == INT64_MIN)
		return;
	int64_t end = st->bucket + s->o.interval_ms;
	if (st->counter) {
		if (st->have_last) {
			emit(ctx, st, st->labels, st->n, st->last_t, st->last_v);
			s->stats.summaries_total++;
		}
	} else if (st->count) {
		double v[NAGG] = {st->min, st->max, st->sum / (double)st->count,
				  st->nvals ? quantile_of(st->vals, st->nvals, s->o.quantile)
					   : st->sum / (double)st->count};
		/* One ms before the interval's end: the summary of [b, b+I)
		 * belongs to it, and a raw sample at b+I (a hot GPU) must not
		 * share its timestamp in a receiver's view of time. */
		for (int a = 0; a < NAGG; a++)
			emit(ctx, st->agg_labels[a], st->agg_labels[a], st->n, end - 1, v[a]);
		s->stats.summaries_total += NAGG;
	}
	st->bucket = INT64_MIN;
	st->count = st->seen = st->nvals = 0;
	st->have_last = false;
}

int rw_summary_add(struct rw_summary *s, uint32_t ref, const struct label *labels, size_t n,
		   int64_t t_ms, double v, rw_summary_emit_fn *emit, void *ctx)
{
	s->stats.samples_in_total++;
	if (ref == 0) {
		s->stats.errors_total++;
		return GPULSE_EINVAL;
	}
	if (ref > s->nst) {
		size_t cap = s->nst ? s->nst : 1024;
		while (cap < ref)
			cap *= 2;
		struct series_state *ns = realloc(s->st, cap * sizeof *ns);
		if (!ns) {
			s->stats.errors_total++;
			return GPULSE_ENOMEM;
		}
		memset(ns + s->nst, 0, (cap - s->nst) * sizeof *ns);
		s->st = ns;
		s->nst = cap;
	}
	struct series_state *st = &s->st[ref - 1];
	if (!st->init && state_init(s, st, labels, n)) {
		s->stats.errors_total++;
		return GPULSE_ENOMEM;
	}
	const char *name = label(labels, n, "__name__");
	bool is_alerts = name && strcmp(name, "ALERTS") == 0;
	bool hot = st->gpu >= 0 && t_ms <= s->gpus[st->gpu].hot_until;
	if (is_alerts || hot) {
		emit(ctx, st, labels, n, t_ms, v);
		if (!is_alerts)
			s->stats.raw_passthrough_total++;
	}
	if (is_alerts)
		return 0;
	int64_t b = t_ms - (((t_ms % s->o.interval_ms) + s->o.interval_ms) % s->o.interval_ms);
	if (st->bucket != INT64_MIN && b != st->bucket)
		close_bucket(s, st, emit, ctx);
	st->bucket = b;
	if (st->counter) {
		st->have_last = true;
		st->last_t = t_ms;
		st->last_v = v;
		return 0;
	}
	if (isnan(v))
		return 0;   /* a staleness marker ends nothing here: the interval does */
	if (st->count == 0 || v < st->min)
		st->min = v;
	if (st->count == 0 || v > st->max)
		st->max = v;
	st->sum = st->count ? st->sum + v : v;
	st->count++;
	st->seen++;
	if (st->nvals == st->capvals && st->capvals < RW_SUMMARY_MAX_VALUES) {
		/* Grown as the interval needs it: a 1 Hz series holds 60 values
		 * a minute, a 10 Hz one 600. */
		size_t cap = st->capvals ? st->capvals * 2 : 64;
		if (cap > RW_SUMMARY_MAX_VALUES)
			cap = RW_SUMMARY_MAX_VALUES;
		double *nv = realloc(st->vals, cap * sizeof *nv);
		if (nv) {
			st->vals = nv;
			st->capvals = cap;
		}
	}
	if (st->nvals < st->capvals) {
		st->vals[st->nvals++] = v;
	} else if (st->nvals < RW_SUMMARY_MAX_VALUES) {
		s->stats.errors_total++;  /* no memory to grow: the value is left out of the quantile */
	} else {
		/* Reservoir sampling (Vitter's R): each value kept with equal
		 * chance, so the quantile stays unbiased past the bound. */
		s->rng ^= s->rng << 13;
		s->rng ^= s->rng >> 7;
		s->rng ^= s->rng << 17;
		uint64_t j = s->rng % st->seen;
		if (j < RW_SUMMARY_MAX_VALUES)
			st->vals[j] = v;
		s->stats.reservoir_total++;
	}
	return 0;
}

void rw_summary_observe(struct rw_summary *s, const struct label *labels, size_t n,
			int64_t t_ms, double v)
{
	if (isnan(v))
		return;
	const char *name = label(labels, n, "__name__");
	if (!name || !((strcmp(name, "ALERTS") == 0 && v == 1) ||
		       (strcmp(name, "gpulse_anomaly_score") == 0 && v > s->o.anomaly_threshold)))
		return;
	int g = gpu_index(s, label(labels, n, "gpu"));
	if (g >= 0 && t_ms + s->o.hold_ms > s->gpus[g].hot_until)
		s->gpus[g].hot_until = t_ms + s->o.hold_ms;
}

void rw_summary_sweep(struct rw_summary *s, int64_t now_ms, rw_summary_emit_fn *emit, void *ctx)
{
	for (size_t i = 0; i < s->nst; i++) {
		struct series_state *st = &s->st[i];
		if (st->init && st->bucket != INT64_MIN && st->bucket + s->o.interval_ms <= now_ms)
			close_bucket(s, st, emit, ctx);
	}
}

void rw_summary_get_stats(const struct rw_summary *s, struct rw_summary_stats *out)
{
	*out = s->stats;
}
