/* Quantiles of a sample of doubles: the one copy of Prometheus's
 * definition (PromQL's quantile and quantile_over_time) that every part
 * of gpulse takes its medians and quantiles with, and the nearest rank
 * that the capacity report's percentiles use. libc only (no libm), so
 * that libgpulse-inject.so may compile it in. */
#ifndef GPULSE_QUANTILE_H
#define GPULSE_QUANTILE_H

#include <stddef.h>

/* Sort v[0..n) ascending, NaN first: Prometheus's order for quantile. */
void quantile_sort(double *v, size_t n);

/* Prometheus's q-quantile of v[0..n), sorted as quantile_sort sorts:
 * NaN when n is 0 or q is NaN, -Inf when q < 0, +Inf when q > 1, else
 * the weighted mean of the two values around rank q*(n-1),
 * v[lo]*(1-w) + v[lo+1]*w (so the median of an even count is the mean
 * of the middle two). */
double quantile_sorted(const double *v, size_t n, double q);

/* quantile_sort(v, n), then quantile_sorted(v, n, q): v is reordered. */
double quantile_of(double *v, size_t n, double q);

/* The nearest-rank index of quantile q (0..1) among n > 0 sorted values:
 * the smallest i with (i+1)/n >= q, the index of the value a percentile
 * by nearest rank reports; 0 for q <= 0, n-1 for q >= 1. */
size_t quantile_rank_index(size_t n, double q);

#endif
