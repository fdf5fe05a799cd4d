/* Diagnosis: why a GPU is slow or wasted, window by window, from its
 * device counters, with the evidence and one line of advice
 * (docs/DIAGNOSIS.md states every rule and the reason for each
 * threshold). A pure module: it takes one GPU's samples (recording rows,
 * base units, with validity bits) and the card's peaks, and returns plain
 * structs; it reads no file and knows nothing of HTTP or the terminal.
 *
 * Windows are [origin + k*window, origin + (k+1)*window); a window with no
 * samples of this GPU is skipped. Within a window the classifier looks at
 * the distribution of each counter (mean, percentiles, share of samples
 * past a level), not only at means. */
#ifndef GPULSE_DIAGNOSE_H
#define GPULSE_DIAGNOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diagnose/peaks.h"
#include "record/recording.h"

/* X(id, name): the contract's bottleneck classes (DESIGN.md). */
#define DIAG_CLASSES(X)                  \
	X(IDLE, "idle")                  \
	X(COMPUTE_BOUND, "compute_bound") \
	X(MEMORY_BOUND, "memory_bound")   \
	X(PCIE_BOUND, "pcie_bound")       \
	X(LAUNCH_BOUND, "launch_bound")   \
	X(INPUT_STARVED, "input_starved") \
	X(MIXED, "mixed")

enum diag_class {
#define DIAG_CLASS_ENUM(id, name) DIAG_##id,
	DIAG_CLASSES(DIAG_CLASS_ENUM)
#undef DIAG_CLASS_ENUM
	DIAG_CLASS_COUNT
};

/* X(id, name): the contract's findings, in the order an expert reads
 * them (memory capacity first). */
#define DIAG_FINDINGS(X)                          \
	X(MEMORY_PRESSURE, "memory_pressure")     \
	X(POWER_CAPPED, "power_capped")           \
	X(THERMAL_THROTTLED, "thermal_throttled") \
	X(HW_SLOWDOWN, "hw_slowdown")             \
	X(ECC_ERRORS, "ecc_errors")               \
	X(XID, "xid")

enum diag_finding {
#define DIAG_FINDING_ENUM(id, name) DIAG_FINDING_##id,
	DIAG_FINDINGS(DIAG_FINDING_ENUM)
#undef DIAG_FINDING_ENUM
	DIAG_FINDING_COUNT
};

#define DIAG_FINDING_BIT(f) (1u << (f))

/* The findings that say work was slowed (clocks held down by power, heat
 * or the hardware). An idle window has no work to slow, so it never
 * carries them, whatever the clock event reasons say (the driver reports
 * reasons on an idle card too; docs/DIAGNOSIS.md, "Findings"). */
#define DIAG_FINDINGS_SLOWDOWN                                                    \
	(DIAG_FINDING_BIT(DIAG_FINDING_POWER_CAPPED) |                            \
	 DIAG_FINDING_BIT(DIAG_FINDING_THERMAL_THROTTLED) |                       \
	 DIAG_FINDING_BIT(DIAG_FINDING_HW_SLOWDOWN))

/* X(id, name, effect): evidence a window may lack, and what its absence
 * costs the conclusion (said in the output). */
#define DIAG_MISSING(X)                                                                        \
	X(UTIL, "gpu_util",                                                                    \
	  "time busy is judged from SM activity alone")                                        \
	X(SM_ACTIVITY, "sm_util",                                                              \
	  "without GPM SM activity, launch_bound cannot be told from input_starved, nor copies " \
	  "from kernels")                                                                      \
	X(PIPES, "tensor_util/fp*_util",                                                       \
	  "without GPM pipe counters, compute_bound is concluded by elimination (power draw)")  \
	X(DRAM, "dram_bw_util",                                                                \
	  "without GPM DRAM bandwidth, memory_bound is judged from mem_util (time DRAM was "    \
	  "busy), which cannot tell bandwidth from latency")                                   \
	X(PCIE, "pcie_tx_mbps/pcie_rx_mbps",                                                   \
	  "without GPM PCIe throughput, pcie_bound is inferred from busy time at near-idle "     \
	  "power and cannot be told from launch_bound")                                        \
	X(LINK_PEAK, "pcie link (device file)",                                                \
	  "PCIe traffic is compared with an absolute 1 GB/s instead of the link's peak")        \
	X(GRAPHICS, "graphics_util",                                                           \
	  "copy-engine time cannot be told from tiny kernels by the engine counter")            \
	X(MEMORY, "mem_used_mib/mem_total_mib", "memory_pressure cannot be judged")            \
	X(REASONS, "clocks_event_reasons",                                                     \
	  "power, thermal and hardware slowdowns are judged from power and clocks only "       \
	  "(thermal and hardware slowdowns not at all)")                                       \
	X(POWER_LIMIT, "power limit (device file)",                                            \
	  "power_capped is judged from clock event reasons only")                              \
	X(CLOCK_MAX, "max SM clock (device file)",                                             \
	  "headroom is given at the current clock, not the card's maximum")                    \
	X(DRAM_PEAK, "DRAM peak (model table)",                                                \
	  "DRAM headroom is given as a fraction only, not in bytes/s")

enum diag_missing {
#define DIAG_MISSING_ENUM(id, name, effect) DIAG_MISSING_##id,
	DIAG_MISSING(DIAG_MISSING_ENUM)
#undef DIAG_MISSING_ENUM
	DIAG_MISSING_COUNT
};

#define DIAG_MISSING_BIT(m) (1u << (m))

/* One number that took part in the decision: `value` (of statistic `stat`
 * over the window's samples) compared with `threshold` by `op`. `peak` is
 * the card's peak the value is measured against, in base units, or NAN
 * when the value is not a fraction of a peak. All strings are static. */
struct diag_evidence {
	const char *name;      /* "dram_bw_util", "sm_per_busy", ... */
	const char *stat;      /* "mean", "p90", "share_of_samples", "ratio_of_means" */
	double value;
	const char *op;        /* "<", ">=", or "" for context only */
	double threshold;      /* NAN for context only */
	double peak;           /* NAN when not applicable */
	const char *unit;      /* "ratio", "bytes_per_second", "watts", "hertz" */
	bool holds;            /* the comparison held (false for context) */
};

#define DIAG_EVIDENCE_MAX 24

/* The window against the card's peaks (roofline style). Every number is
 * NAN when the window lacks what it needs. Fractions are of the card's
 * peak at its maximum clock when the clock is known. */
struct diag_headroom {
	double sm_active;              /* GPM SM activity */
	double tensor_active;          /* tensor pipe active share of cycles */
	double tensor;                 /* share of peak tensor rate */
	double pipe_active;            /* busiest non-tensor pipe (FP64/32/16, integer) */
	double pipe;                   /* its share of peak rate */
	const char *pipe_name;         /* its column ("fp32_util"), or NULL */
	double clock_ratio;            /* mean SM clock / max */
	double dram;                   /* share of peak DRAM bandwidth */
	double dram_bytes_per_s;       /* NAN when the DRAM peak is unknown */
	double pcie;                   /* busier direction, share of link peak */
	double pcie_tx_bytes_per_s;
	double pcie_rx_bytes_per_s;
	double memory_used;            /* share of device memory in use */
	double busy;                   /* gpu_util: share of time anything ran */
	double max_speedup;            /* 1 / share of the bounding resource */
	const char *bound_resource;    /* "tensor", "pipe", "dram", "pcie", "busy time", NULL */
};

struct diag_window {
	double start_s, end_s;          /* Unix seconds, [start, end) */
	int gpu;
	size_t nsamples;
	/* A window put together from stored verdicts (history.h): how many
	 * of those it holds (its nsamples is then 0: the samples are not
	 * stored). 0 for a window judged on samples. */
	size_t nverdicts;
	/* The part the class was judged on: the whole window, unless a
	 * workload started or stopped in it after or before a long idle
	 * (docs/DIAGNOSIS.md, "Job boundaries"). */
	double judged_start_s, judged_end_s;
	size_t judged_samples;
	const char *span_note;          /* static; NULL when the whole window was judged */
	enum diag_class bottleneck;
	const char *rule;               /* static: the rule that decided, in words */
	unsigned findings;              /* DIAG_FINDING_BIT set */
	double confidence;              /* 0-1; see docs/DIAGNOSIS.md */
	unsigned missing;               /* DIAG_MISSING_BIT set */
	int nevidence;
	struct diag_evidence evidence[DIAG_EVIDENCE_MAX];
	struct diag_headroom headroom;
	char advice[320];               /* one line */
	char headroom_text[200];        /* one line: what the peaks leave */
	char brief[160];                /* one line: the deciding numbers */
};

/* An XID error reported for this GPU (the daemon's event thread);
 * recordings carry none. */
struct diag_xid {
	double t_s;
	unsigned code;
};

/* What the injection library (src/inject, through src/profile) saw on
 * this GPU over [start_s, end_s), summed over the traced processes.
 * Tracing runs in duty-cycled windows, so every amount is over traced_s,
 * the time tracing was on; rates divide by it. */
struct diag_trace {
	double start_s, end_s;
	double traced_s;
	double launches;        /* kernels that ran */
	double kernel_s;        /* their durations, summed */
	double copy_bytes;      /* host<->device copies */
	double copy_s;          /* their durations, summed */
	double sync_wait_s;     /* host time in synchronize calls */
	unsigned processes;
};

/* The share of device memory in use (p50 over the window) from which a
 * window carries memory_pressure. The same number as the shipped alert
 * pack's warning (deploy/rules/gpulse.rules.yml,
 * gpulse:threshold:memory_warning:ratio; test_diagnose checks they agree),
 * so the diagnosis and GPUMemoryHigh speak of the same memory. */
#define DIAG_MEMORY_PRESSURE_DEFAULT 0.85

/* The diagnosis's settings: what a site may tune. Fill with
 * diag_options_defaults, then change what the configuration says. */
struct diag_options {
	double memory_pressure_ratio;   /* (0, 1]; DIAG_MEMORY_PRESSURE_DEFAULT */
};

void diag_options_defaults(struct diag_options *o);
/* 0, or GPULSE_EINVAL when a setting is out of its range. */
int diag_options_check(const struct diag_options *o);

/* Below these, a window's trace is too thin to judge by
 * (docs/DIAGNOSIS.md, "Refined by kernel traces"). */
#define DIAG_TRACE_MIN_S 0.05
#define DIAG_TRACE_MIN_LAUNCHES 50

struct diag_input {
	int gpu;
	const struct rec_row *rows;     /* this GPU's samples, in time order */
	size_t nrows;
	const struct diag_xid *xids;    /* in time order; may be NULL */
	size_t nxids;
	double origin_s;                /* windows align to this (the recording's first time) */
	double window_s;                /* > 0 */
	const struct diag_trace *traces; /* in time order; may be NULL */
	size_t ntraces;
	const struct diag_options *opts; /* NULL: diag_options_defaults */
};

/* Classify every non-empty window of one GPU. On success *out (NULL when
 * there are no windows) holds *nout windows in time order; the caller
 * frees it with free(). GPULSE_EINVAL for a window under 1 ms, a
 * non-finite origin or options out of range; GPULSE_ERANGE when the times are too large for the
 * window to be placed exactly (over 2^50 windows from the origin, or a
 * window under 1e-13 of the times' magnitude); GPULSE_ENOMEM. */
int diagnose_gpu(const struct diag_input *in, const struct gpu_peaks *peaks,
		 struct diag_window **out, size_t *nout);

/* A whole run of windows of one GPU, summed. */
struct diag_summary {
	int gpu;
	size_t nwindows;
	double seconds;                            /* windows' nominal lengths, summed */
	double class_seconds[DIAG_CLASS_COUNT];
	size_t finding_windows[DIAG_FINDING_COUNT];
	int top_finding;                           /* enum diag_finding, or -1 */
	double busy_seconds;                       /* in windows not idle */
	struct diag_headroom mean;                 /* time-weighted over every window */
	struct diag_headroom busy_mean;            /* over the windows not idle */
	enum diag_class top_class;
};

/* Fill w's headroom.bound_resource and max_speedup, headroom_text,
 * advice and brief from its bottleneck, findings and headroom numbers, as
 * diagnose_gpu does for the windows it judges. For windows put together
 * from stored verdicts (history.h), which have the numbers but not the
 * samples. */
void diagnose_describe(struct diag_window *w, const struct gpu_peaks *pk);

/* Sum `n` windows of one GPU. */
void diagnose_summarize(const struct diag_window *w, size_t n, struct diag_summary *out);

/* Names: static strings; "?" for out-of-range values. */
const char *diag_class_name(enum diag_class c);
const char *diag_finding_name(enum diag_finding f);
const char *diag_missing_name(enum diag_missing m);
const char *diag_missing_effect(enum diag_missing m);
/* The class with that name, or -1. */
int diag_class_by_name(const char *name);

#endif
