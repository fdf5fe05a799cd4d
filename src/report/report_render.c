/* The capacity report written out: text for a terminal (with
 * sparklines), JSON with every figure (jansson), and one self-contained
 * HTML page whose charts are inline SVG drawn here (no scripts, no fonts
 * or images fetched; dark mode and print through CSS). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "report/report.h"
#include "common/spark.h"
#include "common/status.h"
#include "common/xalloc.h"

#define SPARK_W 48
#define GIB 1073741824.0

static void fmt_time(char *dst, size_t len, int64_t t_ms)
{
	time_t t = (time_t)(t_ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(dst, len, "%Y-%m-%d %H:%M UTC", &tm);
}

static const char *gname(const struct report_gpu *x, char *buf, size_t len)
{
	if (x->host[0])
		snprintf(buf, len, "%s/%s", x->host, x->gpu);
	else
		snprintf(buf, len, "%s", x->gpu);
	return buf;
}

/* A span of hours for people: "42s", "12.5m", "3.2h", "14.1d" past
 * ten days. Several at once in one printf: a ring of buffers (the
 * renderers run on one thread). */
static const char *dur(double h)
{
	static char ring[16][24];
	static unsigned next;
	char *b = ring[next++ % 16];
	double s = h * 3600;
	if (!isfinite(h))
		snprintf(b, 24, "-");
	else if (s < 60)
		snprintf(b, 24, "%.0fs", s);
	else if (s < 3600)
		snprintf(b, 24, "%.1fm", s / 60);
	else if (h < 240)
		snprintf(b, 24, "%.1fh", h);
	else
		snprintf(b, 24, "%.1fd", h / 24);
	return b;
}

static void pct(char *dst, size_t len, double v)
{
	if (isfinite(v))
		snprintf(dst, len, "%.1f%%", v * 100);
	else
		snprintf(dst, len, "-");
}

/* The per-slot series v downsampled to about `width` bucket means. */
static void spark_of(const double *v, size_t n, bool utf8, char *out, size_t len)
{
	spark_draw(v, n, 0, 1, utf8, SPARK_W, out, len);
}

/* ---- text ---- */

int report_write_text(const struct report *r, FILE *out, bool utf8)
{
	char a[64], b[64], c[64], d[64], t0[40], t1[40];
	char sp[SPARK_W * 4 + 1], hp[24 * 4 + 1];
	fmt_time(t0, sizeof t0, r->start_ms);
	fmt_time(t1, sizeof t1, r->end_ms);
	fprintf(out, "Capacity report  %s .. %s  (%zu slots of %llds)\n", t0, t1, r->nslots,
		(long long)(r->o.step_ms / 1000));
	fprintf(out, "source: %s %s\n", r->source_kind, r->source_where);
	fprintf(out, "resolution: %s\n", r->resolution);
	fprintf(out, "target band: %.0f-%.0f%% mean busy; busy line %.0f%%; idle below %.0f%% utilization\n",
		r->o.band_lo * 100, r->o.band_hi * 100, r->o.busy_line * 100, r->o.idle_ratio * 100);
	for (size_t i = 0; i < r->nnotes; i++)
		fprintf(out, "note: %s\n", r->notes[i]);
	if (r->ngpus == 0)
		return ferror(out) ? GPULSE_EIO : 0;

	fputs("\nHOSTS\n", out);
	for (size_t i = 0; i < r->nhosts; i++) {
		const struct report_host *h = &r->hosts[i];
		pct(a, sizeof a, h->busy.mean);
		pct(b, sizeof b, h->busy.p95);
		pct(c, sizeof c, h->failover_p95);
		fprintf(out, "  %-16s %zu GPUs  %s  mean busy %s  p95 %s  %s: below %.0f%%, in %.0f%%, above %.0f%% (working hours above %.0f%%)\n",
			h->host[0] ? h->host : "this host", h->ngpus, dur(h->covered_h), a, b, h->verdict,
			h->below * 100, h->in * 100, h->above * 100, h->work_above * 100);
		fprintf(out, "  %-16s peaks: %s; failover (p95 over n-1 GPUs %s): %s\n", "",
			h->peak_room ? "room" : "no room", c,
			h->ngpus < 2 ? "one GPU, none to fail over to"
				     : h->failover_room ? "room" : "no room");
		spark_draw(h->hour_mean, 24, 0, 1, utf8, 24, hp, sizeof hp);
		spark_of(h->s_mean, r->nslots, utf8, sp, sizeof sp);
		fprintf(out, "  %-16s by hour (UTC 00-23) %s   over the range %s\n", "", hp, sp);
	}

	fputs("\nGPUS  busy = SM activity (utilization where there is no GPM)\n", out);
	fprintf(out, "  %-8s %-22s %-6s %7s %7s %7s %7s %8s %8s %8s %14s %5s %7s  %s\n", "GPU", "MODEL",
		"BUSY", "P50", "P95", "P99", "TENSOR95", "TIME", "IDLE", "ALLOC_ID", "MEM_HIGH",
		"X85", "ABOVE85", "TREND");
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		char g[160], mem[48];
		pct(a, sizeof a, x->busy.p50);
		pct(b, sizeof b, x->busy.p95);
		pct(c, sizeof c, x->busy.p99);
		pct(d, sizeof d, x->tensor.p95);
		snprintf(mem, sizeof mem, "%.1f/%.0fGiB", x->mem_high_bytes / GIB, x->mem_total_bytes / GIB);
		spark_of(x->s_busy, r->nslots, utf8, sp, sizeof sp);
		fprintf(out, "  %-8s %-22.22s %-6s %7s %7s %7s %8s %8s %8s %8s %14s %5u %7s  %s\n",
			gname(x, g, sizeof g), x->model, x->has_gpm ? "sm" : "util", a, b, c, d,
			dur(x->covered_h), dur(x->idle_h), dur(x->alloc_idle_h), mem, x->crossings,
			dur(x->above_h), sp);
		if (x->uuid[0])
			fprintf(out, "  %-8s %s%s%s\n", "", x->uuid,
				x->replaced_by >= 0 ? "  (replaced later)" : "",
				x->replaces >= 0 ? "  (replacement)" : "");
		if (isfinite(x->health_min))
			fprintf(out, "           health: lowest %.0f/100%s%s\n", x->health_min,
				x->drain_reason[0] ? "; drain: " : "", x->drain_reason);
		int any = 0;
		for (int k = 0; k < DIAG_CLASS_COUNT; k++)
			if (x->class_h[k] > 0) {
				fprintf(out, "%s%s %s", any ? ", " : "           bottlenecks: ",
					diag_class_name((enum diag_class)k), dur(x->class_h[k]));
				any = 1;
			}
		if (any)
			fputc('\n', out);
	}

	fputs("\nMODELS\n", out);
	for (size_t i = 0; i < r->nmodels; i++) {
		const struct report_model *m = &r->models[i];
		pct(a, sizeof a, m->busy.p50);
		pct(b, sizeof b, m->busy.p95);
		pct(c, sizeof c, m->busy.p99);
		pct(d, sizeof d, m->tensor.p95);
		fprintf(out, "  %s%s%-24s %zu GPUs  busy p50 %s p95 %s p99 %s  tensor p95 %s  GPU-time %s, idle %s, allocated-idle %s  memory high %.1f of %.0f GiB\n",
			m->host, m->host[0] ? " " : "", m->model, m->ngpus, a, b, c, d, dur(m->covered_h),
			dur(m->idle_h), dur(m->alloc_idle_h), m->mem_high_bytes / GIB, m->mem_total_bytes / GIB);
	}

	if (r->nprocs) {
		fputs("\nPROCESSES\n", out);
		fprintf(out, "  %-8s %-16s %-8s %12s %8s %12s %12s\n", "PID", "COMM", "GPU", "MEM_HIGH_GIB",
			"HELD", "IDLE_HELD", "KERNEL_TIME");
		for (size_t i = 0; i < r->nprocs; i++) {
			const struct report_proc *p = &r->procs[i];
			char g[160];
			snprintf(g, sizeof g, "%s%s%s", p->host, p->host[0] ? "/" : "", p->gpu);
			fprintf(out, "  %-8s %-16.16s %-8s %12.2f %8s %12s %12s\n", p->pid, p->comm, g,
				p->mem_high_bytes / GIB, dur(p->seen_h), dur(p->idle_held_h),
				p->traced ? dur(p->kernel_s / 3600) : "-");
		}
	}

	if (r->npods) {
		fputs("\nPODS (allocated but idle: their part of the GPU's SM activity under the idle line)\n", out);
		fprintf(out, "  %-40s %-8s %8s %8s %6s\n", "POD", "GPU", "HELD", "IDLE", "IDLE%");
		for (size_t i = 0; i < r->npods; i++) {
			const struct report_pod *p = &r->pods[i];
			char g[160], who[160];
			snprintf(g, sizeof g, "%s%s%s", p->host, p->host[0] ? "/" : "", p->gpu);
			if (p->job[0])
				snprintf(who, sizeof who, "job %s", p->job);
			else
				snprintf(who, sizeof who, "%s/%s", p->namespace_, p->pod);
			char hb[32];
			snprintf(hb, sizeof hb, "%s", dur(p->held_h));
			fprintf(out, "  %-40.40s %-8s %8s %8s %5.0f%%\n", who, g, hb, dur(p->idle_h),
				p->held_h > 0 ? 100 * p->idle_h / p->held_h : 0);
		}
	}

	fputs("\nRECOMMENDATIONS\n", out);
	if (!r->enough_history)
		fputs("  none: too little history (see the note above)\n", out);
	else if (r->nrecs == 0)
		fputs("  none\n", out);
	for (size_t i = 0; i < r->nrecs; i++)
		fprintf(out, "  [%s] %s\n", r->recs[i].kind, r->recs[i].text);
	return ferror(out) ? GPULSE_EIO : 0;
}

/* ---- JSON ---- */

static json_t *num(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *dist_json(const struct report_dist *d)
{
	return json_pack("{s:I,s:o,s:o,s:o,s:o,s:o}", "slots", (json_int_t)d->n, "mean",
			 num(d->mean), "p50", num(d->p50), "p95", num(d->p95), "p99", num(d->p99),
			 "max", num(d->max));
}

static json_t *hours_json(const double *h)
{
	json_t *a = json_array();
	for (int i = 0; i < 24; i++)
		json_array_append_new(a, num(h[i]));
	return a;
}

int report_write_json(const struct report *r, FILE *out)
{
	json_t *root = json_object();
	json_object_set_new(root, "report", json_string("capacity"));
	json_object_set_new(root, "source", json_pack("{s:s,s:s}", "kind", r->source_kind, "where",
						       r->source_where));
	json_object_set_new(root, "start_s", json_integer(r->start_ms / 1000));
	json_object_set_new(root, "end_s", json_integer(r->end_ms / 1000));
	json_object_set_new(root, "step_s", json_real((double)r->o.step_ms / 1000));
	json_object_set_new(root, "slots", json_integer((json_int_t)r->nslots));
	json_object_set_new(root, "raw_retention_from_s", json_integer(r->split_ms / 1000));
	json_object_set_new(root, "rollups_read_before_s", json_integer(r->read_split_ms / 1000));
	json_object_set_new(root, "resolution", json_string(r->resolution));
	json_object_set_new(root, "thresholds",
			    json_pack("{s:f,s:f,s:f,s:f,s:I,s:f}", "band_lo", r->o.band_lo, "band_hi",
				      r->o.band_hi, "busy_line", r->o.busy_line, "idle_ratio",
				      r->o.idle_ratio, "allocated_min_bytes",
				      (json_int_t)REPORT_ALLOC_MIN_BYTES, "min_history_h",
				      (double)r->o.min_history_ms / 3600000.0));
	json_object_set_new(root, "enough_history", json_boolean(r->enough_history));
	json_t *notes = json_array();
	for (size_t i = 0; i < r->nnotes; i++)
		json_array_append_new(notes, json_string(r->notes[i]));
	json_object_set_new(root, "notes", notes);

	json_t *hosts = json_array();
	for (size_t i = 0; i < r->nhosts; i++) {
		const struct report_host *h = &r->hosts[i];
		json_array_append_new(
			hosts,
			json_pack("{s:s,s:I,s:f,s:o,s:f,s:f,s:f,s:f,s:f,s:o,s:o,s:b,s:b,s:s,s:o}", "host",
				  h->host, "gpus", (json_int_t)h->ngpus, "covered_h", h->covered_h,
				  "busy", dist_json(&h->busy), "below_share", h->below, "in_share", h->in,
				  "above_share", h->above, "working_h", h->work_h, "working_above_share",
				  h->work_above, "peak_p95", num(h->peak_p95), "failover_p95",
				  num(h->failover_p95), "peak_room", h->peak_room, "failover_room",
				  h->failover_room, "verdict", h->verdict, "hour_mean",
				  hours_json(h->hour_mean)));
	}
	json_object_set_new(root, "hosts", hosts);

	json_t *gpus = json_array();
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		json_t *cls = json_object();
		for (int k = 0; k < DIAG_CLASS_COUNT; k++)
			json_object_set_new(cls, diag_class_name((enum diag_class)k), json_real(x->class_h[k]));
		json_object_set_new(cls, "none", json_real(x->class_none_h));
		json_t *hist = json_array();
		for (int k = 0; k < REPORT_HIST_BINS; k++)
			json_array_append_new(hist, json_real(x->hist[k]));
		json_t *g = json_pack(
			"{s:s,s:s,s:s,s:s,s:b,s:b,s:s,s:I,s:I,s:f,s:f,s:f,s:f}", "host", x->host, "gpu",
			x->gpu, "uuid", x->uuid, "model", x->model, "gpm", x->has_gpm, "tensor_present",
			x->has_tensor, "busy_metric", x->busy_metric, "first_s",
			(json_int_t)(x->first_ms / 1000), "last_s", (json_int_t)(x->last_ms / 1000),
			"covered_h", x->covered_h, "gap_h", x->gap_h, "raw_h", x->raw_h, "rollup_h",
			x->rollup_h);
		json_object_set_new(g, "read_raw_h", json_real(x->read_raw_h));
		json_object_set_new(g, "busy", dist_json(&x->busy));
		json_object_set_new(g, "sm_active", dist_json(&x->sm));
		json_object_set_new(g, "tensor_active", dist_json(&x->tensor));
		json_object_set_new(g, "utilization", dist_json(&x->util));
		json_object_set_new(g, "idle_h", json_real(x->idle_h));
		json_object_set_new(g, "idle_outside_working_hours_h", json_real(x->idle_off_h));
		json_object_set_new(g, "allocated_idle_h", json_real(x->alloc_idle_h));
		json_object_set_new(g, "busy_h", json_real(x->busy_h));
		json_object_set_new(g, "memory_high_bytes", json_real(x->mem_high_bytes));
		json_object_set_new(g, "health_score_min",
				    isfinite(x->health_min) ? json_real(x->health_min) : json_null());
		json_object_set_new(g, "drain_reason",
				    x->drain_reason[0] ? json_string(x->drain_reason) : json_null());
		json_object_set_new(g, "memory_high_s", json_integer(x->mem_high_ms / 1000));
		json_object_set_new(g, "memory_total_bytes", json_real(x->mem_total_bytes));
		json_object_set_new(g, "busy_line_crossings", json_integer(x->crossings));
		json_object_set_new(g, "above_busy_line_h", json_real(x->above_h));
		json_object_set_new(g, "longest_above_busy_line_h", json_real(x->longest_above_h));
		json_object_set_new(g, "bottleneck_h", cls);
		json_object_set_new(g, "busy_histogram", hist);
		json_object_set_new(g, "hour_mean", hours_json(x->hour_mean));
		json_object_set_new(g, "per_process_series", json_boolean(x->has_procs));
		json_object_set_new(g, "replaced_by", x->replaced_by >= 0
							      ? json_string(r->gpus[x->replaced_by].uuid)
							      : json_null());
		json_object_set_new(g, "replaces", x->replaces >= 0
							   ? json_string(r->gpus[x->replaces].uuid)
							   : json_null());
		json_array_append_new(gpus, g);
	}
	json_object_set_new(root, "gpus", gpus);

	json_t *models = json_array();
	for (size_t i = 0; i < r->nmodels; i++) {
		const struct report_model *m = &r->models[i];
		json_array_append_new(
			models, json_pack("{s:s,s:s,s:I,s:o,s:o,s:f,s:f,s:f,s:f,s:f,s:b}", "host",
					  m->host, "model", m->model, "gpus", (json_int_t)m->ngpus, "busy",
					  dist_json(&m->busy), "tensor_active", dist_json(&m->tensor),
					  "covered_h", m->covered_h, "idle_h", m->idle_h,
					  "allocated_idle_h", m->alloc_idle_h, "memory_high_bytes",
					  m->mem_high_bytes, "memory_total_bytes", m->mem_total_bytes,
					  "some_without_gpm", m->any_no_gpm));
	}
	json_object_set_new(root, "models", models);

	json_t *procs = json_array();
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct report_proc *p = &r->procs[i];
		json_array_append_new(
			procs, json_pack("{s:s,s:s,s:s,s:s,s:s,s:f,s:f,s:f,s:f}", "host", p->host, "gpu",
					 p->gpu, "uuid", p->uuid, "pid", p->pid, "comm", p->comm,
					 "memory_high_bytes", p->mem_high_bytes, "memory_total_bytes",
					 p->mem_total_bytes, "held_h", p->seen_h, "idle_held_h",
					 p->idle_held_h));
		json_object_set_new(json_array_get(procs, json_array_size(procs) - 1), "kernel_seconds",
				    p->traced ? json_real(p->kernel_s) : json_null());
	}
	json_object_set_new(root, "processes", procs);
	json_object_set_new(root, "processes_dropped", json_integer((json_int_t)r->procs_dropped));
	json_t *pods = json_array();
	for (size_t i = 0; i < r->npods; i++) {
		const struct report_pod *p = &r->pods[i];
		json_array_append_new(pods, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:f,s:f}", "host",
						      p->host, "gpu", p->gpu, "uuid", p->uuid, "pod",
						      p->pod, "namespace", p->namespace_, "job", p->job,
						      "held_h", p->held_h, "allocated_idle_h", p->idle_h));
	}
	json_object_set_new(root, "pods", pods);
	json_object_set_new(root, "pods_dropped", json_integer((json_int_t)r->pods_dropped));

	json_t *recs = json_array();
	for (size_t i = 0; i < r->nrecs; i++)
		json_array_append_new(recs, json_pack("{s:s,s:s}", "kind", r->recs[i].kind, "text",
						      r->recs[i].text));
	json_object_set_new(root, "recommendations", recs);
	int rc = json_dumpf(root, out, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) == 0 ? 0 : GPULSE_EIO;
	json_decref(root);
	fputc('\n', out);
	return rc || ferror(out) ? GPULSE_EIO : 0;
}

/* ---- HTML ---- */

static void esc(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		default:
			if ((unsigned char)*s < 0x20)
				fputc('?', out);
			else
				fputc(*s, out);
		}
	}
}

#define CW 720   /* chart width */
#define LM 150   /* left margin for labels */

static void svg_open(FILE *out, const char *id, int h, const char *title)
{
	fputs("<figure><h3>", out);
	esc(out, title);
	fputs("</h3>\n", out);
	fprintf(out, "<svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"",
		id, CW, h, CW, h);
	esc(out, title);
	fputs("\"><title>", out);
	esc(out, title);
	fputs("</title>\n", out);
}

static void svg_close(FILE *out, const char *caption)
{
	fputs("</svg><figcaption>", out);
	esc(out, caption);
	fputs("</figcaption></figure>\n", out);
}

static void axis_pct(FILE *out, int x0, int x1, int y)
{
	for (int p = 0; p <= 100; p += 25) {
		double x = x0 + (x1 - x0) * p / 100.0;
		fprintf(out, "<text class=\"ax\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d%%</text>\n", x, y, p);
	}
}

/* A chart of one row per GPU: each row starts with the GPU's name at
 * the left margin, then what `row` draws; `foot` draws below the rows
 * (axis, legend). The four per-GPU charts differ only in those. */
struct gpu_rows {
	const char *id, *title, *caption;
	int rowh;                   /* row height */
	int below;                  /* room under the rows */
	int label_dy;               /* the name's baseline, from the row's top */
	bool busy_metric;           /* the name says which metric is busy: (SM) or (util) */
	void (*row)(const struct report *r, FILE *out, const struct report_gpu *x, int y,
		    double scale, const struct gpu_rows *c);
	void (*foot)(const struct report *r, FILE *out, int h, const struct gpu_rows *c);
	int x0, w;                  /* the plot's left edge and width */
	bool by_covered;            /* bars scaled to the largest GPU's covered hours */
};

static void chart_gpu_rows(const struct report *r, FILE *out, const struct gpu_rows *c)
{
	double mx = 0;
	for (size_t i = 0; c->by_covered && i < r->ngpus; i++)
		mx = r->gpus[i].covered_h > mx ? r->gpus[i].covered_h : mx;
	int h = 30 + c->rowh * (int)r->ngpus + c->below;
	svg_open(out, c->id, h, c->title);
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		int y = 20 + c->rowh * (int)i;
		char g[160];
		fprintf(out, "<text class=\"lb\" x=\"%d\" y=\"%d\" text-anchor=\"end\">GPU ", LM - 8,
			y + c->label_dy);
		esc(out, gname(x, g, sizeof g));
		if (c->busy_metric)
			fprintf(out, " (%s)", x->has_gpm ? "SM" : "util");
		fputs("</text>\n", out);
		c->row(r, out, x, y, mx, c);
	}
	if (c->foot)
		c->foot(r, out, h, c);
	svg_close(out, c->caption);
}

/* busy distribution: per GPU, a row of 10 histogram bars */
static void hist_row(const struct report *r, FILE *out, const struct report_gpu *x, int y,
		     double scale, const struct gpu_rows *c)
{
	(void)scale;
	int bw = c->w / REPORT_HIST_BINS;
	double mx = 0;
	for (int k = 0; k < REPORT_HIST_BINS; k++)
		mx = x->hist[k] > mx ? x->hist[k] : mx;
	for (int k = 0; k < REPORT_HIST_BINS; k++) {
		double bh = mx > 0 ? x->hist[k] / mx * (c->rowh - 6) : 0;
		fprintf(out, "<rect class=\"%s\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\"><title>%d-%d%%: %.1f%% of the time</title></rect>\n",
			k >= (int)(r->o.busy_line * 10) ? "c3" : k >= 1 ? "c1" : "c2", c->x0 + k * bw + 1,
			y + (c->rowh - 2) - bh, bw - 2, bh, k * 10, k * 10 + 10, x->hist[k] * 100);
	}
}

static void hist_foot(const struct report *r, FILE *out, int h, const struct gpu_rows *c)
{
	(void)r;
	axis_pct(out, c->x0, c->x0 + c->w / REPORT_HIST_BINS * REPORT_HIST_BINS, h - 6);
}


#define BAND_H 260  /* the two charts of mean busy against the band: height */
#define BAND_TOP 20 /* where 100% is */
#define BAND_X0 50
#define BAND_X1 (CW - 20)

/* Open a chart of mean busy over [BAND_X0, BAND_X1], 0 at `bottom`: the
 * target band, the busy line and the percent axis. Its height per 100%. */
static double band_chart_open(const struct report *r, FILE *out, const char *id,
			      const char *title, int bottom)
{
	svg_open(out, id, BAND_H, title);
	int x0 = BAND_X0, x1 = BAND_X1;
	double sy = bottom - BAND_TOP;
	fprintf(out, "<rect class=\"band\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\"/>\n", x0,
		bottom - r->o.band_hi * sy, x1 - x0, (r->o.band_hi - r->o.band_lo) * sy);
	fprintf(out, "<line class=\"line85\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>\n", x0, x1,
		bottom - r->o.busy_line * sy, bottom - r->o.busy_line * sy);
	for (int p = 0; p <= 100; p += 25)
		fprintf(out, "<text class=\"ax\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n", x0 - 4,
			bottom - p / 100.0 * sy + 4, p);
	return sy;
}

/* daily profile by hour, per host, with the band */
static void chart_hours(const struct report *r, FILE *out)
{
	int bottom = 230, x0 = BAND_X0, x1 = BAND_X1;
	double sy = band_chart_open(r, out, "chart-hours", "Daily profile: mean busy by hour of day (UTC)", bottom);
	for (int hr = 0; hr < 24; hr += 3)
		fprintf(out, "<text class=\"ax\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%02d:00</text>\n",
			x0 + (x1 - x0) * (hr + 0.5) / 24.0, bottom + 18, hr);
	/* A path broken at the hours without data (a line across them would
	 * invent their values), and a dot on every hour that has data: a
	 * history shorter than two hours has one point, which a line alone
	 * does not draw at all. */
	for (size_t i = 0; i < r->nhosts; i++) {
		const struct report_host *ho = &r->hosts[i];
		fprintf(out, "<path class=\"l%zu\" d=\"", i % 4);
		for (int hr = 0; hr < 24; hr++)
			if (isfinite(ho->hour_mean[hr]))
				fprintf(out, "%s%.1f,%.1f ",
					hr > 0 && isfinite(ho->hour_mean[hr - 1]) ? "L" : "M",
					x0 + (x1 - x0) * (hr + 0.5) / 24.0, bottom - ho->hour_mean[hr] * sy);
		fputs("\"/>\n", out);
		for (int hr = 0; hr < 24; hr++)
			if (isfinite(ho->hour_mean[hr]))
				fprintf(out, "<circle class=\"d%zu\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\">"
					     "<title>%02d:00 UTC: mean busy %.0f%%</title></circle>\n",
					i % 4, x0 + (x1 - x0) * (hr + 0.5) / 24.0,
					bottom - ho->hour_mean[hr] * sy, hr, ho->hour_mean[hr] * 100);
	}
	svg_close(out, "Shaded: the target band; dashed: the busy line. One line per host; "
		       "a dot per hour of day with data.");
}

/* idle vs allocated-idle hours per GPU */
static void idle_row(const struct report *r, FILE *out, const struct report_gpu *x, int y,
		     double scale, const struct gpu_rows *c)
{
	(void)r;
	double seg[3] = {x->busy_h, x->idle_h - x->alloc_idle_h, x->alloc_idle_h};
	const char *cls[3] = {"c1", "c2", "c3"}, *what[3] = {"busy", "idle", "allocated but idle"};
	double at = c->x0;
	for (int k = 0; k < 3; k++) {
		double bw = scale > 0 ? seg[k] / scale * c->w : 0;
		fprintf(out, "<rect class=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"><title>%s: %s</title></rect>\n",
			cls[k], at, y + 3, bw, c->rowh - 6, what[k], dur(seg[k]));
		at += bw;
	}
	fprintf(out, "<text class=\"ax\" x=\"%.1f\" y=\"%d\">%s</text>\n", at + 4, y + 15, dur(x->covered_h));
}

static void idle_foot(const struct report *r, FILE *out, int h, const struct gpu_rows *c)
{
	(void)r;
	int x0 = c->x0;
	fprintf(out, "<rect class=\"c1\" x=\"%d\" y=\"%d\" width=\"10\" height=\"10\"/><text class=\"ax\" x=\"%d\" y=\"%d\">busy</text>"
		     "<rect class=\"c2\" x=\"%d\" y=\"%d\" width=\"10\" height=\"10\"/><text class=\"ax\" x=\"%d\" y=\"%d\">idle</text>"
		     "<rect class=\"c3\" x=\"%d\" y=\"%d\" width=\"10\" height=\"10\"/><text class=\"ax\" x=\"%d\" y=\"%d\">allocated but idle</text>\n",
		x0, h - 20, x0 + 14, h - 11, x0 + 70, h - 20, x0 + 84, h - 11, x0 + 140, h - 20, x0 + 154, h - 11);
}


static void memory_row(const struct report *r, FILE *out, const struct report_gpu *x, int y,
		       double scale, const struct gpu_rows *c)
{
	(void)scale;
	(void)r;
	int x0 = c->x0, w = c->w, rowh = c->rowh;
	double share = x->mem_total_bytes > 0 ? x->mem_high_bytes / x->mem_total_bytes : 0;
	fprintf(out, "<rect class=\"track\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", x0, y + 3, w, rowh - 6);
	fprintf(out, "<rect class=\"%s\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"><title>%.1f of %.1f GiB</title></rect>\n",
		share >= 0.85 ? "c3" : "c1", x0, y + 3, share * w, rowh - 6, x->mem_high_bytes / GIB,
		x->mem_total_bytes / GIB);
	fprintf(out, "<text class=\"ax\" x=\"%d\" y=\"%d\">%.1f/%.0f GiB</text>\n", x0 + w + 4, y + 15,
		x->mem_high_bytes / GIB, x->mem_total_bytes / GIB);
}

static void memory_foot(const struct report *r, FILE *out, int h, const struct gpu_rows *c)
{
	(void)r;
	fprintf(out, "<line class=\"line85\" x1=\"%.1f\" x2=\"%.1f\" y1=\"14\" y2=\"%d\"/>\n",
		c->x0 + 0.85 * c->w, c->x0 + 0.85 * c->w, h - 24);
	axis_pct(out, c->x0, c->x0 + c->w, h - 6);
}

/* the band over time: each host's mean busy, averaged per bucket */
static void chart_band(const struct report *r, FILE *out)
{
	int bottom = 220, x0 = BAND_X0, x1 = BAND_X1;
	double sy = band_chart_open(r, out, "chart-band", "Mean busy over the range against the target band", bottom);
	char t0[40], t1[40];
	fmt_time(t0, sizeof t0, r->start_ms);
	fmt_time(t1, sizeof t1, r->end_ms);
	fprintf(out, "<text class=\"ax\" x=\"%d\" y=\"%d\">%s</text><text class=\"ax\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n",
		x0, bottom + 18, t0, x1, bottom + 18, t1);
	size_t buckets = 360;
	if (buckets > r->nslots)
		buckets = r->nslots;
	for (size_t i = 0; i < r->nhosts; i++) {
		const struct report_host *ho = &r->hosts[i];
		fprintf(out, "<polyline class=\"l%zu\" points=\"", i % 4);
		for (size_t bkt = 0; bkt < buckets; bkt++) {
			size_t from = bkt * r->nslots / buckets, to = (bkt + 1) * r->nslots / buckets;
			double sum = 0;
			size_t n = 0;
			for (size_t k = from; k < to; k++)
				if (isfinite(ho->s_mean[k])) {
					sum += ho->s_mean[k];
					n++;
				}
			if (n)
				fprintf(out, "%.1f,%.1f ", x0 + (x1 - x0) * (bkt + 0.5) / (double)buckets,
					bottom - sum / (double)n * sy);
		}
		fputs("\"/>\n", out);
	}
	svg_close(out, "Shaded: the target band; dashed: the busy line. Gaps in the data are left out of each point's mean.");
}

static void classes_row(const struct report *r, FILE *out, const struct report_gpu *x, int y,
			double scale, const struct gpu_rows *c)
{
	(void)scale;
	(void)r;
	double total = x->class_none_h;
	for (int k = 0; k < DIAG_CLASS_COUNT; k++)
		total += x->class_h[k];
	double at = c->x0;
	for (int k = 0; k <= DIAG_CLASS_COUNT; k++) {
		double v = k < DIAG_CLASS_COUNT ? x->class_h[k] : x->class_none_h;
		double bw = total > 0 ? v / total * c->w : 0;
		if (bw <= 0)
			continue;
		fprintf(out, "<rect class=\"k%d\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"><title>%s: %s</title></rect>\n",
			k, at, y + 3, bw, c->rowh - 6,
			k < DIAG_CLASS_COUNT ? diag_class_name((enum diag_class)k) : "no verdict", dur(v));
		at += bw;
	}
}

static void classes_foot(const struct report *r, FILE *out, int h, const struct gpu_rows *c)
{
	(void)r;
	int lx = c->x0;
	for (int k = 0; k <= DIAG_CLASS_COUNT; k++) {
		const char *n = k < DIAG_CLASS_COUNT ? diag_class_name((enum diag_class)k) : "no verdict";
		fprintf(out, "<rect class=\"k%d\" x=\"%d\" y=\"%d\" width=\"10\" height=\"10\"/><text class=\"ax\" x=\"%d\" y=\"%d\">%s</text>\n",
			k, lx, h - 20, lx + 13, h - 11, n);
		lx += 14 + (int)strlen(n) * 6 + 8;
	}
}


/* The per-GPU charts, in the page's order. */
static const struct gpu_rows gpu_charts[] = {
	{.id = "chart-distribution",
	 .title = "Busy distribution per GPU (share of time in each 10% band)",
	 .caption = "Each row is one GPU; bar heights are scaled to the row's largest bin. Orange bins are at or above the busy line.",
	 .rowh = 34, .below = 20, .label_dy = 34 / 2 + 4, .busy_metric = true,
	 .row = hist_row, .foot = hist_foot, .x0 = LM, .w = CW - LM - 10},
	{.id = "chart-idle", .title = "Busy, idle and allocated-but-idle GPU-hours per GPU",
	 .caption = "Hours with data; allocated but idle: idle while processes held memory.",
	 .rowh = 24, .below = 30, .label_dy = 15, .row = idle_row, .foot = idle_foot,
	 .x0 = LM, .w = CW - LM - 60, .by_covered = true},
	{.id = "chart-memory", .title = "Memory high-water mark per GPU (share of device memory)",
	 .caption = "Dashed: 85% of device memory (the memory-pressure line).",
	 .rowh = 24, .below = 20, .label_dy = 15, .row = memory_row, .foot = memory_foot,
	 .x0 = LM, .w = CW - LM - 90},
	{.id = "chart-bottlenecks", .title = "Bottleneck classes per GPU (stored diagnosis), hours",
	 .caption = "Each slot counts for the class most of its stored diagnosis windows had.",
	 .rowh = 24, .below = 30, .label_dy = 15, .row = classes_row, .foot = classes_foot,
	 .x0 = LM, .w = CW - LM - 20},
};

static const char css[] =
	":root{--fg:#1b1f24;--bg:#fff;--mut:#57606a;--grid:#d0d7de;--c1:#2f6fb5;--c2:#9aa5b1;--c3:#d9730d;"
	"--band:rgba(46,160,67,.18);--k0:#9aa5b1;--k1:#2f6fb5;--k2:#8250df;--k3:#bf3989;--k4:#d9730d;--k5:#1a7f37;--k6:#6e7781;--k7:#e6e9ec}\n"
	"@media (prefers-color-scheme: dark){:root{--fg:#e6edf3;--bg:#0d1117;--mut:#9198a1;--grid:#30363d;--c1:#58a6ff;"
	"--c2:#6e7681;--c3:#f0883e;--band:rgba(63,185,80,.22);--k7:#30363d}}\n"
	"body{font:14px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg);margin:2em auto;max-width:960px;padding:0 1em}\n"
	"h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid var(--grid)}\n"
	"table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}th,td{padding:3px 6px;border-bottom:1px solid var(--grid);text-align:right}"
	"th:first-child,td:first-child,td.t{text-align:left}\n"
	".mut{color:var(--mut)}.note{border-left:3px solid var(--c3);padding:2px 8px;margin:4px 0}\n"
	".rec{border-left:3px solid var(--c1);padding:2px 8px;margin:4px 0}\n"
	"svg.chart{max-width:100%;height:auto}svg text{fill:var(--fg);font-size:11px}svg .ax{fill:var(--mut)}\n"
	".c1{fill:var(--c1)}.c2{fill:var(--c2)}.c3{fill:var(--c3)}.track{fill:var(--grid)}.band{fill:var(--band)}\n"
	".line85{stroke:var(--c3);stroke-dasharray:5 4;stroke-width:1.5}\n"
	"polyline,path.l0,path.l1,path.l2,path.l3{fill:none;stroke-width:2}.l0{stroke:var(--c1)}.l1{stroke:var(--k2)}.l2{stroke:var(--k5)}.l3{stroke:var(--k3)}\n"
	".d0{fill:var(--c1)}.d1{fill:var(--k2)}.d2{fill:var(--k5)}.d3{fill:var(--k3)}\n"
	".k0{fill:var(--k0)}.k1{fill:var(--k1)}.k2{fill:var(--k2)}.k3{fill:var(--k3)}.k4{fill:var(--k4)}.k5{fill:var(--k5)}.k6{fill:var(--k6)}.k7{fill:var(--k7)}\n"
	"figure{margin:1em 0;break-inside:avoid}h3{font-size:1em;margin:.2em 0}figcaption{color:var(--mut);font-size:12px}\n"
	"@media print{:root{--fg:#000;--bg:#fff;--mut:#333;--grid:#bbb}body{margin:0;max-width:none;font-size:11px}"
	"h2{break-after:avoid}table,figure,.rec{break-inside:avoid}}\n";

int report_write_html(const struct report *r, FILE *out)
{
	char t0[40], t1[40], a[64], b[64], c[64], d[64];
	fmt_time(t0, sizeof t0, r->start_ms);
	fmt_time(t1, sizeof t1, r->end_ms);
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<meta name=\"color-scheme\" content=\"light dark\">\n<title>gpulse capacity report</title>\n<style>\n",
	      out);
	fputs(css, out);
	fputs("</style></head><body>\n<h1>GPU capacity report</h1>\n", out);
	fprintf(out, "<p class=\"mut\">%s &ndash; %s, %zu slots of %lld s. Source: ", t0, t1, r->nslots,
		(long long)(r->o.step_ms / 1000));
	esc(out, r->source_kind);
	fputc(' ', out);
	esc(out, r->source_where);
	fputs(".<br>Resolution: ", out);
	esc(out, r->resolution);
	fprintf(out, ".<br>Target band %.0f&ndash;%.0f%% mean busy; busy line %.0f%%; idle below %.0f%% utilization. "
		     "Busy is SM activity, or utilization on GPUs without GPM.</p>\n",
		r->o.band_lo * 100, r->o.band_hi * 100, r->o.busy_line * 100, r->o.idle_ratio * 100);
	for (size_t i = 0; i < r->nnotes; i++) {
		fputs("<p class=\"note\">", out);
		esc(out, r->notes[i]);
		fputs("</p>\n", out);
	}
	fputs("<h2>Recommendations</h2>\n", out);
	if (!r->enough_history)
		fputs("<p class=\"rec\">None: too little history (see the note above).</p>\n", out);
	else if (r->nrecs == 0)
		fputs("<p class=\"rec\">None.</p>\n", out);
	for (size_t i = 0; i < r->nrecs; i++) {
		fputs("<p class=\"rec\"><b>", out);
		esc(out, r->recs[i].kind);
		fputs("</b>: ", out);
		esc(out, r->recs[i].text);
		fputs("</p>\n", out);
	}
	if (r->ngpus > 0) {
		fputs("<h2>Hosts and the band</h2>\n<table><tr><th>host</th><th>GPUs</th><th>time</th><th>mean busy</th><th>p95</th>"
		      "<th>below</th><th>in band</th><th>above</th><th>working hours above</th><th>failover p95</th><th>verdict</th></tr>\n",
		      out);
		for (size_t i = 0; i < r->nhosts; i++) {
			const struct report_host *h = &r->hosts[i];
			pct(a, sizeof a, h->busy.mean);
			pct(b, sizeof b, h->busy.p95);
			pct(c, sizeof c, h->failover_p95);
			fputs("<tr><td>", out);
			esc(out, h->host[0] ? h->host : "this host");
			fprintf(out, "</td><td>%zu</td><td>%s</td><td>%s</td><td>%s</td><td>%.0f%%</td><td>%.0f%%</td><td>%.0f%%</td><td>%.0f%%</td><td>%s</td><td class=\"t\">%s</td></tr>\n",
				h->ngpus, dur(h->covered_h), a, b, h->below * 100, h->in * 100, h->above * 100,
				h->work_above * 100, c, h->verdict);
		}
		fputs("</table>\n", out);
		chart_band(r, out);
		chart_hours(r, out);
		fputs("<h2>GPUs</h2>\n<table><tr><th>GPU</th><th>model</th><th>busy</th><th>p50</th><th>p95</th><th>p99</th><th>tensor p95</th>"
		      "<th>time</th><th>idle</th><th>alloc-idle</th><th>memory high</th><th>85% crossings</th><th>above 85%</th><th>health (lowest)</th></tr>\n",
		      out);
		for (size_t i = 0; i < r->ngpus; i++) {
			const struct report_gpu *x = &r->gpus[i];
			char g[160];
			pct(a, sizeof a, x->busy.p50);
			pct(b, sizeof b, x->busy.p95);
			pct(c, sizeof c, x->busy.p99);
			pct(d, sizeof d, x->tensor.p95);
			fputs("<tr><td title=\"", out);
			esc(out, x->uuid);
			fputs("\">", out);
			esc(out, gname(x, g, sizeof g));
			if (x->replaced_by >= 0)
				fputs(" (replaced)", out);
			if (x->replaces >= 0)
				fputs(" (new)", out);
			fputs("</td><td class=\"t\">", out);
			esc(out, x->model);
			fprintf(out, "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
				     "<td>%.1f / %.0f GiB</td><td>%u</td><td>%s</td>",
				x->has_gpm ? "SM" : "util", a, b, c, d, dur(x->covered_h), dur(x->idle_h),
				dur(x->alloc_idle_h), x->mem_high_bytes / GIB, x->mem_total_bytes / GIB,
				x->crossings, dur(x->above_h));
			if (isfinite(x->health_min))
				fprintf(out, "<td>%.0f", x->health_min);
			else
				fputs("<td>-", out);
			if (x->drain_reason[0]) {
				fputs(" (drain: ", out);
				esc(out, x->drain_reason);
				fputs(")", out);
			}
			fputs("</td></tr>\n", out);
		}
		fputs("</table>\n", out);
		for (size_t k = 0; k < sizeof gpu_charts / sizeof gpu_charts[0]; k++)
			chart_gpu_rows(r, out, &gpu_charts[k]);
		fputs("<h2>Models</h2>\n<table><tr><th>model</th><th>GPUs</th><th>busy p50</th><th>p95</th><th>p99</th><th>tensor p95</th>"
		      "<th>GPU-time</th><th>idle</th><th>alloc-idle</th><th>memory high</th></tr>\n",
		      out);
		for (size_t i = 0; i < r->nmodels; i++) {
			const struct report_model *m = &r->models[i];
			pct(a, sizeof a, m->busy.p50);
			pct(b, sizeof b, m->busy.p95);
			pct(c, sizeof c, m->busy.p99);
			pct(d, sizeof d, m->tensor.p95);
			fputs("<tr><td>", out);
			if (m->host[0]) {
				esc(out, m->host);
				fputc(' ', out);
			}
			esc(out, m->model);
			fprintf(out, "</td><td>%zu</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.1f / %.0f GiB</td></tr>\n",
				m->ngpus, a, b, c, d, dur(m->covered_h), dur(m->idle_h), dur(m->alloc_idle_h),
				m->mem_high_bytes / GIB, m->mem_total_bytes / GIB);
		}
		fputs("</table>\n", out);
	}
	if (r->nprocs) {
		fputs("<h2>Processes</h2>\n<table><tr><th>pid</th><th>command</th><th>GPU</th><th>memory high</th><th>time holding memory</th>"
		      "<th>of them on an idle GPU</th><th>kernel GPU time</th></tr>\n",
		      out);
		for (size_t i = 0; i < r->nprocs; i++) {
			const struct report_proc *p = &r->procs[i];
			fputs("<tr><td>", out);
			esc(out, p->pid);
			fputs("</td><td class=\"t\">", out);
			esc(out, p->comm);
			fputs("</td><td>", out);
			if (p->host[0]) {
				esc(out, p->host);
				fputc('/', out);
			}
			esc(out, p->gpu);
			fprintf(out, "</td><td>%.2f GiB</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				p->mem_high_bytes / GIB, dur(p->seen_h), dur(p->idle_held_h),
				p->traced ? dur(p->kernel_s / 3600) : "-");
		}
		fputs("</table>\n", out);
	}
	if (r->npods) {
		fputs("<h2>Pods: allocated but idle</h2>\n<p class=\"mut\">Time each pod (or Slurm job) held a GPU, and how much of it its part of the GPU's SM activity stayed under the idle line (gpulse_workload_allocated_idle).</p>\n"
		      "<table><tr><th>pod or job</th><th>GPU</th><th>time holding the GPU</th><th>of it allocated but idle</th></tr>\n",
		      out);
		for (size_t i = 0; i < r->npods; i++) {
			const struct report_pod *p = &r->pods[i];
			fputs("<tr><td class=\"t\">", out);
			if (p->job[0]) {
				fputs("job ", out);
				esc(out, p->job);
			} else {
				esc(out, p->namespace_);
				fputc('/', out);
				esc(out, p->pod);
			}
			fputs("</td><td>", out);
			if (p->host[0]) {
				esc(out, p->host);
				fputc('/', out);
			}
			esc(out, p->gpu);
			fprintf(out, "</td><td>%s</td>", dur(p->held_h));
			fprintf(out, "<td>%s (%.0f%%)</td></tr>\n", dur(p->idle_h),
				p->held_h > 0 ? 100 * p->idle_h / p->held_h : 0);
		}
		fputs("</table>\n", out);
	}
	fputs("<p class=\"mut\">Generated by gpulse report capacity. Definitions of every figure: docs/internals/report.md.</p>\n</body></html>\n",
	      out);
	return ferror(out) ? GPULSE_EIO : 0;
}
