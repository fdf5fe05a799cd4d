/* How well the anomaly detector (src/anomaly) and the rule pack's alerts
 * do on real telemetry with injected faults, against fixed-threshold
 * rules, and how many notifications a naive threshold rule sends against
 * the pack's de-noised rules on the same replay. Results go to
 * docs/PERFORMANCE.md and docs/internals/anomaly.md.
 *
 *   bench_anomaly_eval [--runs N] [--hours H] RECORDING.csv...
 *
 * Each recording (10 Hz, one GPU) is looped to H hours (default 3). The
 * first 30 minutes are fault-free (the detector learns); then one fault
 * of a known interval is injected per run, at a random start (fixed
 * seed): a slow memory leak, an SM clock stuck low, a power spike, and a
 * dead-fan-like temperature rise. The detector runs exactly as in
 * gpulsed (the bus, 1 s ticks, default configuration) and the alerts are
 * evaluated offline every second with Prometheus's semantics (`for`,
 * hysteresis through the alert's own firing state, avg_over_time over the
 * raw samples) by the small evaluator below, not by src/rules.
 *
 * An alert episode (a transition to firing) that starts inside the fault
 * interval or up to GRACE_S after it is a true positive; any other episode
 * of that alert in the run is a false positive. Recall: runs with at least
 * one true positive over runs. Precision: true over all episodes. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anomaly/anomaly.h"
#include "collect/bus.h"
#include "common/clock.h"
#include "collect/fields.h"
#include "record/recording.h"
#include "common/status.h"

#define WARM_S 1800.0
#define GRACE_S 60.0
#define MAX_SM_CLOCK_HZ 1.98e9  /* H200 (the recording's device file) */
#define POWER_LIMIT_W 700.0
#define SW_POWER_CAP 0x4ULL

struct timeline {
	size_t n;
	double *t, *util, *power, *mem, *total, *clock, *temp, *capped, *sm, *reasons;
};

static double *dup_arr(const double *a, size_t n)
{
	double *b = malloc(n * sizeof *b);
	if (!b) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	memcpy(b, a, n * sizeof *b);
	return b;
}

static double *new_arr(size_t n)
{
	double *a = calloc(n, sizeof *a);
	if (!a) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return a;
}

static void tl_free(struct timeline *tl)
{
	double **arrs[] = {&tl->t,     &tl->util, &tl->power,  &tl->mem, &tl->total,
			   &tl->clock, &tl->temp, &tl->capped, &tl->sm,  &tl->reasons};
	for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++)
		free(*arrs[i]);
}

static void tl_copy(struct timeline *dst, const struct timeline *src)
{
	dst->n = src->n;
	dst->t = dup_arr(src->t, src->n);
	dst->util = dup_arr(src->util, src->n);
	dst->power = dup_arr(src->power, src->n);
	dst->mem = dup_arr(src->mem, src->n);
	dst->total = dup_arr(src->total, src->n);
	dst->clock = dup_arr(src->clock, src->n);
	dst->temp = dup_arr(src->temp, src->n);
	dst->capped = dup_arr(src->capped, src->n);
	dst->sm = dup_arr(src->sm, src->n);
	dst->reasons = dup_arr(src->reasons, src->n);
}

/* The recording looped to `seconds`, starting at a midnight (UTC). */
static int tl_build(struct timeline *tl, const struct recording *r, double seconds)
{
	if (r->nrows < 2)
		return GPULSE_EINVAL;
	double first = r->rows[0].t_s, period = r->rows[r->nrows - 1].t_s - first + 0.1;
	size_t loops = (size_t)ceil(seconds / period);
	size_t n = loops * r->nrows;
	tl->n = 0;
	tl->t = new_arr(n);
	tl->util = new_arr(n);
	tl->power = new_arr(n);
	tl->mem = new_arr(n);
	tl->total = new_arr(n);
	tl->clock = new_arr(n);
	tl->temp = new_arr(n);
	tl->capped = new_arr(n);
	tl->sm = new_arr(n);
	tl->reasons = new_arr(n);
	const double base = 1795910400.0;
	for (size_t k = 0; k < loops; k++)
		for (size_t i = 0; i < r->nrows; i++) {
			const struct rec_row *row = &r->rows[i];
			double t = base + (double)k * period + (row->t_s - first);
			if (t - base >= seconds)
				break;
			size_t j = tl->n++;
			tl->t[j] = t;
			tl->util[j] = row->v[F_GPU_UTIL];
			tl->power[j] = row->v[F_POWER];
			tl->mem[j] = row->v[F_MEM_USED];
			tl->total[j] = row->v[F_MEM_TOTAL];
			tl->clock[j] = row->v[F_SM_CLOCK];
			tl->temp[j] = row->v[F_TEMP];
			uint64_t reasons = (uint64_t)row->v[F_CLOCK_REASONS];
			tl->capped[j] = (reasons & SW_POWER_CAP) ? 1 : 0;
			tl->reasons[j] = (double)reasons;
			tl->sm[j] = (row->valid & FIELD_BIT(F_GPM_SM)) ? row->v[F_GPM_SM] : NAN;
		}
	return GPULSE_OK;
}

/* ---- faults ----------------------------------------------------------- */

enum fault { FAULT_LEAK, FAULT_CLOCK, FAULT_SPIKE, FAULT_FAN, FAULT_COUNT };
static const struct {
	const char *name;
	double duration_s;
	enum anomaly_watch watch; /* the metric whose anomaly alert counts */
	const char *fixed_rule;
} faults[FAULT_COUNT] = {
	[FAULT_LEAK] = {"memory leak (+50 MB/s, 10 min)", 600, ANOMALY_W_MEM,
			"used/total > 85 % for 2m (GPUMemoryHigh)"},
	[FAULT_CLOCK] = {"SM clock stuck at 345 MHz (5 min)", 300, ANOMALY_W_CLOCK,
			 "clock < 50 % of max while util > 50 %, for 30s"},
	[FAULT_SPIKE] = {"power +250 W (30 s)", 30, ANOMALY_W_POWER, "power > 95 % of limit for 15s"},
	[FAULT_FAN] = {"dead fan: +0.05 C/s up to +25 C (10 min)", 600, ANOMALY_W_TEMP,
		       "temperature > 85 C for 1m"},
};

static void inject(struct timeline *tl, enum fault f, double a, double b)
{
	for (size_t i = 0; i < tl->n; i++) {
		double t = tl->t[i];
		if (t < a || t >= b)
			continue;
		switch (f) {
		case FAULT_LEAK:
			tl->mem[i] = fmin(tl->mem[i] + 50e6 * (t - a), tl->total[i]);
			break;
		case FAULT_CLOCK:
			tl->clock[i] = fmin(tl->clock[i], 345e6);
			break;
		case FAULT_SPIKE:
			tl->power[i] += 250;
			break;
		case FAULT_FAN:
			tl->temp[i] += fmin(0.05 * (t - a), 25);
			break;
		default:
			break;
		}
	}
}

/* ---- the detector, as gpulsed runs it ----------------------------------- */

/* scores[w][k]: watch w's score at evaluation k (second k of the run).
 * With `with_detector` false the same updates go through a bus with no
 * subscriber (the cost anchor) and no scores are read. */
static int run_bus(const struct timeline *tl, double **scores, size_t nsteps, bool with_detector)
{
	struct bus *bus = NULL;
	struct anomaly *an = NULL;
	int rc = bus_create(&bus);
	if (rc)
		return rc;
	struct gpu_identity id;
	memset(&id, 0, sizeof id);
	snprintf(id.uuid, sizeof id.uuid, "GPU-eval");
	snprintf(id.name, sizeof id.name, "NVIDIA H200");
	int slot;
	struct anomaly_config c;
	anomaly_config_default(&c);
	if ((rc = bus_attach_gpu(bus, &id, &slot)))
		goto out;
	if (with_detector && ((rc = anomaly_create(&an, &c, bus, NULL)) || (rc = anomaly_subscribe(an))))
		goto out;
	static struct gpu_update u;
	double t0 = tl->t[0];
	size_t k = 0;
	int64_t last_temp_s = -1;
	for (size_t i = 0; i < tl->n && k < nsteps; i++) {
		/* Evaluations due before this sample see the state so far. */
		while (with_detector && k < nsteps && t0 + (double)k <= tl->t[i]) {
			double sc[ANOMALY_WATCH_COUNT];
			if (anomaly_scores(an, slot, sc) != GPULSE_OK)
				for (int w = 0; w < ANOMALY_WATCH_COUNT; w++)
					sc[w] = NAN;
			for (int w = 0; w < ANOMALY_WATCH_COUNT; w++)
				scores[w][k] = sc[w];
			k++;
		}
		memset(&u, 0, sizeof u);
		u.gpu = slot;
		u.tier = TIER_FAST;
		u.wall_ns = (int64_t)(tl->t[i] * 1e9);
		u.mask = fields_of_tier(TIER_FAST);
		u.v[F_GPU_UTIL] = tl->util[i];
		u.v[F_POWER] = tl->power[i];
		u.v[F_MEM_USED] = tl->mem[i];
		u.v[F_MEM_TOTAL] = tl->total[i];
		u.v[F_SM_CLOCK] = tl->clock[i];
		u.valid = FIELD_BIT(F_GPU_UTIL) | FIELD_BIT(F_POWER) | FIELD_BIT(F_MEM_USED) |
			  FIELD_BIT(F_MEM_TOTAL) | FIELD_BIT(F_SM_CLOCK);
		bus_publish(bus, &u);
		/* Temperature, GPM SM activity and the clock event reasons are
		 * normal-tier (1 Hz) fields in gpulsed. */
		int64_t sec = (int64_t)tl->t[i];
		if (sec != last_temp_s) {
			last_temp_s = sec;
			memset(&u, 0, sizeof u);
			u.gpu = slot;
			u.tier = TIER_NORMAL;
			u.wall_ns = (int64_t)(tl->t[i] * 1e9);
			u.mask = FIELD_BIT(F_TEMP) | FIELD_BIT(F_GPM_SM) | FIELD_BIT(F_CLOCK_REASONS);
			u.v[F_TEMP] = tl->temp[i];
			u.v[F_GPM_SM] = tl->sm[i];
			u.v[F_CLOCK_REASONS] = tl->reasons[i];
			u.valid = FIELD_BIT(F_TEMP) | FIELD_BIT(F_CLOCK_REASONS);
			if (isfinite(tl->sm[i]))
				u.valid |= FIELD_BIT(F_GPM_SM);
			bus_publish(bus, &u);
		}
	}
	for (; with_detector && k < nsteps; k++)
		for (int w = 0; w < ANOMALY_WATCH_COUNT; w++)
			scores[w][k] = NAN;
out:
	anomaly_destroy(an);
	bus_destroy(bus);
	return rc;
}

/* ---- the offline alert evaluator ---------------------------------------- */

/* The value of `v` at evaluation time T (the last sample at or before T,
 * within Prometheus's 5-minute lookback), and its avg_over_time over
 * [T-w, T] (closed, as Prometheus 2.x). Prefix sums make both O(log n). */
struct series_view {
	const struct timeline *tl;
	const double *v;
	double *prefix; /* prefix[i] = sum of v[0..i) */
};

static void sv_init(struct series_view *s, const struct timeline *tl, const double *v)
{
	s->tl = tl;
	s->v = v;
	s->prefix = new_arr(tl->n + 1);
	for (size_t i = 0; i < tl->n; i++)
		s->prefix[i + 1] = s->prefix[i] + v[i];
}

/* Index of the first sample with t > T. */
static size_t upper(const struct timeline *tl, double T)
{
	size_t lo = 0, hi = tl->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (tl->t[mid] <= T)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t lower(const struct timeline *tl, double T)
{
	size_t lo = 0, hi = tl->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (tl->t[mid] < T)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static double sv_at(const struct series_view *s, double T)
{
	size_t u = upper(s->tl, T);
	if (u == 0 || T - s->tl->t[u - 1] > 300)
		return NAN;
	return s->v[u - 1];
}

static double sv_avg(const struct series_view *s, double T, double w)
{
	size_t a = lower(s->tl, T - w), b = upper(s->tl, T);
	return b > a ? (s->prefix[b] - s->prefix[a]) / (double)(b - a) : NAN;
}

/* One alert over evaluations 0..n-1 (1 s apart): hi[k] is the firing
 * condition, lo[k] the weaker one that holds a firing alert (NULL: no
 * hysteresis), `for_s` the hold. Writes episode starts (evaluation index)
 * into starts[] and returns how many. */
static size_t alert_episodes(const bool *hi, const bool *lo, size_t n, double for_s, size_t *starts,
			     size_t max)
{
	bool firing = false;
	long since = -1;
	size_t ne = 0;
	for (size_t k = 0; k < n; k++) {
		bool active = hi[k] || (lo && firing && lo[k]);
		if (!active) {
			firing = false;
			since = -1;
			continue;
		}
		if (since < 0)
			since = (long)k;
		if (!firing && (double)((long)k - since) >= for_s) {
			firing = true;
			if (ne < max)
				starts[ne] = k;
			ne++;
		}
	}
	return ne < max ? ne : max;
}

/* ---- evaluation ----------------------------------------------------------- */

struct tally {
	size_t runs, detected, tp, fp;
	double delay_sum;
};

static void score_run(struct tally *ta, const size_t *starts, size_t ne, double a, double b, double t0)
{
	bool hit = false;
	double first = NAN;
	for (size_t e = 0; e < ne; e++) {
		double ts = t0 + (double)starts[e];
		if (ts >= a && ts <= b + GRACE_S) {
			ta->tp++;
			if (!hit)
				first = ts - a;
			hit = true;
		} else {
			ta->fp++;
		}
	}
	ta->runs++;
	if (hit) {
		ta->detected++;
		ta->delay_sum += first;
	}
}

/* The anomaly alert of the pack (GPUAnomaly): score > 6, held while > 4,
 * for 15 s. */
static size_t anomaly_alert(const double *score, size_t n, size_t *starts, size_t max)
{
	bool *hi = calloc(n, 1), *lo = calloc(n, 1);
	for (size_t k = 0; k < n; k++) {
		hi[k] = score[k] > 6;
		lo[k] = score[k] > 4;
	}
	size_t ne = alert_episodes(hi, lo, n, 15, starts, max);
	free(hi);
	free(lo);
	return ne;
}

static size_t fixed_alert(const struct timeline *tl, enum fault f, size_t n, size_t *starts, size_t max)
{
	bool *hi = calloc(n, 1), *lo = calloc(n, 1);
	struct series_view util, power, mem, total, clock, temp;
	sv_init(&util, tl, tl->util);
	sv_init(&power, tl, tl->power);
	sv_init(&mem, tl, tl->mem);
	sv_init(&total, tl, tl->total);
	sv_init(&clock, tl, tl->clock);
	sv_init(&temp, tl, tl->temp);
	double for_s = 0;
	bool hyst = false;
	for (size_t k = 0; k < n; k++) {
		double T = tl->t[0] + (double)k;
		switch (f) {
		case FAULT_LEAK: {
			double r = sv_at(&mem, T) / sv_at(&total, T);
			hi[k] = r > 0.85;
			lo[k] = r > 0.80;
			for_s = 120;
			hyst = true;
			break;
		}
		case FAULT_CLOCK:
			hi[k] = sv_at(&clock, T) < 0.5 * MAX_SM_CLOCK_HZ && sv_at(&util, T) > 0.5;
			for_s = 30;
			break;
		case FAULT_SPIKE:
			hi[k] = sv_at(&power, T) > 0.95 * POWER_LIMIT_W;
			for_s = 15;
			break;
		case FAULT_FAN:
			hi[k] = sv_at(&temp, T) > 85;
			for_s = 60;
			break;
		default:
			break;
		}
	}
	size_t ne = alert_episodes(hi, hyst ? lo : NULL, n, for_s, starts, max);
	struct series_view *all[] = {&util, &power, &mem, &total, &clock, &temp};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		free(all[i]->prefix);
	free(hi);
	free(lo);
	return ne;
}

static uint64_t seed = 42;
static double uniform(void)
{
	seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(seed >> 11) / 9007199254740992.0;
}

static void pr(const struct tally *t)
{
	if (t->tp + t->fp)
		printf(" %.2f |", (double)t->tp / (double)(t->tp + t->fp));
	else
		printf(" — (no alert) |");
	printf(" %.2f | ", t->runs ? (double)t->detected / (double)t->runs : 0.0);
	if (t->detected)
		printf("%.0f s |", t->delay_sum / (double)t->detected);
	else
		printf("— |");
}

/* ---- the noise comparison ------------------------------------------------ */

static void noise_table(const char *name, const struct timeline *tl, double **scores, size_t n)
{
	struct series_view util, mem, total, capped;
	sv_init(&util, tl, tl->util);
	sv_init(&mem, tl, tl->mem);
	sv_init(&total, tl, tl->total);
	sv_init(&capped, tl, tl->capped);
	bool *nh = calloc(n, 1), *ph = calloc(n, 1), *pl = calloc(n, 1);
	size_t *st = malloc(n * sizeof *st);
	double hours = (double)n / 3600.0;
	struct {
		const char *naive, *pack;
	} rows[] = {
		{"`gpulse_gpu_utilization_ratio > 0.85`", "GPUUtilizationHigh (5m mean > 85 %, held > 75 %, for 10m)"},
		{"`used / total > 0.85`", "GPUMemoryHigh (> 85 %, held > 80 %, for 2m)"},
		{"`throttle_active{reason=\"sw_power_cap\"} == 1`", "GPUPowerCapped (capped > 50 % of 10m while busy, for 10m)"},
		{"`gpulse_anomaly_score > 6` (any metric)", "GPUAnomaly (> 6, held > 4, for 15s)"},
	};
	for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
		size_t naive = 0, pack = 0;
		if (r == 3) {
			for (int w = 0; w < ANOMALY_WATCH_COUNT; w++) {
				for (size_t k = 0; k < n; k++) {
					nh[k] = scores[w][k] > 6;
					pl[k] = scores[w][k] > 4;
				}
				naive += alert_episodes(nh, NULL, n, 0, st, n);
				pack += alert_episodes(nh, pl, n, 15, st, n);
			}
		} else {
			double for_s = 0;
			for (size_t k = 0; k < n; k++) {
				double T = tl->t[0] + (double)k;
				if (r == 0) {
					nh[k] = sv_at(&util, T) > 0.85;
					double a5 = sv_avg(&util, T, 300);
					ph[k] = a5 > 0.85;
					pl[k] = a5 > 0.75;
					for_s = 600;
				} else if (r == 1) {
					double x = sv_at(&mem, T) / sv_at(&total, T);
					nh[k] = x > 0.85;
					ph[k] = x > 0.85;
					pl[k] = x > 0.80;
					for_s = 120;
				} else {
					nh[k] = sv_at(&capped, T) == 1;
					ph[k] = sv_avg(&capped, T, 600) > 0.5 && sv_avg(&util, T, 600) > 0.5;
					pl[k] = false;
					for_s = 600;
				}
			}
			naive = alert_episodes(nh, NULL, n, 0, st, n);
			pack = alert_episodes(ph, r == 2 ? NULL : pl, n, for_s, st, n);
		}
		printf("| %s | %s | %zu (%.1f/h) | %s | %zu (%.1f/h) |\n", name, rows[r].naive, naive,
		       (double)naive / hours, rows[r].pack, pack, (double)pack / hours);
	}
	free(util.prefix);
	free(mem.prefix);
	free(total.prefix);
	free(capped.prefix);
	free(nh);
	free(ph);
	free(pl);
	free(st);
}

/* --trace F: the first run of fault F, second by second, on stderr. */
static int trace = -1;
static void trace_run(const struct timeline *tl, const double *score, double a, double b)
{
	for (double T = a - 120; T < b + 120; T += 1) {
		size_t k = (size_t)(T - tl->t[0]);
		size_t i = upper(tl, T);
		if (i == 0)
			continue;
		i--;
		fprintf(stderr, "%7.0f %s util %.2f power %6.1f mem %6.2fG clock %4.0f temp %4.1f score %.2f\n",
			T - a, T >= a && T < b ? "F" : " ", tl->util[i], tl->power[i], tl->mem[i] / 1e9,
			tl->clock[i] / 1e6, tl->temp[i], score[k]);
	}
}

int main(int argc, char **argv)
{
	int runs = 10;
	double hours = 3;
	int first = 1;
	while (first < argc && argv[first][0] == '-') {
		if (!strcmp(argv[first], "--runs") && first + 1 < argc)
			runs = atoi(argv[first + 1]);
		else if (!strcmp(argv[first], "--trace") && first + 1 < argc)
			trace = atoi(argv[first + 1]);
		else if (!strcmp(argv[first], "--hours") && first + 1 < argc)
			hours = atof(argv[first + 1]);
		else {
			fprintf(stderr, "usage: %s [--runs N] [--hours H] RECORDING.csv...\n", argv[0]);
			return 2;
		}
		first += 2;
	}
	if (first >= argc || runs < 1 || !(hours * 3600 > WARM_S + 900)) {
		fprintf(stderr, "usage: %s [--runs N] [--hours H>0.75] RECORDING.csv...\n", argv[0]);
		return 2;
	}
	double seconds = hours * 3600;
	size_t nsteps = (size_t)seconds;
	double *scores[ANOMALY_WATCH_COUNT];
	for (int w = 0; w < ANOMALY_WATCH_COUNT; w++)
		scores[w] = new_arr(nsteps);
	size_t *starts = malloc(nsteps * sizeof *starts);

	printf("## Injected faults: detector vs fixed thresholds (%d runs per fault, %.1f h each)\n\n",
	       runs, hours);
	printf("| recording | fault | fixed rule | fixed: precision | recall | mean delay | "
	       "anomaly: precision | recall | mean delay |\n|---|---|---|---|---|---|---|---|---|\n");
	for (int fi = first; fi < argc; fi++) {
		struct recording *rec = NULL;
		char err[512];
		if (recording_load(argv[fi], &rec, err, sizeof err) != GPULSE_OK) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		struct timeline base;
		if (tl_build(&base, rec, seconds) != GPULSE_OK) {
			fprintf(stderr, "%s: too short\n", argv[fi]);
			return 1;
		}
		const char *name = strrchr(argv[fi], '/') ? strrchr(argv[fi], '/') + 1 : argv[fi];
		for (int f = 0; f < FAULT_COUNT; f++) {
			struct tally fixed = {0}, anom = {0};
			for (int r = 0; r < runs; r++) {
				double span = seconds - WARM_S - faults[f].duration_s - GRACE_S;
				double a = base.t[0] + WARM_S + uniform() * span;
				double b = a + faults[f].duration_s;
				struct timeline tl;
				tl_copy(&tl, &base);
				inject(&tl, (enum fault)f, a, b);
				if (run_bus(&tl, scores, nsteps, true) != GPULSE_OK) {
					fprintf(stderr, "detector failed\n");
					return 1;
				}
				/* Count only after the warm-up, for both. */
				size_t skip = (size_t)WARM_S;
				if (trace == f && r == 0)
					trace_run(&tl, scores[faults[f].watch], a, b);
				size_t ne = anomaly_alert(scores[faults[f].watch] + skip, nsteps - skip, starts, nsteps);
				score_run(&anom, starts, ne, a, b, base.t[0] + WARM_S);
				ne = fixed_alert(&tl, (enum fault)f, nsteps, starts, nsteps);
				size_t m = 0;
				for (size_t e = 0; e < ne; e++)
					if (starts[e] >= skip)
						starts[m++] = starts[e];
				score_run(&fixed, starts, m, a, b, base.t[0]);
				tl_free(&tl);
			}
			printf("| %s | %s | %s |", name, faults[f].name, faults[f].fixed_rule);
			pr(&fixed);
			pr(&anom);
			printf("\n");
		}
		tl_free(&base);
		recording_free(rec);
	}

	printf("\n## Notifications on the fault-free replay (%.1f h): naive rule vs the pack\n\n", hours);
	printf("| recording | naive rule (no for, no hysteresis) | notifications | pack rule | notifications |\n"
	       "|---|---|---|---|---|\n");
	for (int fi = first; fi < argc; fi++) {
		struct recording *rec = NULL;
		char err[512];
		if (recording_load(argv[fi], &rec, err, sizeof err) != GPULSE_OK) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		struct timeline tl;
		tl_build(&tl, rec, seconds);
		if (run_bus(&tl, scores, nsteps, true) != GPULSE_OK)
			return 1;
		const char *name = strrchr(argv[fi], '/') ? strrchr(argv[fi], '/') + 1 : argv[fi];
		noise_table(name, &tl, scores, nsteps);
		tl_free(&tl);
		recording_free(rec);
	}
	/* Cost: the same replay through the bus with and without the
	 * detector, best of 3 each; per update (fast and normal tiers). */
	{
		struct recording *rec = NULL;
		char err[512];
		if (recording_load(argv[first], &rec, err, sizeof err) != GPULSE_OK)
			return 1;
		struct timeline tl;
		tl_build(&tl, rec, seconds);
		double best[2] = {INFINITY, INFINITY};
		for (int rep = 0; rep < 3; rep++)
			for (int with = 0; with < 2; with++) {
				int64_t t0 = clock_mono_ns();
				if (run_bus(&tl, scores, nsteps, with) != GPULSE_OK)
					return 1;
				double dt = (double)(clock_mono_ns() - t0);
				best[with] = fmin(best[with], dt);
			}
		double updates = (double)tl.n + (double)nsteps; /* fast rows + 1 Hz normal updates */
		printf("\n## Cost (%s, %.0f updates)\n\n", argv[first], updates);
		printf("| | ns per update | ratio to the bus alone |\n|---|---|---|\n");
		printf("| bus_publish, no subscriber (anchor) | %.0f | 1.00 |\n", best[0] / updates);
		printf("| bus_publish + anomaly detector (scores read every second) | %.0f | %.2f |\n",
		       best[1] / updates, best[1] / best[0]);
		printf("| detector alone (difference) | %.0f | |\n", (best[1] - best[0]) / updates);
		tl_free(&tl);
		recording_free(rec);
	}
	for (int w = 0; w < ANOMALY_WATCH_COUNT; w++)
		free(scores[w]);
	free(starts);
	return 0;
}
