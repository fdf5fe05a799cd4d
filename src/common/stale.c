/* Prometheus's staleness marker; see stale.h. */
#include "common/stale.h"

#include <stdint.h>
#include <string.h>

int stale_nan_is(double v)
{
	uint64_t bits;
	memcpy(&bits, &v, sizeof bits);
	return bits == STALE_NAN_BITS;
}

double stale_nan(void)
{
	uint64_t bits = STALE_NAN_BITS;
	double v;
	memcpy(&v, &bits, sizeof v);
	return v;
}
