/* The fit of calibration samples (calib.h): plain arithmetic, apart from
 * the CUDA calls of calib_cuda.c so that the unit tests check it. */
#include "inject/calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/quantile.h"

const unsigned long long calib_spin_ns[CALIB_SPINS] = {0, 2000, 6000, 16000};

void calib_fit(const struct calib_sample *s, unsigned n, const double *gaps, unsigned npairs,
	       struct calib_result *r)
{
	memset(r, 0, sizeof *r);
	r->samples = n;
	if (n < CALIB_SPINS * CALIB_PER_SPIN / 2) {
		snprintf(r->why, sizeof r->why, "%u of %u calibration launches came back", n,
			 CALIB_SPINS * CALIB_PER_SPIN);
		return;
	}
	if (npairs < CALIB_PAIRS / 2) {
		snprintf(r->why, sizeof r->why, "%u of %u calibration pairs came back", npairs, CALIB_PAIRS);
		return;
	}
	double d[CALIB_SPINS * CALIB_PER_SPIN], f[CALIB_SPINS * CALIB_PER_SPIN], gp[CALIB_PAIRS];
	if (npairs > CALIB_PAIRS)
		npairs = CALIB_PAIRS;
	memcpy(gp, gaps, npairs * sizeof *gp);
	r->gap_ns = quantile_of(gp, npairs, 0.5);
	if (n > sizeof d / sizeof d[0])
		n = sizeof d / sizeof d[0];
	double sx = 0, sy = 0, sxx = 0, sxy = 0, step = 0;
	for (unsigned i = 0; i < n; i++) {
		d[i] = s[i].ab_ns - s[i].span_ns;
		f[i] = s[i].fa_ns;
		sx += s[i].span_ns, sy += s[i].ab_ns;
		sxx += s[i].span_ns * s[i].span_ns, sxy += s[i].span_ns * s[i].ab_ns;
		if (s[i].timer_step_ns > 0 && (step == 0 || s[i].timer_step_ns < step))
			step = s[i].timer_step_ns;
	}
	r->timer_step_ns = step;
	double den = (double)n * sxx - sx * sx;
	r->slope = den > 0 ? ((double)n * sxy - sx * sy) / den : NAN;
	/* The offset lies between the interval's excess over the span (if the
	 * kernel had no head or tail) and that less the whole gap (if a kernel
	 * following another took no step of its own): the middle, within half
	 * the gap of the truth either way (calib.h). */
	r->excess_ns = quantile_of(d, n, 0.5);
	r->offset_ns = r->excess_ns - r->gap_ns / 2;
	r->bound_ns = r->gap_ns / 2;
	r->spread_ns = (quantile_of(d, n, 0.75) - quantile_of(d, n, 0.25)) / 2;
	r->floor_ns = quantile_of(f, n, 0.5);
	if (step == 0 || step > CALIB_TIMER_RES_MAX_NS)
		snprintf(r->why, sizeof r->why, "the GPU's %%globaltimer steps by %.0f ns (at most %.0f wanted)",
			 step, CALIB_TIMER_RES_MAX_NS);
	else if (!(r->slope >= 0.9 && r->slope <= 1.1))
		snprintf(r->why, sizeof r->why,
			 "the held interval does not follow the kernel's span (slope %.3f, want 0.9-1.1)", r->slope);
	else if (r->spread_ns > fmax(250.0, r->floor_ns / 4)) {
		snprintf(r->why, sizeof r->why,
			 "the samples spread %.0f ns (half their interquartile range) over a floor of %.0f ns: "
			 "the GPU was busy with other work",
			 r->spread_ns, r->floor_ns);
		r->retry = 1;
	}
	else if (!(r->gap_ns >= 0))
		snprintf(r->why, sizeof r->why, "a kernel started %.0f ns before the one before it ended",
			 -r->gap_ns);
	else if (!(r->offset_ns > 0) || !(r->floor_ns > 0))
		snprintf(r->why, sizeof r->why, "offset %.0f ns over a floor of %.0f ns: not both positive",
			 r->offset_ns, r->floor_ns);
	else {
		r->floors = r->offset_ns / r->floor_ns;
		r->ok = 1;
	}
}
