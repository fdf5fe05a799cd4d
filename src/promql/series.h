/* promtool's series notation for rule unit tests' input_series:
 * "1+1x10 _ stale 5-2x3 _x2 7x2". Needed by `gpulse rules test` and by the
 * PromQL tests and conformance driver. */
#ifndef GPULSE_PROMQL_SERIES_H
#define GPULSE_PROMQL_SERIES_H

#include <stdbool.h>
#include <stddef.h>

#include "promql/queryable.h"

#define PROMQL_MAX_SERIES_VALUES (1000 * 1000) /* values per expanded line */

struct promql_series_value {
	bool omitted; /* "_": no sample at this step */
	double v;     /* may be the staleness marker ("stale") */
};

/* Expand `text` into one value per interval step: "a+bxn" gives n+1
 * values a, a+b, ... (added up step by step, as promtool does), "a-bxn"
 * likewise downwards, "axn" n+1 copies of a, "_" one missing value, "_xn"
 * n missing values, "stale" a staleness marker. On success *out is a new
 * array the caller frees with free(), *n its length. GPULSE_EPARSE with a
 * message naming the item, or GPULSE_ELIMIT past PROMQL_MAX_SERIES_VALUES. */
int promql_parse_series_values(const char *text, struct promql_series_value **out, size_t *n,
			       char *err, size_t errlen);

/* Parse a series description such as 'up{job="a", instance="b"}' into a
 * label set sorted by name (the name as __name__). *labels is one
 * allocation the caller frees with free(); the strings live inside it. */
int promql_parse_series_labels(const char *text, struct label **labels, size_t *n,
			       char *err, size_t errlen);

#endif
