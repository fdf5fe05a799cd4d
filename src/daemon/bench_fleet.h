/* The fleet's side of benchd's comparison (docs/internals/bench.md): the
 * latest baseline values of the same model's other cards, read from a
 * central Prometheus that scrapes every gpulsed (bench.fleet_prometheus_url). */
#ifndef GPULSE_BENCH_FLEET_H
#define GPULSE_BENCH_FLEET_H

#include <jansson.h>

#include "bench/bench_result.h"

#define BENCH_FLEET_MAX 256 /* peers' values kept per figure */

/* Other cards' latest baseline values of r's model for every figure,
 * from the Prometheus at `base_url` ("": none): a JSON object
 * "figure/variant/method" -> [values] (at most BENCH_FLEET_MAX each; a
 * series without a method label, from a gpulsed before figures had one,
 * is BENCH_METHOD_LEGACY's), which the caller frees with json_decref.
 * NULL when not configured or unreachable (logged). Blocks up to 10 s. */
json_t *bench_fleet_query(const char *base_url, const struct bench_result *r);

#endif
