/* gpulsed's scrape endpoints: /metrics (Prometheus text 0.0.4 or
 * OpenMetrics, as the Accept header asks), /api/v1/gpus (the status JSON,
 * export/status_json.h) and /healthz. The exposition is rendered by the
 * caller's function and kept for scrapes that arrive within
 * API_METRICS_CACHE_NS of it. */
#ifndef GPULSE_API_METRICS_H
#define GPULSE_API_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/bus.h"
#include "common/buf.h"
#include "export/selfstats.h"
#include "http/http_server.h"

/* A rendered /metrics body is reused within this long: the data cannot
 * change faster than the fast tier, and rendering 8 GPUs with NVML
 * statistics is ~130 KB. */
#define API_METRICS_CACHE_NS (50LL * 1000000LL)

/* Render the whole exposition into out (OpenMetrics when openmetrics).
 * Called from HTTP threads, one at a time per format. */
typedef int api_render_fn(void *ctx, struct buf *out, bool openmetrics);

struct api_metrics_cache {
	pthread_mutex_t lock;
	struct buf scratch;          /* where the next rendering is built */
	struct http_blob *blob;      /* the last rendering, shared by responses */
	int64_t rendered_ns;         /* monotonic; 0 = empty */
};

struct api_metrics {
	api_render_fn *render;
	void *render_ctx;
	atomic_uint_fast64_t *scrapes_total;   /* counted per /metrics request */
	struct bus *bus;                       /* /api/v1/gpus */
	const struct self_stats *self;         /* /api/v1/gpus */
	struct api_metrics_cache cache[2];     /* [0] text 0.0.4, [1] OpenMetrics */
};

/* Set *m up with a rendering of at most max_bytes; the other fields are
 * the caller's to fill before api_metrics_register. */
void api_metrics_init(struct api_metrics *m, size_t max_bytes);
/* Free what *m holds (after the server has stopped). */
void api_metrics_destroy(struct api_metrics *m);

/* Route /metrics and /healthz on the server's reserved slots (a scrape
 * and a health check answer however busy the rest is) and /api/v1/gpus.
 * `m` must outlive the server. 0 or the server's error. */
int api_metrics_register(struct http_server *s, struct api_metrics *m);

/* The OpenMetrics rendering /metrics serves, appended to out (for
 * /api/v1/metadata: api_metrics_text_fn of api/status.h, ctx an
 * api_metrics). 0, the renderer's error or buf's. */
int api_metrics_text(void *ctx, struct buf *out);

#endif
