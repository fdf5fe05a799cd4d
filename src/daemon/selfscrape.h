/* Every series /metrics exports, stored (issue 18, item 3): a thread
 * runs gpulsed's own exposition every interval and appends into the
 * store the series that no other writer stores. Every family comes to it
 * as samples through a metric sink (common/metric.h), never as text: the
 * registry's (export/families.h: per GPU, processes, attribution,
 * tenants, the daemon's, the collector's, NVML calls, HTTP,
 * configuration, storage, rules, alerts) and the other modules'
 * (profiling, remote write, systemd, evidence, benchmarks), histograms
 * as _bucket/_sum/_count. What another writer
 * of this process stores (the fields through ingest.c, the diagnosis, the
 * anomaly scores, the profiler's series, the bench results) is left to
 * it, so no series has two writers: each writer declares the metric names
 * it writes (opts.foreign_names, their union), and every other name is
 * taken from its first scrape. What the store holds decides nothing: a
 * store reopened after a restart holds every name the last run wrote,
 * this scraper's own included.
 *
 * Bounds: at most max_series series are tracked (more are refused and
 * counted); one absent for 60 scrapes is forgotten (per-process series
 * come and go with the processes). A series gone from /metrics gets one
 * staleness marker, as Prometheus ends it. docs/internals/store.md
 * ("What is stored") has the design. */
#ifndef GPULSE_SELFSCRAPE_H
#define GPULSE_SELFSCRAPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/metric.h"
#include "store/tsdb.h"

#define SELFSCRAPE_DEFAULT_INTERVAL_MS 1000
#define SELFSCRAPE_DEFAULT_MAX_SERIES 20000
#define SELFSCRAPE_FORGET_SCRAPES 60  /* absent this many scrapes: forgotten */
#define SELFSCRAPE_MAX_FAMILIES 4096  /* metric names classified */

/* Emit the exposition's families as samples to `sink` (prom_emit). 0,
 * or a status when the render failed (then no series is ended). */
typedef int selfscrape_render_fn(void *ctx, struct metric_sink *sink);

struct selfscrape;

struct selfscrape_opts {
	int64_t interval_ms;         /* 0: SELFSCRAPE_DEFAULT_INTERVAL_MS */
	size_t max_series;           /* 0: SELFSCRAPE_DEFAULT_MAX_SERIES */
	/* The names the other writers of this process store, as each
	 * declares them, NULL-terminated (or NULL): left to them, whether or
	 * not the store holds them yet or already. Every other name on
	 * /metrics is this scraper's. The array must outlive the scraper. */
	const char *const *foreign_names;
};

struct selfscrape_stats {
	uint64_t scrapes_total;
	uint64_t samples_appended_total;
	uint64_t append_errors_total;    /* the store refused a sample (out of order) */
	uint64_t series_refused_total;   /* over max_series, or a label set the store refused */
	uint64_t series;                 /* tracked now */
	uint64_t names_owned;            /* metric names this stores */
	uint64_t names_foreign;          /* metric names another writer stores */
};

/* A scraper of render(ctx) into db (both must outlive it). 0 or
 * GPULSE_ENOMEM. */
int selfscrape_create(struct selfscrape **out, struct tsdb *db, const struct selfscrape_opts *o,
		      selfscrape_render_fn *render, void *ctx);
/* Start / stop the thread. Start: 0, GPULSE_ESTATE (running), GPULSE_ENOMEM. */
int selfscrape_start(struct selfscrape *s);
void selfscrape_stop(struct selfscrape *s);
/* Stops and frees. Accepts NULL. */
void selfscrape_destroy(struct selfscrape *s);

/* One scrape through the render function at t_ms, as the thread does
 * it (for tests). Not to be called while the thread runs. */
void selfscrape_scrape_at(struct selfscrape *s, int64_t t_ms);

/* A snapshot of the counters (any thread); s NULL: zeros. */
void selfscrape_get_stats(struct selfscrape *s, struct selfscrape_stats *out);

#endif
