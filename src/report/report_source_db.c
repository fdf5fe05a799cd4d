/* The report's store-backed source: the file opened read-only beside
 * whoever writes it, PromQL evaluated on it through the store-backed
 * storage (tsdb_queryable), as gpulsed's query API would. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "promql/eval.h"
#include "promql/parser.h"
#include "report/report.h"
#include "common/status.h"
#include "common/str.h"
#include "store/tsdb.h"
#include "promql/tsdb_queryable.h"
#include "common/xalloc.h"

struct report_db {
	struct tsdb *db;
	char path[1024];
	int64_t raw_retention_ms;
};

int report_db_open(struct report_db **out, const char *path, int64_t raw_retention_ms,
		   char *err, size_t errlen)
{
	*out = NULL;
	struct report_db *d = xcalloc(1, sizeof *d);
	str_copy(d->path, sizeof d->path, path);
	d->raw_retention_ms = raw_retention_ms > 0 ? raw_retention_ms : 48LL * 3600 * 1000;
	struct tsdb_opts o = {.path = path, .read_only = true,
			      .raw_retention_ms = d->raw_retention_ms};
	int rc = tsdb_open(&d->db, &o, err, errlen);
	if (rc) {
		free(d);
		return rc;
	}
	*out = d;
	return 0;
}

static char *dup_str(const char *s)
{
	return xstrdup(s ? s : "");
}

static int db_query_range(void *ctx, const char *expr, int64_t start_ms, int64_t end_ms,
			  int64_t step_ms, bool rollups, struct report_matrix *out, char *err,
			  size_t errlen)
{
	struct report_db *d = ctx;
	struct promql_expr *e = NULL;
	int rc = promql_parse(expr, &e, err, errlen);
	if (rc)
		return rc;
	struct promql_opts po;
	promql_opts_default(&po);
	struct tsdb_queryable_ctx qc = {.db = d->db, .rollups = rollups};
	struct promql_result *res = NULL;
	rc = promql_eval_range(e, &tsdb_queryable, &qc, &po, start_ms, end_ms, step_ms, &res, err,
			       errlen);
	promql_expr_free(e);
	if (rc)
		return rc;
	size_t base = out->n;
	out->series = xrealloc(out->series, (base + res->nseries + 1) * sizeof *out->series);
	for (size_t i = 0; i < res->nseries; i++) {
		const struct promql_result_series *rs = &res->series[i];
		struct report_series *s = &out->series[base + i];
		memset(s, 0, sizeof *s);
		s->labels = xcalloc(rs->nlabels ? rs->nlabels : 1, sizeof *s->labels);
		s->nlabels = rs->nlabels;
		for (size_t k = 0; k < rs->nlabels; k++) {
			s->labels[k].name = dup_str(rs->labels[k].name);
			s->labels[k].value = dup_str(rs->labels[k].value);
		}
		s->t_ms = xmalloc((rs->npoints ? rs->npoints : 1) * sizeof *s->t_ms);
		s->v = xmalloc((rs->npoints ? rs->npoints : 1) * sizeof *s->v);
		s->n = rs->npoints;
		for (size_t k = 0; k < rs->npoints; k++) {
			s->t_ms[k] = rs->points[k].t_ms;
			s->v[k] = rs->points[k].v;
		}
	}
	out->n = base + res->nseries;
	promql_result_free(res);
	return 0;
}

/* The slots straight from the store: raw samples or rollup buckets
 * summed per slot (report.h, slots). Cheaper than PromQL's per-step
 * windows by the whole evaluation, and exact for any step. */
static int db_slots(void *ctx, const char *metric, int gpu, int64_t start_ms, int64_t end_ms,
		    int64_t step_ms, bool rollups, bool want_max, struct report_matrix *out,
		    char *err, size_t errlen)
{
	struct report_db *d = ctx;
	char gs[16];
	snprintf(gs, sizeof gs, "%d", gpu);
	struct tsdb_matcher m[2] = {{TSDB_MATCH_EQ, "__name__", metric}, {TSDB_MATCH_EQ, "gpu", gs}};
	size_t n = (size_t)((end_ms - start_ms + step_ms - 1) / step_ms);
	/* The largest value of one slot over rollups (the card's memory total
	 * per segment): SQLite takes the range's max itself instead of
	 * handing each bucket up. A max is exact either way; a mean is left to
	 * the row walk, whose sum is added in the same order as ever. */
	struct tsdb_select_opts so = {.mint = start_ms, .maxt = end_ms - 1,
				      .mode = !rollups ? TSDB_READ_RAW
					      : n == 1 && want_max ? TSDB_READ_ROLLUP_TOTAL : TSDB_READ_ROLLUP};
	struct tsdb_iter *it = NULL;
	int rc = tsdb_select(d->db, m, gpu >= 0 ? 2 : 1, &so, &it, err, errlen);
	if (rc)
		return rc;
	double *sum = xmalloc((n ? n : 1) * sizeof *sum), *mx = xmalloc((n ? n : 1) * sizeof *mx);
	uint64_t *cnt = xmalloc((n ? n : 1) * sizeof *cnt);
	int more;
	while ((more = tsdb_iter_next_series(it)) == 1) {
		memset(cnt, 0, n * sizeof *cnt);
		memset(sum, 0, n * sizeof *sum);
		int64_t t;
		double v;
		struct tsdb_rollup ru;
		/* Samples come in time order: walk the slots instead of dividing
		 * every timestamp (the division was a third of a raw read). */
		size_t ks = 0;
		int64_t slot_end = start_ms + step_ms;
		for (;;) {
			uint64_t c = 1;
			double vmax;
			if (rollups) {
				if (tsdb_iter_next_rollup(it, &ru) != 1)
					break;
				t = ru.t_ms;
				v = ru.sum;
				vmax = ru.max;
				c = ru.count;
			} else {
				if (tsdb_iter_next_sample(it, &t, &v) != 1)
					break;
				vmax = v;
			}
			if (c == 0 || t < start_ms || t >= end_ms || !isfinite(v))
				continue; /* staleness markers are NaN */
			if (t >= slot_end) {
				if (t - slot_end < 8 * step_ms) {
					while (t >= slot_end) {
						ks++;
						slot_end += step_ms;
					}
				} else {
					ks = (size_t)((t - start_ms) / step_ms);
					slot_end = start_ms + ((int64_t)ks + 1) * step_ms;
				}
			} else if (t < slot_end - step_ms) {
				ks = (size_t)((t - start_ms) / step_ms); /* out of order: never, but safe */
				slot_end = start_ms + ((int64_t)ks + 1) * step_ms;
			}
			if (cnt[ks] == 0 || vmax > mx[ks])
				mx[ks] = vmax;
			sum[ks] += v;
			cnt[ks] += c;
		}
		size_t np = 0;
		for (size_t k = 0; k < n; k++)
			np += cnt[k] > 0;
		if (np == 0)
			continue;
		size_t nl;
		const struct label *tl = tsdb_iter_labels(it, &nl);
		out->series = xrealloc(out->series, (out->n + 1) * sizeof *out->series);
		struct report_series *s = &out->series[out->n++];
		memset(s, 0, sizeof *s);
		s->labels = xcalloc(nl ? nl : 1, sizeof *s->labels);
		for (size_t i = 0; i < nl; i++) {
			if (strcmp(tl[i].name, "__name__") == 0)
				continue; /* as avg_over_time drops it */
			s->labels[s->nlabels].name = dup_str(tl[i].name);
			s->labels[s->nlabels].value = dup_str(tl[i].value);
			s->nlabels++;
		}
		s->t_ms = xmalloc(np * sizeof *s->t_ms);
		s->v = xmalloc(np * sizeof *s->v);
		for (size_t k = 0; k < n; k++)
			if (cnt[k]) {
				s->t_ms[s->n] = start_ms + (int64_t)k * step_ms + step_ms - 1;
				s->v[s->n] = want_max ? mx[k] : sum[k] / (double)cnt[k];
				s->n++;
			}
	}
	free(sum);
	free(mx);
	free(cnt);
	tsdb_iter_free(it);
	if (more < 0) {
		str_errf(err, errlen, "%s: reading %s failed: %s", d->path, metric,
			 gpulse_strerror(-more));
		return -more;
	}
	return 0;
}

static const struct report_source_ops db_ops = {
	.kind = "store",
	.query_range = db_query_range,
	.slots = db_slots,
};

void report_db_source(struct report_db *d, struct report_source *src)
{
	memset(src, 0, sizeof *src);
	src->ops = &db_ops;
	src->ctx = d;
	src->where = d->path;
	src->raw_retention_ms = d->raw_retention_ms;
	src->rollup_step_ms = 60000; /* tsdb's default rollup step: what gpulsed uses */
}

int64_t report_db_now_ms(const struct report_db *d)
{
	return tsdb_now_ms(d->db);
}

void report_db_close(struct report_db *d)
{
	if (!d)
		return;
	tsdb_close(d->db);
	free(d);
}
