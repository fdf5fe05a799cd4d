/* The overhead governor of continuous mode: observation runs in
 * duty-cycled windows (since 2026-12-01 census windows of launch
 * callbacks, docs/internals/inject.md), and the governor sizes them so
 * that the time they add to the application stays under a budget.
 *
 * Model: while a window is open, each observed record (a kernel launch, a
 * copy, a memset) costs the application about cost_ns: a prior for what
 * no clock of the library sees (CUPTI's dispatch of the callbacks), plus
 * the library's own time per record, measured (governor_observe_processing:
 * the callbacks' time and the library thread's work inside the windows).
 * Each window also costs fixed_ns for opening and closing it (a prior; the
 * library thread's measured time only ever raises it), and may leave a
 * tail: for kernel activity tracing on the H200, launches stayed dearer
 * for seconds after a window (tail_ns of traced time per window); the
 * census leaves none (tail_ns 0).
 * With r records per second (measured in the windows, corrected for the
 * slowdown the window itself causes) and f = r * cost the share a window
 * adds, a cycle of `on` observed and `off` unobserved nanoseconds adds
 *
 *     added = on * f + fixed + tail * f      per cycle of on + off,
 *
 * and the governor keeps added / (on + off) <= plan_share * budget: the
 * price is a floor (what no clock of the library sees is a prior), and on
 * the H200 the PyTorch workloads paid 1.4 times it inside the windows
 * (median of 12 training runs, 0.86-2.8 per run; 2026-12-03), so a plan
 * that spent the whole budget by the price overran it. Since a window's
 * fixed part and tail do not depend on its length, windows are as long
 * as allowed (window_max_ns) and the period stretches to fit the
 * budget, up to period_max_ns (then windows shorten; the budget wins
 * over the longest period). A rate cheap enough to observe all the time
 * (f <= budget) keeps the window open. The rate estimate rises at once
 * and falls slowly. Pure arithmetic: no clocks, no CUPTI, tested in CI. */
#ifndef GPULSE_INJECT_GOVERNOR_H
#define GPULSE_INJECT_GOVERNOR_H

#include <stdint.h>

struct governor_config {
	uint32_t budget_ppm;      /* added time allowed, parts per million (5000 = 0.5%) */
	double cost_ns;           /* prior cost of one record while tracing */
	double fixed_ns;          /* prior cost of opening + closing one window */
	uint64_t tail_ns;         /* what a window leaves behind, in traced time */
	uint64_t window_min_ns;   /* shortest on-window */
	uint64_t window_max_ns;   /* longest on-window (also when always on) */
	uint64_t period_ns;       /* idle processes: one window per period */
	uint64_t period_max_ns;   /* longest cycle, unless the budget needs longer */
	double plan_share;        /* share of the budget the plan spends by its own price (0-1] */
};

/* Defaults: 0.5% budget, 2 µs per record, 20 ms per window and a tail
 * of 2 s, windows of 2-200 ms, one per 10 s for an idle process, at least
 * one every 10 minutes where the budget allows, and plans that spend 60%
 * of the budget by the governor's price (GOVERNOR_PLAN_SHARE). */
void governor_config_default(struct governor_config *c);

struct governor {
	struct governor_config cfg;
	double rate_hz;           /* records per second without tracing (estimate) */
	int have_rate;
	double cost_ns;           /* current per-record cost */
	double fixed_ns;          /* current per-window cost: max(prior, measured) */
	double fixed_measured_ns; /* the library thread's time per window, smoothed (0: none yet) */
	uint64_t on_ns, off_ns;   /* plan for the next cycle */
	uint32_t duty_ppm;        /* on / (on + off) */
	uint32_t estimate_ppm;    /* predicted added time of the plan */
	uint64_t windows;         /* windows completed */
};

/* Start with no rate known: the first window is a short probe. A rate
 * measured as zero (windows with no records) plans one longest window a
 * period, never tracing all the time on that evidence. */
void governor_init(struct governor *g, const struct governor_config *c);

/* A window of on_ns saw `records` records, and opening + closing it took
 * window_cost_ns of the library thread's time (0: not measured), which
 * raises the per-window cost above the prior but never lowers it below.
 * Updates the rate and plans the next cycle. */
void governor_window_done(struct governor *g, uint64_t on_ns, uint64_t records,
			  double window_cost_ns);

/* The library's own processing time per record, measured; added to the
 * prior launch cost (smoothed). */
void governor_observe_processing(struct governor *g, double ns_per_record);

/* Change the budget (from the daemon's CONFIG frame); replans. */
void governor_set_budget(struct governor *g, uint32_t budget_ppm);

/* Overhead, in ppm, that a plan of on/off with the current estimates
 * would add (exposed for tests and the status frame). */
uint32_t governor_predict_ppm(const struct governor *g, uint64_t on_ns, uint64_t off_ns);

#endif
