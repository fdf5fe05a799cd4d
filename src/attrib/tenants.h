/* Activity per process on shared GPUs, interval after interval: the split
 * (split.h) run on each interval of each GPU or MIG instance, with what it
 * learns kept between intervals (the calibration of each scope, each
 * process's activity measured while it was alone), GPU time summed per
 * process and per owner (pod, container, job, user: the attribution
 * labels), and everything bounded (DESIGN.md, decision 8): at most
 * max_rows process rows; a process past that is folded into its GPU's
 * "other" row and counted; a process not seen for stale_ns is dropped,
 * and its owner's row with it once no process of the owner remains for
 * as long. Plain structs in and out: the daemon feeds it from the bus and
 * the profiling timeline, the exporter reads it.
 *
 * Thread-safe: one mutex; the bus's publisher feeds, the scrapes read. */
#ifndef GPULSE_TENANTS_H
#define GPULSE_TENANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attrib/owner.h"
#include "attrib/split.h"

#define TENANTS_GPUS 64
#define TENANTS_SCOPES 8                 /* the whole GPU, and up to 7 MIG instances */
#define TENANTS_PROCS 64                 /* processes in one interval (GPU_PROC_MAX) */
#define TENANTS_DEFAULT_ROWS 512
#define TENANTS_DEFAULT_STALE_NS (60LL * 1000000000LL)
#define TENANTS_COMM_LEN 16
#define TENANTS_HISTORY 900              /* intervals remembered per GPU, for windows */
#define TENANTS_HISTORY_PROCS 8          /* the busiest processes of each remembered */

/* What a tenant is bound by, from its own part of the interval: the
 * names are the diagnosis's classes (DESIGN.md's contract), so that a
 * tenant's verdict reads like the device's. */
enum tenants_bound {
	TENANTS_IDLE,            /* busy under 5% of the time */
	TENANTS_COMPUTE_TENSOR,  /* compute_bound, on tensor cores */
	TENANTS_COMPUTE_SM,      /* compute_bound, on the SMs' other pipes */
	TENANTS_MEMORY,          /* memory_bound: DRAM bandwidth */
	TENANTS_LAUNCH,          /* launch_bound: many short kernels, the GPU mostly waiting */
	TENANTS_MIXED,           /* none of these stands out */
	TENANTS_BOUND_COUNT
};

/* The class of a row (or group: busy, intensity, launches per second);
 * launch_bound needs the library's launch counts. */
enum tenants_bound tenants_classify(double busy, const double intensity[SPLIT_METRIC_COUNT],
				    uint32_t valid, double launches_per_s);
/* "idle", "compute_bound", "memory_bound", "launch_bound", "mixed". */
const char *tenants_bound_name(enum tenants_bound b);
/* A few words for people: "tensor cores", "SMs", "DRAM bandwidth",
 * "kernel launches", "" (idle, mixed). */
const char *tenants_bound_detail(enum tenants_bound b);

/* One process in one interval. */
struct tenants_proc {
	char comm[TENANTS_COMM_LEN];
	struct proc_owner owner;
	struct split_evidence ev;          /* ev.pid is the host pid */
};

/* One GPU, or one MIG instance of it, over one interval. */
struct tenants_interval {
	int gpu;
	bool in_mig;                       /* the scope is MIG instance gpu_instance */
	unsigned gpu_instance;
	struct split_device dev;
	double end_s;                      /* the interval's end, Unix seconds (windows) */
	bool no_learn;                     /* split, but teach the calibration nothing:
					    * some evidence is known to be incomplete */
	size_t n;
	struct tenants_proc procs[TENANTS_PROCS];
};

/* A process's row (pid 0: its GPU's "other" row of folded processes). */
struct tenants_row {
	int gpu;
	bool in_mig;
	unsigned gpu_instance;
	uint32_t pid;
	char comm[TENANTS_COMM_LEN];
	struct proc_owner owner;
	bool current;                      /* in its scope's last interval: the gauges below */
	enum split_source source;
	uint32_t valid;                    /* bit per split_metric */
	double ratio[SPLIT_METRIC_COUNT];
	double intensity[SPLIT_METRIC_COUNT];
	double busy;                       /* busy share of the last interval */
	double launches_per_s;
	double gpu_time_s;                 /* since first seen: a counter */
	enum tenants_bound bound;          /* tenants_classify of the last interval */
};

/* An owner's row on one GPU: the sum of its processes. The owner's label
 * fields (owner.labels) are its key. */
struct tenants_group {
	int gpu;
	bool in_mig;                       /* per MIG instance on a MIG GPU */
	unsigned gpu_instance;
	struct proc_owner owner;
	bool current;
	enum split_source source;          /* the least certain of its processes' */
	uint32_t valid;
	double ratio[SPLIT_METRIC_COUNT];
	double busy;
	double launches_per_s;
	double gpu_time_s;
	unsigned processes;                /* current ones */
	enum tenants_bound bound;
	bool other;                        /* its GPU's (or instance's) "other" group: the
					    * processes folded past the row bound, whose
					    * owners are not told apart (labelled fields
					    * read "other") */
};

/* Allocated but idle, from the split: a workload (a pod by namespace and
 * name, or a Slurm job) that holds a GPU, by an allocation (the kubelet's
 * pod-resources, Slurm's device rules) or by a process of its on the GPU,
 * whose part of the GPU's SM activity has stayed under a threshold for a
 * window. Rows per (GPU, workload); bounded like the process rows. */
struct tenants_holder {
	int gpu;
	char pod[OWNER_NAME_LEN];
	char namespace_[OWNER_NAME_LEN];
	char job[OWNER_SHORT_LEN];
	char job_user[OWNER_SHORT_LEN];
	bool current;                      /* it held the GPU at the last judgement */
	bool allocated;                    /* an allocation names it (not only a process) */
	unsigned processes;                /* its processes on the GPU then */
	bool judged;                       /* the GPU's SM activity was split then */
	double sm_active;                  /* its part of the GPU's SM activity then */
	double low_s;                      /* how long its part has stayed under the
					    * threshold (0 while over it) */
	bool idle;                         /* judged, and low_s >= the window */
};

/* One workload an allocation says holds a GPU (tenants_hold). */
struct tenants_alloc {
	char pod[OWNER_NAME_LEN];
	char namespace_[OWNER_NAME_LEN];
	char job[OWNER_SHORT_LEN];
	char job_user[OWNER_SHORT_LEN];
};

#define TENANTS_DEFAULT_IDLE_SM 0.01
#define TENANTS_DEFAULT_IDLE_WINDOW_NS (600LL * 1000000000LL)

struct tenants_stats {
	uint64_t intervals_total;          /* intervals split */
	uint64_t folded_total;             /* process-intervals folded into "other" */
	uint64_t expired_total;            /* rows dropped as stale */
	uint64_t split_ns_total;           /* CPU time the splits took (monotonic clock) */
	uint64_t holders_dropped_total;    /* (GPU, workload) judgements past the bound */
	size_t rows, groups, holders;
};

struct tenants;

/* 0 or GPULSE_ENOMEM; zero bounds take the defaults. Free with
 * tenants_free (accepts NULL). */
int tenants_new(struct tenants **out, size_t max_rows, int64_t stale_ns);
void tenants_free(struct tenants *t);

/* Split one interval and fold it into the rows, at monotonic time now.
 * Fills each process's alone-measurement (ev.alone) from what the rows
 * learned before; learns from the interval when one process had the
 * scope to itself. GPULSE_EINVAL for a bad gpu or interval. */
int tenants_add(struct tenants *t, const struct tenants_interval *in, int64_t now_mono_ns);

/* GPU `gpu` runs no process now (its list read empty): its rows and
 * groups stop being current (their gauges go), their counters stay
 * until stale. */
void tenants_clear(struct tenants *t, int gpu);

/* Drop what has been stale longer than stale_ns. tenants_add does it too. */
void tenants_expire(struct tenants *t, int64_t now_mono_ns);

/* Allocated but idle: a workload is idle once its part of the GPU's SM
 * activity has stayed under sm_ratio (0-1, of the GPU's or its MIG
 * instance's figure) for window_ns. Zero or out of range: the defaults. */
void tenants_set_idle(struct tenants *t, double sm_ratio, int64_t window_ns);

/* Judge who holds GPU `gpu` now, after its interval was added (or found
 * empty): the n workloads its allocations name, and every workload (pod
 * or job) with a current process row on it. A workload's part is the sum
 * of its processes' SM parts. `judged`: the GPU's SM activity was split
 * for this interval (false: no GPM; holders are kept current, their
 * timers left as they were, and none is idle). Workloads not named now
 * stop being current and are dropped after stale_ns. Idle is claimed
 * only when sure: while a process whose pod is not named (a pod UID
 * only) or the GPU's "other" row is over the threshold, no pod of the
 * GPU is low (any could be its). */
void tenants_hold(struct tenants *t, int gpu, const struct tenants_alloc *allocs, size_t n,
		  bool judged, int64_t now_mono_ns);

/* Copy up to max rows (or groups, holders); returns how many there are. */
size_t tenants_rows(struct tenants *t, struct tenants_row *out, size_t max);
size_t tenants_groups(struct tenants *t, struct tenants_group *out, size_t max);
size_t tenants_holders(struct tenants *t, struct tenants_holder *out, size_t max);
void tenants_get_stats(struct tenants *t, struct tenants_stats *out);

/* The processes of GPU `gpu` over the intervals that ended in [a_s, b_s)
 * (the diagnosis's windows), the busiest TENANTS_HISTORY_PROCS of each
 * interval: each one's mean busy share and parts over the window, its
 * GPU time in it and its class, into out[0..max), busiest first
 * (comm and owner from its row while it has one). Returns how many. */
size_t tenants_window(struct tenants *t, int gpu, double a_s, double b_s,
		      struct tenants_row *out, size_t max);

#endif
