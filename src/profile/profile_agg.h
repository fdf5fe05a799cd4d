/* What gpulsed knows about the CUDA processes that libgpulse-inject.so
 * reports on: per process (pid, comm, uid), per device, per kernel name,
 * copy kind, unified memory, streams and NVTX ranges, summed from the
 * interval frames the library sends (wire.h), plus the library's own
 * status. Cardinality is bounded (DESIGN.md decision 8): at most
 * kernels_per_process named kernels per (process, device) and
 * max_kernel_series named kernels overall; past that a kernel is folded
 * into that device's "other" entry and counted. A kernel heavier than
 * the lightest named one of a full table takes its place (the lightest
 * moves into "other"), so the table keeps the top kernels by GPU time.
 * Processes are kept max(expire) after their library disconnects.
 *
 * Thread-safety: every function takes the aggregate's mutex; the socket
 * thread feeds it while HTTP threads read it. */
#ifndef GPULSE_PROFILE_AGG_H
#define GPULSE_PROFILE_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "profile/profile_emit.h"
#include "wire/wire.h"

#define PROFILE_MAX_DEVICES 16          /* devices per process; more are folded */
#define PROFILE_RANGES_PER_DEVICE 32    /* named NVTX ranges per (process, device) */
#define PROFILE_COMM_MAX 64

struct profile_limits {
	unsigned max_processes;         /* tracked, connected or not; default 512 */
	unsigned kernels_per_process;   /* named kernels per (process, device); default 32 */
	unsigned max_kernel_series;     /* named kernels over all processes; default 4096 */
	int64_t expire_ns;              /* kept after disconnect; default 5 min */
};

/* Counters of what the bounds did, for gpulse_profile_* metrics. */
struct profile_agg_stats {
	uint64_t processes;             /* tracked now */
	uint64_t connected;             /* of which connected */
	uint64_t kernel_series;         /* named kernel entries now */
	uint64_t kernels_folded_total;  /* kernel entries folded into "other" */
	uint64_t ranges_folded_total;
	uint64_t devices_folded_total;  /* frames for a device over PROFILE_MAX_DEVICES */
	uint64_t processes_expired_total;
	uint64_t processes_refused_total; /* table full of connected processes */
	uint64_t frames_unknown_process_total;
};

struct profile_agg;

/* A new, empty aggregate; zero limits take the defaults. The caller frees
 * it with profile_agg_free. 0 or GPULSE_ENOMEM. */
int profile_agg_new(struct profile_agg **out, const struct profile_limits *limits);
void profile_agg_free(struct profile_agg *a);

/* A library said HELLO: track pid (or take up its entry again when it
 * reconnects; a different start time means a new process with a reused
 * pid, whose old statistics are dropped). `comm` is the process name from
 * /proc (NULL: taken from the command line). 0, or GPULSE_ELIMIT when
 * max_processes are tracked and all are connected (counted). */
int profile_agg_hello(struct profile_agg *a, const struct wire_hello *h, const char *comm,
		      int64_t now_mono_ns);
/* The connection of pid closed: start its expiry clock. */
void profile_agg_disconnect(struct profile_agg *a, uint32_t pid, int64_t now_mono_ns);
/* Add one decoded frame from pid (STATUS, KERNELS, COPIES, UVM, STREAMS,
 * RANGES; other types are ignored). GPULSE_ENOENT when pid said no HELLO. */
int profile_agg_frame(struct profile_agg *a, uint32_t pid, const struct wire_msg *m);
/* Forget processes disconnected for longer than the expiry. */
void profile_agg_expire(struct profile_agg *a, int64_t now_mono_ns);
/* True when pid is tracked; its comm is copied to comm[len] if given. */
bool profile_agg_has(struct profile_agg *a, uint32_t pid, char *comm, size_t len);
void profile_agg_stats(struct profile_agg *a, struct profile_agg_stats *out);

/* Emit every per-process series (gpulse_process_*, gpulse_inject_*). */
void profile_agg_emit(struct profile_agg *a, struct profile_emitter *e);

/* The members of /api/v1/processes's "data" (no braces): "processes":[...]. */
int profile_agg_processes_json(struct profile_agg *a, struct buf *out);

/* The members of /api/v1/kernels's "data" (no braces), "kernels":[...],
 * "total":N: the named kernels and "other" entries of pid (< 0: all) on gpu (< 0: all), heaviest first, at most
 * `limit`. Each has launches, seconds, share (of all traced kernel time
 * on that GPU), gpu_ratio (of the traced wall time), mean/p50/p99, and
 * its process's source ("trace" exact, "census" estimated) with, once
 * the process sent a STATUS, observed_ratio (share of time its library
 * observed) and lasting_cost_ratio (what exact tracing left its launches
 * costing; 0: none). /api/v1/processes carries the same three. */
int profile_agg_kernels_json(struct profile_agg *a, struct buf *out, int64_t pid, int64_t gpu,
			     unsigned limit);
/* The same with at most `per_process` rows (the heaviest) of each process
 * on each GPU, 0: all; "total" then counts the rows that cut leaves. What
 * `gpulse top` asks for (per_process=1: each process's top kernel). */
int profile_agg_kernels_top_json(struct profile_agg *a, struct buf *out, int64_t pid, int64_t gpu,
				 unsigned limit, unsigned per_process);

/* The q-quantile (0..1) of a duration histogram in ns (wire.h's buckets,
 * summed into 64 bits), interpolated inside its bucket and clamped to
 * [min_ns, max_ns]. 0 for an empty histogram. */
double profile_hist_quantile(const uint64_t hist[WIRE_HIST_BUCKETS], double q, uint64_t min_ns,
			     uint64_t max_ns);

/* The lower-case name of a wire_mode ("continuous", "profiler-api",
 * "nvtx", "full", "off"), or "unknown". */
const char *profile_mode_name(unsigned mode);
/* The inverse; -1 for an unknown name. */
int profile_mode_parse(const char *name);
/* "trace" or "census" (enum wire_source), or "unknown". */
const char *profile_source_name(unsigned source);
/* "h2d", "d2h", "d2d", "peer", "other", "memset", or "unknown". */
const char *profile_copy_kind_name(unsigned kind);

#endif
