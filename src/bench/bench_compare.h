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

#include "bench/bench_result.h"
#include "common/buf.h"

/* One earlier result of the same figure on the same card. */
struct bench_point {
	int64_t t_ms;
	double value;         /* the run's value (bench_figure.value), in the
	                         figure's unit */
	char driver[32];
	char method[BENCH_METHOD_MAX]; /* how the value was made ("median",
	                         "fast_p90"); "" reads as BENCH_METHOD_LEGACY */
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
	bool new_baseline;    /* the driver or the method differs from the last
	                         run's: the history before it is not compared */
	char previous_driver[32];   /* the last run's, when the driver changed */
	char previous_method[BENCH_METHOD_MAX]; /* the last run's, when the
	                         method changed ("" otherwise) */
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
 * `driver` by `method` (NULL or "": BENCH_METHOD_LEGACY) against
 * hist[0..n) (oldest first: only baseline points since the last change
 * of driver or method count, the newest `window` of them; a value made
 * another way is another figure, as one on another driver is) and
 * peers[0..npeers) (other cards' values of the same model, figure and
 * method; may be NULL). */
void bench_compare(const struct bench_point *hist, size_t n, const char *driver,
		   const char *method, double value, bool higher_is_better, const double *peers,
		   size_t npeers, const struct bench_compare_opts *o, struct bench_verdict *v);

/* Whether two methods name the same one ("" and NULL are
 * BENCH_METHOD_LEGACY). */
bool bench_same_method(const char *a, const char *b);


/* Append {"figure","variant","own":{...},"fleet":{...},...} for one
 * figure's verdict to `out` (the "verdicts" members of gpulsed's answers
 * and of `gpulse bench --compare --json`). */
void bench_verdict_to_json(const struct bench_figure *f, const struct bench_verdict *v,
			   struct buf *out);

#endif
