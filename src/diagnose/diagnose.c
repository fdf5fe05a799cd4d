/* The bottleneck classifier; see diagnose.h, and docs/DIAGNOSIS.md for
 * every rule with the reason behind each threshold. The thresholds are
 * fractions of the card's own peaks or facts of how the counters behave,
 * never values fitted to one recording.
 *
 * For each window the classifier first finds the part to judge (all of
 * it, unless a job started or stopped in it after or before a long idle),
 * reduces those samples to the distribution of each quantity it uses
 * (mean, percentiles, share of samples past a level), then walks the
 * rules in the order an expert would: is anything running at all; is the
 * busy time thin, and if so is it copies or launches; is the link
 * saturated; is the GPU idle more than it works (starved); and only then,
 * for a GPU busy with kernels that fill it, which of its resources the
 * kernels exhaust. Findings (memory capacity, power, thermal, hardware,
 * ECC, XID) are judged independently of the class.
 *
 * Why one file: the rules are one decision, walked in the order above
 * over one window's reduced figures (struct wstats); the parts that
 * stand alone already live beside it (peaks, JSON, live, history,
 * health). */
#include "diagnose/diagnose.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/fields.h"
#include "common/status.h"

/* ---- Thresholds (docs/DIAGNOSIS.md, "Rules", gives each its reason) ---- */

/* Idle. NVML utilization counts whole percent and reads 0-1 % with no
 * work (driver housekeeping); GPM SM activity reads 0 with no warp
 * resident; PCIe below 1 % of the link is control traffic. */
#define IDLE_BUSY 0.02
#define IDLE_SM 0.01
#define IDLE_PCIE 0.01
#define IDLE_PCIE_ABS 100e6          /* bytes/s, when the link is unknown */

/* Data movement. Half the link's raw rate per direction is well over half
 * of what DMA achieves in practice (80-90 % of raw); 5 % of the link
 * (3.2 GB/s on Gen5 x16) is bulk copying, over 15x the launch traffic of
 * a Python launch loop; 1 GB/s is the absolute stand-in when the link is
 * unknown. */
#define PCIE_SATURATED 0.5
#define PCIE_SATURATED_SM 0.5
#define PCIE_BULK 0.05
#define PCIE_BULK_ABS 1e9

/* Thin busy time: SM activity per unit of busy time. A kernel that fills
 * the GPU keeps SM activity near utilization (0.8-1.0); below a quarter,
 * the typical kernel leaves three quarters of the SMs empty while it runs
 * (microsecond kernels live mostly in launch ramp-up and tail). */
#define THIN_SM_PER_BUSY 0.25
/* Busy time that is the compute engine's (GPM graphics_util) rather than
 * the copy engines'. */
#define ENGINE_SHARE 0.5

/* Starved: the GPU idles more than it works, or sits idle for whole
 * sample periods for at least 30 % of the window. */
#define STARVED_DUTY 0.5
#define IDLE_SAMPLE_BUSY 0.05
#define STARVED_IDLE_SAMPLES 0.3

/* Busy GPU. A pipe active in half of all SM cycles is the leading
 * consumer (dense GEMMs reach 0.75-0.95); DRAM at 60 % of theoretical is
 * two thirds of the ~90 % HBM achieves in practice. DRAM busy 80 % of the
 * time (mem_util) at 30 %+ of peak bandwidth is latency-bound access. */
#define PIPE_BOUND 0.5
#define DRAM_BOUND 0.6
#define MEM_BUSY_TIME 0.8
#define DRAM_LATENCY_MIN 0.3
#define PIPE_CEILING 1.0
#define DRAM_CEILING 0.9

/* Without GPM: a card doing SM or DRAM work draws well over half its
 * limit; busy at under 30 % (datacenter cards idle at 10-20 %) means the
 * busy time loads nothing. */
#define POWER_IDLE_LIKE 0.3
#define POWER_LOADED 0.5

/* Findings (memory pressure: struct diag_options). */
#define SHARE_POWER_CAP 0.2
#define SHARE_RARE 0.05
#define POWER_AT_LIMIT 0.97
#define CLOCK_HELD 0.95

/* Confidence (docs/DIAGNOSIS.md, "Confidence"). */
#define CONF_BASE 0.9
#define CONF_NEAR 0.15               /* relative distance to a threshold */
#define CONF_FEW_SAMPLES 5
#define CONF_NO_GPM_CAP 0.45

#define REASON_SW_POWER_CAP 0x4ULL
#define REASON_HW_SLOWDOWN 0x8ULL
#define REASON_SW_THERMAL 0x20ULL
#define REASON_HW_THERMAL 0x40ULL
#define REASON_HW_POWER_BRAKE 0x80ULL

/* ---- Names ---- */

static const char *const class_names[] = {
#define DIAG_CLASS_NAME(id, name) name,
	DIAG_CLASSES(DIAG_CLASS_NAME)
#undef DIAG_CLASS_NAME
};
static const char *const finding_names[] = {
#define DIAG_FINDING_NAME(id, name) name,
	DIAG_FINDINGS(DIAG_FINDING_NAME)
#undef DIAG_FINDING_NAME
};
static const char *const missing_names[] = {
#define DIAG_MISSING_NAME(id, name, effect) name,
	DIAG_MISSING(DIAG_MISSING_NAME)
#undef DIAG_MISSING_NAME
};
static const char *const missing_effects[] = {
#define DIAG_MISSING_EFFECT(id, name, effect) effect,
	DIAG_MISSING(DIAG_MISSING_EFFECT)
#undef DIAG_MISSING_EFFECT
};

const char *diag_class_name(enum diag_class c)
{
	return (unsigned)c < DIAG_CLASS_COUNT ? class_names[c] : "?";
}

const char *diag_finding_name(enum diag_finding f)
{
	return (unsigned)f < DIAG_FINDING_COUNT ? finding_names[f] : "?";
}

const char *diag_missing_name(enum diag_missing m)
{
	return (unsigned)m < DIAG_MISSING_COUNT ? missing_names[m] : "?";
}

const char *diag_missing_effect(enum diag_missing m)
{
	return (unsigned)m < DIAG_MISSING_COUNT ? missing_effects[m] : "?";
}

int diag_class_by_name(const char *name)
{
	for (int c = 0; c < DIAG_CLASS_COUNT; c++)
		if (strcmp(class_names[c], name) == 0)
			return c;
	return -1;
}

/* ---- Per-window distributions ---- */

/* The quantities a window is reduced to; each is per sample, and absent
 * from a sample that lacks what it needs. Shares (Q_*_SAMPLE, Q_REASON_*,
 * Q_AT_LIMIT) are 1 or 0 per sample, so their mean is a share of samples. */
enum qty {
	Q_BUSY,          /* gpu_util */
	Q_MEM_BUSY,      /* mem_util */
	Q_SM,
	Q_OCCUPANCY,
	Q_TENSOR,
	Q_FP64,          /* the non-tensor pipes */
	Q_FP32,
	Q_FP16,
	Q_INT,
	Q_DRAM,
	Q_GRAPHICS,
	Q_PCIE_TX,       /* bytes/s */
	Q_PCIE_RX,
	Q_PCIE_MAX,      /* busier direction, bytes/s */
	Q_PCIE_FRAC,     /* busier direction over the link's peak */
	Q_POWER,
	Q_POWER_RATIO,   /* over the limit */
	Q_SM_CLOCK,
	Q_CLOCK_RATIO,   /* over the maximum */
	Q_MEM_RATIO,     /* used over total */
	Q_IDLE_SAMPLE,
	Q_REASON_POWER,
	Q_REASON_THERMAL,
	Q_REASON_HW,
	Q_AT_LIMIT,      /* power at the limit with the clock held down */
	Q_COUNT
};

struct series {
	size_t n;
	double mean, p10, p50, p90, max;
};

struct wstats {
	struct series q[Q_COUNT];
	double ecc_increase;  /* ECC errors counted during the window, or NAN */
};

/* ECC errors counted in rows[i..j), measured from the sample before the
 * window when there is one (the counters only grow, so any growth is new
 * errors); NAN when no sample carries an ECC counter. */
static double ecc_increase(const struct rec_row *rows, size_t i, size_t j)
{
	static const enum field_id ecc[] = {F_ECC_SBE_VOL, F_ECC_DBE_VOL};
	double total = NAN;
	for (size_t e = 0; e < sizeof ecc / sizeof ecc[0]; e++) {
		double lo = NAN, hi = NAN;
		for (size_t k = i > 0 ? i - 1 : 0; k < j; k++) {
			if (!(rows[k].valid & FIELD_BIT(ecc[e])) || !isfinite(rows[k].v[ecc[e]]))
				continue;
			double v = rows[k].v[ecc[e]];
			lo = isnan(lo) || v < lo ? v : lo;
			hi = isnan(hi) || v > hi ? v : hi;
		}
		if (!isnan(lo))
			total = (isnan(total) ? 0 : total) + (hi - lo);
	}
	return total;
}

static bool has(const struct rec_row *r, enum field_id f)
{
	return (r->valid & FIELD_BIT(f)) && isfinite(r->v[f]);
}

static bool sample_value(const struct rec_row *r, enum qty q, const struct gpu_peaks *pk,
			 double *out)
{
	switch (q) {
	case Q_BUSY:
		*out = r->v[F_GPU_UTIL];
		return has(r, F_GPU_UTIL);
	case Q_MEM_BUSY:
		*out = r->v[F_MEM_UTIL];
		return has(r, F_MEM_UTIL);
	case Q_SM:
		*out = r->v[F_GPM_SM];
		return has(r, F_GPM_SM);
	case Q_OCCUPANCY:
		*out = r->v[F_GPM_OCCUPANCY];
		return has(r, F_GPM_OCCUPANCY);
	case Q_TENSOR:
		*out = r->v[F_GPM_TENSOR];
		return has(r, F_GPM_TENSOR);
	case Q_FP64:
		*out = r->v[F_GPM_FP64];
		return has(r, F_GPM_FP64);
	case Q_FP32:
		*out = r->v[F_GPM_FP32];
		return has(r, F_GPM_FP32);
	case Q_FP16:
		*out = r->v[F_GPM_FP16];
		return has(r, F_GPM_FP16);
	case Q_INT:
		*out = r->v[F_GPM_INTEGER];
		return has(r, F_GPM_INTEGER);
	case Q_DRAM:
		*out = r->v[F_GPM_DRAM];
		return has(r, F_GPM_DRAM);
	case Q_GRAPHICS:
		*out = r->v[F_GPM_GRAPHICS];
		return has(r, F_GPM_GRAPHICS);
	case Q_PCIE_TX:
		*out = r->v[F_GPM_PCIE_TX];
		return has(r, F_GPM_PCIE_TX);
	case Q_PCIE_RX:
		*out = r->v[F_GPM_PCIE_RX];
		return has(r, F_GPM_PCIE_RX);
	case Q_PCIE_MAX:
	case Q_PCIE_FRAC: {
		bool tx = has(r, F_GPM_PCIE_TX), rx = has(r, F_GPM_PCIE_RX);
		if (!tx && !rx)
			return false;
		double m = fmax(tx ? r->v[F_GPM_PCIE_TX] : 0, rx ? r->v[F_GPM_PCIE_RX] : 0);
		if (q == Q_PCIE_MAX) {
			*out = m;
			return true;
		}
		*out = pk->pcie_bytes_per_s > 0 ? m / pk->pcie_bytes_per_s : 0;
		return pk->pcie_bytes_per_s > 0;
	}
	case Q_POWER:
		*out = r->v[F_POWER];
		return has(r, F_POWER);
	case Q_POWER_RATIO:
		*out = pk->power_limit_w > 0 ? r->v[F_POWER] / pk->power_limit_w : 0;
		return has(r, F_POWER) && pk->power_limit_w > 0;
	case Q_SM_CLOCK:
		*out = r->v[F_SM_CLOCK];
		return has(r, F_SM_CLOCK);
	case Q_CLOCK_RATIO:
		*out = pk->sm_clock_max_hz > 0 ? r->v[F_SM_CLOCK] / pk->sm_clock_max_hz : 0;
		return has(r, F_SM_CLOCK) && pk->sm_clock_max_hz > 0;
	case Q_MEM_RATIO: {
		double total = has(r, F_MEM_TOTAL) && r->v[F_MEM_TOTAL] > 0 ? r->v[F_MEM_TOTAL]
									  : pk->mem_total_bytes;
		*out = total > 0 ? r->v[F_MEM_USED] / total : 0;
		return has(r, F_MEM_USED) && total > 0;
	}
	case Q_IDLE_SAMPLE:
		/* A sample period in which essentially nothing ran. GPM SM
		 * activity is exact over each sample interval; NVML
		 * utilization averages over its own period (1/6 s to 1 s),
		 * which smears short gaps, so it only stands in. */
		if (has(r, F_GPM_SM)) {
			*out = r->v[F_GPM_SM] < IDLE_SAMPLE_BUSY;
			return true;
		}
		*out = r->v[F_GPU_UTIL] < IDLE_SAMPLE_BUSY;
		return has(r, F_GPU_UTIL);
	case Q_REASON_POWER:
	case Q_REASON_THERMAL:
	case Q_REASON_HW: {
		/* A mask outside 0..2^63 is no mask (and would not convert). */
		double mask = r->v[F_CLOCK_REASONS];
		if (!has(r, F_CLOCK_REASONS) || !(mask >= 0 && mask < 9.2e18))
			return false;
		uint64_t bits = (uint64_t)mask;
		uint64_t want = q == Q_REASON_POWER     ? REASON_SW_POWER_CAP
				: q == Q_REASON_THERMAL ? (REASON_SW_THERMAL | REASON_HW_THERMAL)
							: (REASON_HW_SLOWDOWN | REASON_HW_POWER_BRAKE);
		*out = (bits & want) != 0;
		return true;
	}
	case Q_AT_LIMIT:
		if (!(has(r, F_POWER) && has(r, F_SM_CLOCK) && pk->power_limit_w > 0 &&
		      pk->sm_clock_max_hz > 0))
			return false;
		*out = r->v[F_POWER] >= POWER_AT_LIMIT * pk->power_limit_w &&
		       r->v[F_SM_CLOCK] < CLOCK_HELD * pk->sm_clock_max_hz;
		return true;
	case Q_COUNT:
		break;
	}
	return false;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks of sorted v[0..n). */
static double percentile(const double *v, size_t n, double p)
{
	double pos = p * (double)(n - 1);
	size_t lo = (size_t)pos;
	if (lo + 1 >= n)
		return v[n - 1];
	return v[lo] + (pos - (double)lo) * (v[lo + 1] - v[lo]);
}

static void window_stats(struct wstats *st, const struct rec_row *rows, size_t n,
			 const struct gpu_peaks *pk, double *scratch)
{
	for (int q = 0; q < Q_COUNT; q++) {
		struct series *s = &st->q[q];
		double sum = 0;
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			double v;
			if (sample_value(&rows[i], (enum qty)q, pk, &v) && isfinite(v)) {
				scratch[k++] = v;
				sum += v;
			}
		}
		memset(s, 0, sizeof *s);
		s->n = k;
		if (!k) {
			s->mean = s->p10 = s->p50 = s->p90 = s->max = NAN;
			continue;
		}
		qsort(scratch, k, sizeof *scratch, cmp_double);
		s->mean = sum / (double)k;
		s->p10 = percentile(scratch, k, 0.10);
		s->p50 = percentile(scratch, k, 0.50);
		s->p90 = percentile(scratch, k, 0.90);
		s->max = scratch[k - 1];
	}
}

/* ---- Building a window's verdict ---- */

struct verdict {
	struct diag_window *w;
	const char *rule;      /* the rule that decided */
	const char *advice;    /* advice of that rule, when not the class's */
	const struct wstats *st;
	const struct gpu_peaks *pk;
	int decisive;          /* evidence index whose margin sets confidence, or -1 */
	double conf_cap;       /* confidence ceiling from missing evidence */
	double conf_penalty;
};

static bool have(const struct verdict *v, enum qty q)
{
	return v->st->q[q].n > 0;
}

static double mean(const struct verdict *v, enum qty q)
{
	return v->st->q[q].mean;
}

/* The busiest non-tensor pipe's mean activity, and its column; NAN and
 * NULL when the window has none of them. */
static double busiest_pipe(const struct verdict *v, const char **name)
{
	static const struct {
		enum qty q;
		const char *name;
	} pipes[] = {
		{Q_FP64, "fp64_util"}, {Q_FP32, "fp32_util"}, {Q_FP16, "fp16_util"},
		{Q_INT, "integer_util"},
	};
	double best = NAN;
	*name = NULL;
	for (size_t i = 0; i < sizeof pipes / sizeof pipes[0]; i++)
		if (have(v, pipes[i].q) && (isnan(best) || mean(v, pipes[i].q) > best)) {
			best = mean(v, pipes[i].q);
			*name = pipes[i].name;
		}
	return best;
}

/* Record one comparison; returns whether it held. */
static bool ev(struct verdict *v, const char *name, const char *stat, double value,
	       const char *op, double threshold, double peak, const char *unit)
{
	bool holds = false;
	if (strcmp(op, "<") == 0)
		holds = value < threshold;
	else if (strcmp(op, ">=") == 0)
		holds = value >= threshold;
	struct diag_window *w = v->w;
	if (w->nevidence < DIAG_EVIDENCE_MAX) {
		struct diag_evidence *e = &w->evidence[w->nevidence++];
		e->name = name;
		e->stat = stat;
		e->value = value;
		e->op = op;
		e->threshold = threshold;
		e->peak = peak;
		e->unit = unit;
		e->holds = holds;
	}
	return holds;
}

/* Context: a number shown with the verdict but not compared. */
static void ctx(struct verdict *v, const char *name, const char *stat, double value, double peak,
		const char *unit)
{
	ev(v, name, stat, value, "", NAN, peak, unit);
}

/* Mark the evidence just recorded as the one the class hinges on. */
static void decisive(struct verdict *v)
{
	v->decisive = v->w->nevidence - 1;
}

static void missing(struct verdict *v, enum diag_missing m)
{
	v->w->missing |= DIAG_MISSING_BIT(m);
}

static double link_peak(const struct verdict *v)
{
	return v->pk->pcie_bytes_per_s > 0 ? v->pk->pcie_bytes_per_s : NAN;
}

/* PCIe at bulk-copy level: a share of the link when it is known, an
 * absolute rate when not. */
static bool pcie_bulk(struct verdict *v)
{
	if (have(v, Q_PCIE_FRAC))
		return ev(v, "pcie_busier_direction", "mean", mean(v, Q_PCIE_MAX), ">=",
			  PCIE_BULK * v->pk->pcie_bytes_per_s, link_peak(v), "bytes_per_second");
	bool bulk = ev(v, "pcie_busier_direction", "mean", mean(v, Q_PCIE_MAX), ">=",
		       PCIE_BULK_ABS, NAN, "bytes_per_second");
	if (bulk)
		v->conf_penalty += 0.15;
	return bulk;
}

/* Nothing ran: no busy time, no SM activity, a quiet link, by every
 * counter the window has. */
static bool is_idle(struct verdict *v)
{
	bool idle = true;
	if (have(v, Q_BUSY)) {
		idle &= ev(v, "gpu_util", "mean", mean(v, Q_BUSY), "<", IDLE_BUSY, NAN, "ratio");
		decisive(v);
	}
	if (have(v, Q_SM)) {
		idle &= ev(v, "sm_util", "mean", mean(v, Q_SM), "<", IDLE_SM, NAN, "ratio");
		if (!have(v, Q_BUSY))
			decisive(v);
	}
	if (have(v, Q_PCIE_FRAC))
		idle &= ev(v, "pcie_busier_direction", "mean", mean(v, Q_PCIE_MAX), "<",
			   IDLE_PCIE * v->pk->pcie_bytes_per_s, link_peak(v), "bytes_per_second");
	else if (have(v, Q_PCIE_MAX))
		idle &= ev(v, "pcie_busier_direction", "mean", mean(v, Q_PCIE_MAX), "<",
			   IDLE_PCIE_ABS, NAN, "bytes_per_second");
	return idle;
}

/* Classification without GPM counters (pre-Hopper cards, MIG slices, or
 * recordings without those columns): utilization, memory activity and
 * power only. The class is weaker and says so. */
static enum diag_class classify_no_gpm_busy(struct verdict *v)
{
	v->conf_cap = fmin(v->conf_cap, CONF_NO_GPM_CAP);
	bool power_ok = have(v, Q_POWER_RATIO);
	if (!power_ok && have(v, Q_POWER))
		missing(v, DIAG_MISSING_POWER_LIMIT);
	if (power_ok && ev(v, "power_over_limit", "mean", mean(v, Q_POWER_RATIO), "<",
			   POWER_IDLE_LIKE, v->pk->power_limit_w, "ratio")) {
		decisive(v);
		v->rule = "without GPM: busy at near-idle power, so the busy time loads neither "
			  "SMs nor DRAM (copies; launch_bound not excluded)";
		return DIAG_PCIE_BOUND;
	}
	if (have(v, Q_MEM_BUSY) && ev(v, "mem_util", "mean", mean(v, Q_MEM_BUSY), ">=",
				      MEM_BUSY_TIME, NAN, "ratio")) {
		decisive(v);
		v->rule = "without GPM: DRAM busy nearly all the time (bandwidth not measured)";
		return DIAG_MEMORY_BOUND;
	}
	if (power_ok && ev(v, "power_over_limit", "mean", mean(v, Q_POWER_RATIO), ">=",
			   POWER_LOADED, v->pk->power_limit_w, "ratio")) {
		decisive(v);
		v->rule = "without GPM: busy at high power with DRAM not busy: compute by "
			  "elimination";
		return DIAG_COMPUTE_BOUND;
	}
	v->rule = "without GPM: busy, and neither DRAM time nor power points anywhere";
	return DIAG_MIXED;
}

/* Without GPM SM activity, a GPU busy less than half the time cannot be
 * told launch-bound from starved; starved is the likelier reading of low
 * utilization, and the output says launch_bound was not excluded. */
static enum diag_class classify_no_gpm(struct verdict *v, double duty)
{
	v->conf_cap = fmin(v->conf_cap, CONF_NO_GPM_CAP);
	if (ev(v, "gpu_util", "mean", duty, "<", STARVED_DUTY, NAN, "ratio")) {
		decisive(v);
		v->rule = "without GPM: busy less than half the time (launch_bound not excluded)";
		return DIAG_INPUT_STARVED;
	}
	if (have(v, Q_IDLE_SAMPLE) &&
	    ev(v, "idle_samples", "share_of_samples", mean(v, Q_IDLE_SAMPLE), ">=",
	       STARVED_IDLE_SAMPLES, NAN, "ratio")) {
		decisive(v);
		v->rule = "without GPM: bursts between whole sample periods of idle";
		return DIAG_INPUT_STARVED;
	}
	return classify_no_gpm_busy(v);
}

/* A GPU busy at least half the time with kernels that fill it: which
 * resource do they exhaust? */
static enum diag_class classify_busy(struct verdict *v)
{
	const char *pipe_name;
	double other = busiest_pipe(v, &pipe_name);
	bool pipes_ok = have(v, Q_TENSOR) || pipe_name, dram_ok = have(v, Q_DRAM);
	if (!pipes_ok && !dram_ok)
		return classify_no_gpm_busy(v);
	if (!pipes_ok || !dram_ok)
		v->conf_cap = fmin(v->conf_cap, 0.6);

	double tensor = have(v, Q_TENSOR) ? mean(v, Q_TENSOR) : 0;
	double fp = pipe_name ? other : 0;
	double pipe = fmax(tensor, fp);
	double dram = dram_ok ? mean(v, Q_DRAM) : 0;
	bool comp = false, mem = false;
	int comp_ev = -1, mem_ev = -1;

	if (pipes_ok) {
		comp = ev(v, tensor >= fp || !pipe_name ? "tensor_util" : pipe_name, "mean", pipe,
			  ">=", PIPE_BOUND, NAN, "ratio");
		comp_ev = v->w->nevidence - 1;
	}
	if (dram_ok) {
		mem = ev(v, "dram_bw_util", "mean", dram, ">=", DRAM_BOUND,
			 v->pk->dram_bytes_per_s > 0 ? v->pk->dram_bytes_per_s : NAN, "ratio");
		mem_ev = v->w->nevidence - 1;
		/* Latency-bound access: DRAM busy nearly all the time
		 * without reaching its bandwidth, and no pipe busy. */
		if (!mem && !comp && have(v, Q_MEM_BUSY) && dram >= DRAM_LATENCY_MIN &&
		    ev(v, "mem_util", "mean", mean(v, Q_MEM_BUSY), ">=", MEM_BUSY_TIME, NAN,
		       "ratio")) {
			ev(v, "dram_bw_util", "mean", dram, ">=", DRAM_LATENCY_MIN, NAN, "ratio");
			mem = true;
			mem_ev = v->w->nevidence - 2;
		}
	}
	if (have(v, Q_SM) && !have(v, Q_BUSY))
		ctx(v, "sm_util", "mean", mean(v, Q_SM), NAN, "ratio");
	if (have(v, Q_OCCUPANCY))
		ctx(v, "sm_occupancy", "mean", mean(v, Q_OCCUPANCY), NAN, "ratio");
	if (comp && mem) {
		/* A kernel near the ridge point: the resource closer to its
		 * practical ceiling is the one that binds. */
		if (pipe / PIPE_CEILING >= dram / DRAM_CEILING) {
			v->decisive = comp_ev;
			v->rule = "compute bound: pipes and DRAM both high, the pipes nearer their "
				  "ceiling";
			return DIAG_COMPUTE_BOUND;
		}
		v->decisive = mem_ev;
		v->rule = "memory bound: DRAM and pipes both high, DRAM nearer its ceiling";
		return DIAG_MEMORY_BOUND;
	}
	if (comp) {
		v->decisive = comp_ev;
		if (dram_ok)
			ctx(v, "dram_bw_util", "mean", dram, NAN, "ratio");
		v->rule = "compute bound: a math pipe busy most SM cycles, DRAM not saturated";
		return DIAG_COMPUTE_BOUND;
	}
	if (mem) {
		v->decisive = mem_ev;
		v->rule = dram >= DRAM_BOUND
				  ? "memory bound: DRAM bandwidth a large share of peak, pipes not "
				    "near theirs"
				  : "memory bound (latency): DRAM busy nearly all the time below its "
				    "bandwidth, pipes idle";
		return DIAG_MEMORY_BOUND;
	}
	/* Nothing dominates: the class hinges on whichever resource came
	 * closest to its threshold. */
	v->decisive = (dram_ok && dram / DRAM_BOUND > pipe / PIPE_BOUND) ? mem_ev : comp_ev;
	v->rule = "mixed: the GPU is busy but no pipe, DRAM or link dominates";
	return DIAG_MIXED;
}

static enum diag_class classify(struct verdict *v)
{
	bool busy_ok = have(v, Q_BUSY), sm_ok = have(v, Q_SM), pcie_ok = have(v, Q_PCIE_MAX);
	/* Say what is absent whatever path the rules take: each gap
	 * weakens the classes it would have told apart. */
	if (!busy_ok)
		missing(v, DIAG_MISSING_UTIL);
	if (!sm_ok)
		missing(v, DIAG_MISSING_SM_ACTIVITY);
	if (!have(v, Q_TENSOR) && !have(v, Q_FP64) && !have(v, Q_FP32) && !have(v, Q_FP16) &&
	    !have(v, Q_INT))
		missing(v, DIAG_MISSING_PIPES);
	if (!have(v, Q_DRAM))
		missing(v, DIAG_MISSING_DRAM);
	if (!pcie_ok)
		missing(v, DIAG_MISSING_PCIE);
	else if (!have(v, Q_PCIE_FRAC))
		missing(v, DIAG_MISSING_LINK_PEAK);
	if (!busy_ok && !sm_ok) {
		/* Nothing says whether anything ran. */
		v->conf_cap = 0.05;
		v->rule = "no utilization or SM activity: nothing to judge by";
		return DIAG_MIXED;
	}

	if (is_idle(v)) {
		v->rule = "idle: nothing ran and the link is quiet";
		return DIAG_IDLE;
	}
	/* The idle tests failed; what follows says what ran instead. */
	v->w->nevidence = 0;
	v->decisive = -1;

	double duty = busy_ok ? mean(v, Q_BUSY) : mean(v, Q_SM);
	if (!sm_ok)
		return classify_no_gpm(v, duty);

	/* Thin busy time: SM activity far below the time anything ran.
	 * (Not judged without busy time to measure against: a window that
	 * is not idle only by its link or a trace of SM activity.) */
	bool thin = false;
	int thin_ev = -1;
	if (busy_ok && duty >= IDLE_BUSY) {
		thin = ev(v, "sm_per_busy", "ratio_of_means", mean(v, Q_SM) / duty, "<",
			  THIN_SM_PER_BUSY, NAN, "ratio");
		thin_ev = v->w->nevidence - 1;
		ctx(v, "gpu_util", "mean", duty, NAN, "ratio");
		ctx(v, "sm_util", "mean", mean(v, Q_SM), NAN, "ratio");
	}
	if (thin) {
		/* Data movement: copies, not kernels, fill the busy time,
		 * and the link carries bulk traffic. */
		if (pcie_ok && pcie_bulk(v)) {
			v->decisive = thin_ev;
			v->rule = "data movement: copies fill the busy time, the SMs are idle and "
				  "PCIe carries bulk traffic";
			return DIAG_PCIE_BOUND;
		}
		if (!pcie_ok)
			v->conf_cap = fmin(v->conf_cap, 0.5);
		if (have(v, Q_GRAPHICS)) {
			/* Busy time that is not the compute engine's is
			 * copy-engine time on a path the PCIe counter does
			 * not see (device-local memsets and copies, NVLink
			 * peers): data movement, but no class names it. */
			if (ev(v, "graphics_per_busy", "ratio_of_means", mean(v, Q_GRAPHICS) / duty,
			       "<", ENGINE_SHARE, NAN, "ratio")) {
				decisive(v);
				v->conf_cap = fmin(v->conf_cap, 0.4);
				v->rule = "copy engines busy without host traffic (device-local or "
					  "NVLink copies; no NVLink counters recorded)";
				v->advice = "copy engines, not kernels, fill the busy time: batch small "
					    "copies and memsets, overlap them with compute on other "
					    "streams";
				return DIAG_MIXED;
			}
		} else {
			missing(v, DIAG_MISSING_GRAPHICS);
			v->conf_penalty += 0.1;
		}
		if (have(v, Q_PCIE_RX))
			ctx(v, "pcie_rx_launch_traffic", "mean", mean(v, Q_PCIE_RX), link_peak(v),
			    "bytes_per_second");
		v->decisive = thin_ev;
		v->rule = "launch bound: the GPU is busy in a thin way, SM activity far below "
			  "the busy time, no bulk copies";
		return DIAG_LAUNCH_BOUND;
	}

	/* Data movement with kernels running: the link itself near
	 * saturation while the SMs are mostly free. */
	if (have(v, Q_PCIE_FRAC) &&
	    ev(v, "pcie_busier_direction", "mean", mean(v, Q_PCIE_MAX), ">=",
	       PCIE_SATURATED * v->pk->pcie_bytes_per_s, link_peak(v), "bytes_per_second")) {
		decisive(v);
		if (ev(v, "sm_util", "mean", mean(v, Q_SM), "<", PCIE_SATURATED_SM, NAN, "ratio")) {
			v->rule = "data movement: the PCIe link near saturation with the SMs mostly "
				  "free";
			return DIAG_PCIE_BOUND;
		}
	}

	/* Starved: more idle than busy, or idle for whole sample periods
	 * for a large share of the window, with work that fills the GPU
	 * when it comes. */
	if (ev(v, "gpu_util", "mean", duty, "<", STARVED_DUTY, NAN, "ratio")) {
		decisive(v);
		if (have(v, Q_BUSY))
			ctx(v, "gpu_util", "p90", v->st->q[Q_BUSY].p90, NAN, "ratio");
		ctx(v, "sm_util", "p90", v->st->q[Q_SM].p90, NAN, "ratio");
		v->rule = "input starved: the GPU is busy less than half the time, with work that "
			  "fills it when it comes";
		return DIAG_INPUT_STARVED;
	}
	if (have(v, Q_IDLE_SAMPLE) &&
	    ev(v, "idle_samples", "share_of_samples", mean(v, Q_IDLE_SAMPLE), ">=",
	       STARVED_IDLE_SAMPLES, NAN, "ratio")) {
		decisive(v);
		v->rule = "input starved: bursts of work between whole sample periods of idle";
		return DIAG_INPUT_STARVED;
	}
	return classify_busy(v);
}

/* Findings, each judged on its own. */
static void judge_findings(struct verdict *v, const struct diag_input *in)
{
	struct diag_window *w = v->w;
	const struct wstats *st = v->st;
	double pressure = in->opts ? in->opts->memory_pressure_ratio : DIAG_MEMORY_PRESSURE_DEFAULT;

	if (have(v, Q_MEM_RATIO)) {
		if (ev(v, "memory_used_over_total", "p50", st->q[Q_MEM_RATIO].p50, ">=",
		       pressure, v->pk->mem_total_bytes > 0 ? v->pk->mem_total_bytes : NAN,
		       "ratio"))
			w->findings |= DIAG_FINDING_BIT(DIAG_FINDING_MEMORY_PRESSURE);
	} else {
		missing(v, DIAG_MISSING_MEMORY);
	}

	/* Slowdowns are findings about work: an idle window has none
	 * (DIAG_FINDINGS_SLOWDOWN), so their evidence is not even weighed. */
	if (w->bottleneck == DIAG_IDLE) {
		/* nothing to slow down */
	} else if (have(v, Q_REASON_POWER)) {
		if (ev(v, "sw_power_cap_samples", "share_of_samples", mean(v, Q_REASON_POWER), ">=",
		       SHARE_POWER_CAP, NAN, "ratio"))
			w->findings |= DIAG_FINDING_BIT(DIAG_FINDING_POWER_CAPPED);
		if (ev(v, "thermal_slowdown_samples", "share_of_samples", mean(v, Q_REASON_THERMAL),
		       ">=", SHARE_RARE, NAN, "ratio"))
			w->findings |= DIAG_FINDING_BIT(DIAG_FINDING_THERMAL_THROTTLED);
		if (ev(v, "hw_slowdown_samples", "share_of_samples", mean(v, Q_REASON_HW), ">=",
		       SHARE_RARE, NAN, "ratio"))
			w->findings |= DIAG_FINDING_BIT(DIAG_FINDING_HW_SLOWDOWN);
	} else {
		missing(v, DIAG_MISSING_REASONS);
		if (have(v, Q_AT_LIMIT) &&
		    ev(v, "at_power_limit_clock_held_samples", "share_of_samples",
		       mean(v, Q_AT_LIMIT), ">=", SHARE_POWER_CAP, NAN, "ratio"))
			w->findings |= DIAG_FINDING_BIT(DIAG_FINDING_POWER_CAPPED);
	}
	if (w->findings & DIAG_FINDING_BIT(DIAG_FINDING_POWER_CAPPED)) {
		if (have(v, Q_POWER))
			ctx(v, "power", "mean", mean(v, Q_POWER),
			    v->pk->power_limit_w > 0 ? v->pk->power_limit_w : NAN, "watts");
		if (have(v, Q_SM_CLOCK))
			ctx(v, "sm_clock", "mean", mean(v, Q_SM_CLOCK),
			    v->pk->sm_clock_max_hz > 0 ? v->pk->sm_clock_max_hz : NAN, "hertz");
	}
	if (have(v, Q_POWER) && !(v->pk->power_limit_w > 0) && w->bottleneck != DIAG_IDLE)
		missing(v, DIAG_MISSING_POWER_LIMIT);

	if (!isnan(st->ecc_increase) &&
	    ev(v, "ecc_errors_counted", "increase", st->ecc_increase, ">=", 1, NAN, "errors"))
		w->findings |= DIAG_FINDING_BIT(DIAG_FINDING_ECC_ERRORS);

	size_t xids = 0;
	for (size_t i = 0; i < in->nxids; i++)
		if (in->xids[i].t_s >= w->start_s && in->xids[i].t_s < w->end_s)
			xids++;
	if (xids && ev(v, "xid_events", "count", (double)xids, ">=", 1, NAN, "events"))
		w->findings |= DIAG_FINDING_BIT(DIAG_FINDING_XID);
}

/* ---- Headroom and words ---- */

static double nan_if_tiny(double x)
{
	return x >= 0.01 ? x : NAN;
}

/* What bounds a window of class c, and how far its share of that
 * resource's peak leaves it from the limit. */
static void headroom_bound(struct diag_headroom *h, enum diag_class c)
{
	h->bound_resource = NULL;
	h->max_speedup = NAN;
	double frac = NAN;
	switch (c) {
	case DIAG_COMPUTE_BOUND:
		if (!isnan(h->tensor) && (isnan(h->pipe) || h->tensor >= h->pipe)) {
			h->bound_resource = "tensor";
			frac = h->tensor;
		} else if (!isnan(h->pipe)) {
			h->bound_resource = "pipe";
			frac = h->pipe;
		}
		break;
	case DIAG_MEMORY_BOUND:
		h->bound_resource = "dram";
		frac = h->dram;
		break;
	case DIAG_PCIE_BOUND:
		h->bound_resource = "pcie";
		frac = h->pcie;
		break;
	case DIAG_INPUT_STARVED:
		h->bound_resource = "busy time";
		frac = isnan(h->busy) ? h->sm_active : h->busy;
		break;
	case DIAG_MIXED: {
		/* The resource nearest its peak limits how far the mix can
		 * be pushed. */
		const char *names[] = {"tensor", "pipe", "dram", "pcie"};
		double vals[] = {h->tensor, h->pipe, h->dram, h->pcie};
		for (int i = 0; i < 4; i++)
			if (!isnan(vals[i]) && (isnan(frac) || vals[i] > frac)) {
				frac = vals[i];
				h->bound_resource = names[i];
			}
		break;
	}
	case DIAG_IDLE:
	case DIAG_LAUNCH_BOUND:
	case DIAG_CLASS_COUNT:
		break;
	}
	frac = nan_if_tiny(frac);
	h->max_speedup = isnan(frac) ? NAN : 1.0 / fmin(frac, 1.0);
}

static void fill_headroom(struct verdict *v)
{
	struct diag_headroom *h = &v->w->headroom;
	const struct gpu_peaks *pk = v->pk;
	h->sm_active = mean(v, Q_SM);
	h->clock_ratio = mean(v, Q_CLOCK_RATIO);
	double clock = isnan(h->clock_ratio) ? 1.0 : h->clock_ratio;
	h->tensor_active = mean(v, Q_TENSOR);
	h->tensor = h->tensor_active * clock;
	h->pipe_active = busiest_pipe(v, &h->pipe_name);
	h->pipe = h->pipe_active * clock;
	h->dram = mean(v, Q_DRAM);
	h->dram_bytes_per_s = pk->dram_bytes_per_s > 0 ? h->dram * pk->dram_bytes_per_s : NAN;
	h->pcie = mean(v, Q_PCIE_FRAC);
	h->pcie_tx_bytes_per_s = mean(v, Q_PCIE_TX);
	h->pcie_rx_bytes_per_s = mean(v, Q_PCIE_RX);
	h->memory_used = mean(v, Q_MEM_RATIO);
	h->busy = mean(v, Q_BUSY);
	h->bound_resource = NULL;
	h->max_speedup = NAN;
	if (isnan(h->clock_ratio) && (have(v, Q_TENSOR) || h->pipe_name))
		missing(v, DIAG_MISSING_CLOCK_MAX);
	if (have(v, Q_DRAM) && !(pk->dram_bytes_per_s > 0))
		missing(v, DIAG_MISSING_DRAM_PEAK);

	headroom_bound(h, v->w->bottleneck);
}

static void appendf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void appendf(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	if (len + 1 >= size)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

static double pct(double ratio)
{
	return ratio * 100.0;
}

/* "fp32_util" -> "fp32". */
static const char *pipe_label(const char *column)
{
	if (!column)
		return "pipe";
	if (strcmp(column, "fp64_util") == 0)
		return "fp64";
	if (strcmp(column, "fp32_util") == 0)
		return "fp32";
	if (strcmp(column, "fp16_util") == 0)
		return "fp16";
	return "integer";
}

static void headroom_words(struct diag_window *w, const struct gpu_peaks *pk)
{
	const struct diag_headroom *h = &w->headroom;
	char *t = w->headroom_text;
	size_t n = sizeof w->headroom_text;
	t[0] = '\0';
	switch (w->bottleneck) {
	case DIAG_COMPUTE_BOUND:
		if (h->bound_resource && strcmp(h->bound_resource, "tensor") == 0)
			appendf(t, n, "tensor pipes at %.0f%% of peak (active %.0f%%", pct(h->tensor),
				pct(h->tensor_active));
		else
			appendf(t, n, "%s pipe at %.0f%% of peak (active %.0f%%",
				pipe_label(h->pipe_name), pct(h->pipe), pct(h->pipe_active));
		if (!isnan(h->clock_ratio))
			appendf(t, n, " at %.0f%% of max clock", pct(h->clock_ratio));
		appendf(t, n, ")");
		if (!isnan(h->max_speedup))
			appendf(t, n, ": at most %.2fx from faster math", h->max_speedup);
		if (!isnan(h->dram))
			appendf(t, n, "; DRAM %.0f%%", pct(h->dram));
		break;
	case DIAG_MEMORY_BOUND:
		appendf(t, n, "DRAM at %.0f%% of peak", pct(h->dram));
		if (!isnan(h->dram_bytes_per_s))
			appendf(t, n, " (%.2f of %.2f TB/s)", h->dram_bytes_per_s / 1e12,
				pk->dram_bytes_per_s / 1e12);
		if (!isnan(h->max_speedup))
			appendf(t, n, ": at most %.2fx from better memory access", h->max_speedup);
		if (!isnan(h->tensor_active) && h->tensor_active < 0.5)
			appendf(t, n, "; tensor pipes idle %.0f%%: lower precision math will not help",
				pct(1 - h->tensor_active));
		break;
	case DIAG_PCIE_BOUND:
		appendf(t, n, "PCIe %.1f GB/s in, %.1f GB/s out",
			isnan(h->pcie_rx_bytes_per_s) ? 0 : h->pcie_rx_bytes_per_s / 1e9,
			isnan(h->pcie_tx_bytes_per_s) ? 0 : h->pcie_tx_bytes_per_s / 1e9);
		if (!isnan(h->pcie))
			appendf(t, n, " (%.0f%% of %.1f GB/s per direction)", pct(h->pcie),
				pk->pcie_bytes_per_s / 1e9);
		if (!isnan(h->sm_active))
			appendf(t, n, "; SMs idle %.0f%%", pct(1 - h->sm_active));
		break;
	case DIAG_LAUNCH_BOUND:
		appendf(t, n, "SMs active %.2f%% while the GPU is busy %.0f%% of the time: "
			      "kernels too small to measure against the peaks",
			pct(h->sm_active), pct(h->busy));
		break;
	case DIAG_INPUT_STARVED:
		appendf(t, n, "GPU busy %.0f%% of the time",
			pct(isnan(h->busy) ? h->sm_active : h->busy));
		if (!isnan(h->max_speedup))
			appendf(t, n, ": up to %.1fx from keeping it fed", h->max_speedup);
		break;
	case DIAG_MIXED:
		if (h->bound_resource)
			appendf(t, n, "nearest limit: %s at %.0f%% of peak", h->bound_resource,
				pct(strcmp(h->bound_resource, "tensor") == 0 ? h->tensor
				    : strcmp(h->bound_resource, "pipe") == 0 ? h->pipe
				    : strcmp(h->bound_resource, "dram") == 0 ? h->dram
									     : h->pcie));
		if (!isnan(h->sm_active))
			appendf(t, n, "%sSM active %.0f%%", t[0] ? "; " : "", pct(h->sm_active));
		break;
	case DIAG_IDLE:
		appendf(t, n, "nothing ran");
		break;
	case DIAG_CLASS_COUNT:
		break;
	}
}

static void advice_words(struct diag_window *w, const char *rule_advice)
{
	const struct diag_headroom *h = &w->headroom;
	char *a = w->advice;
	size_t n = sizeof w->advice;
	a[0] = '\0';
	/* Memory capacity first, as an expert reads it. */
	if (w->findings & DIAG_FINDING_BIT(DIAG_FINDING_MEMORY_PRESSURE))
		appendf(a, n, "memory %.0f%% full: one more allocation can fail, cut batch or "
			      "activation memory; ",
			pct(h->memory_used));
	switch (rule_advice ? DIAG_CLASS_COUNT : w->bottleneck) {
	case DIAG_IDLE:
		appendf(a, n, "nothing runs: release the GPU or check that the job started");
		break;
	case DIAG_COMPUTE_BOUND:
		if (h->bound_resource && strcmp(h->bound_resource, "pipe") == 0 &&
		    h->pipe_name && strcmp(h->pipe_name, "integer_util") != 0 &&
		    !(h->tensor_active >= 0.05))
			appendf(a, n, "math runs on FP pipes with tensor cores idle: use TF32/BF16/FP8 "
				      "tensor-core math where accuracy allows");
		else
			appendf(a, n, "the math units are the limit: lower precision (FP8/BF16) or "
				      "fewer FLOPs per step are what is left");
		break;
	case DIAG_MEMORY_BOUND:
		appendf(a, n, "memory-bandwidth bound: fuse elementwise ops, keep data in "
			      "registers/shared memory, or use lower precision to move fewer bytes");
		break;
	case DIAG_PCIE_BOUND:
		appendf(a, n, "data movement bound with SMs idle: overlap copies with compute on "
			      "separate streams, use pinned memory, keep data on the GPU");
		break;
	case DIAG_LAUNCH_BOUND:
		appendf(a, n, "launch bound: many tiny kernels; capture them in CUDA graphs, fuse "
			      "them (torch.compile), or give each more work");
		break;
	case DIAG_INPUT_STARVED:
		appendf(a, n, "input starved: the GPU waits between short bursts; the data pipeline "
			      "or CPU is the limit (more loader workers, prefetch, pinned memory, "
			      "larger batches)");
		break;
	case DIAG_MIXED:
		appendf(a, n, "no single resource dominates: profile the top kernels (Nsight "
			      "Compute) for occupancy and stalls");
		break;
	case DIAG_CLASS_COUNT:
		appendf(a, n, "%s", rule_advice ? rule_advice : "");
		break;
	}
	if (w->findings & DIAG_FINDING_BIT(DIAG_FINDING_POWER_CAPPED)) {
		if (!isnan(h->clock_ratio))
			appendf(a, n, "; power cap holds clocks at %.0f%% of max", pct(h->clock_ratio));
		else
			appendf(a, n, "; the power cap holds clocks down");
	}
	if (w->findings & DIAG_FINDING_BIT(DIAG_FINDING_THERMAL_THROTTLED))
		appendf(a, n, "; thermal slowdown: check cooling and airflow");
	if (w->findings & DIAG_FINDING_BIT(DIAG_FINDING_HW_SLOWDOWN))
		appendf(a, n, "; hardware slowdown: check power supply and temperature");
	if (w->findings & DIAG_FINDING_BIT(DIAG_FINDING_ECC_ERRORS))
		appendf(a, n, "; ECC errors: watch for row remapping, plan a reset");
	if (w->findings & DIAG_FINDING_BIT(DIAG_FINDING_XID))
		appendf(a, n, "; XID errors: see the driver log");
}

/* The numbers that matter for a line of the table, "-" where absent. */
static void brief_words(struct diag_window *w)
{
	const struct diag_headroom *h = &w->headroom;
	char *b = w->brief;
	size_t n = sizeof w->brief;
	b[0] = '\0';
	if (!isnan(h->busy))
		appendf(b, n, "busy %.0f%%", pct(h->busy));
	if (!isnan(h->sm_active))
		appendf(b, n, "%ssm %.1f%%", b[0] ? " " : "", pct(h->sm_active));
	if (!isnan(h->tensor_active))
		appendf(b, n, " tensor %.0f%%", pct(h->tensor_active));
	if (h->pipe_active >= 0.005)   /* an idle pipe's name would only mislead */
		appendf(b, n, " %s %.0f%%", pipe_label(h->pipe_name), pct(h->pipe_active));
	if (!isnan(h->dram))
		appendf(b, n, " dram %.0f%%", pct(h->dram));
	if (!isnan(h->pcie_tx_bytes_per_s) || !isnan(h->pcie_rx_bytes_per_s))
		appendf(b, n, " pcie %.2f GB/s",
			fmax(isnan(h->pcie_tx_bytes_per_s) ? 0 : h->pcie_tx_bytes_per_s,
			     isnan(h->pcie_rx_bytes_per_s) ? 0 : h->pcie_rx_bytes_per_s) / 1e9);
	if (!isnan(h->memory_used))
		appendf(b, n, " mem %.0f%%", pct(h->memory_used));
	if (w->span_note)
		appendf(b, n, " (%zu samples; idle %.1f s around a job %s)", w->nsamples,
			(w->judged_start_s - w->start_s) + (w->end_s - w->judged_end_s),
			w->judged_start_s > w->start_s ? "start" : "end");
	else if (w->nverdicts)
		appendf(b, n, " (%zu window%s)", w->nverdicts, w->nverdicts == 1 ? "" : "s");
	else if (w->nsamples)
		appendf(b, n, " (%zu samples)", w->nsamples);
}

static double confidence(const struct verdict *v)
{
	const struct diag_window *w = v->w;
	double c = CONF_BASE - v->conf_penalty;
	if (v->decisive >= 0 && v->decisive < w->nevidence) {
		const struct diag_evidence *e = &w->evidence[v->decisive];
		if (isfinite(e->threshold) && e->threshold != 0 &&
		    fabs(e->value - e->threshold) < CONF_NEAR * fabs(e->threshold))
			c -= 0.25;
	}
	if (w->nsamples < CONF_FEW_SAMPLES)
		c -= 0.2;
	c = fmin(c, v->conf_cap);
	return fmax(0.05, fmin(c, CONF_BASE));
}

/* A sample in which nothing ran, by every counter that says. */
static bool nothing_ran(const struct rec_row *r)
{
	bool util = has(r, F_GPU_UTIL), sm = has(r, F_GPM_SM);
	return (util || sm) && (!util || r->v[F_GPU_UTIL] < IDLE_SAMPLE_BUSY) &&
	       (!sm || r->v[F_GPM_SM] < IDLE_SAMPLE_BUSY);
}

/* The part of window rows[i..j) to judge, as [*a, *b). A workload that
 * starts or stops inside the window leaves one idle run at its edge that
 * joins an idle stretch of at least a window's length across the edge:
 * that is a job boundary, not starvation (which is short gaps between
 * bursts, again and again), so the window is judged on its active part.
 * An active part too small to judge alone (under 3 samples or a fifth of
 * the window) leaves the window whole. */
static void active_part(const struct rec_row *rows, size_t nrows, size_t i, size_t j,
			double len, size_t *a, size_t *b)
{
	size_t lo = i, hi = j;
	size_t lead = 0;
	while (lo + lead < j && nothing_ran(&rows[lo + lead]))
		lead++;
	if (lead && lead < j - i) {
		size_t k = i;
		while (k > 0 && nothing_ran(&rows[k - 1]))
			k--;
		if (rows[i + lead].t_s - rows[k].t_s >= len)
			lo = i + lead;
	}
	size_t trail = 0;
	while (hi - trail > lo && nothing_ran(&rows[hi - 1 - trail]))
		trail++;
	if (trail && hi - trail > lo) {
		size_t k = j;
		while (k < nrows && nothing_ran(&rows[k]))
			k++;
		double idle_end = k < nrows ? rows[k].t_s : rows[nrows - 1].t_s;
		if (idle_end - rows[hi - trail].t_s >= len)
			hi -= trail;
	}
	size_t n = j - i, keep = hi - lo;
	if (keep < 3 || keep * 5 < n) {
		lo = i;
		hi = j;
	}
	*a = lo;
	*b = hi;
}

/* ---- Refined by kernel traces ----
 *
 * Device counters cannot tell a GPU waiting for launches from one waiting
 * for input when kernels are not tiny, nor see copies that are not bulk
 * PCIe traffic. When the injection library traced processes on this GPU
 * in the window, their kernels decide those cases. Only the classes the
 * counters leave open (mixed, input_starved, launch_bound) are revised:
 * saturation the counters measured directly stands. Thresholds:
 * launching a kernel costs the host 2-5 us (CUDA runtime), so kernels
 * averaging under TRACE_TINY_KERNEL_S at over TRACE_LAUNCH_RATE a second
 * with the GPU idle part of the traced time are launch bound; kernels
 * longer than that with the GPU idle at least half the traced time wait
 * for the host (input starved); copies filling half the traced time with
 * kernels idle at least half of it are data movement (pcie_bound). */
#define TRACE_TINY_KERNEL_S 20e-6
#define TRACE_LAUNCH_RATE 10000.0
#define TRACE_LAUNCH_BUSY_MAX 0.8
#define TRACE_STARVED_BUSY_MAX 0.5
#define TRACE_COPY_SHARE 0.5

/* The traces' amounts within [a, b), each interval prorated by overlap. */
static void trace_sum(const struct diag_input *in, double a, double b, struct diag_trace *t)
{
	memset(t, 0, sizeof *t);
	t->start_s = a;
	t->end_s = b;
	for (size_t i = 0; i < in->ntraces; i++) {
		const struct diag_trace *x = &in->traces[i];
		double lo = fmax(a, x->start_s), hi = fmin(b, x->end_s);
		double len = x->end_s - x->start_s;
		if (!(hi > lo) || !(len > 0))
			continue;
		double f = (hi - lo) / len;
		t->traced_s += f * x->traced_s;
		t->launches += f * x->launches;
		t->kernel_s += f * x->kernel_s;
		t->copy_bytes += f * x->copy_bytes;
		t->copy_s += f * x->copy_s;
		t->sync_wait_s += f * x->sync_wait_s;
		if (x->processes > t->processes)
			t->processes = x->processes;
	}
}

static enum diag_class refine_with_trace(struct verdict *v, const struct diag_input *in,
					 enum diag_class c)
{
	struct diag_trace t;
	trace_sum(in, v->w->start_s, v->w->end_s, &t);
	if (!(t.traced_s >= DIAG_TRACE_MIN_S))
		return c;
	double busy = t.kernel_s / t.traced_s;
	double copy_share = t.copy_s / t.traced_s;
	ctx(v, "trace_traced_s", "sum", t.traced_s, NAN, "seconds");
	ctx(v, "trace_kernel_busy", "ratio_of_sums", busy, NAN, "ratio");
	if (t.copy_s > 0)
		ctx(v, "trace_copy_bytes_per_s", "ratio_of_sums", t.copy_bytes / t.copy_s, link_peak(v),
		    "bytes_per_second");
	if (c != DIAG_MIXED && c != DIAG_INPUT_STARVED && c != DIAG_LAUNCH_BOUND)
		return c;
	if (ev(v, "trace_copy_share", "ratio_of_sums", copy_share, ">=", TRACE_COPY_SHARE, NAN,
	       "ratio") &&
	    ev(v, "trace_kernel_busy", "ratio_of_sums", busy, "<", TRACE_STARVED_BUSY_MAX, NAN,
	       "ratio")) {
		decisive(v);
		v->rule = "traced copies fill the time while kernels idle (injection library)";
		v->advice = NULL;
		return DIAG_PCIE_BOUND;
	}
	if (!(t.launches >= DIAG_TRACE_MIN_LAUNCHES))
		return c;
	double mean_kernel = t.kernel_s / t.launches;
	double rate = t.launches / t.traced_s;
	if (ev(v, "trace_mean_kernel_s", "ratio_of_sums", mean_kernel, "<", TRACE_TINY_KERNEL_S, NAN,
	       "seconds") &&
	    ev(v, "trace_launches_per_s", "ratio_of_sums", rate, ">=", TRACE_LAUNCH_RATE, NAN,
	       "per_second") &&
	    ev(v, "trace_kernel_busy", "ratio_of_sums", busy, "<", TRACE_LAUNCH_BUSY_MAX, NAN,
	       "ratio")) {
		decisive(v);
		v->rule = "traced kernels are tiny and launched back to back with the GPU waiting "
			  "between them (injection library)";
		v->advice = NULL;
		return DIAG_LAUNCH_BOUND;
	}
	if (mean_kernel >= TRACE_TINY_KERNEL_S &&
	    ev(v, "trace_kernel_busy", "ratio_of_sums", busy, "<", TRACE_STARVED_BUSY_MAX, NAN,
	       "ratio")) {
		decisive(v);
		v->rule = "traced kernels are long enough but the GPU waits between them "
			  "(injection library)";
		v->advice = NULL;
		return DIAG_INPUT_STARVED;
	}
	return c;
}

static void diagnose_window(struct diag_window *w, const struct diag_input *in,
			    const struct gpu_peaks *pk, size_t i, size_t j, double *scratch)
{
	size_t a, b;
	active_part(in->rows, in->nrows, i, j, in->window_s, &a, &b);
	const struct rec_row *rows = in->rows + a;
	size_t n = b - a;
	struct wstats st;
	window_stats(&st, rows, n, pk, scratch);
	st.ecc_increase = ecc_increase(in->rows, i, j);
	w->nsamples = j - i;
	w->judged_samples = n;
	w->gpu = in->gpu;
	w->judged_start_s = a > i ? in->rows[a].t_s : w->start_s;
	w->judged_end_s = b < j ? in->rows[b].t_s : w->end_s;
	struct verdict v = {.w = w, .st = &st, .pk = pk, .decisive = -1, .conf_cap = 1.0};
	w->bottleneck = classify(&v);
	if (in->ntraces)
		w->bottleneck = refine_with_trace(&v, in, w->bottleneck);
	w->rule = v.rule ? v.rule : "";
	if (a > i || b < j) {
		w->span_note = a > i && b < j ? "the workload started and stopped in this window "
						"after and before long idle: judged on its active part"
			       : a > i	       ? "the workload started in this window after a long "
						"idle: judged on its active part"
					       : "the workload stopped in this window, a long idle "
						 "follows: judged on its active part";
		ctx(&v, "idle_in_window_s", "duration",
		    (w->judged_start_s - w->start_s) + (w->end_s - w->judged_end_s), NAN, "seconds");
	}
	judge_findings(&v, in);
	fill_headroom(&v);
	w->confidence = confidence(&v);
	headroom_words(w, pk);
	advice_words(w, v.advice);
	brief_words(w);
}

void diag_options_defaults(struct diag_options *o)
{
	o->memory_pressure_ratio = DIAG_MEMORY_PRESSURE_DEFAULT;
}

int diag_options_check(const struct diag_options *o)
{
	return o->memory_pressure_ratio > 0 && o->memory_pressure_ratio <= 1 ? GPULSE_OK
									      : GPULSE_EINVAL;
}

int diagnose_gpu(const struct diag_input *in, const struct gpu_peaks *peaks,
		 struct diag_window **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	/* Below a millisecond, window edges would round together at Unix
	 * time magnitudes; a window that long is a sample or less anyway. */
	if (!(in->window_s >= 1e-3) || !isfinite(in->window_s) || !isfinite(in->origin_s) ||
	    (in->opts && diag_options_check(in->opts) != GPULSE_OK))
		return GPULSE_EINVAL;
	if (in->nrows == 0)
		return GPULSE_OK;
	/* Window edges must stay distinct and exact in doubles: a window
	 * under ~450 ulps of the times, or over 2^50 windows from the
	 * origin, cannot be placed reliably. */
	for (size_t i = 0; i < in->nrows; i++) {
		double t = in->rows[i].t_s;
		if (!isfinite(t) || fmax(fabs(t), fabs(in->origin_s)) * 1e-13 > in->window_s ||
		    fabs(t - in->origin_s) / in->window_s > 0x1p50)
			return GPULSE_ERANGE;
	}

	int rc = GPULSE_OK;
	size_t cap = 0, count = 0;
	struct diag_window *win = NULL;
	double *scratch = malloc(in->nrows * sizeof *scratch);
	if (!scratch)
		return GPULSE_ENOMEM;

	const double o = in->origin_s, len = in->window_s;
	for (size_t i = 0; i < in->nrows;) {
		double t = in->rows[i].t_s;
		/* The window holding t: a first guess by division, then made
		 * exact against the edges as they are printed (origin +
		 * k * len), so a sample on an edge opens the next window. */
		double k = floor((t - o) / len);
		while (t < o + k * len)
			k -= 1;
		while (t >= o + (k + 1) * len)
			k += 1;
		double start = o + k * len, end = o + (k + 1) * len;
		size_t j = i;
		while (j < in->nrows && in->rows[j].t_s < end)
			j++;
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct diag_window *nw = realloc(win, ncap * sizeof *nw);
			if (!nw) {
				rc = GPULSE_ENOMEM;
				goto out;
			}
			win = nw;
			cap = ncap;
		}
		struct diag_window *w = &win[count++];
		memset(w, 0, sizeof *w);
		w->start_s = start;
		w->end_s = end;
		diagnose_window(w, in, peaks, i, j, scratch);
		i = j;
	}
	*out = win;
	*nout = count;
	win = NULL;
out:
	free(win);
	free(scratch);
	return rc;
}

/* ---- Summary ---- */

/* Time-weighted mean of one headroom number over the windows that have it. */
struct acc {
	double sum, weight;
};

static void acc_add(struct acc *a, double v, double weight)
{
	if (!isnan(v)) {
		a->sum += v * weight;
		a->weight += weight;
	}
}

static double acc_mean(const struct acc *a)
{
	return a->weight > 0 ? a->sum / a->weight : NAN;
}

#define HEADROOM_NUMBERS(X)                                                              \
	X(sm_active) X(tensor_active) X(tensor) X(pipe_active) X(pipe) X(clock_ratio) X(dram) \
	X(dram_bytes_per_s) X(pcie) X(pcie_tx_bytes_per_s) X(pcie_rx_bytes_per_s)        \
	X(memory_used) X(busy)

static void mean_headroom(const struct diag_window *w, size_t n, bool busy_only,
			  struct diag_headroom *out)
{
#define ACC_DECL(f) struct acc f = {0, 0};
	HEADROOM_NUMBERS(ACC_DECL)
#undef ACC_DECL
	for (size_t i = 0; i < n; i++) {
		if (busy_only && w[i].bottleneck == DIAG_IDLE)
			continue;
		double wt = w[i].end_s - w[i].start_s;
#define ACC_ADD(f) acc_add(&f, w[i].headroom.f, wt);
		HEADROOM_NUMBERS(ACC_ADD)
#undef ACC_ADD
	}
	memset(out, 0, sizeof *out);
#define ACC_OUT(f) out->f = acc_mean(&f);
	HEADROOM_NUMBERS(ACC_OUT)
#undef ACC_OUT
	/* For the whole run, the nearest hardware limit. */
	const char *names[] = {"tensor", "pipe", "dram", "pcie"};
	double vals[] = {out->tensor, out->pipe, out->dram, out->pcie};
	double frac = NAN;
	out->bound_resource = NULL;
	for (int k = 0; k < 4; k++)
		if (!isnan(vals[k]) && (isnan(frac) || vals[k] > frac)) {
			frac = vals[k];
			out->bound_resource = names[k];
		}
	frac = nan_if_tiny(frac);
	out->max_speedup = isnan(frac) ? NAN : 1.0 / fmin(frac, 1.0);
}

void diagnose_summarize(const struct diag_window *w, size_t n, struct diag_summary *out)
{
	memset(out, 0, sizeof *out);
	out->gpu = n ? w[0].gpu : -1;
	out->nwindows = n;
	out->top_finding = -1;
	for (size_t i = 0; i < n; i++) {
		double len = w[i].end_s - w[i].start_s;
		/* A window judged on its active part was idle for the rest. */
		double judged = w[i].judged_end_s - w[i].judged_start_s;
		if (!(judged > 0 && judged <= len))
			judged = len;
		out->seconds += len;
		if ((unsigned)w[i].bottleneck < DIAG_CLASS_COUNT)
			out->class_seconds[w[i].bottleneck] += judged;
		out->class_seconds[DIAG_IDLE] += len - judged;
		if (w[i].bottleneck != DIAG_IDLE)
			out->busy_seconds += judged;
		for (int f = 0; f < DIAG_FINDING_COUNT; f++)
			if (w[i].findings & DIAG_FINDING_BIT(f))
				out->finding_windows[f]++;
	}
	/* Ties go to the earlier finding: memory capacity before power. */
	for (int f = 0; f < DIAG_FINDING_COUNT; f++)
		if (out->finding_windows[f] &&
		    (out->top_finding < 0 || out->finding_windows[f] > out->finding_windows[out->top_finding]))
			out->top_finding = f;
	out->top_class = DIAG_IDLE;
	for (int c = 0; c < DIAG_CLASS_COUNT; c++)
		if (out->class_seconds[c] > out->class_seconds[out->top_class])
			out->top_class = (enum diag_class)c;
	mean_headroom(w, n, false, &out->mean);
	mean_headroom(w, n, true, &out->busy_mean);
}

void diagnose_describe(struct diag_window *w, const struct gpu_peaks *pk)
{
	headroom_bound(&w->headroom, w->bottleneck);
	headroom_words(w, pk);
	advice_words(w, NULL);
	brief_words(w);
}
