/* A closer look on trouble: evidence for alerts and anomalies; see
 * evidence.h for the model. */
#include "daemon/evidence.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anomaly/anomaly.h"
#include "common/clock.h"
#include "daemon/config.h"
#include "daemon/evidence_files.h"
#include "diagnose/diagnose_json.h"
#include "diagnose/live.h"
#include "common/log.h"
#include "common/mono_cond.h"
#include "daemon/profiling.h"
#include "common/status.h"
#include "common/str.h"

#define HOUR_NS (3600LL * NS_PER_SEC)
#define LINKS_MAX 256          /* alerts remembered with the evidence they link */
#define ANNOTATION "evidence"
#define NOTICE_BATCH 16        /* notices annotated per forward */

/* The rule pack's (deploy/rules/gpulse.rules.yml) performance and health
 * alerts: a GPU that is slow, limited or failing while still answering.
 * Left out: the GPU gone or silent (nothing to read closer), capacity
 * notes (utilization high or low) and warnings that come before a
 * listed one (memory high before critical, a remap pending). */
static const char *const default_alerts[] = {
	"GPUThermalSlowdown", "GPUHardwareSlowdown", "GPUPowerCapped", "GPUMemoryCritical",
	"GPUAnomaly", "GPUUtilizationBelowLastWeek", "GPUTemperatureAboveBaseline",
	"GPUPowerAboveBaseline", "GPUBenchRegression",
	"GPUXidMemoryError", "GPUXidHardwareError", "GPUXidApplicationFault", "GPUXidError",
	"GPUEccUncorrectable", "GPURowRemapFailed", "GPUPCIeReplaysGrowing", "GPUPCIeLinkDegraded",
};
#define NDEFAULT ((int)(sizeof default_alerts / sizeof default_alerts[0]))

enum rec_state { REC_PENDING, REC_READY };
enum store_op { OP_WRITE, OP_REMOVE, OP_LOAD };
static const char *const store_op_name[] = {"write", "remove", "load"};

struct record {
	char id[40];
	int slot, gpu;
	char cause[16];              /* "alert", "anomaly" */
	char detail[EVIDENCE_NAME_LEN];
	int64_t created_mono_ns, created_wall_ms, ready_wall_ms;
	enum rec_state state;
	char *json;                  /* READY: the document; malloc'd */
	size_t bytes;
	bool saved;                  /* its file is in cfg.dir */
	bool dirty;                  /* saved, but links were added since */
	struct evidence_file_link links[EVIDENCE_FILE_LINKS]; /* the alerts that carry its URL */
	unsigned nlinks;
};

struct link {
	uint64_t fingerprint;
	int64_t starts_at_ms;
	char id[40];                 /* "" : the budget refused */
	char why[160];               /* the annotation when refused */
};

struct evidence {
	struct evidence_config cfg;
	struct bus *bus;
	alert_sink_fn *next;
	void *next_ctx;
	struct evidence_sources src;
	pthread_mutex_t lock;
	struct mono_cond cond;
	pthread_t worker;
	bool running, stopping;
	struct record *rec;          /* cfg.max_records, oldest first */
	size_t nrec, bytes;
	struct link links[LINKS_MAX];
	size_t nlinks_next;
	/* Budgets: the times of the triggers of the last hour, per GPU and
	 * in all (rings). */
	int64_t gpu_times[GPU_MAX][64];
	unsigned gpu_ntimes[GPU_MAX];
	int64_t *all_times;
	unsigned all_cap;
	uint64_t seq;
	int64_t anomaly_quiet_until[GPU_MAX]; /* monotonic: no new trigger for it before */
	struct complaint budget_complaint;
	/* The directory's state: a failure leaves records unsaved (served
	 * from memory), said once per back-off and tried again at
	 * store_retry_at. */
	bool store_ok;
	char store_err[600];
	int64_t store_retry_at;
	struct complaint store_complaint;
	_Atomic uint64_t store_errors[3];     /* enum store_op */
	_Atomic uint64_t taken_alert, taken_anomaly, budget_hits[GPU_MAX], captures_taken,
		captures_skipped, captures_failed, dropped;
};

void evidence_config_defaults(struct evidence_config *c)
{
	memset(c, 0, sizeof *c);
	c->enabled = true;
	for (int i = 0; i < NDEFAULT; i++)
		str_copy(c->alerts[i], sizeof c->alerts[i], default_alerts[i]);
	c->anomaly_score = 6;
	c->raise_ns = 120 * NS_PER_SEC;
	c->settle_ns = 5 * NS_PER_SEC;
	c->capture_seconds = 3;
	c->per_gpu_per_hour = 4;
	c->per_hour = 16;
	c->max_records = 64;
	c->max_bytes = 32u << 20;
	c->retention_ns = 7LL * 86400 * NS_PER_SEC;
	c->retry_ns = EVIDENCE_RETRY_NS;
}

void evidence_config_into(struct gpulse_config *c)
{
	struct evidence_config d;
	evidence_config_defaults(&d);
	c->evidence.enabled = d.enabled;
	memset(c->evidence.alerts, 0, sizeof c->evidence.alerts);
	for (int i = 0; i < NDEFAULT; i++)
		str_copy(c->evidence.alerts[i], sizeof c->evidence.alerts[i], default_alerts[i]);
	c->evidence.anomaly_score = d.anomaly_score;
	c->evidence.raise_for_ns = d.raise_ns;
	c->evidence.settle_ns = d.settle_ns;
	c->evidence.capture_seconds = d.capture_seconds;
	c->evidence.per_gpu_per_hour = d.per_gpu_per_hour;
	c->evidence.per_hour = d.per_hour;
	c->evidence.max_records = (unsigned)d.max_records;
	c->evidence.max_bytes_mib = (unsigned)(d.max_bytes >> 20);
	c->evidence.retention_ns = d.retention_ns;
}

void config_to_evidence(const struct gpulse_config *c, struct evidence_config *out)
{
	evidence_config_defaults(out);
	out->enabled = c->evidence.enabled;
	memset(out->alerts, 0, sizeof out->alerts);
	_Static_assert(sizeof c->evidence.alerts[0] <= sizeof out->alerts[0], "names fit");
	for (size_t i = 0; i < EVIDENCE_MAX_ALERTS && i < sizeof c->evidence.alerts /
		     sizeof c->evidence.alerts[0] && c->evidence.alerts[i][0]; i++)
		str_copy(out->alerts[i], sizeof out->alerts[i], c->evidence.alerts[i]);
	out->anomaly_score = c->evidence.anomaly_score;
	out->raise_ns = c->evidence.raise_for_ns;
	out->settle_ns = c->evidence.settle_ns;
	out->capture_seconds = c->evidence.capture_seconds;
	out->per_gpu_per_hour = c->evidence.per_gpu_per_hour;
	out->per_hour = c->evidence.per_hour;
	out->max_records = c->evidence.max_records;
	out->max_bytes = (size_t)c->evidence.max_bytes_mib << 20;
	out->retention_ns = c->evidence.retention_ns;
	str_copy(out->url_base, sizeof out->url_base, c->alerting.external_url);
	size_t n = strlen(out->url_base);
	while (n > 0 && out->url_base[n - 1] == '/')
		out->url_base[--n] = '\0';
	_Static_assert(sizeof out->dir >= sizeof c->storage.path + sizeof ".evidence", "dir fits");
	if (c->evidence.path[0])
		str_copy(out->dir, sizeof out->dir, c->evidence.path);
	else if (c->storage.path[0])
		snprintf(out->dir, sizeof out->dir, "%s.evidence", c->storage.path);
	out->retry_ns = c->storage.retry_interval_ns;
}

int evidence_create(struct evidence **out, const struct evidence_config *c, struct bus *bus,
		    alert_sink_fn *next, void *next_ctx)
{
	struct evidence *e = calloc(1, sizeof *e);
	if (!e)
		return GPULSE_ENOMEM;
	e->cfg = *c;
	if (e->cfg.max_records < 1)
		e->cfg.max_records = 1;
	if (e->cfg.max_records > EVIDENCE_MAX_RECORDS)
		e->cfg.max_records = EVIDENCE_MAX_RECORDS;
	e->all_cap = c->per_hour ? c->per_hour : 1;
	e->rec = calloc(e->cfg.max_records, sizeof *e->rec);
	e->all_times = calloc(e->all_cap, sizeof *e->all_times);
	if (!e->rec || !e->all_times) {
		free(e->rec);
		free(e->all_times);
		free(e);
		return GPULSE_ENOMEM;
	}
	e->bus = bus;
	e->store_ok = true;
	e->next = next;
	e->next_ctx = next_ctx;
	pthread_mutex_init(&e->lock, NULL);
	mono_cond_init(&e->cond);
	*out = e;
	return GPULSE_OK;
}

/* ---- records ---------------------------------------------------------- */

/* The directory failed at `op`: said (once per back-off), counted, and
 * tried again in cfg.retry_ns. Called with the lock held. */
static void store_failed(struct evidence *e, enum store_op op, const char *why)
{
	atomic_fetch_add(&e->store_errors[op], 1);
	e->store_ok = false;
	str_copy(e->store_err, sizeof e->store_err, why);
	e->store_retry_at = clock_mono_ns() + e->cfg.retry_ns;
	complain(&e->store_complaint, "evidence.path: %s; evidence is held in memory only until it "
		 "can be written (gpulse_evidence_store_available 0), tried again every %g s", why,
		 (double)e->cfg.retry_ns / NS_PER_SEC);
}

/* Called with the lock held. */
static void store_worked(struct evidence *e)
{
	if (e->store_ok)
		return;
	e->store_ok = true;
	e->store_err[0] = '\0';
	complaint_clear(&e->store_complaint, "evidence.path: %s can be written again", e->cfg.dir);
}

static void drop_record(struct evidence *e, size_t i)
{
	if (e->cfg.dir[0] && e->rec[i].saved) {
		char why[600];
		if (evidence_file_remove(e->cfg.dir, e->rec[i].id, why, sizeof why) != 0)
			store_failed(e, OP_REMOVE, why);
	}
	e->bytes -= e->rec[i].bytes;
	free(e->rec[i].json);
	memmove(&e->rec[i], &e->rec[i + 1], (e->nrec - i - 1) * sizeof e->rec[0]);
	e->nrec--;
	atomic_fetch_add(&e->dropped, 1);
}

/* Drop what is past retention, then the oldest finished records while
 * over the count or the bytes. Pending ones stay (the worker fills them).
 * Called with the lock held. */
static void prune(struct evidence *e, int64_t now_mono)
{
	for (size_t i = 0; i < e->nrec;) {
		if (e->rec[i].state == REC_READY &&
		    now_mono - e->rec[i].created_mono_ns > e->cfg.retention_ns)
			drop_record(e, i);
		else
			i++;
	}
	while (e->nrec > 0 && (e->nrec >= e->cfg.max_records || e->bytes > e->cfg.max_bytes)) {
		size_t i = 0;
		while (i < e->nrec && e->rec[i].state != REC_READY)
			i++;
		if (i == e->nrec)
			break;
		drop_record(e, i);
	}
}

static struct record *find(struct evidence *e, const char *id)
{
	for (size_t i = 0; i < e->nrec; i++)
		if (strcmp(e->rec[i].id, id) == 0)
			return &e->rec[i];
	return NULL;
}

/* Count the triggers of the last hour in a ring of `cap` times. */
static unsigned in_last_hour(const int64_t *times, unsigned cap, int64_t now)
{
	unsigned n = 0;
	for (unsigned i = 0; i < cap; i++)
		n += times[i] != 0 && now - times[i] < HOUR_NS;
	return n;
}

/* Count a trigger of GPU g at monotonic time t against the budgets.
 * Called with the lock held. */
static void budget_note(struct evidence *e, int g, int64_t t)
{
	unsigned cap_gpu = sizeof e->gpu_times[0] / sizeof e->gpu_times[0][0];
	e->gpu_times[g][e->gpu_ntimes[g]++ % cap_gpu] = t;
	/* The oldest entry of the ring is the one to replace. */
	unsigned oldest = 0;
	for (unsigned i = 1; i < e->all_cap; i++)
		if (e->all_times[i] < e->all_times[oldest])
			oldest = i;
	e->all_times[oldest] = t;
}

/* The budget's verdict for GPU `gpu` now; on yes, the trigger is
 * counted. Called with the lock held. */
static bool budget_take(struct evidence *e, int gpu, int64_t now, char *why, size_t whylen)
{
	unsigned cap_gpu = sizeof e->gpu_times[0] / sizeof e->gpu_times[0][0];
	unsigned per_gpu = e->cfg.per_gpu_per_hour < cap_gpu ? e->cfg.per_gpu_per_hour : cap_gpu;
	int g = gpu >= 0 && gpu < GPU_MAX ? gpu : 0;
	if (in_last_hour(e->gpu_times[g], cap_gpu, now) >= per_gpu) {
		snprintf(why, whylen, "none taken: the budget of %u per GPU per hour is spent",
			 e->cfg.per_gpu_per_hour);
		return false;
	}
	if (in_last_hour(e->all_times, e->all_cap, now) >= e->cfg.per_hour) {
		snprintf(why, whylen, "none taken: the budget of %u per hour is spent", e->cfg.per_hour);
		return false;
	}
	budget_note(e, g, now);
	return true;
}

/* The GPU index (the `gpu` label) of bus slot `slot`, or -1; *replay (may
 * be NULL) says whether it is a replayed GPU (gpu_source_label). */
static int gpu_of_slot_src(struct evidence *e, int slot, bool *replay)
{
	struct gpu_snapshot *s = malloc(sizeof *s);
	int gpu = -1;
	if (s && bus_read(e->bus, slot, s) == GPULSE_OK) {
		gpu = s->id.index;
		if (replay)
			*replay = gpu_source_label(&s->id) != NULL;
	}
	free(s);
	return gpu;
}

static int gpu_of_slot(struct evidence *e, int slot)
{
	return gpu_of_slot_src(e, slot, NULL);
}

static int slot_of_gpu(struct evidence *e, int gpu)
{
	int n = bus_gpu_count(e->bus);
	for (int slot = 0; slot < n; slot++)
		if (gpu_of_slot(e, slot) == gpu)
			return slot;
	return -1;
}

/* A pending record for `slot` made at most raise_ns ago, which a new
 * trigger joins rather than spending budget (the GPU is raised already
 * and its window will be diagnosed). Called with the lock held. */
static struct record *recent_for(struct evidence *e, int slot, int64_t now)
{
	for (size_t i = e->nrec; i-- > 0;)
		if (e->rec[i].slot == slot && now - e->rec[i].created_mono_ns < e->cfg.raise_ns)
			return &e->rec[i];
	return NULL;
}

/* Called with the lock held. */
static int trigger_locked(struct evidence *e, int slot, const char *cause, const char *detail,
			  char *id, size_t idlen, char *why, size_t whylen)
{
	if (id && idlen)
		id[0] = '\0';
	if (!e->cfg.enabled || !e->running || e->stopping)
		return GPULSE_ESTATE;
	int64_t now = clock_mono_ns();
	struct record *r = recent_for(e, slot, now);
	if (r) {
		if (id)
			str_copy(id, idlen, r->id);
		return GPULSE_OK;
	}
	int gpu = gpu_of_slot(e, slot);
	if (gpu < 0)
		return GPULSE_ENOENT;
	prune(e, now);
	if (e->nrec >= e->cfg.max_records) {
		snprintf(why, whylen, "none taken: %zu pieces of evidence are still being gathered",
			 e->nrec);
		return GPULSE_ELIMIT;
	}
	if (!budget_take(e, gpu, now, why, whylen)) {
		atomic_fetch_add(&e->budget_hits[gpu < GPU_MAX ? gpu : 0], 1);
		complain(&e->budget_complaint, "evidence for GPU %d (%s %s): %s", gpu, cause, detail, why);
		return GPULSE_ELIMIT;
	}
	r = &e->rec[e->nrec++];
	memset(r, 0, sizeof *r);
	r->slot = slot;
	r->gpu = gpu;
	r->created_mono_ns = now;
	r->created_wall_ms = clock_wall_ns() / NS_PER_MS;
	r->state = REC_PENDING;
	str_copy(r->cause, sizeof r->cause, cause);
	str_copy(r->detail, sizeof r->detail, detail);
	snprintf(r->id, sizeof r->id, "%" PRId64 "-%d-%" PRIu64, r->created_wall_ms, gpu, ++e->seq);
	if (id)
		str_copy(id, idlen, r->id);
	atomic_fetch_add(strcmp(cause, "alert") == 0 ? &e->taken_alert : &e->taken_anomaly, 1);
	log_info("evidence %s: GPU %d, %s %s: reads raised for %.0f s, gathering", r->id, gpu,
		 cause, detail, (double)e->cfg.raise_ns / NS_PER_SEC);
	if (e->src.raise)
		e->src.raise(e->src.raise_ctx, slot, e->cfg.raise_ns);
	mono_cond_signal(&e->cond);
	return GPULSE_OK;
}

int evidence_trigger(struct evidence *e, int slot, const char *cause, const char *detail,
		     char *id, size_t idlen)
{
	char why[160];
	pthread_mutex_lock(&e->lock);
	int rc = trigger_locked(e, slot, cause, detail, id, idlen, why, sizeof why);
	pthread_mutex_unlock(&e->lock);
	return rc;
}

/* ---- the alerts' side ---------------------------------------------------- */

static const char *label_of(const struct alert_notice *n, const char *name)
{
	for (size_t i = 0; i < n->nlabels; i++)
		if (strcmp(n->labels[i].name, name) == 0)
			return n->labels[i].value;
	return NULL;
}

static bool listed(const struct evidence *e, const char *alertname)
{
	for (int i = 0; i < EVIDENCE_MAX_ALERTS && e->cfg.alerts[i][0]; i++)
		if (strcmp(e->cfg.alerts[i], alertname) == 0)
			return true;
	return false;
}

/* The link of a firing alert (its fingerprint and start): found, or made
 * by triggering evidence now. NULL when the alert takes none. Called with
 * the lock held. */
static struct link *link_for(struct evidence *e, const struct alert_notice *n)
{
	const char *name = label_of(n, "alertname");
	const char *gpu_s = label_of(n, "gpu");
	if (n->resolved || !name || !gpu_s || !listed(e, name))
		return NULL;
	for (size_t i = 0; i < LINKS_MAX; i++) {
		struct link *l = &e->links[i];
		if (l->fingerprint == n->fingerprint && l->starts_at_ms == n->starts_at_ms &&
		    (l->id[0] || l->why[0]))
			return l;
	}
	char *end;
	long gpu = strtol(gpu_s, &end, 10);
	if (*end || end == gpu_s || gpu < 0 || gpu >= GPU_MAX)
		return NULL;
	pthread_mutex_unlock(&e->lock);
	int slot = slot_of_gpu(e, (int)gpu);  /* reads the bus: not under our lock */
	pthread_mutex_lock(&e->lock);
	if (slot < 0)
		return NULL;
	struct link *l = &e->links[e->nlinks_next++ % LINKS_MAX];
	memset(l, 0, sizeof *l);
	l->fingerprint = n->fingerprint;
	l->starts_at_ms = n->starts_at_ms;
	int rc = trigger_locked(e, slot, "alert", name, l->id, sizeof l->id, l->why, sizeof l->why);
	if (rc == GPULSE_ESTATE || rc == GPULSE_ENOENT) {
		memset(l, 0, sizeof *l);
		return NULL;
	}
	/* The evidence remembers the alert, in its file too, so that after
	 * a restart this alert links it again rather than taking more. */
	struct record *r = l->id[0] ? find(e, l->id) : NULL;
	if (r && r->nlinks < EVIDENCE_FILE_LINKS) {
		struct evidence_file_link *k = &r->links[r->nlinks++];
		k->fingerprint = n->fingerprint;
		k->starts_at_ms = n->starts_at_ms;
		str_copy(k->alert, sizeof k->alert, name);
		r->dirty = r->saved;
	}
	return l;
}

void evidence_sink(void *ctx, const struct alert_notice *notices, size_t n)
{
	struct evidence *e = ctx;
	if (!e->cfg.enabled) {
		if (e->next)
			e->next(e->next_ctx, notices, n);
		return;
	}
	/* Forwarded in batches, each notice with one more annotation; the
	 * strings live in this frame until the forward returns. */
	struct alert_notice out[NOTICE_BATCH];
	struct label ann[NOTICE_BATCH][32];
	char text[NOTICE_BATCH][700];
	for (size_t base = 0; base < n; base += NOTICE_BATCH) {
		size_t k = n - base < NOTICE_BATCH ? n - base : NOTICE_BATCH;
		pthread_mutex_lock(&e->lock);
		for (size_t i = 0; i < k; i++) {
			const struct alert_notice *in = &notices[base + i];
			out[i] = *in;
			struct link *l = link_for(e, in);
			if (!l || in->nannotations >= 31)
				continue;
			if (l->id[0])
				snprintf(text[i], sizeof text[i], "%s/api/v1/evidence/%s", e->cfg.url_base,
					 l->id);
			else
				snprintf(text[i], sizeof text[i], "%s", l->why);
			if (in->nannotations) /* none: annotations may be NULL */
				memcpy(ann[i], in->annotations, in->nannotations * sizeof ann[i][0]);
			ann[i][in->nannotations] = (struct label){ANNOTATION, text[i]};
			out[i].annotations = ann[i];
			out[i].nannotations = in->nannotations + 1;
		}
		pthread_mutex_unlock(&e->lock);
		if (e->next)
			e->next(e->next_ctx, out, k);
	}
}

/* ---- the worker ------------------------------------------------------------ */

/* The process to capture: of those on the GPU that run the injection
 * library, the one with the largest SM share (the bottleneck's owner),
 * else the largest memory. 0 when none. */
static uint32_t pick_process(struct evidence *e, const struct gpu_snapshot *s, char *why,
			     size_t whylen)
{
	uint32_t best = 0;
	double best_key = -1;
	int nlib = 0;
	for (int i = 0; i < s->nprocs; i++) {
		const struct gpu_process *p = &s->procs[i];
		if (!profiling_has_library(e->src.prof, p->pid))
			continue;
		nlib++;
		double key = p->util_valid ? 1e18 * p->sm_ratio + (double)p->used_bytes
					   : (double)p->used_bytes;
		if (key > best_key) {
			best_key = key;
			best = p->pid;
		}
	}
	if (!best)
		snprintf(why, whylen, s->nprocs ? "no process on the GPU runs the injection library"
						: "no process on the GPU");
	return best;
}

static void put_processes(struct buf *b, struct evidence *e, const struct gpu_snapshot *s)
{
	buf_puts(b, "\"processes\":[");
	for (int i = 0; i < s->nprocs; i++) {
		const struct gpu_process *p = &s->procs[i];
		buf_printf(b, "%s{\"pid\":%u,\"comm\":", i ? "," : "", p->pid);
		buf_put_json_string(b, p->comm);
		if (p->mem_valid)
			buf_printf(b, ",\"used_bytes\":%" PRIu64, p->used_bytes);
		if (p->util_valid) {
			buf_puts(b, ",\"sm_ratio\":");
			buf_put_double(b, p->sm_ratio);
		}
		buf_printf(b, ",\"injected\":%s}",
			   profiling_has_library(e->src.prof, p->pid) ? "true" : "false");
	}
	buf_puts(b, "]");
}

/* Gather the evidence of record `r` (a copy; the lock is not held) into
 * `b`. Runs on the worker. */
static void gather(struct evidence *e, const struct record *r, struct buf *b)
{
	struct gpu_snapshot *s = calloc(1, sizeof *s);
	bool have = s && bus_read(e->bus, r->slot, s) == GPULSE_OK;
	buf_puts(b, "{\"id\":");
	buf_put_json_string(b, r->id);
	buf_printf(b, ",\"gpu\":%d,\"uuid\":", r->gpu);
	buf_put_json_string(b, have ? s->id.uuid : "");
	buf_puts(b, ",\"model\":");
	buf_put_json_string(b, have ? s->id.name : "");
	buf_puts(b, ",\"cause\":");
	buf_put_json_string(b, r->cause);
	buf_puts(b, ",\"detail\":");
	buf_put_json_string(b, r->detail);
	buf_puts(b, ",\"triggered_at\":\"");
	buf_put_rfc3339(b, r->created_wall_ms, false);
	buf_printf(b, "\",\"raised_for_s\":%.0f,", (double)e->cfg.raise_ns / NS_PER_SEC);

	/* The capture first: it records the trouble as it happens. */
	char why[256] = "";
	uint32_t pid = 0;
	if (!e->src.prof || e->cfg.capture_seconds == 0)
		snprintf(why, sizeof why, e->src.prof ? "captures are off (evidence.capture_seconds: 0)"
						      : "profiling is off");
	else if (have)
		pid = pick_process(e, s, why, sizeof why);
	buf_puts(b, "\"capture\":{");
	if (pid) {
		struct buf trace;
		buf_init(&trace, e->cfg.max_bytes / 2);
		char err[256];
		int rc = profiling_capture(e->src.prof, pid, e->cfg.capture_seconds, &trace, err,
					   sizeof err);
		if (rc == GPULSE_OK && !trace.failed) {
			buf_printf(b, "\"pid\":%u,\"seconds\":%u,\"trace\":", pid, e->cfg.capture_seconds);
			buf_append(b, trace.data, trace.len);
			atomic_fetch_add(&e->captures_taken, 1);
		} else {
			buf_printf(b, "\"pid\":%u,\"failed\":", pid);
			buf_put_json_string(b, rc == GPULSE_OK ? "the trace was over half of evidence.max_bytes_mib"
							      : err);
			atomic_fetch_add(&e->captures_failed, 1);
		}
		buf_free(&trace);
	} else {
		buf_puts(b, "\"skipped\":");
		buf_put_json_string(b, why);
		atomic_fetch_add(&e->captures_skipped, 1);
	}
	buf_puts(b, "},");

	/* Then the window, once the raised reads have filled it. */
	int64_t settle_until = r->created_mono_ns + e->cfg.settle_ns;
	pthread_mutex_lock(&e->lock);
	while (!e->stopping && clock_mono_ns() < settle_until)
		mono_cond_wait_until(&e->cond, &e->lock, settle_until);
	pthread_mutex_unlock(&e->lock);
	if (have)
		bus_read(e->bus, r->slot, s);
	if (have)
		put_processes(b, e, s);
	else
		buf_puts(b, "\"processes\":[]");
	buf_puts(b, ",\"diagnosis\":{\"windows\":[");
	if (e->src.diag) {
		struct diag_window *w = NULL;
		size_t nw = 0;
		struct gpu_peaks peaks;
		double window_s = diag_live_window_s(e->src.diag);
		double since = (double)r->created_wall_ms / 1e3 - 2 * window_s;
		if (diag_live_windows(e->src.diag, r->slot, since, 0, &w, &nw, &peaks) == GPULSE_OK) {
			for (size_t i = 0; i < nw; i++) {
				if (i)
					buf_putc(b, ',');
				diag_json_window(b, &w[i]);
			}
		}
		free(w);
	}
	buf_puts(b, "]}");
	int64_t ready_ms = clock_wall_ns() / NS_PER_MS;
	buf_puts(b, ",\"ready_at\":\"");
	buf_put_rfc3339(b, ready_ms, false);
	buf_printf(b, "\",\"gather_seconds\":%.3f}\n", (double)(ready_ms - r->created_wall_ms) / 1e3);
	free(s);
}

/* Trigger for every GPU whose anomaly score is past the threshold (at
 * most once per raise period per GPU). Called with the lock held. */
static void poll_anomaly(struct evidence *e)
{
	if (!e->src.anomaly || e->cfg.anomaly_score <= 0)
		return;
	int n = bus_gpu_count(e->bus);
	int64_t now = clock_mono_ns();
	for (int slot = 0; slot < n && slot < GPU_MAX; slot++) {
		double sc[ANOMALY_WATCH_COUNT];
		if (now < e->anomaly_quiet_until[slot] ||
		    anomaly_scores(e->src.anomaly, slot, sc) != GPULSE_OK)
			continue;
		int worst = -1;
		for (int w = 0; w < ANOMALY_WATCH_COUNT; w++)
			if (!isnan(sc[w]) && sc[w] >= e->cfg.anomaly_score && (worst < 0 || sc[w] > sc[worst]))
				worst = w;
		if (worst < 0)
			continue;
		char detail[EVIDENCE_NAME_LEN], why[160];
		snprintf(detail, sizeof detail, "%s score %.1f",
			 anomaly_watch_name((enum anomaly_watch)worst), sc[worst]);
		e->anomaly_quiet_until[slot] = now + e->cfg.raise_ns;
		trigger_locked(e, slot, "anomaly", detail, NULL, 0, why, sizeof why);
	}
}

/* Write one finished record that has no file yet, or whose links grew,
 * unless the directory failed and is not yet due for another try.
 * true when one was tried. Called with the lock held; drops it while
 * writing. */
static bool save_one(struct evidence *e)
{
	if (!e->cfg.dir[0] || (!e->store_ok && clock_mono_ns() < e->store_retry_at))
		return false;
	struct record *r = NULL;
	for (size_t i = 0; i < e->nrec && !r; i++)
		if (e->rec[i].state == REC_READY && (!e->rec[i].saved || e->rec[i].dirty))
			r = &e->rec[i];
	if (!r)
		return false;
	struct evidence_file_meta m;
	memset(&m, 0, sizeof m);
	str_copy(m.id, sizeof m.id, r->id);
	m.gpu = r->gpu;
	str_copy(m.cause, sizeof m.cause, r->cause);
	str_copy(m.detail, sizeof m.detail, r->detail);
	m.created_ms = r->created_wall_ms;
	m.ready_ms = r->ready_wall_ms;
	memcpy(m.links, r->links, sizeof m.links);
	m.nlinks = r->nlinks;
	char *doc = malloc(r->bytes + 1);
	size_t len = r->bytes;
	char why[600];
	int rc = GPULSE_ENOMEM;
	if (doc) {
		memcpy(doc, r->json, len);
		pthread_mutex_unlock(&e->lock);
		rc = evidence_file_write(e->cfg.dir, &m, doc, len, why, sizeof why);
		pthread_mutex_lock(&e->lock);
		free(doc);
	} else {
		str_errf(why, sizeof why, "%s: out of memory", e->cfg.dir);
	}
	r = find(e, m.id);  /* records may have moved, or gone */
	if (rc != 0) {
		store_failed(e, OP_WRITE, why);
	} else if (!r) {
		if (evidence_file_remove(e->cfg.dir, m.id, why, sizeof why) != 0)
			store_failed(e, OP_REMOVE, why);
	} else {
		store_worked(e);
		r->saved = true;
		r->dirty = r->nlinks != m.nlinks;
	}
	return true;
}

static void *worker_main(void *arg)
{
	struct evidence *e = arg;
	pthread_setname_np(pthread_self(), "gpulse-evidence");
	pthread_mutex_lock(&e->lock);
	while (!e->stopping) {
		poll_anomaly(e);
		if (save_one(e))
			continue;
		struct record *r = NULL;
		for (size_t i = 0; i < e->nrec && !r; i++)
			if (e->rec[i].state == REC_PENDING)
				r = &e->rec[i];
		if (!r) {
			mono_cond_wait_until(&e->cond, &e->lock, clock_mono_ns() + NS_PER_SEC);
			continue;
		}
		struct record copy = *r;
		pthread_mutex_unlock(&e->lock);
		struct buf b;
		buf_init(&b, e->cfg.max_bytes);
		gather(e, &copy, &b);
		pthread_mutex_lock(&e->lock);
		r = find(e, copy.id);  /* records may have moved */
		if (r) {
			if (b.failed) {
				buf_reset(&b);
				buf_printf(&b, "{\"id\":\"%s\",\"gpu\":%d,\"error\":\"over evidence.max_bytes_mib\"}\n",
					   copy.id, copy.gpu);
			}
			r->bytes = b.len;
			r->json = buf_steal(&b);
			r->ready_wall_ms = clock_wall_ns() / NS_PER_MS;
			r->state = REC_READY;
			e->bytes += r->bytes;
			log_info("evidence %s ready (%zu bytes, %.1f s after the trigger)", r->id, r->bytes,
				 (double)(r->ready_wall_ms - r->created_wall_ms) / 1e3);
			prune(e, clock_mono_ns());
		}
		buf_free(&b);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* ---- loading what an earlier gpulsed kept -------------------------------- */

struct loaded {
	struct evidence_file_meta m;
	char *doc;
	size_t len;
};

struct loading {
	struct loaded *v;
	size_t n, cap;
	bool oom;
};

static void load_one(void *ctx, const struct evidence_file_meta *m, char *doc, size_t len)
{
	struct loading *ld = ctx;
	if (ld->n == ld->cap) {
		size_t cap = ld->cap ? 2 * ld->cap : 16;
		struct loaded *v = realloc(ld->v, cap * sizeof *v);
		if (!v) {
			ld->oom = true;
			free(doc);
			return;
		}
		ld->v = v;
		ld->cap = cap;
	}
	ld->v[ld->n++] = (struct loaded){.m = *m, .doc = doc, .len = len};
}

static int by_created(const void *a, const void *b)
{
	const struct loaded *x = a, *y = b;
	if (x->m.created_ms != y->m.created_ms)
		return x->m.created_ms < y->m.created_ms ? -1 : 1;
	return strcmp(x->m.id, y->m.id);
}

/* Read cfg.dir into the records: the newest max_records, with their
 * links and the budget they spent in the last hour; the rest (past
 * retention or the bounds) removed as a running gpulsed would. Before
 * the worker starts. */
static void load_dir(struct evidence *e)
{
	struct loading ld = {0};
	unsigned damaged = 0;
	char why[600];
	int rc = evidence_file_load(e->cfg.dir, e->cfg.max_bytes, load_one, &ld, &damaged, why,
				    sizeof why);
	pthread_mutex_lock(&e->lock);
	if (rc != 0) {
		store_failed(e, OP_LOAD, why);
	} else if (access(e->cfg.dir, W_OK) != 0) {
		/* Readable but not writable (a read-only file system, its
		 * mode): said now, not at the first evidence. */
		str_errf(why, sizeof why, "%s cannot be written: %s", e->cfg.dir, strerror(errno));
		store_failed(e, OP_LOAD, why);
	}
	for (unsigned i = 0; i < damaged; i++)
		atomic_fetch_add(&e->store_errors[OP_LOAD], 1);
	if (ld.oom)
		log_warn("evidence: out of memory while loading %s; some evidence left unread",
			 e->cfg.dir);
	if (ld.n) /* qsort of none: its array may be NULL, which qsort may not take */
		qsort(ld.v, ld.n, sizeof *ld.v, by_created);
	int64_t now_mono = clock_mono_ns(), now_wall_ms = clock_wall_ns() / NS_PER_MS;
	size_t first = ld.n > e->cfg.max_records ? ld.n - e->cfg.max_records : 0;
	size_t kept = 0;
	for (size_t i = 0; i < ld.n; i++) {
		struct loaded *l = &ld.v[i];
		int64_t age_ns = (now_wall_ms - l->m.created_ms) * NS_PER_MS;
		if (i < first || age_ns > e->cfg.retention_ns) {
			if (evidence_file_remove(e->cfg.dir, l->m.id, why, sizeof why) != 0)
				store_failed(e, OP_REMOVE, why);
			atomic_fetch_add(&e->dropped, 1);
			free(l->doc);
			continue;
		}
		struct record *r = &e->rec[e->nrec++];
		memset(r, 0, sizeof *r);
		str_copy(r->id, sizeof r->id, l->m.id);
		r->slot = -1;   /* bus slots are this run's: a new trigger makes new evidence */
		r->gpu = l->m.gpu;
		str_copy(r->cause, sizeof r->cause, l->m.cause);
		str_copy(r->detail, sizeof r->detail, l->m.detail);
		r->created_mono_ns = now_mono - age_ns;
		r->created_wall_ms = l->m.created_ms;
		r->ready_wall_ms = l->m.ready_ms;
		r->state = REC_READY;
		r->json = l->doc;
		r->bytes = l->len;
		r->saved = true;
		memcpy(r->links, l->m.links, sizeof r->links);
		r->nlinks = l->m.nlinks;
		e->bytes += r->bytes;
		kept++;
		for (unsigned k = 0; k < r->nlinks; k++) {
			struct link *lk = &e->links[e->nlinks_next++ % LINKS_MAX];
			memset(lk, 0, sizeof *lk);
			lk->fingerprint = r->links[k].fingerprint;
			lk->starts_at_ms = r->links[k].starts_at_ms;
			str_copy(lk->id, sizeof lk->id, r->id);
		}
		if (age_ns < HOUR_NS && r->gpu < GPU_MAX)
			budget_note(e, r->gpu, r->created_mono_ns);
		/* IDs stay unique across the restart: MS-GPU-SEQ. */
		const char *dash = strrchr(r->id, '-');
		uint64_t seq = dash ? strtoull(dash + 1, NULL, 10) : 0;
		if (seq > e->seq)
			e->seq = seq;
	}
	free(ld.v);
	prune(e, now_mono);
	if (e->store_ok)
		log_info("evidence: keeping evidence in %s (%zu loaded, %zu bytes)", e->cfg.dir, e->nrec,
			 e->bytes);
	else if (kept)
		log_info("evidence: %zu loaded from %s (%zu bytes)", e->nrec, e->cfg.dir, e->bytes);
	pthread_mutex_unlock(&e->lock);
}

int evidence_start(struct evidence *e, const struct evidence_sources *src)
{
	e->src = *src;
	if (!e->cfg.enabled)
		return GPULSE_OK;
	if (e->cfg.dir[0])
		load_dir(e);
	pthread_mutex_lock(&e->lock);
	e->running = true;
	pthread_mutex_unlock(&e->lock);
	if (pthread_create(&e->worker, NULL, worker_main, e) != 0) {
		e->running = false;
		return GPULSE_ENOMEM;
	}
	return GPULSE_OK;
}

void evidence_stop(struct evidence *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	bool was = e->running;
	e->stopping = true;
	mono_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	if (was)
		pthread_join(e->worker, NULL);
	e->running = false;
	/* What was gathered and not yet written (its write failed, or came
	 * due as the worker stopped) gets one more try, so a restart keeps it. */
	pthread_mutex_lock(&e->lock);
	e->store_retry_at = 0;
	while (was && save_one(e))
		;
	pthread_mutex_unlock(&e->lock);
}

void evidence_destroy(struct evidence *e)
{
	if (!e)
		return;
	evidence_stop(e);
	for (size_t i = 0; i < e->nrec; i++)
		free(e->rec[i].json);
	free(e->rec);
	free(e->all_times);
	mono_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

/* ---- HTTP and metrics ---------------------------------------------------- */

static void put_entry(struct evidence *e, struct buf *b, const struct record *r)
{
	buf_puts(b, "{\"id\":");
	buf_put_json_string(b, r->id);
	buf_printf(b, ",\"gpu\":%d,\"cause\":", r->gpu);
	buf_put_json_string(b, r->cause);
	buf_puts(b, ",\"detail\":");
	buf_put_json_string(b, r->detail);
	buf_printf(b, ",\"state\":\"%s\",\"triggered_at\":\"",
		   r->state == REC_READY ? "ready" : "pending");
	buf_put_rfc3339(b, r->created_wall_ms, false);
	buf_printf(b, "\",\"bytes\":%zu,\"url\":\"%s/api/v1/evidence/%s\"", r->bytes, e->cfg.url_base,
		   r->id);
	if (e->cfg.dir[0])
		buf_printf(b, ",\"saved\":%s", r->saved ? "true" : "false");
	if (r->nlinks) {
		buf_puts(b, ",\"alerts\":[");
		for (unsigned i = 0; i < r->nlinks; i++) {
			if (i)
				buf_putc(b, ',');
			buf_put_json_string(b, r->links[i].alert);
		}
		buf_putc(b, ']');
	}
	buf_putc(b, '}');
}

/* Finished records without their file. Called with the lock held. */
static size_t unsaved(const struct evidence *e)
{
	size_t n = 0;
	for (size_t i = 0; e->cfg.dir[0] && i < e->nrec; i++)
		n += e->rec[i].state == REC_READY && !e->rec[i].saved;
	return n;
}

static int handle_list(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)req;
	struct evidence *e = ctx;
	struct buf *b = &resp->body;
	resp->content_type = "application/json";
	buf_puts(b, "{\"status\":\"success\",\"data\":{\"evidence\":[");
	pthread_mutex_lock(&e->lock);
	prune(e, clock_mono_ns());
	for (size_t i = e->nrec; i-- > 0;) {
		put_entry(e, b, &e->rec[i]);
		if (i)
			buf_putc(b, ',');
	}
	buf_printf(b, "],\"enabled\":%s,\"per_gpu_per_hour\":%u,\"per_hour\":%u,\"bytes\":%zu",
		   e->cfg.enabled ? "true" : "false", e->cfg.per_gpu_per_hour, e->cfg.per_hour,
		   e->bytes);
	/* Where it is kept, and whether it can be: evidence that only memory
	 * holds is said here, not passed off as kept. */
	buf_puts(b, ",\"store\":{\"path\":");
	buf_put_json_string(b, e->cfg.dir);
	buf_printf(b, ",\"available\":%s,\"unsaved\":%zu",
		   e->cfg.dir[0] && e->store_ok ? "true" : "false", unsaved(e));
	if (!e->cfg.dir[0]) {
		buf_puts(b, ",\"error\":\"memory only: no storage.path or evidence.path\"");
	} else if (!e->store_ok) {
		buf_puts(b, ",\"error\":");
		buf_put_json_string(b, e->store_err);
	}
	buf_putc(b, '}');
	pthread_mutex_unlock(&e->lock);
	buf_puts(b, ",\"budget_hits\":[");
	for (int g = 0, k = 0; g < GPU_MAX; g++) {
		uint64_t h = atomic_load(&e->budget_hits[g]);
		if (h)
			buf_printf(b, "%s{\"gpu\":%d,\"count\":%" PRIu64 "}", k++ ? "," : "", g, h);
	}
	buf_puts(b, "]}}\n");
	return b->failed ? GPULSE_ELIMIT : 0;
}

static int handle_one(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct evidence *e = ctx;
	const char *id = req->path + strlen("/api/v1/evidence/");
	struct buf *b = &resp->body;
	pthread_mutex_lock(&e->lock);
	struct record *r = find(e, id);
	int rc = 0;
	if (!r) {
		pthread_mutex_unlock(&e->lock);
		return http_api_error(resp, 404, "not_found",
				      "no such evidence (it may have passed its retention or bounds)");
	}
	resp->content_type = "application/json";
	buf_puts(b, "{\"status\":\"success\",\"data\":");
	if (r->state == REC_READY) {
		buf_append(b, r->json, r->bytes);
		buf_puts(b, "}\n");
	} else {
		put_entry(e, b, r);
		buf_puts(b, "}\n");
	}
	pthread_mutex_unlock(&e->lock);
	if (b->failed)
		rc = GPULSE_ELIMIT;
	return rc;
}

int evidence_register(struct evidence *e, struct http_server *s)
{
	int rc = http_route(s, "/api/v1/evidence", handle_list, e);
	return rc ? rc : http_route(s, "/api/v1/evidence/", handle_one, e);
}

#define EV_L0 ((const char *const[]){NULL})
#define EV_L1(a) ((const char *const[]){a, NULL})
static const struct metric_family ev_fam[] = {
#define EV_TAKEN 0
	{"gpulse_evidence_taken_total", METRIC_KIND_COUNTER,
	 "Evidence gathered on trouble, by cause (alert, anomaly).", EV_L1("cause")},
#define EV_CAPTURES 1
	{"gpulse_evidence_captures_total", METRIC_KIND_COUNTER,
	 "Captures of a process for evidence, by result.", EV_L1("result")},
#define EV_BUDGET 2
	{"gpulse_evidence_budget_hits_total", METRIC_KIND_COUNTER,
	 "Triggers refused because a budget (per GPU or in all, per hour) was spent.",
	 (const char *const[]){"gpu", "source", NULL}},
#define EV_STORE_AVAILABLE 3
	{"gpulse_evidence_store_available", METRIC_KIND_GAUGE,
	 "1 while evidence.path can be written, 0 while evidence is held in memory only.",
	 EV_L0},
#define EV_UNSAVED 4
	{"gpulse_evidence_unsaved", METRIC_KIND_GAUGE,
	 "Evidence held in memory only: its file could not be written.", EV_L0},
#define EV_STORE_ERRORS 5
	{"gpulse_evidence_store_errors_total", METRIC_KIND_COUNTER,
	 "Failures of evidence.path, by operation (write, remove, load: a damaged or unreadable "
	 "file, a directory that cannot be read).",
	 EV_L1("op")},
#define EV_DROPPED 6
	{"gpulse_evidence_dropped_total", METRIC_KIND_COUNTER,
	 "Evidence dropped for retention, count or bytes.", EV_L0},
#define EV_RECORDS 7
	{"gpulse_evidence_records", METRIC_KIND_GAUGE, "Evidence held.", EV_L0},
#define EV_BYTES 8
	{"gpulse_evidence_bytes", METRIC_KIND_GAUGE, "Bytes of evidence held.", EV_L0},
};
#undef EV_L0
#undef EV_L1

void evidence_metrics(struct evidence *e, struct metric_sink *s)
{
	if (!e)
		return;
	const struct metric_family *F = ev_fam;
	metric_u64(s, &F[EV_TAKEN], (const char *const[]){"alert"}, atomic_load(&e->taken_alert));
	metric_u64(s, &F[EV_TAKEN], (const char *const[]){"anomaly"},
		   atomic_load(&e->taken_anomaly));
	metric_u64(s, &F[EV_CAPTURES], (const char *const[]){"taken"},
		   atomic_load(&e->captures_taken));
	metric_u64(s, &F[EV_CAPTURES], (const char *const[]){"skipped"},
		   atomic_load(&e->captures_skipped));
	metric_u64(s, &F[EV_CAPTURES], (const char *const[]){"failed"},
		   atomic_load(&e->captures_failed));
	int n = bus_gpu_count(e->bus);
	for (int slot = 0; slot < n && slot < GPU_MAX; slot++) {
		bool replay = false;
		int gpu = gpu_of_slot_src(e, slot, &replay);
		/* A replayed GPU's series say so, as every per-GPU series does
		 * (gpu_source_label). */
		if (gpu >= 0 && gpu < GPU_MAX) {
			char idx[16];
			snprintf(idx, sizeof idx, "%d", gpu);
			metric_u64(s, &F[EV_BUDGET], (const char *const[]){idx, replay ? "replay" : NULL},
				   atomic_load(&e->budget_hits[gpu]));
		}
	}
	pthread_mutex_lock(&e->lock);
	size_t nrec = e->nrec, bytes = e->bytes, nunsaved = unsaved(e);
	bool store_ok = e->store_ok;
	pthread_mutex_unlock(&e->lock);
	if (e->cfg.dir[0]) {
		metric_u64(s, &F[EV_STORE_AVAILABLE], NULL, store_ok ? 1 : 0);
		metric_u64(s, &F[EV_UNSAVED], NULL, nunsaved);
		for (int op = 0; op < 3; op++)
			metric_u64(s, &F[EV_STORE_ERRORS], (const char *const[]){store_op_name[op]},
				   atomic_load(&e->store_errors[op]));
	}
	metric_u64(s, &F[EV_DROPPED], NULL, atomic_load(&e->dropped));
	metric_u64(s, &F[EV_RECORDS], NULL, nrec);
	metric_u64(s, &F[EV_BYTES], NULL, bytes);
}
