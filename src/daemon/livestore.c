/* The rules' in-memory history; see livestore.h. The exposition parser is
 * hand-written: it reads only what prom_render writes (the text format,
 * no timestamps), and no Debian library parses Prometheus's text format
 * from C. Series are found by their exposition text, `name{labels}`,
 * which prom_render writes the same way every time; labels are parsed
 * only for the series the rules read. */
#include "daemon/livestore.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/label.h"
#include "common/clock.h"
#include "export/expfmt.h"
#include "common/hash.h"
#include "common/periodic.h"
#include "common/stale.h"
#include "common/status.h"
#include "common/xalloc.h"

#define DEFAULT_INTERVAL_MS 1000
#define DEFAULT_MAX_SERIES 50000
#define DEFAULT_MAX_SAMPLES 2000000

struct lseries {
	char *key;                    /* "name{labels}" as the exposition writes it */
	size_t keylen;
	uint64_t names_gen;           /* the name set `wanted` was decided against */
	bool wanted;
	struct label *labels;  /* wanted only: sorted, __name__ included */
	size_t nlabels;
	struct promql_sample *s;      /* s[start..n) held, oldest first */
	size_t start, n, cap;
	uint64_t seen;                /* the last scrape that had it */
	bool ended;                   /* its last sample is a staleness marker */
};

struct livestore {
	struct livestore_opts o;
	livestore_render_fn *render;
	void *render_ctx;

	pthread_mutex_t lock;         /* everything below */
	struct lseries *series;
	size_t nseries, cap;
	uint32_t *index;              /* open addressing: series index + 1; 0 empty */
	size_t index_cap;             /* a power of two, at least twice nseries */
	char **names;                 /* the metric names kept, sorted */
	size_t nnames;
	bool all_names;               /* a selector names no metric: keep every series */
	uint64_t names_gen;
	int64_t window_ms;
	uint64_t scrape;              /* scrapes taken */
	int64_t last_t_ms;
	size_t samples;
	uint64_t failures, bad_lines, series_dropped, samples_dropped;

	struct periodic ticker;       /* scrape, every interval_ms */
	struct buf scrape_buf;        /* the scrape's text, the ticker's own */
};

/* ---- what the rules read ---------------------------------------------- */

static int64_t add_sat(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

int64_t livestore_reach_ms(const struct promql_expr *e, int64_t interval_ms)
{
	if (!e)
		return 0;
	int64_t self = 0, kids = 0;
	switch (e->kind) {
	case PROMQL_NODE_VECTOR_SEL:
	case PROMQL_NODE_MATRIX_SEL:
		if (e->at_mode == PROMQL_AT_TIME)
			return INT64_MAX;
		self = add_sat(add_sat(e->offset_ms > 0 ? e->offset_ms : 0, e->range_ms),
			       2 * interval_ms);
		break;
	case PROMQL_NODE_SUBQUERY:
		if (e->at_mode == PROMQL_AT_TIME)
			return INT64_MAX;
		/* Each step of the subquery reads as far back as its inner
		 * expression does. */
		return add_sat(add_sat(e->offset_ms > 0 ? e->offset_ms : 0, e->range_ms),
			       livestore_reach_ms(e->lhs, interval_ms));
	default:
		break;
	}
	const struct promql_expr *sub[3] = {e->lhs, e->rhs, e->param};
	for (int i = 0; i < 3; i++) {
		int64_t r = livestore_reach_ms(sub[i], interval_ms);
		if (r > kids)
			kids = r;
	}
	for (size_t i = 0; i < e->nargs; i++) {
		int64_t r = livestore_reach_ms(e->args[i], interval_ms);
		if (r > kids)
			kids = r;
	}
	return self > kids ? self : kids;
}

/* Add the metric names e's selectors name to names[*n] (grown as needed);
 * a selector without one sets *all. */
static void collect_names(const struct promql_expr *e, char ***names, size_t *n, size_t *cap,
			  bool *all)
{
	if (!e)
		return;
	if (e->kind == PROMQL_NODE_VECTOR_SEL || e->kind == PROMQL_NODE_MATRIX_SEL) {
		const char *name = e->metric_name;
		for (size_t i = 0; !name && i < e->nmatchers; i++)
			if (e->matchers[i].op == PROMQL_MATCH_EQ &&
			    strcmp(e->matchers[i].name, "__name__") == 0)
				name = e->matchers[i].value;
		if (!name) {
			*all = true;
			return;
		}
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 16;
			*names = xrealloc(*names, *cap * sizeof **names);
		}
		(*names)[(*n)++] = xstrdup(name);
		return;
	}
	collect_names(e->lhs, names, n, cap, all);
	collect_names(e->rhs, names, n, cap, all);
	collect_names(e->param, names, n, cap, all);
	for (size_t i = 0; i < e->nargs; i++)
		collect_names(e->args[i], names, n, cap, all);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void livestore_set_queries(struct livestore *ls, const struct promql_expr *const *exprs, size_t n)
{
	char **names = NULL;
	size_t nn = 0, cap = 0;
	bool all = false;
	int64_t window = 2 * ls->o.interval_ms;
	for (size_t i = 0; i < n; i++) {
		collect_names(exprs[i], &names, &nn, &cap, &all);
		int64_t r = livestore_reach_ms(exprs[i], ls->o.interval_ms);
		if (r > window)
			window = r;
	}
	if (window > LIVESTORE_MAX_WINDOW_MS)
		window = LIVESTORE_MAX_WINDOW_MS;
	if (nn)
		qsort(names, nn, sizeof *names, cmp_str);
	size_t k = 0;
	for (size_t i = 0; i < nn; i++) {
		if (k && strcmp(names[k - 1], names[i]) == 0)
			free(names[i]);
		else
			names[k++] = names[i];
	}
	pthread_mutex_lock(&ls->lock);
	char **old = ls->names;
	size_t nold = ls->nnames;
	ls->names = names;
	ls->nnames = k;
	ls->all_names = all;
	ls->window_ms = window;
	ls->names_gen++;
	pthread_mutex_unlock(&ls->lock);
	for (size_t i = 0; i < nold; i++)
		free(old[i]);
	free(old);
}

/* ---- series ------------------------------------------------------------- */

static void index_rebuild(struct livestore *ls)
{
	size_t cap = 1024;
	while (cap < 2 * ls->nseries)
		cap *= 2;
	free(ls->index);
	ls->index = xcalloc(cap, sizeof *ls->index);
	ls->index_cap = cap;
	for (size_t i = 0; i < ls->nseries; i++) {
		size_t h = (size_t)fnv1a64(ls->series[i].key, ls->series[i].keylen) & (cap - 1);
		while (ls->index[h])
			h = (h + 1) & (cap - 1);
		ls->index[h] = (uint32_t)(i + 1);
	}
}

/* The series with this key, created when new; NULL past max_series. */
static struct lseries *series_get(struct livestore *ls, const char *key, size_t len)
{
	size_t mask = ls->index_cap - 1;
	size_t h = (size_t)fnv1a64(key, len) & mask;
	for (; ls->index[h]; h = (h + 1) & mask) {
		struct lseries *s = &ls->series[ls->index[h] - 1];
		if (s->keylen == len && memcmp(s->key, key, len) == 0)
			return s;
	}
	if (ls->nseries >= ls->o.max_series) {
		ls->series_dropped++;
		return NULL;
	}
	if (ls->nseries == ls->cap) {
		ls->cap = ls->cap ? 2 * ls->cap : 256;
		ls->series = xrealloc(ls->series, ls->cap * sizeof *ls->series);
	}
	struct lseries *s = &ls->series[ls->nseries++];
	memset(s, 0, sizeof *s);
	s->key = xmalloc(len + 1);
	memcpy(s->key, key, len);
	s->key[len] = '\0';
	s->keylen = len;
	if (2 * ls->nseries > ls->index_cap) {
		index_rebuild(ls);
	} else {
		ls->index[h] = (uint32_t)ls->nseries;
	}
	return s;
}

static void series_clear(struct livestore *ls, struct lseries *s)
{
	for (size_t i = 0; i < s->nlabels; i++) {
		free((char *)(uintptr_t)s->labels[i].name);
		free((char *)(uintptr_t)s->labels[i].value);
	}
	free(s->labels);
	s->labels = NULL;
	s->nlabels = 0;
	ls->samples -= s->n - s->start;
	free(s->s);
	s->s = NULL;
	s->start = s->n = s->cap = 0;
}

struct label_list {
	struct label *l;
	size_t n, cap;
};

static int add_label(void *ctx, const char *name, const char *value)
{
	struct label_list *ll = ctx;
	if (ll->n == ll->cap) {
		ll->cap = ll->cap ? 2 * ll->cap : 8;
		ll->l = xrealloc(ll->l, ll->cap * sizeof *ll->l);
	}
	ll->l[ll->n++] = (struct label){xstrdup(name), xstrdup(value)};
	return 0;
}

/* Parse s->key's labels (well formed: expfmt_line read it), sorted by
 * name. Empty values are left out: an empty label is no label. */
static void series_parse_labels(struct lseries *s)
{
	struct label_list ll = {0};
	char *scratch = xmalloc(s->keylen + 2);
	expfmt_labels(s->key, s->keylen, strcspn(s->key, "{"), scratch, s->keylen + 2, add_label,
		      &ll);
	free(scratch);
	qsort(ll.l, ll.n, sizeof *ll.l, label_cmp_name);
	s->labels = ll.l;
	s->nlabels = ll.n;
}

/* Decide (again, after livestore_set_queries) whether s is kept. */
static void series_decide(struct livestore *ls, struct lseries *s)
{
	if (s->names_gen == ls->names_gen)
		return;
	s->names_gen = ls->names_gen;
	bool want = ls->all_names;
	if (!want) {
		size_t nl = strcspn(s->key, "{");
		char name[256];
		if (nl < sizeof name) {
			memcpy(name, s->key, nl);
			name[nl] = '\0';
			const char *k = name;
			want = bsearch(&k, ls->names, ls->nnames, sizeof *ls->names, cmp_str) != NULL;
		}
	}
	if (want && !s->wanted)
		series_parse_labels(s);
	else if (!want && s->wanted)
		series_clear(ls, s);
	s->wanted = want;
	if (!want)
		s->ended = false;
}

static void series_append(struct livestore *ls, struct lseries *s, int64_t t_ms, double v)
{
	if (s->n > s->start && s->s[s->n - 1].t_ms >= t_ms)
		return;
	if (s->n == s->cap) {
		if (s->start > 0) {
			memmove(s->s, s->s + s->start, (s->n - s->start) * sizeof *s->s);
			s->n -= s->start;
			s->start = 0;
		} else {
			s->cap = s->cap ? 2 * s->cap : 16;
			s->s = xrealloc(s->s, s->cap * sizeof *s->s);
		}
	}
	s->s[s->n++] = (struct promql_sample){t_ms, v};
	ls->samples++;
}

/* Drop s's samples before t_ms, and more old ones past `keep`. */
static void series_trim(struct livestore *ls, struct lseries *s, int64_t t_ms, size_t keep)
{
	size_t before = s->start;
	while (s->start < s->n && s->s[s->start].t_ms < t_ms)
		s->start++;
	if (s->n - s->start > keep) {
		ls->samples_dropped += s->n - s->start - keep;
		s->start = s->n - keep;
	}
	ls->samples -= s->start - before;
	if (s->start == s->n)
		s->start = s->n = 0;
}

/* ---- scrapes ----------------------------------------------------------- */

/* One line of the exposition: the series key (name and labels) and the
 * value. False for a comment, a blank line or one that does not parse
 * (*bad then set). */
void livestore_ingest(struct livestore *ls, const char *text, size_t len, int64_t t_ms)
{
	pthread_mutex_lock(&ls->lock);
	if (t_ms <= ls->last_t_ms) {
		pthread_mutex_unlock(&ls->lock);
		return;
	}
	ls->last_t_ms = t_ms;
	uint64_t gen = ++ls->scrape;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		struct expfmt_sample smp;
		enum expfmt_kind kind = expfmt_line(p, le, &smp);
		if (kind == EXPFMT_SAMPLE) {
			struct lseries *s = series_get(ls, p, smp.keylen);
			if (s) {
				series_decide(ls, s);
				s->seen = gen;
				if (s->wanted) {
					series_append(ls, s, t_ms, smp.v);
					s->ended = false;
				}
			}
		} else if (kind == EXPFMT_BAD) {
			ls->bad_lines++;
		}
		p = nl ? nl + 1 : end;
	}

	/* Series this scrape did not have end now; the unwanted ones and
	 * those with nothing left in the window go. */
	size_t wanted = 0;
	for (size_t i = 0; i < ls->nseries; i++) {
		struct lseries *s = &ls->series[i];
		series_decide(ls, s);
		if (s->wanted && s->seen != gen && !s->ended && s->n > s->start) {
			series_append(ls, s, t_ms, stale_nan());
			s->ended = true;
		}
		wanted += s->wanted;
	}
	size_t keep = wanted ? ls->o.max_samples / wanted : ls->o.max_samples;
	if (keep < 2)
		keep = 2;
	size_t k = 0;
	for (size_t i = 0; i < ls->nseries; i++) {
		struct lseries *s = &ls->series[i];
		if (s->wanted)
			series_trim(ls, s, t_ms - ls->window_ms, keep);
		bool gone = s->seen != gen && (!s->wanted || s->n == s->start);
		if (gone) {
			series_clear(ls, s);
			free(s->key);
			continue;
		}
		ls->series[k++] = *s;
	}
	if (k != ls->nseries) {
		ls->nseries = k;
		index_rebuild(ls);
	}
	pthread_mutex_unlock(&ls->lock);
}

/* One scrape, on the ticker's thread. */
static void scrape(void *arg)
{
	struct livestore *ls = arg;
	struct buf *b = &ls->scrape_buf;
	buf_reset(b);
	int64_t t_ms = clock_wall_ns() / NS_PER_MS;
	if (ls->render(ls->render_ctx, b) == 0 && !b->failed) {
		livestore_ingest(ls, b->data ? b->data : "", b->len, t_ms);
	} else {
		pthread_mutex_lock(&ls->lock);
		ls->failures++;
		pthread_mutex_unlock(&ls->lock);
	}
}

/* ---- life ---------------------------------------------------------------- */

int livestore_create(struct livestore **out, const struct livestore_opts *o,
		     livestore_render_fn *render, void *ctx)
{
	struct livestore *ls = calloc(1, sizeof *ls);
	if (!ls)
		return GPULSE_ENOMEM;
	ls->o = *o;
	if (ls->o.interval_ms <= 0)
		ls->o.interval_ms = DEFAULT_INTERVAL_MS;
	if (!ls->o.max_series)
		ls->o.max_series = DEFAULT_MAX_SERIES;
	if (ls->o.max_series > UINT32_MAX / 4)
		ls->o.max_series = UINT32_MAX / 4;
	if (!ls->o.max_samples)
		ls->o.max_samples = DEFAULT_MAX_SAMPLES;
	ls->render = render;
	ls->render_ctx = ctx;
	ls->window_ms = 2 * ls->o.interval_ms;
	ls->names_gen = 1;
	pthread_mutex_init(&ls->lock, NULL);
	buf_init(&ls->scrape_buf, 64u << 20);
	periodic_init(&ls->ticker, "gpulse-live", false, scrape, ls);
	index_rebuild(ls);
	*out = ls;
	return GPULSE_OK;
}

void livestore_destroy(struct livestore *ls)
{
	if (!ls)
		return;
	periodic_destroy(&ls->ticker);
	buf_free(&ls->scrape_buf);
	for (size_t i = 0; i < ls->nseries; i++) {
		series_clear(ls, &ls->series[i]);
		free(ls->series[i].key);
	}
	free(ls->series);
	free(ls->index);
	for (size_t i = 0; i < ls->nnames; i++)
		free(ls->names[i]);
	free(ls->names);
	pthread_mutex_destroy(&ls->lock);
	free(ls);
}

int livestore_start(struct livestore *ls)
{
	return periodic_start(&ls->ticker, ls->o.interval_ms * NS_PER_MS);
}

void livestore_stop(struct livestore *ls)
{
	if (ls)
		periodic_stop(&ls->ticker);
}

void livestore_get_stats(struct livestore *ls, struct livestore_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&ls->lock);
	out->scrapes_total = ls->scrape;
	out->scrape_failures_total = ls->failures;
	out->bad_lines_total = ls->bad_lines;
	out->series_dropped_total = ls->series_dropped;
	out->samples_dropped_total = ls->samples_dropped;
	for (size_t i = 0; i < ls->nseries; i++)
		out->series += ls->series[i].wanted;
	out->samples = ls->samples;
	out->window_ms = ls->window_ms;
	pthread_mutex_unlock(&ls->lock);
}

/* ---- the PromQL storage interface ---------------------------------------- */

static const char *label_value(const struct lseries *s, const char *name)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].name, name) == 0)
			return s->labels[i].value;
	return "";
}

/* First index in [lo, hi) with t >= t_ms. */
static size_t lower_bound(const struct promql_sample *v, size_t lo, size_t hi, int64_t t_ms)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].t_ms < t_ms)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether s satisfies every matcher, in *ok: 0 or promql_matcher_matches's
 * status, with its sentence in err. */
static int matches(const struct lseries *s, const struct promql_matcher *m, size_t nm, bool *ok,
		   char *err, size_t errlen)
{
	*ok = true;
	for (size_t i = 0; i < nm && *ok; i++) {
		int rc = promql_matcher_matches(&m[i], label_value(s, m[i].name), ok, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* Copies every matching series' samples in [mint, maxt] into one block
 * (series, labels, samples, then the strings), freed by release. */
static int live_select(void *ctx, const struct promql_matcher *matchers, size_t nmatchers,
		       int64_t mint_ms, int64_t maxt_ms, struct promql_series_set *out,
		       char *err, size_t errlen)
{
	struct livestore *ls = ctx;
	pthread_mutex_lock(&ls->lock);
	size_t ns = 0, nl = 0, nsamp = 0, bytes = 0;
	for (size_t i = 0; i < ls->nseries; i++) {
		const struct lseries *s = &ls->series[i];
		bool ok = false;
		if (!s->wanted)
			continue;
		int rc = matches(s, matchers, nmatchers, &ok, err, errlen);
		if (rc) {
			pthread_mutex_unlock(&ls->lock);
			return rc;
		}
		if (!ok)
			continue;
		size_t lo = lower_bound(s->s, s->start, s->n, mint_ms);
		size_t hi = maxt_ms == INT64_MAX ? s->n : lower_bound(s->s, lo, s->n, maxt_ms + 1);
		if (hi == lo)
			continue;
		ns++;
		nl += s->nlabels;
		nsamp += hi - lo;
		for (size_t j = 0; j < s->nlabels; j++)
			bytes += strlen(s->labels[j].name) + strlen(s->labels[j].value) + 2;
	}
	size_t total = ns * sizeof(struct promql_series) + nl * sizeof(struct label) +
		       nsamp * sizeof(struct promql_sample) + bytes;
	char *block = xmalloc(total ? total : 1);
	struct promql_series *series = (struct promql_series *)(void *)block;
	struct label *labels = (struct label *)(void *)(series + ns);
	struct promql_sample *samples = (struct promql_sample *)(void *)(labels + nl);
	char *str = (char *)(samples + nsamp);
	size_t k = 0;
	for (size_t i = 0; i < ls->nseries && k < ns; i++) {
		const struct lseries *s = &ls->series[i];
		bool ok = false;
		/* The first pass answered every matcher of these series. */
		if (!s->wanted || matches(s, matchers, nmatchers, &ok, NULL, 0) || !ok)
			continue;
		size_t lo = lower_bound(s->s, s->start, s->n, mint_ms);
		size_t hi = maxt_ms == INT64_MAX ? s->n : lower_bound(s->s, lo, s->n, maxt_ms + 1);
		if (hi == lo)
			continue;
		series[k] = (struct promql_series){labels, s->nlabels, samples, hi - lo};
		for (size_t j = 0; j < s->nlabels; j++) {
			size_t a = strlen(s->labels[j].name) + 1, b = strlen(s->labels[j].value) + 1;
			memcpy(str, s->labels[j].name, a);
			memcpy(str + a, s->labels[j].value, b);
			labels[j] = (struct label){str, str + a};
			str += a + b;
		}
		memcpy(samples, s->s + lo, (hi - lo) * sizeof *samples);
		labels += s->nlabels;
		samples += hi - lo;
		k++;
	}
	pthread_mutex_unlock(&ls->lock);
	out->series = series;
	out->nseries = ns;
	out->priv = block;
	return 0;
}

static void live_release(void *ctx, struct promql_series_set *set)
{
	(void)ctx;
	free(set->priv);
	set->priv = NULL;
	set->series = NULL;
	set->nseries = 0;
}

const struct promql_queryable livestore_queryable = {
	.name = "live",
	.select = live_select,
	.release = live_release,
};
