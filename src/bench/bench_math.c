/* See bench_math.h. */
#include "bench/bench_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_quantile(double *v, size_t n, double q)
{
	if (n == 0)
		return NAN;
	qsort(v, n, sizeof *v, cmp_double);
	if (q <= 0)
		return v[0];
	if (q >= 1)
		return v[n - 1];
	double pos = q * (double)(n - 1);
	size_t lo = (size_t)pos;
	double frac = pos - (double)lo;
	if (lo + 1 >= n)
		return v[n - 1];
	return v[lo] + (v[lo + 1] - v[lo]) * frac;
}

bool bench_summarize(double *v, size_t n, double *min, double *median, double *max,
		     double *spread_ratio)
{
	if (n == 0)
		return false;
	*median = bench_quantile(v, n, 0.5);
	*min = v[0];
	*max = v[n - 1];
	if (!(*median > 0))
		return false;
	*spread_ratio = (*max - *min) / *median;
	return true;
}

#define FAST_QUANTILE 0.9

double bench_estimate(double *v, size_t n, enum bench_estimator e, bool higher_is_better)
{
	if (e == BENCH_EST_FAST_P90)
		return bench_quantile(v, n, higher_is_better ? FAST_QUANTILE : 1 - FAST_QUANTILE);
	return bench_quantile(v, n, 0.5);
}

const char *bench_estimator_name(enum bench_estimator e)
{
	return e == BENCH_EST_FAST_P90 ? "fast_p90" : "median";
}

void bench_estimator_text(enum bench_estimator e, bool higher_is_better, size_t n, char *out,
			  size_t len)
{
	if (e == BENCH_EST_FAST_P90)
		snprintf(out, len, "p%d of %zu repetitions", higher_is_better ? 90 : 10, n);
	else
		snprintf(out, len, "median of %zu runs", n);
}

double bench_matmul_flop(uint64_t m, uint64_t n, uint64_t k)
{
	return 2.0 * (double)m * (double)n * (double)k;
}

double bench_rate(double amount, double seconds)
{
	return seconds > 0 ? amount / seconds : 0;
}

/* Dense FLOP per clock per SM. Tensor figures are those of the
 * whitepapers' peak tables divided by SMs and boost clock: A100 312
 * TFLOP/s bf16 = 108 SMs x 1410 MHz x 2048; H100 SXM 989 TFLOP/s bf16 =
 * 132 x 1830 MHz x 4096 (fp8 twice that, tf32 half, fp64 tensor 256);
 * fp32 is the SIMT rate, 2 FLOP per FMA per core (cuBLASLt's fp32 GEMM
 * does not use tensor cores). */
struct arch_row {
	int major, minor;
	const char *arch;
	double bf16, fp16, tf32, fp32, fp64, fp8;
};
static const struct arch_row arch_table[] = {
	{7, 0, "Volta", 0, 1024, 0, 128, 64, 0},
	{8, 0, "Ampere (A100)", 2048, 2048, 1024, 128, 128, 0},
	{8, 6, "Ampere (GA10x)", 512, 512, 256, 256, 4, 0},
	{8, 9, "Ada", 512, 512, 256, 256, 4, 1024},
	{9, 0, "Hopper", 4096, 4096, 2048, 256, 256, 8192},
};

static const struct arch_row *arch_of(int major, int minor)
{
	for (size_t i = 0; i < sizeof arch_table / sizeof arch_table[0]; i++)
		if (arch_table[i].major == major && arch_table[i].minor == minor)
			return &arch_table[i];
	return NULL;
}

double bench_flop_per_clock_per_sm(int major, int minor, const char *p)
{
	const struct arch_row *a = arch_of(major, minor);
	if (!a || !p)
		return 0;
	if (strcmp(p, "bf16") == 0)
		return a->bf16;
	if (strcmp(p, "fp16") == 0)
		return a->fp16;
	if (strcmp(p, "tf32") == 0)
		return a->tf32;
	if (strcmp(p, "fp32") == 0)
		return a->fp32;
	if (strcmp(p, "fp64") == 0)
		return a->fp64;
	if (strcmp(p, "fp8") == 0)
		return a->fp8;
	return 0;
}

bool bench_matmul_peak(int major, int minor, const char *precision, int sm_count,
		       unsigned sm_clock_mhz, double *peak, char *source, size_t srclen)
{
	double per = bench_flop_per_clock_per_sm(major, minor, precision);
	if (per <= 0 || sm_count <= 0 || sm_clock_mhz == 0)
		return false;
	*peak = per * (double)sm_count * (double)sm_clock_mhz * 1e6;
	if (source)
		snprintf(source, srclen, "%g FLOP/clock/SM (%s, dense) x %d SMs x %u MHz max SM clock",
			 per, arch_of(major, minor)->arch, sm_count, sm_clock_mhz);
	return true;
}

bool bench_dram_peak(unsigned mem_clock_mhz, unsigned bus_width_bits, double *peak,
		     char *source, size_t srclen)
{
	if (!mem_clock_mhz || !bus_width_bits)
		return false;
	*peak = 2.0 * (double)mem_clock_mhz * 1e6 * (double)bus_width_bits / 8.0;
	if (source)
		snprintf(source, srclen, "2 (double data rate) x %u MHz max memory clock x %u-bit bus",
			 mem_clock_mhz, bus_width_bits);
	return true;
}

bool bench_pcie_peak(unsigned gen, unsigned width, double *peak, char *source, size_t srclen)
{
	/* GT/s per lane and the line coding's payload share. */
	static const double gts[] = {0, 2.5, 5, 8, 16, 32, 64};
	static const double coding[] = {0, 0.8, 0.8, 128.0 / 130, 128.0 / 130, 128.0 / 130,
					242.0 / 256};
	if (gen < 1 || gen > 6 || width < 1 || width > 32)
		return false;
	*peak = gts[gen] * 1e9 * coding[gen] * (double)width / 8.0;
	if (source)
		snprintf(source, srclen, "PCIe gen %u x%u: %g GT/s per lane x %.4g line coding, one direction",
			 gen, width, gts[gen], coding[gen]);
	return true;
}

bool bench_precision_supported(int major, int minor, const char *p)
{
	int cc = major * 10 + minor;
	if (strcmp(p, "fp8") == 0)
		return cc >= 89;
	if (strcmp(p, "bf16") == 0 || strcmp(p, "tf32") == 0)
		return cc >= 80;
	return true;
}
