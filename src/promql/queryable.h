/* The storage interface the PromQL evaluator reads through: a const struct
 * of function pointers (htop's backend habit), so the evaluator knows
 * nothing of SQLite chunks or of the in-memory store the tests use. */
#ifndef GPULSE_PROMQL_QUERYABLE_H
#define GPULSE_PROMQL_QUERYABLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/label.h"
#include "promql/ast.h"

struct promql_sample {
	int64_t t_ms;
	double v;
};

/* One series: labels sorted by name (including __name__), samples in
 * increasing time order, each at most once per timestamp. */
struct promql_series {
	const struct label *labels;
	size_t nlabels;
	const struct promql_sample *samples;
	size_t nsamples;
};

/* What select hands back. The storage owns every byte it points to until
 * the evaluator passes the set to release(). */
struct promql_series_set {
	const struct promql_series *series;
	size_t nseries;
	void *priv; /* the storage's own bookkeeping */
};

struct promql_queryable {
	const char *name;
	/* Every series matching all `nmatchers` matchers, with its samples
	 * whose timestamps lie in [mint_ms, maxt_ms] (more is allowed: the
	 * evaluator filters). Stale markers are returned as stored. 0 on
	 * success; otherwise a status code and a message in err. */
	int (*select)(void *ctx, const struct promql_matcher *matchers, size_t nmatchers,
		      int64_t mint_ms, int64_t maxt_ms, struct promql_series_set *out,
		      char *err, size_t errlen);
	/* Optional (NULL: select is used): like select, but each series
	 * needs only its newest sample in [mint_ms, maxt_ms] (stale markers
	 * included), as an instant vector selector at maxt_ms reads. A
	 * store can answer it without decoding the whole lookback. */
	int (*select_latest)(void *ctx, const struct promql_matcher *matchers, size_t nmatchers,
			     int64_t mint_ms, int64_t maxt_ms, struct promql_series_set *out,
			     char *err, size_t errlen);
	/* Give back what select returned. */
	void (*release)(void *ctx, struct promql_series_set *set);
};

#endif
