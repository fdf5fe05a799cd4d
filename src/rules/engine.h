/* The rule engine of gpulsed: a thread that evaluates each group of the
 * loaded rule files every group interval, at times aligned to that
 * interval, over the embedded store (tsdb.h) through the PromQL
 * evaluator. A recording rule's result is appended to the store under its
 * `record` name, so later rules of the group (and queries) read it; a
 * series a rule stops producing gets Prometheus's staleness marker. An
 * alerting rule drives its alerts' state machine (alert_state.h), writes the
 * ALERTS and ALERTS_FOR_STATE series, persists every alert in the store's
 * records (kind "alert") so a restart restores them, and after each group
 * evaluation hands the alerts due for sending to the alert sink
 * (alert/notice.h) as Prometheus does. Without a store it runs alerting
 * rules only, over another storage interface (queryable.h), their alerts
 * held in memory alone. Below the daemon: it takes the parsed files, a
 * store, a sink and a clock, and knows nothing of the configuration file.
 * docs/internals/rules.md describes it. */
#ifndef GPULSE_RULES_ENGINE_H
#define GPULSE_RULES_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "alert/notice.h"
#include "rules/rules_file.h"
#include "store/tsdb.h"

#define RULES_ENGINE_NAME_MAX 1400 /* bytes of "FILE;GROUP" in stats */

struct rules_engine;

/* Wall-clock time in milliseconds since the Unix epoch. */
typedef int64_t rules_clock_fn(void *ctx);

struct rules_engine_config {
	struct tsdb *db;                  /* must outlive the engine; NULL: no store */
	/* Without a store (db NULL) the rules read through this interface
	 * instead (ctx must outlive the engine), and then: a recording rule
	 * fails (its series have nowhere to go), alerts are neither persisted
	 * nor restored, and no ALERTS or ALERTS_FOR_STATE series are written
	 * (so no rule can read them). Ignored with a store. */
	const struct promql_queryable *queryable;
	void *queryable_ctx;
	int64_t default_interval_ms;      /* for groups without `interval`; 0: 60000 */
	rules_clock_fn *now_ms;           /* NULL: the wall clock */
	void *clock_ctx;
	/* A group due at t is evaluated at t once the clock passes t + this,
	 * so samples stamped up to t that reach the store a little late are
	 * in (Prometheus's query_offset, for the same reason). It adds to
	 * alert latency. 0: 1000; < 0: none. */
	int64_t eval_delay_ms;
	/* Alerts: where they go after each group evaluation (NULL: nowhere,
	 * the alerts are still evaluated, stored and shown). */
	alert_sink_fn *alert_sink;
	void *alert_sink_ctx;
	int64_t resend_delay_ms;          /* firing alerts resent this often; 0: 60000 */
	int64_t for_grace_period_ms;      /* Prometheus's for-grace-period at restore; 0: 10 min */
	int flap_max_toggles;             /* more toggles in the window: held; 0: 4; < 0: off */
	int64_t flap_window_ms;           /* 0: 10 min */
	const struct label *external_labels; /* $externalLabels; copied */
	size_t nexternal_labels;
	const char *external_url;         /* $externalURL and generator URLs; NULL: none; copied */
	bool ext_in_template_labels;      /* alert_opts.ext_in_template_labels */
};

/* The engine's alert counters (gpulse_alerts, gpulse_alert_*). */
struct rules_alert_stats {
	uint64_t pending;                 /* alerts pending now */
	uint64_t firing;                  /* alerts firing now (held ones included) */
	uint64_t held;                    /* of those, held firing by flap detection */
	uint64_t notifications_total;     /* alert notices handed to the sink */
	uint64_t flaps_held_total;        /* times flap detection held an alert */
	uint64_t restored_total;          /* alerts restored from the store at start */
	uint64_t persist_errors_total;    /* alert records that could not be written */
};

/* Counters of one group as /metrics shows them. */
struct rules_group_stats {
	char name[RULES_ENGINE_NAME_MAX]; /* "FILE;GROUP", Prometheus's rule_group */
	double last_duration_s;
	uint64_t evaluations_total;       /* rule evaluations */
	uint64_t failures_total;          /* rule evaluations that failed */
};

/* A new engine over `files[nfiles]`, which it takes, the array included
 * (a malloc'ed array as rules_files_load makes; freed with
 * rules_files_free with the engine or when replaced). 0 or GPULSE_ENOMEM
 * (the files are then freed). Free with rules_engine_free. */
int rules_engine_new(struct rules_engine **out, const struct rules_engine_config *c,
		     struct rules_file **files, size_t nfiles);

/* Stop the thread if running and free everything. Accepts NULL. */
void rules_engine_free(struct rules_engine *e);

/* Start / stop the evaluation thread. Start: 0, GPULSE_ESTATE (running),
 * GPULSE_ENOMEM. Stop is safe when not running. */
int rules_engine_start(struct rules_engine *e);
/* Use `db` from now on (created without a store: one that opened late,
 * after a full disk at start). Any thread; set once; `db` must outlive
 * the engine. From the next evaluation the rules read the store instead
 * of the queryable (which holds more history, but no recorded series),
 * recording rules write their series, alerts write ALERTS and
 * ALERTS_FOR_STATE and are persisted; nothing is restored (the engine's
 * alerts carry on from memory). */
void rules_engine_set_store(struct rules_engine *e, struct tsdb *db);
void rules_engine_stop(struct rules_engine *e);

/* Replace the rules (SIGHUP) with `files[nfiles]`, taken as by
 * rules_engine_new. Series of the old rules are not marked stale. 0 or
 * GPULSE_ENOMEM (the old rules stay; the new files are freed). */
int rules_engine_replace(struct rules_engine *e, struct rules_file **files, size_t nfiles);

/* Groups over all files. */
size_t rules_engine_group_count(struct rules_engine *e);

/* Evaluate group `gi` (in file order) at t_ms now, on the caller's thread
 * (tests; the thread does the same). 0, GPULSE_ENOENT for no such group,
 * or the first failing rule's status (later rules still ran). */
int rules_engine_eval_group(struct rules_engine *e, size_t gi, int64_t t_ms);

/* Copy up to `max` groups' counters into out; returns how many groups
 * there are (may exceed max). */
size_t rules_engine_stats(struct rules_engine *e, struct rules_group_stats *out, size_t max);

/* Which rules /api/v1/rules lists (Prometheus's type=, rule_name[],
 * rule_group[] and file[]): a rule is listed when its kind is asked for
 * and, for each non-empty list, its name, its group's name and its
 * group's file are in it. */
struct rules_filter {
	bool alerting, recording;
	const char *const *names;
	size_t nnames;
	const char *const *groups;
	size_t ngroups;
	const char *const *files;
	size_t nfiles;
};

/* Append Prometheus's /api/v1/rules `groups` array ("[...]"), alerting
 * rules with their state, health, lastError and alerts; with `f`, only
 * the rules it selects, and only groups left with a rule (as Prometheus
 * leaves out a group whose rules were all filtered out). f NULL: all.
 * 0 or the buf's error. */
int rules_engine_write_json(struct rules_engine *e, const struct rules_filter *f, struct buf *b);

/* Append Prometheus's /api/v1/alerts `alerts` array: every pending and
 * firing alert ("[...]"). 0 or GPULSE_ELIMIT. */
int rules_engine_write_alerts_json(struct rules_engine *e, struct buf *b);

void rules_engine_alert_stats(struct rules_engine *e, struct rules_alert_stats *out);

/* Load every path in paths[n]; on success *out is a new array of n files
 * (free with rules_files_free). On failure errs gets the FILE:LINE:COL
 * lines and the first status is returned. */
int rules_files_load(const char *const *paths, size_t n, struct rules_file ***out,
		     struct buf *errs);
/* Free an array from rules_files_load. Accepts NULL. */
void rules_files_free(struct rules_file **files, size_t n);

#endif
