/* The rules' history when gpulsed runs without a store: its own /metrics,
 * rendered by a thread every interval (as a Prometheus scraping gpulsed
 * would take it) and held in memory for as long back as the loaded rules
 * read, served through the PromQL storage interface (queryable.h). Only
 * the metric names the rules' selectors name are kept (every series, when
 * a selector names none). A series a scrape no longer has ends with a
 * staleness marker, as Prometheus ends it. Nothing touches the disk.
 *
 * Threads: the scraping thread, livestore_ingest and the queryable's
 * select share one mutex; a select copies what it returns, so a set stays
 * valid while scrapes go on. The render callback runs on the scraping
 * thread without the mutex. */
#ifndef GPULSE_LIVESTORE_H
#define GPULSE_LIVESTORE_H

#include <stddef.h>
#include <stdint.h>

#include "promql/ast.h"
#include "common/buf.h"
#include "promql/queryable.h"

#define LIVESTORE_MAX_WINDOW_MS (3600LL * 1000)  /* history held at most */

struct livestore;

/* Append the exposition (text format 0.0.4) to `out`: 0 or a status. */
typedef int livestore_render_fn(void *ctx, struct buf *out);

extern const struct promql_queryable livestore_queryable; /* ctx: a struct livestore */

struct livestore_opts {
	int64_t interval_ms;   /* scrape period; 0: 1000 */
	size_t max_series;     /* series tracked, kept or not; 0: 50000 */
	size_t max_samples;    /* samples held over all series; 0: 2,000,000 (32 MB) */
};

/* A new store that scrapes `render(ctx)` once started. It keeps nothing
 * until livestore_set_queries says what the rules read. 0 or
 * GPULSE_ENOMEM. Free with livestore_destroy. */
int livestore_create(struct livestore **out, const struct livestore_opts *o,
		     livestore_render_fn *render, void *ctx);
/* Stops the thread. Accepts NULL. */
void livestore_destroy(struct livestore *ls);

/* Start / stop the scraping thread. Start: 0, GPULSE_ESTATE (running),
 * GPULSE_ENOMEM. Stop is safe when not running. */
int livestore_start(struct livestore *ls);
void livestore_stop(struct livestore *ls);

/* Keep what the `n` expressions read: the series of the metric names
 * their selectors name, as far back as the furthest of them reaches
 * (livestore_reach_ms, at most LIVESTORE_MAX_WINDOW_MS). The trees are
 * not retained. Series no longer wanted are dropped at the next scrape. */
void livestore_set_queries(struct livestore *ls, const struct promql_expr *const *exprs, size_t n);

/* How far back from its evaluation time `e` reads samples, with scrapes
 * every `interval_ms`: a range or offset plus two intervals (the sample
 * an instant selector finds is at most one interval old). INT64_MAX for
 * an @ fixed time. */
int64_t livestore_reach_ms(const struct promql_expr *e, int64_t interval_ms);

/* Take `text[len]` (an exposition as prom_render writes it) as the scrape
 * at wall time t_ms: what the thread does each interval; tests call it
 * directly. Lines that do not parse are skipped and counted. Times must
 * increase; an older scrape is ignored. */
void livestore_ingest(struct livestore *ls, const char *text, size_t len, int64_t t_ms);

struct livestore_stats {
	uint64_t scrapes_total;
	uint64_t scrape_failures_total;  /* render errors */
	uint64_t bad_lines_total;        /* lines that did not parse */
	uint64_t series_dropped_total;   /* new series past max_series */
	uint64_t samples_dropped_total;  /* old samples cut by max_samples */
	size_t series;                   /* series kept (wanted) now */
	size_t samples;                  /* samples held now */
	int64_t window_ms;               /* history kept */
};

void livestore_get_stats(struct livestore *ls, struct livestore_stats *out);

#endif
