/* Prometheus's HTTP query API over the embedded store (DESIGN.md,
 * decision 5): /api/v1/query, /api/v1/query_range, /api/v1/series,
 * /api/v1/labels and /api/v1/label/NAME/values, answering in Prometheus's
 * JSON envelopes and error types, so Grafana and promtool-style clients
 * work unchanged. Only GET (the HTTP server serves GET and HEAD). */
#ifndef GPULSE_API_H
#define GPULSE_API_H

#include <stdatomic.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "promql/eval.h"
#include "http/http_server.h"
#include "store/tsdb.h"

/* The query section's defaults (query: in gpulsed's configuration). */
/* query.timeout's default, as Prometheus's --query.timeout. */
#define API_DEFAULT_TIMEOUT_NS (120LL * 1000000000LL)
/* query.max_concurrency's default. Prometheus's is 20, for a server of
 * its own; gpulsed shares a GPU node's CPUs with the jobs it watches, a
 * query is CPU-bound on one core, and more at once only share cores and
 * memory (up to max_samples each), so two run and the rest wait. */
#define API_DEFAULT_MAX_CONCURRENCY 2

#define API_MAX_RANGE_MS (32LL * 86400 * 1000) /* query_range and series spans */
#define API_MAX_SERIES_RESULT 100000          /* series one /api/v1/series may list */
#define API_MAX_MATCH 32                      /* match[] arguments */
/* Queries that may wait for a free slot beyond those running; more get
 * 503 "unavailable". Each waiting one holds a connection (of
 * http.max_connections, default 64), so the bound keeps most of them for
 * scrapes. */
#define API_MAX_QUEUED 16
/* The query threads' nice increment: on a busy node the threads that
 * serve /metrics and collect samples get the CPU first. */
#define API_QUERY_NICE 10

/* What the query endpoints counted (gpulse_queries_*). */
struct api_stats {
	uint64_t running;            /* evaluating now */
	uint64_t queued;             /* waiting for a slot */
	uint64_t started_total;
	uint64_t rejected_total;     /* 503 unavailable: no slot and the queue full */
	uint64_t timed_out_total;    /* 503 timeout: past query.timeout */
	uint64_t cancelled_total;    /* the client left: stopped, or dropped unrun */
};

struct api {
	/* NULL: storage off or not open yet; every endpoint answers 503.
	 * Atomic: the daemon publishes a store that opens late (after a
	 * full disk at start) while HTTP threads read; set once, never
	 * taken back while the server runs. */
	struct tsdb *_Atomic db;
	struct promql_opts opts;    /* lookback and the evaluator's bounds */
	int64_t timeout_ns;         /* query.timeout, from the request's arrival
	                               (time queued included); 0: none */
	unsigned max_concurrency;   /* query.max_concurrency: the pool's threads */
	struct http_pool *pool;     /* set by api_register */
	atomic_uint_fast64_t timed_out_total, cancelled_total;
	pthread_mutex_t why_mu;
	char why[768];              /* why storage is unavailable; "": off */
};

/* Fill *a for `db` (may be NULL) with Prometheus's defaults and the
 * defaults above. */
void api_init(struct api *a, struct tsdb *db);
/* Serve `db` from now on (any thread; the store must outlive the server). */
void api_set_store(struct api *a, struct tsdb *db);
/* While no store is set, the 503 answers say "storage unavailable: WHY"
 * instead of "storage is disabled" (any thread; copied). */
void api_set_unavailable(struct api *a, const char *why);

/* Route the endpoints on `s` with `a` (which must outlive the server),
 * served on a pool of a->max_concurrency threads holding up to
 * API_MAX_QUEUED waiting requests, so no query runs on the threads that
 * serve /metrics. A query stops at a->timeout_ns (503, errorType
 * "timeout", as Prometheus) and when its client hangs up (counted in
 * cancelled_total); with no room it gets 503 "unavailable". Call before a
 * catch-all "/" route. 0, GPULSE_ELIMIT, or the pool's error. */
int api_register(struct http_server *s, struct api *a);

/* A snapshot of the counters; thread-safe. */
void api_stats(struct api *a, struct api_stats *out);

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
