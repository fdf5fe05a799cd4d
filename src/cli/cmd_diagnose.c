/* `gpulse diagnose --replay FILE.csv`: why each GPU of a recording was
 * slow or idle, window by window, with the evidence and advice, as a
 * table or as DESIGN.md's JSON. The CLI only reads the files and prints:
 * the classification is src/diagnose/'s, which takes plain structs. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "cli/client.h"
#include "cli/cmd_status.h"
#include "cli/commands.h"
#include "record/device_file.h"
#include "diagnose/diagnose.h"
#include "diagnose/diagnose_json.h"
#include "diagnose/peaks.h"
#include "record/recording.h"
#include "collect/sample.h"
#include "common/status.h"

/* One window's JSON is a few kilobytes; the bound only stops a runaway. */
#define WINDOW_JSON_MAX (1u << 20)

static void diagnose_usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse diagnose [--gpu N] [--since DURATION] [--window S] [--json] [--url URL]\n"
		"       gpulse diagnose --replay FILE.csv [--window S] [--json] [--device FILE]\n"
		"  Say why each GPU was slow or idle, per window, with the evidence against\n"
		"  the card's own peaks and one line of advice: from the running gpulsed's\n"
		"  recent history, or from a recording.\n"
		"  --gpu N         only this GPU (daemon)\n"
		"  --since D       how far back, e.g. 10m, 30s (daemon; default: its whole history)\n"
		"  --url URL       gpulsed's address (default $GPULSE_URL, else " CLIENT_DEFAULT_URL ")\n"
		"  --token-file F  bearer token for gpulsed (default $GPULSE_TOKEN_FILE)\n"
		"  --replay FILE   the recording (gpulse record's CSV format)\n"
		"  --window S      window length in seconds (default 5; the daemon's: 1 or more)\n"
		"  --json          print {\"windows\": [...]} (docs/DESIGN.md) instead of a table\n"
		"  --device FILE   the card's facts (nvidia-smi --query-gpu CSV; must exist);\n"
		"                  default: PREFIX-device.csv beside the recording, when present\n"
		"Exit status: 0 ok, 1 unreadable or malformed file (recording or --device),\n"
		"no such GPU or gpulsed unreachable, 2 usage error.\n");
}

/* The card's peaks for recorded GPU `gpu`: the device file's line for it
 * (or its first line), the model table, and failing those the recording
 * itself (its highest SM clock stands in for the maximum). */
static void peaks_for(struct gpu_peaks *p, const struct device_file *df, int gpu,
		      const struct rec_row *rows, size_t n)
{
	peaks_init(p);
	if (df && df->ngpus > 0) {
		const struct device_facts *d = &df->gpu[gpu < df->ngpus ? gpu : 0];
		snprintf(p->model, sizeof p->model, "%s", d->name);
		p->pcie_gen = d->pcie_max_gen;
		p->pcie_width = d->pcie_max_width;
		if (d->max_sm_clock_hz > 0) {
			p->sm_clock_max_hz = d->max_sm_clock_hz;
			p->mem_clock_max_hz = d->max_mem_clock_hz;
			p->clock_source = "device";
		}
		if (d->power_limit_w > 0) {
			p->power_limit_w = d->power_limit_w;
			p->power_source = "device";
		}
		if (d->mem_total_bytes > 0) {
			p->mem_total_bytes = d->mem_total_bytes;
			p->mem_source = "device";
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct rec_row *r = &rows[i];
		if (!(p->mem_total_bytes > 0) && (r->valid & FIELD_BIT(F_MEM_TOTAL)) &&
		    r->v[F_MEM_TOTAL] > 0) {
			p->mem_total_bytes = r->v[F_MEM_TOTAL];
			p->mem_source = "recording";
		}
	}
	if (!(p->sm_clock_max_hz > 0)) {
		double hi = 0;
		for (size_t i = 0; i < n; i++)
			if ((rows[i].valid & FIELD_BIT(F_SM_CLOCK)) && rows[i].v[F_SM_CLOCK] > hi)
				hi = rows[i].v[F_SM_CLOCK];
		if (hi > 0) {
			p->sm_clock_max_hz = hi;
			p->clock_source = "recording maximum";
		}
	}
	peaks_derive(p);
}

static void print_peaks(const struct gpu_peaks *p, int gpu)
{
	printf("GPU %d: %s", gpu, p->model[0] ? p->model : "unknown model");
	if (p->sm_count > 0)
		printf(", %d SMs", p->sm_count);
	if (p->dram_bytes_per_s > 0)
		printf(", DRAM %.2f TB/s (%s)", p->dram_bytes_per_s / 1e12, p->dram_source);
	else
		printf(", DRAM peak unknown");
	if (p->pcie_bytes_per_s > 0)
		printf(", PCIe gen%u x%u %.1f GB/s per direction", p->pcie_gen, p->pcie_width,
		       p->pcie_bytes_per_s / 1e9);
	else
		printf(", PCIe link unknown");
	if (p->power_limit_w > 0)
		printf(", power limit %.0f W (%s)", p->power_limit_w, p->power_source);
	if (p->sm_clock_max_hz > 0)
		printf(", max SM clock %.0f MHz (%s)", p->sm_clock_max_hz / 1e6, p->clock_source);
	printf("\n");
}

/* The advice under a window's line, once per run of windows that share
 * it: a class that holds for an hour prints its advice once, not 720
 * times. `last` (bounded by its size) remembers what was printed. */
static void print_advice(const char *advice, char *last, size_t lastlen)
{
	if (!advice || !advice[0] || strncmp(advice, last, lastlen - 1) == 0)
		return;
	printf("    advice: %s\n", advice);
	snprintf(last, lastlen, "%s", advice);
}

static void print_window(const struct diag_window *w, double origin)
{
	char findings[128] = "";
	for (int f = 0; f < DIAG_FINDING_COUNT; f++) {
		if (!(w->findings & DIAG_FINDING_BIT(f)))
			continue;
		size_t len = strlen(findings);
		snprintf(findings + len, sizeof findings - len, "%s%s", len ? "," : "",
			 diag_finding_name((enum diag_finding)f));
	}
	printf("%9.1f %9.1f %4d  %-14s %4.2f  %-26s %s\n", w->start_s - origin, w->end_s - origin,
	       w->gpu, diag_class_name(w->bottleneck), w->confidence,
	       findings[0] ? findings : "-", w->brief);
}

static void print_summary(const struct diag_summary *s, const struct gpu_peaks *p)
{
	printf("\nGPU %d (%s): %.1f s in %zu window%s\n", s->gpu,
	       p->model[0] ? p->model : "unknown model", s->seconds, s->nwindows,
	       s->nwindows == 1 ? "" : "s");
	printf("  time by class:");
	for (int c = 0; c < DIAG_CLASS_COUNT; c++)
		if (s->class_seconds[c] > 0)
			printf(" %s %.0f%%", diag_class_name((enum diag_class)c),
			       100.0 * s->class_seconds[c] / s->seconds);
	printf("\n");
	const struct diag_headroom *h = &s->busy_mean;
	if (s->busy_seconds > 0) {
		printf("  against peaks (windows not idle):");
		if (!isnan(h->busy))
			printf(" busy %.0f%%", 100 * h->busy);
		if (!isnan(h->sm_active))
			printf(", SM active %.0f%%", 100 * h->sm_active);
		if (!isnan(h->tensor))
			printf(", tensor %.0f%%", 100 * h->tensor);
		if (!isnan(h->pipe))
			printf(", busiest other pipe %.0f%%", 100 * h->pipe);
		if (!isnan(h->dram))
			printf(", DRAM %.0f%%", 100 * h->dram);
		if (!isnan(h->pcie))
			printf(", PCIe %.0f%%", 100 * h->pcie);
		if (!isnan(h->clock_ratio))
			printf(", SM clock %.0f%% of max", 100 * h->clock_ratio);
		printf("\n");
		if (h->bound_resource && !isnan(h->max_speedup))
			printf("  nearest hardware limit: %s; the job runs at %.0f%% of it (at most %.1fx "
			       "left on that resource)\n",
			       h->bound_resource, 100 / h->max_speedup, h->max_speedup);
	}
	if (s->top_finding >= 0)
		printf("  top finding: %s (%zu of %zu window%s)\n",
		       diag_finding_name((enum diag_finding)s->top_finding),
		       s->finding_windows[s->top_finding], s->nwindows, s->nwindows == 1 ? "" : "s");
	else
		printf("  top finding: none\n");
}

/* Print what evidence the windows lacked, once, with what it costs. */
static void print_missing(unsigned missing)
{
	if (!missing)
		return;
	printf("\nmissing evidence:\n");
	for (int m = 0; m < DIAG_MISSING_COUNT; m++)
		if (missing & DIAG_MISSING_BIT(m))
			printf("  %s: %s\n", diag_missing_name((enum diag_missing)m),
			       diag_missing_effect((enum diag_missing)m));
}

static int parse_window(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !isfinite(v) || v < 1e-3 || v > 1e7)
		return GPULSE_EINVAL;
	*out = v;
	return GPULSE_OK;
}

/* How absolute times are printed: local wall-clock time, the date only
 * when the times span more than one day (or always, in a header), and
 * milliseconds only when some time needs them. */
struct time_style {
	bool date;
	bool millis;
};

/* `t_s` (Unix seconds) as local "YYYY-MM-DD HH:MM:SS[.mmm]" or
 * "HH:MM:SS[.mmm]". */
static void format_time(double t_s, struct time_style st, char *out, size_t outlen)
{
	if (!isfinite(t_s) || fabs(t_s) > 1e15) {
		snprintf(out, outlen, "?");
		return;
	}
	/* Rounded to the millisecond first, so 59.9996 prints as the next
	 * second, never as ":59.1000". */
	long long ms = llround(t_s * 1000);
	long long sec = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
	time_t tt = (time_t)sec;
	struct tm tm;
	if (!localtime_r(&tt, &tm)) {
		snprintf(out, outlen, "?");
		return;
	}
	size_t n = strftime(out, outlen, st.date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm);
	if (st.millis && n > 0 && n < outlen)
		snprintf(out + n, outlen - n, ".%03lld", ms - sec * 1000);
}

/* The width format_time's text has in style `st`. */
static int time_width(struct time_style st)
{
	return (st.date ? 19 : 8) + (st.millis ? 4 : 0);
}

/* The local time zone's offset at `t_s`, as "UTC+01:00". */
static void format_zone(double t_s, char *out, size_t outlen)
{
	time_t tt = isfinite(t_s) && fabs(t_s) < 1e15 ? (time_t)t_s : 0;
	struct tm tm;
	char z[16];
	if (!localtime_r(&tt, &tm) || strftime(z, sizeof z, "%z", &tm) != 5) {
		snprintf(out, outlen, "local time");
		return;
	}
	snprintf(out, outlen, "UTC%.3s:%.2s", z, z + 3);
}

/* The style that prints the daemon's windows unambiguously: the date when
 * they cross a local midnight, milliseconds when an edge is not on a
 * whole second. Also reports the span they cover. */
static struct time_style windows_style(json_t *windows, double *first_s, double *last_s)
{
	struct time_style st = {false, false};
	double lo = INFINITY, hi = -INFINITY;
	json_t *w;
	size_t i;
	json_array_foreach(windows, i, w) {
		double a = json_number_value(json_object_get(w, "start_s"));
		double b = json_number_value(json_object_get(w, "end_s"));
		lo = fmin(lo, a);
		hi = fmax(hi, b);
		if (fabs(a - round(a)) > 5e-4 || fabs(b - round(b)) > 5e-4)
			st.millis = true;
	}
	*first_s = lo;
	*last_s = hi;
	if (isfinite(lo) && isfinite(hi)) {
		char d1[32], d2[32];
		struct time_style day = {true, false};
		format_time(lo, day, d1, sizeof d1);
		/* The end is exclusive: a span ending at midnight is one day. */
		format_time(fmax(lo, hi - 1e-3), day, d2, sizeof d2);
		st.date = strncmp(d1, d2, 10) != 0;
	}
	return st;
}

/* One line per window from the daemon's JSON, as print_window does: the
 * window's local times, and in the evidence column its one-line summary
 * of the deciding numbers (the advice is not evidence: print_advice puts
 * it on a line of its own). */
static void print_json_window(json_t *w, struct time_style st)
{
	char findings[64] = "";
	json_t *f;
	size_t i;
	json_array_foreach(json_object_get(w, "findings"), i, f) {
		size_t len = strlen(findings);
		snprintf(findings + len, sizeof findings - len, "%s%s", len ? "," : "",
			 json_string_value(f) ? json_string_value(f) : "?");
	}
	const char *brief = json_string_value(json_object_get(w, "summary"));
	char a[40], b[40];
	format_time(json_number_value(json_object_get(w, "start_s")), st, a, sizeof a);
	format_time(json_number_value(json_object_get(w, "end_s")), st, b, sizeof b);
	int tw = time_width(st);
	printf("%-*s %-*s %4lld  %-14s %-26s %s\n", tw, a, tw, b,
	       (long long)json_integer_value(json_object_get(w, "gpu")),
	       json_string_value(json_object_get(w, "bottleneck")) ?
		       json_string_value(json_object_get(w, "bottleneck")) : "?",
	       findings[0] ? findings : "-", brief ? brief : "-");
}

/* A number of the daemon's peaks object, 0 when null or absent (unknown,
 * as struct gpu_peaks has it). */
static double peak_num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : 0;
}

/* The daemon's peaks of one GPU, printed as the replay prints its own:
 * the yardsticks the windows below were measured against. */
static void print_json_peaks(json_t *pk)
{
	struct gpu_peaks p;
	peaks_init(&p);
	json_t *src = json_object_get(pk, "sources");
	const char *model = json_string_value(json_object_get(pk, "model"));
	snprintf(p.model, sizeof p.model, "%s", model ? model : "");
	p.sm_count = (int)peak_num(pk, "sm_count");
	p.sm_clock_max_hz = peak_num(pk, "sm_clock_max_hertz");
	p.dram_bytes_per_s = peak_num(pk, "dram_bytes_per_second");
	p.pcie_bytes_per_s = peak_num(pk, "pcie_bytes_per_second_per_direction");
	p.pcie_gen = (unsigned)peak_num(pk, "pcie_generation");
	p.pcie_width = (unsigned)peak_num(pk, "pcie_width");
	p.power_limit_w = peak_num(pk, "power_limit_watts");
	p.mem_total_bytes = peak_num(pk, "memory_total_bytes");
	const char *s;
	if ((s = json_string_value(json_object_get(src, "dram"))))
		p.dram_source = s;
	if ((s = json_string_value(json_object_get(src, "power_limit"))))
		p.power_source = s;
	if ((s = json_string_value(json_object_get(src, "clocks"))))
		p.clock_source = s;
	print_peaks(&p, (int)json_integer_value(json_object_get(pk, "gpu")));
}

/* One line per GPU: the share of time in each class, largest first. */
static void print_json_summaries(json_t *summaries)
{
	json_t *s;
	size_t i;
	json_array_foreach(summaries, i, s) {
		json_t *share = json_object_get(s, "class_share");
		double v[DIAG_CLASS_COUNT];
		for (int c = 0; c < DIAG_CLASS_COUNT; c++)
			v[c] = json_number_value(
				json_object_get(share, diag_class_name((enum diag_class)c)));
		printf("GPU %lld over %.0f s:", (long long)json_integer_value(json_object_get(s, "gpu")),
		       json_number_value(json_object_get(s, "seconds")));
		for (int k = 0; k < DIAG_CLASS_COUNT; k++) {
			int best = -1;
			for (int c = 0; c < DIAG_CLASS_COUNT; c++)
				if (v[c] > 0 && (best < 0 || v[c] > v[best]))
					best = c;
			if (best < 0)
				break;
			printf("%s %s %.0f%%", k ? "," : "", diag_class_name((enum diag_class)best),
			       v[best] * 100);
			v[best] = 0;
		}
		printf("\n");
	}
}

/* gpulse diagnose without --replay: the running gpulsed's live diagnosis. */
/* A window's tenants, one line under it when several processes shared
 * the GPU: each one's class and its part of the activity that bounds the
 * GPU ("pid 12 (pod a): compute_bound on tensor cores, 71% of tensor
 * activity; pid 13 (b): launch_bound, 3%"). */
static void print_window_tenants(json_t *t)
{
	json_t *procs = json_object_get(t, "processes");
	if (!json_is_array(procs) || json_array_size(procs) < 2)
		return;
	json_t *bo = json_object_get(t, "bottleneck_owner");
	const char *act = json_is_object(bo) ? json_string_value(json_object_get(bo, "activity")) : NULL;
	const char *key = !act ? "sm_active" : strcmp(act, "tensor") == 0 ? "tensor_active"
		: strcmp(act, "dram") == 0 ? "dram_bandwidth" : "sm_active";
	const char *what = !act ? "SM" : strcmp(act, "tensor") == 0 ? "tensor"
		: strcmp(act, "dram") == 0 ? "DRAM bandwidth" : "SM";
	double total = 0;
	size_t i;
	json_t *p;
	json_array_foreach(procs, i, p)
		total += json_number_value(json_object_get(p, key));
	printf("    tenants:");
	json_array_foreach(procs, i, p) {
		const char *owner = json_string_value(json_object_get(p, "owner"));
		const char *comm = json_string_value(json_object_get(p, "comm"));
		const char *bound = json_string_value(json_object_get(p, "bound"));
		const char *detail = json_string_value(json_object_get(p, "bound_detail"));
		double v = json_number_value(json_object_get(p, key));
		printf("%s pid %lld (%s): %s%s%s, %.0f%% of %s activity", i ? ";" : "",
		       (long long)json_integer_value(json_object_get(p, "pid")),
		       owner && owner[0] ? owner : comm ? comm : "?", bound ? bound : "?",
		       detail && detail[0] ? " on " : "", detail ? detail : "",
		       total > 0 ? 100 * v / total : 0, what);
	}
	printf("\n");
	/* Per owner (pod, job, ...) when several shared the window, held
	 * against the GPU's class. */
	json_t *wl = json_object_get(t, "workloads");
	const char *dev = json_string_value(json_object_get(t, "device_bound"));
	if (!json_is_array(wl) || json_array_size(wl) < 2)
		return;
	printf("    by owner (GPU %s):", dev ? dev : "?");
	json_array_foreach(wl, i, p) {
		const char *owner = json_string_value(json_object_get(p, "owner"));
		const char *bound = json_string_value(json_object_get(p, "bound"));
		const char *detail = json_string_value(json_object_get(p, "bound_detail"));
		json_t *share = json_object_get(p, "bottleneck_share");
		printf("%s %s: %s%s%s", i ? ";" : "", owner && owner[0] ? owner : "(no owner known)",
		       bound ? bound : "?", detail && detail[0] ? " on " : "", detail ? detail : "");
		if (json_is_number(share))
			printf(", %.0f%% of %s activity", 100 * json_number_value(share), what);
	}
	printf("\n");
}

static int diagnose_daemon(const struct client_opts *co, int gpu, const char *since,
			   const char *window, bool json)
{
	char path[256], err[1024];
	int n = snprintf(path, sizeof path, "/api/v1/diagnosis");
	char sep = '?';
	if (gpu >= 0) {
		n += snprintf(path + n, sizeof path - (size_t)n, "%cgpu=%d", sep, gpu);
		sep = '&';
	}
	if (since) {
		n += snprintf(path + n, sizeof path - (size_t)n, "%csince=%.60s", sep, since);
		sep = '&';
	}
	if (window)
		snprintf(path + n, sizeof path - (size_t)n, "%cwindow=%s", sep, window);
	json_t *root = NULL;
	int rc = client_get_json(co, path, &root, NULL, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse: %s\n", err);
		return client_exit_code(rc);
	}
	json_t *data = json_object_get(root, "data");
	json_t *windows = json_object_get(data, "windows");
	if (!json_is_array(windows)) {
		fprintf(stderr, "gpulse: gpulsed sent /api/v1/diagnosis in an unexpected shape\n");
		json_decref(root);
		return CLI_FAIL;
	}
	/* The API answers an unknown GPU as one without windows yet: tell
	 * them apart, so a mistyped index is an error, not "no window yet". */
	char have[256];
	if (gpu >= 0 && json_array_size(windows) == 0 &&
	    !status_has_gpu(co, gpu, have, sizeof have)) {
		fprintf(stderr, "gpulse diagnose: no GPU %d at %s (%s%s)\n", gpu, client_base_url(co),
			have[0] ? "its GPUs: " : "it watches no GPU", have);
		json_decref(root);
		return CLI_FAIL;
	}
	if (json) {
		/* The same document `--replay --json` prints. */
		json_dumpf(data, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
		fputc('\n', stdout);
	} else {
		const char *source = json_string_value(json_object_get(data, "source"));
		double first_s, last_s;
		struct time_style st = windows_style(windows, &first_s, &last_s);
		if (source && strcmp(source, "store") == 0)
			printf("%s: stored diagnosis, %g s windows (each the class that held most "
			       "of its time, with that time's numbers)",
			       client_base_url(co), json_number_value(json_object_get(data, "window_s")));
		else
			printf("%s: live diagnosis, %g s windows", client_base_url(co),
			       json_number_value(json_object_get(data, "window_s")));
		/* The span the windows cover, not the history the daemon can
		 * hold: a daemon up for a minute has a minute. */
		if (isfinite(first_s) && isfinite(last_s)) {
			char a[40], b[40], z[24];
			format_time(first_s, (struct time_style){true, st.millis}, a, sizeof a);
			format_time(last_s, st, b, sizeof b);
			format_zone(first_s, z, sizeof z);
			printf(" over %g s, %s to %s (%s)", last_s - first_s, a, b, z);
		}
		printf("\n");
		json_t *pk;
		size_t k;
		json_array_foreach(json_object_get(data, "peaks"), k, pk)
			print_json_peaks(pk);
		int tw = time_width(st);
		printf("%-*s %-*s %4s  %-14s %-26s %s\n", tw, "start", tw, "end", "gpu",
		       "bottleneck", "findings", "evidence");
		json_t *w;
		size_t i;
		char last_advice[sizeof ((struct diag_window *)0)->advice] = "";
		json_array_foreach(windows, i, w) {
			/* A new GPU starts its own runs. */
			if (i > 0 && json_integer_value(json_object_get(w, "gpu")) !=
					     json_integer_value(json_object_get(
						     json_array_get(windows, i - 1), "gpu")))
				last_advice[0] = '\0';
			print_json_window(w, st);
			print_window_tenants(json_array_get(json_object_get(data, "tenants"), i));
			print_advice(json_string_value(json_object_get(w, "advice")), last_advice,
				     sizeof last_advice);
		}
		if (json_array_size(windows) == 0)
			printf("(no complete window yet)\n");
		print_json_summaries(json_object_get(data, "summary"));
		json_t *o;
		json_array_foreach(json_object_get(data, "owners"), i, o) {
			const char *basis = json_string_value(json_object_get(o, "basis"));
			bool mem = basis && strcmp(basis, "gpu_memory_bytes") == 0;
			double v = json_number_value(json_object_get(o, "value"));
			printf("GPU %lld: the bottleneck's owner is pid %lld (%s), the largest %s "
			       "(%.0f%s) of %lld process(es)\n",
			       (long long)json_integer_value(json_object_get(o, "gpu")),
			       (long long)json_integer_value(json_object_get(o, "pid")),
			       json_string_value(json_object_get(o, "comm")) ?
				       json_string_value(json_object_get(o, "comm")) : "?",
			       mem ? "GPU memory user" : "SM user", mem ? v / 1048576 : v * 100,
			       mem ? " MiB" : "%",
			       (long long)json_integer_value(json_object_get(o, "processes")));
		}
	}
	json_decref(root);
	return CLI_OK;
}

int cmd_diagnose(int argc, char **argv)
{
	enum { OPT_URL = 256, OPT_TOKEN, OPT_GPU, OPT_SINCE };
	static const struct option opts[] = {
		{"gpu", required_argument, NULL, OPT_GPU},
		{"since", required_argument, NULL, OPT_SINCE},
		{"url", required_argument, NULL, OPT_URL},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"replay", required_argument, NULL, 'r'},
		{"window", required_argument, NULL, 'w'},
		{"json", no_argument, NULL, 'j'},
		{"device", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL, *device_path = NULL, *since = NULL, *window_arg = NULL;
	struct client_opts co = {0};
	int gpu = -1;
	double window_s = 5;
	bool json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case OPT_URL: co.url = optarg; break;
		case OPT_TOKEN: co.token_file = optarg; break;
		case OPT_SINCE:
			since = optarg;
			if (!*since || strspn(since, "0123456789.smhdwy") != strlen(since)) {
				fprintf(stderr, "gpulse diagnose: --since must be a duration such as "
						"10m or 30s, not \"%s\"\n", optarg);
				return CLI_USAGE;
			}
			break;
		case OPT_GPU:
			gpu = (int)strtol(optarg, &end, 10);
			if (!*optarg || *end || gpu < 0 || gpu >= GPU_MAX) {
				fprintf(stderr, "gpulse diagnose: --gpu must be a GPU index, not \"%s\"\n",
					optarg);
				return CLI_USAGE;
			}
			break;
		case 'r': path = optarg; break;
		case 'd': device_path = optarg; break;
		case 'j': json = true; break;
		case 'w':
			window_arg = optarg;
			if (parse_window(optarg, &window_s) != GPULSE_OK) {
				fprintf(stderr, "gpulse diagnose: --window must be a number of seconds "
						"from 0.001 to 1e7, not \"%s\"\n", optarg);
				return CLI_USAGE;
			}
			break;
		case 'h': diagnose_usage(stdout); return CLI_OK;
		default: diagnose_usage(stderr); return CLI_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpulse diagnose: unexpected argument \"%s\"\n", argv[optind]);
		diagnose_usage(stderr);
		return CLI_USAGE;
	}
	if (!path) {
		/* The daemon reads a bare number as seconds. */
		char wbuf[32];
		if (window_arg)
			snprintf(wbuf, sizeof wbuf, "%g", window_s);
		return diagnose_daemon(&co, gpu, since, window_arg ? wbuf : NULL, json);
	}
	if (gpu >= 0 || since || co.url) {
		fprintf(stderr, "gpulse diagnose: --gpu, --since and --url are for the running "
				"gpulsed, not --replay\n");
		return CLI_USAGE;
	}

	int rc = CLI_FAIL;
	char err[1024];
	struct recording *rec = NULL;
	struct device_file *df = NULL;
	struct rec_row *rows = NULL;
	struct diag_window *win = NULL;
	struct diag_summary *sums = NULL;
	struct gpu_peaks *peaks = NULL;
	struct buf b;
	buf_init(&b, WINDOW_JSON_MAX);

	if (recording_load(path, &rec, err, sizeof err) != GPULSE_OK) {
		fprintf(stderr, "gpulse diagnose: %s\n", err);
		goto out;
	}
	if (rec->ninvalid)
		fprintf(stderr, "gpulse diagnose: warning: %s\n", rec->invalid_note);
	df = calloc(1, sizeof *df);
	sums = calloc(GPU_MAX, sizeof *sums);
	peaks = calloc(GPU_MAX, sizeof *peaks);
	rows = malloc((rec->nrows ? rec->nrows : 1) * sizeof *rows);
	if (!df || !sums || !peaks || !rows) {
		fprintf(stderr, "gpulse diagnose: out of memory\n");
		goto out;
	}
	char dpath[8192];
	bool explicit_device = device_path != NULL;
	if (!device_path && device_file_path(path, dpath, sizeof dpath) == GPULSE_OK)
		device_path = dpath;
	if (device_path) {
		/* A file the user named must be there and readable; the one
		 * beside the recording is optional context. */
		int drc = device_file_load(device_path, df, err, sizeof err);
		if (drc != GPULSE_OK && explicit_device) {
			fprintf(stderr, "gpulse diagnose: --device %s\n", err);
			goto out;
		}
		if (drc != GPULSE_OK && drc != GPULSE_ENOENT)
			fprintf(stderr, "gpulse diagnose: %s (going on without the card's facts)\n", err);
	}

	/* Windows align to the recording's first time, across GPUs. */
	double origin = INFINITY;
	for (size_t i = 0; i < rec->nrows; i++)
		origin = fmin(origin, rec->rows[i].t_s);

	if (json)
		fputs("{\"windows\": [", stdout);
	else if (isfinite(origin)) {
		char at[40], z[24];
		format_time(origin, (struct time_style){true, true}, at, sizeof at);
		format_zone(origin, z, sizeof z);
		printf("%s: %zu samples, %d GPU(s), %g s windows from %s (%s; t=%.3f); times "
		       "below are seconds after it\n",
		       path, rec->nrows, rec->ngpus, window_s, at, z, origin);
	} else {
		printf("%s: no samples\n", path);
	}
	/* Each GPU's rows together, in file (time) order: a counting sort
	 * by GPU, one pass. */
	size_t count[GPU_MAX + 1] = {0};
	for (size_t i = 0; i < rec->nrows; i++)
		count[rec->rows[i].gpu + 1]++;
	for (int g = 0; g < GPU_MAX; g++)
		count[g + 1] += count[g];
	size_t fill[GPU_MAX];
	memcpy(fill, count, sizeof fill);
	for (size_t i = 0; i < rec->nrows; i++)
		rows[fill[rec->rows[i].gpu]++] = rec->rows[i];

	bool first = true;
	int nsums = 0;
	unsigned missing = 0;
	for (int g = 0; g < rec->ngpus; g++) {
		size_t n = count[g + 1] - count[g];
		if (!n)
			continue;
		const struct rec_row *grows = rows + count[g];
		struct gpu_peaks *pk = &peaks[nsums];
		peaks_for(pk, df, g, grows, n);
		struct diag_input in = {
			.gpu = g, .rows = grows, .nrows = n, .origin_s = origin, .window_s = window_s,
		};
		size_t nw = 0;
		int drc = diagnose_gpu(&in, pk, &win, &nw);
		if (drc == GPULSE_ERANGE) {
			fprintf(stderr, "gpulse diagnose: %s: the times span too many %g s windows "
					"to place exactly\n", path, window_s);
			goto out;
		}
		if (drc != GPULSE_OK) {
			fprintf(stderr, "gpulse diagnose: %s\n", gpulse_strerror(drc));
			goto out;
		}
		if (!json) {
			printf("\n");
			print_peaks(pk, g);
			printf("%9s %9s %4s  %-14s %4s  %-26s %s\n", "start_s", "end_s", "gpu",
			       "bottleneck", "conf", "findings", "evidence");
		}
		char last_advice[sizeof win->advice] = "";
		for (size_t k = 0; k < nw; k++) {
			missing |= win[k].missing;
			if (!json) {
				print_window(&win[k], origin);
				print_advice(win[k].advice, last_advice, sizeof last_advice);
				continue;
			}
			buf_reset(&b);
			if (diag_json_window(&b, &win[k]) != GPULSE_OK) {
				fprintf(stderr, "gpulse diagnose: a window's JSON exceeds %u bytes\n",
					WINDOW_JSON_MAX);
				goto out;
			}
			fputs(first ? "\n  " : ",\n  ", stdout);
			fwrite(b.data, 1, b.len, stdout);
			first = false;
		}
		diagnose_summarize(win, nw, &sums[nsums++]);
		free(win);
		win = NULL;
	}

	if (json) {
		fputs("\n], \"summary\": [", stdout);
		for (int i = 0; i < nsums; i++) {
			buf_reset(&b);
			diag_json_summary(&b, &sums[i]);
			fputs(i ? ",\n  " : "\n  ", stdout);
			fwrite(b.data, 1, b.len, stdout);
		}
		fputs("\n], \"peaks\": [", stdout);
		for (int i = 0; i < nsums; i++) {
			buf_reset(&b);
			diag_json_peaks(&b, sums[i].gpu, &peaks[i]);
			fputs(i ? ",\n  " : "\n  ", stdout);
			fwrite(b.data, 1, b.len, stdout);
		}
		fputs("\n]}\n", stdout);
	} else {
		for (int i = 0; i < nsums; i++)
			print_summary(&sums[i], &peaks[i]);
		print_missing(missing);
	}
	rc = CLI_OK;
out:
	buf_free(&b);
	free(win);
	free(rows);
	free(peaks);
	free(sums);
	free(df);
	recording_free(rec);
	return rc;
}
