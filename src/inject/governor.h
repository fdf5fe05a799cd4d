/* The overhead governor of continuous mode: tracing runs in duty-cycled
 * windows, and the governor sizes them so that the time tracing adds to
 * the application stays under a budget (DESIGN.md decision 7).
 *
 * Model: while tracing is on, each activity record (a kernel launch, a
 * copy, a memset) costs the launching thread about cost_ns (2 µs on
 * Hopper by the measurements in DESIGN.md, plus the library's own
 * processing per record, measured), and opening and closing a window
 * costs fixed_ns. That fixed cost is mostly not the library's: on the
 * H200 (docs/PERFORMANCE.md, 2026-11-29 evening) the duty-cycled mode
 * cost PyTorch as much as tracing all the time, or more, while the
 * library's thread spent about 1 ms a window; the application pays for
 * CUPTI's switch in ways no clock of the library sees. So the prior is
 * 20 ms, the measured time of the library's thread only ever raises it,
 * and windows are few: one every 10 s by aim. With r records per second (measured in the windows,
 * corrected for the slowdown tracing itself causes), a cycle of `on`
 * traced and `off` untraced nanoseconds adds
 *
 *     added = on * r * cost + fixed          per cycle of on + off,
 *
 * and the governor picks on and off so that added / (on + off) <= budget,
 * aiming at one window per `period_ns` (the flush interval) with windows
 * between window_min_ns and window_max_ns. Windows are short so that a
 * sudden rise in the launch rate costs at most one short window before
 * the governor sees it; the rate estimate rises at once and falls slowly.
 * Pure arithmetic: no clocks, no CUPTI, tested in CI. */
#ifndef GPULSE_INJECT_GOVERNOR_H
#define GPULSE_INJECT_GOVERNOR_H

#include <stdint.h>

struct governor_config {
	uint32_t budget_ppm;      /* added time allowed, parts per million (5000 = 0.5%) */
	double cost_ns;           /* prior cost of one record while tracing */
	double fixed_ns;          /* prior cost of opening + closing one window */
	uint64_t window_min_ns;   /* shortest on-window */
	uint64_t window_max_ns;   /* longest on-window (also when always on) */
	uint64_t period_ns;       /* aim: one window per period */
	uint64_t period_max_ns;   /* longest cycle: at least one window this often */
};

/* Defaults: 0.5% budget, 2 µs per record, 20 ms per window, windows of
 * 2-200 ms, one per 10 s by aim, at least one every 60 s. */
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
