/* A simple in-memory store behind the promql_queryable interface: used by
 * the tests, by the conformance driver and by `gpulse rules test`, which
 * loads promtool's input_series into it. Not thread-safe while written;
 * any number of concurrent readers once loading is done. */
#ifndef GPULSE_PROMQL_MEMSTORE_H
#define GPULSE_PROMQL_MEMSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "promql/queryable.h"

struct memstore;

extern const struct promql_queryable memstore_queryable;

/* A new empty store holding at most max_series series and max_samples
 * samples in all. Free with memstore_free. Never NULL (aborts on OOM). */
struct memstore *memstore_new(size_t max_series, size_t max_samples);
/* Accepts NULL. */
void memstore_free(struct memstore *ms);

/* Append one sample to the series with these labels (any order; copied;
 * creating the series if new). Samples of a series must come in
 * increasing time order: an older or equal timestamp gives GPULSE_EINVAL.
 * GPULSE_ELIMIT when a bound is hit, GPULSE_EINVAL for an empty or
 * duplicated label name. */
int memstore_add(struct memstore *ms, const struct label *labels, size_t nlabels,
		 int64_t t_ms, double v);

size_t memstore_series_count(const struct memstore *ms);

#endif
