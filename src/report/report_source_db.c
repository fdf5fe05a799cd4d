/* The report's store-backed source: the file opened read-only beside
 * whoever writes it, PromQL evaluated on it through the store-backed
 * storage (tsdb_queryable), as gpulsed's query API would. */
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "parser.h"
#include "report.h"
#include "status.h"
#include "str.h"
#include "tsdb.h"
#include "tsdb_queryable.h"
#include "xalloc.h"

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

static const struct report_source_ops db_ops = {
	.kind = "store",
	.query_range = db_query_range,
};

void report_db_source(struct report_db *d, struct report_source *src)
{
	memset(src, 0, sizeof *src);
	src->ops = &db_ops;
	src->ctx = d;
	src->where = d->path;
	src->raw_retention_ms = d->raw_retention_ms;
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
