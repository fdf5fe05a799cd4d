/* promql_queryable over the tsdb; see tsdb_queryable.h. A select copies
 * the iterator's series into arrays the evaluator reads, all owned by one
 * bookkeeping struct that release frees. */
#include "promql/tsdb_queryable.h"

#include <stdlib.h>
#include <string.h>

#include "promql/eval.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

struct tq_set {
	struct promql_series *series;
	size_t n, cap;
	char **strings;                  /* every label string, freed at release */
	size_t nstrings, capstrings;
};

static char *keep(struct tq_set *s, const char *text)
{
	if (s->nstrings == s->capstrings) {
		s->capstrings = s->capstrings ? s->capstrings * 2 : 64;
		s->strings = xrealloc(s->strings, s->capstrings * sizeof *s->strings);
	}
	return s->strings[s->nstrings++] = xstrdup(text);
}

static void tq_free(struct tq_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free((void *)(uintptr_t)s->series[i].labels);
		free((void *)(uintptr_t)s->series[i].samples);
	}
	for (size_t i = 0; i < s->nstrings; i++)
		free(s->strings[i]);
	free(s->strings);
	free(s->series);
	free(s);
}

static enum tsdb_match_op match_op(enum promql_match_op op)
{
	switch (op) {
	case PROMQL_MATCH_NEQ: return TSDB_MATCH_NE;
	case PROMQL_MATCH_RE: return TSDB_MATCH_RE;
	case PROMQL_MATCH_NRE: return TSDB_MATCH_NRE;
	default: return TSDB_MATCH_EQ;
	}
}

static int tq_select_mode(void *ctx, const struct promql_matcher *matchers, size_t nmatchers,
			  int64_t mint_ms, int64_t maxt_ms, bool latest,
			  struct promql_series_set *out, char *err, size_t errlen)
{
	const struct tsdb_queryable_ctx *c = ctx;
	size_t max_series = c->max_series ? c->max_series : PROMQL_DEFAULT_MAX_SERIES;
	size_t max_samples = c->max_samples ? c->max_samples : PROMQL_DEFAULT_MAX_SAMPLES;
	memset(out, 0, sizeof *out);
	if (nmatchers > TSDB_MAX_MATCHERS) {
		str_errf(err, errlen, "more than %d label matchers", TSDB_MAX_MATCHERS);
		return GPULSE_ELIMIT;
	}
	struct tsdb_matcher tm[TSDB_MAX_MATCHERS];
	for (size_t i = 0; i < nmatchers; i++)
		tm[i] = (struct tsdb_matcher){match_op(matchers[i].op), matchers[i].name,
					      matchers[i].value};
	/* AUTO: raw samples, unless the range reaches back past raw
	 * retention, where only the 1-minute rollups are left; a rollup
	 * bucket then reads as one sample, its mean, at the bucket's start. */
	struct tsdb_select_opts so = {.mint = mint_ms, .maxt = maxt_ms,
				      .mode = latest ? TSDB_READ_LATEST
					      : c->rollups ? TSDB_READ_AUTO : TSDB_READ_RAW};
	struct tsdb_iter *it = NULL;
	int rc = tsdb_select(c->db, tm, nmatchers, &so, &it, err, errlen);
	if (rc)
		return rc;
	struct tq_set *s = xcalloc(1, sizeof *s);
	size_t total = 0, scanned = 0;
	int64_t next_poll_ns = 0;
	int more;
	while ((more = tsdb_iter_next_series(it)) == 1) {
		if (c->stop && (rc = promql_check_stop(c->stop, &next_poll_ns, "query execution",
						       err, errlen)) != 0)
			goto fail;
		if (s->n == max_series) {
			str_errf(err, errlen, "query selects more than %zu series", max_series);
			rc = GPULSE_ELIMIT;
			goto fail;
		}
		size_t nl;
		const struct label *tl = tsdb_iter_labels(it, &nl);
		struct label *pl = xcalloc(nl ? nl : 1, sizeof *pl);
		for (size_t i = 0; i < nl; i++) {
			pl[i].name = keep(s, tl[i].name);
			pl[i].value = keep(s, tl[i].value);
		}
		struct promql_sample *ps = NULL;
		size_t np = 0, cap = 0;
		int64_t t;
		double v;
		bool rollup = tsdb_iter_is_rollup(it);
		struct tsdb_rollup ru;
		for (;;) {
			if (rollup) {
				if (tsdb_iter_next_rollup(it, &ru) != 1)
					break;
				if (ru.count == 0)
					continue;
				t = ru.t_ms;
				v = ru.sum / (double)ru.count;
			} else if (tsdb_iter_next_sample(it, &t, &v) != 1) {
				break;
			}
			/* Decoding is the slow part of a long range: look at the
			 * clock every 4096 samples read, kept or not. */
			if (c->stop && (++scanned & 4095) == 0 &&
			    (rc = promql_check_stop(c->stop, &next_poll_ns, "query execution", err,
						    errlen)) != 0) {
				free(ps);
				free(pl);
				goto fail;
			}
			if (t < mint_ms || t > maxt_ms)
				continue;
			if (++total > max_samples) {
				free(ps);
				free(pl);
				str_errf(err, errlen,
					 "query processing would load too many samples into memory in "
					 "query execution (limit %zu)", max_samples);
				rc = GPULSE_ELIMIT;
				goto fail;
			}
			if (np == cap) {
				cap = cap ? cap * 2 : 64;
				ps = xrealloc(ps, cap * sizeof *ps);
			}
			ps[np++] = (struct promql_sample){t, v};
		}
		if (s->n == s->cap) {
			s->cap = s->cap ? s->cap * 2 : 16;
			s->series = xrealloc(s->series, s->cap * sizeof *s->series);
		}
		s->series[s->n++] = (struct promql_series){pl, nl, ps, np};
	}
	if (more < 0) {
		rc = -more;
		str_errf(err, errlen, "reading the store failed: %s", gpulse_strerror(rc));
		goto fail;
	}
	tsdb_iter_free(it);
	out->series = s->series;
	out->nseries = s->n;
	out->priv = s;
	return GPULSE_OK;
fail:
	tsdb_iter_free(it);
	tq_free(s);
	return rc;
}

static int tq_select(void *ctx, const struct promql_matcher *matchers, size_t nmatchers,
		     int64_t mint_ms, int64_t maxt_ms, struct promql_series_set *out, char *err,
		     size_t errlen)
{
	return tq_select_mode(ctx, matchers, nmatchers, mint_ms, maxt_ms, false, out, err, errlen);
}

/* Instant selectors read one chunk per series, not the lookback. With
 * rollups allowed (a query that may reach past raw retention) the plain
 * select decides between raw samples and rollups. */
static int tq_select_latest(void *ctx, const struct promql_matcher *matchers, size_t nmatchers,
			    int64_t mint_ms, int64_t maxt_ms, struct promql_series_set *out,
			    char *err, size_t errlen)
{
	const struct tsdb_queryable_ctx *c = ctx;
	return tq_select_mode(ctx, matchers, nmatchers, mint_ms, maxt_ms, !c->rollups, out, err,
			      errlen);
}

static void tq_release(void *ctx, struct promql_series_set *set)
{
	(void)ctx;
	tq_free(set->priv);
	memset(set, 0, sizeof *set);
}

const struct promql_queryable tsdb_queryable = {
	.name = "tsdb",
	.select = tq_select,
	.select_latest = tq_select_latest,
	.release = tq_release,
};
