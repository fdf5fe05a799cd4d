/* Is a figure a regression? Against the card's own history (its rolling
 * median, with a noise band measured from that history) and against the
 * fleet (the median of the same model's cards). Pure: plain arrays in,
 * a verdict out; gpulsed and `gpulse bench` fetch the histories
 * (docs/internals/bench.md, "Regressions"). */
#ifndef GPULSE_BENCH_COMPARE_H
#define GPULSE_BENCH_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_result.h"
#include "buf.h"

/* One earlier result of the same figure on the same card. */
struct bench_point {
	int64_t t_ms;
	double value;         /* the run's median, in the figure's unit */
	char driver[32];
	bool baseline;        /* false: the run was marked not a baseline */
};

struct bench_compare_opts {
	size_t window;        /* baseline runs the rolling median takes; 0: 8 */
	size_t min_points;    /* runs needed before judging; 0: 3 */
	double min_noise;     /* noise band floor, ratio; 0: 0.02 (a run of
	                         --quick spreads up to 2%) */
	double max_noise;     /* noise band ceiling; 0: 0.05: a history noisier
	                         than this cannot tell a 5% loss from noise, and
	                         its figure is judged too noisy (below) */
	double noise_k;       /* band = noise_k x 1.4826 x MAD / median; 0: 3 */
	double fleet_tolerance; /* below the fleet median by more: 0: 0.05 */
	size_t fleet_min;     /* peers needed; 0: 2 */
};

struct bench_verdict {
	/* own history */
	bool have_own;        /* enough baseline runs on this driver */
	size_t own_points;    /* runs the median was taken over */
	double own_median;
	double noise_ratio;   /* the band used: the history's own, at least
	                         min_noise */
	bool too_noisy;       /* the band is wider than max_noise: only a loss
	                         past the band is flagged, and the verdict says
	                         the figure cannot catch a loss of max_noise */
	double own_deficit;   /* 1 - value / median (for latency, value /
	                         median - 1): positive is worse */
	bool own_regression;
	bool new_baseline;    /* the driver differs from the last run's: the
	                         history before it is not compared */
	char previous_driver[32];
	/* fleet */
	bool have_fleet;
	size_t fleet_points;
	double fleet_median;
	double fleet_deficit;
	double fleet_tolerance; /* the deficit allowed: fleet_tolerance, or the
	                           own noise band when that is wider */
	bool fleet_regression;
};

/* Judge `value` (higher is better unless !higher_is_better) measured on
 * `driver` against hist[0..n) (oldest first: only baseline points on the
 * same driver count, the newest `window` of them) and peers[0..npeers)
 * (other cards' medians of the same model and figure; may be NULL). */
void bench_compare(const struct bench_point *hist, size_t n, const char *driver, double value,
		   bool higher_is_better, const double *peers, size_t npeers,
		   const struct bench_compare_opts *o, struct bench_verdict *v);


/* Append {"figure","variant","own":{...},"fleet":{...},...} for one
 * figure's verdict to `out` (the "verdicts" members of gpulsed's answers
 * and of `gpulse bench --compare --json`). */
void bench_verdict_to_json(const struct bench_figure *f, const struct bench_verdict *v,
			   struct buf *out);

#endif
