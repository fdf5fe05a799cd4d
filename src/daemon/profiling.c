/* Continuous CUDA profiling in gpulsed; see profiling.h. The logic lives
 * in src/profile (aggregate, socket server, trace writer); this file turns
 * the configuration into their structs and hands the endpoints
 * (api/profiling.h) their view of it. */
#include "daemon/profiling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/profiling.h"
#include "common/log.h"
#include "profile/perfetto.h"
#include "profile/profile_agg.h"
#include "profile/profile_server.h"
#include "common/status.h"
#include "common/str.h"
#include "wire/wire.h"

/* In every capture's otherData: a capture traces kernels exactly, and on
 * CUPTI 13.0 that leaves the process's launches dearer until it exits
 * (the library's LASTING_COST_PPM, the H200's median: docs/PERFORMANCE.md). */
#define PROFILING_LASTING_COST                                                       \
	"This capture traced kernels exactly: on CUPTI 13.0 the process's kernel "   \
	"launches stay about 15% dearer until it exits."

struct profiling {
	const struct gpulse_config *cfg;
	struct profile_agg *agg;          /* NULL: profiling off */
	struct profile_server *server;    /* NULL: off, or the socket failed */
	struct profile_timeline *timeline; /* what traced processes did when */
	char why_off[512];                /* "" while serving */
	struct api_profiling api;         /* what the endpoints read (api/profiling.h) */
};

int profiling_start(struct profiling **out, const struct gpulse_config *c, struct tsdb *db,
		    profile_uuid_fn *resolve, void *resolve_ctx)
{
	struct profiling *p = calloc(1, sizeof *p);
	if (!p)
		return GPULSE_ENOMEM;
	p->cfg = c;
	*out = p;
	if (!c->profiling.enabled) {
		str_copy(p->why_off, sizeof p->why_off, "profiling.enabled is false");
		return 0;
	}
	struct profile_limits lim = {
		.max_processes = c->profiling.max_processes,
		.kernels_per_process = c->profiling.kernels_per_process,
		.max_kernel_series = c->profiling.max_kernel_series,
		.expire_ns = c->profiling.process_expiry_ns,
	};
	if (profile_agg_new(&p->agg, &lim) != 0 ||
	    profile_timeline_new(&p->timeline, resolve, resolve_ctx) != 0)
		return GPULSE_ENOMEM;
	struct profile_server_config sc = {
		.socket_path = c->profiling.socket,
		.max_clients = c->profiling.max_clients,
		.max_clients_per_uid = c->profiling.max_clients_per_uid,
		.idle_timeout_ns = c->profiling.idle_timeout_ns,
		.capture_max_events = c->profiling.trace_max_events,
		.agg = p->agg,
		.timeline = p->timeline,
		.db = db,
		.store_interval_ns = c->profiling.store_interval_ns,
	};
	char err[512];
	/* Validated already; parsed again into the server's arrays. */
	profile_parse_ids(c->profiling.allowed_uids, sc.allowed_uids, PROFILE_MAX_ALLOWED_IDS,
			  &sc.n_allowed_uids, err, sizeof err);
	profile_parse_ids(c->profiling.allowed_gids, sc.allowed_gids, PROFILE_MAX_ALLOWED_IDS,
			  &sc.n_allowed_gids, err, sizeof err);
	sc.defaults.mode = (uint8_t)profile_mode_parse(c->profiling.mode);
	sc.defaults.budget_ppm = (uint32_t)(c->profiling.budget_percent * 10000 + 0.5);
	str_copy(sc.defaults.nvtx_range, sizeof sc.defaults.nvtx_range, c->profiling.nvtx_range);
	if (profile_server_start(&p->server, &sc, err, sizeof err) != 0) {
		p->server = NULL;
		str_copy(p->why_off, sizeof p->why_off, err);
		log_warn("%s; CUDA profiling is off, GPU monitoring goes on", err);
		return 0;
	}
	log_info("profiling: serving libgpulse-inject.so on %s", c->profiling.socket);
	return 0;
}

bool profiling_window(struct profiling *p, int gpu, double a_s, double b_s,
		      struct profile_window_sum *out)
{
	if (!p || !p->server || !p->timeline)
		return false;
	return profile_timeline_sum(p->timeline, gpu, a_s, b_s, out);
}

size_t profiling_pids(struct profiling *p, int gpu, double a_s, double b_s,
		      struct profile_pid_sum *out, size_t max)
{
	if (!p || !p->server || !p->timeline)
		return 0;
	return profile_timeline_pids(p->timeline, gpu, a_s, b_s, out, max);
}

bool profiling_has(struct profiling *p, uint32_t pid)
{
	return p && p->agg && profile_agg_has(p->agg, pid, NULL, 0);
}

void profiling_set_store(struct profiling *p, struct tsdb *db)
{
	if (p)
		profile_server_set_store(p->server, db);
}

/* An emitter that keeps the family names and drops the samples. */
struct name_collector {
	struct profile_emitter e;
	const char **out;
	size_t cap, n;
	bool over;
};

static void collect_family(struct profile_emitter *e, const char *name, enum profile_mtype type,
			   const char *help)
{
	struct name_collector *c = (struct name_collector *)e;
	(void)type;
	(void)help;
	if (c->n == c->cap)
		c->over = true;
	else
		c->out[c->n++] = name;
}

static void collect_sample(struct profile_emitter *e, const char *const *names,
			   const char *const *values, size_t n, double v)
{
	(void)e;
	(void)names;
	(void)values;
	(void)n;
	(void)v;
}

int profiling_store_metrics(struct profiling *p, const char **out, size_t cap, size_t *n)
{
	*n = 0;
	if (!p || !p->agg)
		return GPULSE_OK;
	/* The walk the store's writer runs (profile_server.c, store_append):
	 * it names every family whether or not it has samples. */
	struct name_collector c = {.e = {.family = collect_family, .sample = collect_sample},
				   .out = out, .cap = cap};
	profile_agg_emit(p->agg, &c.e);
	*n = c.n;
	return c.over ? GPULSE_ELIMIT : GPULSE_OK;
}

void profiling_interrupt(struct profiling *p)
{
	if (p)
		profile_server_interrupt(p->server);
}

void profiling_stop(struct profiling *p)
{
	if (!p)
		return;
	profile_server_stop(p->server);
	profile_agg_free(p->agg);
	profile_timeline_free(p->timeline);
	free(p);
}

void profiling_metrics(void *ctx, struct metric_sink *s)
{
	struct profiling *p = ctx;
	struct profile_sink_emitter pe;
	profile_sink_emitter_init(&pe, s);
	profile_family(&pe.e, "gpulse_profile_socket_up", PROFILE_GAUGE,
		       "1 while gpulsed serves the injection library's socket (profiling.socket).");
	pe.e.sample(&pe.e, NULL, NULL, 0, p->server ? 1 : 0);
	struct http_pool_stats cs;
	http_pool_stats(p->api.captures, &cs);
	profile_family(&pe.e, "gpulse_trace_captures_running", PROFILE_GAUGE,
		       "Captures (/api/v1/trace) in progress, each waiting on its own thread, "
		       "none on an HTTP thread.");
	pe.e.sample(&pe.e, NULL, NULL, 0, (double)cs.running);
	profile_family(&pe.e, "gpulse_trace_captures_rejected_total", PROFILE_COUNTER,
		       "Captures refused with 503 because PROFILING_MAX_CAPTURES were running.");
	pe.e.sample(&pe.e, NULL, NULL, 0, (double)cs.rejected_total);
	if (p->server) {
		profile_server_emit(p->server, &pe.e);
		profile_agg_emit(p->agg, &pe.e);
	}
}

bool profiling_has_library(struct profiling *p, uint32_t pid)
{
	char comm[PROFILE_COMM_MAX];
	return p && p->server && p->agg && profile_agg_has(p->agg, pid, comm, sizeof comm);
}

int profiling_capture(struct profiling *p, uint32_t pid, unsigned seconds, struct buf *out,
		      char *err, size_t errlen)
{
	if (!p || !p->server) {
		snprintf(err, errlen, "%s", p && p->why_off[0] ? p->why_off : "profiling is not set up");
		return GPULSE_EINVAL;
	}
	struct profile_capture cap = {.pid = pid, .seconds = seconds};
	int rc = profile_server_capture(p->server, &cap, err, errlen);
	if (rc == GPULSE_ENOENT || rc == GPULSE_EBUSY)
		return rc;
	if (rc)
		return GPULSE_ESTATE;
	struct perfetto_meta meta = {
		.pid = cap.pid,
		.process_name = cap.comm,
		.capture_id = cap.capture_id,
		.seconds = cap.seconds,
		.max_events = cap.max_events,
		.events_received = cap.received,
		.events_dropped_daemon = cap.dropped_daemon,
		.events_dropped_library = cap.dropped_library,
		.complete = cap.complete,
		.lasting_cost = PROFILING_LASTING_COST,
	};
	rc = perfetto_write(out, cap.events, cap.n, &meta);
	free(cap.events);
	return rc;
}

/* profiling_capture as the endpoints call it. */
static int capture(void *ctx, uint32_t pid, unsigned seconds, struct buf *out, char *err,
		   size_t errlen)
{
	return profiling_capture(ctx, pid, seconds, out, err, errlen);
}

int profiling_register(struct profiling *p, struct http_server *s)
{
	if (!p)
		return api_profiling_register(s, NULL);
	p->api = (struct api_profiling){
		.enabled = p->cfg->profiling.enabled, .socket = p->cfg->profiling.socket,
		.serving = p->server != NULL, .why_off = p->why_off, .agg = p->agg,
		.capture = capture, .capture_ctx = p,
	};
	return api_profiling_register(s, &p->api);
}
