/* What traced processes did on each GPU over time, for the diagnosis:
 * the interval frames (KERNELS, COPIES, STREAMS) the injection libraries
 * send, kept per GPU in a bounded ring (PROFILE_TIMELINE_SLOTS intervals;
 * the oldest go first) and summed over any range on request. profile_agg
 * keeps totals since a process started; this keeps when.
 *
 * GPUs: a frame names a CUDA device ordinal of its process. The ordinal
 * is mapped to the daemon's GPU index through the process's
 * CUDA_VISIBLE_DEVICES (read from /proc/PID/environ when the daemon may;
 * indices or GPU UUIDs, the latter through the resolver), and taken as
 * the index itself when the variable is unset or unreadable — right on
 * nodes whose GPUs are all of one model (CUDA's default order is then the
 * PCI order NVML uses). A MIG instance (MIG-UUID, or the older
 * MIG-GPU-UUID/GI/CI) maps to its parent GPU through the resolver.
 *
 * Thread-safety: one mutex; the socket thread adds, the diagnosis reads. */
#ifndef GPULSE_PROFILE_TIMELINE_H
#define GPULSE_PROFILE_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"
#include "attrib/split.h"

#define PROFILE_TIMELINE_GPUS 64
#define PROFILE_TIMELINE_SLOTS 2048  /* intervals kept per GPU */
#define PROFILE_TIMELINE_PIDS 64     /* processes told apart in one sum */

/* The daemon's GPU index of the GPU with this UUID ("GPU-..."), or of
 * the GPU that holds the MIG instance with this UUID ("MIG-..."), or -1. */
typedef int profile_uuid_fn(void *ctx, const char *uuid);

/* Sums over a range of one GPU. Amounts from intervals that straddle the
 * range are prorated by overlap. traced_s is the longest any one process
 * was traced in the range (processes trace at the same wall time). */
struct profile_window_sum {
	double traced_s;
	double launches, kernel_s;
	double copy_bytes, copy_s;   /* host<->device (H2D, D2H) */
	double sync_wait_s;
	unsigned processes;
	uint32_t top_pid;            /* the process with the most kernel time, 0: none */
	double top_kernel_s;
};

struct profile_timeline;

/* 0 or GPULSE_ENOMEM; free with profile_timeline_free (accepts NULL).
 * `resolve` may be NULL (UUIDs in CUDA_VISIBLE_DEVICES are then not
 * mapped). */
int profile_timeline_new(struct profile_timeline **out, profile_uuid_fn *resolve, void *ctx);
void profile_timeline_free(struct profile_timeline *t);

/* Take a decoded frame from pid (other types are ignored). */
void profile_timeline_add(struct profile_timeline *t, uint32_t pid, const struct wire_msg *m);

/* Forget pid's device mapping (its connection closed; the pid may be
 * reused). Its intervals stay. */
void profile_timeline_forget(struct profile_timeline *t, uint32_t pid);

/* Sum GPU `gpu` over [a_s, b_s) (Unix seconds). False when nothing traced
 * lies there. */
bool profile_timeline_sum(struct profile_timeline *t, int gpu, double a_s, double b_s,
			  struct profile_window_sum *out);

/* One process's sums over a range of one GPU, for the activity split
 * (split.h): its kernels' GPU time by kind (split_kernel_kind of each
 * name), launches, and how long its library traced the range. */
struct profile_pid_sum {
	uint32_t pid;
	double traced_s;
	double launches;
	double kernel_s[SPLIT_KIND_COUNT];
};

/* Each process's sums over [a_s, b_s) on GPU `gpu` (prorated like
 * profile_timeline_sum) into out[0..max); returns how many processes
 * (those past max are left out). */
size_t profile_timeline_pids(struct profile_timeline *t, int gpu, double a_s, double b_s,
			     struct profile_pid_sum *out, size_t max);

/* The GPU index the ordinal of a CUDA_VISIBLE_DEVICES value maps to, or
 * -1: `visible` NULL means unset (the ordinal itself). Exposed for tests. */
int profile_visible_device(const char *visible, uint32_t ordinal, profile_uuid_fn *resolve,
			   void *ctx);

#endif
