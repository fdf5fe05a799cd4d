/* The benchmark's arithmetic, kept apart from the GPU so that CI checks it
 * (tests/unit/test_bench_math.c): order statistics of the timed runs, the
 * work each figure counts, and the datasheet peaks computed from a card's
 * identity (docs/internals/bench.md, "Peaks"). Pure functions. */
#ifndef GPULSE_BENCH_MATH_H
#define GPULSE_BENCH_MATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The q-quantile (0..1) of v[0..n) by linear interpolation between order
 * statistics (Prometheus's and numpy's default). Sorts v in place. NaN
 * for n == 0. */
double bench_quantile(double *v, size_t n, double q);

/* min, median, max and (max - min) / median of v[0..n) (sorted in
 * place). False when n == 0 or the median is not positive. */
bool bench_summarize(double *v, size_t n, double *min, double *median, double *max,
		     double *spread_ratio);

/* How a figure's value is made of its timed repetitions' values.
 * MEDIAN: the middle one; for figures timed on the GPU (events), whose
 * repetitions vary both ways by little. FAST_P90: the edge of the fastest
 * decile (the 90th percentile of rates, the 10th of times); for figures
 * bound by the host's CPU time (launches, pageable copies), whose
 * interference only ever adds delay: another tenant's cycles, interrupts
 * and memory traffic make a repetition slower, never faster, so the fast
 * tail is what the card and the link do, and the median is where the
 * host's load happened to put it. A quantile rather than the single
 * fastest, so that one repetition that reads fast by accident (a clock
 * read late) does not make the figure. */
enum bench_estimator {
	BENCH_EST_MEDIAN,
	BENCH_EST_FAST_P90,
};

/* The value of v[0..n) (sorted in place) by estimator e; which tail is
 * fast depends on higher_is_better. NaN for n == 0. */
double bench_estimate(double *v, size_t n, enum bench_estimator e, bool higher_is_better);
/* The estimator's name as results carry it in "method" ("median",
 * "fast_p90"): figures are compared only with figures of the same method
 * (bench_compare). */
const char *bench_estimator_name(enum bench_estimator e);
/* "p90 of 40 repetitions" (p10 when lower is better), "median of 10
 * runs", into out. */
void bench_estimator_text(enum bench_estimator e, bool higher_is_better, size_t n, char *out,
			  size_t len);

/* Floating-point operations of one m x n x k matrix multiply (a multiply
 * and an add per inner-product term): 2mnk. */
double bench_matmul_flop(uint64_t m, uint64_t n, uint64_t k);
/* Bytes moved per second: `bytes` in `seconds` (0 when seconds <= 0). */
double bench_rate(double amount, double seconds);

/* The dense tensor-core (or, for fp32, SIMT FMA) FLOP per clock per SM of
 * `precision` (bf16, fp16, tf32, fp32, fp64, fp8) on compute capability
 * major.minor, from NVIDIA's architecture whitepapers; 0 when the table
 * does not know the pair. */
double bench_flop_per_clock_per_sm(int major, int minor, const char *precision);
/* peak = flop/clock/SM x SMs x clock. False when something is unknown;
 * `source` (may be NULL) gets the sentence saying how it was computed. */
bool bench_matmul_peak(int major, int minor, const char *precision, int sm_count,
		       unsigned sm_clock_mhz, double *peak, char *source, size_t srclen);
/* DRAM bytes/s: double data rate x bus width x NVML's memory clock (its
 * HBM and GDDR figures both work out this way). */
bool bench_dram_peak(unsigned mem_clock_mhz, unsigned bus_width_bits, double *peak,
		     char *source, size_t srclen);
/* PCIe bytes/s, one direction: lanes x transfer rate x line coding, for
 * generations 1-6. */
bool bench_pcie_peak(unsigned gen, unsigned width, double *peak, char *source, size_t srclen);

/* Whether precision runs on this compute capability (fp8: 8.9 and up;
 * bf16 and tf32: 8.0 and up). */
bool bench_precision_supported(int major, int minor, const char *precision);

#endif
