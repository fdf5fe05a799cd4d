/* The launch census of continuous mode: what an application launches, seen
 * through CUPTI's launch callbacks in short, rare windows instead of kernel
 * activity tracing (which, on CUPTI 13.0 and driver 580, leaves every later
 * launch of the process 12-30% dearer for good: docs/internals/inject.md).
 *
 * A window counts launches per kernel (name, grid, block, context) and
 * copies and memsets per kind and bytes, and keeps the GPU durations of a
 * sample of the launches (timed with CUDA events around them by inject.c).
 * At the end of an interval, census_estimate scales what the windows saw
 * to the whole interval: launches by the share of time observed, GPU time
 * per kernel as its sampled mean times its estimated launches.
 *
 * The adders run on application threads inside CUPTI callbacks: no
 * allocation, a bounded table, and the caller serialises (inject.c takes a
 * lock with trylock and counts a busy one as unobserved). Knows nothing of
 * CUPTI: tested in CI from synthetic launches. */
#ifndef GPULSE_INJECT_CENSUS_H
#define GPULSE_INJECT_CENSUS_H

#include <stdint.h>

#include "agg.h"
#include "wire.h"

#define CENSUS_SLOTS     512  /* hash slots for (context, kernel name) */
#define CENSUS_KERNELS   384  /* distinct kernels per interval (75% load); then "other" */
#define CENSUS_CONTEXTS  16

struct census_kernel {
	uint8_t used;
	uint8_t is_other;
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
		uint8_t used;
		uint32_t context;
		uint64_t hash;
		const char *key;
		uint64_t n, ns;
	} m[CENSUS_SLOTS];
	unsigned count;
};

/* A timed launch of `key` in `context` took dur_ns (after the correction). */
void census_means_add(struct census_means *m, const char *key, uint32_t context, uint64_t dur_ns);

/* The mean of `key` in `context` into *mean_ns; 0 when it has none. */
int census_means_get(const struct census_means *m, const char *key, uint32_t context,
		     double *mean_ns);

/* Move the interval's census into `out` and clear `c`. */
void census_take(struct census *c, struct census *out);

/* Scale `c` to a whole interval and add it to `a` as estimated kernels and
 * copies: observed counts divided by `observed` (the share of the
 * interval the windows covered, 0 < observed <= 1), each kernel's GPU time
 * as its sampled mean times its estimated launches; a kernel none of whose
 * launches was timed in the interval takes its mean from `means` (may be
 * NULL), and one with none there either gets no time (*untimed_launches
 * counts those, may be NULL). The histogram and min/max are the
 * interval's samples'. Names are passed through `demangle` (NULL: used as
 * they are) before they reach `a`. */
typedef const char *census_name_fn(const char *mangled, void *user);
void census_estimate(const struct census *c, double observed, const struct census_means *means,
		     struct agg *a, census_name_fn *demangle, void *user, uint64_t *untimed_launches);

#endif
