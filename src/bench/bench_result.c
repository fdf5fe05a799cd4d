/* The benchmark result's JSON form: written with the project's buffer
 * (exact number formatting), read with jansson and checked member by
 * member, since the text may come from another host (--compare) or a
 * damaged record. See bench_result.h. */
#include "bench/bench_result.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/status.h"
#include "common/str.h"

void bench_result_note(struct bench_result *r, const char *fmt, ...)
{
	if (r->nnotes >= BENCH_MAX_NOTES)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->notes[r->nnotes++], BENCH_TEXT_MAX, fmt, ap);
	va_end(ap);
}

struct bench_figure *bench_result_add(struct bench_result *r, const char *name,
				      const char *variant, const char *unit)
{
	if (r->nfig >= BENCH_MAX_FIGURES)
		return NULL;
	struct bench_figure *f = &r->fig[r->nfig++];
	memset(f, 0, sizeof *f);
	str_copy(f->name, sizeof f->name, name);
	str_copy(f->variant, sizeof f->variant, variant ? variant : "");
	str_copy(f->unit, sizeof f->unit, unit);
	str_copy(f->method, sizeof f->method, BENCH_METHOD_LEGACY);
	f->higher_is_better = true;
	return f;
}

void bench_result_skip(struct bench_result *r, const char *name, const char *variant,
		       const char *fmt, ...)
{
	if (r->nskip >= BENCH_MAX_FIGURES)
		return;
	struct bench_skip *s = &r->skip[r->nskip++];
	str_copy(s->name, sizeof s->name, name);
	str_copy(s->variant, sizeof s->variant, variant ? variant : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof s->why, fmt, ap);
	va_end(ap);
}

const struct bench_figure *bench_result_find(const struct bench_result *r, const char *name,
					     const char *variant)
{
	for (int i = 0; i < r->nfig; i++)
		if (strcmp(r->fig[i].name, name) == 0 &&
		    strcmp(r->fig[i].variant, variant ? variant : "") == 0)
			return &r->fig[i];
	return NULL;
}

/* ---- writing ---- */

static void put_key(struct buf *b, const char *k, bool *first)
{
	if (!*first)
		buf_putc(b, ',');
	*first = false;
	buf_put_json_string(b, k);
	buf_putc(b, ':');
}

static void put_str(struct buf *b, const char *k, const char *v, bool *first)
{
	put_key(b, k, first);
	buf_put_json_string(b, v);
}

static void put_num(struct buf *b, const char *k, double v, bool *first)
{
	put_key(b, k, first);
	if (isfinite(v))
		buf_put_double(b, v);
	else
		buf_puts(b, "null");
}

static void put_int(struct buf *b, const char *k, long long v, bool *first)
{
	put_key(b, k, first);
	buf_printf(b, "%lld", v);
}

static void put_bool(struct buf *b, const char *k, bool v, bool *first)
{
	put_key(b, k, first);
	buf_puts(b, v ? "true" : "false");
}

static void put_range(struct buf *b, const char *k, const struct bench_range *r, bool *first)
{
	if (!r->valid)
		return;
	put_key(b, k, first);
	bool f = true;
	buf_putc(b, '{');
	put_num(b, "min", r->min, &f);
	put_num(b, "mean", r->mean, &f);
	put_num(b, "max", r->max, &f);
	buf_putc(b, '}');
}

static void put_reasons(struct buf *b, uint64_t bits, bool *first)
{
	put_key(b, "throttle_reasons", first);
	buf_putc(b, '[');
	bool f = true;
#define PUT_REASON(bit, name)            \
	if (bits & (bit)) {              \
		if (!f)                  \
			buf_putc(b, ','); \
		f = false;               \
		buf_put_json_string(b, name); \
	}
	BENCH_REASONS(PUT_REASON)
#undef PUT_REASON
	buf_putc(b, ']');
}

int bench_result_to_json(const struct bench_result *r, struct buf *b)
{
	bool first = true;
	buf_putc(b, '{');
	put_int(b, "gpulse_bench", r->version ? r->version : BENCH_FORMAT_VERSION, &first);
	put_str(b, "host", r->host, &first);
	put_key(b, "time", &first);
	buf_putc(b, '"');
	buf_put_rfc3339(b, r->t_ms, false);
	buf_putc(b, '"');
	put_int(b, "t_ms", r->t_ms, &first);
	put_num(b, "duration_seconds", r->duration_s, &first);
	put_str(b, "mode", r->mode, &first);
	put_key(b, "gpu", &first);
	{
		const struct bench_gpu *g = &r->gpu;
		bool f = true;
		buf_putc(b, '{');
		put_int(b, "index", g->index, &f);
		put_str(b, "uuid", g->uuid, &f);
		put_str(b, "name", g->name, &f);
		char cc[16];
		snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
		put_str(b, "compute_capability", g->cc_major ? cc : "", &f);
		put_int(b, "sm_count", g->sm_count, &f);
		put_int(b, "max_sm_clock_mhz", g->max_sm_clock_mhz, &f);
		put_int(b, "max_mem_clock_mhz", g->max_mem_clock_mhz, &f);
		put_int(b, "memory_bus_width_bits", g->mem_bus_width_bits, &f);
		put_int(b, "memory_total_bytes", (long long)g->mem_total_bytes, &f);
		put_int(b, "pcie_generation", g->pcie_gen, &f);
		put_int(b, "pcie_width", g->pcie_width, &f);
		put_int(b, "pcie_max_generation", g->pcie_gen_max, &f);
		put_int(b, "pcie_max_width", g->pcie_width_max, &f);
		put_num(b, "power_limit_watts", g->power_limit_watts, &f);
		buf_putc(b, '}');
	}
	put_str(b, "driver", r->driver, &first);
	put_int(b, "cuda_driver_version", r->cuda_driver_version, &first);
	put_str(b, "cublaslt", r->cublaslt, &first);
	put_str(b, "host_cpus", r->host_cpus, &first);
	put_bool(b, "baseline", r->baseline, &first);
	put_bool(b, "interrupted", r->interrupted, &first);
	put_key(b, "notes", &first);
	buf_putc(b, '[');
	for (int i = 0; i < r->nnotes; i++) {
		if (i)
			buf_putc(b, ',');
		buf_put_json_string(b, r->notes[i]);
	}
	buf_putc(b, ']');
	put_key(b, "figures", &first);
	buf_putc(b, '[');
	for (int i = 0; i < r->nfig; i++) {
		const struct bench_figure *fg = &r->fig[i];
		bool f = true;
		buf_puts(b, i ? ",{" : "{");
		put_str(b, "name", fg->name, &f);
		put_str(b, "variant", fg->variant, &f);
		put_str(b, "unit", fg->unit, &f);
		put_bool(b, "higher_is_better", fg->higher_is_better, &f);
		put_str(b, "size", fg->size, &f);
		put_int(b, "runs", fg->runs, &f);
		put_num(b, "value", fg->value, &f);
		put_str(b, "method", fg->method[0] ? fg->method : BENCH_METHOD_LEGACY, &f);
		put_str(b, "estimator", fg->estimator, &f);
		put_num(b, "min", fg->min, &f);
		put_num(b, "median", fg->median, &f);
		put_num(b, "max", fg->max, &f);
		put_num(b, "spread_ratio", fg->spread_ratio, &f);
		if (fg->has_peak) {
			put_num(b, "peak", fg->peak, &f);
			put_num(b, "peak_fraction", fg->peak_fraction, &f);
			put_str(b, "peak_source", fg->peak_source, &f);
		}
		put_range(b, "sm_clock_mhz", &fg->sm_clock_mhz, &f);
		put_range(b, "mem_clock_mhz", &fg->mem_clock_mhz, &f);
		put_range(b, "power_watts", &fg->power_watts, &f);
		put_range(b, "temperature_celsius", &fg->temperature_celsius, &f);
		put_reasons(b, fg->throttle_reasons, &f);
		buf_putc(b, '}');
	}
	buf_putc(b, ']');
	put_key(b, "skipped", &first);
	buf_putc(b, '[');
	for (int i = 0; i < r->nskip; i++) {
		bool f = true;
		buf_puts(b, i ? ",{" : "{");
		put_str(b, "name", r->skip[i].name, &f);
		put_str(b, "variant", r->skip[i].variant, &f);
		put_str(b, "why", r->skip[i].why, &f);
		buf_putc(b, '}');
	}
	buf_puts(b, "]}");
	if (b->failed)
		return GPULSE_ELIMIT;
	return GPULSE_OK;
}

/* ---- reading ---- */

struct rd {
	char *err;
	size_t errlen;
	char where[64];
};

static int bad(struct rd *d, const char *member, const char *why)
{
	snprintf(d->err, d->errlen, "%s%s: %s", d->where, member, why);
	return GPULSE_EPARSE;
}

static int get_str(struct rd *d, json_t *o, const char *k, char *dst, size_t size, bool need)
{
	json_t *v = json_object_get(o, k);
	if (!v) {
		if (need)
			return bad(d, k, "missing");
		dst[0] = '\0';
		return 0;
	}
	if (!json_is_string(v))
		return bad(d, k, "not a string");
	if (!str_copy(dst, size, json_string_value(v)))
		return bad(d, k, "too long");
	return 0;
}

static int get_num(struct rd *d, json_t *o, const char *k, double *dst, bool need)
{
	json_t *v = json_object_get(o, k);
	if (!v || json_is_null(v)) {
		if (need)
			return bad(d, k, "missing");
		*dst = NAN;
		return 0;
	}
	if (!json_is_number(v))
		return bad(d, k, "not a number");
	*dst = json_number_value(v);
	if (!isfinite(*dst))
		return bad(d, k, "not finite");
	return 0;
}

static int get_int(struct rd *d, json_t *o, const char *k, long long lo, long long hi,
		   long long *dst)
{
	json_t *v = json_object_get(o, k);
	if (!v) {
		*dst = 0;
		return 0;
	}
	if (!json_is_integer(v))
		return bad(d, k, "not an integer");
	long long x = json_integer_value(v);
	if (x < lo || x > hi)
		return bad(d, k, "out of range");
	*dst = x;
	return 0;
}

static int get_bool(struct rd *d, json_t *o, const char *k, bool *dst)
{
	json_t *v = json_object_get(o, k);
	if (!v) {
		*dst = false;
		return 0;
	}
	if (!json_is_boolean(v))
		return bad(d, k, "not true or false");
	*dst = json_is_true(v);
	return 0;
}

static int get_range(struct rd *d, json_t *o, const char *k, struct bench_range *r)
{
	json_t *v = json_object_get(o, k);
	memset(r, 0, sizeof *r);
	if (!v)
		return 0;
	if (!json_is_object(v))
		return bad(d, k, "not an object");
	char saved[64];
	memcpy(saved, d->where, sizeof saved);
	size_t n = strlen(d->where);
	snprintf(d->where + n, sizeof d->where - n, "%s.", k);
	int rc = get_num(d, v, "min", &r->min, true);
	if (!rc)
		rc = get_num(d, v, "mean", &r->mean, true);
	if (!rc)
		rc = get_num(d, v, "max", &r->max, true);
	memcpy(d->where, saved, sizeof saved);
	r->valid = rc == 0;
	return rc;
}

static int get_reasons(struct rd *d, json_t *o, uint64_t *bits)
{
	json_t *v = json_object_get(o, "throttle_reasons");
	*bits = 0;
	if (!v)
		return 0;
	if (!json_is_array(v))
		return bad(d, "throttle_reasons", "not an array");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		if (!s)
			return bad(d, "throttle_reasons", "holds a non-string");
		bool known = false;
#define MATCH_REASON(bit, name)          \
	if (strcmp(s, name) == 0) {      \
		*bits |= (bit);          \
		known = true;            \
	}
		BENCH_REASONS(MATCH_REASON)
#undef MATCH_REASON
		if (!known)
			return bad(d, "throttle_reasons", "holds an unknown reason");
	}
	return 0;
}

static int parse_figure(struct rd *d, json_t *o, struct bench_figure *f)
{
	long long runs;
	int rc;
	if (!json_is_object(o))
		return bad(d, "", "not an object");
	if ((rc = get_str(d, o, "name", f->name, sizeof f->name, true)) ||
	    (rc = get_str(d, o, "variant", f->variant, sizeof f->variant, false)) ||
	    (rc = get_str(d, o, "unit", f->unit, sizeof f->unit, true)) ||
	    (rc = get_str(d, o, "size", f->size, sizeof f->size, false)) ||
	    (rc = get_int(d, o, "runs", 0, 1000000, &runs)) ||
	    (rc = get_num(d, o, "min", &f->min, true)) ||
	    (rc = get_num(d, o, "median", &f->median, true)) ||
	    (rc = get_num(d, o, "max", &f->max, true)) ||
	    (rc = get_num(d, o, "spread_ratio", &f->spread_ratio, false)) ||
	    (rc = get_num(d, o, "value", &f->value, false)) ||
	    (rc = get_str(d, o, "method", f->method, sizeof f->method, false)) ||
	    (rc = get_str(d, o, "estimator", f->estimator, sizeof f->estimator, false)) ||
	    (rc = get_range(d, o, "sm_clock_mhz", &f->sm_clock_mhz)) ||
	    (rc = get_range(d, o, "mem_clock_mhz", &f->mem_clock_mhz)) ||
	    (rc = get_range(d, o, "power_watts", &f->power_watts)) ||
	    (rc = get_range(d, o, "temperature_celsius", &f->temperature_celsius)) ||
	    (rc = get_reasons(d, o, &f->throttle_reasons)))
		return rc;
	f->runs = (int)runs;
	json_t *hib = json_object_get(o, "higher_is_better");
	f->higher_is_better = true;
	if (hib && (rc = get_bool(d, o, "higher_is_better", &f->higher_is_better)))
		return rc;
	if (json_object_get(o, "peak")) {
		if ((rc = get_num(d, o, "peak", &f->peak, true)) ||
		    (rc = get_num(d, o, "peak_fraction", &f->peak_fraction, false)) ||
		    (rc = get_str(d, o, "peak_source", f->peak_source, sizeof f->peak_source, false)))
			return rc;
		f->has_peak = true;
	}
	if (!(f->min <= f->median && f->median <= f->max))
		return bad(d, "median", "not between min and max");
	/* Written before figures had a method: the value was the median. */
	if (!f->method[0]) {
		str_copy(f->method, sizeof f->method, BENCH_METHOD_LEGACY);
		if (!f->estimator[0])
			snprintf(f->estimator, sizeof f->estimator, "median of %d runs", f->runs);
	}
	if (isnan(f->value))
		f->value = f->median;
	if (!(f->min <= f->value && f->value <= f->max))
		return bad(d, "value", "not between min and max");
	return 0;
}

static int parse_doc(struct rd *d, json_t *root, struct bench_result *r)
{
	long long v;
	int rc;
	if (!json_is_object(root))
		return bad(d, "", "the document is not a JSON object");
	json_t *inner = json_object_get(root, "result");
	if (inner && json_is_object(inner) && !json_object_get(root, "gpulse_bench"))
		root = inner;
	if ((rc = get_int(d, root, "gpulse_bench", 0, 1000, &v)))
		return rc;
	if (v != BENCH_FORMAT_VERSION)
		return bad(d, "gpulse_bench", v ? "a format version this gpulse does not read"
						 : "missing: not a gpulse bench result");
	r->version = (int)v;
	if ((rc = get_str(d, root, "host", r->host, sizeof r->host, false)) ||
	    (rc = get_int(d, root, "t_ms", 0, INT64_MAX / 2, &v)))
		return rc;
	r->t_ms = v;
	if ((rc = get_num(d, root, "duration_seconds", &r->duration_s, false)) ||
	    (rc = get_str(d, root, "mode", r->mode, sizeof r->mode, false)) ||
	    (rc = get_str(d, root, "driver", r->driver, sizeof r->driver, false)) ||
	    (rc = get_int(d, root, "cuda_driver_version", 0, 1000000, &v)))
		return rc;
	r->cuda_driver_version = (int)v;
	if ((rc = get_str(d, root, "cublaslt", r->cublaslt, sizeof r->cublaslt, false)) ||
	    (rc = get_str(d, root, "host_cpus", r->host_cpus, sizeof r->host_cpus, false)) ||
	    (rc = get_bool(d, root, "baseline", &r->baseline)) ||
	    (rc = get_bool(d, root, "interrupted", &r->interrupted)))
		return rc;
	if (isnan(r->duration_s))
		r->duration_s = 0;
	json_t *g = json_object_get(root, "gpu");
	if (!g || !json_is_object(g))
		return bad(d, "gpu", g ? "not an object" : "missing");
	snprintf(d->where, sizeof d->where, "gpu.");
	struct bench_gpu *gp = &r->gpu;
	char cc[16];
	long long x[10];
	if ((rc = get_int(d, g, "index", 0, 1023, &x[0])) ||
	    (rc = get_str(d, g, "uuid", gp->uuid, sizeof gp->uuid, true)) ||
	    (rc = get_str(d, g, "name", gp->name, sizeof gp->name, false)) ||
	    (rc = get_str(d, g, "compute_capability", cc, sizeof cc, false)) ||
	    (rc = get_int(d, g, "sm_count", 0, 100000, &x[1])) ||
	    (rc = get_int(d, g, "max_sm_clock_mhz", 0, 100000, &x[2])) ||
	    (rc = get_int(d, g, "max_mem_clock_mhz", 0, 100000, &x[3])) ||
	    (rc = get_int(d, g, "memory_bus_width_bits", 0, 100000, &x[4])) ||
	    (rc = get_int(d, g, "memory_total_bytes", 0, INT64_MAX, &x[5])) ||
	    (rc = get_int(d, g, "pcie_generation", 0, 64, &x[6])) ||
	    (rc = get_int(d, g, "pcie_width", 0, 64, &x[7])) ||
	    (rc = get_int(d, g, "pcie_max_generation", 0, 64, &x[8])) ||
	    (rc = get_int(d, g, "pcie_max_width", 0, 64, &x[9])) ||
	    (rc = get_num(d, g, "power_limit_watts", &gp->power_limit_watts, false)))
		return rc;
	if (!gp->uuid[0])
		return bad(d, "uuid", "empty");
	gp->index = (int)x[0];
	gp->sm_count = (int)x[1];
	gp->max_sm_clock_mhz = (unsigned)x[2];
	gp->max_mem_clock_mhz = (unsigned)x[3];
	gp->mem_bus_width_bits = (unsigned)x[4];
	gp->mem_total_bytes = (uint64_t)x[5];
	gp->pcie_gen = (unsigned)x[6];
	gp->pcie_width = (unsigned)x[7];
	gp->pcie_gen_max = (unsigned)x[8];
	gp->pcie_width_max = (unsigned)x[9];
	if (isnan(gp->power_limit_watts))
		gp->power_limit_watts = 0;
	if (cc[0] && sscanf(cc, "%d.%d", &gp->cc_major, &gp->cc_minor) != 2)
		return bad(d, "compute_capability", "not MAJOR.MINOR");
	d->where[0] = '\0';

	json_t *notes = json_object_get(root, "notes");
	if (notes) {
		if (!json_is_array(notes))
			return bad(d, "notes", "not an array");
		size_t i;
		json_t *e;
		json_array_foreach(notes, i, e) {
			if (!json_is_string(e))
				return bad(d, "notes", "holds a non-string");
			bench_result_note(r, "%s", json_string_value(e));
		}
	}
	json_t *figs = json_object_get(root, "figures");
	if (!figs || !json_is_array(figs))
		return bad(d, "figures", figs ? "not an array" : "missing");
	if (json_array_size(figs) > BENCH_MAX_FIGURES)
		return bad(d, "figures", "more than 24");
	size_t i;
	json_t *e;
	json_array_foreach(figs, i, e) {
		snprintf(d->where, sizeof d->where, "figures[%zu].", i);
		if ((rc = parse_figure(d, e, &r->fig[r->nfig])))
			return rc;
		r->nfig++;
	}
	d->where[0] = '\0';
	json_t *sk = json_object_get(root, "skipped");
	if (sk) {
		if (!json_is_array(sk))
			return bad(d, "skipped", "not an array");
		if (json_array_size(sk) > BENCH_MAX_FIGURES)
			return bad(d, "skipped", "more than 24");
		json_array_foreach(sk, i, e) {
			snprintf(d->where, sizeof d->where, "skipped[%zu].", i);
			struct bench_skip *s = &r->skip[r->nskip];
			if (!json_is_object(e))
				return bad(d, "", "not an object");
			if ((rc = get_str(d, e, "name", s->name, sizeof s->name, true)) ||
			    (rc = get_str(d, e, "variant", s->variant, sizeof s->variant, false)) ||
			    (rc = get_str(d, e, "why", s->why, sizeof s->why, false)))
				return rc;
			r->nskip++;
		}
		d->where[0] = '\0';
	}
	return 0;
}

int bench_result_parse(const char *text, size_t len, struct bench_result *out, char *err,
		       size_t errlen)
{
	memset(out, 0, sizeof *out);
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		snprintf(err, errlen, "not JSON (line %d, column %d: %s)", je.line, je.column,
			 je.text);
		return GPULSE_EPARSE;
	}
	struct rd d = {.err = err, .errlen = errlen};
	int rc = parse_doc(&d, root, out);
	json_decref(root);
	if (rc)
		memset(out, 0, sizeof *out);
	return rc;
}
