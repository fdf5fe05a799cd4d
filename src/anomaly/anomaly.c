/* The anomaly detector; see anomaly.h and docs/internals/anomaly.md.
 *
 * Hand-written: the method is a few lines of arithmetic per value (a
 * Huber-clipped running median and mean absolute deviation per baseline),
 * and no C library offers an online, bounded, seasonal robust baseline. */
#include "anomaly/anomaly.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "collect/fields.h"
#include "store/ingest.h"
#include "common/log.h"
#include "promql/queryable.h"
#include "common/stale.h"
#include "common/status.h"
#include "common/utf8.h"

#define DAY_S 86400.0
/* Mean absolute deviation times sqrt(pi/2) estimates a normal standard
 * deviation, so a score reads like a z-score on well-behaved data. */
#define MAD_TO_SIGMA 1.2533141373155003

/* ---- the model ------------------------------------------------------- */

/* One baseline: a location that moves toward each value by a clipped step
 * (a stochastic median when the clip binds, a mean otherwise) and a scale
 * that averages clipped absolute deviations. */
struct cell {
	double m;      /* location */
	double s;      /* scale (sigma-like) */
	double n;      /* values learned, for the 1/n start */
};

struct anomaly_model {
	struct anomaly_params p;
	int contexts;
	double floor;
	double eta_min;        /* from halflife_ticks */
	double season_eta_min; /* from season_halflife_ticks */
	struct cell *cells;    /* contexts * (1 + season_buckets); [c*(1+S)] is short-term */
};

void anomaly_params_default(struct anomaly_params *p, double step_s)
{
	if (!(step_s > 0))
		step_s = 1;
	p->halflife_ticks = 600.0 / step_s;
	p->season_buckets = 24;
	/* A bucket sees 3600 / step values a day; remember a week of them. */
	p->season_halflife_ticks = 7.0 * (DAY_S / p->season_buckets) / step_s;
	p->warmup_ticks = 60.0 / step_s;
	/* Used only once it has seen a day's worth of its hour. */
	p->season_warmup_ticks = (DAY_S / p->season_buckets) / step_s;
	p->clip = 3.0;
}

/* The weight that halves a value's influence after h more values. */
static double eta_for_halflife(double h)
{
	return h > 0 ? 1.0 - pow(0.5, 1.0 / h) : 1.0;
}

int anomaly_model_new(struct anomaly_model **out, const struct anomaly_params *p, int contexts,
		      double floor)
{
	if (contexts < 1 || contexts > ANOMALY_CONTEXTS_MAX || !(floor > 0) ||
	    p->season_buckets < 0 || p->season_buckets > ANOMALY_SEASON_BUCKETS_MAX ||
	    !(p->halflife_ticks >= 1) || !(p->clip > 0) || !(p->warmup_ticks >= 0) ||
	    (p->season_buckets > 0 && !(p->season_halflife_ticks >= 1)))
		return GPULSE_EINVAL;
	struct anomaly_model *m = calloc(1, sizeof *m);
	if (!m)
		return GPULSE_ENOMEM;
	m->p = *p;
	m->contexts = contexts;
	m->floor = floor;
	m->eta_min = eta_for_halflife(p->halflife_ticks);
	m->season_eta_min = p->season_buckets ? eta_for_halflife(p->season_halflife_ticks) : 1;
	m->cells = calloc((size_t)contexts * (size_t)(1 + p->season_buckets), sizeof *m->cells);
	if (!m->cells) {
		free(m);
		return GPULSE_ENOMEM;
	}
	*out = m;
	return GPULSE_OK;
}

void anomaly_model_free(struct anomaly_model *m)
{
	if (!m)
		return;
	free(m->cells);
	free(m);
}

void anomaly_model_set_floor(struct anomaly_model *m, double floor)
{
	if (floor > 0 && isfinite(floor))
		m->floor = floor;
}

static double cell_score(const struct cell *c, double floor, double x)
{
	double s = c->s > floor ? c->s : floor;
	double z = fabs(x - c->m) / s;
	return z < ANOMALY_SCORE_MAX ? z : ANOMALY_SCORE_MAX;
}

/* Learn x. The first value sets the location; then each step is
 * 1/(n+1) until that falls to eta_min (a running mean that turns into an
 * exponential memory), and the deviation it moves by is clipped at `clip`
 * scales, so a spike moves the baseline by a bounded amount and a level
 * shift or drift is learned at a bounded rate. */
static void cell_learn(struct cell *c, double x, double eta_min, double clip, double floor)
{
	if (c->n == 0) {
		c->m = x;
		c->s = 0;
		c->n = 1;
		return;
	}
	double eta = 1.0 / (c->n + 1);
	if (eta < eta_min)
		eta = eta_min;
	double s = c->s > floor ? c->s : floor;
	double lim = clip * s;
	double r = x - c->m;
	double rc = r > lim ? lim : r < -lim ? -lim : r;
	c->m += eta * rc;
	c->s += eta * (fabs(rc) * MAD_TO_SIGMA - c->s);
	c->n += 1;
}

double anomaly_model_observe(struct anomaly_model *m, double t_s, int ctx, double x)
{
	if (ctx < 0 || ctx >= m->contexts || !isfinite(x))
		return NAN;
	int nb = m->p.season_buckets;
	struct cell *base = &m->cells[(size_t)ctx * (size_t)(1 + nb)];
	struct cell *season = NULL;
	if (nb > 0 && isfinite(t_s)) {
		double tod = fmod(t_s, DAY_S);
		if (tod < 0)
			tod += DAY_S;
		int b = (int)(tod / DAY_S * nb);
		if (b >= nb)
			b = nb - 1;
		season = &base[1 + b];
	}
	double score = NAN;
	if (base->n >= m->p.warmup_ticks && base->n > 0) {
		score = cell_score(base, m->floor, x);
		/* A value this hour of the day has held before is not an
		 * anomaly, however new it is to the last minutes: the lower
		 * of the two scores once the bucket has a day of history. */
		if (season && season->n >= m->p.season_warmup_ticks && season->n > 0) {
			double zs = cell_score(season, m->floor, x);
			if (zs < score)
				score = zs;
		}
	}
	cell_learn(base, x, m->eta_min, m->p.clip, m->floor);
	if (season)
		cell_learn(season, x, m->season_eta_min, m->p.clip, m->floor);
	return score;
}

/* ---- the detector ---------------------------------------------------- */

static const struct {
	const char *name;
	int field;
} watch_table[ANOMALY_WATCH_COUNT] = {
#define ANOMALY_WATCH_ROW(id, label, fld) [ANOMALY_W_##id] = {label, fld},
	ANOMALY_WATCHES(ANOMALY_WATCH_ROW)
#undef ANOMALY_WATCH_ROW
};

const char *anomaly_watch_name(enum anomaly_watch w)
{
	return (unsigned)w < ANOMALY_WATCH_COUNT ? watch_table[w].name : "";
}

int anomaly_watch_field(enum anomaly_watch w)
{
	return (unsigned)w < ANOMALY_WATCH_COUNT ? watch_table[w].field : -1;
}

/* Contexts, the condition a value is judged in:
 * - temperature: what the GPU draws (16 bins of 50 W of the power
 *   smoothed over ~10 s, as the die heats and cools with a lag);
 * - power: how busy the SMs are (GPM SM activity in 5 bins; without GPM,
 *   utilization in 3 bins, counted apart), since utilization alone says
 *   100 % for a launch-bound job drawing 130 W and a tensor job at 700 W;
 * - SM clock: load (idle, light, busy) times whether the driver states a
 *   power or thermal reason for holding the clocks down;
 * - memory used: load (a job's working set differs from an idle GPU's);
 * - utilization: alone.
 * Scale floors are the smallest deviation worth a score of 1. */
#define POWER_BIN_W 50.0
#define TEMP_CONTEXTS 16
#define LOAD_CONTEXTS 3
#define ACTIVITY_BINS 5
#define POWER_CONTEXTS (ACTIVITY_BINS + LOAD_CONTEXTS)
#define CLOCK_CONTEXTS (2 * LOAD_CONTEXTS)
#define POWER_SMOOTH_TICKS 10.0
#define ACTIVITY_MAX_AGE_TICKS 5 /* GPM activity older than this is unknown */
/* Clock event reasons that are a stated cause for lower clocks: SW power
 * cap, HW slowdown, SW and HW thermal slowdown, HW power brake. */
#define CAPPING_REASONS (0x4ULL | 0x8ULL | 0x20ULL | 0x40ULL | 0x80ULL)
#define MISSING_TICKS 5          /* a watch with no value this many ticks has no score */

static int watch_contexts(enum anomaly_watch w)
{
	switch (w) {
	case ANOMALY_W_TEMP:
		return TEMP_CONTEXTS;
	case ANOMALY_W_POWER:
		return POWER_CONTEXTS;
	case ANOMALY_W_CLOCK:
		return CLOCK_CONTEXTS;
	case ANOMALY_W_MEM:
		return LOAD_CONTEXTS;
	default:
		return 1;
	}
}

static double watch_floor(enum anomaly_watch w, double mem_total)
{
	switch (w) {
	case ANOMALY_W_UTIL:
		return 0.05;
	case ANOMALY_W_POWER:
		return 10.0;
	case ANOMALY_W_TEMP:
		return 1.5;
	case ANOMALY_W_MEM:
		return mem_total > 0 ? 0.01 * mem_total : 1024.0 * 1024 * 1024;
	case ANOMALY_W_CLOCK:
		return 50e6;
	default:
		return 1.0;
	}
}

struct watch_state {
	struct anomaly_model *model;
	int64_t tick;          /* tick being accumulated; -1 none */
	double sum;
	uint32_t n;
	double score;          /* of the last closed tick; NaN none */
	int64_t score_tick;
	uint32_t ref;          /* store series + 1; 0 not created */
	bool ref_failed;
	bool stored_valid;     /* the store's last value was a score, not a marker */
};

struct gpu_state {
	pthread_mutex_t lock;
	bool ready;            /* models allocated, identity read */
	bool failed;           /* could not allocate: the GPU is skipped */
	char gpu[16], uuid[96], model[96];
	const char *source;    /* gpu_source_label: static, or NULL */
	double load;           /* mean utilization of the last closed tick; NaN unknown */
	double power_smooth;   /* EWMA of closed power ticks; NaN unknown */
	double mem_total;
	double activity;       /* last GPM SM activity; NaN unknown */
	int64_t activity_tick;
	int capping;           /* 1 a capping reason is stated, 0 none, -1 unknown */
	int64_t last_tick;     /* newest tick seen on any watch */
	struct watch_state w[ANOMALY_WATCH_COUNT];
};

struct anomaly {
	struct anomaly_config cfg;
	struct anomaly_params params;
	struct bus *bus;
	struct tsdb *_Atomic db;     /* set once: at create or anomaly_set_store */
	atomic_uint_fast64_t ticks, appended, store_errors, models, model_bytes;
	struct gpu_state gpu[GPU_MAX];
};

void anomaly_config_default(struct anomaly_config *c)
{
	c->step_ns = NS_PER_SEC;
	c->halflife_ns = 600LL * NS_PER_SEC;
	c->season_halflife_ns = 7LL * 86400 * NS_PER_SEC;
	c->warmup_ns = 60LL * NS_PER_SEC;
	c->season_buckets = 24;
}

int anomaly_create(struct anomaly **out, const struct anomaly_config *c, struct bus *bus,
		   struct tsdb *db)
{
	if (c->step_ns < 100 * NS_PER_MS || c->halflife_ns < c->step_ns || c->warmup_ns < 0 ||
	    c->season_buckets < 0 || c->season_buckets > ANOMALY_SEASON_BUCKETS_MAX ||
	    (c->season_buckets > 0 && c->season_halflife_ns < NS_PER_SEC * 3600))
		return GPULSE_EINVAL;
	struct anomaly *a = calloc(1, sizeof *a);
	if (!a)
		return GPULSE_ENOMEM;
	a->cfg = *c;
	a->bus = bus;
	a->db = db;
	double step_s = (double)c->step_ns / 1e9;
	anomaly_params_default(&a->params, step_s);
	a->params.halflife_ticks = (double)c->halflife_ns / (double)c->step_ns;
	a->params.warmup_ticks = (double)c->warmup_ns / (double)c->step_ns;
	a->params.season_buckets = c->season_buckets;
	if (c->season_buckets > 0) {
		double bucket_ticks = DAY_S / c->season_buckets / step_s;
		double days = (double)c->season_halflife_ns / 1e9 / DAY_S;
		a->params.season_halflife_ticks = days * bucket_ticks;
		a->params.season_warmup_ticks = bucket_ticks;
	}
	for (int g = 0; g < GPU_MAX; g++) {
		pthread_mutex_init(&a->gpu[g].lock, NULL);
		a->gpu[g].load = NAN;
		a->gpu[g].power_smooth = NAN;
		a->gpu[g].last_tick = -1;
		a->gpu[g].activity = NAN;
		a->gpu[g].capping = -1;
		for (int w = 0; w < ANOMALY_WATCH_COUNT; w++) {
			a->gpu[g].w[w].tick = -1;
			a->gpu[g].w[w].score = NAN;
		}
	}
	*out = a;
	return GPULSE_OK;
}

int anomaly_subscribe(struct anomaly *a)
{
	return bus_subscribe(a->bus, anomaly_on_update, a);
}

void anomaly_destroy(struct anomaly *a)
{
	if (!a)
		return;
	for (int g = 0; g < GPU_MAX; g++) {
		for (int w = 0; w < ANOMALY_WATCH_COUNT; w++)
			anomaly_model_free(a->gpu[g].w[w].model);
		pthread_mutex_destroy(&a->gpu[g].lock);
	}
	free(a);
}

void anomaly_get_stats(const struct anomaly *a, struct anomaly_stats *out)
{
	struct anomaly *m = (struct anomaly *)(uintptr_t)a; /* atomics are read-only here */
	out->ticks_total = atomic_load(&m->ticks);
	out->scores_appended_total = atomic_load(&m->appended);
	out->store_errors_total = atomic_load(&m->store_errors);
	out->models = atomic_load(&m->models);
	out->model_bytes = atomic_load(&m->model_bytes);
}

/* First update of a GPU: read its identity (labels) and allocate its
 * models. Called with the GPU's lock held. */
static int gpu_init(struct anomaly *a, int g)
{
	struct gpu_state *gs = &a->gpu[g];
	struct gpu_snapshot *s = malloc(sizeof *s);
	if (!s)
		return GPULSE_ENOMEM;
	if (bus_read(a->bus, g, s) != GPULSE_OK) {
		free(s);
		return GPULSE_ENOENT;
	}
	snprintf(gs->gpu, sizeof gs->gpu, "%d", s->id.index >= 0 ? s->id.index : 0);
	utf8_clean(gs->uuid, sizeof gs->uuid, s->id.uuid);
	utf8_clean(gs->model, sizeof gs->model, s->id.name);
	gs->source = gpu_source_label(&s->id);
	if (s->valid & FIELD_BIT(F_MEM_TOTAL))
		gs->mem_total = s->v[F_MEM_TOTAL];
	free(s);
	for (int w = 0; w < ANOMALY_WATCH_COUNT; w++) {
		int nctx = watch_contexts((enum anomaly_watch)w);
		int rc = anomaly_model_new(&gs->w[w].model, &a->params, nctx,
					   watch_floor((enum anomaly_watch)w, gs->mem_total));
		if (rc)
			return rc;
		atomic_fetch_add(&a->models, 1);
		atomic_fetch_add(&a->model_bytes, sizeof(struct anomaly_model) +
						  (uint64_t)nctx * (uint64_t)(1 + a->params.season_buckets) *
							  sizeof(struct cell));
	}
	gs->ready = true;
	return GPULSE_OK;
}

static int load_bin(double load)
{
	return load < 0.1 ? 0 : load < 0.6 ? 1 : 2;
}

static int watch_context(const struct gpu_state *gs, enum anomaly_watch w)
{
	switch (w) {
	case ANOMALY_W_TEMP: {
		if (!isfinite(gs->power_smooth))
			return -1;
		int b = (int)(gs->power_smooth / POWER_BIN_W);
		return b < 0 ? 0 : b >= TEMP_CONTEXTS ? TEMP_CONTEXTS - 1 : b;
	}
	case ANOMALY_W_POWER:
		if (isfinite(gs->activity) && gs->activity_tick + ACTIVITY_MAX_AGE_TICKS >= gs->last_tick) {
			double x = gs->activity;
			return x < 0.05 ? 0 : x < 0.25 ? 1 : x < 0.5 ? 2 : x < 0.85 ? 3 : 4;
		}
		return isfinite(gs->load) ? ACTIVITY_BINS + load_bin(gs->load) : -1;
	case ANOMALY_W_CLOCK:
		if (!isfinite(gs->load))
			return -1;
		return load_bin(gs->load) + (gs->capping == 1 ? LOAD_CONTEXTS : 0);
	case ANOMALY_W_MEM:
		return isfinite(gs->load) ? load_bin(gs->load) : -1;
	default:
		return 0;
	}
}

void anomaly_set_store(struct anomaly *a, struct tsdb *db)
{
	if (a)
		atomic_store_explicit(&a->db, db, memory_order_release);
}

/* Append one value of a watch's score series, creating the series on
 * first use. Called with the GPU's lock held. The store is read once: it
 * may appear (anomaly_set_store) while this runs. */
static void store_score(struct anomaly *a, struct gpu_state *gs, int w, int64_t t_ms, double v)
{
	struct watch_state *ws = &gs->w[w];
	struct tsdb *db = atomic_load_explicit(&a->db, memory_order_acquire);
	if (!db || ws->ref_failed)
		return;
	if (!ws->ref) {
		struct label l[INGEST_GPU_LABELS_MAX];
		size_t n = ingest_gpu_labels(l, ANOMALY_METRIC, gs->gpu, gs->uuid, gs->model, gs->source,
					     "metric", watch_table[w].name);
		char err[256];
		uint32_t r;
		if (tsdb_series(db, l, n, &r, err, sizeof err) != GPULSE_OK) {
			ws->ref_failed = true;
			atomic_fetch_add(&a->store_errors, 1);
			log_warn("anomaly: series %s{metric=\"%s\"} of GPU %s refused: %s", ANOMALY_METRIC,
				 watch_table[w].name, gs->gpu, err);
			return;
		}
		ws->ref = r + 1;
	}
	if (tsdb_append(db, ws->ref - 1, t_ms, v) == GPULSE_OK)
		atomic_fetch_add(&a->appended, 1);
	else
		atomic_fetch_add(&a->store_errors, 1);
}

/* Close watch w's tick: judge its mean, update the contexts it feeds. */
static void close_tick(struct anomaly *a, struct gpu_state *gs, int w)
{
	struct watch_state *ws = &gs->w[w];
	double x = ws->sum / ws->n;
	double step_s = (double)a->cfg.step_ns / 1e9;
	/* The tick's end: the time the score speaks for. */
	double t_end_s = (double)(ws->tick + 1) * step_s;
	if (w == ANOMALY_W_MEM)
		anomaly_model_set_floor(ws->model, watch_floor(ANOMALY_W_MEM, gs->mem_total));
	int ctx = watch_context(gs, (enum anomaly_watch)w);
	double score = ctx >= 0 ? anomaly_model_observe(ws->model, t_end_s, ctx, x) : NAN;
	if (w == ANOMALY_W_UTIL)
		gs->load = x;
	else if (w == ANOMALY_W_POWER)
		gs->power_smooth = isfinite(gs->power_smooth)
					   ? gs->power_smooth + (x - gs->power_smooth) / POWER_SMOOTH_TICKS
					   : x;
	atomic_fetch_add(&a->ticks, 1);
	ws->score = score;
	ws->score_tick = ws->tick;
	int64_t t_ms = (ws->tick + 1) * (a->cfg.step_ns / NS_PER_MS);
	if (isfinite(score)) {
		store_score(a, gs, w, t_ms, score);
		ws->stored_valid = true;
	} else if (ws->stored_valid) {
		store_score(a, gs, w, t_ms, stale_nan());
		ws->stored_valid = false;
	}
}

void anomaly_on_update(void *ctx, const struct gpu_update *u)
{
	struct anomaly *a = ctx;
	if (u->gpu < 0 || u->gpu >= GPU_MAX || u->wall_ns <= 0)
		return;
	struct gpu_state *gs = &a->gpu[u->gpu];
	pthread_mutex_lock(&gs->lock);
	if (!gs->ready) {
		if (gs->failed || gpu_init(a, u->gpu) != GPULSE_OK) {
			if (!gs->failed)
				log_warn("anomaly: GPU %d is not watched (cannot read it or allocate its models)",
					 u->gpu);
			gs->failed = true;
			goto out;
		}
	}
	if ((u->mask & u->valid & FIELD_BIT(F_MEM_TOTAL)) && u->v[F_MEM_TOTAL] > 0)
		gs->mem_total = u->v[F_MEM_TOTAL];
	int64_t tick = u->wall_ns / a->cfg.step_ns;
	if (tick > gs->last_tick)
		gs->last_tick = tick;
	if (u->mask & FIELD_BIT(F_GPM_SM)) {
		bool ok = (u->valid & FIELD_BIT(F_GPM_SM)) && isfinite(u->v[F_GPM_SM]);
		gs->activity = ok ? u->v[F_GPM_SM] : NAN;
		gs->activity_tick = tick;
	}
	if (u->mask & FIELD_BIT(F_CLOCK_REASONS)) {
		double r = u->v[F_CLOCK_REASONS];
		if (!(u->valid & FIELD_BIT(F_CLOCK_REASONS)) || !(r >= 0 && r < 18446744073709551616.0))
			gs->capping = -1;
		else
			gs->capping = ((uint64_t)r & CAPPING_REASONS) != 0;
	}
	/* Watches in table order: utilization and power close before the
	 * watches whose context they set. */
	for (int w = 0; w < ANOMALY_WATCH_COUNT; w++) {
		struct watch_state *ws = &gs->w[w];
		uint64_t bit = FIELD_BIT(watch_table[w].field);
		if (!(u->mask & u->valid & bit) || !isfinite(u->v[watch_table[w].field]))
			continue;
		if (tick < ws->tick)
			continue; /* late: the tick was judged already */
		if (tick > ws->tick) {
			if (ws->n > 0)
				close_tick(a, gs, w);
			ws->tick = tick;
			ws->sum = 0;
			ws->n = 0;
		}
		ws->sum += u->v[watch_table[w].field];
		ws->n++;
	}
out:
	pthread_mutex_unlock(&gs->lock);
}

int anomaly_scores(struct anomaly *a, int slot, double *scores)
{
	if (slot < 0 || slot >= GPU_MAX)
		return GPULSE_ENOENT;
	struct gpu_state *gs = &a->gpu[slot];
	int rc = GPULSE_OK;
	pthread_mutex_lock(&gs->lock);
	if (!gs->ready) {
		rc = GPULSE_ENOENT;
	} else {
		for (int w = 0; w < ANOMALY_WATCH_COUNT; w++) {
			const struct watch_state *ws = &gs->w[w];
			/* A watch that stopped reporting while others go on has
			 * no current score. */
			bool fresh = ws->score_tick + 1 + MISSING_TICKS >= gs->last_tick;
			scores[w] = fresh ? ws->score : NAN;
		}
	}
	pthread_mutex_unlock(&gs->lock);
	return rc;
}

int anomaly_scores_uuid(void *ctx, const char *uuid, double *scores, size_t n)
{
	struct anomaly *a = ctx;
	if (n != ANOMALY_WATCH_COUNT)
		return GPULSE_EINVAL;
	int slot = bus_find_uuid(a->bus, uuid);
	return slot < 0 ? GPULSE_ENOENT : anomaly_scores(a, slot, scores);
}
