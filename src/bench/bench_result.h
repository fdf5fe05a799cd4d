/* A benchmark result: what `gpulse bench` measured on one GPU, in one
 * fixed-size struct (bounded memory, no ownership to track), and its JSON
 * form (docs/internals/bench.md, "The result format"), written by
 * `gpulse bench --json`, read back by gpulsed from its child, by
 * `--compare FILE...` and from the store's records. */
#ifndef GPULSE_BENCH_RESULT_H
#define GPULSE_BENCH_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define BENCH_FORMAT_VERSION 1
#define BENCH_MAX_FIGURES 24
#define BENCH_MAX_NOTES 8
#define BENCH_NAME_MAX 24
#define BENCH_VARIANT_MAX 16
#define BENCH_TEXT_MAX 256
#define BENCH_METHOD_MAX 16
/* A result written before figures carried a method: its value was the
 * median of its runs. */
#define BENCH_METHOD_LEGACY "median"

/* The lowest, mean and highest of what NVML read during a figure. */
struct bench_range {
	bool valid;
	double min, mean, max;
};

struct bench_figure {
	char name[BENCH_NAME_MAX];       /* matmul, dram_copy, dram_read, h2d, d2h,
	                                    launch_latency, launch_rate */
	char variant[BENCH_VARIANT_MAX]; /* bf16, fp16, tf32, fp32, fp64, fp8;
	                                    pinned, pageable; "" */
	char unit[BENCH_NAME_MAX];       /* flop_per_second, bytes_per_second,
	                                    seconds, launches_per_second */
	bool higher_is_better;           /* false for latency */
	char size[64];                   /* "8192x8192x8192", "1073741824 bytes" */
	int runs;                        /* timed runs (repetitions) the figure
	                                    is made of */
	double value;                    /* the figure: its runs' values by
	                                    `method`, in `unit`; what history,
	                                    fleet and /metrics compare */
	char method[BENCH_METHOD_MAX];   /* "median" (timed on the GPU) or
	                                    "fast_p90" (host-bound figures):
	                                    bench_estimator_name; a history of
	                                    another method is not comparable */
	char estimator[48];              /* in words: "p90 of 40 repetitions" */
	double min, median, max;         /* over the runs, in `unit` (the median
	                                    always the median, whatever the
	                                    method) */
	double spread_ratio;             /* (max - min) / median */
	bool has_peak;
	double peak;                     /* datasheet peak in `unit` */
	double peak_fraction;            /* value / peak */
	char peak_source[128];           /* how the peak was computed */
	struct bench_range sm_clock_mhz, mem_clock_mhz, power_watts, temperature_celsius;
	uint64_t throttle_reasons;       /* NVML clock event reasons seen (OR) */
};

struct bench_skip {
	char name[BENCH_NAME_MAX];
	char variant[BENCH_VARIANT_MAX];
	char why[BENCH_TEXT_MAX];
};

struct bench_gpu {
	int index;                       /* NVML index */
	char uuid[80];
	char name[96];
	int cc_major, cc_minor;          /* 0: unknown */
	int sm_count;                    /* 0: unknown */
	unsigned max_sm_clock_mhz, max_mem_clock_mhz, mem_bus_width_bits; /* 0: unknown */
	uint64_t mem_total_bytes;
	unsigned pcie_gen, pcie_width, pcie_gen_max, pcie_width_max; /* 0: unknown */
	double power_limit_watts;        /* 0: unknown */
};

struct bench_result {
	int version;                     /* BENCH_FORMAT_VERSION */
	char host[64];
	int64_t t_ms;                    /* start, wall clock */
	double duration_s;
	char mode[8];                    /* quick, full */
	struct bench_gpu gpu;
	char driver[32];                 /* NVML's driver version, "580.65.06" */
	int cuda_driver_version;         /* cuDriverGetVersion: 13000 */
	char cublaslt[128];              /* the library used, or "" */
	char host_cpus[64];              /* CPUs the host side ran on ("0-7"), or "" */
	bool baseline;                   /* fit to be a baseline */
	int nnotes;                      /* why not, and other remarks */
	char notes[BENCH_MAX_NOTES][BENCH_TEXT_MAX];
	bool interrupted;                /* stopped before the end */
	int nfig;
	struct bench_figure fig[BENCH_MAX_FIGURES];
	int nskip;
	struct bench_skip skip[BENCH_MAX_FIGURES];
};

/* Clock event reasons by name, as NVML defines the bits. */
#define BENCH_REASONS(X)                  \
	X(0x1ULL, "gpu_idle")             \
	X(0x2ULL, "applications_clocks")  \
	X(0x4ULL, "sw_power_cap")         \
	X(0x8ULL, "hw_slowdown")          \
	X(0x10ULL, "sync_boost")          \
	X(0x20ULL, "sw_thermal")          \
	X(0x40ULL, "hw_thermal")          \
	X(0x80ULL, "hw_power_brake")      \
	X(0x100ULL, "display_clocks")

/* Add a note (printf); a ninth and later are dropped. */
void bench_result_note(struct bench_result *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Add a figure slot (zeroed, name/variant/unit set, method
 * BENCH_METHOD_LEGACY) or NULL when full. */
struct bench_figure *bench_result_add(struct bench_result *r, const char *name,
				      const char *variant, const char *unit);
void bench_result_skip(struct bench_result *r, const char *name, const char *variant,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The figure named so, or NULL. */
const struct bench_figure *bench_result_find(const struct bench_result *r, const char *name,
					     const char *variant);

/* Append the JSON document to `out`. 0 or GPULSE_ENOMEM/ELIMIT (the
 * buffer's bound). */
int bench_result_to_json(const struct bench_result *r, struct buf *out);
/* Parse a JSON document (bench_result_to_json's, or the "result" member
 * of a document holding one) into *out. 0, or GPULSE_EPARSE with a
 * sentence in err naming the member that is wrong ("figures[2].median:
 * not a number"). Unknown members are ignored; strings too long for
 * their field are refused, numbers must be finite. */
int bench_result_parse(const char *text, size_t len, struct bench_result *out, char *err,
		       size_t errlen);

#endif
