/* Prometheus and OpenMetrics exposition; see prom.h.
 *
 * Hand-written rather than through a client library: the C clients keep
 * their own registry of metric objects that would duplicate the bus, and
 * a scrape here is a straight walk over snapshots. Speed matters (a scrape
 * every second from several servers, and the CLI polls it): the output is
 * reserved once and written without a call per piece, each GPU's label
 * set is escaped once per render and then copied, and numbers are written
 * by hand (printf only for the few doubles that need 16 or 17 digits).
 *
 * Why one file: one render walks every snapshot into one reserved buffer
 * with the per-GPU label sets escaped once. The metric registry
 * (export/families.h) declares every family written here but the fields'
 * (collect/fields.h, text only: ingest stores them); each is emitted
 * once through a metric sink, so the store's self-scrape takes them as
 * samples. The text sink copies a GPU's label set escaped once
 * (base_gpu) rather than escaping it per sample. */
#include "export/prom.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "attrib/attrib.h"
#include "anomaly/anomaly.h"
#include "common/clock.h"
#include "diagnose/diagnose.h"
#include "collect/fields.h"
#include "common/gofloat.h"
#include "alert/notify.h"
#include "common/status.h"
#include "common/utf8.h"
#include "diagnose/health.h"
#include "export/families.h"

#ifndef GPULSE_VERSION
#define GPULSE_VERSION "unknown"
#endif

#define MF_ROW(id, name_, kind_, help_, labels_) \
	[MF_##id] = {.name = name_, .kind = METRIC_KIND_##kind_, .help = help_, .labels = labels_},
const struct metric_family metric_families[MF_COUNT] = {
	GPULSE_GPU_FAMILIES(MF_ROW) GPULSE_DAEMON_FAMILIES(MF_ROW)
};
#undef MF_ROW

const char prom_content_type_text[] = PROM_CONTENT_TYPE_TEXT;
const char prom_content_type_openmetrics[] = PROM_CONTENT_TYPE_OPENMETRICS;

enum ftype { T_GAUGE, T_COUNTER, T_HISTOGRAM, T_INFO };

/* The writer: the output buffer, the first append error, and the family
 * whose HELP and TYPE lines wait for its first sample (so a family with no
 * samples writes nothing). */
struct pw {
	struct buf *b;
	bool om;
	int rc;
	bool pending;
	const char *name;
	size_t name_len;
	enum ftype type;
	const char *help;
};

/* A GPU's labels as values for the sink: UTF-8 made, unescaped. */
struct gpu_base {
	char index[24];
	char uuid[256];
	char model[256];
	const char *source;            /* gpu_source_label: NULL for most GPUs */
};

struct render {
	struct pw w;
	int n;
	struct gpu_snapshot *snap;
	struct gpu_base *base;         /* n of them */
	struct buf labels;             /* every GPU's escaped label set, end to end */
	size_t lab_off[GPU_MAX + 1];   /* GPU i's labels are [lab_off[i], lab_off[i+1]) */
};

/* ---- primitive writers -----------------------------------------------
 *
 * They write into out->data directly: one inlined capacity check per
 * piece, and buf_reserve (which keeps the bound) only to grow. The NUL
 * that struct buf promises is written once, at the end of the render. */

static bool grow(struct pw *w, size_t n)
{
	int rc = buf_reserve(w->b, n);
	if (rc && !w->rc)
		w->rc = rc;
	return rc == 0;
}

/* Room for n more bytes at the end, or NULL once anything has failed. */
static inline char *room(struct pw *w, size_t n)
{
	struct buf *b = w->b;
	if (w->rc)
		return NULL;
	if (b->len + n >= b->cap && !grow(w, n))
		return NULL;
	return b->data + b->len;
}

static inline void put(struct pw *w, const char *s, size_t n)
{
	char *p = room(w, n);
	if (!p)
		return;
	memcpy(p, s, n);
	w->b->len += n;
}

#define PUT_LIT(w, lit) put((w), (lit), sizeof(lit) - 1)

static void put_str(struct pw *w, const char *s)
{
	put(w, s, strlen(s));
}

static size_t format_u64(char *out, uint64_t v)
{
	char tmp[24];
	char *p = tmp + sizeof tmp;
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	size_t n = (size_t)(tmp + sizeof tmp - p);
	memcpy(out, p, n);
	return n;
}

static void put_u64(struct pw *w, uint64_t v)
{
	char *p = room(w, 24);
	if (p)
		w->b->len += format_u64(p, v);
}

static void put_value(struct pw *w, double v)
{
	char *p = room(w, PROM_DOUBLE_MAX);
	if (p)
		w->b->len += prom_format_double(p, v);
}

/* Write v[0..n), NUL-terminated at n and UTF-8 already, to o escaped as
 * buf_put_label_value does (\\, \", \n): at most 2n bytes. Returns the
 * end. */
static char *escape_into(char *o, const char *v, size_t n)
{
	size_t k = strcspn(v, "\\\"\n"); /* most values have nothing to escape */
	memcpy(o, v, k);
	o += k;
	for (size_t i = k; i < n; i++) {
		char c = v[i];
		if (c == '\\' || c == '"') {
			*o++ = '\\';
			*o++ = c;
		} else if (c == '\n') {
			*o++ = '\\';
			*o++ = 'n';
		} else {
			*o++ = c;
		}
	}
	return o;
}

/* Whether v[0..n) holds a byte escape_into escapes: eight bytes at a
 * time (a byte-wise loop over the NVML histogram's labels was a third of
 * a render). */
static bool needs_escape(const char *v, size_t n)
{
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	if (n < 8) {
		for (size_t i = 0; i < n; i++)
			if (v[i] == '\\' || v[i] == '"' || v[i] == '\n')
				return true;
		return false;
	}
	/* Words at 0, 8, ... and the last eight bytes (overlapping). */
	for (size_t i = 0;; i += 8) {
		if (i + 8 > n)
			i = n - 8;
		uint64_t x;
		memcpy(&x, v + i, 8);
		uint64_t a = x ^ (ones * '\\'), b = x ^ (ones * '"'), c = x ^ (ones * '\n');
		/* (y - ones) & ~y & highs: nonzero iff y has a zero byte */
		if (((a - ones) & ~a & highs) | ((b - ones) & ~b & highs) | ((c - ones) & ~c & highs))
			return true;
		if (i + 8 == n)
			return false;
	}
}

/* A label value from outside (NVML strings, comm): made UTF-8, then
 * escaped. */
static void put_label_text(struct pw *w, const char *s)
{
	char clean[256];
	size_t n = utf8_clean(clean, sizeof clean, s);
	char *p = room(w, 2 * n);
	if (p)
		w->b->len += (size_t)(escape_into(p, clean, n) - p);
}

/* ---- numbers ----------------------------------------------------------
 *
 * buf_put_double's text (gofloat_format_cg) without its cost: that finds
 * the shortest digits by printing and reading back with strtod, about a
 * microsecond a value. Here integers and short decimals (most GPU values)
 * are written by hand, and the rest take gofloat_format_cg. */

static const double pow10_table[20] = {
	1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
};

/* a (not an integer, 1e-4 <= a < 1e15) as the decimal m / 10^d with the
 * fewest digits d, when one with at most 15 significant digits exists
 * (m < 1e15; from 1e-4 that needs d <= 19). m and 10^d (d <= 22) are
 * exact doubles, so the division is correctly rounded: it equals a
 * exactly when strtod would read the text as a. By DBL_DIG (15), such a
 * decimal is the one %.15g prints for a, and %g prints it without an
 * exponent in this range. The search is exhaustive: a * 10^d < 1e15 is
 * within 1/8 of m, so rounding it finds m whenever m exists. */
static size_t format_short_decimal(char *out, double a)
{
	for (int d = 1; d <= 19; d++) {
		double scaled = a * pow10_table[d];
		if (scaled >= 1e15)
			break;
		double m = floor(scaled + 0.5);
		if (m / pow10_table[d] != a)
			continue;
		char digits[24];
		size_t n = format_u64(digits, (uint64_t)m);
		while (d > 0 && digits[n - 1] == '0') { /* never longer than needed */
			n--;
			d--;
		}
		if (d == 0)
			return 0;
		size_t o = 0, ud = (size_t)d;
		if (n > ud) {
			memcpy(out, digits, n - ud);
			o = n - ud;
		} else {
			out[o++] = '0';
		}
		out[o++] = '.';
		for (size_t z = n; z < ud; z++)
			out[o++] = '0';
		size_t frac = n > ud ? ud : n;
		memcpy(out + o, digits + n - frac, frac);
		return o + frac;
	}
	return 0;
}

_Static_assert(PROM_DOUBLE_MAX >= GOFLOAT_CG_MAX, "room for gofloat_format_cg");

size_t prom_format_double(char *out, double v)
{
	if (isnan(v)) {
		memcpy(out, "NaN", 4);
		return 3;
	}
	if (isinf(v)) {
		memcpy(out, v > 0 ? "+Inf" : "-Inf", 5);
		return 4;
	}
	size_t n = 0;
	double a = fabs(v);
	if (a < 1e15 && v == (double)(int64_t)v) {
		if (v < 0)
			out[n++] = '-';
		n += format_u64(out + n, (uint64_t)a);
		out[n] = '\0';
		return n;
	}
	if (a >= 1e-4 && a < 1e15) {
		if (v < 0)
			out[n++] = '-';
		size_t k = format_short_decimal(out + n, a);
		if (k) {
			out[n + k] = '\0';
			return n + k;
		}
	}
	return gofloat_format_cg(out, v);
}

static bool ends_with(const char *s, size_t n, const char *suffix, size_t sn)
{
	return n > sn && memcmp(s + n - sn, suffix, sn) == 0;
}

/* ---- families and samples -------------------------------------------- */

static void family(struct pw *w, const char *name, enum ftype type, const char *help)
{
	w->pending = true;
	w->name = name;
	w->name_len = strlen(name);
	w->type = type;
	w->help = help;
}

static void write_header(struct pw *w)
{
	static const char *const text_types[] = {"gauge", "counter", "histogram", "gauge"};
	static const char *const om_types[] = {"gauge", "counter", "histogram", "info"};
	size_t n = w->name_len;
	/* OpenMetrics names the family without the suffix its samples carry. */
	if (w->om && w->type == T_COUNTER && ends_with(w->name, n, "_total", 6))
		n -= 6;
	else if (w->om && w->type == T_INFO && ends_with(w->name, n, "_info", 5))
		n -= 5;
	PUT_LIT(w, "# HELP ");
	put(w, w->name, n);
	PUT_LIT(w, " ");
	put_str(w, w->help);
	PUT_LIT(w, "\n# TYPE ");
	put(w, w->name, n);
	PUT_LIT(w, " ");
	put_str(w, (w->om ? om_types : text_types)[w->type]);
	PUT_LIT(w, "\n");
	w->pending = false;
}

/* Start a sample of the current family: its name and `suffix`. */
static void sample(struct pw *w, const char *suffix, size_t suffix_len)
{
	if (w->pending)
		write_header(w);
	put(w, w->name, w->name_len);
	if (suffix_len)
		put(w, suffix, suffix_len);
}

/* Start a per-GPU sample of the text-only families (render_fields):
 * name{gpu="..",uuid="..",model=".." (and source="replay" for a replayed
 * GPU, gpu_source_label) — the caller adds any more labels and ends it
 * with end_value. */
static void gpu_sample(struct render *r, int i)
{
	sample(&r->w, "", 0);
	PUT_LIT(&r->w, "{");
	put(&r->w, r->labels.data + r->lab_off[i], r->lab_off[i + 1] - r->lab_off[i]);
}

static void end_value(struct pw *w, double v)
{
	PUT_LIT(w, "} ");
	put_value(w, v);
	PUT_LIT(w, "\n");
}

static void end_u64(struct pw *w, uint64_t v)
{
	PUT_LIT(w, "} ");
	put_u64(w, v);
	PUT_LIT(w, "\n");
}

/* The value of a sample with no labels, its name written. */
static void plain_tail_value(struct pw *w, double v)
{
	PUT_LIT(w, " ");
	put_value(w, v);
	PUT_LIT(w, "\n");
}

static void plain_tail_u64(struct pw *w, uint64_t v)
{
	PUT_LIT(w, " ");
	put_u64(w, v);
	PUT_LIT(w, "\n");
}

/* ---- the text writer as a metric sink (common/metric.h) ------------- */

struct text_sink {
	struct metric_sink s;   /* first: the sink is the text_sink */
	struct pw *w;
	const struct render *r; /* its GPUs' labels, escaped once (prepare_labels) */
};

/* The GPU whose labels values[0..MF_GPU_BASE_LABELS) are, when they are
 * the render's own (gpu_values), or -1: their text is copied whole. */
static int base_gpu(const struct render *r, const char *const *values)
{
	if (!r || !r->base || !r->n)
		return -1;
	uintptr_t p = (uintptr_t)values[0], b = (uintptr_t)r->base;
	if (p < b || p >= b + (size_t)r->n * sizeof *r->base)
		return -1;
	size_t i = (p - b) / sizeof *r->base;
	const struct gpu_base *g = &r->base[i];
	return values[0] == g->index && values[1] == g->uuid && values[2] == g->model &&
	       values[3] == g->source ? (int)i : -1;
}

/* The registry's label names measured once: a strlen per label per
 * sample was a tenth of a render. */
static uint8_t reg_nlabels[MF_COUNT];
static uint8_t reg_label_len[MF_COUNT][METRIC_MAX_LABELS];
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static void reg_measure(void)
{
	for (size_t i = 0; i < MF_COUNT; i++) {
		size_t n = metric_family_nlabels(&metric_families[i]);
		reg_nlabels[i] = (uint8_t)(n < METRIC_MAX_LABELS ? n : METRIC_MAX_LABELS);
		for (size_t k = 0; k < reg_nlabels[i]; k++) {
			size_t len = strlen(metric_families[i].labels[k]);
			reg_label_len[i][k] = (uint8_t)(len < 255 ? len : 255);
		}
	}
}

/* name+suffix{labels}, the family's HELP and TYPE first if it is new;
 * true when labels were written (the value follows "} "). */
static bool text_start(struct text_sink *ts, const struct metric_family *f, const char *suffix,
		       const char *const *values)
{
	static const enum ftype kinds[] = {
		[METRIC_KIND_GAUGE] = T_GAUGE, [METRIC_KIND_COUNTER] = T_COUNTER,
		[METRIC_KIND_HISTOGRAM] = T_HISTOGRAM, [METRIC_KIND_INFO] = T_INFO,
	};
	struct pw *w = ts->w;
	if (w->name != f->name)
		family(w, f->name, kinds[f->kind], f->help);
	size_t sl = suffix[0] ? strlen(suffix) : 0;
	sample(w, suffix, sl);
	/* A family of the registry (every one prom.c emits) has its label
	 * names measured (reg_measure, at the render's start). */
	const uint8_t *known = NULL;
	size_t nd;
	uintptr_t fp = (uintptr_t)f, t0 = (uintptr_t)metric_families;
	if (fp >= t0 && fp < t0 + sizeof metric_families) {
		size_t id = (fp - t0) / sizeof *f;
		known = reg_label_len[id];
		nd = reg_nlabels[id];
	} else {
		nd = metric_family_nlabels(f);
	}
	size_t n = nd;
	if (sl == 7 && memcmp(suffix, "_bucket", 7) == 0)
		n++; /* le */
	if (n > METRIC_MAX_LABELS + 1)
		n = METRIC_MAX_LABELS + 1;
	if (!n)
		return false;
	size_t i = 0;
	bool any = false;
	int g = n >= MF_GPU_BASE_LABELS ? base_gpu(ts->r, values) : -1;
	if (g >= 0) {
		const struct render *r = ts->r;
		size_t len = r->lab_off[g + 1] - r->lab_off[g];
		char *o = room(w, len + 1);
		if (!o)
			return true;
		*o = '{';
		memcpy(o + 1, r->labels.data + r->lab_off[g], len);
		w->b->len += len + 1;
		i = MF_GPU_BASE_LABELS;
		any = true;
	}
	/* One label at a time: its room reserved (an inlined check), its
	 * value copied whole unless it holds a byte to escape (most do not). */
	for (size_t k = i; k < n; k++) {
		const char *v = values[k];
		if (!v)
			continue;
		size_t ln = k >= nd ? 2 : known ? known[k] : strlen(f->labels[k]);
		size_t lv = strlen(v);
		char *o = room(w, ln + 2 * lv + 4);
		if (!o)
			return true;
		char *o0 = o;
		*o++ = any ? ',' : '{';
		any = true;
		memcpy(o, k < nd ? f->labels[k] : "le", ln);
		o += ln;
		*o++ = '=';
		*o++ = '"';
		if (needs_escape(v, lv)) {
			o = escape_into(o, v, lv);
		} else {
			memcpy(o, v, lv);
			o += lv;
		}
		*o++ = '"';
		w->b->len += (size_t)(o - o0);
	}
	return any;
}

static void text_f64(struct metric_sink *s, const struct metric_family *f, const char *suffix,
		     const char *const *values, double v)
{
	struct text_sink *ts = (struct text_sink *)s;
	if (text_start(ts, f, suffix, values))
		end_value(ts->w, v);
	else
		plain_tail_value(ts->w, v);
}

static void text_u64(struct metric_sink *s, const struct metric_family *f, const char *suffix,
		     const char *const *values, uint64_t v)
{
	struct text_sink *ts = (struct text_sink *)s;
	if (text_start(ts, f, suffix, values))
		end_u64(ts->w, v);
	else
		plain_tail_u64(ts->w, v);
}

static const struct metric_sink_ops text_ops = {.f64 = text_f64, .u64 = text_u64};

/* The recording-rule groups' families, one sample per group each. */
static void emit_rule_stats(struct metric_sink *s, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	struct rule_group_self_stats *rs = calloc(RULE_STATS_MAX, sizeof *rs);
	char (*group)[256] = calloc(RULE_STATS_MAX, sizeof *group);
	if (!rs || !group)
		goto out;
	size_t n = self->rule_stats(self->rule_ctx, rs, RULE_STATS_MAX);
	if (n > RULE_STATS_MAX)
		n = RULE_STATS_MAX;
	for (size_t i = 0; i < n; i++)
		utf8_clean(group[i], sizeof group[i], rs[i].name);
	for (size_t i = 0; i < n; i++)
		metric_f64(s, &F[MF_RULE_DURATION], (const char *const[]){group[i]},
			   rs[i].last_duration_s);
	for (size_t i = 0; i < n; i++)
		metric_u64(s, &F[MF_RULE_EVALUATIONS], (const char *const[]){group[i]},
			   rs[i].evaluations_total);
	for (size_t i = 0; i < n; i++)
		metric_u64(s, &F[MF_RULE_FAILURES], (const char *const[]){group[i]},
			   rs[i].failures_total);
out:
	free(group);
	free(rs);
}

/* Alert delivery's families (src/alert/notify.h): Prometheus's
 * prometheus_notifications_* under gpulse_, per receiver where it has
 * one. */
static void emit_notify_stats(struct metric_sink *s, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	struct notify_stats *st = calloc(1, sizeof *st);
	if (!st)
		return;
	self->notify_stats(self->notify_ctx, st);
	size_t nr = st->nreceivers < NOTIFY_MAX_RECEIVERS ? st->nreceivers : NOTIFY_MAX_RECEIVERS;
	/* receiver, type: the labels of receiver i. */
	char target[NOTIFY_MAX_RECEIVERS][256];
	const char *lab[NOTIFY_MAX_RECEIVERS][2];
	for (size_t i = 0; i < nr; i++) {
		utf8_clean(target[i], sizeof target[i], st->receivers[i].target);
		lab[i][0] = target[i];
		lab[i][1] = notify_kind_name(st->receivers[i].kind);
	}
	static const struct {
		enum metric_family_id id;
		size_t off;
	} per[] = {
		{MF_NOTIFY_SENT, offsetof(struct notify_receiver_stats, sent_total)},
		{MF_NOTIFY_ERRORS, offsetof(struct notify_receiver_stats, errors_total)},
		{MF_NOTIFY_DROPPED, offsetof(struct notify_receiver_stats, dropped_total)},
		{MF_NOTIFY_PENDING_BATCHES, offsetof(struct notify_receiver_stats, pending_batches)},
		{MF_NOTIFY_PENDING_BYTES, offsetof(struct notify_receiver_stats, pending_bytes)},
	};
	for (size_t f = 0; f < sizeof per / sizeof per[0]; f++)
		for (size_t i = 0; i < nr; i++) {
			uint64_t v;
			memcpy(&v, (const char *)&st->receivers[i] + per[f].off, sizeof v);
			metric_u64(s, &F[per[f].id], lab[i], v);
		}
	const struct metric_family *h = &F[MF_NOTIFY_LATENCY];
	char le[NOTIFY_LATENCY_BUCKETS][PROM_DOUBLE_MAX];
	for (int k = 0; k < NOTIFY_LATENCY_BUCKETS; k++)
		le[k][prom_format_double(le[k], notify_latency_bounds[k])] = '\0';
	for (size_t i = 0; i < nr; i++) {
		const struct notify_receiver_stats *r = &st->receivers[i];
		uint64_t cum = 0;
		for (int k = 0; k < NOTIFY_LATENCY_BUCKETS; k++) {
			cum += r->latency_bucket[k];
			s->ops->u64(s, h, "_bucket", (const char *const[]){lab[i][0], lab[i][1], le[k]},
				    cum);
		}
		s->ops->u64(s, h, "_bucket", (const char *const[]){lab[i][0], lab[i][1], "+Inf"},
			    r->latency_count);
		s->ops->f64(s, h, "_sum", lab[i], r->latency_sum_s);
		s->ops->u64(s, h, "_count", lab[i], r->latency_count);
	}
	static const struct {
		enum metric_family_id id;
		size_t off;
	} one[] = {
		{MF_NOTIFY_QUEUE_LENGTH, offsetof(struct notify_stats, ring_length)},
		{MF_NOTIFY_QUEUE_CAPACITY, offsetof(struct notify_stats, ring_capacity)},
		{MF_NOTIFY_QUEUE_DROPPED, offsetof(struct notify_stats, ring_dropped_total)},
		{MF_NOTIFY_BACKLOG_BATCHES, offsetof(struct notify_stats, queue_batches)},
		{MF_NOTIFY_BACKLOG_BYTES, offsetof(struct notify_stats, queue_bytes)},
		{MF_NOTIFY_BACKLOG_MAX_BATCHES, offsetof(struct notify_stats, queue_max_batches)},
		{MF_NOTIFY_BACKLOG_MAX_BYTES, offsetof(struct notify_stats, queue_max_bytes)},
		{MF_NOTIFY_DISK_ERRORS, offsetof(struct notify_stats, disk_errors_total)},
		{MF_NOTIFY_INHIBITED, offsetof(struct notify_stats, inhibited_total)},
	};
	for (size_t f = 0; f < sizeof one / sizeof one[0]; f++) {
		uint64_t v;
		memcpy(&v, (const char *)st + one[f].off, sizeof v);
		metric_u64(s, &F[one[f].id], NULL, v);
	}
	uint64_t ams = 0;
	for (size_t i = 0; i < nr; i++)
		ams += st->receivers[i].kind == NOTIFY_ALERTMANAGER;
	metric_u64(s, &F[MF_NOTIFY_ALERTMANAGERS], NULL, ams);
	free(st);
}

/* The query API's limits at work (issue 14): queries run on their own
 * threads, at most query.max_concurrency at once. */
static void emit_query_stats(struct metric_sink *s, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	struct query_self_stats st;
	memset(&st, 0, sizeof st);
	self->query_stats(self->query_ctx, &st);
	metric_u64(s, &F[MF_QUERIES_RUNNING], NULL, st.running);
	metric_u64(s, &F[MF_QUERIES_QUEUED], NULL, st.queued);
	metric_u64(s, &F[MF_QUERIES_STARTED], NULL, st.started_total);
	metric_u64(s, &F[MF_QUERIES_REJECTED], NULL, st.rejected_total);
	metric_u64(s, &F[MF_QUERIES_TIMED_OUT], NULL, st.timed_out_total);
	metric_u64(s, &F[MF_QUERIES_CANCELLED], NULL, st.cancelled_total);
}

/* The rule engine's alerts: how many by state, and its counters. */
static void emit_rule_alert_stats(struct metric_sink *s, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	struct rule_alert_self_stats st;
	self->rule_alert_stats(self->rule_alert_ctx, &st);
	static const char *const states[] = {"pending", "firing", "held"};
	const uint64_t nv[] = {st.pending, st.firing, st.held};
	for (size_t i = 0; i < 3; i++)
		metric_u64(s, &F[MF_ALERTS], &states[i], nv[i]);
	metric_u64(s, &F[MF_ALERT_NOTIFICATIONS], NULL, st.notifications_total);
	metric_u64(s, &F[MF_ALERT_FLAPS_HELD], NULL, st.flaps_held_total);
	metric_u64(s, &F[MF_ALERTS_RESTORED], NULL, st.restored_total);
	metric_u64(s, &F[MF_ALERT_PERSIST_ERRORS], NULL, st.persist_errors_total);
}

/* ---- per-GPU families ------------------------------------------------ */

/* Each GPU's labels twice: as values for the sink (r->base) and as text
 * escaped once for the text writer (r->labels). */
static void prepare_labels(struct render *r)
{
	struct pw lw = {.b = &r->labels};
	for (int i = 0; i < r->n; i++) {
		const struct gpu_identity *id = &r->snap[i].id;
		struct gpu_base *g = &r->base[i];
		g->index[format_u64(g->index, id->index >= 0 ? (uint64_t)id->index : 0)] = '\0';
		utf8_clean(g->uuid, sizeof g->uuid, id->uuid);
		utf8_clean(g->model, sizeof g->model, id->name);
		g->source = gpu_source_label(id);
		r->lab_off[i] = r->labels.len;
		PUT_LIT(&lw, "gpu=\"");
		put_str(&lw, g->index);
		PUT_LIT(&lw, "\",uuid=\"");
		put_label_text(&lw, g->uuid);
		PUT_LIT(&lw, "\",model=\"");
		put_label_text(&lw, g->model);
		PUT_LIT(&lw, "\"");
		if (g->source) {
			PUT_LIT(&lw, ",source=\"");
			put_str(&lw, g->source);
			PUT_LIT(&lw, "\"");
		}
	}
	r->lab_off[r->n] = r->labels.len;
	if (lw.rc && !r->w.rc)
		r->w.rc = lw.rc;
}

/* The values of GPU i's labels, then a family's own. */
#define GPU_VALUES(r, i, ...)                                                          \
	((const char *const[]){(r)->base[i].index, (r)->base[i].uuid, (r)->base[i].model, \
			       (r)->base[i].source, __VA_ARGS__})
#define GPU_ONLY(r, i) GPU_VALUES(r, i, NULL)

/* An outside value (NVML strings, comm) made UTF-8 into a label buffer. */
typedef char label_text[256];

static const char *clean(label_text out, const char *s)
{
	utf8_clean(out, sizeof(label_text), s);
	return out;
}

/* An integer label's digits into `out`. */
static const char *digits(char out[24], uint64_t v)
{
	out[format_u64(out, v)] = '\0';
	return out;
}

static bool gpu_is_stale(const struct gpu_snapshot *s)
{
	return gpu_snapshot_is_stale(s);
}

static const char *mig_name(int mode)
{
	return mode == 1 ? "enabled" : mode == 0 ? "disabled" : "unknown";
}

/* The host's name for gpulse_gpu_info's `hostname` label (DCGM-compatible
 * series carry it as `Hostname`): read once, as it does not change while
 * gpulsed runs; empty when unreadable. */
static char host_name_buf[256];
static pthread_once_t host_name_once = PTHREAD_ONCE_INIT;

static void host_name_read(void)
{
	char raw[256];
	if (gethostname(raw, sizeof raw - 1) != 0)
		raw[0] = '\0';
	raw[sizeof raw - 1] = '\0';
	utf8_clean(host_name_buf, sizeof host_name_buf, raw);
}

static const char *host_name(void)
{
	pthread_once(&host_name_once, host_name_read);
	return host_name_buf;
}

static void emit_health(struct render *r, struct metric_sink *s)
{
	const struct metric_family *F = metric_families;
	for (int i = 0; i < r->n; i++)
		metric_u64(s, &F[MF_GPU_UP], GPU_ONLY(r, i), r->snap[i].health == GPU_HEALTH_UP);
	for (int i = 0; i < r->n; i++)
		metric_u64(s, &F[MF_GPU_STALE], GPU_ONLY(r, i), gpu_is_stale(&r->snap[i]));
	for (int i = 0; i < r->n; i++) {
		const struct gpu_identity *id = &r->snap[i].id;
		label_text bus, serial, driver, cuda, arch, source;
		char cc[64] = "";
		if (id->cc_major > 0)
			snprintf(cc, sizeof cc, "%d.%d", id->cc_major, id->cc_minor > 0 ? id->cc_minor : 0);
		metric_u64(s, &F[MF_GPU_INFO],
			   GPU_VALUES(r, i, clean(bus, id->pci_bus_id), clean(serial, id->serial),
				      clean(driver, id->driver_version), clean(cuda, id->cuda_version),
				      clean(arch, id->architecture), cc, mig_name(id->mig_mode),
				      /* else among the GPU's labels already */
				      gpu_source_label(id) ? NULL : clean(source, id->source),
				      host_name()),
			   1);
	}
}

static void emit_identity_numbers(struct render *r, struct metric_sink *s)
{
	static const struct {
		enum metric_family_id id;
		size_t off;
		bool is_double;
	} rows[] = {
		{MF_GPU_MAX_SM_CLOCK, offsetof(struct gpu_identity, max_sm_clock_hz), true},
		{MF_GPU_MAX_MEM_CLOCK, offsetof(struct gpu_identity, max_mem_clock_hz), true},
		{MF_GPU_PCIE_MAX_GEN, offsetof(struct gpu_identity, pcie_max_gen), false},
		{MF_GPU_PCIE_MAX_WIDTH, offsetof(struct gpu_identity, pcie_max_width), false},
	};
	for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
		for (int i = 0; i < r->n; i++) {
			const char *base = (const char *)&r->snap[i].id + rows[k].off;
			double v;
			if (rows[k].is_double)
				memcpy(&v, base, sizeof v);
			else {
				unsigned u;
				memcpy(&u, base, sizeof u);
				v = u;
			}
			if (!(v > 0)) /* 0 means unknown */
				continue;
			metric_f64(s, &metric_families[rows[k].id], GPU_ONLY(r, i), v);
		}
	}
}

/* A peer's topology level (NVML's numbering, struct gpu_peer) as a label
 * value. */
static const char *topology_level_name(int level)
{
	switch (level) {
	case 0: return "internal";
	case 10: return "single";
	case 20: return "multiple";
	case 30: return "hostbridge";
	case 40: return "node";
	case 50: return "system";
	default: return "unknown";
	}
}

/* NVLinks and how the GPUs of a host reach each other, as read at
 * discovery: a pair family only where NVML told (a host with one GPU has
 * no pairs, and so no samples). */
static void emit_topology(struct render *r, struct metric_sink *s)
{
	const struct metric_family *F = metric_families;
	for (int i = 0; i < r->n; i++) {
		const struct gpu_identity *id = &r->snap[i].id;
		if (id->nvlink_count_valid)
			metric_u64(s, &F[MF_GPU_NVLINKS], GPU_ONLY(r, i),
				   id->nvlink_count > 0 ? (uint64_t)id->nvlink_count : 0);
	}
	char peer[24];
	for (int i = 0; i < r->n; i++) {
		const struct gpu_identity *id = &r->snap[i].id;
		for (int k = 0; k < id->npeers && k < GPU_MAX - 1; k++) {
			const struct gpu_peer *p = &id->peers[k];
			if (p->level >= 0)
				metric_u64(s, &F[MF_GPU_TOPOLOGY],
					   GPU_VALUES(r, i, digits(peer, p->index >= 0 ? (uint64_t)p->index : 0),
						      topology_level_name(p->level)),
					   1);
		}
	}
	for (int i = 0; i < r->n; i++) {
		const struct gpu_identity *id = &r->snap[i].id;
		for (int k = 0; k < id->npeers && k < GPU_MAX - 1; k++) {
			const struct gpu_peer *p = &id->peers[k];
			if (p->nvlinks >= 0)
				metric_u64(s, &F[MF_GPU_NVLINK_PEER],
					   GPU_VALUES(r, i, digits(peer, p->index >= 0 ? (uint64_t)p->index : 0)),
					   (uint64_t)p->nvlinks);
		}
	}
}

static bool same_metric(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* The field table's families: consecutive rows sharing a metric name.
 * Text only: the table (collect/fields.h) is their declaration, with
 * their labels as text, and the store takes them from the bus
 * (store/ingest.c), so the store's pass (prom_emit) leaves them out. */
static void render_fields(struct render *r)
{
	struct pw *w = &r->w;
	for (int f = 0; f < FIELD_COUNT;) {
		const struct field_info *fi = &field_table[f];
		int end = f + 1;
		while (end < FIELD_COUNT && same_metric(field_table[end].metric, fi->metric))
			end++;
		if (fi->metric) {
			family(w, fi->metric, fi->type == METRIC_COUNTER ? T_COUNTER : T_GAUGE,
			       fi->help);
			for (int i = 0; i < r->n; i++) {
				const struct gpu_snapshot *s = &r->snap[i];
				for (int g = f; g < end; g++) {
					if (!(s->valid & FIELD_BIT(g)))
						continue;
					gpu_sample(r, i);
					if (field_table[g].labels[0]) {
						PUT_LIT(w, ",");
						put_str(w, field_table[g].labels);
					}
					end_value(w, s->v[g]);
				}
			}
		}
		f = end;
	}
}

static void emit_throttle(struct render *r, struct metric_sink *s)
{
	for (int i = 0; i < r->n; i++) {
		const struct gpu_snapshot *g = &r->snap[i];
		if (!(g->valid & FIELD_BIT(F_CLOCK_REASONS)))
			continue;
		double v = g->v[F_CLOCK_REASONS];
		uint64_t mask = (v >= 0 && v < 18446744073709551616.0) ? (uint64_t)v : 0;
		for (int k = 0; k < clock_reason_count; k++)
			metric_u64(s, &metric_families[MF_GPU_THROTTLE],
				   GPU_VALUES(r, i, clock_reason_table[k].label),
				   (mask & clock_reason_table[k].bit) != 0);
	}
}

/* The live diagnosis's verdict on the last complete window: 1 for the
 * class, 0 for the others, so rules and dashboards can select on it. */
static void emit_bottleneck(struct render *r, struct metric_sink *s)
{
	const struct metric_family *F = metric_families;
	for (int i = 0; i < r->n; i++) {
		const struct gpu_snapshot *g = &r->snap[i];
		if (g->diag_class < 0)
			continue;
		for (int c = 0; c < DIAG_CLASS_COUNT; c++)
			metric_u64(s, &F[MF_GPU_BOTTLENECK],
				   GPU_VALUES(r, i, diag_class_name((enum diag_class)c)),
				   c == g->diag_class);
	}
	for (int i = 0; i < r->n; i++) {
		const struct gpu_snapshot *g = &r->snap[i];
		if (g->diag_class < 0)
			continue;
		for (int f = 0; f < DIAG_FINDING_COUNT; f++)
			metric_u64(s, &F[MF_GPU_FINDING],
				   GPU_VALUES(r, i, diag_finding_name((enum diag_finding)f)),
				   (g->diag_findings & DIAG_FINDING_BIT(f)) != 0);
	}
}

/* The health score (src/diagnose/health.h, docs/internals/health.md):
 * the score, the points each reason took off, and 1 for the reason a GPU
 * should be drained for (the dearest draining one), so a rule can say
 * "drain this GPU" with its reason. Only GPUs scored at least once. */
static void emit_health_score(struct render *r, struct metric_sink *s)
{
	const struct metric_family *F = metric_families;
	for (int i = 0; i < r->n; i++)
		if (r->snap[i].health_score.valid)
			metric_f64(s, &F[MF_GPU_HEALTH_SCORE], GPU_ONLY(r, i),
				   r->snap[i].health_score.score);
	for (int i = 0; i < r->n; i++) {
		const struct gpu_health_score *h = &r->snap[i].health_score;
		if (!h->valid)
			continue;
		for (int k = 0; k < HEALTH_REASON_COUNT; k++)
			metric_f64(s, &F[MF_GPU_HEALTH_PENALTY], GPU_VALUES(r, i, health_reason_name(k)),
				   h->penalty[k]);
	}
	for (int i = 0; i < r->n; i++) {
		const struct gpu_health_score *h = &r->snap[i].health_score;
		if (h->valid)
			metric_u64(s, &F[MF_GPU_HEALTH_DRAIN],
				   GPU_VALUES(r, i, h->drain && h->top_reason >= 0
							    ? health_reason_name(h->top_reason)
							    : "none"),
				   h->drain);
	}
}

/* Whether the sink keeps family f's samples (common/metric.h, wants). */
static bool sink_wants(struct metric_sink *s, const struct metric_family *f)
{
	return !s->ops->wants || s->ops->wants(s, f->name);
}

/* The anomaly detector's scores (src/anomaly), one sample per watched
 * metric whose value the GPU reports now. The store takes them from the
 * detector itself, so its sink does not want them: not computed then. */
static void emit_anomaly(struct render *r, struct metric_sink *s, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	if (!self || !self->anomaly_scores)
		return;
	for (int i = 0; sink_wants(s, &F[MF_ANOMALY_SCORE]) && i < r->n; i++) {
		const struct gpu_snapshot *g = &r->snap[i];
		double sc[ANOMALY_WATCH_COUNT];
		if (self->anomaly_scores(self->anomaly_ctx, g->id.uuid, sc, ANOMALY_WATCH_COUNT) != 0)
			continue;
		for (int k = 0; k < ANOMALY_WATCH_COUNT; k++) {
			if (!isfinite(sc[k]) ||
			    !(g->valid & FIELD_BIT(anomaly_watch_field((enum anomaly_watch)k))))
				continue;
			metric_f64(s, &F[MF_ANOMALY_SCORE],
				   GPU_VALUES(r, i, anomaly_watch_name((enum anomaly_watch)k)), sc[k]);
		}
	}
	/* The detector's own counters; anomaly_ctx is its struct anomaly. */
	struct anomaly_stats st;
	anomaly_get_stats(self->anomaly_ctx, &st);
	metric_u64(s, &F[MF_ANOMALY_TICKS], NULL, st.ticks_total);
	metric_u64(s, &F[MF_ANOMALY_STORED], NULL, st.scores_appended_total);
	metric_u64(s, &F[MF_ANOMALY_STORE_ERRORS], NULL, st.store_errors_total);
	metric_u64(s, &F[MF_ANOMALY_MODEL_BYTES], NULL, st.model_bytes);
}

static void emit_events(struct render *r, struct metric_sink *s)
{
	const struct metric_family *F = metric_families;
	char code[24];
	for (int i = 0; i < r->n; i++) {
		const struct gpu_snapshot *g = &r->snap[i];
		for (int k = 0; k < g->nxid && k < GPU_XID_MAX; k++)
			metric_u64(s, &F[MF_GPU_XID], GPU_VALUES(r, i, digits(code, g->xid[k].code)),
				   g->xid[k].count);
		if (g->xid_other > 0)
			metric_u64(s, &F[MF_GPU_XID], GPU_VALUES(r, i, "other"), g->xid_other);
	}
	for (int i = 0; i < r->n; i++)
		metric_u64(s, &F[MF_GPU_LAST_XID], GPU_ONLY(r, i),
			   r->snap[i].last_xid_wall_ns ? r->snap[i].last_xid : 0);
	for (int i = 0; i < r->n; i++) {
		metric_u64(s, &F[MF_GPU_ECC_EVENTS], GPU_VALUES(r, i, "single_bit"),
			   r->snap[i].ecc_events[0]);
		metric_u64(s, &F[MF_GPU_ECC_EVENTS], GPU_VALUES(r, i, "double_bit"),
			   r->snap[i].ecc_events[1]);
	}
	for (int i = 0; i < r->n; i++)
		metric_u64(s, &F[MF_GPU_LOST], GPU_ONLY(r, i), r->snap[i].lost_total);
}

/* The values of MF_OWNER: each field of o in `mask` that is known, NULL
 * for the others. The values are UTF-8 and free of control bytes
 * already (owner.h's promise for struct proc_owner). */
static void owner_values(const char **out, const struct proc_owner *o, unsigned mask)
{
	for (int f = 0; f < OWNER_FIELD_COUNT; f++) {
		const char *v = mask & 1u << f ? owner_field_value(o, (enum owner_field)f) : NULL;
		out[f] = v && v[0] ? v : NULL;
	}
}

/* Whether a process on GPU snapshot s is the work of this allocation's
 * pod. A process in some pod whose name is not known might be, so it
 * makes the answer "not idle" too: idle is claimed only when sure. */
static bool pod_runs_on(const struct gpu_snapshot *s, const struct attrib_allocation *al)
{
	for (int k = 0; al->job[0] && k < s->nprocs && k < GPU_PROC_MAX; k++)
		if (strcmp(s->procs[k].owner.job, al->job) == 0)
			return true;
	if (al->job[0])
		return false;
	for (int k = 0; k < s->nprocs && k < GPU_PROC_MAX; k++) {
		const struct proc_owner *o = &s->procs[k].owner;
		if (!o->pod_uid[0])
			continue;
		if (!o->pod[0])
			return true;
		if (strcmp(o->pod, al->pod) == 0 && strcmp(o->namespace_, al->namespace_) == 0)
			return true;
	}
	return false;
}

/* A label set built up for one sample: the GPU's, then the family's own
 * in the order it declares them. */
struct vals {
	const char *v[METRIC_MAX_LABELS];
	size_t n;
};

static void vals_gpu(struct vals *x, const struct render *r, int i)
{
	const struct gpu_base *g = &r->base[i];
	*x = (struct vals){.n = 0}; /* labels not added: not carried */
	x->v[0] = g->index;
	x->v[1] = g->uuid;
	x->v[2] = g->model;
	x->v[3] = g->source;
	x->n = MF_GPU_BASE_LABELS;
}

static void vals_add(struct vals *x, const char *v)
{
	if (x->n < METRIC_MAX_LABELS)
		x->v[x->n++] = v;
}

static void vals_owner(struct vals *x, const struct proc_owner *o, unsigned mask)
{
	if (x->n + OWNER_FIELD_COUNT <= METRIC_MAX_LABELS) {
		owner_values(x->v + x->n, o, mask);
		x->n += OWNER_FIELD_COUNT;
	}
}

/* MF_HOLDER (job, job_user | pod, namespace), cleaned into t[0..2). */
static void vals_holder(struct vals *x, label_text t[2], const char *job, const char *job_user,
			const char *pod, const char *ns)
{
	bool is_job = job[0];
	vals_add(x, is_job ? clean(t[0], job) : NULL);
	vals_add(x, is_job ? clean(t[1], job_user) : NULL);
	vals_add(x, is_job ? NULL : clean(t[0], pod));
	vals_add(x, is_job ? NULL : clean(t[1], ns));
}

/* gpulse_process_info (every known field of every process) and the
 * pod-resources allocations: which pod's container holds each GPU, and
 * whether it runs anything there. */
static void emit_attribution(struct render *r, struct metric_sink *s, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	char pid[24];
	for (int i = 0; i < r->n; i++) {
		const struct gpu_snapshot *g = &r->snap[i];
		if (!g->procs_valid)
			continue;
		for (int k = 0; k < g->nprocs && k < GPU_PROC_MAX; k++) {
			const struct gpu_process *p = &g->procs[k];
			if (!p->owner.resolved)
				continue;
			struct vals x;
			vals_gpu(&x, r, i);
			vals_add(&x, digits(pid, p->pid));
			vals_owner(&x, &p->owner, (1u << OWNER_FIELD_COUNT) - 1);
			metric_u64(s, &F[MF_PROC_INFO], x.v, 1);
		}
	}
	if (!self || !self->attrib)
		return;
	struct attrib_stats st;
	attrib_get_stats(self->attrib, &st);
	struct attrib_allocation *al = NULL;
	size_t nal = 0;
	if (st.podres_allocations > 0) {   /* pods' and Slurm jobs' */
		al = malloc(st.podres_allocations * sizeof *al);
		if (al)
			nal = attrib_allocations(self->attrib, al, st.podres_allocations);
	}
	label_text t[5]; /* holder (2), container, resource, device_id */
	for (size_t k = 0; k < nal; k++) {
		for (int i = 0; i < r->n; i++) {
			if (!gpu_snapshot_holds(&r->snap[i], &al[k]))
				continue;
			struct vals x;
			vals_gpu(&x, r, i);
			vals_holder(&x, t, al[k].job, al[k].job_user, al[k].pod, al[k].namespace_);
			vals_add(&x, al[k].job[0] ? NULL : clean(t[2], al[k].container));
			vals_add(&x, clean(t[3], al[k].resource));
			vals_add(&x, al[k].device_id[0] ? clean(t[4], al[k].device_id) : NULL);
			metric_u64(s, &F[MF_GPU_ALLOCATION], x.v, 1);
		}
	}
	for (size_t k = 0; k < nal; k++) {
		for (int i = 0; i < r->n; i++) {
			const struct gpu_snapshot *g = &r->snap[i];
			if (!g->procs_valid || !gpu_snapshot_holds(g, &al[k]))
				continue;
			/* One sample per (GPU, pod, container): replicas of a
			 * time-sliced GPU held by the same container count once. */
			bool seen = false;
			for (size_t j = 0; j < k && !seen; j++)
				seen = gpu_snapshot_holds(g, &al[j]) && strcmp(al[j].job, al[k].job) == 0 &&
				       strcmp(al[j].pod, al[k].pod) == 0 &&
				       strcmp(al[j].namespace_, al[k].namespace_) == 0 &&
				       strcmp(al[j].container, al[k].container) == 0;
			if (seen)
				continue;
			struct vals x;
			vals_gpu(&x, r, i);
			vals_holder(&x, t, al[k].job, al[k].job_user, al[k].pod, al[k].namespace_);
			vals_add(&x, al[k].job[0] ? NULL : clean(t[2], al[k].container));
			metric_u64(s, &F[MF_GPU_ALLOCATED_IDLE], x.v, !pod_runs_on(g, &al[k]));
		}
	}
	free(al);
	metric_u64(s, &F[MF_ATTRIB_RESOLVED], NULL, st.resolved_total);
	metric_u64(s, &F[MF_ATTRIB_HITS], NULL, st.cache_hits_total);
	metric_u64(s, &F[MF_ATTRIB_EVICTIONS], NULL, st.cache_evictions_total);
	metric_u64(s, &F[MF_ATTRIB_ERRORS], (const char *const[]){"proc"}, st.proc_errors_total);
	metric_u64(s, &F[MF_ATTRIB_ERRORS], (const char *const[]){"cgroup"}, st.cgroup_errors_total);
	metric_u64(s, &F[MF_ATTRIB_ERRORS], (const char *const[]){"environ_queue_full"},
		   st.environ_skipped_total);
	metric_u64(s, &F[MF_ATTRIB_TRUNCATED], (const char *const[]){"label"},
		   st.labels_truncated_total);
	metric_u64(s, &F[MF_ATTRIB_TRUNCATED], (const char *const[]){"environ"},
		   st.environ_truncated_total);
	if (st.slurm_configured) {
		metric_u64(s, &F[MF_SLURM_JOBS], NULL, st.slurm_jobs);
		metric_u64(s, &F[MF_SLURM_SCAN_ERRORS], NULL, st.slurm_scan_errors_total);
	}
	if (!st.podres_configured)
		return;
	metric_u64(s, &F[MF_PODRES_UP], NULL, st.podres_available);
	metric_u64(s, &F[MF_PODRES_REFRESHES], (const char *const[]){"success"},
		   st.podres_refreshes_total);
	metric_u64(s, &F[MF_PODRES_REFRESHES], (const char *const[]){"failure"},
		   st.podres_failures_total);
	metric_u64(s, &F[MF_PODRES_ALLOCATIONS], NULL, st.podres_allocations);
	metric_u64(s, &F[MF_PODRES_DROPPED], NULL, st.podres_allocations_dropped_total);
}

/* Per MIG instance: identity, memory, GPM where the driver offers it. */
static void emit_mig(struct render *r, struct metric_sink *s)
{
	static const enum metric_family_id gpm[MIG_GPM_COUNT] = {
		[MIG_GPM_SM_ACTIVE] = MF_MIG_SM_ACTIVE,
		[MIG_GPM_SM_OCCUPANCY] = MF_MIG_SM_OCCUPANCY,
		[MIG_GPM_TENSOR] = MF_MIG_TENSOR,
		[MIG_GPM_DRAM] = MF_MIG_DRAM,
	};
	const struct metric_family *F = metric_families;
	char gi[24], ci[24];
	label_text profile, uuid;
#define MIG_VALUES(r, i, m)                                                                 \
	GPU_VALUES(r, i, digits(gi, (m)->gpu_instance), digits(ci, (m)->compute_instance), \
		   clean(profile, (m)->profile), clean(uuid, (m)->uuid))
	for (int i = 0; i < r->n; i++) {
		const struct gpu_snapshot *g = &r->snap[i];
		for (int k = 0; g->mig_valid && k < g->nmig && k < GPU_MIG_MAX; k++)
			metric_u64(s, &F[MF_MIG_INFO], MIG_VALUES(r, i, &g->mig[k]), 1);
	}
	for (int m = 0; m < 2; m++) {
		for (int i = 0; i < r->n; i++) {
			const struct gpu_snapshot *g = &r->snap[i];
			for (int k = 0; g->mig_valid && k < g->nmig && k < GPU_MIG_MAX; k++) {
				const struct gpu_mig *mi = &g->mig[k];
				if (mi->mem_valid)
					metric_u64(s, &F[m ? MF_MIG_MEM_TOTAL : MF_MIG_MEM_USED],
						   MIG_VALUES(r, i, mi),
						   m ? mi->mem_total_bytes : mi->mem_used_bytes);
			}
		}
	}
	for (int q = 0; q < MIG_GPM_COUNT; q++) {
		for (int i = 0; i < r->n; i++) {
			const struct gpu_snapshot *g = &r->snap[i];
			for (int k = 0; g->mig_valid && k < g->nmig && k < GPU_MIG_MAX; k++) {
				const struct gpu_mig *mi = &g->mig[k];
				if (mi->gpm_valid & 1u << q)
					metric_f64(s, &F[gpm[q]], MIG_VALUES(r, i, mi), mi->gpm[q]);
			}
		}
	}
#undef MIG_VALUES
}

/* A process's labels, made once per render for its three families. */
struct proc_vals {
	char pid[24], gi[24];
	label_text comm;
	struct vals x;
};

static void emit_processes(struct render *r, struct metric_sink *s)
{
	static const enum metric_family_id fams[] = {MF_PROC_MEMORY, MF_PROC_SM, MF_PROC_MEMUTIL};
	const struct metric_family *F = metric_families;
	size_t np = 0;
	for (int i = 0; i < r->n; i++)
		if (r->snap[i].procs_valid)
			np += (size_t)(r->snap[i].nprocs < GPU_PROC_MAX ? r->snap[i].nprocs : GPU_PROC_MAX);
	struct proc_vals *pv = np ? malloc(np * sizeof *pv) : NULL;
	if (np && !pv)
		np = 0;
	size_t j = 0;
	for (int i = 0; i < r->n && j < np; i++) {
		const struct gpu_snapshot *g = &r->snap[i];
		if (!g->procs_valid)
			continue;
		for (int k = 0; k < g->nprocs && k < GPU_PROC_MAX; k++, j++) {
			const struct gpu_process *p = &g->procs[k];
			struct proc_vals *q = &pv[j];
			char raw[GPU_COMM_LEN + 1];
			memcpy(raw, p->comm, GPU_COMM_LEN);
			raw[GPU_COMM_LEN] = '\0';
			vals_gpu(&q->x, r, i);
			vals_add(&q->x, digits(q->pid, p->pid));
			vals_add(&q->x, clean(q->comm, raw));
			/* the MIG instance it runs in */
			vals_add(&q->x, p->in_mig ? digits(q->gi, (uint64_t)p->gpu_instance) : NULL);
			vals_owner(&q->x, &p->owner, p->owner.labels);
		}
	}
	for (int m = 0; m < 3; m++) {
		j = 0;
		for (int i = 0; i < r->n && j < np; i++) {
			const struct gpu_snapshot *g = &r->snap[i];
			if (!g->procs_valid)
				continue;
			for (int k = 0; k < g->nprocs && k < GPU_PROC_MAX; k++, j++) {
				const struct gpu_process *p = &g->procs[k];
				if (m == 0 ? !p->mem_valid : !p->util_valid)
					continue;
				if (m == 0)
					metric_u64(s, &F[fams[m]], pv[j].x.v, p->used_bytes);
				else
					metric_f64(s, &F[fams[m]], pv[j].x.v,
						   m == 1 ? p->sm_ratio : p->mem_ratio);
			}
		}
	}
	free(pv);
	for (int i = 0; i < r->n; i++)
		if (r->snap[i].procs_valid && r->snap[i].procs_dropped != 0)
			metric_u64(s, &F[MF_GPU_PROCS_DROPPED], GPU_ONLY(r, i), r->snap[i].procs_dropped);
	for (int i = 0; i < r->n; i++)
		for (int t = 0; t < TIER_COUNT; t++)
			metric_u64(s, &F[MF_GPU_SAMPLES], GPU_VALUES(r, i, tier_name((enum tier)t)),
				   r->snap[i].samples[t]);
}

/* ---- activity per process (src/attrib/tenants.h) ---------------------- */

/* The render index of the GPU with NVML index `gpu`, or -1. */
static int snap_of(const struct render *r, int gpu)
{
	for (int i = 0; i < r->n; i++)
		if (r->snap[i].id.index == gpu)
			return i;
	return -1;
}

/* A GPU's activity parts are shown only while its state is: up, its
 * process list read, nothing late (DESIGN.md, decision 2: stale data is
 * not served as current). Counters stay. */
static bool tenants_fresh(const struct gpu_snapshot *s)
{
	return s->health == GPU_HEALTH_UP && s->procs_valid && !gpu_snapshot_is_stale(s);
}

/* A row's labels: pid (or "other"), comm, gpu_instance, source (when
 * asked), its owner's. `pid`, `gi` and `comm` hold their text. */
static void vals_row(struct vals *x, const struct tenants_row *t, bool source, char pid[24],
		     char gi[24], label_text comm)
{
	vals_add(x, t->pid ? digits(pid, t->pid) : "other");
	vals_add(x, clean(comm, t->comm));
	vals_add(x, t->in_mig ? digits(gi, (uint64_t)t->gpu_instance) : NULL);
	if (source)
		vals_add(x, split_source_name(t->source));
	if (t->pid)
		vals_owner(x, &t->owner, t->owner.labels);
}

static void vals_group(struct vals *x, const struct tenants_group *g, bool source, char gi[24])
{
	vals_add(x, g->in_mig ? digits(gi, (uint64_t)g->gpu_instance) : NULL);
	if (source)
		vals_add(x, split_source_name(g->source));
	vals_owner(x, &g->owner, g->owner.labels);
}

/* Allocated but idle from the split (tenants_hold): each workload that
 * holds a GPU, while the GPU is fresh and its SM activity was split. */
static void emit_holders(struct render *r, struct metric_sink *s, struct tenants *t,
			 const struct tenants_stats *st)
{
	const struct metric_family *F = metric_families;
	struct tenants_holder *h = st->holders ? malloc(st->holders * sizeof *h) : NULL;
	size_t n = h ? tenants_holders(t, h, st->holders) : 0;
	n = n < st->holders ? n : st->holders;
	label_text lt[2];
	for (int m = 0; m < 2; m++) {
		for (size_t k = 0; k < n; k++) {
			int i = snap_of(r, h[k].gpu);
			if (i < 0 || !h[k].current || !h[k].judged || !tenants_fresh(&r->snap[i]))
				continue;
			struct vals x;
			vals_gpu(&x, r, i);
			vals_holder(&x, lt, h[k].job, h[k].job_user, h[k].pod, h[k].namespace_);
			if (m == 0)
				metric_u64(s, &F[MF_WORKLOAD_IDLE], x.v, h[k].idle);
			else
				metric_f64(s, &F[MF_WORKLOAD_IDLE_FOR], x.v, h[k].low_s);
		}
	}
	metric_u64(s, &F[MF_WORKLOAD_HOLDERS_DROPPED], NULL, st->holders_dropped_total);
	free(h);
}

static void emit_tenants(struct render *r, struct metric_sink *s, const struct self_stats *self)
{
	if (!self || !self->tenants)
		return;
	const struct metric_family *F = metric_families;
	struct tenants_stats st;
	tenants_get_stats(self->tenants, &st);
	struct tenants_row *rows = st.rows ? malloc(st.rows * sizeof *rows) : NULL;
	struct tenants_group *groups = st.groups ? malloc(st.groups * sizeof *groups) : NULL;
	size_t nr = rows ? tenants_rows(self->tenants, rows, st.rows) : 0;
	size_t ng = groups ? tenants_groups(self->tenants, groups, st.groups) : 0;
	nr = nr < st.rows ? nr : st.rows;
	ng = ng < st.groups ? ng : st.groups;
	static const enum metric_family_id proc[SPLIT_METRIC_COUNT] = {
		[SPLIT_SM] = MF_PROC_SM_ACTIVE, [SPLIT_TENSOR] = MF_PROC_TENSOR_ACTIVE,
		[SPLIT_DRAM] = MF_PROC_DRAM,
	};
	static const enum metric_family_id group[SPLIT_METRIC_COUNT] = {
		[SPLIT_SM] = MF_WORKLOAD_SM_ACTIVE, [SPLIT_TENSOR] = MF_WORKLOAD_TENSOR_ACTIVE,
		[SPLIT_DRAM] = MF_WORKLOAD_DRAM,
	};
	char pid[24], gi[24];
	label_text comm;
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
		for (size_t k = 0; k < nr; k++) {
			int i = snap_of(r, rows[k].gpu);
			if (i < 0 || !rows[k].current || !(rows[k].valid & 1u << m) ||
			    !tenants_fresh(&r->snap[i]))
				continue;
			struct vals x;
			vals_gpu(&x, r, i);
			vals_row(&x, &rows[k], true, pid, gi, comm);
			metric_f64(s, &F[proc[m]], x.v, rows[k].ratio[m]);
		}
	}
	for (size_t k = 0; k < nr; k++) {
		int i = snap_of(r, rows[k].gpu);
		if (i < 0)
			continue;
		struct vals x;
		vals_gpu(&x, r, i);
		vals_row(&x, &rows[k], false, pid, gi, comm);
		metric_f64(s, &F[MF_PROC_GPU_TIME], x.v, rows[k].gpu_time_s);
	}
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
		for (size_t k = 0; k < ng; k++) {
			int i = snap_of(r, groups[k].gpu);
			if (i < 0 || !groups[k].current || !(groups[k].valid & 1u << m) ||
			    !tenants_fresh(&r->snap[i]))
				continue;
			struct vals x;
			vals_gpu(&x, r, i);
			vals_group(&x, &groups[k], true, gi);
			metric_f64(s, &F[group[m]], x.v, groups[k].ratio[m]);
		}
	}
	for (size_t k = 0; k < ng; k++) {
		int i = snap_of(r, groups[k].gpu);
		if (i < 0)
			continue;
		struct vals x;
		vals_gpu(&x, r, i);
		vals_group(&x, &groups[k], false, gi);
		metric_f64(s, &F[MF_WORKLOAD_GPU_TIME], x.v, groups[k].gpu_time_s);
	}
	emit_holders(r, s, self->tenants, &st);
	metric_u64(s, &F[MF_PROC_ACTIVITY_ROWS], NULL, st.rows);
	metric_u64(s, &F[MF_PROC_ACTIVITY_FOLDED], NULL, st.folded_total);
	metric_f64(s, &F[MF_PROC_ACTIVITY_SPLIT], NULL, (double)st.split_ns_total / 1e9);
	free(rows);
	free(groups);
}

/* ---- daemon families ------------------------------------------------- */

static const char *mode_name(enum daemon_mode m)
{
	return m == MODE_NVML ? "nvml" : m == MODE_REPLAY ? "replay" : "none";
}

/* The daemon's families (export/families.h) into `s`: `ngpus` attached,
 * `nstale` of them stale. */
static void emit_daemon(struct metric_sink *s, int ngpus, int nstale,
			const struct collector_stats *cs, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	char version[256];
	utf8_clean(version, sizeof version, GPULSE_VERSION);
	metric_u64(s, &F[MF_BUILD_INFO], (const char *const[]){version}, 1);
	if (self) {
		char detail[sizeof self->mode_detail], clean[256];
		const char *mode = mode_name(self_stats_get_mode(self, detail, sizeof detail, NULL));
		utf8_clean(clean, sizeof clean, detail);
		metric_u64(s, &F[MF_MODE_INFO], (const char *const[]){mode, clean}, 1);
		metric_f64(s, &F[MF_START_TIME], NULL, (double)self->start_wall_ns / 1e9);
	}
	metric_u64(s, &F[MF_GPUS], NULL, (uint64_t)ngpus);
	metric_u64(s, &F[MF_GPUS_STALE], NULL, (uint64_t)nstale);
	if (!cs)
		return;
	metric_u64(s, &F[MF_LANES], NULL, cs->lanes_alive > 0 ? (uint64_t)cs->lanes_alive : 0);
	metric_u64(s, &F[MF_LANES_STARTED], NULL, cs->lanes_started);
	metric_u64(s, &F[MF_STALLS], NULL, cs->stalls);
	metric_u64(s, &F[MF_HANDOFFS], NULL, cs->handoffs);
	metric_u64(s, &F[MF_REDISCOVERIES], NULL, cs->rediscoveries);
	for (int t = 0; t < TIER_COUNT; t++)
		metric_u64(s, &F[MF_SWEEPS], (const char *const[]){tier_name((enum tier)t)},
			   cs->sweeps[t]);
	for (int k = 0; k < AG_COUNT; k++)
		metric_u64(s, &F[MF_ADAPTIVE_READS],
			   (const char *const[]){adapt_group_key((enum adapt_group)k)},
			   cs->adaptive_reads[k]);
	for (int k = 0; k < AG_COUNT; k++)
		metric_u64(s, &F[MF_ADAPTIVE_SKIPS],
			   (const char *const[]){adapt_group_key((enum adapt_group)k)},
			   cs->adaptive_skips[k]);
	for (int k = 0; k < AC_COUNT; k++)
		metric_u64(s, &F[MF_MOVES], (const char *const[]){adapt_cause_key((enum adapt_cause)k)},
			   cs->moves[k]);
	metric_u64(s, &F[MF_GPUS_MOVING], NULL, (uint64_t)cs->gpus_moving);
	metric_u64(s, &F[MF_EVENTS], NULL, cs->events);
	metric_u64(s, &F[MF_EVENT_ERRORS], NULL, cs->event_errors);
}

#define LE_VALUE(x) x,
static const double latency_le[NVML_LATENCY_BUCKET_COUNT] = {NVML_LATENCY_BUCKETS(LE_VALUE)};
#undef LE_VALUE
_Static_assert(sizeof latency_le / sizeof latency_le[0] == NVML_LATENCY_BUCKET_COUNT,
	       "NVML_LATENCY_BUCKET_COUNT matches NVML_LATENCY_BUCKETS");

/* The le label values, formatted once: Go's shortest form ("2.5e-05") in
 * the text format, and with ".0" on integers as OpenMetrics wants. */
static char le_text[2][NVML_LATENCY_BUCKET_COUNT][32];
static pthread_once_t le_once = PTHREAD_ONCE_INIT;

static void le_fill(void)
{
	for (int k = 0; k < NVML_LATENCY_BUCKET_COUNT; k++) {
		struct buf b;
		buf_init(&b, 30);
		if (buf_put_double(&b, latency_le[k]) == 0 && b.data) {
			memcpy(le_text[0][k], b.data, b.len + 1);
			memcpy(le_text[1][k], b.data, b.len + 1);
			if (!strpbrk(b.data, ".eIN"))
				memcpy(le_text[1][k] + b.len, ".0", 3);
		}
		buf_free(&b);
	}
}

static uint64_t ld(const atomic_uint_fast64_t *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

static void emit_nvml(struct metric_sink *s, struct nvml_lib *nv)
{
	const struct metric_family *F = metric_families;
	uint64_t calls_seen[NVML_FN_COUNT];
	pthread_once(&le_once, le_fill);
	for (int fn = 0; fn < NVML_FN_COUNT; fn++)
		calls_seen[fn] = ld(&nv->stats[fn].calls);
	for (int fn = 0; fn < NVML_FN_COUNT; fn++)
		if (calls_seen[fn])
			metric_u64(s, &F[MF_NVML_CALLS], (const char *const[]){nvml_fn_name((enum nvml_fn)fn)},
				   calls_seen[fn]);
	for (int fn = 0; fn < NVML_FN_COUNT; fn++) {
		if (!calls_seen[fn])
			continue; /* an error is a call: counted before it */
		for (int c = 1; c < NVML_ERROR_CLASSES; c++) {
			uint64_t e = ld(&nv->stats[fn].errors[c]);
			if (!e)
				continue;
			const char *err = c == NVML_ERROR_CLASSES - 1 ? "OTHER"
								      : nvml_return_name((nvml_return_t)c);
			metric_u64(s, &F[MF_NVML_ERRORS],
				   (const char *const[]){nvml_fn_name((enum nvml_fn)fn), err}, e);
		}
	}
	const struct metric_family *h = &F[MF_NVML_DURATION];
	for (int fn = 0; fn < NVML_FN_COUNT; fn++) {
		const struct nvml_fn_stats *st = &nv->stats[fn];
		if (!calls_seen[fn])
			continue;
		const char *call = nvml_fn_name((enum nvml_fn)fn);
		/* Buckets before calls: nvml_account counts the call first, so
		 * the +Inf bucket read afterwards is never below the others. */
		uint64_t cum = 0;
		for (int k = 0; k < NVML_LATENCY_BUCKET_COUNT; k++) {
			cum += ld(&st->bucket[k]);
			s->ops->u64(s, h, "_bucket",
				    (const char *const[]){call, le_text[s->openmetrics][k]}, cum);
		}
		uint64_t calls = ld(&st->calls);
		uint64_t sum_ns = ld(&st->latency_ns_sum);
		if (calls < cum)
			calls = cum;
		s->ops->u64(s, h, "_bucket", (const char *const[]){call, "+Inf"}, calls);
		s->ops->f64(s, h, "_sum", (const char *const[]){call}, (double)sum_ns / 1e9);
		s->ops->u64(s, h, "_count", (const char *const[]){call}, calls);
	}
}

/* Resident and virtual size from /proc/self/statm, in bytes. */
static bool read_statm(uint64_t *rss, uint64_t *vsz)
{
	char tmp[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, tmp, sizeof tmp - 1);
	close(fd);
	if (n <= 0)
		return false;
	tmp[n] = '\0';
	char *end;
	unsigned long long size = strtoull(tmp, &end, 10);
	if (end == tmp)
		return false;
	char *p = end;
	unsigned long long res = strtoull(p, &end, 10);
	if (end == p)
		return false;
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		page = 4096;
	*vsz = size * (uint64_t)page;
	*rss = res * (uint64_t)page;
	return true;
}

/* The self-metrics up to the storage families into `s`. */
static void emit_self_head(struct metric_sink *s, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	metric_u64(s, &F[MF_SCRAPES], NULL, ld(&self->scrapes_total));
	metric_f64(s, &F[MF_SCRAPE_DURATION], NULL, (double)ld(&self->last_scrape_ns) / 1e9);
	metric_u64(s, &F[MF_HTTP_REQUESTS], NULL, ld(&self->http_requests_total));
	metric_u64(s, &F[MF_HTTP_REJECTED], NULL, ld(&self->http_rejected_total));
	static const char *const shed[SELF_HTTP_SHED_REASONS] = {
		"head_timeout", "evicted", "per_address", "busy",
	};
	for (int i = 0; i < SELF_HTTP_SHED_REASONS; i++)
		metric_u64(s, &F[MF_HTTP_SHED], &shed[i], ld(&self->http_shed_total[i]));
	static const char *const denied[SELF_HTTP_DENY_REASONS] = {
		"unauthorized", "forbidden", "client_certificate", "rate_limited",
		"login_limited",
	};
	for (int i = 0; i < SELF_HTTP_DENY_REASONS; i++)
		metric_u64(s, &F[MF_HTTP_DENIED], &denied[i], ld(&self->http_denied_total[i]));
	metric_u64(s, &F[MF_RELOADS], (const char *const[]){"success"}, ld(&self->reloads_ok_total));
	metric_u64(s, &F[MF_RELOADS], (const char *const[]){"failure"},
		   ld(&self->reloads_failed_total));
	metric_u64(s, &F[MF_RELOAD_OK], NULL,
		   atomic_load_explicit(&self->last_reload_ok, memory_order_relaxed) != 0);
	int64_t reload_ns = atomic_load_explicit(&self->last_reload_wall_ns, memory_order_relaxed);
	if (reload_ns > 0)
		metric_f64(s, &F[MF_RELOAD_TIME], NULL, (double)reload_ns / 1e9);
	if (!self->storage_stats)
		return;
	struct storage_self_stats st;
	memset(&st, 0, sizeof st);
	self->storage_stats(self->storage_ctx, &st);
	metric_u64(s, &F[MF_STORAGE_AVAILABLE], NULL, st.available);
	metric_u64(s, &F[MF_STORAGE_OPEN_ATTEMPTS], NULL, st.open_attempts_total);
	metric_u64(s, &F[MF_STORAGE_OPEN_FAILURES], NULL, st.open_failures_total);
	metric_u64(s, &F[MF_STORAGE_ERRORS], NULL, st.errors_total);
	metric_u64(s, &F[MF_STORAGE_APPENDED], NULL, st.samples_appended_total);
	metric_u64(s, &F[MF_STORAGE_DROPPED], NULL, st.samples_dropped_total);
	metric_u64(s, &F[MF_STORAGE_SERIES], NULL, st.series);
	metric_u64(s, &F[MF_STORAGE_HEAD_BYTES], NULL, st.head_bytes);
	metric_u64(s, &F[MF_STORAGE_DB_BYTES], NULL, st.db_bytes);
	metric_u64(s, &F[MF_STORAGE_CORRUPT], NULL, st.corrupt_chunks_total);
	metric_u64(s, &F[MF_STORAGE_OOO], NULL, st.samples_out_of_order_total);
	metric_u64(s, &F[MF_CLOCK_STEPS], NULL, st.clock_steps_total);
	metric_u64(s, &F[MF_STORAGE_FILE_LOST], NULL, st.file_lost_total);
	if (st.open) {
		metric_u64(s, &F[MF_SELF_SCRAPE_SERIES], NULL, st.self_scrape_series);
		metric_u64(s, &F[MF_SELF_SCRAPE_SAMPLES], NULL, st.self_scrape_samples_total);
		metric_u64(s, &F[MF_SELF_SCRAPE_REFUSED], NULL, st.self_scrape_refused_total);
	}
}

/* The process's own families into `s` (self may be NULL). */
static void emit_process(struct metric_sink *s, const struct self_stats *self)
{
	const struct metric_family *F = metric_families;
	metric_f64(s, &F[MF_PROCESS_CPU], NULL, (double)clock_process_cpu_ns() / 1e9);
	uint64_t rss, vsz;
	if (read_statm(&rss, &vsz)) {
		metric_u64(s, &F[MF_PROCESS_RSS], NULL, rss);
		metric_u64(s, &F[MF_PROCESS_VSZ], NULL, vsz);
	}
	if (self)
		metric_f64(s, &F[MF_PROCESS_START], NULL, (double)self->start_wall_ns / 1e9);
}

/* The self-metrics into `s`. */
static void emit_self(struct metric_sink *s, const struct self_stats *self)
{
	if (self) {
		emit_self_head(s, self);
		if (self->query_stats)
			emit_query_stats(s, self);
		if (self->rule_stats)
			emit_rule_stats(s, self);
		if (self->rule_alert_stats)
			emit_rule_alert_stats(s, self);
		if (self->notify_stats)
			emit_notify_stats(s, self);
	}
	emit_process(s, self);
}

/* ---- entry points ---------------------------------------------------- */

/* One render: the text (out) with every family written, or (out NULL)
 * every family but the fields' emitted to `direct`, the store's pass. */
static int render_all(struct buf *out, struct metric_sink *direct, struct bus *bus,
		      struct nvml_lib *nvml, const struct collector_stats *cs,
		      const struct self_stats *self, bool openmetrics)
{
	struct buf none;
	buf_init(&none, 1);
	struct render r = {.w = {.b = out ? out : &none, .om = openmetrics}};
	struct text_sink text = {.s = {.ops = &text_ops, .openmetrics = openmetrics}, .w = &r.w,
				 .r = &r};
	if (out && out->failed)
		return GPULSE_ELIMIT;
	if (!direct)
		direct = &text.s;
	pthread_once(&reg_once, reg_measure);
	buf_init(&r.labels, 1u << 20);
	r.n = bus ? bus_gpu_count(bus) : 0;
	if (r.n > GPU_MAX)
		r.n = GPU_MAX;
	if (r.n > 0) {
		r.snap = malloc((size_t)r.n * sizeof *r.snap);
		r.base = malloc((size_t)r.n * sizeof *r.base);
		if (!r.snap || !r.base) {
			r.w.rc = GPULSE_ENOMEM;
			goto out;
		}
		int got = 0;
		for (int i = 0; i < r.n; i++)
			if (bus_read(bus, i, &r.snap[got]) == 0)
				got++;
		r.n = got;
	}
	prepare_labels(&r);
	if (r.w.rc)
		goto out;

	/* One reservation sized from what will be written: about 4 KiB of
	 * samples per GPU plus its processes, and 1.8 KiB per NVML function
	 * called (its histogram). */
	size_t est = 8192 + (size_t)r.n * 4096 + r.labels.len * 56;
	for (int i = 0; i < r.n; i++)
		est += (r.snap[i].procs_valid ? (size_t)r.snap[i].nprocs * 1600 : 0) +
		       (r.snap[i].mig_valid ? (size_t)r.snap[i].nmig * 2000 : 0);
	if (nvml)
		for (int fn = 0; fn < NVML_FN_COUNT; fn++)
			est += ld(&nvml->stats[fn].calls) ? 1800 : 0;
	if (out && out->max > out->len) {
		size_t avail = out->max - out->len;
		buf_reserve(out, est < avail ? est : avail);
	}

	emit_health(&r, direct);
	emit_identity_numbers(&r, direct);
	emit_topology(&r, direct);
	if (out)
		render_fields(&r);
	emit_throttle(&r, direct);
	emit_bottleneck(&r, direct);
	emit_health_score(&r, direct);
	emit_anomaly(&r, direct, self);
	emit_events(&r, direct);
	emit_processes(&r, direct);
	emit_attribution(&r, direct, self);
	emit_tenants(&r, direct, self);
	emit_mig(&r, direct);
	int nstale = 0;
	for (int i = 0; i < r.n; i++)
		nstale += gpu_is_stale(&r.snap[i]);
	emit_daemon(direct, r.n, nstale, cs, self);
	if (nvml)
		emit_nvml(direct, nvml);
	emit_self(direct, self);
	if (self && self->profile_metrics)
		self->profile_metrics(self->profile_ctx, direct);
	if (out && openmetrics)
		PUT_LIT(&r.w, "# EOF\n");
out:
	if (out && out->data)
		out->data[out->len] = '\0';
	free(r.snap);
	free(r.base);
	buf_free(&r.labels);
	buf_free(&none);
	if (!r.w.rc && out && out->failed)
		r.w.rc = GPULSE_ELIMIT;
	return r.w.rc;
}

int prom_render(struct buf *out, struct bus *bus, struct nvml_lib *nvml,
		const struct collector_stats *cs, const struct self_stats *self,
		bool openmetrics)
{
	return render_all(out, NULL, bus, nvml, cs, self, openmetrics);
}

int prom_emit(struct metric_sink *s, struct bus *bus, struct nvml_lib *nvml,
	      const struct collector_stats *cs, const struct self_stats *self)
{
	return render_all(NULL, s, bus, nvml, cs, self, false);
}

int prom_emit_text(struct buf *out, bool openmetrics, prom_emit_fn *emit, void *ctx)
{
	struct render r = {.w = {.b = out, .om = openmetrics}};
	struct text_sink text = {.s = {.ops = &text_ops, .openmetrics = openmetrics}, .w = &r.w};
	if (out->failed)
		return GPULSE_ELIMIT;
	pthread_once(&reg_once, reg_measure);
	emit(ctx, &text.s);
	if (out->data)
		out->data[out->len] = '\0';
	if (!r.w.rc && out->failed)
		r.w.rc = GPULSE_ELIMIT;
	return r.w.rc;
}

/* ---- content negotiation --------------------------------------------- */

struct pref {
	int spec;    /* -1 unmatched; 0 "* / *", 1 "type/ *", 2 exact */
	double q;
	int pos;     /* index of the media range that set it */
};

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* A token ends at a separator that matters to Accept. */
static size_t token_len(const char *p)
{
	size_t n = 0;
	while (p[n] && !is_ows(p[n]) && p[n] != ',' && p[n] != ';' && p[n] != '=')
		n++;
	return n;
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), read
 * leniently (more digits allowed); -1 when it is not a number in [0, 1]. */
static double parse_q(const char *p, size_t n)
{
	if (n == 0 || (p[0] != '0' && p[0] != '1'))
		return -1;
	double q = p[0] - '0', scale = 0.1;
	if (n == 1)
		return q;
	if (p[1] != '.')
		return -1;
	for (size_t i = 2; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		q += (p[i] - '0') * scale;
		scale /= 10;
	}
	return q > 1 ? -1 : q;
}

static bool token_is(const char *p, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

static void consider(struct pref *pr, int spec, double q, int pos)
{
	if (spec > pr->spec || (spec == pr->spec && q > pr->q)) {
		pr->spec = spec;
		pr->q = q;
		pr->pos = pos;
	}
}

bool prom_wants_openmetrics(const char *accept)
{
	struct pref om = {-1, 0, 0}, text = {-1, 0, 0};
	if (!accept)
		return false;
	const char *p = accept;
	for (int pos = 0; *p; pos++) {
		while (is_ows(*p) || *p == ',')
			p++;
		if (!*p)
			break;
		/* media-range: type "/" subtype, leniently split. */
		size_t tn = token_len(p);
		const char *type = p, *slash = memchr(p, '/', tn);
		size_t type_len = slash ? (size_t)(slash - p) : tn;
		const char *sub = slash ? slash + 1 : p + tn;
		size_t sub_len = slash ? tn - type_len - 1 : 0;
		p += tn;
		double q = 1;
		bool version_ok = true, bad = !slash;
		/* parameters: ; name = value, value a token or quoted string */
		for (;;) {
			while (is_ows(*p))
				p++;
			if (*p != ';')
				break;
			p++;
			while (is_ows(*p))
				p++;
			size_t nn = token_len(p);
			const char *name = p;
			p += nn;
			while (is_ows(*p))
				p++;
			const char *val = p;
			size_t vn = 0;
			if (*p == '=') {
				p++;
				while (is_ows(*p))
					p++;
				if (*p == '"') {
					val = ++p;
					while (*p && *p != '"') {
						if (*p == '\\' && p[1])
							p++;
						p++;
					}
					vn = (size_t)(p - val);
					if (*p == '"')
						p++;
				} else {
					val = p;
					vn = token_len(p);
					p += vn;
				}
			}
			if (token_is(name, nn, "q")) {
				q = parse_q(val, vn);
				if (q < 0)
					bad = true;
			} else if (token_is(name, nn, "version")) {
				version_ok = token_is(val, vn, "1.0.0") || token_is(val, vn, "0.0.1");
			}
		}
		/* Skip anything left of this range (junk) up to the next comma,
		 * stepping over quoted strings. */
		while (*p && *p != ',') {
			if (*p == '"') {
				bad = true;
				p++;
				while (*p && *p != '"') {
					if (*p == '\\' && p[1])
						p++;
					p++;
				}
				if (*p)
					p++;
				continue;
			}
			if (!is_ows(*p))
				bad = true;
			p++;
		}
		if (bad)
			continue;
		bool star_type = token_is(type, type_len, "*");
		bool star_sub = token_is(sub, sub_len, "*");
		if (star_type && star_sub) {
			consider(&om, 0, q, pos);
			consider(&text, 0, q, pos);
		} else if (token_is(type, type_len, "application")) {
			if (star_sub)
				consider(&om, 1, q, pos);
			else if (token_is(sub, sub_len, "openmetrics-text") && version_ok)
				consider(&om, 2, q, pos);
		} else if (token_is(type, type_len, "text")) {
			if (star_sub)
				consider(&text, 1, q, pos);
			else if (token_is(sub, sub_len, "plain"))
				consider(&text, 2, q, pos);
		}
	}
	double oq = om.spec >= 0 ? om.q : 0, tq = text.spec >= 0 ? text.q : 0;
	if (oq <= 0)
		return false;
	if (oq != tq)
		return oq > tq;
	/* A tie goes to the more specific range, then to the one listed first;
	 * "* / *" alone (equal in both) means the default, text. */
	if (om.spec != text.spec)
		return om.spec > text.spec;
	return om.pos < text.pos;
}
