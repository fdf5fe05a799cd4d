/* Edge aggregation for remote write (`mode: summary`, issue 18 item 7):
 * instead of every sample, each series is sent as per-interval summaries
 * named the way recording rules would name them, at the interval's end:
 *
 *   NAME:min1m, NAME:max1m, NAME:mean1m, NAME:p95_1m   (gauges; "1m" is
 *       the interval, "95" the quantile in percent)
 *   NAME                                               (counters: names
 *       ending _total, _count, _sum or _bucket, and ALERTS: their last
 *       sample of the interval, raw, so rate() and increase() stay right)
 *
 * plus every raw sample, under its own name, of each series whose GPU (its
 * `gpu` label) is in an anomalous or alerting state: from an ALERTS sample
 * of value 1 for the GPU (a pending or firing alert) or a
 * gpulse_anomaly_score sample over the threshold, for `hold` after the
 * last one. ALERTS themselves are always sent raw.
 *
 * Not thread-safe: one batcher owns it. Memory: one state per series and
 * at most RW_SUMMARY_MAX_VALUES values per series and interval for the
 * quantile (beyond that a uniform reservoir of that many, counted). */
#ifndef GPULSE_RW_SUMMARY_H
#define GPULSE_RW_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/tsdb.h"

#define RW_SUMMARY_MAX_VALUES 2048
#define RW_SUMMARY_MAX_GPUS 256

struct rw_summary_opts {
	int64_t interval_ms;        /* 0: 60000 */
	double quantile;            /* 0: 0.95 */
	double anomaly_threshold;   /* 0: 4 (the rule pack's resolve level) */
	int64_t hold_ms;            /* 0: 5000 */
};

/* A sample to send: `key` identifies the series (same key, same labels). */
typedef void rw_summary_emit_fn(void *ctx, const void *key, const struct label *labels,
				size_t n, int64_t t_ms, double v);

struct rw_summary;

int rw_summary_create(struct rw_summary **out, const struct rw_summary_opts *o);
void rw_summary_destroy(struct rw_summary *s);  /* accepts NULL */

/* One sample of series `ref` whose labels (sorted, as sent) are
 * labels[0..n), valid as long as the summary lives. Emits what becomes
 * due: the raw sample when its GPU is hot, the summaries of the
 * series' previous interval when this sample starts a new one. 0 or
 * GPULSE_ENOMEM (the sample is then not summarised; counted). */
int rw_summary_add(struct rw_summary *s, uint32_t ref, const struct label *labels, size_t n,
		   int64_t t_ms, double v, rw_summary_emit_fn *emit, void *ctx);

/* Note one sample of any stored series, before write_relabel_configs
 * (which may drop ALERTS from what is sent): an ALERTS sample of value 1
 * or a gpulse_anomaly_score over the threshold makes its `gpu` hot from
 * t_ms for hold_ms. Call it before rw_summary_add of the same sample. */
void rw_summary_observe(struct rw_summary *s, const struct label *labels, size_t n,
			int64_t t_ms, double v);

/* Emit the summaries of every interval that ended at or before
 * now_ms (series that stopped, or that are quiet). */
void rw_summary_sweep(struct rw_summary *s, int64_t now_ms, rw_summary_emit_fn *emit, void *ctx);

struct rw_summary_stats {
	uint64_t samples_in_total;
	uint64_t raw_passthrough_total;   /* raw samples sent for a hot GPU */
	uint64_t summaries_total;         /* summary samples emitted */
	uint64_t reservoir_total;         /* values that went past the quantile's bound */
	uint64_t errors_total;            /* samples not summarised (memory) */
};
void rw_summary_get_stats(const struct rw_summary *s, struct rw_summary_stats *out);

#endif
