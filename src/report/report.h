/* Capacity planning (`gpulse report capacity`): how busy each GPU really
 * was, what was idle or held idle, how close the host runs to its target
 * band, and what to do about it. The figures are gathered through PromQL
 * range queries from a source (the running gpulsed, a store file, a
 * central Prometheus: struct report_source), laid on a grid of slots one
 * step wide, and computed here; report_render.c writes them as text, JSON
 * or a self-contained HTML page. Every figure is defined in
 * docs/internals/report.md.
 *
 * The module sits above the store, the query engine and the diagnosis
 * (it reads their series by name); it knows nothing of HTTP: a source
 * that talks to a server is the CLI's (src/cli/cmd_report.c). */
#ifndef GPULSE_REPORT_H
#define GPULSE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/buf.h"
#include "diagnose/diagnose.h"

#define REPORT_DEFAULT_STEP_MS 60000        /* one slot: the store's rollup step */
#define REPORT_IDLE_RATIO 0.05              /* utilization below this: idle */
#define REPORT_BUSY_LINE 0.85               /* the "busy" line of the crossings */
#define REPORT_ALLOC_MIN_BYTES (1ull << 30) /* memory used that counts as held,
                                             * where no per-process series exist */
#define REPORT_MIN_HISTORY_MS (24LL * 3600 * 1000) /* less: no recommendations */
#define REPORT_MAX_CELLS 2000000            /* GPUs x slots held at once */
#define REPORT_MAX_GPUS 1024
#define REPORT_MAX_PROCS 4096
#define REPORT_MAX_PODS 4096
#define REPORT_HIST_BINS 10
#define REPORT_MAX_NOTES 64
#define REPORT_MAX_RECS 64
#define REPORT_TEXT_MAX 512

/* ---- the series a source returns ---- */

struct report_label {
	char *name;
	char *value;
};

struct report_series {
	struct report_label *labels;
	size_t nlabels;
	int64_t *t_ms;
	double *v;
	size_t n;
};

/* A range query's answer. Zero-initialise; report_matrix_free releases
 * everything (and leaves it empty, reusable). */
struct report_matrix {
	struct report_series *series;
	size_t n;
};

void report_matrix_free(struct report_matrix *m);
/* The value of label `name` of s, or NULL. */
const char *report_series_label(const struct report_series *s, const char *name);

/* Parse a Prometheus /api/v1/query_range answer (the envelope
 * {"status":"success","data":{"resultType":"matrix","result":[...]}})
 * and append its series to *out. An error envelope gives GPULSE_EIO with
 * the server's error text; anything else that is not that shape
 * GPULSE_EPARSE with a sentence naming what and where (the series and
 * point index). Bounded: at most max_series series and max_points points
 * in all (GPULSE_ELIMIT beyond). */
int report_parse_matrix(const char *body, size_t len, size_t max_series, size_t max_points,
			struct report_matrix *out, char *err, size_t errlen);

/* ---- sources ---- */

/* One backend of the report: evaluate `expr` at start, start + step, ...,
 * up to end (inclusive), appending the series to *out. `rollups` says the
 * range lies before raw retention, so a store may answer from its
 * 1-minute rollups; a source without rollups ignores it. 0, or a status
 * code with a sentence in err. */
struct report_source_ops {
	const char *kind; /* "gpulsed", "store", "prometheus": the report says which */
	int (*query_range)(void *ctx, const char *expr, int64_t start_ms, int64_t end_ms,
			   int64_t step_ms, bool rollups, struct report_matrix *out, char *err,
			   size_t errlen);
	/* Optional, for a source that holds the samples itself: the series
	 * named `metric` (with gpu="N" when gpu >= 0) laid on the slots
	 * [start, start + step), ... below end, one point per slot with data
	 * at the slot's start + step - 1 ms (where query_range would put
	 * it), its value the mean of the slot's samples (want_max: their
	 * largest). From rollups, a slot's mean is sum / count of its
	 * buckets and its largest their max, so a long range loses nothing
	 * to the minute means. NULL: query_range with avg_/max_over_time. */
	int (*slots)(void *ctx, const char *metric, int gpu, int64_t start_ms, int64_t end_ms,
		     int64_t step_ms, bool rollups, bool want_max, struct report_matrix *out,
		     char *err, size_t errlen);
};

struct report_source {
	const struct report_source_ops *ops;
	void *ctx;
	const char *where;           /* URL or file, printed in the report */
	int64_t raw_retention_ms;    /* raw samples are kept this far back;
	                              * 0: raw everywhere (Prometheus) */
	bool fleet;                  /* many hosts: GPUs keyed by `instance` too */
	size_t max_steps;            /* steps per request; 0: 10000 */
	size_t max_raw_steps;        /* steps per request over raw data (each step
	                              * loads a step of 10 Hz samples); 0: 480 */
	int64_t rollup_step_ms;      /* a source with `slots` and rollups of this
	                              * step: for a step that is a whole number of
	                              * them, closed buckets inside raw retention
	                              * are read as rollups too (the same sum,
	                              * count and max as their raw samples, at a
	                              * fraction of the reading); 0: never */
};

/* The store-backed source (report_source_db.c): the file is opened
 * read-only (tsdb opts.read_only), so a gpulsed writing it goes on
 * undisturbed. On 0, *out is the caller's (report_db_close). Errors as
 * tsdb_open's; a missing file is GPULSE_ENOENT "FILE: no such store". */
struct report_db;
int report_db_open(struct report_db **out, const char *path, int64_t raw_retention_ms,
		   char *err, size_t errlen);
/* The source reading it; valid until report_db_close. */
void report_db_source(struct report_db *d, struct report_source *src);
/* The store's clock ("now"), what --since counts back from. */
int64_t report_db_now_ms(const struct report_db *d);
void report_db_close(struct report_db *d);

/* ---- options and figures ---- */

struct report_opts {
	int64_t start_ms, end_ms;   /* [start, end) */
	int64_t step_ms;            /* slot width; 0: REPORT_DEFAULT_STEP_MS */
	int64_t now_ms;             /* the source's "now" (raw retention counts back from it) */
	int gpu;                    /* only this GPU index; -1: all */
	double band_lo, band_hi;    /* the target band of mean busy; 0, 0: 0.70-0.80 */
	double idle_ratio;          /* 0: REPORT_IDLE_RATIO */
	double busy_line;           /* 0: REPORT_BUSY_LINE */
	int64_t min_history_ms;     /* 0: REPORT_MIN_HISTORY_MS */
};

/* Nearest-rank percentiles of the covered slots' values. */
struct report_dist {
	size_t n;          /* slots with a value; 0: the rest is meaningless */
	double mean, p50, p95, p99, max;
};

struct report_gpu {
	char host[128];             /* `instance` (fleet), else "" */
	char gpu[16];               /* index */
	char uuid[96];
	char model[96];
	bool has_gpm;               /* SM activity present in the range */
	bool has_tensor;
	const char *busy_metric;    /* "sm_active" or "utilization" (no GPM) */
	int64_t first_ms, last_ms;  /* first and last slot with data (start of slot) */
	double covered_h, gap_h;    /* slots with data / without, inside [first, last] */
	double raw_h, rollup_h;     /* covered hours within / beyond raw retention */
	double read_raw_h;          /* covered hours read from raw samples (the rest
	                             * from rollups: see rollup_step_ms) */
	struct report_dist busy, sm, tensor, util;
	double idle_h, alloc_idle_h, busy_h; /* busy_h: covered and not idle */
	double idle_off_h;          /* idle time outside working hours (Mon-Fri 08-18 UTC) */
	double mem_high_bytes, mem_total_bytes;
	int64_t mem_high_ms;
	unsigned crossings;         /* runs of slots at or above the busy line */
	double above_h, longest_above_h;
	double class_h[DIAG_CLASS_COUNT]; /* slots whose stored verdict was each class */
	double class_none_h;        /* covered slots with no stored verdict */
	double hist[REPORT_HIST_BINS]; /* share of busy slots in [i/10, (i+1)/10) */
	double hour_mean[24];       /* mean busy by hour of day (UTC); NaN: none */
	bool has_procs;             /* per-process series existed */
	double health_min;          /* lowest health score of a slot; NaN: none stored */
	char drain_reason[32];      /* last reason the health score drained for; "" none */
	int replaced_by, replaces;  /* index in report.gpus of the GPU that took
	                             * this index's place later / earlier; -1 */
	/* the slot grid (nslots of report) */
	double *s_busy, *s_sm, *s_tensor, *s_util, *s_mem, *s_memtot, *s_procmem;
	signed char *s_class;
	double *s_class_share;
};

struct report_model {
	char host[128];
	char model[96];
	size_t ngpus;
	struct report_dist busy, tensor;
	double covered_h, idle_h, alloc_idle_h;
	double mem_high_bytes, mem_total_bytes;
	bool any_no_gpm;
};

struct report_proc {
	char host[128], gpu[16], uuid[96], pid[16], comm[64];
	double mem_high_bytes, mem_total_bytes;
	double seen_h;              /* slots it held memory in */
	double idle_held_h;         /* of those, slots its GPU was idle */
	double sm_mean;             /* its mean SM share where read; NaN: never read */
	bool traced;                /* the injection library reported its kernels */
	double kernel_s;            /* GPU time of its kernels in the range (the
	                             * library's gpulse_process_kernel_seconds_total,
	                             * summed over kernels, from the first slot on) */
};

/* A pod (or Slurm job) that held a GPU, from gpulsed's judgement of
 * allocated-but-idle by the activity split (gpulse_workload_allocated_idle:
 * its part of the GPU's SM activity under attribution.idle_sm_ratio for
 * attribution.idle_window). */
struct report_pod {
	char host[128], gpu[16], uuid[96];
	char pod[64], namespace_[64], job[40];
	double held_h;              /* slots in which it held the GPU (was judged) */
	double idle_h;              /* of those, slots it was allocated but idle in
	                             * (the slot's mean of the series >= 0.5) */
};

struct report_host {
	char host[128];
	size_t ngpus;
	double covered_h;
	struct report_dist busy;    /* the host's per-slot mean busy over its GPUs */
	double below, in, above;    /* share of covered slots below/in/above the band */
	double work_h, work_above;  /* working hours (Mon-Fri 08-18 UTC) and the share above */
	double peak_p95;            /* = busy.p95 */
	double failover_p95;        /* p95 of the sum of busy over n-1 GPUs; NaN: one GPU */
	bool peak_room, failover_room;
	const char *verdict;        /* "below band", "in band", "above band", "no data" */
	double hour_mean[24];
	double *s_mean;             /* per slot; NaN where no GPU had data */
};

struct report_rec {
	char kind[16];              /* consolidate, right-size, add-capacity, release,
	                             * allocated-idle, failover, in-band */
	char text[REPORT_TEXT_MAX];
};

struct report {
	struct report_opts o;
	const char *source_kind;
	char source_where[256];
	int64_t start_ms, end_ms;   /* aligned to the step */
	size_t nslots;
	int64_t split_ms;           /* slots before it lie beyond raw retention */
	int64_t read_split_ms;      /* slots before it were read from rollups */
	struct report_gpu *gpus;
	size_t ngpus;
	struct report_model *models;
	size_t nmodels;
	struct report_proc *procs;
	size_t nprocs;
	size_t procs_dropped;       /* beyond REPORT_MAX_PROCS */
	struct report_pod *pods;
	size_t npods;
	size_t pods_dropped;        /* beyond REPORT_MAX_PODS */
	struct report_host *hosts;
	size_t nhosts;
	bool enough_history;
	char notes[REPORT_MAX_NOTES][REPORT_TEXT_MAX]; /* plain statements */
	size_t nnotes;
	struct report_rec recs[REPORT_MAX_RECS];
	size_t nrecs;
	char resolution[REPORT_TEXT_MAX]; /* what the percentiles were computed from */
};

/* Gather and compute. On 0, *out is the caller's (report_free). Errors:
 * GPULSE_EINVAL for options that make no range (with a sentence),
 * GPULSE_ELIMIT when GPUs x slots pass REPORT_MAX_CELLS (use a larger
 * step), and whatever the source said. An empty range is no error: the
 * report says "no data" plainly. */
int report_build(const struct report_source *src, const struct report_opts *o,
		 struct report **out, char *err, size_t errlen);

/* Compute every figure from the slot grids already filled (report_build
 * calls it; tests fill grids themselves). */
void report_compute(struct report *r);

/* A report with `ngpus` empty GPUs over nslots slots, for tests that
 * fill the grids by hand; report_free releases it. */
struct report *report_alloc(const struct report_opts *o, size_t ngpus);

void report_free(struct report *r);

/* Renderers (report_render.c). 0, or GPULSE_EIO when writing fails. */
int report_write_text(const struct report *r, FILE *out, bool utf8);
int report_write_json(const struct report *r, FILE *out);
int report_write_html(const struct report *r, FILE *out);

/* Parse "0.70-0.80" (or "70-80", percent) into lo < hi within [0, 1].
 * 0, or GPULSE_EINVAL. */
int report_parse_band(const char *s, double *lo, double *hi);

/* Nearest-rank percentile p (0-100] of the n sorted values. */
double report_percentile(const double *sorted, size_t n, double p);

#endif
