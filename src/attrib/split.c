/* A device's activity apportioned across its processes; see split.h for
 * the model. Everything here is arithmetic on the caller's structs. */
#include "attrib/split.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#include "common/status.h"

/* The priors: a class's activity while it runs, on Hopper's GPM scales.
 * A bf16/fp16 GEMM of some size keeps the tensor pipes busy 60-80% of its
 * cycles and reads DRAM at a tenth of its peak; an elementwise kernel
 * streams at most of the peak and issues no tensor instruction. They are
 * where the calibration starts, not what it ends at: split_calib_update
 * moves them to what this GPU shows (DESIGN.md, decision 7: no constant
 * calibrated for one GPU model stays). SM activity is apportioned by GPU
 * time, so its column is 1. */
static const double prior[SPLIT_METRIC_COUNT][SPLIT_CLASS_COUNT] = {
	[SPLIT_SM] = {1, 1, 1, 1, 1},
	[SPLIT_TENSOR] = {[SPLIT_CLASS_TENSOR] = 0.7, [SPLIT_CLASS_MEMORY] = 0.01,
			  [SPLIT_CLASS_OTHER] = 0.1, [SPLIT_CLASS_NVML_COMPUTE] = 0.3,
			  [SPLIT_CLASS_NVML_MEMORY] = 0.01},
	[SPLIT_DRAM] = {[SPLIT_CLASS_TENSOR] = 0.1, [SPLIT_CLASS_MEMORY] = 0.8,
			[SPLIT_CLASS_OTHER] = 0.3, [SPLIT_CLASS_NVML_COMPUTE] = 0.15,
			[SPLIT_CLASS_NVML_MEMORY] = 0.8},
};

/* The variance of an intensity before any interval, over that of the
 * device figure's noise: a prior sd of ~0.22 against ~0.03. */
#define CALIB_P0 50.0
#define CALIB_FORGET 0.995   /* per interval: a time constant of ~200 intervals */
#define CALIB_MIN_BUSY 0.02  /* an interval busier than this teaches */
#define INTENSITY_MIN 0.001
#define INTENSITY_MAX 1.0

const char *split_source_name(enum split_source s)
{
	switch (s) {
	case SPLIT_SOURCE_KERNELS:
		return "kernels";
	case SPLIT_SOURCE_NVML:
		return "nvml";
	case SPLIT_SOURCE_SOLE:
		return "sole";
	default:
		return "none";
	}
}

const char *split_metric_name(enum split_metric m)
{
	static const char *const names[] = {"sm", "tensor", "dram"};
	return (unsigned)m < SPLIT_METRIC_COUNT ? names[m] : "unknown";
}

/* Case-insensitive substring search. */
static bool has(const char *s, const char *needle)
{
	size_t n = strlen(needle);
	for (; *s; s++) {
		size_t i = 0;
		while (i < n && s[i] && tolower((unsigned char)s[i]) == needle[i])
			i++;
		if (i == n)
			return true;
	}
	return false;
}

enum split_kind split_kernel_kind(const char *name)
{
	/* Tensor-core work first: a cuBLAS GEMM's name may also say "reduce"
	 * or "splitK". The names are those of cuBLAS/cuBLASLt (sm90_xmma_gemm_*,
	 * ampere_bf16_s16816gemm_*), CUTLASS (cutlass3x_sm90_tensorop_gemm),
	 * cuDNN (*fprop*, *dgrad*, *wgrad*, implicit_convolve), Triton's and
	 * PyTorch's matmul and attention (flash_fwd, fmha, _mma). */
	static const char *const tensor[] = {"gemm", "mma", "cutlass", "xmma", "tensorop",
					     "s16816", "s1688", "cublas", "cudnn", "fprop",
					     "dgrad", "wgrad", "convolve", "flash", "fmha",
					     "attention", "matmul", "sdpa"};
	static const char *const memory[] = {"elementwise", "reduce", "reduction", "copy",
					     "fill", "memset", "softmax", "norm", "index",
					     "gather", "scatter", "cat", "transpose", "embedding",
					     "dropout", "cast", "where", "compare", "unary",
					     "binary", "pointwise", "sum_kernel", "mean_kernel"};
	for (size_t i = 0; i < sizeof tensor / sizeof tensor[0]; i++)
		if (has(name, tensor[i]))
			return SPLIT_KIND_TENSOR;
	for (size_t i = 0; i < sizeof memory / sizeof memory[0]; i++)
		if (has(name, memory[i]))
			return SPLIT_KIND_MEMORY;
	return SPLIT_KIND_OTHER;
}

void split_calib_init(struct split_calib *c)
{
	memset(c, 0, sizeof *c);
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
		for (int k = 0; k < SPLIT_CLASS_COUNT; k++) {
			c->theta[m][k] = prior[m][k];
			c->p[m][k][k] = CALIB_P0;
		}
}

static double clamp(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void split_calib_update(struct split_calib *c, const struct split_device *dev,
			const struct split_share *sh, size_t n)
{
	double x[SPLIT_CLASS_COUNT] = {0};
	double total = 0;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < SPLIT_CLASS_COUNT; k++) {
			x[k] += sh[i].class_busy[k];
			total += sh[i].class_busy[k];
		}
	if (total < CALIB_MIN_BUSY)
		return;
	/* SM activity is apportioned by GPU time: its column is not learned. */
	for (int m = SPLIT_TENSOR; m < SPLIT_METRIC_COUNT; m++) {
		if (!(dev->valid & 1u << m))
			continue;
		double (*p)[SPLIT_CLASS_COUNT] = c->p[m];
		double *th = c->theta[m];
		double px[SPLIT_CLASS_COUNT] = {0}, xpx = 0, pred = 0;
		for (int a = 0; a < SPLIT_CLASS_COUNT; a++) {
			for (int b = 0; b < SPLIT_CLASS_COUNT; b++)
				px[a] += p[a][b] * x[b];
			xpx += x[a] * px[a];
			pred += x[a] * th[a];
		}
		double denom = CALIB_FORGET + xpx;
		double err = dev->ratio[m] - pred;
		for (int a = 0; a < SPLIT_CLASS_COUNT; a++)
			th[a] = clamp(th[a] + px[a] / denom * err, INTENSITY_MIN, INTENSITY_MAX);
		for (int a = 0; a < SPLIT_CLASS_COUNT; a++)
			for (int b = 0; b < SPLIT_CLASS_COUNT; b++)
				p[a][b] = (p[a][b] - px[a] * px[b] / denom) / CALIB_FORGET;
		/* Forgetting inflates the variance of classes no interval
		 * shows (wind-up); keep each within the prior's. */
		for (int a = 0; a < SPLIT_CLASS_COUNT; a++) {
			if (p[a][a] <= CALIB_P0)
				continue;
			/* Row and column by the root: the diagonal by the
			 * ratio, the matrix still a covariance. */
			double f = sqrt(CALIB_P0 / p[a][a]);
			for (int b = 0; b < SPLIT_CLASS_COUNT; b++) {
				p[a][b] *= f;
				p[b][a] *= f;
			}
		}
	}
	c->updates++;
}

/* b, class busy and source of one process from its evidence. */
static void busy_of(const struct split_evidence *e, double interval_s, struct split_share *s)
{
	double total = 0;
	for (int k = 0; k < SPLIT_KIND_COUNT; k++)
		total += e->kernel_s[k] > 0 ? e->kernel_s[k] : 0;
	if (e->kernels_valid) {
		s->source = SPLIT_SOURCE_KERNELS;
		/* Kernels on concurrent streams overlap: the busy share of
		 * one process is at most the interval. */
		s->busy = clamp(total / interval_s, 0, 1);
		for (int k = 0; total > 0 && k < SPLIT_KIND_COUNT; k++)
			s->class_busy[k] = s->busy * (e->kernel_s[k] > 0 ? e->kernel_s[k] : 0) / total;
		s->launches = e->launches;
	} else if (e->nvml_valid) {
		s->source = SPLIT_SOURCE_NVML;
		s->busy = clamp(e->nvml_sm, 0, 1);
		/* How memory-bound: the share of its SM time the memory
		 * controller was busy for it. */
		double h = e->nvml_sm > 0 ? clamp(e->nvml_mem / e->nvml_sm, 0, 1) : 0;
		s->class_busy[SPLIT_CLASS_NVML_MEMORY] = s->busy * h;
		s->class_busy[SPLIT_CLASS_NVML_COMPUTE] = s->busy * (1 - h);
	} else {
		s->source = SPLIT_SOURCE_NONE;
	}
}

/* Process i's weight for metric m: its busy share times its activity
 * while busy (measured alone, else its classes' intensities). */
static double weight(const struct split_evidence *e, const struct split_share *s,
		     enum split_metric m, const struct split_calib *calib)
{
	if (m == SPLIT_SM)
		return s->busy;
	if (e->alone_valid)
		return s->busy * clamp(e->alone[m], 0, INTENSITY_MAX);
	double w = 0;
	for (int k = 0; k < SPLIT_CLASS_COUNT; k++)
		w += s->class_busy[k] * (calib ? calib->theta[m][k] : prior[m][k]);
	return w;
}

int split_apportion(const struct split_device *dev, const struct split_evidence *ev, size_t n,
		    const struct split_calib *calib, struct split_share *out)
{
	if (!(dev->interval_s > 0))
		return GPULSE_EINVAL;
	for (size_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof out[i]);
		out[i].pid = ev[i].pid;
		busy_of(&ev[i], dev->interval_s, &out[i]);
	}
	if (n == 1) {
		struct split_share *s = &out[0];
		s->source = SPLIT_SOURCE_SOLE;
		if (s->busy <= 0 && dev->busy_valid)
			s->busy = clamp(dev->busy, 0, 1);
	}
	double sum_busy = 0;
	for (size_t i = 0; i < n; i++)
		sum_busy += out[i].busy;
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
		if (!(dev->valid & 1u << m) || n == 0)
			continue;
		/* Evidence of busy time but none of this activity: by time; no
		 * evidence at all: evenly. */
		int how = 0;
		double total = 0;
		for (size_t i = 0; i < n; i++)
			total += weight(&ev[i], &out[i], (enum split_metric)m, calib);
		if (!(total > 0)) {
			how = sum_busy > 0 ? 1 : 2;
			total = sum_busy > 0 ? sum_busy : (double)n;
		}
		for (size_t i = 0; i < n; i++) {
			double w = how == 0 ? weight(&ev[i], &out[i], (enum split_metric)m, calib)
				   : how == 1 ? out[i].busy : 1;
			out[i].valid |= 1u << m;
			out[i].ratio[m] = dev->ratio[m] * w / total;
			out[i].intensity[m] = out[i].busy > 0 ? out[i].ratio[m] / out[i].busy : 0;
		}
	}
	for (size_t i = 0; i < n; i++)
		out[i].busy_s = out[i].busy * dev->interval_s;
	return GPULSE_OK;
}
