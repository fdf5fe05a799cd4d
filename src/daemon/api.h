/* Prometheus's HTTP query API over the embedded store (DESIGN.md,
 * decision 5): /api/v1/query, /api/v1/query_range, /api/v1/series,
 * /api/v1/labels and /api/v1/label/NAME/values, answering in Prometheus's
 * JSON envelopes and error types, so Grafana and promtool-style clients
 * work unchanged. Only GET (the HTTP server serves GET and HEAD). */
#ifndef GPULSE_API_H
#define GPULSE_API_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "eval.h"
#include "http_server.h"
#include "tsdb.h"

#define API_MAX_RANGE_MS (32LL * 86400 * 1000) /* query_range and series spans */
#define API_MAX_SERIES_RESULT 100000          /* series one /api/v1/series may list */
#define API_MAX_MATCH 32                      /* match[] arguments */

struct api {
	/* NULL: storage off or not open yet; every endpoint answers 503.
	 * Atomic: the daemon publishes a store that opens late (after a
	 * full disk at start) while HTTP threads read; set once, never
	 * taken back while the server runs. */
	struct tsdb *_Atomic db;
	struct promql_opts opts;    /* lookback and the evaluator's bounds */
	pthread_mutex_t why_mu;
	char why[768];              /* why storage is unavailable; "": off */
};

/* Fill *a for `db` (may be NULL) with Prometheus's defaults. */
void api_init(struct api *a, struct tsdb *db);
/* Serve `db` from now on (any thread; the store must outlive the server). */
void api_set_store(struct api *a, struct tsdb *db);
/* While no store is set, the 503 answers say "storage unavailable: WHY"
 * instead of "storage is disabled" (any thread; copied). */
void api_set_unavailable(struct api *a, const char *why);

/* Route the endpoints on `s` with `a` (which must outlive the server).
 * Call before a catch-all "/" route. 0 or GPULSE_ELIMIT. */
int api_register(struct http_server *s, struct api *a);

/* Parse a Prometheus API time: Unix seconds with an optional fraction
 * ("1700000000.123") or RFC 3339 ("2023-11-14T22:13:20.123Z", offsets
 * allowed). 0 with *t_ms set, or GPULSE_EINVAL. */
int api_parse_time(const char *s, int64_t *t_ms);

/* Parse a step or duration: seconds with a fraction ("15", "0.5") or a
 * Prometheus duration ("15s", "1m30s"). 0 or GPULSE_EINVAL. */
int api_parse_duration(const char *s, int64_t *ms);

/* Append t_ms as the API writes times: seconds, at most three decimals,
 * no trailing zeros ("1700000000.12", "1700000000"). */
int api_put_time(struct buf *b, int64_t t_ms);

#endif
