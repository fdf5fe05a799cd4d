/* A closer look on trouble (issue 37): when an alert of a chosen set
 * fires, or the anomaly detector scores a GPU past a threshold, gpulsed
 * raises that GPU's reads to their ceiling for a while and gathers
 * evidence: the GPU's processes, the diagnosis of the window around the
 * moment (src/diagnose, on the raised samples), and, when a process on
 * the GPU runs the injection library, a bounded capture of the one that
 * owns the bottleneck (what `gpulse trace` takes, with its lasting-cost
 * warning). Each piece of evidence has an ID, is served at
 * /api/v1/evidence/ID and is linked from the alert: its notices carry
 * the annotation `evidence` with that URL.
 *
 * Bounded: a budget per GPU and per hour (a hit is counted in
 * gpulse_evidence_budget_hits_total and said in the log and in the
 * alert's annotation), at most max_records records and max_bytes bytes
 * held, none older than retention. Kept in files in `dir`
 * (evidence_files.h; default STORAGE_PATH.evidence), loaded again at
 * start, so a restart keeps them, the budgets they spent and the alerts
 * they are linked from. A directory that cannot be written (read-only,
 * full) leaves the evidence in memory and served, counted and said
 * (gpulse_evidence_store_available 0, the list's "store"), and is tried
 * again every retry_ns (storage.retry_interval). `dir` "": memory only.
 *
 * Threads: the sink runs on the rule engine's thread and never blocks
 * (it queues); one worker takes captures and diagnoses, and polls the
 * anomaly scores once a second; HTTP threads read the records. */
#ifndef GPULSE_DAEMON_EVIDENCE_H
#define GPULSE_DAEMON_EVIDENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/bus.h"
#include "common/buf.h"
#include "http/http_server.h"
#include "alert/notice.h"
#include "common/metric.h"

struct anomaly;
struct diag_live;
struct profiling;
struct gpulse_config;

#define EVIDENCE_MAX_ALERTS 64
#define EVIDENCE_NAME_LEN 128
#define EVIDENCE_MAX_RECORDS 1024   /* the most evidence.max_records may say */
#define EVIDENCE_DIR_LEN 1040        /* a configured path and ".evidence" */
#define EVIDENCE_RETRY_NS (10LL * 1000000000LL) /* retry_ns's default */

struct evidence_config {
	bool enabled;
	char alerts[EVIDENCE_MAX_ALERTS][EVIDENCE_NAME_LEN]; /* alert names; "" ends */
	double anomaly_score;       /* a score at or past it triggers; 0: scores do not */
	int64_t raise_ns;           /* how long the GPU's reads stay at the ceiling */
	int64_t settle_ns;          /* from the trigger to the diagnosis of the window */
	unsigned capture_seconds;   /* 0: no capture */
	unsigned per_gpu_per_hour;  /* budgets; 0: none allowed */
	unsigned per_hour;
	size_t max_records;
	size_t max_bytes;
	int64_t retention_ns;
	char url_base[512];         /* prefix of the annotation's URL; "": a path alone */
	char dir[EVIDENCE_DIR_LEN]; /* where the files are kept; "": memory only */
	int64_t retry_ns;           /* a directory that failed, tried again after it */
};

/* The defaults (docs/CONFIG.md, evidence:): on; the rule pack's
 * performance and health alerts; anomaly score 6 (the pack's
 * gpulse:threshold:anomaly_score); raise 2m; settle 5s; capture 3 s;
 * 4 per GPU and 16 in all per hour; 64 records, 32 MiB, 7 days. */
void evidence_config_defaults(struct evidence_config *c);

/* Raise GPU `slot`'s reads to their ceiling for `duration_ns`. 0, or an
 * error when the source cannot (a replay). */
typedef int evidence_raise_fn(void *ctx, int slot, int64_t duration_ns);

struct evidence_sources {
	evidence_raise_fn *raise;
	void *raise_ctx;
	struct diag_live *diag;      /* NULL: no diagnosis in the evidence */
	struct anomaly *anomaly;     /* NULL: scores do not trigger */
	struct profiling *prof;      /* NULL: no captures */
};

struct evidence;

/* Create, forwarding every notice to `next` (the alert delivery's sink)
 * with the evidence annotation added. `bus` must outlive it. 0 or
 * GPULSE_ENOMEM. Nothing runs before evidence_start. */
int evidence_create(struct evidence **out, const struct evidence_config *c, struct bus *bus,
		    alert_sink_fn *next, void *next_ctx);
/* Set the sources, load what cfg.dir holds (what is past retention or
 * the bounds is removed; a directory that cannot be read is said and
 * counted, and evidence is then held in memory until it can be written)
 * and start the worker. 0 or GPULSE_ENOMEM. */
int evidence_start(struct evidence *e, const struct evidence_sources *src);
/* Stop the worker (a capture in flight ends when profiling is
 * interrupted, which the daemon does first); notices are still forwarded
 * afterwards, with no new evidence. Accepts NULL. */
void evidence_stop(struct evidence *e);
/* Accepts NULL. The rule engine must no longer call the sink. */
void evidence_destroy(struct evidence *e);

/* The sink for the rule engine (alert_sink_fn); ctx is the evidence. */
void evidence_sink(void *ctx, const struct alert_notice *notices, size_t n);

/* Trigger evidence for GPU `slot` now, as an alert or a score would
 * (`cause` "alert" or "anomaly", `detail` the alert's name or the
 * score's metric). The ID (or "" when the budget refused) goes to id.
 * 0, GPULSE_ELIMIT (a budget refused: counted), GPULSE_ESTATE (off or
 * stopped). */
int evidence_trigger(struct evidence *e, int slot, const char *cause, const char *detail,
		     char *id, size_t idlen);

/* GET /api/v1/evidence (the list) and /api/v1/evidence/ID. */
int evidence_register(struct evidence *e, struct http_server *s);
/* The gpulse_evidence_* families, to a metric sink (/metrics' text
 * writer or the store's). */
void evidence_metrics(struct evidence *e, struct metric_sink *s);

/* Fill the evidence section of a configuration with the defaults above
 * (config_defaults calls it). */
void evidence_config_into(struct gpulse_config *c);
/* The evidence section of a configuration, as evidence_create takes it
 * (url_base from alerting.external_url; dir from evidence.path, else
 * STORAGE_PATH.evidence, else "" without storage). */
void config_to_evidence(const struct gpulse_config *c, struct evidence_config *out);

#endif
