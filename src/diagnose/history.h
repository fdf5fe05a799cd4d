/* Diagnosis history in the store: every window the live diagnosis judges
 * is kept as series (so rules, dashboards and PromQL see the verdicts) and,
 * at class changes, as a record with its whole evidence; asked for a range
 * longer than the live diagnosis holds in memory, the stored verdicts are
 * read back and put together into windows of any length.
 *
 * Series per GPU (labels gpu, uuid, model, as the collected series), one
 * sample per judged window at the window's end:
 *   gpulse_gpu_bottleneck{class}                1 for the window's class, 0 others
 *   gpulse_gpu_diagnosis_finding{finding}       1 when the window carries it
 *   gpulse_gpu_diagnosis_confidence_ratio       the window's confidence
 *   gpulse_gpu_headroom_ratio{resource}         sm_active, tensor_active, tensor,
 *                                               pipe_active, pipe, clock, dram,
 *                                               pcie, memory, busy
 *   gpulse_gpu_diagnosis_bytes_per_second{path} dram, pcie_tx, pcie_rx
 *   gpulse_gpu_diagnosis_evidence_missing{evidence} 1 when the window lacked it
 * Samples are stamped at the window's last millisecond, so each lies in
 * the window (and the rollup minute) it describes.
 * Records (kind "diagnosis", key "UUID/END_MS", the window's JSON as
 * `gpulse diagnose --json` writes it): the first window of a change of
 * class or findings once the change has held 3 windows (flapping writes
 * none), and one every `record_interval_s` while nothing changes; at most
 * one per 30 s per GPU (under 3 KB each: at most ~8 MB a day per GPU).
 * Records are written by the history's own
 * thread (SQLite must not run on the bus's publishing thread) through a
 * bounded queue; a full queue drops and counts. Records older than the
 * raw retention are pruned. */
#ifndef GPULSE_DIAG_HISTORY_H
#define GPULSE_DIAG_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "diagnose/diagnose.h"
#include "diagnose/peaks.h"
#include "collect/sample.h"
#include "store/tsdb.h"

#define DIAG_HISTORY_KIND "diagnosis"

/* The metric names of the series above, NULL-terminated: what the
 * history writes into the store itself, which the store's scrape of
 * /metrics (src/daemon/selfscrape.h) must leave to it. */
extern const char *const diag_history_metrics[];
#define DIAG_HISTORY_QUEUE 256   /* records waiting for the writer thread */

struct diag_history;

struct diag_history_opts {
	double record_interval_s;    /* 0: 600 */
	int64_t record_retention_ms; /* 0: 48 h */
};

struct diag_history_stats {
	uint64_t windows_total;         /* windows kept as series */
	uint64_t append_errors_total;   /* samples the store refused */
	uint64_t records_total;         /* records written */
	uint64_t records_dropped_total; /* queue full, or the store failed */
};

/* A history over `db` (which must outlive it), with its writer thread
 * started. 0, GPULSE_ENOMEM or GPULSE_EINVAL. Free with
 * diag_history_destroy. */
int diag_history_create(struct diag_history **out, struct tsdb *db,
			const struct diag_history_opts *o);
/* Stop the writer (writing what is queued) and free. Accepts NULL. */
void diag_history_destroy(struct diag_history *h);

/* Keep window `w` of the GPU `id`. Never blocks on SQLite: series go to
 * the store's head, the record (when due) to the queue. Thread-safe. */
void diag_history_put(struct diag_history *h, const struct gpu_identity *id,
		      const struct diag_window *w);

/* Write what is queued now (tests; the thread does it on its own). */
void diag_history_sync(struct diag_history *h);

/* The stored verdicts of GPU `gpu` (its index) with window ends in
 * (since_s, until_s], put together into windows of `window_s` aligned to
 * multiples of it in Unix time, each cut to its data: it starts no
 * earlier than its first stored window and ends no later than its last
 * (nor before since_s or after until_s). Each window's class is the
 * class that held most of its time (the live windows are of one length,
 * so the most of them); a finding is kept when at least a tenth of them
 * carry it; the headroom numbers, confidence and missing evidence are
 * those of the windows of that class (means), so the numbers shown agree
 * with the class; the evidence lists each class's and finding's share;
 * nverdicts counts the stored windows (nsamples is 0: not stored). Read
 * from the raw samples while they are kept; ranges older than the raw
 * retention from the 1-minute rollups (shares per minute; a minute's
 * numbers count for the class that held most of it). *out (NULL when none) is the
 * caller's, freed with free(). 0, GPULSE_EINVAL (bad range or window, or
 * over `max_windows` windows), GPULSE_EIO, GPULSE_ENOMEM. */
int diag_history_read(struct diag_history *h, int gpu, double since_s, double until_s,
		      double window_s, size_t max_windows, const struct gpu_peaks *peaks,
		      struct diag_window **out, size_t *n);

/* Append the stored records (full windows at class changes) of GPU
 * `uuid` with ends in (since_s, until_s] as a JSON array of window
 * objects, newest `limit` of them. 0 or the buf's/store's error. */
int diag_history_records_json(struct diag_history *h, const char *uuid, double since_s,
			      double until_s, size_t limit, struct buf *b);

void diag_history_get_stats(struct diag_history *h, struct diag_history_stats *out);

#endif
