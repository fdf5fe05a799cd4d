/* Prometheus remote write from gpulsed (issue 18, item 6): every sample
 * the store takes (tsdb_set_append_hook), under the store's names and
 * labels plus the external labels, relabelled by write_relabel_configs,
 * sent as remote-write 1.0 to one receiver through a disk-backed queue
 * (segq.h), with Prometheus's prometheus_remote_storage_* self-metrics.
 *
 * Threads: remote_write_on_append runs on the store's appenders and never
 * blocks on I/O: it puts the sample in a bounded ring (full: dropped and
 * counted). A batcher thread turns the ring into requests and appends
 * them to the queue on disk; a sender thread reads the queue from its
 * committed offset and posts, retrying 5xx, 429 and network errors with
 * back-off, dropping (counted) on other 4xx, as Prometheus does.
 * docs/internals/remote.md has the design. */
#ifndef GPULSE_REMOTE_WRITE_H
#define GPULSE_REMOTE_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "remote/relabel.h"
#include "store/tsdb.h"
#include "common/metric.h"

#define REMOTE_MAX_HEADERS 16
#define REMOTE_MAX_EXTERNAL 16

struct remote_write_opts {
	const char *name;              /* remote_name label; "" or NULL: derived from url */
	const char *url;
	int64_t timeout_ms;            /* remote_timeout; 0: 30 s */
	const char *headers[REMOTE_MAX_HEADERS][2];
	size_t nheaders;
	const char *basic_user, *basic_password;   /* NULL: none */
	const char *auth_type, *auth_credentials;  /* NULL: none; type default "Bearer" */
	const char *ca_file, *cert_file, *key_file;
	const char *server_name;       /* TLS: the name to verify and send as SNI (NULL: the URL's host) */
	bool insecure_skip_verify;
	const struct relabel_spec *relabel;
	size_t nrelabel;
	struct label external[REMOTE_MAX_EXTERNAL];  /* added where a series lacks them */
	size_t nexternal;
	size_t capacity;               /* ring slots; 0: 10000 */
	size_t max_samples_per_send;   /* 0: 2000 */
	int64_t batch_send_deadline_ms;/* 0: 5000 */
	int64_t min_backoff_ms;        /* 0: 30 */
	int64_t max_backoff_ms;        /* 0: 5000 */
	bool retry_on_429;
	bool summary;                  /* mode: summary (rw_summary.h); false: raw */
	int64_t summary_interval_ms;   /* 0: 60000 */
	double summary_quantile;       /* 0: 0.95 */
	double summary_anomaly_threshold; /* 0: 4 */
	const char *queue_dir;         /* required */
	uint64_t queue_max_bytes;      /* 0: 256 MiB */
};

struct remote_write;

/* A writer (threads not started). Copies what it needs of o. 0,
 * GPULSE_EINVAL (a bad relabel rule or URL; err says which), GPULSE_EIO
 * (the queue folder; err), ENOMEM. */
int remote_write_create(struct remote_write **out, const struct remote_write_opts *o, char *err,
			size_t errlen);
/* The store whose series labels the refs name; set before appends reach
 * the writer and kept until it stops. */
void remote_write_set_store(struct remote_write *rw, struct tsdb *db);
/* The store's append hook (tsdb_append_hook_fn); ctx is the writer. */
void remote_write_on_append(void *ctx, uint32_t ref, int64_t t_ms, double v);
/* Start the batcher and sender threads. 0, GPULSE_ESTATE, ENOMEM. */
int remote_write_start(struct remote_write *rw);
/* Stop: what the ring holds goes to the queue on disk first, then the
 * threads end (a send in progress is abandoned; it stays queued). */
void remote_write_stop(struct remote_write *rw);
void remote_write_destroy(struct remote_write *rw);  /* stops; accepts NULL */

/* The prometheus_remote_storage_* and gpulse_remote_write_* families of
 * the n writers, to a metric sink (/metrics' text writer or the
 * store's). */
void remote_write_metrics(struct remote_write *const *rws, size_t n, struct metric_sink *s);

struct remote_write_stats {
	uint64_t samples_total;         /* delivered */
	uint64_t samples_failed_total;  /* refused by the receiver (4xx), given up */
	uint64_t samples_retried_total;
	uint64_t samples_dropped_total; /* by write_relabel_configs */
	uint64_t samples_lost_ring_total;   /* the ring was full */
	uint64_t samples_lost_queue_total;  /* oldest dropped over queue_max_bytes, damaged, or not written */
	uint64_t samples_pending;
	uint64_t bytes_total;
	uint64_t requests_total, requests_failed_total;
	uint64_t corrupt_records_total;
	int64_t highest_t_ms, highest_sent_t_ms;
	/* mode: summary (zeros otherwise). */
	uint64_t summary_in_total, summary_out_total, summary_raw_total;
};
void remote_write_get_stats(struct remote_write *rw, struct remote_write_stats *out);

#endif
