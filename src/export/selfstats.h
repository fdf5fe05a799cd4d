/* The daemon's own health, kept by the daemon and rendered by the
 * exporters: what mode it runs in, how scrapes and reloads go. Counters are
 * atomics so any thread may bump them. */
#ifndef GPULSE_SELFSTATS_H
#define GPULSE_SELFSTATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <stdint.h>

#include "attrib/attrib.h"
#include "common/buf.h"
#include "common/metric.h"
#include "attrib/tenants.h"

#define SELF_HTTP_SHED_REASONS 4
#define SELF_HTTP_DENY_REASONS 5

enum daemon_mode { MODE_NVML, MODE_REPLAY, MODE_NONE };

/* The embedded store's counters as /metrics shows them (gpulse_storage_*).
 * Filled by a callback so the exporter needs nothing of the store. */
struct storage_self_stats {
	uint64_t errors_total;            /* failed flushes and record writes */
	uint64_t samples_appended_total;
	uint64_t samples_dropped_total;   /* out of order or over the head bound */
	uint64_t series;
	uint64_t head_bytes;
	uint64_t db_bytes;
	uint64_t corrupt_chunks_total;    /* damaged chunks skipped by reads */
	bool open;                        /* the store is open (else the rest is 0) */
	bool available;                   /* open and writable */
	uint64_t samples_out_of_order_total; /* taken though older than their series' newest */
	uint64_t clock_steps_total;       /* wall-clock steps the store saw */
	uint64_t file_lost_total;         /* its file, -wal or -shm deleted or replaced */
	uint64_t open_attempts_total;     /* tries to open it, the first included */
	uint64_t open_failures_total;
	/* The store's scrape of /metrics (src/daemon/selfscrape.h). */
	uint64_t self_scrape_series;
	uint64_t self_scrape_samples_total;
	uint64_t self_scrape_refused_total;
};
typedef void storage_stats_fn(void *ctx, struct storage_self_stats *out);

/* One recording-rule group's counters (gpulse_rule_*), filled by a
 * callback like the store's. `name` is Prometheus's rule_group label:
 * "FILE;GROUP". */
#define RULE_STATS_MAX 1024 /* groups shown on /metrics */
struct rule_group_self_stats {
	char name[1400];
	double last_duration_s;
	uint64_t evaluations_total;
	uint64_t failures_total;
};
/* Fill up to `max` entries; return how many were filled. */
typedef size_t rule_stats_fn(void *ctx, struct rule_group_self_stats *out, size_t max);

/* The anomaly detector's current scores of the GPU with this UUID
 * (gpulse_anomaly_score{metric}): scores[n] in anomaly.h's watch order,
 * NaN where there is none. 0 when the GPU is known. */
typedef int anomaly_scores_fn(void *ctx, const char *uuid, double *scores, size_t n);

/* More families of a /metrics rendering, emitted to its sink
 * (common/metric.h). */
typedef void profile_metrics_fn(void *ctx, struct metric_sink *s);

/* Alert delivery's counters (gpulse_notifications_*), filled by a
 * callback like the store's: notify.h's struct notify_stats. */
struct notify_stats;
typedef void notify_stats_fn(void *ctx, struct notify_stats *out);

/* The rule engine's alerts (gpulse_alerts{state}, gpulse_alert_*),
 * filled by a callback like the store's. */
struct rule_alert_self_stats {
	uint64_t pending;
	uint64_t firing;
	uint64_t held;                  /* firing, held by flap detection */
	uint64_t notifications_total;   /* notices handed to delivery */
	uint64_t flaps_held_total;
	uint64_t restored_total;        /* restored from the store at start */
	uint64_t persist_errors_total;
};
typedef void rule_alert_stats_fn(void *ctx, struct rule_alert_self_stats *out);

/* The query API's counters (gpulse_queries_*), filled by a callback like
 * the store's (src/api/query.h says what each counts). */
struct query_self_stats {
	uint64_t running;
	uint64_t queued;
	uint64_t started_total;
	uint64_t rejected_total;
	uint64_t timed_out_total;
	uint64_t cancelled_total;
};
typedef void query_stats_fn(void *ctx, struct query_self_stats *out);

struct self_stats {
	int64_t start_wall_ns;
	/* A source starting (replay, NVML found later) changes these while
	 * HTTP threads read them: under mode_lock, through the two helpers
	 * below (the main thread, their only writer, may read them bare). */
	pthread_mutex_t mode_lock;
	enum daemon_mode mode;
	char mode_detail[256];   /* why there is no NVML, or the replay file */
	double replay_speed;
	atomic_uint_fast64_t scrapes_total;
	atomic_uint_fast64_t last_scrape_ns;         /* render time of the last /metrics */
	atomic_uint_fast64_t http_requests_total;
	atomic_uint_fast64_t http_rejected_total;    /* over a limit or refused */
	/* Connections the HTTP server shed, in enum http_shed's order:
	 * head timeout, evicted, per address, busy. */
	atomic_uint_fast64_t http_shed_total[SELF_HTTP_SHED_REASONS];
	/* Requests the security checks refused, in enum http_denial's order:
	 * unauthorized, forbidden, client certificate, rate limited, login
	 * limited. */
	atomic_uint_fast64_t http_denied_total[SELF_HTTP_DENY_REASONS];
	atomic_uint_fast64_t reloads_ok_total;
	atomic_uint_fast64_t reloads_failed_total;
	atomic_int last_reload_ok;                   /* 1 or 0 */
	atomic_int_fast64_t last_reload_wall_ns;     /* written by reload, read by /metrics */
	/* Set while storage is on (NULL: the gpulse_storage_* families are
	 * left out). Set before the HTTP server starts; read-only after. */
	storage_stats_fn *storage_stats;
	void *storage_ctx;
	/* Set while recording rules run (NULL: no gpulse_rule_* families);
	 * set before the HTTP server starts. */
	rule_stats_fn *rule_stats;
	void *rule_ctx;
	/* Set while rules run (NULL: no gpulse_alerts / gpulse_alert_*
	 * families); set before the HTTP server starts. */
	rule_alert_stats_fn *rule_alert_stats;
	void *rule_alert_ctx;
	/* Set while alert delivery runs (NULL: no gpulse_notifications_*);
	 * set before the HTTP server starts. */
	notify_stats_fn *notify_stats;
	void *notify_ctx;
	/* Set while the anomaly detector runs (NULL: no gpulse_anomaly_*);
	 * anomaly_ctx is its struct anomaly (anomaly.h), whose counters are
	 * shown too. Set before the HTTP server starts. */
	anomaly_scores_fn *anomaly_scores;
	void *anomaly_ctx;
	/* Set while profiling is configured (src/daemon/profiling.c): appends
	 * the gpulse_process_*, gpulse_inject_* and gpulse_profile_* families.
	 * Set before the HTTP server starts. */
	profile_metrics_fn *profile_metrics;
	void *profile_ctx;
	/* The query API's (NULL: no gpulse_queries_* families); set before
	 * the HTTP server starts. */
	query_stats_fn *query_stats;
	void *query_ctx;
	/* Attribution (src/attrib/attrib.h), for its counters and the
	 * pod-resources allocations (NULL: left out). Set before the HTTP
	 * server starts. */
	struct attrib *attrib;
	struct tenants *tenants;    /* activity per process on shared GPUs; NULL: none */
};

/* Set the source's mode, its detail and the replay speed together. */
static inline void self_stats_set_mode(struct self_stats *s, enum daemon_mode mode,
				       const char *detail, double replay_speed)
{
	pthread_mutex_lock(&s->mode_lock);
	s->mode = mode;
	/* A long reason is cut, on purpose: it becomes a label value. */
	size_t n = detail ? strnlen(detail, sizeof s->mode_detail - 1) : 0;
	memcpy(s->mode_detail, detail ? detail : "", n);
	s->mode_detail[n] = '\0';
	s->replay_speed = replay_speed;
	pthread_mutex_unlock(&s->mode_lock);
}

/* A consistent copy of them, from any thread. */
static inline enum daemon_mode self_stats_get_mode(const struct self_stats *s, char *detail,
						   size_t detail_len, double *replay_speed)
{
	pthread_mutex_t *lock = (pthread_mutex_t *)(uintptr_t)&s->mode_lock;
	pthread_mutex_lock(lock);
	enum daemon_mode mode = s->mode;
	if (detail && detail_len)
		snprintf(detail, detail_len, "%s", s->mode_detail);
	if (replay_speed)
		*replay_speed = s->replay_speed;
	pthread_mutex_unlock(lock);
	return mode;
}

#endif
