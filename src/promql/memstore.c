/* In-memory series store; see memstore.h. Lookup by label set is linear:
 * the store serves test inputs of a few hundred series, not production
 * data (that is the tsdb's job). */
#include "promql/memstore.h"

#include <stdlib.h>
#include <string.h>

#include "common/label.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

struct mseries {
	struct label *labels; /* owned strings, sorted by name */
	size_t nlabels;
	struct promql_sample *samples;
	size_t nsamples, cap;
};

struct memstore {
	struct mseries *series;
	size_t nseries, cap;
	size_t max_series, max_samples, total_samples;
};

struct memstore *memstore_new(size_t max_series, size_t max_samples)
{
	struct memstore *ms = xcalloc(1, sizeof *ms);
	ms->max_series = max_series;
	ms->max_samples = max_samples;
	return ms;
}

void memstore_free(struct memstore *ms)
{
	if (!ms)
		return;
	for (size_t i = 0; i < ms->nseries; i++) {
		struct mseries *s = &ms->series[i];
		for (size_t j = 0; j < s->nlabels; j++) {
			free((char *)(uintptr_t)s->labels[j].name);
			free((char *)(uintptr_t)s->labels[j].value);
		}
		free(s->labels);
		free(s->samples);
	}
	free(ms->series);
	free(ms);
}

size_t memstore_series_count(const struct memstore *ms)
{
	return ms->nseries;
}

int memstore_add(struct memstore *ms, const struct label *labels, size_t nlabels,
		 int64_t t_ms, double v)
{
	if (nlabels == 0 || nlabels > 64)
		return GPULSE_EINVAL;
	struct label sorted[64];
	memcpy(sorted, labels, nlabels * sizeof *labels);
	qsort(sorted, nlabels, sizeof *sorted, label_cmp_name);
	for (size_t i = 0; i < nlabels; i++)
		if (sorted[i].name[0] == '\0' || (i > 0 && strcmp(sorted[i - 1].name, sorted[i].name) == 0))
			return GPULSE_EINVAL;
	struct mseries *s = NULL;
	for (size_t i = 0; i < ms->nseries && !s; i++) {
		struct mseries *c = &ms->series[i];
		if (c->nlabels != nlabels)
			continue;
		size_t j;
		for (j = 0; j < nlabels; j++)
			if (strcmp(c->labels[j].name, sorted[j].name) || strcmp(c->labels[j].value, sorted[j].value))
				break;
		if (j == nlabels)
			s = c;
	}
	if (ms->total_samples >= ms->max_samples)
		return GPULSE_ELIMIT;
	if (!s) {
		if (ms->nseries >= ms->max_series)
			return GPULSE_ELIMIT;
		if (ms->nseries == ms->cap) {
			ms->cap = ms->cap ? ms->cap * 2 : 16;
			ms->series = xrealloc(ms->series, ms->cap * sizeof *ms->series);
		}
		s = &ms->series[ms->nseries++];
		memset(s, 0, sizeof *s);
		s->labels = xcalloc(nlabels, sizeof *s->labels);
		for (size_t j = 0; j < nlabels; j++) {
			s->labels[j].name = xstrdup(sorted[j].name);
			s->labels[j].value = xstrdup(sorted[j].value);
		}
		s->nlabels = nlabels;
	}
	if (s->nsamples > 0 && s->samples[s->nsamples - 1].t_ms >= t_ms)
		return GPULSE_EINVAL;
	if (s->nsamples == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->samples = xrealloc(s->samples, s->cap * sizeof *s->samples);
	}
	s->samples[s->nsamples].t_ms = t_ms;
	s->samples[s->nsamples].v = v;
	s->nsamples++;
	ms->total_samples++;
	return 0;
}

static const char *label_value(const struct mseries *s, const char *name)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].name, name) == 0)
			return s->labels[i].value;
	return "";
}

/* First index with t >= t_ms. */
static size_t lower_bound(const struct promql_sample *v, size_t n, int64_t t_ms)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].t_ms < t_ms)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int memstore_select(void *ctx, const struct promql_matcher *matchers, size_t nmatchers,
			   int64_t mint_ms, int64_t maxt_ms, struct promql_series_set *out,
			   char *err, size_t errlen)
{
	const struct memstore *ms = ctx;
	struct promql_series *res = xcalloc(ms->nseries ? ms->nseries : 1, sizeof *res);
	size_t n = 0;
	for (size_t i = 0; i < ms->nseries; i++) {
		const struct mseries *s = &ms->series[i];
		bool ok = true;
		for (size_t m = 0; m < nmatchers && ok; m++) {
			int rc = promql_matcher_matches(&matchers[m], label_value(s, matchers[m].name),
							&ok, err, errlen);
			if (rc) {
				free(res);
				return rc;
			}
		}
		if (!ok)
			continue;
		size_t lo = lower_bound(s->samples, s->nsamples, mint_ms);
		size_t hi = maxt_ms == INT64_MAX ? s->nsamples : lower_bound(s->samples, s->nsamples, maxt_ms + 1);
		res[n].labels = s->labels;
		res[n].nlabels = s->nlabels;
		res[n].samples = s->samples + lo;
		res[n].nsamples = hi > lo ? hi - lo : 0;
		n++;
	}
	out->series = res;
	out->nseries = n;
	out->priv = res;
	return 0;
}

static void memstore_release(void *ctx, struct promql_series_set *set)
{
	(void)ctx;
	free(set->priv);
	set->priv = NULL;
	set->series = NULL;
	set->nseries = 0;
}

const struct promql_queryable memstore_queryable = {
	.name = "memory",
	.select = memstore_select,
	.release = memstore_release,
};
