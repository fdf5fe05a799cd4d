/* In-process aggregation of CUDA activity for libgpulse-inject.so: kernels,
 * copies and memsets, unified-memory counters, per-stream busy/gap/sync
 * time and NVTX ranges, per device and context. It knows nothing of CUPTI
 * (records.c turns activity records into the plain records below), so the
 * arithmetic is tested in CI from synthetic records.
 *
 * Every table has a fixed size (no allocation after agg_create): a kernel
 * name past the table's capacity is folded into its scope's "other" entry,
 * any other record past a bound is dropped, and both are counted. An agg
 * is not thread-safe: the caller serialises access (the library holds one
 * mutex, lib.mu, around the adders and agg_take). */
#ifndef GPULSE_INJECT_AGG_H
#define GPULSE_INJECT_AGG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "wire/wire.h"

#define AGG_SCOPES         16   /* distinct (device, context) pairs */
#define AGG_KERNEL_SLOTS   512  /* hash slots for (scope, kernel name) */
#define AGG_KERNELS_MAX    384  /* distinct kernels kept per interval (75% load) */
#define AGG_COPY_SLOTS     (AGG_SCOPES * WIRE_COPY_KIND_COUNT * 2)
#define AGG_STREAM_SLOTS   512
#define AGG_STREAMS_MAX    384
#define AGG_RANGE_SLOTS    256
#define AGG_RANGES_MAX     192
#define AGG_TOPK_DEFAULT   64   /* kernels sent per scope and interval */
#define AGG_OTHER_NAME     "other"
/* The stream id for synchronisations that are not tied to one stream
 * (context and device synchronize). */
#define AGG_STREAM_NONE    0xffffffffu

struct agg_kernel_rec {
	const char *name;          /* demangled; cut at WIRE_NAME_MAX bytes */
	uint32_t device, context, stream;
	uint64_t start_ns, end_ns; /* GPU timestamps, same clock for all records */
	uint32_t grid[3], block[3];
	uint32_t registers, shared_bytes;
};

struct agg_copy_rec {
	uint8_t kind;              /* enum wire_copy_kind; WIRE_COPY_MEMSET for memsets */
	uint8_t pinned;            /* 1: pinned or device memory on the host side */
	uint32_t device, context, stream;
	uint64_t start_ns, end_ns;
	uint64_t bytes;
};

enum agg_uvm_counter {
	AGG_UVM_BYTES_H2D, AGG_UVM_BYTES_D2H, AGG_UVM_CPU_FAULTS, AGG_UVM_GPU_FAULTS,
	AGG_UVM_THRASHING, AGG_UVM_THROTTLING, AGG_UVM_COUNTER_COUNT
};

struct agg_sync_rec {
	uint32_t device, context;
	uint32_t stream;           /* AGG_STREAM_NONE: context/device-wide */
	uint64_t start_ns, end_ns; /* host time spent waiting */
};

struct agg_kernel_slot {
	uint64_t hash;
	uint16_t scope;
	uint8_t used;
	uint8_t is_other;
	struct wire_kernel k;
};

struct agg_copy_slot {
	uint8_t used;
	uint16_t scope;
	struct wire_copy c;
};

struct agg_stream_slot {
	uint8_t used;
	uint8_t active;            /* saw an operation in this interval */
	uint16_t scope;
	uint64_t last_end_ns;      /* end of the latest operation; 0: none since the window began */
	struct wire_stream s;
};

struct agg_range_slot {
	uint64_t hash;
	uint8_t used;
	struct wire_range r;
};

struct agg_scope {
	uint32_t device, context;
};

struct agg {
	unsigned nscopes;
	struct agg_scope scopes[AGG_SCOPES];
	unsigned nkernels, nstreams, nranges;
	struct agg_kernel_slot kernels[AGG_KERNEL_SLOTS];
	struct agg_copy_slot copies[AGG_COPY_SLOTS];
	struct agg_stream_slot streams[AGG_STREAM_SLOTS];
	struct agg_range_slot ranges[AGG_RANGE_SLOTS];
	uint64_t uvm[AGG_SCOPES][AGG_UVM_COUNTER_COUNT];
	uint8_t uvm_seen[AGG_SCOPES];
	/* Counters (cumulative within the agg; agg_take hands them over). */
	uint64_t records;          /* records accepted */
	uint64_t dropped;          /* records dropped at a bound (scopes, streams, ranges) */
	uint64_t kernels_other;    /* launches folded into "other" because the table was full */
};

/* Allocate an empty agg. NULL when out of memory (the caller steps aside).
 * Free with agg_destroy (accepts NULL). */
struct agg *agg_create(void);
void agg_destroy(struct agg *a);
/* Forget everything, keep the allocation. */
void agg_clear(struct agg *a);

/* Adders. Each returns 0, or GPULSE_ELIMIT when the record was dropped at a
 * bound (counted in a->dropped; a kernel never is: it folds into "other"). */
int agg_add_kernel(struct agg *a, const struct agg_kernel_rec *r);
int agg_add_copy(struct agg *a, const struct agg_copy_rec *r);
int agg_add_uvm(struct agg *a, uint32_t device, enum agg_uvm_counter c, uint64_t value);
int agg_add_sync(struct agg *a, const struct agg_sync_rec *r);
int agg_add_range(struct agg *a, const char *name, uint64_t duration_ns);

/* Estimated statistics (continuous mode's census, census.h) rather than
 * records: `k` (its name, launches, GPU time, histogram and shape) is
 * merged into the kernel of that scope and name, or its "other" entry when
 * the table is full; a copy kind's count and bytes likewise (no time: the
 * census does not see how long copies take). 0 or GPULSE_ELIMIT (no scope
 * left; counted). */
int agg_add_kernel_stats(struct agg *a, uint32_t device, uint32_t context,
			 const struct wire_kernel *k);
int agg_add_copy_stats(struct agg *a, uint32_t device, uint32_t context, uint8_t kind,
		       uint8_t pinned, uint64_t count, uint64_t bytes);

/* A tracing window begins: gaps on a stream are measured only between
 * operations seen inside one window, so time with tracing off never
 * counts as idle. */
void agg_window_begin(struct agg *a);

/* Move the interval's statistics into `out` (overwritten) and clear them
 * in `a`, keeping each stream's continuity (the end of its last
 * operation) so a gap across the interval boundary is still measured. */
void agg_take(struct agg *a, struct agg *out);

/* Add everything in `src` into `dst` (for whole-run totals). Records that
 * do not fit dst's bounds are counted there like any other drop. */
void agg_merge(struct agg *dst, const struct agg *src);

/* Histogram bucket of a duration (WIRE_HIST_BUCKETS buckets of powers of 2). */
unsigned agg_hist_bucket(uint64_t ns);
/* Estimate the q-quantile (0 < q <= 1) of a histogram, interpolating
 * inside the bucket and clamping to [min_ns, max_ns]. 0 when empty. */
uint64_t agg_hist_quantile(const uint32_t hist[WIRE_HIST_BUCKETS], uint64_t min_ns,
			   uint64_t max_ns, double q);

/* Number of kernel entries (including "other" entries). */
unsigned agg_kernel_count(const struct agg *a);
/* Find a kernel entry by scope and name (or AGG_OTHER_NAME for the fold). */
const struct wire_kernel *agg_find_kernel(const struct agg *a, uint32_t device,
					  uint32_t context, const char *name);
const struct wire_copy *agg_find_copy(const struct agg *a, uint32_t device, uint32_t context,
				      uint8_t kind, uint8_t pinned);
const struct wire_stream *agg_find_stream(const struct agg *a, uint32_t device,
					  uint32_t context, uint32_t stream);
const struct wire_range *agg_find_range(const struct agg *a, const char *name);
/* UVM counter of a device summed over its contexts. */
uint64_t agg_uvm_total(const struct agg *a, uint32_t device, enum agg_uvm_counter c);

/* The frames of one interval. Encoding needs scratch arrays (a few
 * hundred KiB), allocated once by agg_encoder_create. */
struct agg_encoder;
struct agg_encoder *agg_encoder_create(void);
void agg_encoder_destroy(struct agg_encoder *e);

/* Called with each encoded frame; the bytes are valid during the call.
 * Returns 0 to go on, anything else to stop (agg_encode returns it). */
typedef int agg_emit_fn(const uint8_t *frame, size_t len, void *user);

struct agg_interval {
	uint64_t start_ns, end_ns; /* wall clock */
	uint64_t traced_ns;        /* time tracing was on within it */
	unsigned topk;             /* kernels per scope before folding into "other" */
};

/* Encode `a` as KERNELS, COPIES, UVM, STREAMS and RANGES frames (one per
 * scope and kind that has data, split when an array is over its frame's
 * bound). Kernels past the top `topk` by total time in a scope are folded
 * into that scope's "other" entry; their launches are added to
 * *folded_launches (may be NULL). Returns 0, GPULSE_ELIMIT if a frame could
 * not be encoded (counted by the caller), or emit's non-zero result. */
int agg_encode(struct agg_encoder *e, const struct agg *a, const struct agg_interval *iv,
	       agg_emit_fn *emit, void *user, uint64_t *folded_launches);

/* Write `a` as one JSON object (kernels with p50/p99, copies with
 * bandwidth, UVM, streams, ranges) followed by the fields in `extra`
 * (pre-formatted JSON members, may be NULL). 0 or GPULSE_EIO. */
int agg_dump_json(const struct agg *a, FILE *f, const char *extra);

/* Name of a copy kind in dumps and logs ("H2D", ..., "memset"). */
const char *agg_copy_kind_name(unsigned kind);

#endif
