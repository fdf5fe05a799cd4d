/* Duty-cycle arithmetic of continuous mode; see governor.h. */
#include "inject/governor.h"

#include <string.h>

#define MIN_ON_NS 1000000ull /* 1 ms: shorter windows see too little to measure */
#define PERIOD_CAP_NS 3600000000000ull /* an hour: the longest cycle, whatever the budget */
/* The share of the budget a plan spends by the governor's own price (see
 * governor.h): the training step's in-window cost was 1.4 times the
 * price at the median on the H200, so 0.6 keeps it near 0.42 of the
 * budget there, and the runs that paid 1.65 times or less inside it. */
#define GOVERNOR_PLAN_SHARE 0.6

void governor_config_default(struct governor_config *c)
{
	memset(c, 0, sizeof *c);
	c->budget_ppm = 5000;
	c->cost_ns = 2000;
	c->fixed_ns = 20000000;
	c->tail_ns = 2000000000;
	c->window_min_ns = 2000000;
	c->window_max_ns = 200000000;
	c->period_ns = 10000000000ull;
	c->period_max_ns = 600000000000ull;
	c->plan_share = GOVERNOR_PLAN_SHARE;
}

/* Fraction of wall time added per unit of traced time. */
static double traced_fraction(const struct governor *g)
{
	return g->rate_hz * g->cost_ns / 1e9;
}

/* What closing and reopening one window costs the application: the
 * fixed part, and the tail it leaves (launches stay dearer after tracing
 * stops, in proportion to how much tracing cost them). */
static double window_fixed_ns(const struct governor *g)
{
	return g->fixed_ns + (double)g->cfg.tail_ns * traced_fraction(g);
}

uint32_t governor_predict_ppm(const struct governor *g, uint64_t on_ns, uint64_t off_ns)
{
	double cycle = (double)on_ns + (double)off_ns;
	if (cycle <= 0)
		return 0;
	/* A window that stays open (off == 0) is not closed and reopened. */
	double fixed = off_ns ? window_fixed_ns(g) : 0;
	double ppm = ((double)on_ns * traced_fraction(g) + fixed) / cycle * 1e6;
	return ppm >= 4e9 ? UINT32_MAX : (uint32_t)(ppm + 0.5);
}

static void plan(struct governor *g)
{
	const struct governor_config *c = &g->cfg;
	double budget = (double)c->budget_ppm / 1e6 * c->plan_share;
	double f = traced_fraction(g);
	uint64_t on, off;
	if (!g->have_rate) {
		/* Probe: one short window, right away. */
		on = c->window_min_ns;
		off = 0;
	} else if (g->rate_hz <= 0) {
		/* Windows saw no records at all. That is an idle process, or
		 * records that did not come back (seen on the H200: a window's
		 * kernels missing while launches still paid for tracing), so
		 * "free, stay on" is not safe: one window a period keeps
		 * looking at a fixed, small cost (a longer period when
		 * the budget cannot pay a window's fixed cost each period). */
		on = c->window_max_ns;
		double cycle = (double)c->period_ns;
		/* Each window's fixed cost must fit the budget too. */
		double need = budget > 0 ? g->fixed_ns / budget : (double)c->period_max_ns;
		if (need > cycle)
			cycle = need;
		if (cycle > (double)c->period_max_ns)
			cycle = (double)c->period_max_ns;
		off = cycle > (double)on ? (uint64_t)(cycle - (double)on) : on;
	} else if (f <= budget) {
		/* Tracing all the time fits: keep the window open. */
		on = c->window_max_ns;
		off = 0;
	} else {
		/* Each window costs its fixed part and the tail it leaves,
		 * whatever its length, so windows are as long as allowed and
		 * the period stretches to fit the budget: the most traced time
		 * for the cost. A period beyond the longest is cut back by
		 * shortening the window, down to MIN_ON_NS; past that the
		 * budget wins over "at least one window a longest period". */
		double fixed = window_fixed_ns(g);
		double want_on = (double)c->window_max_ns;
		double period = budget > 0 ? (want_on * f + fixed) / budget : 1e30;
		if (period > (double)c->period_max_ns) {
			want_on = (budget * (double)c->period_max_ns - fixed) / f;
			if (want_on < (double)MIN_ON_NS)
				want_on = (double)MIN_ON_NS;
			period = budget > 0 ? (want_on * f + fixed) / budget : 1e30;
			if (period < (double)c->period_max_ns)
				period = (double)c->period_max_ns;
			if (period > (double)PERIOD_CAP_NS)
				period = (double)PERIOD_CAP_NS;
		}
		if (period < want_on)
			period = want_on;
		on = (uint64_t)want_on;
		off = (uint64_t)(period - want_on);
	}
	g->on_ns = on;
	g->off_ns = off;
	g->duty_ppm = (uint32_t)((double)on / ((double)on + (double)off) * 1e6 + 0.5);
	g->estimate_ppm = governor_predict_ppm(g, on, off);
}

void governor_init(struct governor *g, const struct governor_config *c)
{
	memset(g, 0, sizeof *g);
	g->cfg = *c;
	if (g->cfg.window_min_ns < MIN_ON_NS)
		g->cfg.window_min_ns = MIN_ON_NS;
	if (g->cfg.window_max_ns < g->cfg.window_min_ns)
		g->cfg.window_max_ns = g->cfg.window_min_ns;
	if (g->cfg.period_ns < g->cfg.window_max_ns)
		g->cfg.period_ns = g->cfg.window_max_ns;
	if (g->cfg.period_max_ns < g->cfg.period_ns)
		g->cfg.period_max_ns = g->cfg.period_ns;
	if (!(g->cfg.plan_share > 0 && g->cfg.plan_share <= 1))
		g->cfg.plan_share = 1; /* unset or out of range: the whole budget */
	g->cost_ns = c->cost_ns > 0 ? c->cost_ns : 2000;
	g->fixed_ns = c->fixed_ns >= 0 ? c->fixed_ns : 0;
	plan(g);
}

void governor_window_done(struct governor *g, uint64_t on_ns, uint64_t records,
			  double window_cost_ns)
{
	g->windows++;
	if (on_ns > 0) {
		/* The rate seen while tracing is slowed by tracing itself:
		 * a thread that launched r per second spends r * cost of
		 * each second in tracing, so untraced r = r_t / (1 - r_t * cost).
		 * At most twice r_t: a window that saw more than half its time
		 * in tracing costs caught a burst (or a cost below the prior),
		 * and dividing by what is left would inflate the rate without
		 * bound (a burst in a 2 ms probe read as 20 times its rate). */
		double rt = (double)records * 1e9 / (double)on_ns;
		double busy = rt * g->cost_ns / 1e9;
		double r = busy < 0.5 ? rt / (1.0 - busy) : rt * 2.0;
		if (!g->have_rate || r > g->rate_hz)
			g->rate_hz = r; /* rises are believed at once */
		else
			g->rate_hz = 0.5 * g->rate_hz + 0.5 * r;
		/* Halving never reaches zero: a process that stopped launching
		 * (or whose callbacks stopped coming) would be priced at nearly
		 * nothing and its window kept open for good, holding CUPTI's one
		 * subscriber from any profiler started meanwhile (the H200,
		 * 2026-12-03: torch.profiler started late in such a process got
		 * no CUDA events). A window that heard nothing, with the estimate
		 * under one record per longest window, is idle: one window a
		 * period until records come back. */
		if (records == 0 && g->rate_hz * (double)g->cfg.window_max_ns / 1e9 < 1.0)
			g->rate_hz = 0;
		g->have_rate = 1;
	}
	if (window_cost_ns > 0) {
		/* What the library's thread measures is a floor of what the
		 * application pays for a window, never less than the prior. */
		g->fixed_measured_ns = g->fixed_measured_ns > 0
					       ? 0.8 * g->fixed_measured_ns + 0.2 * window_cost_ns
					       : window_cost_ns;
		g->fixed_ns = g->fixed_measured_ns > g->cfg.fixed_ns ? g->fixed_measured_ns
								     : g->cfg.fixed_ns;
	}
	plan(g);
}

void governor_observe_processing(struct governor *g, double ns_per_record)
{
	if (!(ns_per_record >= 0) || ns_per_record > 1e6)
		return;
	double extra = g->cost_ns - g->cfg.cost_ns;
	extra = 0.8 * extra + 0.2 * ns_per_record;
	g->cost_ns = g->cfg.cost_ns + extra;
	plan(g);
}

void governor_set_budget(struct governor *g, uint32_t budget_ppm)
{
	g->cfg.budget_ppm = budget_ppm;
	plan(g);
}
