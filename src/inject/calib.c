/* The fit of calibration samples (calib.h): plain arithmetic, apart from
 * the CUDA calls of calib_cuda.c so that the unit tests check it. */
#include "inject/calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/quantile.h"

const unsigned long long calib_spin_ns[CALIB_SPINS] = {0, 2000, 6000, 16000};

/* Other work on the GPU only ever delays a calibration launch (it waits
 * for an SM): the undelayed ones sit together at the bottom. The median
 * of the values of v[0..n) within `width` of its 5th percentile, and in
 * *share how many of them that is; v is reordered. */
static double undelayed(double *v, unsigned n, double width, double *share)
{
	double lo = quantile_of(v, n, 0.05);
	unsigned m = 0;
	while (m < n && v[m] <= lo + width)
		m++;
	*share = n ? (double)m / n : 0;
	return m ? quantile_sorted(v, m, 0.5) : NAN;
}

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
	double step = 0;
	for (unsigned i = 0; i < n && i < sizeof d / sizeof d[0]; i++) {
		d[i] = s[i].ab_ns - s[i].span_ns;
		f[i] = s[i].fa_ns;
		if (s[i].timer_step_ns > 0 && (step == 0 || s[i].timer_step_ns < step))
			step = s[i].timer_step_ns;
	}
	if (n > sizeof d / sizeof d[0])
		n = sizeof d / sizeof d[0];
	r->timer_step_ns = step;
	r->floor_ns = quantile_of(f, n, 0.5);
	/* Each figure is the median of the launches other work did not delay
	 * (undelayed): on a quiet GPU all of them, as the plain median; on a
	 * busy one those that met a free SM, where the plain median was
	 * delayed (resnet50 inference on the H100 had every try refused by
	 * the spread). */
	double width = fmax(250.0, r->floor_ns / 4), share_d = 0, share_g = 0, share;
	r->gap_ns = undelayed(gp, npairs, width, &share_g);
	/* The interval against the span, one point per spin length (its
	 * undelayed launches' median), least squares. */
	double gx[CALIB_SPINS], gy[CALIB_SPINS], v[CALIB_SPINS * CALIB_PER_SPIN];
	unsigned ng = 0;
	for (unsigned g = 0; g < CALIB_SPINS; g++) {
		unsigned m = 0;
		double sspan = 0;
		for (unsigned i = 0; i < n; i++) {
			/* The spin length nearest the span the kernel saw. */
			unsigned best = 0;
			for (unsigned k = 1; k < CALIB_SPINS; k++)
				if (fabs(s[i].span_ns - (double)calib_spin_ns[k]) <
				    fabs(s[i].span_ns - (double)calib_spin_ns[best]))
					best = k;
			if (best == g)
				v[m++] = s[i].ab_ns, sspan += s[i].span_ns;
		}
		if (m >= 3)
			gx[ng] = sspan / m, gy[ng] = undelayed(v, m, width, &share), ng++;
	}
	double sx = 0, sy = 0, sxx = 0, sxy = 0;
	for (unsigned g = 0; g < ng; g++)
		sx += gx[g], sy += gy[g], sxx += gx[g] * gx[g], sxy += gx[g] * gy[g];
	double den = (double)ng * sxx - sx * sx;
	r->slope = ng >= 2 && den > 0 ? ((double)ng * sxy - sx * sy) / den : NAN;
	/* The offset lies between the interval's excess over the span (if the
	 * kernel had no head or tail) and that less the whole gap (if a kernel
	 * following another took no step of its own): the middle, within half
	 * the gap of the truth either way (calib.h). */
	r->excess_ns = undelayed(d, n, width, &share_d);
	r->offset_ns = r->excess_ns - r->gap_ns / 2;
	r->bound_ns = r->gap_ns / 2;
	r->delayed = 1 - fmin(share_d, share_g);
	/* How tight the undelayed launches are: half their interquartile
	 * range. */
	unsigned m = (unsigned)(share_d * n + 0.5);
	r->spread_ns = m ? (quantile_sorted(d, m, 0.75) - quantile_sorted(d, m, 0.25)) / 2 : NAN;
	if (step == 0 || step > CALIB_TIMER_RES_MAX_NS)
		snprintf(r->why, sizeof r->why, "the GPU's %%globaltimer steps by %.0f ns (at most %.0f wanted)",
			 step, CALIB_TIMER_RES_MAX_NS);
	else if (!(r->slope >= 0.9 && r->slope <= 1.1))
		snprintf(r->why, sizeof r->why,
			 "the held interval does not follow the kernel's span (slope %.3f, want 0.9-1.1)", r->slope);
	else if (r->delayed > 1 - CALIB_UNDELAYED_MIN) {
		snprintf(r->why, sizeof r->why,
			 "%.0f%% of the launches or pairs were delayed past %.0f ns (a quarter of the floor, "
			 "at least 250 ns): the GPU was busy with other work",
			 r->delayed * 100, width);
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
