/* The health score (health.h): each reason's rule, in the order of
 * HEALTH_REASONS. docs/internals/health.md states the same rules in
 * prose; a change here changes that page. */
#include "diagnose/health.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const reason_names[] = {
#define HEALTH_REASON_NAME(id, name) name,
	HEALTH_REASONS(HEALTH_REASON_NAME)
#undef HEALTH_REASON_NAME
};

const char *health_reason_name(int reason)
{
	if (reason < 0 || reason >= HEALTH_REASON_COUNT)
		return NULL;
	return reason_names[reason];
}

/* Meanings as NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors)
 * words them. Codes an application usually causes (13, 31, 43, 45) cost
 * nothing: they are shown, since a burst of them on one card alone is
 * worth a look, but a bad kernel is not a bad GPU. */
const struct health_xid_info health_xid_table[] = {
	{13, "Graphics Engine Exception (usually the application)", 0, false},
	{31, "GPU memory page fault (usually the application)", 0, false},
	{43, "GPU stopped processing (usually the application)", 0, false},
	{45, "Preemptive cleanup, due to previous errors", 0, false},
	{48, "Double Bit ECC Error", 60, true},
	{61, "Internal micro-controller breakpoint/warning", 20, false},
	{62, "Internal micro-controller halt", 60, true},
	{63, "ECC page retirement or row remapping recording event", 10, false},
	{64, "ECC page retirement or row remapper recording failure", 60, true},
	{74, "NVLink Error", 40, true},
	{79, "GPU has fallen off the bus", 100, true},
	{92, "High single-bit ECC error rate", 20, false},
	{94, "Contained ECC error", 30, true},
	{95, "Uncontained ECC error", 80, true},
	{119, "GSP RPC Timeout", 60, true},
	{120, "GSP Error", 60, true},
	{140, "Unrecovered ECC Error", 60, true},
};
const size_t health_xid_count = sizeof health_xid_table / sizeof health_xid_table[0];

const struct health_xid_info *health_xid_lookup(uint32_t code)
{
	for (size_t i = 0; i < health_xid_count; i++)
		if (health_xid_table[i].code == code)
			return &health_xid_table[i];
	return NULL;
}

static void say(struct gpu_health_score *out, enum health_reason r, double penalty, bool drain,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void say(struct gpu_health_score *out, enum health_reason r, double penalty, bool drain,
		const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->evidence[r], sizeof out->evidence[r], fmt, ap);
	va_end(ap);
	out->penalty[r] = penalty;
	out->drains[r] = drain;
}

/* The points of the window that hold input k, as a view. */
struct series {
	const struct health_point *p[2];  /* first and last with the input */
	size_t n;
};

static bool has(const struct health_point *p, enum health_in k)
{
	return (p->valid >> k) & 1u;
}

/* The increase of counter k over the window, across resets (a value
 * lower than the one before starts counting again from it), and the
 * increases in the first and second half of the window's span. */
struct growth {
	bool known;        /* two or more readings */
	double total, first_half, second_half;
	double span_s;     /* from the first reading to the last */
	double last;
};

static struct growth counter_growth(const struct health_point *pts, size_t n, size_t from,
				    enum health_in k)
{
	struct growth g = {0};
	const struct health_point *first = NULL, *prev = NULL;
	for (size_t i = from; i < n; i++) {
		if (has(&pts[i], k)) {
			if (!first)
				first = &pts[i];
			prev = &pts[i];
		}
	}
	if (!first || first == prev) {
		if (first) {
			g.last = first->v[k];
		}
		return g;
	}
	double mid = first->t_s + (prev->t_s - first->t_s) / 2;
	const struct health_point *last = NULL;
	for (size_t i = from; i < n; i++) {
		if (!has(&pts[i], k))
			continue;
		if (last) {
			double d = pts[i].v[k] >= last->v[k] ? pts[i].v[k] - last->v[k] : pts[i].v[k];
			g.total += d;
			if (pts[i].t_s <= mid)
				g.first_half += d;
			else
				g.second_half += d;
		}
		last = &pts[i];
	}
	g.known = true;
	g.span_s = prev->t_s - first->t_s;
	g.last = prev->v[k];
	return g;
}

/* The last reading of input k in the window, or NAN. */
static double last_value(const struct health_point *pts, size_t n, size_t from,
			 enum health_in k)
{
	for (size_t i = n; i > from; i--)
		if (has(&pts[i - 1], k))
			return pts[i - 1].v[k];
	return NAN;
}

static double per_hour(double count, double span_s)
{
	return span_s > 0 ? count * 3600.0 / span_s : 0;
}

/* How long the window covers, for the text: "3h12m", "45s". */
static void fmt_span(char *buf, size_t len, double s)
{
	long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, len, "%ldh%02ldm", t / 3600, t % 3600 / 60);
	else if (t >= 60)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%lds", t);
}

static void judge_ecc(const struct health_point *pts, size_t n, size_t from,
		      struct gpu_health_score *out)
{
	char span[32];
	struct growth dbe = counter_growth(pts, n, from, HI_ECC_DBE);
	double dbe_now = last_value(pts, n, from, HI_ECC_DBE);
	if (dbe.known && dbe.total > 0) {
		fmt_span(span, sizeof span, dbe.span_s);
		say(out, HEALTH_ECC_UNCORRECTED, 60, true,
		    "%.0f uncorrectable ECC error%s in the last %s (%.0f since driver load)", dbe.total,
		    dbe.total == 1 ? "" : "s", span, dbe.last);
	} else if (dbe_now > 0) {
		say(out, HEALTH_ECC_UNCORRECTED, 20, false,
		    "%.0f uncorrectable ECC error%s since driver load, none in the window", dbe_now,
		    dbe_now == 1 ? "" : "s");
	}

	struct growth sbe = counter_growth(pts, n, from, HI_ECC_SBE);
	if (!sbe.known || sbe.total <= 0 || sbe.span_s <= 0)
		return;
	double rate = per_hour(sbe.total, sbe.span_s);
	double p = rate >= 100 ? 30 : rate >= 10 ? 15 : rate >= 1 ? 5 : 0;
	/* Rising: the second half of the window saw at least twice the
	 * errors of the first, and enough of them not to be noise. */
	bool rising = sbe.second_half >= 2 * sbe.first_half && sbe.second_half >= 3;
	if (rising)
		p += 15;
	fmt_span(span, sizeof span, sbe.span_s);
	say(out, HEALTH_ECC_CORRECTED_RATE, p, false,
	    "%.0f corrected ECC errors in %s (%.3g/h)%s; %.0f then %.0f by half-window", sbe.total,
	    span, rate, rising ? ", rising" : "", sbe.first_half, sbe.second_half);
}

static void judge_rows(const struct health_point *pts, size_t n, size_t from,
		       struct gpu_health_score *out)
{
	double pending = last_value(pts, n, from, HI_REMAP_PENDING);
	double failed = last_value(pts, n, from, HI_REMAP_FAILED);
	double cor = last_value(pts, n, from, HI_REMAP_COR);
	double unc = last_value(pts, n, from, HI_REMAP_UNC);
	if (pending > 0)
		say(out, HEALTH_REMAP_PENDING, 30, true,
		    "a row remap is pending: drain and reset the GPU to apply it");
	if (failed > 0)
		say(out, HEALTH_REMAP_FAILED, 100, true,
		    "a row remap failed: the memory has no spare row left there; service the GPU");
	if ((cor > 0 && !isnan(cor)) || (unc > 0 && !isnan(unc))) {
		double c = isnan(cor) ? 0 : cor, u = isnan(unc) ? 0 : unc;
		double p = fmin(20, 5 * u + 1 * c);
		say(out, HEALTH_ROWS_REMAPPED, p, false,
		    "%.0f rows remapped (%.0f for uncorrectable, %.0f for correctable errors)", c + u,
		    u, c);
	}

	double rp = last_value(pts, n, from, HI_RETIRED_PENDING);
	double rs = last_value(pts, n, from, HI_RETIRED_SBE);
	double rd = last_value(pts, n, from, HI_RETIRED_DBE);
	double s = isnan(rs) ? 0 : rs, d = isnan(rd) ? 0 : rd;
	if (rp > 0 || s + d > 0) {
		double p = fmin(40, 5 * d + 2 * s);
		bool drain = rp > 0;
		if (drain)
			p = fmax(p, 30);
		say(out, HEALTH_RETIRED_PAGES, p, drain, "%.0f pages retired (%.0f double-bit, %.0f "
		    "single-bit)%s", s + d, d, s,
		    drain ? "; one waits for a reset to be retired: drain and reset" : "");
	}
}

static void judge_xids(const struct health_input *in, double since_s,
		       struct gpu_health_score *out)
{
	/* Per code in the window: how many, and the latest. The dearest code
	 * sets the penalty (repeats of one fault are one fault, and several
	 * faults are judged by the worst); the text names it and counts all. */
	enum { CODES = 64 };
	struct { uint32_t code; uint64_t count; double last_s; } seen[CODES];
	size_t ncodes = 0;
	uint64_t total = 0;
	bool drain = false;
	for (size_t i = 0; i < in->nxids; i++) {
		const struct health_xid *x = &in->xids[i];
		if (x->t_s <= since_s || x->t_s > in->now_s || x->count == 0)
			continue;
		total += x->count;
		const struct health_xid_info *info = health_xid_lookup(x->code);
		drain |= info && info->drain;
		size_t k = 0;
		while (k < ncodes && seen[k].code != x->code)
			k++;
		if (k == ncodes) {
			if (ncodes == CODES)
				continue; /* counted in the total, not named */
			seen[ncodes++] = (typeof(seen[0])){x->code, 0, x->t_s};
		}
		seen[k].count += x->count;
		if (x->t_s > seen[k].last_s)
			seen[k].last_s = x->t_s;
	}
	if (total == 0)
		return;
	size_t w = 0;
	double worst = -1;
	for (size_t k = 0; k < ncodes; k++) {
		const struct health_xid_info *info = health_xid_lookup(seen[k].code);
		double p = info ? info->penalty : HEALTH_XID_OTHER_PENALTY;
		if (p > worst || (p == worst && seen[k].count > seen[w].count)) {
			worst = p;
			w = k;
		}
	}
	const struct health_xid_info *info = health_xid_lookup(seen[w].code);
	char span[32];
	fmt_span(span, sizeof span, in->now_s - seen[w].last_s);
	say(out, HEALTH_XID, worst, drain, "XID %u x%llu (%s), last %s ago; %llu XID%s in all",
	    seen[w].code, (unsigned long long)seen[w].count,
	    info ? info->meaning : "not in the table", span, (unsigned long long)total,
	    total == 1 ? "" : "s");
}

static void judge_pcie(const struct health_point *pts, size_t n, size_t from,
		       struct gpu_health_score *out)
{
	char span[32];
	struct growth r = counter_growth(pts, n, from, HI_PCIE_REPLAY);
	if (r.known && r.total > 0) {
		double rate = per_hour(r.total, r.span_s);
		double p = rate >= 100 ? 20 : rate >= 10 ? 10 : 5;
		fmt_span(span, sizeof span, r.span_s);
		say(out, HEALTH_PCIE_REPLAY, p, false, "%.0f PCIe replays in %s (%.3g/h)", r.total, span,
		    rate);
	}
	double w = last_value(pts, n, from, HI_PCIE_WIDTH);
	double wmax = last_value(pts, n, from, HI_PCIE_WIDTH_MAX);
	double wmin = NAN, wtop = NAN;
	for (size_t i = from; i < n; i++) {
		if (!has(&pts[i], HI_PCIE_WIDTH))
			continue;
		double v = pts[i].v[HI_PCIE_WIDTH];
		wmin = isnan(wmin) || v < wmin ? v : wmin;
		wtop = isnan(wtop) || v > wtop ? v : wtop;
	}
	bool narrow = !isnan(w) && !isnan(wmax) && wmax > 0 && w < wmax;
	bool changed = !isnan(wmin) && wmin != wtop;
	if (narrow || changed) {
		say(out, HEALTH_PCIE_LINK, (narrow ? 20 : 0) + (changed ? 10 : 0), false,
		    "PCIe link x%.0f of x%.0f%s", w, isnan(wmax) ? w : wmax,
		    changed ? "; its width changed in the window" : "");
	}
}

/* A policy's share of the window's time (violation seconds over span). */
static void judge_violation(const struct health_point *pts, size_t n, size_t from,
			    enum health_in k, enum health_reason r, const char *what,
			    const double bands[3], const double points[3],
			    struct gpu_health_score *out)
{
	struct growth g = counter_growth(pts, n, from, k);
	if (!g.known || g.span_s <= 0 || g.total <= 0)
		return;
	double share = fmin(1, g.total / g.span_s);
	double p = 0;
	for (int i = 0; i < 3; i++)
		if (share >= bands[i])
			p = points[i];
	char span[32];
	fmt_span(span, sizeof span, g.span_s);
	say(out, r, p, false, "%s held the clocks down %.1f%% of %s", what, share * 100, span);
}

static void judge_clocks(const struct health_point *pts, size_t n, size_t from,
			 struct gpu_health_score *out)
{
	static const double thermal_bands[3] = {0.01, 0.10, 0.30}, thermal_pts[3] = {5, 15, 25};
	/* Power capping is how a busy card is meant to run; only a card held
	 * at its cap nearly all the time is worth a mention. */
	static const double power_bands[3] = {0.50, 0.90, 2}, power_pts[3] = {2, 5, 5};
	judge_violation(pts, n, from, HI_VIOL_THERMAL, HEALTH_THERMAL, "the thermal policy",
			thermal_bands, thermal_pts, out);
	judge_violation(pts, n, from, HI_VIOL_POWER, HEALTH_POWER, "the power policy", power_bands,
			power_pts, out);

	size_t seen = 0, slow = 0;
	for (size_t i = from; i < n; i++) {
		if (!has(&pts[i], HI_HW_SLOWDOWN))
			continue;
		seen++;
		slow += pts[i].v[HI_HW_SLOWDOWN] > 0;
	}
	if (slow == 0)
		return;
	double share = (double)slow / (double)seen;
	say(out, HEALTH_CLOCK_SLOWDOWN, share >= 0.10 ? 20 : share >= 0.01 ? 10 : 5, false,
	    "hardware slowdown (thermal or power brake) in %zu of %zu readings", slow, seen);
}

void health_eval(const struct health_input *in, struct gpu_health_score *out)
{
	memset(out, 0, sizeof *out);
	out->valid = true;
	out->top_reason = -1;
	double since = in->now_s - in->window_s;

	/* The window's readings: those after `since`, in increasing time
	 * (a reading not after the one before is skipped by starting past
	 * it: callers append in order, so this only guards a clock step). */
	size_t from = 0;
	while (from < in->npoints && in->points[from].t_s <= since)
		from++;
	size_t n = in->npoints;
	while (n > from && in->points[n - 1].t_s > in->now_s)
		n--;
	if (n > from)
		out->window_s = fmin(in->window_s, in->now_s - in->points[from].t_s);

	judge_ecc(in->points, n, from, out);
	judge_rows(in->points, n, from, out);
	judge_xids(in, since, out);
	judge_pcie(in->points, n, from, out);
	judge_clocks(in->points, n, from, out);
	if (in->bench.set)
		say(out, HEALTH_BENCH_REGRESSION, 15, false, "%s", in->bench.text);
	if (in->corruption.set)
		say(out, HEALTH_CORRUPTION, 100, true, "%s", in->corruption.text);

	double total = 0, top = 0;
	for (int r = 0; r < HEALTH_REASON_COUNT; r++) {
		total += out->penalty[r];
		out->drain |= out->drains[r];
	}
	/* The top reason: the dearest of the draining ones when any drains,
	 * else the dearest; ties go to the earlier reason of the table. */
	for (int r = 0; r < HEALTH_REASON_COUNT; r++) {
		if (out->drain && !out->drains[r])
			continue;
		if (out->penalty[r] > top || (out->drains[r] && out->top_reason < 0)) {
			top = out->penalty[r];
			out->top_reason = r;
		}
	}
	out->score = fmax(0, 100 - total);
}
