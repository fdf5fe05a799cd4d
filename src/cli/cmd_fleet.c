/* `gpulse fleet`: every GPU a Prometheus-compatible API knows of (a
 * central Prometheus scraping many gpulsed, or one gpulsed itself), one
 * row each: instance, GPU index, model, UUID; health (up, stale, XID,
 * uncorrectable ECC, remapped rows, clocks held down by heat or the
 * hardware, firing alerts from ALERTS); the bottleneck class gpulse's
 * diagnosis gave it most over the window (its gpulse_gpu_bottleneck
 * verdicts, so the classes are the diagnosis's own, not recomputed here);
 * and outliers: GPUs of one model whose utilization, power, SM clock,
 * temperature or benchmark figures are far from their peers' (fleet.h:
 * robust z-score over median and MAD, |z| > 3.5).
 *
 * Every figure is one instant query (PromQL over --since), so the work is
 * the server's and the answer is the same whichever server is asked. A
 * GPU the server holds no verdicts for is classified from its samples
 * (range queries) by src/diagnose itself (diagnose_samples). */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/buf.h"
#include "cli/client.h"
#include "diagnose/diagnose.h"
#include "collect/fields.h"
#include "diagnose/peaks.h"
#include "report/report.h"
#include "cli/cmd_query.h"
#include "cli/commands.h"
#include "cli/fleet.h"
#include "common/status.h"
#include "common/str.h"

#define FLEET_MAX_SERIES 200000   /* per answer; a 10,000-GPU fleet has ~20 per query */
#define FLEET_MAX_GPUS 65536
#define FLEET_MAX_BENCH 16        /* benchmark figures judged */
#define FLEET_ALERTS_LEN 256
/* GPUs without stored verdicts whose class is computed here from their
 * samples (one range query per field each); the rest say "-". */
#define FLEET_DIAGNOSE_MAX 64
#define FLEET_DIAGNOSE_POINTS 600 /* samples per field and GPU, at most */

/* The figures judged for outliers, with the least distance from the
 * median that counts (a fleet agreeing to a hair flags nobody). */
enum { M_UTIL, M_POWER, M_CLOCK, M_TEMP, M_FIXED };
static const struct {
	const char *name;
	const char *metric;
	double min_abs;
	const char *unit;   /* the display unit */
	double display;     /* multiplier to that unit */
} fixed_metrics[M_FIXED] = {
	[M_UTIL] = {"utilization", "gpulse_gpu_utilization_ratio", 0.10, "%", 100},
	[M_POWER] = {"power", "gpulse_gpu_power_watts", 25, "W", 1},
	[M_CLOCK] = {"sm_clock", "gpulse_gpu_sm_clock_hertz", 100e6, "MHz", 1e-6},
	[M_TEMP] = {"temperature", "gpulse_gpu_temperature_celsius", 5, "C", 1},
};
#define BENCH_MIN_ABS 0.05 /* of the datasheet peak */

struct gpu {
	char instance[160], gpu[16], uuid[96], model[96], hostname[128];
	int up, stale;          /* -1 unknown */
	double last_xid, xid_total, ecc_unc, remap_unc, remap_pending, remap_failed;
	char throttle[160];     /* reasons holding clocks down, comma-separated */
	char alerts[FLEET_ALERTS_LEN];
	int nalerts;
	char bottleneck[32];
	double bottleneck_share;
	const char *bottleneck_source; /* "diagnosis" (its verdicts), "samples", NULL */
	double m[M_FIXED + FLEET_MAX_BENCH];
	double z[M_FIXED + FLEET_MAX_BENCH], med[M_FIXED + FLEET_MAX_BENCH];
	bool out[M_FIXED + FLEET_MAX_BENCH];
	int noutliers;
};

struct fleet {
	struct client_opts co;
	char since[32];
	double since_s;
	size_t undiagnosed;   /* GPUs past FLEET_DIAGNOSE_MAX left without a class */
	bool sorted;          /* g is in gpu_key_cmp order */
	struct gpu *g;
	size_t n, cap;
	char bench[FLEET_MAX_BENCH][96];  /* figure/variant */
	int nbench;
	char err[1024];
};

static void fleet_usage(FILE *f)
{
	fputs("usage: gpulse fleet --prometheus URL [--since 10m] [--json] [--token-file FILE]\n"
	      "\n"
	      "Every GPU a Prometheus-compatible API holds gpulse series for (a central\n"
	      "Prometheus scraping many gpulsed, or a gpulsed itself), one row each:\n"
	      "instance, GPU, model, UUID; health (down, stale, XID, uncorrectable ECC,\n"
	      "remapped rows, clocks held down by heat or the hardware, firing alerts);\n"
	      "the bottleneck class gpulse's diagnosis gave it most over the window (from\n"
	      "its samples, by the same diagnosis, where the server holds no verdicts); and\n"
	      "outliers: GPUs whose utilization, power, SM clock, temperature or benchmark\n"
	      "figures are far from those of the other GPUs of the same model (robust\n"
	      "z-score 0.6745 (x - median) / MAD over at least 3 GPUs of a model, |z| > 3.5,\n"
	      "and at least 10 points of utilization, 25 W, 100 MHz, 5 C or 5% of peak away).\n"
	      "\n"
	      "  --prometheus URL   the API to ask (http:// or https://; also $GPULSE_URL)\n"
	      "  --since DURATION   the window averaged over (default 10m)\n"
	      "  --json             every GPU with every figure, as JSON\n"
	      "  --token-file FILE  a bearer token for the API\n"
	      "\n"
	      "Exit status: 0 listed, 1 the API unreachable or its answer unusable, 2 usage.\n",
	      f);
}

/* One instant query into *v. */
static int ask(struct fleet *fl, const char *expr, struct fleet_vector *v)
{
	char *q = curl_easy_escape(NULL, expr, 0);
	if (!q) {
		str_errf(fl->err, sizeof fl->err, "out of memory");
		return GPULSE_ENOMEM;
	}
	struct buf path;
	buf_init(&path, 64 * 1024);
	int rc = buf_printf(&path, "/api/v1/query?query=%s", q);
	curl_free(q);
	if (rc) {
		str_errf(fl->err, sizeof fl->err, "the query is too long: %.200s", expr);
		buf_free(&path);
		return rc;
	}
	struct buf body;
	buf_init(&body, CLIENT_MAX_RESPONSE);
	long status = 0;
	char err[512];
	rc = client_get(&fl->co, path.data, &body, &status, err, sizeof err);
	if (rc == 0) {
		rc = fleet_parse_vector(body.data ? body.data : "", body.len, FLEET_MAX_SERIES, v, err,
					sizeof err);
		if (rc == GPULSE_EPARSE && (status < 200 || status > 299)) {
			str_errf(err, sizeof err, "HTTP %ld", status);
			rc = GPULSE_EIO;
		}
	}
	if (rc)
		str_errf(fl->err, sizeof fl->err, "%s, query %.200s: %s", client_base_url(&fl->co), expr,
			 err);
	buf_free(&body);
	buf_free(&path);
	return rc;
}

/* GPUs in (instance, uuid) order once listed, so that each of the
 * ~20 answers finds its GPUs by binary search: a 10,000-GPU fleet is
 * 200,000 look-ups, not 10^9 comparisons. */
static int key_cmp(const char *ia, const char *ua, const char *ib, const char *ub)
{
	int c = strcmp(ia, ib);
	return c ? c : strcmp(ua, ub);
}

static int gpu_key_cmp(const void *a, const void *b)
{
	const struct gpu *x = a, *y = b;
	return key_cmp(x->instance, x->uuid, y->instance, y->uuid);
}

/* The GPU a sample speaks of: by instance and UUID, else instance and
 * index; NULL when none is listed. */
static struct gpu *find(struct fleet *fl, const struct fleet_sample *s)
{
	const char *inst = fleet_label(s, "instance"), *uuid = fleet_label(s, "uuid");
	const char *gpu = fleet_label(s, "gpu");
	if (fl->sorted && uuid[0]) {
		size_t lo = 0, hi = fl->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			int c = key_cmp(inst, uuid, fl->g[mid].instance, fl->g[mid].uuid);
			if (c == 0)
				return &fl->g[mid];
			if (c < 0)
				hi = mid;
			else
				lo = mid + 1;
		}
		return NULL;
	}
	for (size_t i = 0; i < fl->n; i++) {
		struct gpu *g = &fl->g[i];
		if (strcmp(g->instance, inst) != 0)
			continue;
		if (uuid[0] ? strcmp(g->uuid, uuid) == 0 : strcmp(g->gpu, gpu) == 0)
			return g;
	}
	return NULL;
}

static int add_gpu(struct fleet *fl, const struct fleet_sample *s)
{
	if (fl->n == FLEET_MAX_GPUS) {
		str_errf(fl->err, sizeof fl->err, "more than %d GPUs", FLEET_MAX_GPUS);
		return GPULSE_ELIMIT;
	}
	if (fl->n == fl->cap) {
		size_t cap = fl->cap ? fl->cap * 2 : 64;
		struct gpu *g = realloc(fl->g, cap * sizeof *g);
		if (!g) {
			str_errf(fl->err, sizeof fl->err, "out of memory");
			return GPULSE_ENOMEM;
		}
		fl->g = g;
		fl->cap = cap;
	}
	struct gpu *g = &fl->g[fl->n++];
	memset(g, 0, sizeof *g);
	str_copy(g->instance, sizeof g->instance, fleet_label(s, "instance"));
	str_copy(g->gpu, sizeof g->gpu, fleet_label(s, "gpu"));
	str_copy(g->uuid, sizeof g->uuid, fleet_label(s, "uuid"));
	str_copy(g->model, sizeof g->model, fleet_label(s, "model"));
	str_copy(g->hostname, sizeof g->hostname, fleet_label(s, "hostname"));
	g->up = g->stale = -1;
	g->last_xid = g->xid_total = g->ecc_unc = g->remap_unc = NAN;
	g->remap_pending = g->remap_failed = NAN;
	for (int k = 0; k < M_FIXED + FLEET_MAX_BENCH; k++)
		g->m[k] = g->z[k] = g->med[k] = NAN;
	return 0;
}

static void append(char *dst, size_t size, const char *item)
{
	size_t n = strlen(dst);
	if (n + strlen(item) + 2 >= size)
		return; /* full: the list is cut here; alerts_total in the JSON counts them all */
	snprintf(dst + n, size - n, "%s%s", n ? "," : "", item);
}

/* A per-GPU number: `expr` answered into the double at `off` of each GPU. */
static int per_gpu(struct fleet *fl, const char *expr, size_t off)
{
	struct fleet_vector v;
	int rc = ask(fl, expr, &v);
	if (rc)
		return rc;
	for (size_t i = 0; i < v.n; i++) {
		struct gpu *g = find(fl, &v.s[i]);
		if (g)
			*(double *)((char *)g + off) = v.s[i].value;
	}
	fleet_vector_free(&v);
	return 0;
}

static int collect(struct fleet *fl)
{
	char expr[512];
	struct fleet_vector v;
	int rc = ask(fl, "gpulse_gpu_info", &v);
	if (rc)
		return rc;
	for (size_t i = 0; i < v.n && rc == 0; i++)
		rc = add_gpu(fl, &v.s[i]);
	fleet_vector_free(&v);
	if (rc)
		return rc;
	/* In key order, each GPU once (a server may hold two info series of
	 * one GPU for a moment, as when its labels change). */
	if (fl->n > 1)
		qsort(fl->g, fl->n, sizeof *fl->g, gpu_key_cmp);
	size_t kept = 0;
	for (size_t i = 0; i < fl->n; i++)
		if (kept == 0 || gpu_key_cmp(&fl->g[kept - 1], &fl->g[i]) != 0)
			fl->g[kept++] = fl->g[i];
	fl->n = kept;
	fl->sorted = true;

	if ((rc = ask(fl, "gpulse_gpu_up", &v)))
		return rc;
	for (size_t i = 0; i < v.n; i++) {
		struct gpu *g = find(fl, &v.s[i]);
		if (g)
			g->up = v.s[i].value == 1;
	}
	fleet_vector_free(&v);
	if ((rc = ask(fl, "gpulse_gpu_stale", &v)))
		return rc;
	for (size_t i = 0; i < v.n; i++) {
		struct gpu *g = find(fl, &v.s[i]);
		if (g)
			g->stale = v.s[i].value == 1;
	}
	fleet_vector_free(&v);

	static const struct { const char *expr; size_t off; } nums[] = {
		{"gpulse_gpu_last_xid", offsetof(struct gpu, last_xid)},
		{"sum without (xid) (gpulse_gpu_xid_errors_total)", offsetof(struct gpu, xid_total)},
		{"gpulse_gpu_ecc_errors_total{type=\"uncorrected\"}", offsetof(struct gpu, ecc_unc)},
		{"gpulse_gpu_remapped_rows{cause=\"uncorrectable\"}", offsetof(struct gpu, remap_unc)},
		{"gpulse_gpu_remapped_rows_pending", offsetof(struct gpu, remap_pending)},
		{"gpulse_gpu_remapped_rows_failed", offsetof(struct gpu, remap_failed)},
	};
	for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
		if ((rc = per_gpu(fl, nums[k].expr, nums[k].off)))
			return rc;

	/* Clocks held down by heat or the hardware over the window (the
	 * software power cap is a busy card's normal state: not listed). */
	snprintf(expr, sizeof expr,
		 "max_over_time(gpulse_gpu_throttle_active{reason=~\"hw_slowdown|hw_thermal_slowdown|"
		 "sw_thermal_slowdown|hw_power_brake_slowdown\"}[%s]) == 1",
		 fl->since);
	if ((rc = ask(fl, expr, &v)))
		return rc;
	for (size_t i = 0; i < v.n; i++) {
		struct gpu *g = find(fl, &v.s[i]);
		if (g)
			append(g->throttle, sizeof g->throttle, fleet_label(&v.s[i], "reason"));
	}
	fleet_vector_free(&v);

	/* Firing alerts of this GPU: matched by uuid, else instance and gpu;
	 * host-wide alerts (no gpu label) are left to `gpulse alerts`. */
	if ((rc = ask(fl, "ALERTS{alertstate=\"firing\"}", &v)))
		return rc;
	for (size_t i = 0; i < v.n; i++) {
		if (!fleet_label(&v.s[i], "uuid")[0] && !fleet_label(&v.s[i], "gpu")[0])
			continue;
		struct gpu *g = find(fl, &v.s[i]);
		if (g) {
			append(g->alerts, sizeof g->alerts, fleet_label(&v.s[i], "alertname"));
			g->nalerts++;
		}
	}
	fleet_vector_free(&v);

	/* The class the diagnosis gave each GPU for most of the window. */
	snprintf(expr, sizeof expr, "avg_over_time(gpulse_gpu_bottleneck[%s]) > 0", fl->since);
	if ((rc = ask(fl, expr, &v)))
		return rc;
	for (size_t i = 0; i < v.n; i++) {
		struct gpu *g = find(fl, &v.s[i]);
		if (g && v.s[i].value > g->bottleneck_share) {
			g->bottleneck_share = v.s[i].value;
			g->bottleneck_source = "diagnosis";
			str_copy(g->bottleneck, sizeof g->bottleneck, fleet_label(&v.s[i], "class"));
		}
	}
	fleet_vector_free(&v);

	for (int k = 0; k < M_FIXED; k++) {
		snprintf(expr, sizeof expr, "avg_over_time(%s[%s])", fixed_metrics[k].metric, fl->since);
		if ((rc = per_gpu(fl, expr, offsetof(struct gpu, m) + (size_t)k * sizeof(double))))
			return rc;
	}
	/* Benchmark figures: each run's value over the datasheet peak. */
	if ((rc = ask(fl, "gpulse_bench_peak_ratio", &v)))
		return rc;
	for (size_t i = 0; i < v.n; i++) {
		struct gpu *g = find(fl, &v.s[i]);
		if (!g)
			continue;
		char key[96];
		const char *variant = fleet_label(&v.s[i], "variant");
		snprintf(key, sizeof key, "bench:%s%s%s", fleet_label(&v.s[i], "figure"),
			 variant[0] ? "/" : "", variant);
		int b = 0;
		while (b < fl->nbench && strcmp(fl->bench[b], key) != 0)
			b++;
		if (b == fl->nbench) {
			if (fl->nbench == FLEET_MAX_BENCH)
				continue;
			str_copy(fl->bench[fl->nbench++], sizeof fl->bench[0], key);
		}
		g->m[M_FIXED + b] = v.s[i].value;
	}
	fleet_vector_free(&v);
	return 0;
}

/* Escape a label value for a PromQL selector. */
static void selector_value(char *out, size_t size, const char *v)
{
	size_t o = 0;
	for (; *v && o + 3 < size; v++) {
		if (*v == '"' || *v == '\\')
			out[o++] = '\\';
		out[o++] = *v;
	}
	out[o] = '\0';
}

/* A GPU's class computed from its samples, for a server that holds no
 * gpulse_gpu_bottleneck (diagnosis off, or an older gpulsed): every
 * recorded field over the window (range queries), laid on rows as a
 * recording's, and judged by src/diagnose as one window with the card's
 * peaks from its model: the same rules and thresholds as gpulse
 * diagnose, not a copy of them. */
static int diagnose_samples(struct fleet *fl, struct gpu *g, double now_s)
{
	double step = fl->since_s / FLEET_DIAGNOSE_POINTS;
	if (step < 1)
		step = 1;
	size_t npts = (size_t)(fl->since_s / step) + 1;
	struct rec_row *rows = calloc(npts, sizeof *rows);
	if (!rows) {
		str_errf(fl->err, sizeof fl->err, "out of memory");
		return GPULSE_ENOMEM;
	}
	double start = now_s - fl->since_s;
	for (size_t i = 0; i < npts; i++)
		rows[i].t_s = start + (double)i * step;
	char inst[256], uuid[256], path[4096];
	selector_value(inst, sizeof inst, g->instance);
	selector_value(uuid, sizeof uuid, g->uuid);
	int rc = 0;
	for (int f = 0; f < FIELD_COUNT && rc == 0; f++) {
		const struct field_info *fi = &field_table[f];
		if (!fi->column || !fi->metric || fi->labels[0])
			continue; /* recordings do not carry it, or it is one member of a family */
		char expr[1024];
		snprintf(expr, sizeof expr, "%s{instance=\"%s\",uuid=\"%s\"}", fi->metric, inst, uuid);
		char *q = curl_easy_escape(NULL, expr, 0);
		if (!q) {
			str_errf(fl->err, sizeof fl->err, "out of memory");
			rc = GPULSE_ENOMEM;
			break;
		}
		snprintf(path, sizeof path, "/api/v1/query_range?query=%s&start=%.3f&end=%.3f&step=%.3f",
			 q, start, now_s, step);
		curl_free(q);
		struct buf body;
		buf_init(&body, CLIENT_MAX_RESPONSE);
		long status = 0;
		char err[512];
		struct report_matrix m = {0};
		rc = client_get(&fl->co, path, &body, &status, err, sizeof err);
		if (rc == 0)
			rc = report_parse_matrix(body.data ? body.data : "", body.len, 4, npts * 4, &m, err,
						 sizeof err);
		buf_free(&body);
		if (rc) {
			str_errf(fl->err, sizeof fl->err, "%s, range query %.200s: %s",
				 client_base_url(&fl->co), expr, err);
			report_matrix_free(&m);
			break;
		}
		for (size_t k = 0; k < m.n; k++)
			for (size_t p = 0; p < m.series[k].n; p++) {
				double t = (double)m.series[k].t_ms[p] / 1000;
				long i = lround((t - start) / step);
				if (i >= 0 && (size_t)i < npts && isfinite(m.series[k].v[p])) {
					rows[i].v[f] = m.series[k].v[p];
					rows[i].valid |= FIELD_BIT(f);
				}
			}
		report_matrix_free(&m);
	}
	if (rc) {
		free(rows);
		return rc;
	}
	/* Only the instants the GPU answered at are samples. */
	size_t n = 0;
	for (size_t i = 0; i < npts; i++)
		if (rows[i].valid)
			rows[n++] = rows[i];
	if (n > 0) {
		struct gpu_peaks pk;
		peaks_init(&pk);
		str_copy(pk.model, sizeof pk.model, g->model);
		peaks_derive(&pk);
		struct diag_input in = {.gpu = 0, .rows = rows, .nrows = n, .origin_s = start,
					.window_s = fl->since_s + step};
		struct diag_window *w = NULL;
		size_t nw = 0;
		if (diagnose_gpu(&in, &pk, &w, &nw) == 0 && nw > 0) {
			struct diag_summary sum;
			diagnose_summarize(w, nw, &sum);
			str_copy(g->bottleneck, sizeof g->bottleneck, diag_class_name(sum.top_class));
			g->bottleneck_source = "samples";
		}
		free(w);
	}
	free(rows);
	return 0;
}

static const char *metric_name(const struct fleet *fl, int k)
{
	return k < M_FIXED ? fixed_metrics[k].name : fl->bench[k - M_FIXED];
}

/* Outliers per model and figure. */
static int judge(struct fleet *fl)
{
	int nm = M_FIXED + fl->nbench;
	size_t *idx = malloc((fl->n ? fl->n : 1) * sizeof *idx);
	double *x = malloc((fl->n ? fl->n : 1) * sizeof *x), *z = malloc((fl->n ? fl->n : 1) * sizeof *z);
	bool *done = calloc(fl->n ? fl->n : 1, sizeof *done);
	if (!idx || !x || !z || !done) {
		free(idx), free(x), free(z), free(done);
		str_errf(fl->err, sizeof fl->err, "out of memory");
		return GPULSE_ENOMEM;
	}
	for (size_t i = 0; i < fl->n; i++) {
		if (done[i])
			continue;
		size_t np = 0;
		for (size_t j = i; j < fl->n; j++)
			if (!done[j] && strcmp(fl->g[j].model, fl->g[i].model) == 0) {
				done[j] = true;
				idx[np++] = j;
			}
		for (int k = 0; k < nm; k++) {
			for (size_t p = 0; p < np; p++)
				x[p] = fl->g[idx[p]].m[k];
			double med;
			if (fleet_robust_z(x, np, z, &med) != 0)
				continue; /* too few peers with this figure */
			double min_abs = k < M_FIXED ? fixed_metrics[k].min_abs : BENCH_MIN_ABS;
			for (size_t p = 0; p < np; p++) {
				struct gpu *g = &fl->g[idx[p]];
				g->z[k] = z[p];
				g->med[k] = med;
				g->out[k] = fleet_is_outlier(x[p], z[p], med, min_abs);
				g->noutliers += g->out[k];
			}
		}
	}
	free(idx), free(x), free(z), free(done);
	return 0;
}

static void problems(const struct gpu *g, char *out, size_t size)
{
	char item[64];
	out[0] = '\0';
	if (g->up == 0)
		append(out, size, "down");
	if (g->stale == 1)
		append(out, size, "stale");
	if (g->last_xid > 0) {
		snprintf(item, sizeof item, "xid_%.0f", g->last_xid);
		append(out, size, item);
	}
	if (g->ecc_unc > 0) {
		snprintf(item, sizeof item, "ecc_uncorrected_%.0f", g->ecc_unc);
		append(out, size, item);
	}
	if (g->remap_unc > 0) {
		snprintf(item, sizeof item, "remapped_rows_%.0f", g->remap_unc);
		append(out, size, item);
	}
	if (g->remap_pending > 0)
		append(out, size, "remap_pending");
	if (g->remap_failed > 0)
		append(out, size, "remap_failed");
	if (g->throttle[0])
		append(out, size, g->throttle);
}

static const char *health(const struct gpu *g, const char *prob)
{
	if (g->up == 0)
		return "down";
	if (g->stale == 1)
		return "stale";
	if (prob[0] || g->nalerts)
		return "degraded";
	return g->up == 1 ? "ok" : "unknown";
}

static int gpu_cmp(const void *a, const void *b)
{
	const struct gpu *x = a, *y = b;
	int c = strcmp(x->instance, y->instance);
	if (c)
		return c;
	long gx = strtol(x->gpu, NULL, 10), gy = strtol(y->gpu, NULL, 10);
	return (gx > gy) - (gx < gy);
}

static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static int print_json(const struct fleet *fl, FILE *f)
{
	json_t *gpus = json_array();
	for (size_t i = 0; i < fl->n; i++) {
		const struct gpu *g = &fl->g[i];
		char prob[512];
		problems(g, prob, sizeof prob);
		json_t *pr = json_array(), *al = json_array(), *outl = json_array(), *figs = json_object();
		for (char *s = prob, *t; *s; s = t) {
			t = strchr(s, ',');
			size_t n = t ? (size_t)(t - s) : strlen(s);
			json_array_append_new(pr, json_stringn(s, n));
			t = t ? t + 1 : s + n;
		}
		for (const char *s = g->alerts, *t; *s; s = t) {
			t = strchr(s, ',');
			size_t n = t ? (size_t)(t - s) : strlen(s);
			json_array_append_new(al, json_stringn(s, n));
			t = t ? t + 1 : s + n;
		}
		for (int k = 0; k < M_FIXED + fl->nbench; k++) {
			json_object_set_new(figs, metric_name(fl, k), num_or_null(g->m[k]));
			if (g->out[k])
				json_array_append_new(outl, json_pack("{s:s, s:o, s:o, s:o}", "metric",
								      metric_name(fl, k), "value",
								      num_or_null(g->m[k]), "median",
								      num_or_null(g->med[k]), "z",
								      num_or_null(g->z[k])));
		}
		json_array_append_new(
			gpus, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:o}",
					"instance", g->instance, "gpu", g->gpu, "uuid", g->uuid, "model",
					g->model, "hostname", g->hostname, "up",
					g->up < 0 ? json_null() : json_boolean(g->up == 1), "health",
					health(g, prob), "problems", pr, "alerts", al, "bottleneck",
					g->bottleneck[0] ? json_string(g->bottleneck) : json_null(),
					"bottleneck_source",
					g->bottleneck_source ? json_string(g->bottleneck_source) : json_null(),
					"figures", figs, "outliers", outl));
		json_object_set_new(json_array_get(gpus, json_array_size(gpus) - 1), "alerts_total",
				    json_integer(g->nalerts));
	}
	json_t *doc = json_pack("{s:o, s:s, s:f, s:i}", "gpus", gpus, "since", fl->since,
				"z_threshold", FLEET_Z_THRESHOLD, "min_peers", FLEET_MIN_PEERS);
	int rc = json_dumpf(doc, f, JSON_INDENT(2)) == 0 && fputc('\n', f) != EOF ? 0 : GPULSE_EIO;
	json_decref(doc);
	return rc;
}

static int print_text(const struct fleet *fl, FILE *f)
{
	size_t bad = 0, nout = 0, nhosts = 0;
	fprintf(f, "%-21s %-3s %-14s %-40s %-9s %-14s %-24s %s\n", "INSTANCE", "GPU", "MODEL", "UUID",
		"HEALTH", "BOTTLENECK", "PROBLEMS/ALERTS", "OUTLIERS");
	for (size_t i = 0; i < fl->n; i++) {
		const struct gpu *g = &fl->g[i];
		nhosts += i == 0 || strcmp(g->instance, fl->g[i - 1].instance) != 0;
		char prob[512], pa[768], outs[512] = "";
		problems(g, prob, sizeof prob);
		const char *h = health(g, prob);
		bad += strcmp(h, "ok") != 0;
		snprintf(pa, sizeof pa, "%s%s%s", prob, prob[0] && g->alerts[0] ? "," : "", g->alerts);
		for (int k = 0; k < M_FIXED + fl->nbench; k++) {
			if (!g->out[k])
				continue;
			char item[160], val[32];
			if (k < M_FIXED)
				snprintf(val, sizeof val, "%.0f%s", g->m[k] * fixed_metrics[k].display,
					 fixed_metrics[k].unit);
			else
				snprintf(val, sizeof val, "%.0f%%", g->m[k] * 100);
			snprintf(item, sizeof item, "%s %s (z %+.1f)", metric_name(fl, k), val, g->z[k]);
			append(outs, sizeof outs, item);
			nout++;
		}
		/* gpulsed asked directly has no instance label: its host's name. */
		fprintf(f, "%-21s %-3s %-14.14s %-40s %-9s %-14s %-24s %s\n",
			g->instance[0] ? g->instance : g->hostname[0] ? g->hostname : "-", g->gpu,
			g->model, g->uuid, h,
			g->bottleneck[0] ? g->bottleneck : "-", pa[0] ? pa : "-", outs[0] ? outs : "-");
	}
	fprintf(f, "%zu GPU%s on %zu host%s: %zu not ok, %zu outlier%s (|z| > %.1f among >= %d GPUs of a "
		   "model, over %s)\n",
		fl->n, fl->n == 1 ? "" : "s", nhosts, nhosts == 1 ? "" : "s", bad, nout,
		nout == 1 ? "" : "s", FLEET_Z_THRESHOLD, FLEET_MIN_PEERS, fl->since);
	return ferror(f) ? GPULSE_EIO : 0;
}

int cmd_fleet(int argc, char **argv)
{
	enum { OPT_PROM = 256, OPT_SINCE, OPT_TOKEN };
	static const struct option longopts[] = {
		{"prometheus", required_argument, NULL, OPT_PROM},
		{"since", required_argument, NULL, OPT_SINCE},
		{"json", no_argument, NULL, 'j'},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct fleet fl = {0};
	const char *since = "10m";
	bool json = false;
	int ch;
	while ((ch = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		switch (ch) {
		case OPT_PROM:
			fl.co.url = optarg;
			fl.co.server = "Prometheus";
			break;
		case OPT_SINCE: since = optarg; break;
		case 'j': json = true; break;
		case OPT_TOKEN: fl.co.token_file = optarg; break;
		case 'h': fleet_usage(stdout); return CLI_OK;
		default: fleet_usage(stderr); return CLI_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpulse fleet: unexpected argument \"%s\"\n", argv[optind]);
		return CLI_USAGE;
	}
	double since_s;
	if (query_parse_duration(since, &since_s) != 0 || since_s < 1) {
		fprintf(stderr, "gpulse fleet: --since: \"%s\" is not a duration of 1s or more\n", since);
		return CLI_USAGE;
	}
	/* PromQL wants whole milliseconds at most: write it as seconds. */
	snprintf(fl.since, sizeof fl.since, "%.0fs", since_s);
	fl.since_s = since_s;
	int rc = collect(&fl);
	if (rc == 0)
		rc = judge(&fl);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	size_t diagnosed = 0;
	for (size_t i = 0; i < fl.n && rc == 0; i++) {
		struct gpu *g = &fl.g[i];
		if (g->bottleneck_source || g->up == 0)
			continue;
		if (diagnosed == FLEET_DIAGNOSE_MAX) {
			fl.undiagnosed++;
			continue;
		}
		diagnosed++;
		rc = diagnose_samples(&fl, g, (double)now.tv_sec + now.tv_nsec / 1e9);
	}
	if (rc) {
		fprintf(stderr, "gpulse fleet: %s\n", fl.err);
		free(fl.g);
		return client_exit_code(rc);
	}
	fl.sorted = false;
	if (fl.n > 1)
		qsort(fl.g, fl.n, sizeof *fl.g, gpu_cmp);
	rc = json ? print_json(&fl, stdout) : print_text(&fl, stdout);
	if (rc == 0 && fl.undiagnosed)
		fprintf(stderr,
			"gpulse fleet: %zu GPUs have no stored diagnosis and are past the %d classified "
			"from their samples: their bottleneck is \"-\"\n",
			fl.undiagnosed, FLEET_DIAGNOSE_MAX);
	if (rc == 0 && fl.n == 0)
		fprintf(stderr, "gpulse fleet: %s holds no gpulse_gpu_info series (no gpulsed scraped?)\n",
			client_base_url(&fl.co));
	free(fl.g);
	return rc ? CLI_FAIL : CLI_OK;
}
