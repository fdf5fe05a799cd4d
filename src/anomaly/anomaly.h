/* The anomaly detector of gpulsed: for every GPU and watched metric
 * (power, temperature, memory used, SM clock, utilization) it learns what
 * normal looks like, robustly and per time of day, and scores how far the
 * last second is from it: gpulse_anomaly_score{gpu,uuid,model,metric}, a
 * non-negative robust z-score (0 typical, 3 unusual, 6 and more: a fault
 * or a workload never seen). Method, scale and costs:
 * docs/internals/anomaly.md.
 *
 * Two layers. The model (anomaly_model_*) is plain arithmetic on one
 * series of one-second values, with no threads or clocks, so tests drive
 * it with synthetic series. The detector (anomaly_*) is a bus subscriber
 * that averages each metric's samples into ticks, picks the context a
 * value is judged in (temperature by power, power and clocks by load),
 * feeds the models, and publishes scores: to /metrics through
 * anomaly_scores, and into the store when one is given. */
#ifndef GPULSE_ANOMALY_H
#define GPULSE_ANOMALY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/bus.h"
#include "store/tsdb.h"

#define ANOMALY_METRIC "gpulse_anomaly_score"
#define ANOMALY_SEASON_BUCKETS_MAX 96  /* time-of-day buckets (15 minutes each) */
#define ANOMALY_CONTEXTS_MAX 16        /* contexts of one metric */
#define ANOMALY_SCORE_MAX 1000.0       /* scores are capped here (no +Inf) */

/* ---- the model ------------------------------------------------------- */

/* Parameters, in ticks (one value per tick; gpulsed's tick is `step`). */
struct anomaly_params {
	double halflife_ticks;        /* short-term baseline's memory (gpulsed: 10m / step) */
	double season_halflife_ticks; /* a time-of-day bucket's memory, in its own values */
	double warmup_ticks;          /* values a baseline needs before it scores */
	double season_warmup_ticks;   /* values a time-of-day bucket needs before it is used */
	int season_buckets;           /* 0: no seasonal part; 1..ANOMALY_SEASON_BUCKETS_MAX */
	double clip;                  /* Huber clip, in scales (default 3) */
};

/* Defaults for a tick of `step_s` seconds: 10-minute baseline, 24 hourly
 * buckets remembering a week, 60 ticks of warm-up, clip 3. */
void anomaly_params_default(struct anomaly_params *p, double step_s);

struct anomaly_model;

/* A model of one series judged in `contexts` contexts (1..ANOMALY_CONTEXTS_MAX),
 * each with a short-term baseline and `season_buckets` time-of-day ones.
 * `floor` (> 0) is the smallest scale: the deviation that scores 1 on a
 * series that never varied. 0, GPULSE_EINVAL or GPULSE_ENOMEM. Free with
 * anomaly_model_free. Memory: about 24 bytes * contexts * (1 + buckets). */
int anomaly_model_new(struct anomaly_model **out, const struct anomaly_params *p, int contexts,
		      double floor);
/* Accepts NULL. */
void anomaly_model_free(struct anomaly_model *m);
/* Change the floor (memory's follows the GPU's total). Ignored unless > 0. */
void anomaly_model_set_floor(struct anomaly_model *m, double floor);

/* Score value `x` observed at `t_s` (Unix seconds: the time of day picks
 * the bucket) in context `ctx`, then learn from it. Returns the score, or
 * NaN while the context's baseline is warming up (or x is not finite, or
 * ctx is out of range: then nothing is learned). */
double anomaly_model_observe(struct anomaly_model *m, double t_s, int ctx, double x);

/* ---- the detector ---------------------------------------------------- */

/* Watched metrics: X(ID, label, field). */
#define ANOMALY_WATCHES(X)                          \
	X(UTIL, "utilization", F_GPU_UTIL)         \
	X(POWER, "power", F_POWER)                 \
	X(TEMP, "temperature", F_TEMP)             \
	X(MEM, "memory_used", F_MEM_USED)          \
	X(CLOCK, "sm_clock", F_SM_CLOCK)

enum anomaly_watch {
#define ANOMALY_WATCH_ENUM(id, label, field) ANOMALY_W_##id,
	ANOMALY_WATCHES(ANOMALY_WATCH_ENUM)
#undef ANOMALY_WATCH_ENUM
	ANOMALY_WATCH_COUNT
};

/* The `metric` label of a watch ("power"). Static storage. */
const char *anomaly_watch_name(enum anomaly_watch w);
/* The field (fields.h) a watch reads. */
int anomaly_watch_field(enum anomaly_watch w);

struct anomaly_config {
	int64_t step_ns;           /* tick: samples are averaged per tick; >= 100 ms */
	int64_t halflife_ns;       /* short-term baseline */
	int64_t season_halflife_ns;/* time-of-day baselines, in days of history */
	int64_t warmup_ns;         /* history before a baseline scores */
	int season_buckets;        /* 0..ANOMALY_SEASON_BUCKETS_MAX */
};

/* step 1 s, halflife 10 m, season_halflife 7 d, warmup 60 s, 24 buckets. */
void anomaly_config_default(struct anomaly_config *c);

struct anomaly;

/* A detector reading GPU identities from `bus` and, when `db` is not NULL,
 * appending each score to it as gpulse_anomaly_score{gpu,uuid,model,metric}
 * (both must outlive it). It does not subscribe itself: call
 * anomaly_subscribe before sources publish. 0, GPULSE_EINVAL (a config
 * value out of range) or GPULSE_ENOMEM. Models are allocated per GPU on
 * its first update (34 contexts of 25 baselines: about 21 KB per GPU with 24 buckets). */
int anomaly_create(struct anomaly **out, const struct anomaly_config *c, struct bus *bus,
		   struct tsdb *db);
/* Append scores to `db` from now on (created with NULL: a store that
 * opened late). Any thread; set once; `db` must outlive the detector. */
void anomaly_set_store(struct anomaly *a, struct tsdb *db);
/* bus_subscribe(bus, anomaly_on_update, a). 0 or GPULSE_ELIMIT. */
int anomaly_subscribe(struct anomaly *a);
/* The subscriber (bus_subscriber_fn); ctx is a struct anomaly. Never blocks
 * on I/O; takes only the GPU's own mutex. */
void anomaly_on_update(void *ctx, const struct gpu_update *u);
/* Accepts NULL. Publishers must have stopped. */
void anomaly_destroy(struct anomaly *a);

/* The current score of each watch of the GPU in bus slot `slot`
 * (scores[ANOMALY_WATCH_COUNT], NaN where there is none: warming up, or no
 * value in the last few ticks). 0 or GPULSE_ENOENT (no such GPU yet). */
int anomaly_scores(struct anomaly *a, int slot, double *scores);

/* anomaly_scores for the GPU with this UUID, in the shape of selfstats.h's
 * anomaly_scores_fn (ctx: a struct anomaly; n must be ANOMALY_WATCH_COUNT).
 * 0, GPULSE_ENOENT or GPULSE_EINVAL. */
int anomaly_scores_uuid(void *ctx, const char *uuid, double *scores, size_t n);

struct anomaly_stats {
	uint64_t ticks_total;          /* ticks judged, all GPUs and watches */
	uint64_t scores_appended_total;/* scores the store took */
	uint64_t store_errors_total;   /* series refused or appends dropped */
	uint64_t models;               /* models allocated */
	uint64_t model_bytes;          /* memory they hold */
};
void anomaly_get_stats(const struct anomaly *a, struct anomaly_stats *out);

#endif
