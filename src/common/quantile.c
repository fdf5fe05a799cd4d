/* Quantiles; see quantile.h. */
#include "common/quantile.h"

#include <math.h>
#include <stdlib.h>

static int cmp_nan_first(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	/* NaN sorts first, as in Prometheus's vectorByValueHeap. */
	if (isnan(x))
		return isnan(y) ? 0 : -1;
	if (isnan(y))
		return 1;
	return x < y ? -1 : x > y ? 1 : 0;
}

void quantile_sort(double *v, size_t n)
{
	qsort(v, n, sizeof *v, cmp_nan_first);
}

double quantile_sorted(const double *v, size_t n, double q)
{
	if (n == 0 || isnan(q))
		return NAN;
	if (q < 0)
		return -INFINITY;
	if (q > 1)
		return INFINITY;
	/* rank >= 0, so the cast is Prometheus's math.Floor (no libm here). */
	double rank = q * (double)(n - 1);
	size_t lo = (size_t)rank, hi = lo + 1 < n ? lo + 1 : lo;
	double w = rank - (double)lo;
	return v[lo] * (1 - w) + v[hi] * w;
}

double quantile_of(double *v, size_t n, double q)
{
	quantile_sort(v, n);
	return quantile_sorted(v, n, q);
}

size_t quantile_rank_index(size_t n, double q)
{
	double rank = q * (double)n; /* 1-based: the ceiling of it */
	if (!(rank > 1))
		return 0;
	if (rank >= (double)n)
		return n - 1;
	size_t i = (size_t)rank;
	if ((double)i < rank)
		i++;
	return i - 1;
}
