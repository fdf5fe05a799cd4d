/* The launch census of continuous mode: what an application launches, seen
 * through CUPTI's launch callbacks in short, rare windows instead of kernel
 * activity tracing (which, on CUPTI 13.0 and driver 580, leaves every later
 * launch of the process 12-30% dearer for good: docs/internals/inject.md).
 *
 * A window counts launches per kernel (name, grid, block, context) and
 * copies and memsets per kind and bytes, and keeps the GPU durations of a
 * sample of the launches (timed with CUDA events around them by
 * census_windows.c).
 * At the end of an interval, census_estimate stands what the windows saw
 * for the whole interval: the launches they counted, plus each kernel's
 * rate over the recent windows (census_pool: counts and observed time of
 * the last half-minute or so, pooled) times the interval's time no window
 * observed; GPU time per kernel as its sampled mean times its estimated
 * launches. Pooling weighs each window by the time it observed: a short
 * window (the first one, which closes after a few milliseconds of a
 * program's start-up) counts for its few milliseconds, not for its whole
 * interval, which on the H200 made a kernel of 1% of the launches come out
 * 9-17% off when each interval was scaled by its own windows alone.
 *
 * The adders run on application threads inside CUPTI callbacks: no
 * allocation, a bounded table, and the caller serialises
 * (census_windows.c takes a lock with trylock and counts a busy one as
 * unobserved). Knows nothing of CUPTI: tested in CI from synthetic
 * launches. */
#ifndef GPULSE_INJECT_CENSUS_H
#define GPULSE_INJECT_CENSUS_H

#include <stdint.h>

#include "inject/agg.h"
#include "wire/wire.h"

#define CENSUS_SLOTS     512  /* hash slots for (context, kernel name) */
#define CENSUS_KERNELS   384  /* distinct kernels per interval (75% load); then "other" */
#define CENSUS_CONTEXTS  16

/* A launch's size class: the bit length of its threads (grid times
 * block; 0 for none, 64 past 64 bits). A kernel's launches are kept apart by class, each
 * with its own count and samples, since one name may run at very
 * different sizes (a GEMM of a prompt and of one token): the GPU time of
 * the name is then each class's mean times its launches, summed, where a
 * mean over all its launches would be set by whichever size the few
 * samples met. */
uint8_t census_class(const uint32_t grid[3], const uint32_t block[3]);

struct census_kernel {
	uint8_t used;
	uint8_t is_other;
	uint8_t cls;               /* census_class of its launches */
	uint32_t context;          /* CUPTI context id */
	uint32_t device;
	uint64_t hash;
	const char *key;           /* the callback's symbol name (a pointer
	                            * that stays valid per function, as
	                            * CUPTI's names do); NULL for "other" */
	uint64_t launches;         /* observed in windows */
	uint32_t grid[3], block[3];
	uint32_t shared_bytes;
	/* Sampled GPU durations (timed launches of this kernel). */
	uint64_t sampled, sampled_ns, min_ns, max_ns;
	uint32_t hist[WIRE_HIST_BUCKETS];
};

struct census_copies {
	uint32_t context, device;
	uint64_t count[WIRE_COPY_KIND_COUNT];
	uint64_t bytes[WIRE_COPY_KIND_COUNT];
};

struct census {
	unsigned nkernels, ncontexts;
	struct census_kernel k[CENSUS_SLOTS];
	struct census_copies copies[CENSUS_CONTEXTS];
	uint64_t launches;         /* observed launches, all kernels */
	uint64_t copies_seen;      /* observed copies and memsets */
	uint64_t folded;           /* launches folded into "other" (table full) */
	uint64_t dropped;          /* copies past the context bound */
	uint64_t samples;          /* timed launches folded in */
};

void census_clear(struct census *c);

/* One observed launch of `name` (the callback's symbol name, kept by
 * pointer: the callback's hot path hashes no string; NULL is "(unnamed)")
 * in CUPTI context `context` of `device`. Returns the kernel's slot (for
 * census_sample), never fails: a full table folds the launch into the
 * context's "other" entry (counted). */
int census_launch(struct census *c, const char *name, uint32_t context, uint32_t device,
		  const uint32_t grid[3], const uint32_t block[3], uint32_t shared_bytes);

/* A timed launch of the kernel `name` in `slot` took dur_ns on the GPU. A
 * slot from an earlier interval (census_take cleared it) may hold another
 * kernel now; `name` (the pointer census_launch was given) guards against
 * that: the sample is dropped. */
void census_sample(struct census *c, int slot, const char *name, uint64_t dur_ns);

/* One observed copy (enum wire_copy_kind; WIRE_COPY_MEMSET for memsets). */
void census_copy(struct census *c, uint32_t context, uint32_t device, uint8_t kind,
		 uint64_t bytes);

/* Each kernel's timed launches over the process's life (never cleared, a
 * bounded table: kernels past CENSUS_SLOTS are not kept): the mean that
 * stands for a kernel's launches in an interval none of whose samples was
 * read in it (the interval's flush came between a launch and the reading
 * of its events, or its few launches there drew no sample). Same caller
 * serialisation as the census. */
struct census_means {
	struct census_mean {
		uint8_t used, cls;
		uint32_t context;
		uint64_t hash;
		const char *key;
		uint64_t n, ns;
		uint64_t drawn;    /* launches drawn for timing (census_means_draw) */
		uint64_t discarded; /* ... whose sample was left out (census_means_discard) */
		uint32_t unclear;  /* unheld samples left out as unclear (census_means_unclear) */
		uint8_t hold_busy; /* its launches are held on a busy stream too */
	} m[CENSUS_SLOTS];
	unsigned count;
};

/* A timed launch of `key` of size class `cls` in `context` took dur_ns
 * (after the correction). */
void census_means_add(struct census_means *m, const char *key, uint32_t context, uint8_t cls,
		      uint64_t dur_ns);

/* The mean of `key` of class `cls` in `context` into *mean_ns; 0 when it
 * has none. */
int census_means_get(const struct census_means *m, const char *key, uint32_t context, uint8_t cls,
		     double *mean_ns);

/* One launch in how many to time, for a kernel (size class) with `drawn`
 * launches drawn for timing so far, `every` being GPULSE_SAMPLE_EVERY:
 * every launch until SAMPLES_FIRST, then one in every / SAMPLES_EARLY_DIV
 * until SAMPLES_ENOUGH, then one in every x SAMPLE_SPARSE: its mean is
 * known well, and a sample costs the application the same whatever it
 * teaches (on the H200 the samples were about half of what a census
 * window cost a training step). The early samples are what a kernel
 * launched once a training step needs: at one in 32 of the launches the
 * windows observed, an H100 training step's kernels of ~550 launches in
 * 5 s drew 0-3 timed launches each (5,316 launches of one process had no
 * mean at all). They cost SAMPLES_ENOUGH timed launches per kernel and
 * size once in the process's life, not per window. */
#define SAMPLES_FIRST     8
#define SAMPLES_EARLY_DIV 4
#define SAMPLES_ENOUGH    32
#define SAMPLE_SPARSE     16
uint64_t census_sample_stride(uint64_t drawn, unsigned every);

/* How many launches of `key` of class `cls` in `context` were drawn for
 * timing; census_means_draw counts one more. The sampler's rate
 * follows the launches drawn, not the samples read, which come a tick
 * later: a new kernel timed at every launch until SAMPLES_FIRST would
 * otherwise draw every launch of that tick. A kernel with no room counts
 * none. */
uint64_t census_means_drawn(const struct census_means *m, const char *key, uint32_t context,
			    uint8_t cls);
void census_means_draw(struct census_means *m, const char *key, uint32_t context, uint8_t cls);
/* A drawn launch's sample was left out (its events failed, or it was
 * ambiguous): its draw is given back, so census_means_drawn counts only
 * draws that gave or may give a sample, until SAMPLES_DRAWN_MAX draws in
 * all (a kernel whose samples are nearly always left out is then sampled
 * sparsely all the same: the early rate costs a launch each). */
#define SAMPLES_DRAWN_MAX (4 * SAMPLES_ENOUGH)
void census_means_discard(struct census_means *m, const char *key, uint32_t context, uint8_t cls);

/* An unheld sample of `key` of class `cls` in `context` was left out as
 * unclear: its stream was busy as timing began and drained before the
 * launch call returned (the start event had completed by then, or the
 * floor was not met), so the interval holds part of the launch call. A
 * kernel whose launch call outlasts the work queued before it meets that
 * case every time: on the H100 a cuDNN flash-attention backward kernel
 * (a 24 us kernel, 3.7% of a training step's GPU time) had all its
 * samples so and read no time at all. Once CENSUS_HOLD_BUSY_AFTER of a
 * kernel's samples were unclear and they outnumber its timed ones, its
 * later draws are held on a busy stream as on an idle one (the stream
 * waits on the launch's exit, so the GPU meets start, kernel and end
 * back to back): census_means_hold_busy says so from then on. The cost
 * is what holding costs where the stream would have drained anyway: the
 * rest of the launch call, once per drawn sample. */
#define CENSUS_HOLD_BUSY_AFTER 4
void census_means_unclear(struct census_means *m, const char *key, uint32_t context, uint8_t cls);
int census_means_hold_busy(const struct census_means *m, const char *key, uint32_t context,
			   uint8_t cls);

/* How many timed launches of `key` of class `cls` in `context` the table
 * holds (0 when none, or the kernel has no room). */
uint64_t census_means_count(const struct census_means *m, const char *key, uint32_t context,
			    uint8_t cls);

/* Whether a sample's floor (its floor and start events' interval) shows
 * the two met back to back: at most half again the mean of the `n` floors
 * summing to `sum` so far; taken as met while fewer than 8 are known. An
 * unheld sample whose floor was not met holds the launch call and is left
 * out (census_windows.c, census_poll_samples). */
int census_floor_met(uint64_t floor_ns, uint64_t sum, uint64_t n);

/* How many floors (the GPU's step from one event to the next, met back to
 * back: a held sample's f -> a) to take off a held sample's interval for
 * the launch's and the end event's own steps. `configured` >= 0
 * (GPULSE_SAMPLE_OFFSET) wins; else the device's calibration (calib.h,
 * measured in the process on the GPU at hand) when it succeeded; else the
 * one an earlier process measured on this device and driver (`kept`, in
 * floors; < 0: none); else 2: one step each, the model, which on the
 * H200 took 0.15-0.35 us too much off every sample. *source (may be
 * NULL) says which: "configured", "calibrated", "kept" or "model". No
 * figure is kept per GPU model. */
struct calib_result;
double census_offset_floors(double configured, const struct calib_result *cal, double kept, const char **source);

/* Move the interval's census into `out` and clear `c`. */
void census_take(struct census *c, struct census *out);

/* The recent windows' launches per kernel and copies per kind, with the
 * time they observed, pooled with exponential forgetting (half-life
 * CENSUS_POOL_HALF_LIFE_NS of interval time): the rates that stand for the
 * time no window observed. A bounded table (CENSUS_SLOTS); a kernel whose
 * pooled count has decayed below CENSUS_POOL_FORGET is let go when room
 * is needed, and one that finds no room is counted in `unpooled` (its
 * observed launches are still published, its unobserved time is not).
 * Used by the library's thread only. */
#define CENSUS_POOL_HALF_LIFE_NS (30ull * 1000000000ull)
#define CENSUS_POOL_FORGET       0.05
struct census_pool {
	struct census_pooled {
		uint8_t used, is_other, cls;
		uint32_t context, device;
		uint64_t hash;
		const char *key;           /* as in the census; NULL for "other" */
		double launches;           /* decayed launches the windows counted */
		double carry;              /* estimated, not yet published (< 1) */
		uint32_t grid[3], block[3];
		uint32_t shared_bytes;
	} k[CENSUS_SLOTS];
	unsigned count;
	struct census_pooled_copies {
		uint32_t context, device;
		double count[WIRE_COPY_KIND_COUNT], bytes[WIRE_COPY_KIND_COUNT];
		double carry[WIRE_COPY_KIND_COUNT], carry_bytes[WIRE_COPY_KIND_COUNT];
	} copies[CENSUS_CONTEXTS];
	unsigned ncontexts;
	double observed_ns;        /* decayed time the windows observed */
	uint64_t unpooled;         /* kernels that found no room */
	struct census_pooled scratch[CENSUS_SLOTS]; /* for rebuilding the table */
};

/* Fold an interval's census into the pool: first everything decays by
 * the interval's length (interval_ns), then `c`'s counts and
 * `observed_ns` (the time its windows observed, from the process's first
 * launch on) are added. */
void census_pool_add(struct census_pool *p, const struct census *c, uint64_t observed_ns,
		     uint64_t interval_ns);

/* The interval's estimates into `a`: each kernel's observed launches in
 * `c` plus its pooled rate times `unobserved_ns` (the interval's time,
 * from the process's first launch on, that no window observed), rounded
 * with the remainder carried to the next interval so that rates under a
 * launch an interval are not lost; kernels the pool has and `c` has not
 * get the pooled part alone. Each kernel's GPU time is its sampled mean
 * times its estimated launches: the interval's own samples, else its mean
 * from `means` (may be NULL), else none (*untimed_launches counts those,
 * may be NULL). The histogram and min/max are the interval's samples'.
 * Copies and memsets likewise. Names pass through `demangle` (NULL: used
 * as they are) before they reach `a`. Returns the launches estimated. */
typedef const char *census_name_fn(const char *mangled, void *user);
uint64_t census_estimate(const struct census *c, struct census_pool *p, uint64_t unobserved_ns,
			 const struct census_means *means, struct agg *a, census_name_fn *demangle,
			 void *user, uint64_t *untimed_launches);

#endif
