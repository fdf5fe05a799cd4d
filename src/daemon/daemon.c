/* gpulsed's glue; see daemon.h. Signals are blocked in every thread and
 * taken by the main thread with sigtimedwait, so handlers never run in
 * the middle of a collector or HTTP thread.
 *
 * Why one file: for now only. The HTTP endpoints have left for src/api
 * (issue 35, deliverable 2); what remains is start-up as named steps,
 * shutdown, the demo and the storage retry, which are still to move to
 * files of their own. */
#include "daemon/daemon.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/alerting.h"
#include "api/diagnosis.h"
#include "api/metrics.h"
#include "api/rules.h"
#include "anomaly/anomaly.h"
#include "api/query.h"
#include "api/status.h"
#include "collect/bus.h"
#include "common/clock.h"
#include "common/duration.h"
#include "collect/collector.h"
#include "diagnose/history.h"
#include "rules/engine.h"
#include "http/http_server.h"
#include "store/ingest.h"
#include "diagnose/live.h"
#include "daemon/livestore.h"
#include "common/log.h"
#include "daemon/profiling.h"
#include "daemon/benchd.h"
#include "export/prom.h"
#include "record/replay.h"
#include "daemon/sdnotify.h"
#include "daemon/selfscrape.h"
#include "export/selfstats.h"
#include "common/status.h"
#include "common/str.h"
#include "store/tsdb.h"
#include "remote/remote_write.h"
#include "common/redact.h"
#include "api/web.h"
#include "nvml/nvml_shim.h"
#include "common/xalloc.h"
#include "daemon/evidence.h"
#include "diagnose/health_live.h"
#include "daemon/tenantsd.h"

#define NVML_RETRY_NS (30LL * NS_PER_SEC)
#define BUNDLED_RECORDING "recordings/h200-phases-10hz.csv"
#define RULE_PACK "gpulse.rules.yml"
#define DEMO_STORE "gpulse.db"           /* in --demo's temporary directory */


#define SCRAPE_FOREIGN_MAX 256 /* names the self-scrape leaves to other writers */

struct daemon {
	const struct daemon_options *opt;
	struct http_static *web;         /* the dashboard's files; freed after HTTP stops */
	struct api_metrics metrics;      /* /metrics, /api/v1/gpus, /healthz */
	struct api_diagnosis diagnosis;  /* /api/v1/diagnosis */
	struct gpulse_config cfg;        /* running: live keys follow reloads */
	struct gpulse_config started;    /* as started: what restart keys hold */
	struct bus *bus;
	pthread_rwlock_t source_lock;    /* guards col and rep against swaps */
	struct collector *col;
	struct replay *rep;
	struct attrib *attrib;           /* process owners; outlives col */
	struct self_stats self;
	struct http_server *http;
	struct diag_live *diag;
	struct health_live *health;      /* the health score (health_live.h) */
	/* NULL: storage off or not open yet. Set once (at start or when a
	 * late store opens), read by HTTP threads and the diagnosis sink. */
	struct diag_history *_Atomic hist;
	struct tsdb *db;                 /* NULL: storage off or not open yet */
	/* remote_write: entries (src/remote/), made when the store opens. */
	struct remote_write *remotes[CONFIG_MAX_REMOTE_WRITE];
	_Atomic size_t nremotes;
	struct ingest *ingest;
	struct selfscrape *scrape;       /* /metrics into the store (selfscrape.h) */
	const char *scrape_foreign[SCRAPE_FOREIGN_MAX]; /* names other writers store */
	struct selfscrape *_Atomic scrape_live; /* as HTTP threads see it: published once */
	bool self_ready;                 /* main thread: d->self's callbacks are all set, so
	                                    threads that render /metrics may start */
	/* The store as other threads see it: published (release) once open,
	 * at start or by a later retry on the main thread, and never taken
	 * back until shutdown, after the HTTP server and the sources stop. */
	struct tsdb *_Atomic store_live;
	struct ingest *_Atomic ingest_live;  /* the bus's subscriber forwards to it */
	bool store_pending;              /* main thread: asked for, a disk failure kept it shut */
	int64_t store_next_try_ns;       /* monotonic */
	char store_why[768];             /* the last failure's sentence */
	struct complaint store_complaint;
	_Atomic uint64_t store_attempts, store_failures;
	struct anomaly *anomaly;         /* NULL: anomaly.enabled false */
	struct rules_engine *rules;      /* NULL: no rule files */
	struct livestore *live;          /* the rules' history without a store; else NULL */
	struct alerting *alerting;       /* alert delivery (alerting.h) */
	struct evidence *evidence;       /* a closer look on trouble (evidence.h); the
	                                    rules' sink, forwarding to alerting's */
	struct profiling *prof;          /* the injection library's socket */
	struct tenantsd *tenants;        /* activity per process on shared GPUs */
	struct benchd *bench;            /* baseline benchmarks (benchd.h) */
	struct sdnotify sdn;             /* systemd readiness and watchdog (sdnotify.h) */
	sigset_t signals;                /* what the main thread takes (serve) */
	bool tls;                        /* the HTTP server serves https */
	struct api api;
	struct api_status status;        /* status, metadata, health endpoints */
	char token[CONFIG_TOKEN_MAX];
	char write_token[CONFIG_TOKEN_MAX];
	int64_t next_nvml_try;
	/* --demo (daemon_options.demo): */
	const char *demo_replay;         /* the bundled recording, chosen at start; NULL: NVML */
	char demo_dir[CONFIG_PATH_LEN - 32]; /* the temporary store's directory, removed at exit */
	char demo_store[CONFIG_PATH_LEN];/* the store in it; "": storage.path is used */
	char rule_pack[CONFIG_PATH_LEN]; /* loaded when rule_files is empty; "": none */
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
	if (ov->allow_insecure_remote)
		c->http.allow_insecure_remote = true;
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

/* Without a store only alerting rules can run: a recording rule's
 * results are series, and there is nowhere to keep them. The first one
 * found is named, with its file, group and line. */
static int check_rules_without_store(struct rules_file *const *files, size_t n, char *err,
				     size_t errlen)
{
	for (size_t f = 0; f < n; f++)
		for (size_t g = 0; g < files[f]->ngroups; g++) {
			const struct rules_group *gr = &files[f]->groups[g];
			for (size_t r = 0; r < gr->nrules; r++) {
				const struct rules_rule *rule = &gr->rules[r];
				if (!rule->record)
					continue;
				snprintf(err, errlen, "rule_files: %s:%d:%d: group \"%s\", recording rule "
					 "\"%s\": recording rules need storage (storage.path or "
					 "--storage-path) to keep the series they record; alerting rules "
					 "alone run without it", files[f]->path, rule->line, rule->col,
					 gr->name, rule->record);
				return GPULSE_EINVAL;
			}
		}
	return GPULSE_OK;
}

/* gpulsed's identity where the configuration leaves it out (issue 18):
 * alerting.external_labels gets instance=HOSTNAME unless it names
 * `instance` (an empty value there means none), and alerting.external_url
 * defaults, as Prometheus's --web.external-url does, to
 * http(s)://HOSTNAME:PORT of http.listen (none with port 0, which is
 * known only once bound). */
static void identity_defaults(struct gpulse_config *c)
{
	char host[256];
	if (gethostname(host, sizeof host) != 0 || !host[0])
		return;
	host[sizeof host - 1] = '\0';
	size_t n = 0;
	bool named = false;
	for (; n < CONFIG_MAX_LABELS && c->alerting.external_labels[n][0][0]; n++)
		named |= strcmp(c->alerting.external_labels[n][0], "instance") == 0;
	if (!named && n < CONFIG_MAX_LABELS) {
		snprintf(c->alerting.external_labels[n][0], sizeof c->alerting.external_labels[n][0],
			 "instance");
		snprintf(c->alerting.external_labels[n][1], sizeof c->alerting.external_labels[n][1],
			 "%s", host);
	}
	if (!c->alerting.external_url[0]) {
		char lhost[HTTP_MAX_LISTEN + 1];
		int port = 0;
		if (http_parse_listen(c->listen, lhost, sizeof lhost, &port, NULL, 0) == 0 && port > 0) {
			bool tls = c->http.tls_cert_file[0] != '\0';
			snprintf(c->alerting.external_url, sizeof c->alerting.external_url,
				 "%s://%s:%d", tls ? "https" : "http", host, port);
		}
	}
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
	/* The message names where the bad value came from; main adds the
	 * program's name in front. */
	if ((rc = config_validate(&c, opt->config_path ? opt->config_path : "command line", err,
				  errlen)) != 0)
		return rc;
	identity_defaults(&c);
	struct rules_file **files = NULL;
	size_t nfiles = 0;
	if ((rc = load_rule_files(&c, &files, &nfiles, err, errlen)) != 0)
		return rc;
	if (!c.storage.path[0] && !opt->demo)
		rc = check_rules_without_store(files, nfiles, err, errlen);
	rules_files_free(files, nfiles);
	if (rc)
		return rc;
	if (c.nremote_write && !c.storage.path[0] && !opt->demo) {
		snprintf(err, errlen, "%s: remote_write sends the samples the store takes: it needs "
			 "storage (storage.path or --storage-path)",
			 opt->config_path ? opt->config_path : "command line");
		return GPULSE_EINVAL;
	}
	*out = c;
	return GPULSE_OK;
}

/* The directory of the running executable into dir[len]; false when
 * /proc/self/exe cannot say. */
static bool exe_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);
	if (n <= 0 || (size_t)n >= len - 1)
		return false;
	dir[n] = '\0';
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return false;
	*slash = '\0';
	return true;
}

/* What gpulse ships, looked for where it is: GPULSE_DATA_DIR, beside the
 * executable as installed (BIN/../share/gpulse), the source tree it was
 * built from (SOURCE, a full path), the install prefix, and
 * /usr/share/gpulse; REL is the file's path inside a data directory. The
 * first readable one is written to path[len]; NULL when none is. */
static const char *find_shipped(const char *rel, const char *source, char *path, size_t len)
{
	char exe[4096];
	bool have_exe = exe_dir(exe, sizeof exe);
	const char *const dirs[] = {
		getenv("GPULSE_DATA_DIR"), have_exe ? exe : NULL, NULL,
		GPULSE_INSTALL_DATADIR, "/usr/share/gpulse",
	};
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		int n = i == 2 ? snprintf(path, len, "%s", source)
		      : !dirs[i] || !dirs[i][0] ? -1
		      : snprintf(path, len, "%s%s/%s", dirs[i], i == 1 ? "/../share/gpulse" : "", rel);
		if (n >= 0 && (size_t)n < len && access(path, R_OK) == 0)
			return path;
	}
	return NULL;
}

const char *daemon_bundled_recording(void)
{
	static char path[4096];
	return find_shipped(BUNDLED_RECORDING, GPULSE_SOURCE_DATADIR "/" BUNDLED_RECORDING, path,
			    sizeof path);
}

const char *daemon_rule_pack(void)
{
	static char path[4096];
	return find_shipped("rules/" RULE_PACK, GPULSE_SOURCE_DIR "/deploy/rules/" RULE_PACK, path,
			    sizeof path);
}

/* The exit status of a failure to start (docs/CONFIG.md, "Exit status"):
 * 2 when the configuration is at fault (a value that cannot work), 1 when
 * the machine is (a port or a store another process holds, permissions,
 * memory): the same file may work on a second try. */
static int exit_status(int rc)
{
	return rc == GPULSE_EINVAL || rc == GPULSE_EPARSE ? 2 : 1;
}

/* self_stats.profile_metrics: the families of the parts outside the
 * exporter (profiling, remote write, systemd, evidence, benchmarks), one
 * after the other, to the render's sink. */
static void extra_metrics(void *ctx, struct metric_sink *s)
{
	struct daemon *d = ctx;
	profiling_metrics(d->prof, s);
	remote_write_metrics(d->remotes, atomic_load(&d->nremotes), s);
	sdnotify_metrics(&d->sdn, s);
	evidence_metrics(d->evidence, s);
	benchd_metrics(d->bench, s);
}

static const char *storage_path(const struct daemon *d);

/* Evidence's raise: the collector's GPU to its ceiling (a replay has no
 * reads to raise). */
static int raise_gpu(void *ctx, int slot, int64_t duration_ns)
{
	struct daemon *d = ctx;
	int rc = GPULSE_ENOENT;
	pthread_rwlock_rdlock(&d->source_lock);
	if (d->col)
		rc = collector_raise(d->col, slot, duration_ns);
	pthread_rwlock_unlock(&d->source_lock);
	return rc;
}

/* The store's append hook: every remote_write entry sees every sample. */
static void remote_fanout(void *ctx, uint32_t ref, int64_t t_ms, double v)
{
	struct daemon *d = ctx;
	size_t n = atomic_load(&d->nremotes);
	for (size_t i = 0; i < n; i++)
		remote_write_on_append(d->remotes[i], ref, t_ms, v);
}

/* A secret from a file (password_file, credentials_file): its first line. */
static int read_secret(const char *path, char *out, size_t len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	size_t n = fread(out, 1, len - 1, f);
	fclose(f);
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}

/* Make and start the remote_write entries on the open store. An entry
 * that cannot start (its queue folder, a secret file) is logged and left
 * out; the others run. */
static void start_remotes(struct daemon *d, struct tsdb *db)
{
	const struct gpulse_config *c = &d->started;
	size_t n = 0;
	for (unsigned i = 0; i < c->nremote_write && i < CONFIG_MAX_REMOTE_WRITE; i++) {
		const struct config_remote_write *r = &c->remote_write[i];
		struct remote_write_opts o = {
			.name = r->name, .url = r->url, .timeout_ms = r->remote_timeout_ns / NS_PER_MS,
			.insecure_skip_verify = r->tls_config.insecure_skip_verify,
			.capacity = r->queue_config.capacity,
			.max_samples_per_send = r->queue_config.max_samples_per_send,
			.batch_send_deadline_ms = r->queue_config.batch_send_deadline_ns / NS_PER_MS,
			.min_backoff_ms = r->queue_config.min_backoff_ns / NS_PER_MS,
			.max_backoff_ms = r->queue_config.max_backoff_ns / NS_PER_MS,
			.retry_on_429 = r->queue_config.retry_on_http_429,
			.queue_max_bytes = r->queue_max_bytes,
			.summary = strcmp(r->mode, "summary") == 0,
			.summary_interval_ms = r->summary.interval_ns / NS_PER_MS,
			.summary_quantile = r->summary.quantile,
			.summary_anomaly_threshold = r->summary.anomaly_threshold,
		};
		for (size_t h = 0; h < CONFIG_MAX_HEADERS && r->headers[h][0][0]; h++) {
			o.headers[h][0] = r->headers[h][0];
			o.headers[h][1] = r->headers[h][1];
			o.nheaders = h + 1;
		}
		char err[512] = "", secret[1024] = "";
		bool ok = true;
		if (r->basic_auth.username[0]) {
			o.basic_user = r->basic_auth.username;
			o.basic_password = r->basic_auth.password;
			if (r->basic_auth.password_file[0]) {
				ok = read_secret(r->basic_auth.password_file, secret, sizeof secret, err,
						 sizeof err) == 0;
				o.basic_password = secret;
			}
		}
		if (r->authorization.credentials[0] || r->authorization.credentials_file[0]) {
			o.auth_type = r->authorization.type;
			o.auth_credentials = r->authorization.credentials;
			if (r->authorization.credentials_file[0]) {
				ok = read_secret(r->authorization.credentials_file, secret, sizeof secret,
						 err, sizeof err) == 0;
				o.auth_credentials = secret;
			}
		}
		o.ca_file = r->tls_config.ca_file[0] ? r->tls_config.ca_file : NULL;
		o.cert_file = r->tls_config.cert_file[0] ? r->tls_config.cert_file : NULL;
		o.key_file = r->tls_config.key_file[0] ? r->tls_config.key_file : NULL;
		o.server_name = r->tls_config.server_name[0] ? r->tls_config.server_name : NULL;
		struct relabel_spec specs[CONFIG_MAX_RELABEL];
		for (unsigned j = 0; j < r->nrelabel; j++)
			config_relabel_spec(&r->write_relabel_configs[j], &specs[j]);
		o.relabel = specs;
		o.nrelabel = r->nrelabel;
		for (size_t j = 0; j < CONFIG_MAX_LABELS && j < REMOTE_MAX_EXTERNAL &&
				   c->alerting.external_labels[j][0][0]; j++)
			if (c->alerting.external_labels[j][1][0])
				o.external[o.nexternal++] = (struct label){
					c->alerting.external_labels[j][0], c->alerting.external_labels[j][1]};
		char qdir[CONFIG_PATH_LEN + 160];
		if (r->queue_dir[0])
			snprintf(qdir, sizeof qdir, "%s", r->queue_dir);
		else
			snprintf(qdir, sizeof qdir, "%s.remote-write-%s", storage_path(d),
				 r->name[0] ? r->name : (char[4]){(char)('0' + i), 0});
		o.queue_dir = qdir;
		struct remote_write *rw = NULL;
		if (ok && remote_write_create(&rw, &o, err, sizeof err) == GPULSE_OK) {
			remote_write_set_store(rw, db);
			if (remote_write_start(rw) != GPULSE_OK) {
				remote_write_destroy(rw);
				rw = NULL;
				snprintf(err, sizeof err, "cannot start its threads");
			}
		}
		char shown[256];
		redact_url(shown, sizeof shown, r->url);
		if (!rw) {
			log_error("remote_write[%u] %s: %s; not sending there", i, shown, err);
			continue;
		}
		log_info("remote_write[%u]: sending %s to %s (queue in %s)", i,
			 o.summary ? "summaries of the stored series (and every sample of a GPU in an "
				     "anomalous or alerting state)" : "every stored sample", shown, qdir);
		d->remotes[n++] = rw;
	}
	atomic_store(&d->nremotes, n);
	if (n)
		tsdb_set_append_hook(db, remote_fanout, d);
}

static void stop_remotes(struct daemon *d)
{
	size_t n = atomic_load(&d->nremotes);
	if (d->db)
		tsdb_set_append_hook(d->db, NULL, NULL);
	for (size_t i = 0; i < n; i++)
		remote_write_stop(d->remotes[i]);  /* the ring goes to disk */
}

/* ---- /metrics: what the bus holds ------------------------------------ */

/* /metrics in the format asked for (out), or (out NULL) its families to
 * the store's sink. */
static int render_split(struct daemon *d, struct buf *out, struct metric_sink *direct, bool om)
{
	pthread_rwlock_rdlock(&d->source_lock);
	struct collector_stats cs;
	bool have_cs = d->col != NULL;
	if (have_cs)
		collector_get_stats(d->col, &cs);
	struct nvml_lib *nv = d->col ? collector_nvml(d->col) : NULL;
	int rc = out ? prom_render(out, d->bus, nv, have_cs ? &cs : NULL, &d->self, om)
		     : prom_emit(direct, d->bus, nv, have_cs ? &cs : NULL, &d->self);
	pthread_rwlock_unlock(&d->source_lock);
	return rc;
}

static int render_exposition(struct daemon *d, struct buf *out, bool om)
{
	return render_split(d, out, NULL, om);
}

/* A scrape of /metrics (api/metrics.h), timed for gpulse's self-metrics. */
static int render_metrics(void *ctx, struct buf *out, bool om)
{
	struct daemon *d = ctx;
	int64_t t0 = clock_mono_ns();
	int rc = render_exposition(d, out, om);
	atomic_store(&d->self.last_scrape_ns, (uint64_t)(clock_mono_ns() - t0));
	return rc;
}

/* The rules' scrape of /metrics without a store (livestore.h): not a
 * scrape that gpulse_scrapes_total or the last scrape's duration count. */
static int render_for_rules(void *ctx, struct buf *out)
{
	return render_exposition(ctx, out, false);
}

/* The store's scrape of /metrics (selfscrape.h): every family to its
 * sink, nothing rendered; not counted as a scrape either. */
static int render_for_store(void *ctx, struct metric_sink *sink)
{
	return render_split(ctx, NULL, sink, false);
}

/* What /api/v1/status/config shows: the running configuration, as
 * --print-config prints it, with its secrets masked (config_redact). */
static void publish_config(struct daemon *d)
{
	struct gpulse_config *shown = malloc(sizeof *shown);
	if (!shown)
		return;
	memcpy(shown, &d->cfg, sizeof *shown);
	config_redact(shown);
	struct buf y;
	buf_init(&y, 4u << 20);
	if (config_dump(shown, &y) == 0 && y.data)
		api_status_set_config(&d->status, y.data, y.len);
	buf_free(&y);
	free(shown);
}





/* The GPU index of the GPU with this UUID (CUDA_VISIBLE_DEVICES may name
 * GPUs by UUID or a prefix of it), or -1. */
static int gpu_by_uuid(void *ctx, const char *uuid)
{
	struct daemon *d = ctx;
	size_t n = strlen(uuid);
	for (int g = 0; g < bus_gpu_count(d->bus); g++) {
		struct gpu_snapshot s;
		if (bus_read(d->bus, g, &s) != GPULSE_OK || n < 8)
			continue;
		if (strncmp(s.id.uuid, uuid, n) == 0)
			return s.id.index;
		/* A MIG instance (CUDA_VISIBLE_DEVICES=MIG-UUID): its parent GPU. */
		for (int k = 0; s.mig_valid && k < s.nmig && k < GPU_MIG_MAX; k++)
			if (strncmp(s.mig[k].uuid, uuid, n) == 0)
				return s.id.index;
	}
	return -1;
}

/* self_stats.query_stats over the query API's counters. */
static void query_stats(void *ctx, struct query_self_stats *out)
{
	struct api_stats st;
	api_stats(ctx, &st);
	*out = (struct query_self_stats){
		.running = st.running, .queued = st.queued, .started_total = st.started_total,
		.rejected_total = st.rejected_total, .timed_out_total = st.timed_out_total,
		.cancelled_total = st.cancelled_total,
	};
}

/* The live diagnosis's kernel traces: what traced processes did. */
static bool trace_source(void *ctx, int gpu, double a_s, double b_s, struct diag_trace *out)
{
	struct profile_window_sum ps;
	if (!profiling_window(ctx, gpu, a_s, b_s, &ps))
		return false;
	*out = (struct diag_trace){
		.start_s = a_s, .end_s = b_s, .traced_s = ps.traced_s, .launches = ps.launches,
		.kernel_s = ps.kernel_s, .copy_bytes = ps.copy_bytes, .copy_s = ps.copy_s,
		.sync_wait_s = ps.sync_wait_s, .processes = ps.processes};
	return true;
}

/* /api/v1/diagnosis's traced owners (api/diagnosis.h). */
static bool trace_window(void *ctx, int gpu, double a_s, double b_s, struct profile_window_sum *out)
{
	return profiling_window(ctx, gpu, a_s, b_s, out);
}

/* /api/v1/diagnosis's tenants of a window (api/diagnosis.h). */
static int window_tenants(void *ctx, struct buf *b, int gpu, double start_s, double end_s,
			  int bottleneck)
{
	return tenantsd_window_json(ctx, b, gpu, start_s, end_s, bottleneck);
}

/* The live diagnosis's windows go to the store as well, once it is open
 * (ctx is the daemon: the history may come after the sink is set). */
static void history_sink(void *ctx, const struct gpu_identity *id, const struct diag_window *w)
{
	struct daemon *d = ctx;
	struct diag_history *h = atomic_load_explicit(&d->hist, memory_order_acquire);
	if (h)
		diag_history_put(h, id, w);
}

/* The diagnosis history in store `db`, published to its readers. */
static int open_diag_history(struct daemon *d)
{
	struct diag_history_opts ho = {.record_retention_ms = d->cfg.storage.retention_ns / NS_PER_MS};
	struct diag_history *h = NULL;
	int rc = diag_history_create(&h, d->db, &ho);
	if (rc == GPULSE_OK)
		atomic_store_explicit(&d->hist, h, memory_order_release);
	return rc;
}



/* ---- storage ------------------------------------------------------------ */

static void storage_stats(void *ctx, struct storage_self_stats *out)
{
	struct daemon *d = ctx;
	struct tsdb *db = atomic_load_explicit(&d->store_live, memory_order_acquire);
	memset(out, 0, sizeof *out);
	out->open_attempts_total = atomic_load(&d->store_attempts);
	out->open_failures_total = atomic_load(&d->store_failures);
	if (!db)
		return;
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	out->open = true;
	out->available = st.writable;
	out->samples_out_of_order_total = st.samples_out_of_order_total;
	out->clock_steps_total = st.clock_steps_total;
	out->file_lost_total = st.file_lost_total;
	out->errors_total = st.storage_errors_total;
	out->samples_appended_total = st.samples_appended_total;
	out->samples_dropped_total = st.samples_dropped_total;
	out->series = st.series;
	out->head_bytes = st.head_bytes;
	out->db_bytes = st.db_bytes;
	out->corrupt_chunks_total = st.corrupt_chunks_total;
	struct selfscrape_stats ss;
	selfscrape_get_stats(atomic_load_explicit(&d->scrape_live, memory_order_acquire), &ss);
	out->self_scrape_series = ss.series;
	out->self_scrape_samples_total = ss.samples_appended_total;
	out->self_scrape_refused_total = ss.series_refused_total;
}

/* The bus's subscriber for the store: subscribed at start (the bus takes
 * no subscriber once sources publish), it forwards to the ingest once the
 * store is open and drops updates before. */
static void store_update(void *ctx, const struct gpu_update *u)
{
	struct daemon *d = ctx;
	struct ingest *ing = atomic_load_explicit(&d->ingest_live, memory_order_acquire);
	if (ing)
		ingest_on_update(ing, u);
}

/* The union of what the other writers of the store declare they write,
 * into d->scrape_foreign (selfscrape_opts.foreign_names): the ingest, the
 * profiler, the diagnosis history, the anomaly scores, benchd. Each
 * writer's own list, never what the store holds: a store reopened after
 * a restart holds every name the last run stored, the self-scrape's own
 * too. Called before the scraper starts (the profiler exists by then). */
static void declare_writers(struct daemon *d)
{
	const char **f = d->scrape_foreign;
	const size_t cap = SCRAPE_FOREIGN_MAX - 1;
	size_t nf = 0, n = 0;
	bool over = ingest_metric_names(f, cap, &n) != GPULSE_OK;
	nf += n;
	over |= profiling_store_metrics(d->prof, f + nf, cap - nf, &n) != GPULSE_OK;
	nf += n;
	static const char *const anomaly_metrics[] = {ANOMALY_METRIC, NULL};
	const char *const *const lists[] = {diag_history_metrics, anomaly_metrics,
					    benchd_store_metrics};
	for (size_t w = 0; w < sizeof lists / sizeof lists[0]; w++)
		for (const char *const *name = lists[w]; *name; name++) {
			if (nf == cap) {
				over = true;
				break;
			}
			f[nf++] = *name;
		}
	f[nf] = NULL;
	if (over)
		log_warn("storage: more than %d names of other writers; the last may be stored twice",
			 SCRAPE_FOREIGN_MAX - 1);
}

static void start_selfscrape(struct daemon *d)
{
	if (!d->scrape || atomic_load_explicit(&d->scrape_live, memory_order_relaxed))
		return;
	declare_writers(d);
	if (selfscrape_start(d->scrape) != GPULSE_OK)
		log_warn("storage: cannot start storing the self-metrics; the fields are stored");
	else
		atomic_store_explicit(&d->scrape_live, d->scrape, memory_order_release);
}

static const char *storage_path(const struct daemon *d)
{
	return d->cfg.storage.path[0] ? d->cfg.storage.path : d->demo_store;
}

/* One attempt to open the store and start its ingest and flusher, on the
 * main thread. 0 with the store published to the other threads, or the
 * store's status with its sentence in err. */
static int open_storage(struct daemon *d, char *err, size_t errlen)
{
	struct tsdb_opts o = {
		.path = storage_path(d),
		.flush_interval_ms = d->cfg.storage.flush_interval_ns / NS_PER_MS,
		.raw_retention_ms = d->cfg.storage.retention_ns / NS_PER_MS,
		.rollup_retention_ms = d->cfg.storage.rollup_retention_ns / NS_PER_MS,
		.retry_interval_ms = d->cfg.storage.retry_interval_ns / NS_PER_MS,
	};
	atomic_fetch_add(&d->store_attempts, 1);
	struct tsdb *db = NULL;
	int rc = tsdb_open(&db, &o, err, errlen);
	if (rc) {
		atomic_fetch_add(&d->store_failures, 1);
		return rc;
	}
	struct ingest *ing = NULL;
	if (ingest_create(&ing, db, d->bus) != GPULSE_OK || ingest_start(ing, NS_PER_SEC) != GPULSE_OK ||
	    tsdb_start_flusher(db) != GPULSE_OK) {
		ingest_destroy(ing);
		tsdb_close(db);
		atomic_fetch_add(&d->store_failures, 1);
		snprintf(err, errlen, "%s: cannot start the ingest or the flusher", o.path);
		return GPULSE_ENOMEM;
	}
	d->db = db;
	d->ingest = ing;
	start_remotes(d, db);
	atomic_store_explicit(&d->ingest_live, ing, memory_order_release);
	atomic_store_explicit(&d->store_live, db, memory_order_release);
	/* What /metrics exports and no other writer stores (issue 18). It
	 * renders /metrics, so it starts once d->self is complete (at start,
	 * just before the HTTP server; a store opened late, at once), with
	 * the other writers' names declared then (declare_writers). */
	d->scrape_foreign[0] = NULL;
	const struct selfscrape_opts so = {.foreign_names = d->scrape_foreign};
	if (selfscrape_create(&d->scrape, db, &so, render_for_store, d) != GPULSE_OK)
		log_warn("storage: cannot store the self-metrics; the fields are stored");
	else if (d->self_ready)
		start_selfscrape(d);
	return 0;
}

/* Open the store and subscribe its ingest to the bus (before any source
 * publishes). Storage is optional, but a path that was asked for and
 * cannot be used because of the file (damaged, not ours: exit status 2)
 * or another gpulsed holding it (1) stops the daemon: serving without
 * the history asked for would hide the problem. A disk failure (full, an
 * I/O error, a file that cannot be opened or written: GPULSE_EIO) is the
 * machine's state and may pass: gpulsed then starts without history,
 * says so, and retries every storage.retry_interval (retry_storage). */
static int start_storage(struct daemon *d)
{
	const char *path = storage_path(d);
	if (!path[0])
		return 0;
	if (bus_subscribe(d->bus, store_update, d) != GPULSE_OK) {
		log_error("storage: cannot subscribe to the sample bus");
		return 1;
	}
	d->self.storage_stats = storage_stats;
	d->self.storage_ctx = d;
	char err[768];
	int rc = open_storage(d, err, sizeof err);
	if (rc == GPULSE_EIO) {
		snprintf(d->store_why, sizeof d->store_why, "%s", err);
		d->store_pending = true;
		d->store_next_try_ns = clock_mono_ns() + d->cfg.storage.retry_interval_ns;
		complain(&d->store_complaint,
			 "storage.path: %s; starting without history (gpulse_storage_available 0, the "
			 "query API answers 503), retrying every %gs", err,
			 (double)d->cfg.storage.retry_interval_ns / NS_PER_SEC);
		return 0;
	}
	if (rc) {
		log_error("storage.path: %s", err);
		return exit_status(rc);
	}
	/* Open, but not writable (a read-only file or file system): the
	 * store said so and keeps the samples in memory until it can write;
	 * "keeping samples" would be false. */
	if (tsdb_unwritable(d->db, err, sizeof err) != 0)
		log_warn("storage.path: %s; gpulse_storage_available 0 and the query API answers 503 "
			 "until it can be written", err);
	else
		log_info("storage: keeping samples in %s%s", path,
			 d->cfg.storage.path[0] ? "" : " (a temporary store for --demo, removed at exit)");
	return 0;
}

/* Main thread, while the store is pending: try again when it is time. */
static void retry_storage(struct daemon *d)
{
	if (!d->store_pending || clock_mono_ns() < d->store_next_try_ns)
		return;
	char err[768];
	int rc = open_storage(d, err, sizeof err);
	if (rc == 0) {
		d->store_pending = false;
		/* Every user of the store takes it now. The rules read it from
		 * their next evaluation, so their scrapes of /metrics end. */
		anomaly_set_store(d->anomaly, d->db);
		profiling_set_store(d->prof, d->db);
		benchd_set_store(d->bench, d->db);
		rules_engine_set_store(d->rules, d->db);
		livestore_stop(d->live);
		if (open_diag_history(d) != GPULSE_OK)
			log_warn("storage: the diagnosis history cannot use the store: out of memory");
		api_set_store(&d->api, d->db);
		complaint_clear(&d->store_complaint, "storage: %s opened after %llu attempts",
				storage_path(d), (unsigned long long)atomic_load(&d->store_attempts));
		log_info("storage: keeping samples, anomaly scores, profiling series and diagnosis "
			 "windows in %s from now on; the query API serves its history%s", storage_path(d),
			 d->rules ? ", and the rules read and write it (ranges fill from now on)" : "");
		return;
	}
	snprintf(d->store_why, sizeof d->store_why, "%s", err);
	api_set_unavailable(&d->api, d->store_why);
	complain(&d->store_complaint, "storage.path: %s; still without history, retrying every %gs",
		 err, (double)d->cfg.storage.retry_interval_ns / NS_PER_SEC);
	d->store_next_try_ns = clock_mono_ns() + d->cfg.storage.retry_interval_ns;
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

static void rule_alert_stats(void *ctx, struct rule_alert_self_stats *out)
{
	struct rules_alert_stats st;
	rules_engine_alert_stats(ctx, &st);
	*out = (struct rule_alert_self_stats){st.pending, st.firing, st.held, st.notifications_total,
					 st.flaps_held_total, st.restored_total, st.persist_errors_total};
}

/* Start the rules thread when rule files are configured. They were
 * checked when the configuration was loaded; a failure here (a file
 * changed since) stops the daemon as a bad file at start does. */
/* Tell the rules' in-memory history what the rules of files[n] read. */
static void live_follow_rules(struct livestore *ls, struct rules_file *const *files, size_t n)
{
	size_t total = 0, k = 0;
	for (size_t f = 0; f < n; f++)
		total += rules_file_count(files[f]);
	const struct promql_expr **exprs = xcalloc(total + 1, sizeof *exprs);
	for (size_t f = 0; f < n; f++)
		for (size_t g = 0; g < files[f]->ngroups; g++)
			for (size_t r = 0; r < files[f]->groups[g].nrules; r++)
				if (files[f]->groups[g].rules[r].expr)
					exprs[k++] = files[f]->groups[g].rules[r].expr;
	livestore_set_queries(ls, exprs, k);
	free(exprs);
}

/* Without a store the alerting rules read /metrics as scraped into
 * memory (livestore.h), as often as the most frequent group runs. */
static int start_live_history(struct daemon *d, struct rules_file *const *files, size_t n)
{
	int64_t iv = d->cfg.rule_evaluation_interval_ns / NS_PER_MS;
	size_t nalert = 0;
	for (size_t f = 0; f < n; f++)
		for (size_t g = 0; g < files[f]->ngroups; g++) {
			const struct rules_group *gr = &files[f]->groups[g];
			if (gr->interval_ms > 0 && gr->interval_ms < iv)
				iv = gr->interval_ms;
			for (size_t r = 0; r < gr->nrules; r++)
				nalert += gr->rules[r].alert != NULL;
		}
	struct livestore_opts lo = {.interval_ms = iv};
	if (livestore_create(&d->live, &lo, render_for_rules, d) != GPULSE_OK)
		return GPULSE_ENOMEM;
	live_follow_rules(d->live, files, n);
	struct livestore_stats st;
	livestore_get_stats(d->live, &st);
	char every[32], back[32];
	duration_format(iv * NS_PER_MS, every, sizeof every);
	duration_format(st.window_ms * NS_PER_MS, back, sizeof back);
	log_info("rules: no storage: %zu alerting rule(s) read /metrics as sampled every %s and held "
		 "in memory for %s; their alerts are kept in memory only (lost at a restart, no ALERTS "
		 "series)", nalert, every, back);
	return GPULSE_OK;
}

static int start_rules(struct daemon *d)
{
	if (!d->cfg.rule_files[0][0])
		return 0;
	char err[1024];
	struct rules_file **files = NULL;
	size_t n = 0;
	if (load_rule_files(&d->cfg, &files, &n, err, sizeof err)) {
		log_error("%s", err);
		return 2;
	}
	if (!d->db && start_live_history(d, files, n) != GPULSE_OK) {
		rules_files_free(files, n);
		log_error("rules: out of memory");
		return 1;
	}
	struct label ext[CONFIG_MAX_LABELS];
	size_t next = 0;
	/* An empty value is no label (as in Prometheus): `instance: ""`
	 * turns the default off. */
	for (size_t i = 0; i < CONFIG_MAX_LABELS && d->cfg.alerting.external_labels[i][0][0]; i++)
		if (d->cfg.alerting.external_labels[i][1][0])
			ext[next++] = (struct label){d->cfg.alerting.external_labels[i][0],
							    d->cfg.alerting.external_labels[i][1]};
	struct rules_engine_config rc = {
		.db = d->db,
		.queryable = &livestore_queryable,
		.queryable_ctx = d->live,
		.default_interval_ms = d->cfg.rule_evaluation_interval_ns / NS_PER_MS,
		/* The engine reads 0 as its own default: none is < 0. */
		.eval_delay_ms = d->cfg.rule_evaluation_delay_ns > 0
					 ? d->cfg.rule_evaluation_delay_ns / NS_PER_MS : -1,
		.alert_sink = evidence_sink,
		.alert_sink_ctx = d->evidence,
		.resend_delay_ms = d->cfg.alerting.resend_delay_ns / NS_PER_MS,
		.external_labels = ext,
		.nexternal_labels = next,
		.external_url = d->cfg.alerting.external_url[0] ? d->cfg.alerting.external_url : NULL,
		/* At the edge a series has no `instance`: templates see the
		 * external labels the alert will carry (identity_defaults). */
		.ext_in_template_labels = true,
	};
	if (rules_engine_new(&d->rules, &rc, files, n) || rules_engine_start(d->rules)) {
		log_error("rules: cannot start the evaluation thread");
		return 1;
	}
	d->self.rule_stats = rule_stats;
	d->self.rule_ctx = d->rules;
	d->self.rule_alert_stats = rule_alert_stats;
	d->self.rule_alert_ctx = d->rules;
	log_info("rules: evaluating %zu group(s) from %zu file(s)", rules_engine_group_count(d->rules), n);
	return 0;
}

/* Re-read the rule files of `nc` into the running engine. The files were
 * parsed moments ago by daemon_load_config; this reads them again. */
static int reload_rules(struct daemon *d, const struct gpulse_config *nc, char *err, size_t errlen)
{
	if (!d->rules) {
		if (nc->rule_files[0][0])
			log_warn("reload: gpulsed started without rule files; rule_files are read at the "
				 "next restart");
		return 0;
	}
	struct rules_file **files = NULL;
	size_t n = 0;
	int rc = load_rule_files(nc, &files, &n, err, errlen);
	if (rc)
		return rc;
	/* The history first: the new rules' series are then kept from the
	 * next scrape on. */
	if (d->live)
		live_follow_rules(d->live, files, n);
	return rules_engine_replace(d->rules, files, n);
}



/* ---- sources ---------------------------------------------------------- */

static int start_replay(struct daemon *d, const char *path, char *err, size_t errlen)
{
	struct replay_config rc = {.path = path, .speed = d->cfg.replay.speed, .loop = d->cfg.replay.loop};
	int r = replay_start(&d->rep, d->bus, &rc, err, errlen);
	if (r)
		return r;
	self_stats_set_mode(&d->self, MODE_REPLAY, path, d->cfg.replay.speed);
	return GPULSE_OK;
}

/* Try NVML. On success the daemon switches to MODE_NVML. */
static int try_nvml(struct daemon *d, char *err, size_t errlen)
{
	struct collector_config cc;
	config_to_collector(&d->cfg, &cc);
	cc.attrib = d->attrib;
	struct collector *col = NULL;
	int rc = collector_start(&col, d->bus, &cc, err, errlen);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&d->source_lock);
	d->col = col;
	self_stats_set_mode(&d->self, MODE_NVML, collector_nvml(col)->path, 0);
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
	if (d->demo_replay) {
		/* demo_begin has said so in the first line. */
		if (start_replay(d, d->demo_replay, err, sizeof err) == GPULSE_OK)
			return 0;
		log_error("%s", err);
		self_stats_set_mode(&d->self, MODE_NONE, err, 0);
		log_warn("serving self-metrics only, trying NVML every %.0f s",
			 (double)NVML_RETRY_NS / NS_PER_SEC);
		d->next_nvml_try = clock_mono_ns() + NVML_RETRY_NS;
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
	/* The detail is a label value: a long reason is cut, on purpose. */
	self_stats_set_mode(&d->self, MODE_NONE, err, 0);
	log_warn("no usable NVIDIA driver (%s); serving self-metrics only, trying again every %.0f s",
		 err, (double)NVML_RETRY_NS / NS_PER_SEC);
	d->next_nvml_try = clock_mono_ns() + NVML_RETRY_NS;
	return 0;
}

/* ---- --demo --------------------------------------------------------------- */

/* --demo's rules: the rule pack while the configuration names no rule
 * files (at start and at every reload). */
static void demo_rules(const struct daemon *d, struct gpulse_config *c)
{
	if (d->opt->demo && d->rule_pack[0] && !c->rule_files[0][0])
		str_copy(c->rule_files[0], sizeof c->rule_files[0], d->rule_pack);
}

/* Set up --demo before anything else logs: say first whether real GPUs
 * or a replay are served (NVML is opened once to know), make a temporary
 * store unless storage.path is set, and find the rule pack. 0, or the
 * exit status. */
static int demo_begin(struct daemon *d)
{
	char err[512];
	if (d->cfg.replay.file[0]) {
		log_warn("demo: replaying %s as live GPUs (not real hardware)", d->cfg.replay.file);
	} else {
		struct nvml_lib *nv = NULL;
		if (nvml_lib_open(&nv, d->cfg.nvml_library[0] ? d->cfg.nvml_library : NULL, err,
				  sizeof err) == GPULSE_OK) {
			log_info("demo: real NVIDIA GPUs through NVML (%s)", nv->path);
			nvml_lib_close(nv);
		} else if ((d->demo_replay = daemon_bundled_recording()) != NULL) {
			log_warn("demo: no usable NVIDIA driver (%s): REPLAYING the bundled real H200 "
				 "recording %s as live GPUs, labelled source=\"replay\" (not real hardware)",
				 err, d->demo_replay);
		} else {
			log_warn("demo: no usable NVIDIA driver (%s) and no bundled recording (set "
				 "GPULSE_DATA_DIR): no GPUs to show", err);
		}
	}
	if (!d->cfg.storage.path[0]) {
		const char *tmp = getenv("TMPDIR");
		if ((size_t)snprintf(d->demo_dir, sizeof d->demo_dir, "%s/gpulse-demo.XXXXXX",
				     tmp && tmp[0] ? tmp : "/tmp") >= sizeof d->demo_dir ||
		    !mkdtemp(d->demo_dir)) {
			log_error("demo: cannot make a temporary store in %s: %s",
				  tmp && tmp[0] ? tmp : "/tmp", strerror(errno));
			d->demo_dir[0] = '\0';
			return 1;
		}
		snprintf(d->demo_store, sizeof d->demo_store, "%s/%s", d->demo_dir, DEMO_STORE);
	}
	const char *pack = daemon_rule_pack();
	if (d->cfg.rule_files[0][0])
		log_info("demo: running the configured rule_files, not the rule pack");
	else if (pack && str_copy(d->rule_pack, sizeof d->rule_pack, pack))
		demo_rules(d, &d->cfg);
	else
		log_info("demo: rule pack " RULE_PACK " not found (GPULSE_DATA_DIR/rules, "
			 "BIN/../share/gpulse/rules, the source tree's deploy/rules, "
			 "/usr/share/gpulse/rules): no rules");
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 ? 0 : -1;
}

/* Remove --demo's temporary store (the store is closed). */
static void demo_end(struct daemon *d)
{
	if (!d->demo_dir[0])
		return;
	if (nftw(d->demo_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
		log_warn("demo: cannot remove the temporary store %s: %s", d->demo_dir, strerror(errno));
}

/* The CLI beside this gpulsed, as the user would type it from here:
 * relative to the working directory when below it ("build/gpulse"),
 * "gpulse" when there is none beside it. */
static void cli_command(char *out, size_t len)
{
	char dir[4096], cwd[4096], cli[4200];
	snprintf(out, len, "gpulse");
	if (!exe_dir(dir, sizeof dir))
		return;
	snprintf(cli, sizeof cli, "%s/gpulse", dir);
	if (access(cli, X_OK) != 0)
		return;
	size_t n = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
	if (n > 1 && strncmp(cli, cwd, n) == 0 && cli[n] == '/')
		snprintf(out, len, "%s", cli + n + 1);
	else
		snprintf(out, len, "%s", cli);
}

/* --demo's last start-up words: what to try, with --url when the CLI's
 * default (http://127.0.0.1:9401) is not where gpulsed listens. */
static void demo_hint(const struct daemon *d, bool tls, int port, char *out, size_t len)
{
	char cli[4200], host[256], url[300] = "";
	int p;
	cli_command(cli, sizeof cli);
	if (http_parse_listen(d->cfg.listen, host, sizeof host, &p, NULL, 0) != 0 || !host[0] ||
	    strcmp(host, "0.0.0.0") == 0 || strcmp(host, "*") == 0)
		snprintf(host, sizeof host, "127.0.0.1");
	else if (strcmp(host, "::") == 0)
		snprintf(host, sizeof host, "::1");
	bool v6 = strchr(host, ':') != NULL;
	if (tls || port != 9401 || strcmp(host, "127.0.0.1") != 0)
		snprintf(url, sizeof url, " --url http%s://%s%s%s:%d", tls ? "s" : "", v6 ? "[" : "",
			 host, v6 ? "]" : "", port);
	snprintf(out, len, "; try: %s%s status (and alerts, query 'gpulse_gpu_up', diagnose "
		 "--since 10m); dashboard: http%s://%s%s%s:%d/", cli, url, tls ? "s" : "", v6 ? "[" : "",
		 host, v6 ? "]" : "", port);
}

/* ---- reload ------------------------------------------------------------ */

static void reload_config(struct daemon *d);

/* SIGHUP under systemd's reload protocol: RELOADING=1, then READY=1 with
 * the outcome in STATUS=, so `systemctl reload` returns once it is done. */
static void reload(struct daemon *d)
{
	sdnotify_reloading(&d->sdn);
	reload_config(d);
	char st[160];
	snprintf(st, sizeof st, "serving; last reload %s",
		 atomic_load(&d->self.last_reload_ok) ? "applied" : "refused (see the log)");
	sdnotify_reloaded(&d->sdn, st);
}

static void reload_config(struct daemon *d)
{
	char err[512];
	struct gpulse_config nc;
	atomic_store(&d->self.last_reload_wall_ns, clock_wall_ns());
	if (daemon_load_config(d->opt, &nc, err, sizeof err) != 0) {
		atomic_fetch_add(&d->self.reloads_failed_total, 1);
		atomic_store(&d->self.last_reload_ok, 0);
		log_error("reload refused, the running configuration stays: %s", err);
		return;
	}
	demo_rules(d, &nc);
	struct buf keys;
	buf_init(&keys, 64 * 1024);
	if (config_restart_changes(&d->started, &nc, d->rules != NULL, &keys))
		log_warn("reload: changed, but in effect only after a restart: %s", keys.data);
	buf_free(&keys);
	if (reload_rules(d, &nc, err, sizeof err) != 0) {
		atomic_fetch_add(&d->self.reloads_failed_total, 1);
		atomic_store(&d->self.last_reload_ok, 0);
		log_error("reload refused, the running configuration stays: %s", err);
		return;
	}
	if (alerting_reload(d->alerting, &nc, err, sizeof err) != 0) {
		atomic_fetch_add(&d->self.reloads_failed_total, 1);
		atomic_store(&d->self.last_reload_ok, 0);
		log_error("reload: alerting refused, its running configuration stays: %s", err);
		return;
	}
	d->cfg.alerting = nc.alerting;
	memcpy(d->cfg.rule_files, nc.rule_files, sizeof nc.rule_files);
	log_set_level(nc.log_level);
	int64_t periods[TIER_COUNT] = {nc.sampling.fast_ns, nc.sampling.normal_ns, nc.sampling.slow_ns};
	pthread_rwlock_rdlock(&d->source_lock);
	struct adapt_config ac;
	config_to_adapt(&nc, &ac);
	if (d->col) {
		collector_set_periods(d->col, periods);
		collector_set_adapt(d->col, &ac);
	}
	pthread_rwlock_unlock(&d->source_lock);
	d->cfg.sampling.adaptive = nc.sampling.adaptive;
	d->cfg.sampling.fast_floor_ns = nc.sampling.fast_floor_ns;
	d->cfg.sampling.normal_floor_ns = nc.sampling.normal_floor_ns;
	d->cfg.sampling.quiet_ns = nc.sampling.quiet_ns;
	d->cfg.sampling.fast_ns = nc.sampling.fast_ns;
	d->cfg.sampling.normal_ns = nc.sampling.normal_ns;
	d->cfg.sampling.slow_ns = nc.sampling.slow_ns;
	d->cfg.log_level = nc.log_level;
	memcpy(d->cfg.attribution.labels, nc.attribution.labels, sizeof nc.attribution.labels);
	attrib_set_labels(d->attrib, config_attrib_labels(&nc));
	publish_config(d);
	atomic_fetch_add(&d->self.reloads_ok_total, 1);
	atomic_store(&d->self.last_reload_ok, 1);
	log_info("configuration reloaded");
}

/* ---- run ----------------------------------------------------------------- */

/* The longest gpulsed waits for a first sample before it tells systemd
 * it is ready anyway: well inside the unit's TimeoutStartSec. */
#define READY_WAIT_NS (10LL * 1000000000LL)

/* Whether a source has published a reading of any GPU, or there is no
 * source whose sample could be waited for (no driver: self-metrics). */
static bool first_sample_in(struct daemon *d)
{
	if (d->self.mode == MODE_NONE)
		return true;
	int n = bus_gpu_count(d->bus);
	for (int i = 0; i < n; i++) {
		struct gpu_snapshot snap;
		if (bus_read(d->bus, i, &snap) == 0)
			for (int t = 0; t < TIER_COUNT; t++)
				if (snap.samples[t] > 0)
					return true;
	}
	return false;
}

static void notify_ready(struct daemon *d)
{
	char st[400];
	enum daemon_mode m = self_stats_get_mode(&d->self, NULL, 0, NULL);
	snprintf(st, sizeof st, "serving %s on %s port %d, %d GPU(s)", m == MODE_NVML ? "NVML"
		 : m == MODE_REPLAY ? "a replay (not real hardware)" : "self-metrics only (no driver)",
		 d->cfg.listen, http_server_port(d->http), bus_gpu_count(d->bus));
	sdnotify_ready(&d->sdn, st);
}

/* ---- start-up: one step each, in daemon_run's order ------------------- */

/* Each returns 0 to go on, or the exit status to stop with. */
typedef int daemon_step_fn(struct daemon *d);

/* --demo, before anything else logs (demo_begin). */
static int begin_demo(struct daemon *d)
{
	return d->opt->demo ? demo_begin(d) : 0;
}

/* Block the signals we take before any thread starts, so every thread
 * inherits the mask; the main thread takes them in serve(). */
static int block_signals(struct daemon *d)
{
	sigemptyset(&d->signals);
	sigaddset(&d->signals, SIGTERM);
	sigaddset(&d->signals, SIGINT);
	sigaddset(&d->signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &d->signals, NULL);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int make_bus(struct daemon *d)
{
	if (bus_create(&d->bus) != GPULSE_OK) {
		log_error("out of memory");
		return 1;
	}
	return 0;
}

/* Alert delivery, and evidence in front of it (the rules' sink). */
static int start_alerting(struct daemon *d)
{
	char err[512];
	if (alerting_start(&d->alerting, &d->cfg, err, sizeof err) != 0) {
		log_error("alerting: %s", err);
		return 2;
	}
	d->self.notify_stats = alerting_stats;
	d->self.notify_ctx = alerting_sink_ctx(d->alerting);
	struct evidence_config ec;
	config_to_evidence(&d->cfg, &ec);
	if (evidence_create(&d->evidence, &ec, d->bus, alerting_sink(),
			    alerting_sink_ctx(d->alerting)) != GPULSE_OK) {
		log_error("out of memory");
		return 1;
	}
	return 0;
}

/* The anomaly detector subscribes before any source publishes and
 * before the HTTP server reads d->self (gpulse_anomaly_score). */
static int start_anomaly(struct daemon *d)
{
	if (!d->cfg.anomaly.enabled)
		return 0;
	struct anomaly_config ac = {
		.step_ns = d->cfg.anomaly.step_ns,
		.halflife_ns = d->cfg.anomaly.halflife_ns,
		.season_halflife_ns = d->cfg.anomaly.season_halflife_ns,
		.warmup_ns = d->cfg.anomaly.warmup_ns,
		.season_buckets = (int)d->cfg.anomaly.season_buckets,
	};
	if (anomaly_create(&d->anomaly, &ac, d->bus, d->db) != GPULSE_OK ||
	    anomaly_subscribe(d->anomaly) != GPULSE_OK) {
		log_error("cannot start the anomaly detector");
		return 1;
	}
	d->self.anomaly_scores = anomaly_scores_uuid;
	d->self.anomaly_ctx = d->anomaly;
	return 0;
}

/* The profiling socket and the baseline benchmarks (only with GPUs to
 * measure, not a replay), before the HTTP server reads d->self. */
static int start_profiling_and_bench(struct daemon *d)
{
	if (profiling_start(&d->prof, &d->cfg, d->db, gpu_by_uuid, d) != GPULSE_OK) {
		log_error("out of memory");
		return 1;
	}
	if (benchd_start(&d->bench, &d->cfg, d->db, d->bus, !d->cfg.replay.file[0] && !d->demo_replay) !=
	    GPULSE_OK) {
		log_error("out of memory");
		return 1;
	}
	d->self.profile_metrics = extra_metrics;
	d->self.profile_ctx = d;
	return 0;
}

/* The live diagnosis subscribes before any source publishes, and exists
 * before the HTTP server can ask it (/api/v1/diagnosis); so do the health
 * score and the activity per process. */
static int start_diagnosis(struct daemon *d)
{
	double rate_hz = 1e9 / (double)d->cfg.sampling.fast_ns;
	if (d->cfg.replay.file[0] || d->opt->demo)
		rate_hz = fmax(rate_hz, 10 * d->cfg.replay.speed);
	if (diag_live_create(&d->diag, d->bus, (double)d->cfg.diagnosis.window_ns / 1e9,
			     (double)d->cfg.diagnosis.history_ns / 1e9, rate_hz) != GPULSE_OK) {
		log_error("cannot start the live diagnosis");
		return 1;
	}
	struct diag_options dopt;
	diag_options_defaults(&dopt);
	dopt.memory_pressure_ratio = d->cfg.diagnosis.memory_pressure;
	if (diag_live_set_options(d->diag, &dopt) != GPULSE_OK) {
		/* config_validate holds it to (0, 1]; this is diag_options_check's range. */
		log_error("diagnosis.memory_pressure: %g is out of range", dopt.memory_pressure_ratio);
		return 1;
	}
	diag_live_set_trace_source(d->diag, trace_source, d->prof);
	if (health_live_create(&d->health, d->bus, 0) != GPULSE_OK) {
		log_error("cannot start the health score");
		return 1;
	}
	benchd_set_health(d->bench, d->health);
	if (tenantsd_start(&d->tenants, d->bus, d->prof) != GPULSE_OK) {
		log_error("cannot start the per-process activity split");
		return 1;
	}
	d->self.tenants = tenantsd_tenants(d->tenants);
	if (d->db && open_diag_history(d) != GPULSE_OK) {
		log_error("cannot keep the diagnosis in the store");
		return 1;
	}
	if (storage_path(d)[0])
		diag_live_set_sink(d->diag, history_sink, d);
	return 0;
}

static int start_evidence(struct daemon *d)
{
	struct evidence_sources es = {.raise = raise_gpu, .raise_ctx = d, .diag = d->diag,
				      .anomaly = d->anomaly, .prof = d->prof};
	if (evidence_start(d->evidence, &es) != GPULSE_OK) {
		log_error("cannot start the evidence thread");
		return 1;
	}
	return 0;
}

/* What the query and status endpoints serve: the store (or why there is
 * none), the query limits, the flags and the running configuration. */
static int set_up_query_api(struct daemon *d)
{
	const struct daemon_options *opt = d->opt;
	api_init(&d->api, d->db);
	d->api.timeout_ns = d->cfg.query.timeout_ns;
	d->api.max_concurrency = d->cfg.query.max_concurrency;
	d->self.query_stats = query_stats;
	d->self.query_ctx = &d->api;
	if (d->store_pending)
		api_set_unavailable(&d->api, d->store_why);
	api_status_init(&d->status, &d->api);
	d->status.start_wall_ns = clock_wall_ns();
	d->status.reload_ok = &d->self.last_reload_ok;
	d->status.reload_wall_ns = &d->self.last_reload_wall_ns;
	d->status.metrics_text = api_metrics_text;
	d->status.metrics_ctx = &d->metrics;
	duration_format(d->cfg.storage.retention_ns, d->status.retention,
			sizeof d->status.retention);
	char speed[32];
	snprintf(speed, sizeof speed, "%g", d->cfg.replay.speed);
	const struct daemon_overrides *ov = &opt->ov;
	api_status_add_flag(&d->status, "config", opt->config_path);
	api_status_add_flag(&d->status, "listen", d->cfg.listen);
	api_status_add_flag(&d->status, "storage-path", storage_path(d));
	api_status_add_flag(&d->status, "replay", d->cfg.replay.file);
	api_status_add_flag(&d->status, "replay-speed", speed);
	api_status_add_flag(&d->status, "nvml-library", d->cfg.nvml_library);
	api_status_add_flag(&d->status, "log-level", ov->log_level ? ov->log_level : "");
	api_status_add_flag(&d->status, "demo", opt->demo ? "true" : "false");
	api_status_add_flag(&d->status, "allow-insecure-remote",
			    d->cfg.http.allow_insecure_remote ? "true" : "false");
	publish_config(d);
	return 0;
}

static int start_http(struct daemon *d)
{
	struct http_config hc;
	if (config_to_http(&d->cfg, &hc, d->token, sizeof d->token, d->write_token,
			   sizeof d->write_token) != 0) {
		/* config_to_http logged which token file and why. */
		log_error("%s: cannot read a token file of http:",
			  d->opt->config_path ? d->opt->config_path : "command line");
		return 2;
	}
	hc.requests_total = &d->self.http_requests_total;
	hc.rejected_total = &d->self.http_rejected_total;
	_Static_assert(SELF_HTTP_SHED_REASONS == HTTP_SHED_COUNT, "one counter per reason");
	hc.shed_total = d->self.http_shed_total;
	_Static_assert(SELF_HTTP_DENY_REASONS == HTTP_DENY_COUNT, "one counter per reason");
	hc.denied_total = d->self.http_denied_total;
	char err[512];
	int hrc = http_server_start(&d->http, &hc, err, sizeof err);
	if (hrc) {
		log_error("%s", err);
		return exit_status(hrc);
	}
	d->tls = hc.tls_cert_file != NULL;
	return 0;
}

/* Every endpoint on the running server (src/api/ and the parts' own),
 * the dashboard last; then the store's scrape of /metrics may start. */
static int route_endpoints(struct daemon *d)
{
	/* The query and capture pools first: /metrics reads their counters. */
	if (api_register(d->http, &d->api) != 0 || api_status_register(d->http, &d->status) != 0 ||
	    profiling_register(d->prof, d->http) != 0 || benchd_register(d->bench, d->http) != 0 ||
	    evidence_register(d->evidence, d->http) != 0) {
		log_error("cannot start the threads of the query API and of captures");
		return 1;
	}
	/* Every d->self callback and the pools /metrics reads are set: the
	 * store's scrape of /metrics may start. */
	d->self_ready = true;
	start_selfscrape(d);
	d->metrics.render = render_metrics;
	d->metrics.render_ctx = d;
	d->metrics.scrapes_total = &d->self.scrapes_total;
	d->metrics.bus = d->bus;
	d->metrics.self = &d->self;
	d->diagnosis = (struct api_diagnosis){
		.bus = d->bus, .diag = d->diag, .hist = &d->hist,
		.trace_window = trace_window, .trace_ctx = d->prof,
		.window_tenants = window_tenants, .tenants_ctx = d->tenants,
		.max_body_bytes = CONFIG_HTTP_MAX_BODY,
	};
	if (api_metrics_register(d->http, &d->metrics) != 0 ||
	    api_diagnosis_register(d->http, &d->diagnosis) != 0 ||
	    api_rules_register(d->http, d->rules) != 0) {
		log_error("cannot route the HTTP endpoints");
		return 1;
	}
	/* Last: "/" is a prefix route that takes every path left. */
	if (web_register(d->http, &d->web) != GPULSE_OK) {
		log_error("cannot serve the web dashboard");
		return 1;
	}
	return 0;
}

/* The rules' scrapes of /metrics read d->self, complete once the HTTP
 * server (its other reader) runs. */
static int start_live_scrapes(struct daemon *d)
{
	if (d->live && livestore_start(d->live)) {
		log_error("rules: cannot start the scrapes of /metrics");
		return 1;
	}
	return 0;
}

static int open_attribution(struct daemon *d)
{
	struct attrib_config ac;
	config_to_attrib(&d->cfg, &ac);
	if (attrib_open(&d->attrib, &ac) != 0) {
		log_error("attribution: out of memory");
		return 1;
	}
	d->self.attrib = d->attrib;
	if (tenantsd_set_attrib(d->tenants, d->attrib, d->cfg.attribution.idle_sm_ratio,
				d->cfg.attribution.idle_window_ns) != GPULSE_OK) {
		log_error("attribution: out of memory");
		return 1;
	}
	return 0;
}

/* Tests and scripts read the bound port from this line (listen may say
 * port 0). */
static int announce(struct daemon *d)
{
	char hint[20000] = "";
	if (d->opt->demo)
		demo_hint(d, d->tls, http_server_port(d->http), hint, sizeof hint);
	log_info("serving http%s://%s port %d (gpulsed %s)%s", d->tls ? "s" : "", d->cfg.listen,
		 http_server_port(d->http), GPULSE_VERSION, hint);
	return 0;
}

/* gpulsed's start-up, in order: each step may use what the ones before
 * it made, and the parts that subscribe to the bus come before any source
 * publishes on it (start_source). */
static daemon_step_fn *const start_steps[] = {
	begin_demo,
	block_signals,
	make_bus,
	start_storage,
	start_alerting,
	start_rules,
	start_anomaly,
	start_profiling_and_bench,
	start_diagnosis,
	start_evidence,
	set_up_query_api,
	start_http,
	route_endpoints,
	start_live_scrapes,
	open_attribution,
	start_source,
	announce,
};

/* ---- serving, shutdown ------------------------------------------------ */

/* The main thread until SIGTERM or SIGINT: reloads on SIGHUP, retries a
 * store or NVML that was missing, and tells systemd (Type=notify)
 * READY=1 once the HTTP server listens and the first sample is in (or
 * there is no source to wait for, or READY_WAIT_NS passed: serving
 * self-metrics is serving), with its watchdog pings. */
static int serve(struct daemon *d)
{
	char err[512];
	int64_t ready_by = clock_mono_ns() + READY_WAIT_NS;
	sdnotify_init(&d->sdn, clock_mono_ns());
	for (;;) {
		int64_t now = clock_mono_ns();
		if (!d->sdn.ready && (first_sample_in(d) || now >= ready_by))
			notify_ready(d);
		sdnotify_watchdog(&d->sdn, now);
		/* Wake once a second only while there is no source yet (to
		 * try NVML again) or no store yet (to open it again), every
		 * 50 ms until ready, and when the watchdog wants its ping;
		 * otherwise sleep until a signal comes. */
		int64_t wait_ns = d->self.mode == MODE_NONE || d->store_pending ? 1000000000LL : -1;
		if (!d->sdn.ready && (wait_ns < 0 || wait_ns > 50000000LL))
			wait_ns = 50000000LL;
		int64_t wd = sdnotify_wait_ns(&d->sdn, now);
		if (wd >= 0 && (wait_ns < 0 || wd < wait_ns))
			wait_ns = wd;
		struct timespec tick = {.tv_sec = wait_ns / 1000000000LL,
					.tv_nsec = wait_ns % 1000000000LL};
		int sig = wait_ns >= 0 ? sigtimedwait(&d->signals, NULL, &tick)
				       : sigwaitinfo(&d->signals, NULL);
		if (sig == SIGTERM || sig == SIGINT) {
			log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			sdnotify_stopping(&d->sdn);
			return 0;
		}
		if (sig == SIGHUP) {
			reload(d);
			continue;
		}
		retry_storage(d);
		if (d->self.mode == MODE_NONE && clock_mono_ns() >= d->next_nvml_try) {
			if (try_nvml(d, err, sizeof err) != GPULSE_OK)
				d->next_nvml_try = clock_mono_ns() + NVML_RETRY_NS;
		}
	}
}

static struct daemon *daemon_new(const struct daemon_options *opt, const struct gpulse_config *cfg)
{
	struct daemon *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->opt = opt;
	d->cfg = *cfg;
	d->started = *cfg;
	d->self.start_wall_ns = clock_wall_ns();
	pthread_mutex_init(&d->self.mode_lock, NULL);
	d->self.replay_speed = 0;
	atomic_store(&d->self.last_reload_ok, 1);
	pthread_rwlock_init(&d->source_lock, NULL);
	api_metrics_init(&d->metrics, CONFIG_HTTP_MAX_BODY);
	log_set_level(cfg->log_level);
	return d;
}

/* Stop and free everything, whichever step start-up reached: readers
 * before what they read, the store's last flush after every publisher. */
static void shut_down(struct daemon *d)
{
	/* The rules' scrapes read the sources and the rules' counters. */
	livestore_stop(d->live);
	selfscrape_stop(d->scrape);
	profiling_interrupt(d->prof);  /* captures answer before HTTP stops */
	http_server_stop(d->http);
	evidence_stop(d->evidence);  /* its capture, if any, ended with the interrupt */
	benchd_stop(d->bench);  /* its handlers are gone; its child is ended */
	http_static_free(d->web);
	replay_stop(d->rep);
	collector_stop(d->col);
	diag_live_destroy(d->diag);
	health_live_destroy(d->health);
	tenantsd_stop(d->tenants);
	anomaly_destroy(d->anomaly);
	diag_history_destroy(d->hist);
	rules_engine_free(d->rules);
	evidence_destroy(d->evidence);  /* the engine no longer calls its sink */
	livestore_destroy(d->live);  /* the engine read it */
	alerting_stop(d->alerting); /* the engine no longer calls its sink */
	profiling_stop(d->prof);
	ingest_stop(d->ingest);
	stop_remotes(d);
	/* Publishers have stopped: the final flush sees every sample. */
	tsdb_close(d->db);
	for (size_t i = 0; i < atomic_load(&d->nremotes); i++)
		remote_write_destroy(d->remotes[i]);
	demo_end(d);
	ingest_destroy(d->ingest);
	selfscrape_destroy(d->scrape);
	attrib_close(d->attrib);   /* after every reader: collector, HTTP, ingest */
	bus_destroy(d->bus);
	api_metrics_destroy(&d->metrics);
	pthread_rwlock_destroy(&d->source_lock);
	pthread_mutex_destroy(&d->self.mode_lock);
	if (d->status.api)
		api_status_destroy(&d->status);
	free(d);
}

int daemon_run(const struct daemon_options *opt, const struct gpulse_config *cfg)
{
	struct daemon *d = daemon_new(opt, cfg);
	if (!d) {
		log_error("out of memory");
		return 1;
	}
	int status = 0;
	for (size_t i = 0; i < sizeof start_steps / sizeof start_steps[0] && !status; i++)
		status = start_steps[i](d);
	if (!status)
		status = serve(d);
	shut_down(d);
	return status;
}
