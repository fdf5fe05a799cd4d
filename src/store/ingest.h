/* The bridge from the sample bus to the store: a bus subscriber that
 * appends every tier update into the tsdb, one series per (GPU, field with
 * a metric), named and labelled as on /metrics (fields.h, prom.c), plus
 * the raw clock-reasons bit mask as gpulse_gpu_clocks_event_reasons. A
 * field that goes from valid to absent gets one Prometheus staleness
 * marker, so PromQL stops returning it at once instead of after the
 * lookback.
 *
 * A ticker thread (ingest_start) adds, once a tick, what /metrics shows
 * beside the fields and that no update carries, so rules at the edge see
 * what a Prometheus scraping /metrics sees: gpulse_gpu_up (0 while lost or
 * stuck), gpulse_gpu_stale, gpulse_gpu_throttle_active{reason},
 * gpulse_gpu_xid_errors_total{xid}, gpulse_gpu_ecc_events_total{type},
 * gpulse_gpu_lost_total, gpulse_gpu_pcie_link_max_{generation,width},
 * and each process's gpulse_process_gpu_memory_bytes and
 * gpulse_process_sm_utilization_ratio{pid,comm} (what /metrics shows).
 * A GPU that is lost or stale gets staleness markers on its field series
 * (Prometheus drops a target's series the same way when it stops
 * answering).
 *
 * Threads: ingest_on_update runs on the publishers' threads (collector
 * lanes, the replay thread) and never blocks on I/O: tsdb_append is the
 * store's in-memory path. Errors are counted, never reported upward. */
#ifndef GPULSE_INGEST_H
#define GPULSE_INGEST_H

#include <stdint.h>

#include "collect/bus.h"
#include "store/tsdb.h"

#define INGEST_UP_METRIC "gpulse_gpu_up"
#define INGEST_CLOCK_REASONS_METRIC "gpulse_gpu_clocks_event_reasons"

struct ingest;

#define INGEST_GPU_LABELS_MAX 6  /* __name__, gpu, uuid, model, source, one more */

/* The per-process series the ticker writes (as /metrics names them),
 * NULL-terminated. */
extern const char *const ingest_process_metrics[];

#define INGEST_METRIC_NAMES_MAX 128 /* ingest_metric_names fits in this many */

/* Every metric name the ingest writes (the fields, the ticker's series,
 * the per-process series), each once, into out[0..cap): its declaration
 * of what it owns, so that the store's scrape of /metrics (selfscrape.h)
 * leaves exactly these to it, whatever the store held before. The strings
 * are static. *n gets how many; 0, or GPULSE_ELIMIT when cap is too small
 * (out then holds the first cap). */
int ingest_metric_names(const char **out, size_t cap, size_t *n);

/* The label set of a GPU's series, as every GPU series in the store has
 * it: __name__, gpu, uuid and model (left out when empty: an empty value
 * is no label at all, as in Prometheus), source when not NULL (the GPU's
 * gpu_source_label, as /metrics shows it), then lname=lvalue when lname
 * is not NULL. Fills l[INGEST_GPU_LABELS_MAX] with pointers to the given
 * strings; returns how many. */
size_t ingest_gpu_labels(struct label *l, const char *name, const char *gpu,
			 const char *uuid, const char *model, const char *source, const char *lname,
			 const char *lvalue);

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
/* Start the ticker (every tick_ns; 0: 1 s). 0, GPULSE_ESTATE (running),
 * GPULSE_ENOMEM. */
int ingest_start(struct ingest *ing, int64_t tick_ns);
/* Run one tick now at wall time t_ms (tests; the ticker does the same). */
void ingest_tick(struct ingest *ing, int64_t t_ms);
/* Stop the ticker; safe when not running, accepts NULL. Call before the
 * store closes. */
void ingest_stop(struct ingest *ing);
/* Stops the ticker too. Accepts NULL. Publishers must have stopped. */
void ingest_destroy(struct ingest *ing);

#endif
