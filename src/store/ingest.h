/* The bridge from the sample bus to the store: a bus subscriber that
 * appends every tier update into the tsdb, one series per (GPU, field with
 * a metric), named and labelled as on /metrics (fields.h, prom.c), plus
 * gpulse_gpu_up per fast update and the raw clock-reasons bit mask as
 * gpulse_gpu_clocks_event_reasons. A field that goes from valid to absent
 * gets one Prometheus staleness marker, so PromQL stops returning it at
 * once instead of after the lookback.
 *
 * Threads: ingest_on_update runs on the publishers' threads (collector
 * lanes, the replay thread) and never blocks on I/O: tsdb_append is the
 * store's in-memory path. Errors are counted, never reported upward. */
#ifndef GPULSE_INGEST_H
#define GPULSE_INGEST_H

#include <stdint.h>

#include "bus.h"
#include "tsdb.h"

#define INGEST_UP_METRIC "gpulse_gpu_up"
#define INGEST_CLOCK_REASONS_METRIC "gpulse_gpu_clocks_event_reasons"

struct ingest;

struct ingest_stats {
	uint64_t updates_total;          /* bus updates seen */
	uint64_t samples_appended_total; /* appends the store took */
	uint64_t stale_markers_total;    /* staleness markers written */
	uint64_t append_errors_total;    /* appends refused (out of order, bad ref) */
	uint64_t series_errors_total;    /* series the store would not create */
};

/* A new ingest appending into `db` and reading GPU identities from `bus`
 * (both must outlive it). 0 or GPULSE_ENOMEM. It does not subscribe by
 * itself: call ingest_subscribe before sources publish. */
int ingest_create(struct ingest **out, struct tsdb *db, struct bus *bus);
/* bus_subscribe(bus, ingest_on_update, ing). 0 or GPULSE_ELIMIT. */
int ingest_subscribe(struct ingest *ing);
/* The subscriber itself (bus_subscriber_fn); ctx is a struct ingest. */
void ingest_on_update(void *ctx, const struct gpu_update *u);
void ingest_get_stats(const struct ingest *ing, struct ingest_stats *out);
/* Accepts NULL. Publishers must have stopped. */
void ingest_destroy(struct ingest *ing);

#endif
