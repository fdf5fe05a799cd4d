/* Alert delivery (docs/internals/alerting.md): the sink the rule engine
 * hands its notices to (notice.h), and the threads that send them to
 * Alertmanager's API v2, to webhook URLs (Alertmanager's webhook
 * document) and to an exec hook, with retries, exponential back-off and
 * an on-disk queue.
 *
 * notify_sink never blocks: it copies the notices into a bounded ring
 * (drops counted) and wakes the dispatcher thread. The dispatcher batches
 * notices for every Alertmanager (each gets every batch, as Prometheus
 * sends to all), and groups, de-duplicates and inhibits them for the
 * webhook and exec receivers (group.h). Each receiver has its own FIFO of
 * batches and its own sender thread, so a slow or dead receiver delays no
 * other. A batch that fails is written to the receiver's queue directory
 * (one fsync'd file per batch) and retried with capped exponential
 * back-off; while a receiver has a backlog, new batches are written
 * before they are queued, so a restart loses nothing and keeps the order.
 * The queue is bounded in bytes and batches; over the bound the oldest
 * batch is dropped and counted. */
#ifndef GPULSE_ALERT_NOTIFY_H
#define GPULSE_ALERT_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "alert/notice.h"

#define NOTIFY_MAX_RECEIVERS 32
#define NOTIFY_LATENCY_BUCKETS 14
#define NOTIFY_DEFAULT_RING 10000          /* notices held between sink and dispatcher */
#define NOTIFY_DEFAULT_BATCH 64            /* alerts per Alertmanager request */
#define NOTIFY_DEFAULT_MAX_BYTES (64u << 20)
#define NOTIFY_DEFAULT_MAX_FILES 10000

/* Upper bounds (seconds) of the delivery latency histogram's buckets. */
extern const double notify_latency_bounds[NOTIFY_LATENCY_BUCKETS];

enum notify_kind { NOTIFY_ALERTMANAGER, NOTIFY_WEBHOOK, NOTIFY_EXEC };

struct notify_receiver_config {
	enum notify_kind kind;
	/* Alertmanager: its base URL (".../api/v2/alerts" is added unless
	 * given); webhook: the URL posted to; exec: the program's absolute
	 * path (run without a shell). */
	const char *target;
	const char *const *args;        /* exec: argv[1..] */
	size_t nargs;
	int64_t timeout_ms;             /* per request or run; 0: 10 s */
	const char *bearer_token;       /* HTTP: "Authorization: Bearer"; NULL: none */
};

struct notify_inhibit_config {
	const char *const *source;      /* matcher texts (matcher.h) */
	size_t nsource;
	const char *const *target;
	size_t ntarget;
	const char *const *equal;
	size_t nequal;
};

/* Strings are copied by notify_new / notify_reconfigure. */
struct notify_config {
	const struct notify_receiver_config *receivers;
	size_t nreceivers;
	const struct label *external_labels; /* added where an alert lacks them */
	size_t nexternal_labels;
	const char *external_url;       /* webhook externalURL, default generatorURL; may be NULL */
	const char *queue_dir;          /* NULL or "": no disk queue (memory only) */
	uint64_t queue_max_bytes;       /* 0: NOTIFY_DEFAULT_MAX_BYTES */
	size_t queue_max_files;         /* 0: NOTIFY_DEFAULT_MAX_FILES */
	const char *const *group_by;
	size_t ngroup_by;
	bool group_by_all;
	int64_t group_wait_ms, group_interval_ms, repeat_interval_ms;
	const struct notify_inhibit_config *inhibit;
	size_t ninhibit;
	bool inhibit_alertmanager;      /* also drop inhibited alerts before Alertmanager */
	int64_t backoff_initial_ms;     /* 0: 500 ms */
	int64_t backoff_max_ms;         /* 0: 60 s */
	size_t ring_capacity;           /* 0: NOTIFY_DEFAULT_RING */
	size_t batch_alerts;            /* 0: NOTIFY_DEFAULT_BATCH */
	/* The wall clock that stamps batches, drives grouping and judges
	 * whether a queued firing alert's endsAt has passed when it is sent
	 * (refreshed or left out, docs/internals/alerting.md); zeroed: the
	 * system's. Tests set it to move time without sleeping. */
	struct clock_wall wall;
};

struct notify_receiver_stats {
	enum notify_kind kind;
	char target[512];
	uint64_t sent_total;            /* alerts delivered */
	uint64_t errors_total;          /* alerts in failed attempts */
	uint64_t dropped_total;         /* alerts given up (refused, queue bound) */
	uint64_t pending_batches;
	uint64_t pending_bytes;
	uint64_t latency_bucket[NOTIFY_LATENCY_BUCKETS]; /* not cumulative */
	uint64_t latency_count;
	double latency_sum_s;
};

struct notify_stats {
	uint64_t ring_length, ring_capacity;
	uint64_t ring_dropped_total;    /* notices the sink could not queue */
	uint64_t queue_bytes, queue_batches;     /* all receivers, memory and disk */
	uint64_t queue_max_bytes, queue_max_batches;
	uint64_t disk_errors_total;     /* queue files that could not be written or read */
	uint64_t inhibited_total;
	uint64_t alerts_held;
	uint64_t groups;
	size_t nreceivers;
	struct notify_receiver_stats receivers[NOTIFY_MAX_RECEIVERS];
};

struct notify;

/* Check `c` and start delivery: load every receiver's queue directory and
 * start the threads. 0, GPULSE_EINVAL (a bad matcher, target or bound;
 * reason in `err`), GPULSE_EIO (the queue directory cannot be made) or
 * GPULSE_ENOMEM. Free with notify_free. */
int notify_new(struct notify **out, const struct notify_config *c, char *err, size_t errlen);

/* Stop the threads, write every batch not yet on disk to its queue
 * directory (when there is one) and free everything. Accepts NULL. */
void notify_free(struct notify *n);

/* Apply a new configuration (SIGHUP). Batches of receivers that stay
 * (same kind and target) keep their place; grouping state is kept.
 * On error (as notify_new) the running configuration stays. */
int notify_reconfigure(struct notify *n, const struct notify_config *c, char *err,
		       size_t errlen);

/* The rule engine's alert_sink_fn: `ctx` is the struct notify. */
void notify_sink(void *ctx, const struct alert_notice *notices, size_t n);

/* Wait until the ring is empty and no receiver holds a batch, or
 * `timeout_ms` passes. True when drained (tests, shutdown). */
bool notify_drain(struct notify *n, int64_t timeout_ms);

void notify_get_stats(struct notify *n, struct notify_stats *out);

/* "alertmanager", "webhook", "exec". */
const char *notify_kind_name(enum notify_kind k);

#endif
