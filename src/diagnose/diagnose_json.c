/* Diagnosis results as JSON; see diagnose_json.h. Written with the buf
 * helpers rather than a jansson tree: the shape is fixed, and the core
 * library (which the daemon links) does not otherwise need jansson. */
#include "diagnose/diagnose_json.h"

#include <math.h>
#include <string.h>

#include "common/status.h"

/* A number, or null when it is not finite (JSON has no NaN). */
static int num(struct buf *b, double v)
{
	return isfinite(v) ? buf_put_double(b, v) : buf_puts(b, "null");
}

/* ,"key":value pieces. `first` suppresses the comma. */
static void key(struct buf *b, const char *k, int first)
{
	if (!first)
		buf_putc(b, ',');
	buf_put_json_string(b, k);
	buf_putc(b, ':');
}

static void knum(struct buf *b, const char *k, double v, int first)
{
	key(b, k, first);
	num(b, v);
}

static void kstr(struct buf *b, const char *k, const char *v, int first)
{
	key(b, k, first);
	if (v)
		buf_put_json_string(b, v);
	else
		buf_puts(b, "null");
}

static void headroom(struct buf *b, const struct diag_headroom *h, const char *text)
{
	buf_putc(b, '{');
	knum(b, "sm_active", h->sm_active, 1);
	knum(b, "tensor_active", h->tensor_active, 0);
	knum(b, "tensor_fraction_of_peak", h->tensor, 0);
	kstr(b, "pipe", h->pipe_name, 0);
	knum(b, "pipe_active", h->pipe_active, 0);
	knum(b, "pipe_fraction_of_peak", h->pipe, 0);
	knum(b, "sm_clock_ratio", h->clock_ratio, 0);
	knum(b, "dram_fraction_of_peak", h->dram, 0);
	knum(b, "dram_bytes_per_second", h->dram_bytes_per_s, 0);
	knum(b, "pcie_fraction_of_peak", h->pcie, 0);
	knum(b, "pcie_tx_bytes_per_second", h->pcie_tx_bytes_per_s, 0);
	knum(b, "pcie_rx_bytes_per_second", h->pcie_rx_bytes_per_s, 0);
	knum(b, "memory_used_ratio", h->memory_used, 0);
	knum(b, "busy_ratio", h->busy, 0);
	kstr(b, "bound_resource", h->bound_resource, 0);
	knum(b, "max_speedup", h->max_speedup, 0);
	if (text)
		kstr(b, "text", text, 0);
	buf_putc(b, '}');
}

int diag_json_window(struct buf *b, const struct diag_window *w)
{
	buf_putc(b, '{');
	knum(b, "start_s", w->start_s, 1);
	knum(b, "end_s", w->end_s, 0);
	key(b, "gpu", 0);
	buf_printf(b, "%d", w->gpu);
	kstr(b, "bottleneck", diag_class_name(w->bottleneck), 0);
	key(b, "findings", 0);
	buf_putc(b, '[');
	int first = 1;
	for (int f = 0; f < DIAG_FINDING_COUNT; f++) {
		if (!(w->findings & DIAG_FINDING_BIT(f)))
			continue;
		if (!first)
			buf_putc(b, ',');
		buf_put_json_string(b, diag_finding_name((enum diag_finding)f));
		first = 0;
	}
	buf_putc(b, ']');
	key(b, "evidence", 0);
	buf_putc(b, '[');
	for (int i = 0; i < w->nevidence; i++) {
		const struct diag_evidence *e = &w->evidence[i];
		if (i)
			buf_putc(b, ',');
		buf_putc(b, '{');
		kstr(b, "name", e->name, 1);
		kstr(b, "stat", e->stat, 0);
		knum(b, "value", e->value, 0);
		kstr(b, "unit", e->unit, 0);
		if (e->op[0]) {
			kstr(b, "op", e->op, 0);
			knum(b, "threshold", e->threshold, 0);
			key(b, "holds", 0);
			buf_puts(b, e->holds ? "true" : "false");
		}
		if (isfinite(e->peak))
			knum(b, "peak", e->peak, 0);
		buf_putc(b, '}');
	}
	buf_putc(b, ']');
	kstr(b, "advice", w->advice, 0);
	kstr(b, "rule", w->rule, 0);
	knum(b, "confidence", w->confidence, 0);
	key(b, "samples", 0);
	if (w->nverdicts) {
		/* Stored verdicts keep no sample count: unknown, and what
		 * the window does hold instead. */
		buf_puts(b, "null");
		key(b, "stored_windows", 0);
		buf_printf(b, "%zu", w->nverdicts);
	} else {
		buf_printf(b, "%zu", w->nsamples);
	}
	if (w->span_note) {
		key(b, "judged_span", 0);
		buf_putc(b, '{');
		knum(b, "start_s", w->judged_start_s, 1);
		knum(b, "end_s", w->judged_end_s, 0);
		key(b, "samples", 0);
		buf_printf(b, "%zu", w->judged_samples);
		kstr(b, "note", w->span_note, 0);
		buf_putc(b, '}');
	}
	key(b, "headroom", 0);
	headroom(b, &w->headroom, w->headroom_text);
	key(b, "missing_evidence", 0);
	buf_putc(b, '[');
	first = 1;
	for (int m = 0; m < DIAG_MISSING_COUNT; m++) {
		if (!(w->missing & DIAG_MISSING_BIT(m)))
			continue;
		if (!first)
			buf_putc(b, ',');
		buf_putc(b, '{');
		kstr(b, "evidence", diag_missing_name((enum diag_missing)m), 1);
		kstr(b, "effect", diag_missing_effect((enum diag_missing)m), 0);
		buf_putc(b, '}');
		first = 0;
	}
	buf_putc(b, ']');
	kstr(b, "summary", w->brief, 0);
	buf_putc(b, '}');
	return b->failed ? GPULSE_ELIMIT : GPULSE_OK;
}

int diag_json_summary(struct buf *b, const struct diag_summary *s)
{
	buf_putc(b, '{');
	key(b, "gpu", 1);
	buf_printf(b, "%d", s->gpu);
	key(b, "windows", 0);
	buf_printf(b, "%zu", s->nwindows);
	knum(b, "seconds", s->seconds, 0);
	key(b, "class_share", 0);
	buf_putc(b, '{');
	for (int c = 0; c < DIAG_CLASS_COUNT; c++)
		knum(b, diag_class_name((enum diag_class)c),
		     s->seconds > 0 ? s->class_seconds[c] / s->seconds : 0, c == 0);
	buf_putc(b, '}');
	kstr(b, "top_class", diag_class_name(s->top_class), 0);
	key(b, "finding_windows", 0);
	buf_putc(b, '{');
	for (int f = 0; f < DIAG_FINDING_COUNT; f++) {
		key(b, diag_finding_name((enum diag_finding)f), f == 0);
		buf_printf(b, "%zu", s->finding_windows[f]);
	}
	buf_putc(b, '}');
	kstr(b, "top_finding",
	     s->top_finding >= 0 ? diag_finding_name((enum diag_finding)s->top_finding) : NULL, 0);
	key(b, "headroom", 0);
	headroom(b, &s->mean, NULL);
	key(b, "headroom_busy", 0);
	headroom(b, &s->busy_mean, NULL);
	buf_putc(b, '}');
	return b->failed ? GPULSE_ELIMIT : GPULSE_OK;
}

int diag_json_peaks(struct buf *b, int gpu, const struct gpu_peaks *p)
{
	buf_putc(b, '{');
	key(b, "gpu", 1);
	buf_printf(b, "%d", gpu);
	kstr(b, "model", p->model[0] ? p->model : NULL, 0);
	key(b, "sm_count", 0);
	if (p->sm_count > 0)
		buf_printf(b, "%d", p->sm_count);
	else
		buf_puts(b, "null");
	knum(b, "sm_clock_max_hertz", p->sm_clock_max_hz > 0 ? p->sm_clock_max_hz : NAN, 0);
	knum(b, "dram_bytes_per_second", p->dram_bytes_per_s > 0 ? p->dram_bytes_per_s : NAN, 0);
	knum(b, "pcie_bytes_per_second_per_direction",
	     p->pcie_bytes_per_s > 0 ? p->pcie_bytes_per_s : NAN, 0);
	knum(b, "pcie_generation", p->pcie_gen > 0 ? (double)p->pcie_gen : NAN, 0);
	knum(b, "pcie_width", p->pcie_width > 0 ? (double)p->pcie_width : NAN, 0);
	knum(b, "power_limit_watts", p->power_limit_w > 0 ? p->power_limit_w : NAN, 0);
	knum(b, "memory_total_bytes", p->mem_total_bytes > 0 ? p->mem_total_bytes : NAN, 0);
	key(b, "sources", 0);
	buf_putc(b, '{');
	kstr(b, "sm_count", p->sm_source, 1);
	kstr(b, "clocks", p->clock_source, 0);
	kstr(b, "dram", p->dram_source, 0);
	kstr(b, "pcie", p->pcie_source, 0);
	kstr(b, "power_limit", p->power_source, 0);
	kstr(b, "memory_total", p->mem_source, 0);
	buf_putc(b, '}');
	buf_putc(b, '}');
	return b->failed ? GPULSE_ELIMIT : GPULSE_OK;
}
