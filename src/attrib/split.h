/* Who used the GPU: a device's activity over one interval (GPM's SM
 * active, tensor active, DRAM bandwidth) apportioned across the processes
 * that shared it, from what each ran. An estimate, and a pure one: plain
 * structs in, shares out, no clock, no I/O (docs/internals/attribution.md,
 * "Activity per process").
 *
 * The model: on a time-sliced (or MPS) GPU the device's figure M of an
 * interval is the sum over processes of b_i * a_i, b_i the share of the
 * interval process i kept the GPU busy, a_i its activity while it did (the
 * tensor activity of its kernels while they ran, say). b_i is measured:
 * the library's kernel GPU time, else NVML's per-process SM samples. a_i
 * is not, so it is estimated: per kind of work (the kernels' names say
 * tensor-core GEMM, memory-bound elementwise/reduction, or other; NVML's
 * memory-to-SM ratio says how memory-bound a process without the library
 * is), from intensities the calibration (split_calib) learns on this GPU
 * from the intervals themselves, starting from stated priors; or from
 * the process's own activity measured while it was alone. The device's
 * figure is then divided in proportion to b_i * a_i, so the parts sum to
 * it exactly. */
#ifndef GPULSE_SPLIT_H
#define GPULSE_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The device activities apportioned. */
enum split_metric { SPLIT_SM, SPLIT_TENSOR, SPLIT_DRAM, SPLIT_METRIC_COUNT };

/* What a kernel is, by its name (split_kernel_kind). */
enum split_kind {
	SPLIT_KIND_TENSOR,   /* tensor-core GEMM, convolution, attention */
	SPLIT_KIND_MEMORY,   /* elementwise, reduction, copy, normalisation */
	SPLIT_KIND_OTHER,    /* anything else, and the library's folded "other" */
	SPLIT_KIND_COUNT
};

/* The classes the calibration learns an intensity for: the three kinds of
 * the library's kernels, and NVML-only time split into its compute-like
 * and memory-like parts. */
enum split_class {
	SPLIT_CLASS_TENSOR,
	SPLIT_CLASS_MEMORY,
	SPLIT_CLASS_OTHER,
	SPLIT_CLASS_NVML_COMPUTE,
	SPLIT_CLASS_NVML_MEMORY,
	SPLIT_CLASS_COUNT
};

/* How a process's part was obtained: its `source` label. */
enum split_source {
	SPLIT_SOURCE_NONE,     /* no evidence: an even part of what no evidence explains */
	SPLIT_SOURCE_KERNELS,  /* the injection library's kernel GPU time */
	SPLIT_SOURCE_NVML,     /* NVML's per-process utilization samples */
	SPLIT_SOURCE_SOLE,     /* the only process on the GPU: all of it */
};

/* "kernels", "nvml", "sole", "none". */
const char *split_source_name(enum split_source s);
/* "sm", "tensor", "dram". */
const char *split_metric_name(enum split_metric m);

/* The kind of a kernel from its (demangled or mangled) name: tensor-core
 * GEMMs and their kin (gemm, mma, cutlass, xmma, wgmma, cublas, cudnn
 * convolutions, flash attention) are SPLIT_KIND_TENSOR; elementwise,
 * reduction, copy, fill, softmax, normalisation, index and cat kernels
 * are SPLIT_KIND_MEMORY; the rest SPLIT_KIND_OTHER. Case-insensitive. */
enum split_kind split_kernel_kind(const char *name);

/* What is known of one process over the interval. */
struct split_evidence {
	uint32_t pid;
	bool kernels_valid;                 /* the library reported the interval */
	double kernel_s[SPLIT_KIND_COUNT];  /* its kernels' GPU time by kind, seconds */
	double launches;                    /* kernel launches in the interval */
	bool nvml_valid;                    /* NVML sampled it over the interval */
	double nvml_sm, nvml_mem;           /* NVML's SM and memory-controller shares, 0-1 */
	bool alone_valid;                   /* its activity per busy time, measured alone: */
	double alone[SPLIT_METRIC_COUNT];
};

/* The device over the interval. */
struct split_device {
	double interval_s;                  /* > 0 */
	uint32_t valid;                     /* bit per split_metric */
	double ratio[SPLIT_METRIC_COUNT];   /* GPM figures, 0-1 */
	bool busy_valid;                    /* NVML's GPU utilization, 0-1: the busy */
	double busy;                        /* share of a sole process without evidence */
};

/* One process's part. */
struct split_share {
	uint32_t pid;
	enum split_source source;
	double busy;                        /* its busy share of the interval, 0-1 */
	double busy_s;                      /* busy * interval: its GPU time */
	double launches;
	double class_busy[SPLIT_CLASS_COUNT]; /* busy by class (sums to busy) */
	uint32_t valid;                     /* bit per split_metric: the device's was valid */
	double ratio[SPLIT_METRIC_COUNT];   /* its part of the device's figure */
	double intensity[SPLIT_METRIC_COUNT]; /* ratio / busy: its activity while it ran */
};

/* The intensities of each class, learned on one GPU: recursive least
 * squares of the device's figure on the classes' busy shares, one model
 * per metric, started at the priors and forgetting slowly, so that what
 * this GPU's GEMMs and elementwise kernels really do replaces what a
 * Hopper GPU's usually do. Zero it and call split_calib_init. */
struct split_calib {
	double theta[SPLIT_METRIC_COUNT][SPLIT_CLASS_COUNT];
	double p[SPLIT_METRIC_COUNT][SPLIT_CLASS_COUNT][SPLIT_CLASS_COUNT];
	uint64_t updates;
};

/* The priors: activity while each class runs, on Hopper's GPM scales. */
void split_calib_init(struct split_calib *c);

/* Learn from one interval whose parts were computed by split_apportion
 * (the shares' class_busy and the device's figures). Intervals with no
 * busy time teach nothing. */
void split_calib_update(struct split_calib *c, const struct split_device *dev,
			const struct split_share *sh, size_t n);

/* Apportion dev's figures across the n processes of ev into out[0..n)
 * (same order). `calib` may be NULL (the priors). Each valid metric's
 * parts sum to the device's figure; a process alone gets all of it
 * (SPLIT_SOURCE_SOLE). Evidence is used in this order: kernels, NVML.
 * When no process shows activity and the device does, each gets an even
 * part (SPLIT_SOURCE_NONE). GPULSE_EINVAL when interval_s <= 0. */
int split_apportion(const struct split_device *dev, const struct split_evidence *ev, size_t n,
		    const struct split_calib *calib, struct split_share *out);

#endif
