/* The rest of Prometheus's HTTP API that Grafana's data source and
 * promtool call besides queries: /api/v1/status/buildinfo, config,
 * flags, runtimeinfo and tsdb, /api/v1/metadata, /-/healthy and
 * /-/ready, in Prometheus's JSON (docs/internals/prometheus-api.md has
 * what each answers and where it differs from Prometheus on purpose). */
#ifndef GPULSE_API_STATUS_H
#define GPULSE_API_STATUS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "api/query.h"
#include "common/buf.h"
#include "http/http_server.h"

/* Copy gpulsed's /metrics text (OpenMetrics, as Prometheus scrapes it) into out: what
 * /api/v1/metadata reads HELP and TYPE from, as a scrape would. */
typedef int api_metrics_text_fn(void *ctx, struct buf *out);

/* One command-line flag as /api/v1/status/flags shows it. */
struct api_flag {
	const char *name;            /* "storage-path" */
	char value[512];
};

#define API_MAX_FLAGS 16

struct api_status {
	struct api *api;             /* the store (api->db) and the query pool */
	int64_t start_wall_ns;       /* when gpulsed started */
	const atomic_int *reload_ok;           /* the last reload's result (1/0) */
	const atomic_int_fast64_t *reload_wall_ns; /* and its time; 0: none yet */
	api_metrics_text_fn *metrics_text;
	void *metrics_ctx;
	struct api_flag flags[API_MAX_FLAGS];
	size_t nflags;
	char retention[32];          /* storage.retention, "48h" */
	pthread_mutex_t mu;          /* guards config_yaml */
	char *config_yaml;           /* the running configuration; owned */
};

/* Zero *st and set what every field needs before the daemon fills it. */
void api_status_init(struct api_status *st, struct api *api);
/* Replace the configuration /api/v1/status/config shows (copied; any
 * thread: at start and after each successful reload). */
void api_status_set_config(struct api_status *st, const char *yaml, size_t len);
/* Add a flag (name is kept, value copied); beyond API_MAX_FLAGS ignored. */
void api_status_add_flag(struct api_status *st, const char *name, const char *value);
/* Free what *st owns. */
void api_status_destroy(struct api_status *st);

/* Route the endpoints on `s` (st must outlive the server): the JSON ones
 * on the query pool (status/tsdb reads every series), /-/healthy and
 * /-/ready on the reserved slots, as /healthz. Before a catch-all "/".
 * 0 or the server's error. */
int api_status_register(struct http_server *s, struct api_status *st);

#endif
