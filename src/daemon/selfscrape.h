/* Every series /metrics exports, stored (issue 18, item 3): a thread
 * runs gpulsed's own exposition every interval and appends into the
 * store the series that no other writer stores. The families of the
 * registry (export/families.h: the daemon's, the collector's, NVML
 * calls, HTTP, configuration, storage, the process) come to it as
 * samples through a metric sink, never as text; the rest it reads from
 * the text, as a Prometheus scraping it would (gpulse_gpu_info, the
 * per-process series, rules, alerts, profiling, remote write...),
 * histograms as _bucket/_sum/_count. What another writer
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

#include "common/buf.h"
#include "common/metric.h"
#include "store/tsdb.h"

#define SELFSCRAPE_DEFAULT_INTERVAL_MS 1000
#define SELFSCRAPE_DEFAULT_MAX_SERIES 20000
#define SELFSCRAPE_FORGET_SCRAPES 60  /* absent this many scrapes: forgotten */
#define SELFSCRAPE_MAX_FAMILIES 4096  /* metric names classified */

/* Render the exposition: the families of the registry
 * (export/families.h) as samples to `direct`, the rest as text (format
 * 0.0.4) appended to `out`. 0 or a status. */
typedef int selfscrape_render_fn(void *ctx, struct buf *out, struct metric_sink *direct);

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

/* One scrape of `text` at t_ms, all of it parsed (for tests). Not
 * to be called while the thread runs. */
void selfscrape_ingest(struct selfscrape *s, const char *text, size_t len, int64_t t_ms);

/* One scrape through the render function at t_ms, as the thread does
 * it: the registry's families through the direct sink, the rest parsed
 * from the text (for tests). Not to be called while the thread runs. */
void selfscrape_scrape_at(struct selfscrape *s, int64_t t_ms);

/* A snapshot of the counters (any thread); s NULL: zeros. */
void selfscrape_get_stats(struct selfscrape *s, struct selfscrape_stats *out);

#endif
