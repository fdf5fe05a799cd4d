/* gpulsed's glue; see daemon.h. Signals are blocked in every thread and
 * taken by the main thread with sigtimedwait, so handlers never run in
 * the middle of a collector or HTTP thread. */
#include "daemon.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "bus.h"
#include "clock.h"
#include "collector.h"
#include "diagnose_json.h"
#include "engine.h"
#include "http_server.h"
#include "ingest.h"
#include "live.h"
#include "log.h"
#include "prom.h"
#include "replay.h"
#include "selfstats.h"
#include "status.h"
#include "status_json.h"
#include "str.h"
#include "tsdb.h"

#define NVML_RETRY_NS (30LL * NS_PER_SEC)
#define BUNDLED_RECORDING "recordings/h200-phases-10hz.csv"

/* A rendered /metrics body, reused for scrapes that arrive within
 * METRICS_CACHE_NS of it: the data cannot change faster than the fast
 * tier, and rendering 8 GPUs with NVML statistics is ~130 KB. */
#define METRICS_CACHE_NS (50LL * NS_PER_MS)

struct metrics_cache {
	pthread_mutex_t lock;
	struct buf scratch;          /* where the next rendering is built */
	struct http_blob *blob;      /* the last rendering, shared by responses */
	int64_t rendered_ns;         /* monotonic; 0 = empty */
};

struct daemon {
	const struct daemon_options *opt;
	struct metrics_cache cache[2];   /* [0] text 0.0.4, [1] OpenMetrics */
	struct gpulse_config cfg;
	struct bus *bus;
	pthread_rwlock_t source_lock;    /* guards col and rep against swaps */
	struct collector *col;
	struct replay *rep;
	struct self_stats self;
	struct http_server *http;
	struct diag_live *diag;
	struct tsdb *db;                 /* NULL: storage off */
	struct ingest *ingest;
	struct rules_engine *rules;      /* NULL: no rule files, or storage off */
	struct api api;
	char token[CONFIG_TOKEN_MAX];
	int64_t next_nvml_try;
};

static int apply_overrides(const struct daemon_overrides *ov, struct gpulse_config *c,
			   char *err, size_t errlen)
{
	if ((ov->listen && !str_copy(c->listen, sizeof c->listen, ov->listen)) ||
	    (ov->replay_file && !str_copy(c->replay.file, sizeof c->replay.file, ov->replay_file)) ||
	    (ov->nvml_library && !str_copy(c->nvml_library, sizeof c->nvml_library, ov->nvml_library)) ||
	    (ov->storage_path && !str_copy(c->storage.path, sizeof c->storage.path, ov->storage_path))) {
		snprintf(err, errlen, "a command-line value is too long (listen, replay, nvml-library or "
			 "storage-path)");
		return GPULSE_EINVAL;
	}
	if (ov->replay_speed >= 0)
		c->replay.speed = ov->replay_speed;
	if (ov->log_level && log_level_parse(ov->log_level, &c->log_level) != 0) {
		snprintf(err, errlen, "--log-level: \"%s\" is not one of error, warn, info, debug",
			 ov->log_level);
		return GPULSE_EINVAL;
	}
	return GPULSE_OK;
}

/* Parse every file of c->rule_files. On failure `err` holds the first
 * problem as "FILE:LINE:COL: message" (promtool's format). */
static int load_rule_files(const struct gpulse_config *c, struct rules_file ***files, size_t *n,
			   char *err, size_t errlen)
{
	const char *paths[CONFIG_MAX_RULE_FILES];
	size_t np = 0;
	while (np < CONFIG_MAX_RULE_FILES && c->rule_files[np][0]) {
		paths[np] = c->rule_files[np];
		np++;
	}
	struct buf errs;
	buf_init(&errs, 64 * 1024);
	int rc = rules_files_load(paths, np, files, &errs);
	if (rc) {
		const char *msg = errs.len ? errs.data : gpulse_strerror(rc);
		size_t len = strcspn(msg, "\n");
		snprintf(err, errlen, "rule file: %.*s", (int)len, msg);
	} else {
		*n = np;
	}
	buf_free(&errs);
	return rc;
}

int daemon_load_config(const struct daemon_options *opt, struct gpulse_config *out,
		       char *err, size_t errlen)
{
	struct gpulse_config c;
	config_defaults(&c);
	int rc;
	if (opt->config_path && (rc = config_load_file(&c, opt->config_path, err, errlen)) != 0)
		return rc;
	if ((rc = apply_overrides(&opt->ov, &c, err, errlen)) != 0)
		return rc;
	if ((rc = config_validate(&c, opt->config_path ? opt->config_path : "gpulsed", err, errlen)) != 0)
		return rc;
	struct rules_file **files = NULL;
	size_t nfiles = 0;
	if ((rc = load_rule_files(&c, &files, &nfiles, err, errlen)) != 0)
		return rc;
	rules_files_free(files, nfiles);
	*out = c;
	return GPULSE_OK;
}

const char *daemon_bundled_recording(void)
{
	static char path[4096];
	const char *dirs[] = {getenv("GPULSE_DATA_DIR"), GPULSE_SOURCE_DATADIR, GPULSE_INSTALL_DATADIR};
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		if (!dirs[i] || !*dirs[i])
			continue;
		snprintf(path, sizeof path, "%s/%s", dirs[i], BUNDLED_RECORDING);
		if (access(path, R_OK) == 0)
			return path;
	}
	return NULL;
}

/* ---- HTTP handlers: render what the bus holds ------------------------ */

static int render_metrics(struct daemon *d, struct buf *out, bool om)
{
	int64_t t0 = clock_mono_ns();
	pthread_rwlock_rdlock(&d->source_lock);
	struct collector_stats cs;
	bool have_cs = d->col != NULL;
	if (have_cs)
		collector_get_stats(d->col, &cs);
	int rc = prom_render(out, d->bus, d->col ? collector_nvml(d->col) : NULL,
			     have_cs ? &cs : NULL, &d->self, om);
	pthread_rwlock_unlock(&d->source_lock);
	atomic_store(&d->self.last_scrape_ns, (uint64_t)(clock_mono_ns() - t0));
	return rc;
}

static int handle_metrics(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct daemon *d = ctx;
	bool om = prom_wants_openmetrics(http_request_header(req, "Accept"));
	struct metrics_cache *mc = &d->cache[om];
	resp->content_type = om ? PROM_CONTENT_TYPE_OPENMETRICS : PROM_CONTENT_TYPE_TEXT;
	atomic_fetch_add(&d->self.scrapes_total, 1);
	int rc = 0;
	pthread_mutex_lock(&mc->lock);
	int64_t now = clock_mono_ns();
	if (!mc->blob || now - mc->rendered_ns >= METRICS_CACHE_NS) {
		buf_reset(&mc->scratch);
		rc = render_metrics(d, &mc->scratch, om);
		struct http_blob *b = rc ? NULL : http_blob_new(mc->scratch.data, mc->scratch.len);
		if (!rc && !b)
			rc = GPULSE_ENOMEM;
		if (b) {
			http_blob_unref(mc->blob);
			mc->blob = b;
			mc->rendered_ns = now;
		}
	}
	if (!rc)
		resp->blob = http_blob_ref(mc->blob);
	pthread_mutex_unlock(&mc->lock);
	return rc;
}

static int handle_gpus(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct daemon *d = ctx;
	(void)req;
	resp->content_type = "application/json";
	return status_json_render(&resp->body, d->bus, &d->self);
}

/* Prometheus's error envelope with HTTP 400. */
static int bad_request(struct http_response *resp, const char *msg)
{
	resp->status = 400;
	resp->content_type = "application/json";
	buf_puts(&resp->body, "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":");
	buf_put_json_string(&resp->body, msg);
	return buf_puts(&resp->body, "}\n");
}

/* Which process owns each GPU's bottleneck, from what runs now: the one
 * with the largest SM share (NVML's per-process utilization), or, when
 * that is unknown or the GPU is short of memory, the largest user of
 * memory. One object per GPU with processes. */
static void render_owners(struct daemon *d, struct buf *b, int want_gpu)
{
	bool first = true;
	for (int g = 0; g < bus_gpu_count(d->bus); g++) {
		if (want_gpu >= 0 && g != want_gpu)
			continue;
		struct gpu_snapshot s;
		if (bus_read(d->bus, g, &s) != GPULSE_OK || !s.procs_valid || s.nprocs == 0)
			continue;
		bool by_memory = s.diag_class >= 0 &&
				 (s.diag_findings & DIAG_FINDING_BIT(DIAG_FINDING_MEMORY_PRESSURE));
		int best = -1;
		double best_v = -1;
		for (int pass = 0; pass < 2 && best < 0; pass++) {
			bool mem = by_memory || pass == 1;
			for (int i = 0; i < s.nprocs; i++) {
				const struct gpu_process *p = &s.procs[i];
				double v = mem ? (p->mem_valid ? (double)p->used_bytes : -1)
					       : (p->util_valid ? p->sm_ratio : -1);
				if (v > best_v) {
					best_v = v;
					best = i;
				}
			}
			if (best >= 0) {
				by_memory = mem;
				break;
			}
		}
		if (best < 0)
			continue;
		const struct gpu_process *p = &s.procs[best];
		if (!first)
			buf_putc(b, ',');
		first = false;
		buf_printf(b, "{\"gpu\":%d,\"pid\":%u,\"comm\":", s.id.index, p->pid);
		buf_put_json_string(b, p->comm);
		buf_printf(b, ",\"basis\":\"%s\",\"value\":", by_memory ? "gpu_memory_bytes"
									   : "sm_utilization_ratio");
		buf_put_double(b, best_v);
		buf_printf(b, ",\"processes\":%d}", s.nprocs);
	}
}

/* /api/v1/diagnosis?gpu=N&since=10m&window=5s: the live diagnosis of the
 * held history, in the document `gpulse diagnose --json` prints, inside
 * the API's envelope. */
static int handle_diagnosis(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct daemon *d = ctx;
	const char *gpu_arg = http_request_arg(req, "gpu");
	const char *since_arg = http_request_arg(req, "since");
	const char *window_arg = http_request_arg(req, "window");
	char msg[128];
	int want_gpu = -1;
	if (gpu_arg) {
		char *end;
		long g = strtol(gpu_arg, &end, 10);
		if (*gpu_arg == '\0' || *end || g < 0 || g >= GPU_MAX)
		{
			snprintf(msg, sizeof msg, "gpu: \"%.40s\" is not a GPU index", gpu_arg);
			return bad_request(resp, msg);
		}
		want_gpu = (int)g;
	}
	int64_t since_ns = (int64_t)(diag_live_history_s(d->diag) * 1e9), window_ns = 0;
	if (since_arg && config_parse_duration(since_arg, &since_ns) != 0) {
		snprintf(msg, sizeof msg, "since: \"%.40s\" is not a duration (e.g. 10m, 30s)", since_arg);
		return bad_request(resp, msg);
	}
	if (window_arg && (config_parse_duration(window_arg, &window_ns) != 0 ||
			   window_ns < NS_PER_SEC)) {
		snprintf(msg, sizeof msg, "window: \"%.40s\" is not a duration of 1s or more", window_arg);
		return bad_request(resp, msg);
	}
	double since_s = (double)clock_wall_ns() / 1e9 - (double)since_ns / 1e9;
	double window_s = window_ns ? (double)window_ns / 1e9 : diag_live_window_s(d->diag);

	struct buf *b = &resp->body;
	resp->content_type = "application/json";
	buf_printf(b, "{\"status\":\"success\",\"data\":{\"window_s\":");
	buf_put_double(b, window_s);
	buf_puts(b, ",\"history_s\":");
	buf_put_double(b, diag_live_history_s(d->diag));
	buf_puts(b, ",\"windows\":[");
	struct buf sums, pks;
	buf_init(&sums, CONFIG_HTTP_MAX_BODY);
	buf_init(&pks, CONFIG_HTTP_MAX_BODY);
	bool first = true, first_sum = true;
	int rc = 0;
	for (int g = 0; g < bus_gpu_count(d->bus) && !rc; g++) {
		if (want_gpu >= 0 && g != want_gpu)
			continue;
		struct diag_window *w = NULL;
		size_t n = 0;
		struct gpu_peaks pk;
		if (diag_live_windows(d->diag, g, since_s, window_s, &w, &n, &pk) != GPULSE_OK)
			continue;
		for (size_t k = 0; k < n && !rc; k++) {
			if (!first)
				buf_putc(b, ',');
			first = false;
			rc = diag_json_window(b, &w[k]);
		}
		struct diag_summary sum;
		diagnose_summarize(w, n, &sum);
		free(w);
		if (!first_sum) {
			buf_putc(&sums, ',');
			buf_putc(&pks, ',');
		}
		first_sum = false;
		diag_json_summary(&sums, &sum);
		diag_json_peaks(&pks, g, &pk);
	}
	buf_puts(b, "],\"owners\":[");
	render_owners(d, b, want_gpu);
	buf_puts(b, "],\"summary\":[");
	buf_append(b, sums.data ? sums.data : "", sums.len);
	buf_puts(b, "],\"peaks\":[");
	buf_append(b, pks.data ? pks.data : "", pks.len);
	buf_puts(b, "]}}\n");
	buf_free(&sums);
	buf_free(&pks);
	return rc ? rc : (b->failed ? GPULSE_ELIMIT : 0);
}

static int handle_health(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	return buf_puts(&resp->body, "ok\n");
}

static int handle_index(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct daemon *d = ctx;
	if (strcmp(req->path, "/") != 0) {
		resp->status = 404;
		return buf_puts(&resp->body, "not found\n");
	}
	resp->content_type = "text/html; charset=utf-8";
	return buf_printf(&resp->body,
			  "<!doctype html><html><head><title>gpulse</title></head><body>"
			  "<h1>gpulsed %s</h1><p>Source: %s</p><ul>"
			  "<li><a href=\"/metrics\">/metrics</a> (Prometheus)</li>"
			  "<li><a href=\"/api/v1/gpus\">/api/v1/gpus</a> (JSON, what "
			  "<code>gpulse status</code> shows)</li>"
			  "<li><a href=\"/api/v1/diagnosis\">/api/v1/diagnosis</a> (what limits each GPU, "
			  "window by window)</li>"
			  "<li><a href=\"/api/v1/labels\">/api/v1/labels</a>, <code>/api/v1/query</code>, "
			  "<code>/api/v1/query_range</code>, <code>/api/v1/series</code> (Prometheus's "
			  "query API over the stored history)</li>"
			  "<li><a href=\"/healthz\">/healthz</a></li></ul></body></html>\n",
			  GPULSE_VERSION,
			  d->self.mode == MODE_NVML ? "NVML" :
			  d->self.mode == MODE_REPLAY ? "REPLAY of a recording" : "none (no NVIDIA driver)");
}

/* ---- storage ------------------------------------------------------------ */

static void storage_stats(void *ctx, struct storage_self_stats *out)
{
	struct tsdb_stats st;
	tsdb_get_stats(ctx, &st);
	out->errors_total = st.storage_errors_total;
	out->samples_appended_total = st.samples_appended_total;
	out->samples_dropped_total = st.samples_dropped_total;
	out->series = st.series;
	out->head_bytes = st.head_bytes;
	out->db_bytes = st.db_bytes;
}

/* Open the store, subscribe the ingest to the bus (before any source
 * publishes) and start the flusher. Storage is optional, but a path that
 * was asked for and cannot be used (held by another gpulsed, damaged, not
 * ours) stops the daemon: serving without the history asked for would
 * hide the problem. */
static int start_storage(struct daemon *d)
{
	if (!d->cfg.storage.path[0])
		return 0;
	char err[1024];
	struct tsdb_opts o = {
		.path = d->cfg.storage.path,
		.flush_interval_ms = d->cfg.storage.flush_interval_ns / NS_PER_MS,
		.raw_retention_ms = d->cfg.storage.retention_ns / NS_PER_MS,
		.rollup_retention_ms = d->cfg.storage.rollup_retention_ns / NS_PER_MS,
	};
	int rc = tsdb_open(&d->db, &o, err, sizeof err);
	if (rc) {
		log_error("storage: %s", err);
		d->db = NULL;
		return 2;
	}
	if (ingest_create(&d->ingest, d->db, d->bus) != GPULSE_OK ||
	    ingest_subscribe(d->ingest) != GPULSE_OK || tsdb_start_flusher(d->db) != GPULSE_OK) {
		log_error("storage: cannot start the ingest or the flusher");
		return 1;
	}
	d->self.storage_stats = storage_stats;
	d->self.storage_ctx = d->db;
	log_info("storage: keeping samples in %s", d->cfg.storage.path);
	return 0;
}

/* ---- recording rules ------------------------------------------------------ */

static size_t rule_stats(void *ctx, struct rule_group_self_stats *out, size_t max)
{
	struct rules_group_stats *gs = calloc(max ? max : 1, sizeof *gs);
	if (!gs)
		return 0;
	size_t n = rules_engine_stats(ctx, gs, max);
	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++) {
		snprintf(out[i].name, sizeof out[i].name, "%s", gs[i].name);
		out[i].last_duration_s = gs[i].last_duration_s;
		out[i].evaluations_total = gs[i].evaluations_total;
		out[i].failures_total = gs[i].failures_total;
	}
	free(gs);
	return n;
}

/* Start the rules thread when rule files are configured. They were
 * checked when the configuration was loaded; a failure here (a file
 * changed since) stops the daemon as a bad file at start does. */
static int start_rules(struct daemon *d)
{
	if (!d->cfg.rule_files[0][0])
		return 0;
	if (!d->db) {
		log_warn("rule_files: recording rules need storage (storage.path); not evaluating them");
		return 0;
	}
	char err[1024];
	struct rules_file **files = NULL;
	size_t n = 0;
	if (load_rule_files(&d->cfg, &files, &n, err, sizeof err)) {
		log_error("%s", err);
		return 2;
	}
	struct rules_engine_config rc = {
		.db = d->db,
		.default_interval_ms = d->cfg.rule_evaluation_interval_ns / NS_PER_MS,
	};
	if (rules_engine_new(&d->rules, &rc, files, n) || rules_engine_start(d->rules)) {
		log_error("rules: cannot start the evaluation thread");
		return 1;
	}
	d->self.rule_stats = rule_stats;
	d->self.rule_ctx = d->rules;
	log_info("rules: evaluating %zu group(s) from %zu file(s)", rules_engine_group_count(d->rules), n);
	return 0;
}

/* Re-read the rule files of `nc` into the running engine. The files were
 * parsed moments ago by daemon_load_config; this reads them again. */
static int reload_rules(struct daemon *d, const struct gpulse_config *nc, char *err, size_t errlen)
{
	if (!d->rules) {
		if (nc->rule_files[0][0])
			log_warn("reload: recording rules start at the next restart (storage needed)");
		return 0;
	}
	struct rules_file **files = NULL;
	size_t n = 0;
	int rc = load_rule_files(nc, &files, &n, err, errlen);
	if (rc)
		return rc;
	return rules_engine_replace(d->rules, files, n);
}

/* /api/v1/rules: Prometheus's document. Alerting rules are listed,
 * inactive: they are not evaluated yet. */
static int handle_rules(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct daemon *d = ctx;
	(void)req;
	struct buf *b = &resp->body;
	resp->content_type = "application/json";
	buf_puts(b, "{\"status\":\"success\",\"data\":{\"groups\":");
	int rc = d->rules ? rules_engine_write_json(d->rules, b) : buf_puts(b, "[]");
	if (rc)
		return rc;
	return buf_puts(b, "}}\n");
}

/* ---- sources ---------------------------------------------------------- */

static int start_replay(struct daemon *d, const char *path, char *err, size_t errlen)
{
	struct replay_config rc = {.path = path, .speed = d->cfg.replay.speed, .loop = d->cfg.replay.loop};
	int r = replay_start(&d->rep, d->bus, &rc, err, errlen);
	if (r)
		return r;
	d->self.mode = MODE_REPLAY;
	d->self.replay_speed = d->cfg.replay.speed;
	str_copy(d->self.mode_detail, sizeof d->self.mode_detail, path);
	return GPULSE_OK;
}

/* Try NVML. On success the daemon switches to MODE_NVML. */
static int try_nvml(struct daemon *d, char *err, size_t errlen)
{
	struct collector_config cc;
	config_to_collector(&d->cfg, &cc);
	struct collector *col = NULL;
	int rc = collector_start(&col, d->bus, &cc, err, errlen);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&d->source_lock);
	d->col = col;
	d->self.mode = MODE_NVML;
	snprintf(d->self.mode_detail, sizeof d->self.mode_detail, "%s",
		 collector_nvml(col)->path);
	pthread_rwlock_unlock(&d->source_lock);
	log_info("watching %d GPU(s) through NVML", bus_gpu_count(d->bus));
	return GPULSE_OK;
}

static int start_source(struct daemon *d)
{
	char err[512];
	if (d->cfg.replay.file[0]) {
		if (start_replay(d, d->cfg.replay.file, err, sizeof err)) {
			log_error("%s", err);
			return 2;
		}
		log_warn("REPLAY: serving %s as live GPUs (not real hardware)", d->cfg.replay.file);
		return 0;
	}
	int rc = try_nvml(d, err, sizeof err);
	if (rc == GPULSE_OK)
		return 0;
	const char *bundled = d->opt->demo ? daemon_bundled_recording() : NULL;
	if (bundled) {
		char why[600];
		str_copy(why, sizeof why, err);
		if (start_replay(d, bundled, err, sizeof err) == GPULSE_OK) {
			log_warn("no usable NVIDIA driver (%s): REPLAYING the bundled real H200 "
				 "recording %s, labelled source=\"replay\"", why, bundled);
			return 0;
		}
		log_error("%s", err);
	}
	d->self.mode = MODE_NONE;
	/* The detail is a label value: a long reason is cut, on purpose. */
	str_copy(d->self.mode_detail, sizeof d->self.mode_detail, err);
	log_warn("no usable NVIDIA driver (%s); serving self-metrics only, trying again every %.0f s",
		 err, (double)NVML_RETRY_NS / NS_PER_SEC);
	d->next_nvml_try = clock_mono_ns() + NVML_RETRY_NS;
	return 0;
}

/* ---- reload ------------------------------------------------------------ */

static void reload(struct daemon *d)
{
	char err[512];
	struct gpulse_config nc;
	d->self.last_reload_wall_ns = clock_wall_ns();
	if (daemon_load_config(d->opt, &nc, err, sizeof err) != 0) {
		atomic_fetch_add(&d->self.reloads_failed_total, 1);
		atomic_store(&d->self.last_reload_ok, 0);
		log_error("reload refused, the running configuration stays: %s", err);
		return;
	}
	if (strcmp(nc.listen, d->cfg.listen) || strcmp(nc.nvml_library, d->cfg.nvml_library) ||
	    strcmp(nc.replay.file, d->cfg.replay.file) || nc.replay.speed != d->cfg.replay.speed ||
	    nc.sampling.per_process_utilization != d->cfg.sampling.per_process_utilization ||
	    nc.sampling.gpm != d->cfg.sampling.gpm || nc.sampling.events != d->cfg.sampling.events ||
	    memcmp(&nc.http, &d->cfg.http, sizeof nc.http) != 0 ||
	    memcmp(&nc.storage, &d->cfg.storage, sizeof nc.storage) != 0)
		log_warn("reload: listen, nvml_library, replay, http, storage and the sampling "
			 "switches take effect at the next restart");
	if (reload_rules(d, &nc, err, sizeof err) != 0) {
		atomic_fetch_add(&d->self.reloads_failed_total, 1);
		atomic_store(&d->self.last_reload_ok, 0);
		log_error("reload refused, the running configuration stays: %s", err);
		return;
	}
	memcpy(d->cfg.rule_files, nc.rule_files, sizeof nc.rule_files);
	log_set_level(nc.log_level);
	int64_t periods[TIER_COUNT] = {nc.sampling.fast_ns, nc.sampling.normal_ns, nc.sampling.slow_ns};
	pthread_rwlock_rdlock(&d->source_lock);
	if (d->col)
		collector_set_periods(d->col, periods);
	pthread_rwlock_unlock(&d->source_lock);
	d->cfg.sampling.fast_ns = nc.sampling.fast_ns;
	d->cfg.sampling.normal_ns = nc.sampling.normal_ns;
	d->cfg.sampling.slow_ns = nc.sampling.slow_ns;
	d->cfg.log_level = nc.log_level;
	atomic_fetch_add(&d->self.reloads_ok_total, 1);
	atomic_store(&d->self.last_reload_ok, 1);
	log_info("configuration reloaded");
}

/* ---- run ----------------------------------------------------------------- */

int daemon_run(const struct daemon_options *opt, const struct gpulse_config *cfg)
{
	int status = 1;
	struct daemon *d = calloc(1, sizeof *d);
	if (!d) {
		log_error("out of memory");
		return 1;
	}
	d->opt = opt;
	d->cfg = *cfg;
	d->self.start_wall_ns = clock_wall_ns();
	d->self.replay_speed = 0;
	atomic_store(&d->self.last_reload_ok, 1);
	pthread_rwlock_init(&d->source_lock, NULL);
	for (int i = 0; i < 2; i++) {
		pthread_mutex_init(&d->cache[i].lock, NULL);
		buf_init(&d->cache[i].scratch, CONFIG_HTTP_MAX_BODY);
	}
	log_set_level(cfg->log_level);

	/* Block the signals we take before any thread starts, so every
	 * thread inherits the mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (bus_create(&d->bus) != GPULSE_OK) {
		log_error("out of memory");
		goto out;
	}
	char err[512];
	int st = start_storage(d);
	if (st) {
		status = st;
		goto out;
	}
	if ((st = start_rules(d)) != 0) {
		status = st;
		goto out;
	}
	api_init(&d->api, d->db);
	struct http_config hc;
	if (config_to_http(&d->cfg, &hc, d->token, sizeof d->token) != 0) {
		log_error("%s: cannot read the auth token file %s", opt->config_path ? opt->config_path : "gpulsed",
			  d->cfg.http.auth_token_file);
		status = 2;
		goto out;
	}
	hc.requests_total = &d->self.http_requests_total;
	hc.rejected_total = &d->self.http_rejected_total;
	if (http_server_start(&d->http, &hc, err, sizeof err) != 0) {
		log_error("%s", err);
		status = 2;
		goto out;
	}
	http_route(d->http, "/metrics", handle_metrics, d);
	http_route(d->http, "/api/v1/gpus", handle_gpus, d);
	http_route(d->http, "/healthz", handle_health, d);
	http_route(d->http, "/api/v1/diagnosis", handle_diagnosis, d);
	http_route(d->http, "/api/v1/rules", handle_rules, d);
	api_register(d->http, &d->api);
	http_route(d->http, "/", handle_index, d);

	/* The live diagnosis subscribes before any source publishes. */
	double rate_hz = 1e9 / (double)d->cfg.sampling.fast_ns;
	if (d->cfg.replay.file[0] || opt->demo)
		rate_hz = fmax(rate_hz, 10 * d->cfg.replay.speed);
	if (diag_live_create(&d->diag, d->bus, (double)d->cfg.diagnosis.window_ns / 1e9,
			     (double)d->cfg.diagnosis.history_ns / 1e9, rate_hz) != GPULSE_OK) {
		log_error("cannot start the live diagnosis");
		goto out;
	}

	int src = start_source(d);
	if (src) {
		status = src;
		goto out;
	}
	/* Tests and scripts read the bound port from this line (listen
	 * may say port 0). */
	log_info("serving http%s://%s port %d (gpulsed %s)", hc.tls_cert_file ? "s" : "",
		 d->cfg.listen, http_server_port(d->http), GPULSE_VERSION);

	for (;;) {
		/* Wake once a second only while there is no source yet (to
		 * try NVML again); otherwise sleep until a signal comes. */
		struct timespec tick = {.tv_sec = 1, .tv_nsec = 0};
		int sig = d->self.mode == MODE_NONE ? sigtimedwait(&set, NULL, &tick)
						    : sigwaitinfo(&set, NULL);
		if (sig == SIGTERM || sig == SIGINT) {
			log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			break;
		}
		if (sig == SIGHUP) {
			reload(d);
			continue;
		}
		if (d->self.mode == MODE_NONE && clock_mono_ns() >= d->next_nvml_try) {
			if (try_nvml(d, err, sizeof err) != GPULSE_OK)
				d->next_nvml_try = clock_mono_ns() + NVML_RETRY_NS;
		}
	}
	status = 0;
out:
	http_server_stop(d->http);
	replay_stop(d->rep);
	collector_stop(d->col);
	diag_live_destroy(d->diag);
	rules_engine_free(d->rules);
	/* Publishers have stopped: the final flush sees every sample. */
	tsdb_close(d->db);
	ingest_destroy(d->ingest);
	bus_destroy(d->bus);
	for (int i = 0; i < 2; i++) {
		buf_free(&d->cache[i].scratch);
		http_blob_unref(d->cache[i].blob);
		pthread_mutex_destroy(&d->cache[i].lock);
	}
	pthread_rwlock_destroy(&d->source_lock);
	free(d);
	return status;
}
