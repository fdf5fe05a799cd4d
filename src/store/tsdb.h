/* The embedded time-series store (DESIGN.md decision 6): SQLite in WAL mode
 * holds compressed chunks (chunk.h), 1-minute rollups, the series table and
 * generic records; an in-memory head per series takes appends without
 * touching SQLite. A flush moves head chunks into SQLite in one
 * transaction, so a crash loses at most what was appended since the last
 * flush. docs/internals/store.md describes the schema and the models.
 *
 * Threads: tsdb_append may be called from any number of threads (a mutex
 * per shard of series: appends to different shards never contend); every
 * other call is thread-safe too (the one SQLite connection is behind its
 * own lock), except tsdb_close, which must come last, after every iterator
 * was freed. An iterator belongs to one thread. Times are milliseconds
 * since the Unix epoch. */
#ifndef GPULSE_TSDB_H
#define GPULSE_TSDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/label.h"

#define TSDB_MAX_LABELS 32          /* labels per series, __name__ included */
#define TSDB_MAX_LABEL_NAME 128     /* bytes */
#define TSDB_MAX_LABEL_VALUE 1024   /* bytes */
#define TSDB_MAX_MATCHERS 32
#define TSDB_SCHEMA_VERSION 4         /* 2: chunks carry a checksum; 3: rollups packed in blocks;
                                       * 4: the head log */
#define TSDB_APPLICATION_ID 0x47504c53  /* "GPLS" in the SQLite header */

struct tsdb;

struct tsdb_opts {
	const char *path;              /* the database file; created if missing */
	int64_t flush_interval_ms;     /* flusher period; 0: 1000 */
	int64_t raw_retention_ms;      /* raw chunks kept; 0: 48 h */
	int64_t rollup_retention_ms;   /* rollup rows kept; 0: 30 days */
	int64_t rollup_step_ms;        /* rollup bucket; 0: 60000 */
	size_t max_series;             /* 0: 100000 */
	size_t max_head_bytes;         /* head memory bound; 0: 256 MiB */
	int64_t max_db_pages;          /* 0: none. Caps the file through
	                                * PRAGMA max_page_count: tests use it
	                                * to simulate a full disk. */
	struct clock_wall clock;       /* "now" for retention, AUTO reads and
	                                * what reads the store's history;
	                                * zeroed: the system's wall clock */
	bool read_only;                /* a reader beside the store's owner
	                                * (gpulse report --db): no .lock taken,
	                                * SQLite opened read-only, no schema
	                                * change, no flusher; the file must
	                                * exist and have this schema. Series,
	                                * appends and flushes are refused with
	                                * GPULSE_ESTATE; the series are those
	                                * on disk at open. */
	int64_t ooo_window_ms;         /* how much older than its series'
	                                * newest a sample may be and still be
	                                * taken (a wall clock stepped back);
	                                * 0: 1 h; negative: none (refused) */
	int64_t retry_interval_ms;     /* while the file cannot be written:
	                                * how often it is opened again; 0: 30 s */
};

struct tsdb_stats {
	uint64_t samples_appended_total;
	uint64_t samples_dropped_total;   /* out of order, or lost to the head bound */
	uint64_t chunks_flushed_total;
	uint64_t storage_errors_total;    /* failed flushes and record writes */
	uint64_t flushes_total;
	uint64_t series_limit_hits_total; /* series refused by max_series */
	uint64_t label_limit_hits_total;  /* label sets refused by the bounds */
	uint64_t corrupt_chunks_total;    /* damaged chunks and rollup blocks on disk skipped by
	                                   * reads, each counted once */
	uint64_t samples_out_of_order_total; /* taken though older than their series'
	                                   * newest (within opts.ooo_window_ms) */
	uint64_t clock_steps_total;       /* wall-clock steps of over a second seen */
	uint64_t file_lost_total;         /* the file, its -wal or -shm deleted or
	                                   * replaced under the open store */
	bool writable;                    /* see tsdb_unwritable */
	uint64_t series;
	uint64_t head_bytes;              /* memory held by the head */
	uint64_t db_bytes;                /* database file plus WAL */
};

/* Open (or create) the store. On success *out is the caller's, closed with
 * tsdb_close. A file that is not SQLite, an SQLite database of another
 * application, a newer schema or a damaged file is refused with
 * GPULSE_EPARSE (a truncated one says "truncated") (GPULSE_EIO when it can't be opened at all) and a sentence
 * in err naming the file. A full disk or an I/O error while opening,
 * reading or creating the file is never taken for damage: GPULSE_EIO,
 * "FILE: disk full (SQLITE_FULL) while ..." or "FILE: I/O error (SQLite
 * code N) while ...: MESSAGE". A file another store holds open (in this or
 * another process: a flock on PATH.lock) gives GPULSE_EBUSY. With
 * opts.read_only the lock is not asked for (the owner keeps writing);
 * a missing file is GPULSE_ENOENT, an older schema GPULSE_EPARSE. */
int tsdb_open(struct tsdb **out, const struct tsdb_opts *opts, char *err, size_t errlen);
/* Stop the flusher, flush what the head holds, close. Accepts NULL. */
void tsdb_close(struct tsdb *db);

/* The reference of the series with these labels (any order; `__name__`
 * required), created when new. Label names must match
 * [a-zA-Z_][a-zA-Z0-9_]*, values be non-empty and within the bounds.
 * 0; GPULSE_EINVAL (bad label set), GPULSE_ELIMIT (a bound or max_series;
 * counted), with a sentence in err. References stay valid until close. */
int tsdb_series(struct tsdb *db, const struct label *labels, size_t n,
		uint32_t *ref, char *err, size_t errlen);

/* Append one sample: the hot path (no SQLite, no allocation except one
 * per completed chunk). 0; GPULSE_ERANGE when t_ms is the time of the
 * series' newest sample, or older than it by more than opts.ooo_window_ms
 * (dropped and counted); GPULSE_EINVAL for a bad ref. A sample older than
 * the newest but within the window (the wall clock stepped back) is taken
 * and counted in samples_out_of_order_total: it starts a chunk of its
 * own, which reads merge by time (Prometheus's out_of_order_time_window);
 * one at the time of a stored chunk's first sample is dropped at the next
 * flush (a duplicate, refused as Prometheus refuses it). */
int tsdb_append(struct tsdb *db, uint32_t ref, int64_t t_ms, double v);

/* Called after every sample a tsdb_append took, on the appender's thread,
 * outside the store's locks: it must not block (remote write puts the
 * sample in a bounded ring, src/remote/remote_write.h). */
typedef void tsdb_append_hook_fn(void *ctx, uint32_t ref, int64_t t_ms, double v);
/* Set (or, fn NULL, clear) the hook. Set it before appends start and
 * clear it only after they stopped. */
void tsdb_set_append_hook(struct tsdb *db, tsdb_append_hook_fn *fn, void *ctx);

/* The labels of series ref, sorted by name, in *labels (n of them):
 * the store's, valid until close. 0 or GPULSE_EINVAL for a bad ref. */
int tsdb_series_labels(struct tsdb *db, uint32_t ref, const struct label **labels,
		       size_t *n);

/* Write every head chunk (full ones and the open one of each series) to
 * SQLite in one transaction, then the rollups that became due: a
 * checkpoint (tsdb_flush_periodic), the head log emptied. 0, or
 * GPULSE_EIO when SQLite failed (disk full, I/O error): the chunks stay in
 * the head, the error is counted, and the next flush retries. */
int tsdb_flush(struct tsdb *db);
/* One flush as the flusher makes it every flush interval: the samples
 * each series took since the last flush appended as one row to the head
 * log (a series with more than 16 of them, or whose open chunk changed,
 * has its open chunk written whole), the chunks cut since written; and
 * every 60 s of flush intervals a
 * checkpoint, tsdb_flush, which empties the log. Durable as tsdb_flush:
 * the next tsdb_open replays the log into the chunks; a read-only
 * reader's open reads it into the reader's head. 0 or as tsdb_flush. */
int tsdb_flush_periodic(struct tsdb *db);
/* 0 when the store can be written; GPULSE_EIO with the reason in why
 * when it cannot: the file is read-only (its mode, a read-only file
 * system: found at open, where SQLite would otherwise open it read-only
 * without a word, or by a failed write), or it was replaced by another
 * file. Samples then wait in the head (at most opts.max_head_bytes, the
 * oldest chunks dropped and counted beyond), and each flush after
 * opts.retry_interval_ms opens the file again and writes them once it
 * can. A file deleted under the store is noticed at the next flush
 * (logged, counted in file_lost_total): a new store is created at the
 * path, holding from then on what the head held and what comes; its
 * -wal or -shm deleted: the store is opened again (what the deleted
 * -wal held is written into the file as the old connection closes). */
int tsdb_unwritable(struct tsdb *db, char *why, size_t len);

/* Run tsdb_flush every flush interval (and retention every minute) on a
 * thread the store owns. 0, GPULSE_ESTATE if running, GPULSE_ENOMEM. */
int tsdb_start_flusher(struct tsdb *db);
/* Stop it (waits for a flush in progress). Safe when not running; accepts
 * NULL. */
void tsdb_stop_flusher(struct tsdb *db);

/* Delete raw chunks ending before now_ms - raw retention and rollups
 * before now_ms - rollup retention. 0 or GPULSE_EIO. */
int tsdb_enforce_retention(struct tsdb *db, int64_t now_ms);

void tsdb_get_stats(struct tsdb *db, struct tsdb_stats *out);

/* "Now" in ms since the epoch by the store's clock (opts.clock): what its
 * retention and its readers' notion of "recent" go by. */
int64_t tsdb_now_ms(const struct tsdb *db);

/* Change the cap of opts.max_db_pages (0: none) while open: tests use it
 * to fill and then free a simulated disk. 0 or GPULSE_EIO. */
int tsdb_set_max_db_pages(struct tsdb *db, int64_t pages);

/* ---- reading ---- */

enum tsdb_match_op { TSDB_MATCH_EQ, TSDB_MATCH_NE, TSDB_MATCH_RE, TSDB_MATCH_NRE };

/* As PromQL: a missing label has the value "", regular expressions are
 * POSIX extended and anchored at both ends. */
struct tsdb_matcher {
	enum tsdb_match_op op;
	const char *name;
	const char *value;
};

enum tsdb_read_mode {
	TSDB_READ_RAW,      /* samples */
	TSDB_READ_ROLLUP,   /* min/max/sum/count per rollup step */
	TSDB_READ_AUTO,     /* rollups when step_hint_ms >= the rollup step or
	                     * the range starts before raw retention */
	TSDB_READ_LATEST,   /* raw, only each series' newest sample in the
	                     * range: what an instant vector selector needs,
	                     * decoding one chunk instead of the lookback */
	TSDB_READ_ROLLUP_TOTAL, /* rollups, as one bucket per series for the
	                     * whole range (t_ms = mint): the min, max, sum and
	                     * count of every bucket in it, rolled-up ones
	                     * summed inside SQLite rather than stepped row by
	                     * row (a month of minutes is 43,200 rows), the
	                     * raw tail above the rollups added */
	TSDB_READ_SPAN,     /* no samples: the series whose data overlaps the
	                     * range as a whole, its first sample (raw or
	                     * rolled up) <= maxt and its last >= mint, a gap
	                     * around the range included: what Prometheus's
	                     * /api/v1/series, labels and label values list */
};

struct tsdb_select_opts {
	int64_t mint, maxt;            /* inclusive */
	enum tsdb_read_mode mode;
	int64_t step_hint_ms;          /* the caller's resolution; 0: none */
	int64_t now_ms;                /* for AUTO; 0: the store's clock */
};

/* One rollup bucket [t_ms, t_ms + step). NaN samples (staleness markers)
 * are not counted. */
struct tsdb_rollup {
	int64_t t_ms;
	double min, max, sum;
	uint64_t count;
};

struct tsdb_iter;

/* Select the series matching every matcher (at least one must not match
 * the empty string, as in PromQL). On success *out is the caller's, freed
 * with tsdb_iter_free. GPULSE_ELIMIT (a regular expression exceeded its
 * match limit on a label value: no answer, never a partial one, with a
 * sentence naming the matcher), GPULSE_EINVAL (bad regex or matcher set, with a
 * sentence in err), GPULSE_EIO, GPULSE_ENOMEM. */
int tsdb_select(struct tsdb *db, const struct tsdb_matcher *m, size_t nm,
		const struct tsdb_select_opts *o, struct tsdb_iter **out,
		char *err, size_t errlen);
/* Move to the next series (in ascending label order) that has data in the
 * range: 1, 0 at the end, or a negated GPULSE_ code when reading failed
 * (-GPULSE_EIO, -GPULSE_ENOMEM). A damaged chunk on disk (checksum
 * mismatch, undecodable) is no failure: it is skipped whole, counted in
 * corrupt_chunks_total and logged once with its series, and the rest of
 * the range is served. */
int tsdb_iter_next_series(struct tsdb_iter *it);
/* The current series' labels, sorted by name; valid until the next
 * tsdb_iter_next_series. */
const struct label *tsdb_iter_labels(const struct tsdb_iter *it, size_t *n);
/* Whether the iterator reads rollups (decided once, from the mode). */
bool tsdb_iter_is_rollup(const struct tsdb_iter *it);
/* The current series' next sample in time order (raw mode): 1 or 0. */
int tsdb_iter_next_sample(struct tsdb_iter *it, int64_t *t_ms, double *v);
/* The current series' next bucket (rollup mode): 1 or 0. */
int tsdb_iter_next_rollup(struct tsdb_iter *it, struct tsdb_rollup *r);
/* Accepts NULL. */
void tsdb_iter_free(struct tsdb_iter *it);

/* Sorted distinct label names of all series, or the values of one name.
 * *out (an array of *n strings) is the caller's: tsdb_strings_free. */
int tsdb_label_names(struct tsdb *db, char ***out, size_t *n);
int tsdb_label_values(struct tsdb *db, const char *name, char ***out, size_t *n);
void tsdb_strings_free(char **s, size_t n);

/* ---- records: non-series data (alert state, benchmark results,
 * diagnosis windows), one row per (kind, key), written synchronously ---- */

struct tsdb_record {
	char *kind;
	char *key;
	int64_t t_ms;
	char *json;        /* JSON text, stored as given */
};

/* Insert or replace. 0, GPULSE_EINVAL, GPULSE_EIO (counted). */
int tsdb_record_put(struct tsdb *db, const char *kind, const char *key, int64_t t_ms,
		    const char *json);
/* 0 with *out filled (the caller frees it with tsdb_record_clear), or
 * GPULSE_ENOENT. */
int tsdb_record_get(struct tsdb *db, const char *kind, const char *key,
		    struct tsdb_record *out);
/* Records of one kind with mint <= t_ms <= maxt, oldest first, at most
 * `limit` (0: 10000). *out is the caller's: tsdb_records_free. */
int tsdb_record_list(struct tsdb *db, const char *kind, int64_t mint, int64_t maxt,
		     size_t limit, struct tsdb_record **out, size_t *n);
/* Records of one kind with key_lo <= key <= key_hi (byte order), the
 * greatest keys first, at most `limit` (0: 10000): with keys that end in
 * a zero-padded time, the newest of a prefix. *out: tsdb_records_free. */
int tsdb_record_keys(struct tsdb *db, const char *kind, const char *key_lo, const char *key_hi,
		     size_t limit, struct tsdb_record **out, size_t *n);
/* 0, or GPULSE_ENOENT when there was no such record. */
int tsdb_record_delete(struct tsdb *db, const char *kind, const char *key);
/* Delete the records of `kind` older than before_ms (t_ms < before_ms);
 * *deleted (may be NULL) gets how many. 0, GPULSE_EINVAL, GPULSE_EIO. */
int tsdb_record_prune(struct tsdb *db, const char *kind, int64_t before_ms, size_t *deleted);
void tsdb_record_clear(struct tsdb_record *r);
void tsdb_records_free(struct tsdb_record *r, size_t n);

#endif
