/* The PromQL storage interface (queryable.h) over the embedded store
 * (tsdb.h): the query engine sits above the store, so the adapter lives
 * with the engine. Reads raw samples, staleness markers included; with
 * `rollups` set, a range that reaches back past the store's raw retention
 * is read from the
 * 1-minute rollups instead, each bucket as one sample (its mean) at the
 * bucket's start, so long-range queries still answer at that resolution
 * (max_over_time then sees the largest minute mean, not the largest sample). */
#ifndef GPULSE_TSDB_QUERYABLE_H
#define GPULSE_TSDB_QUERYABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "promql/eval.h"
#include "promql/queryable.h"
#include "store/tsdb.h"

extern const struct promql_queryable tsdb_queryable;

/* The context tsdb_queryable's functions take. Bounds stop a select
 * before it loads more than the evaluator would accept anyway. */
struct tsdb_queryable_ctx {
	struct tsdb *db;
	size_t max_series;   /* 0: PROMQL_DEFAULT_MAX_SERIES */
	size_t max_samples;  /* 0: PROMQL_DEFAULT_MAX_SAMPLES */
	bool rollups;        /* read rollups for ranges older than raw retention
	                        (by the wall clock): the query API sets it;
	                        off, only raw samples are read */
	/* The query's deadline and cancel test (eval.h), looked at every
	 * few thousand samples read; NULL: none. Must outlive the query. */
	const struct promql_opts *stop;
};

#endif
