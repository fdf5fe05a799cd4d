/* PromQL evaluator; see eval.h. Hand-written: it mirrors Prometheus 2.42's
 * promql/engine.go and functions.go (which C cannot link), keeping their
 * order of floating-point operations so results agree bit for bit.
 *
 * Memory: everything a query computes lives in arenas. The step arena is
 * emptied after each step of a range query; the result arena holds what
 * the caller gets back. Label strings are shared by pointer (into the
 * storage's series set, the AST or an arena) until the result is built,
 * which copies them, so the series set can be released at once.
 *
 * Why one file: it follows engine.go and functions.go as one unit: the
 * functions, aggregations and binary operators all run on the evaluator's
 * private arenas, series maps and step state, and keeping Prometheus's
 * order of operations is easiest read in one place; a split needs those
 * types in an internal header first. */
#include "promql/eval.h"

#include <ctype.h>
#include <math.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/gofloat.h"
#include "common/hash.h"
#include "promql/parser.h"
#include "common/quantile.h"
#include "common/rx.h"
#include "common/stale.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

/* Under AddressSanitizer the arena poisons what it has not handed out and
 * leaves a poisoned gap after each allocation, so a write past the end of
 * one arena array (a result vector sized too small) is reported like a
 * heap overflow instead of landing silently in the next allocation. */
#if defined(__SANITIZE_ADDRESS__)
#define EVAL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EVAL_ASAN 1
#endif
#endif
#ifdef EVAL_ASAN
#include <sanitizer/asan_interface.h>
#define ARENA_REDZONE sizeof(max_align_t)
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ARENA_REDZONE 0
#endif

/* ---- arena ---- */

struct chunk {
	struct chunk *next;
	size_t used, cap;
	max_align_t data[];
};

struct arena {
	struct chunk *head;
};

static void *arena_alloc(struct arena *a, size_t want)
{
	size_t n = (want + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
	if (n == 0)
		n = sizeof(max_align_t);
	n += ARENA_REDZONE;
	if (!a->head || a->head->cap - a->head->used < n) {
		size_t cap = n > 64 * 1024 ? n : 64 * 1024;
		struct chunk *c = xmalloc(sizeof *c + cap);
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		ASAN_POISON_MEMORY_REGION(c->data, cap);
		a->head = c;
	}
	void *p = (char *)a->head->data + a->head->used;
	a->head->used += n;
	ASAN_UNPOISON_MEMORY_REGION(p, want);
	return p;
}

static void *arena_calloc(struct arena *a, size_t count, size_t size)
{
	if (size && count > SIZE_MAX / size)
		abort();
	void *p = arena_alloc(a, count * size);
	memset(p, 0, count * size);
	return p;
}

static char *arena_strdup(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = arena_alloc(a, n);
	memcpy(p, s, n);
	return p;
}

static void arena_free(struct arena *a)
{
	while (a->head) {
		struct chunk *c = a->head;
		a->head = c->next;
		ASAN_UNPOISON_MEMORY_REGION(c->data, c->cap);
		free(c);
	}
}

/* ---- label sets ---- */

struct lset {
	const struct label *v;
	size_t n;
};

struct vsample {
	struct lset ls;
	double v;
	int64_t t; /* the sample's own time: set by instant selectors only (timestamp()) */
};

struct value {
	enum promql_type type;
	double scalar;
	const char *string;
	struct vsample *s;
	size_t n;
};

static const char *lset_get(struct lset ls, const char *name)
{
	for (size_t i = 0; i < ls.n; i++)
		if (strcmp(ls.v[i].name, name) == 0)
			return ls.v[i].value;
	return NULL;
}

static bool in_list(const char *name, char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/* Prometheus's labels.Compare. */
static int lset_cmp(struct lset a, struct lset b)
{
	size_t l = a.n < b.n ? a.n : b.n;
	for (size_t i = 0; i < l; i++) {
		int c = strcmp(a.v[i].name, b.v[i].name);
		if (c)
			return c;
		c = strcmp(a.v[i].value, b.v[i].value);
		if (c)
			return c;
	}
	return a.n < b.n ? -1 : a.n > b.n ? 1 : 0;
}

/* ---- query state ---- */

struct selection {
	const struct promql_expr *node;
	struct promql_series_set set;
	bool selected;
};

struct ev {
	const struct promql_queryable *q;
	void *qctx;
	struct promql_opts opts;
	struct arena step;
	int64_t ts;
	int64_t qstart, qend;      /* the query's start and end: @ start(), @ end() */
	struct selection *sel;
	size_t nsel, capsel;
	size_t loaded_samples;
	struct promql_sample *tmp; /* window of a range selector, reused */
	size_t tmpcap;
	bool watch;                /* a deadline or a cancel test is set */
	unsigned countdown;        /* series until the next ev_interrupted */
	int64_t next_poll_ns;      /* promql_check_stop's rate limit */
	int status;
	char err[512];
};

static void everr(struct ev *ev, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void everr(struct ev *ev, int status, const char *fmt, ...)
{
	if (ev->status)
		return;
	ev->status = status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ev->err, sizeof ev->err, fmt, ap);
	va_end(ap);
}

int promql_check_stop(const struct promql_opts *o, int64_t *next_poll_ns, const char *stage,
		      char *err, size_t errlen)
{
	if (!o->deadline_ns && !o->cancelled)
		return 0;
	int64_t now = clock_mono_ns();
	if (o->deadline_ns && now >= o->deadline_ns) {
		str_errf(err, errlen, "query timed out in %s", stage);
		return GPULSE_ETIMEDOUT;
	}
	if (o->cancelled && now >= *next_poll_ns) {
		*next_poll_ns = now + PROMQL_CANCEL_POLL_NS;
		if (o->cancelled(o->cancelled_ctx)) {
			str_errf(err, errlen, "query was canceled in %s", stage);
			return GPULSE_ECANCELED;
		}
	}
	return 0;
}

/* True when the query must stop (an error, the deadline, the caller
 * gone), recording why. Called once per step and per node evaluated;
 * ev_tick below for loops over series. */
static bool ev_interrupted(struct ev *ev)
{
	if (ev->status)
		return true;
	if (!ev->watch)
		return false;
	char msg[128];
	int rc = promql_check_stop(&ev->opts, &ev->next_poll_ns, "expression evaluation", msg,
				   sizeof msg);
	if (rc)
		everr(ev, rc, "%s", msg);
	return rc != 0;
}

/* ev_interrupted every 16 calls: for per-series loops, whose bodies can
 * be as cheap as one binary search. */
static bool ev_tick(struct ev *ev)
{
	if (!ev->watch)
		return ev->status != 0;
	if (ev->countdown-- > 0)
		return ev->status != 0;
	ev->countdown = 16;
	return ev_interrupted(ev);
}

/* Copy of ls without the labels the predicate rejects. */
static struct lset lset_filter(struct ev *ev, struct lset ls, bool drop_name, bool keep_mode,
			       char *const *names, size_t nnames)
{
	struct label *o = arena_alloc(&ev->step, (ls.n ? ls.n : 1) * sizeof *o);
	size_t n = 0;
	for (size_t i = 0; i < ls.n; i++) {
		bool is_name = strcmp(ls.v[i].name, "__name__") == 0;
		bool listed = in_list(ls.v[i].name, names, nnames);
		if (keep_mode ? !listed : (listed || (drop_name && is_name)))
			continue;
		o[n++] = ls.v[i];
	}
	return (struct lset){o, n};
}

static struct lset drop_name(struct ev *ev, struct lset ls)
{
	if (!lset_get(ls, "__name__"))
		return ls;
	return lset_filter(ev, ls, true, false, NULL, 0);
}

/* ls with name set to value (value "" deletes it). */
static struct lset lset_set(struct ev *ev, struct lset ls, const char *name, const char *value)
{
	struct label *o = arena_alloc(&ev->step, (ls.n + 1) * sizeof *o);
	size_t n = 0;
	bool done = value[0] == '\0';
	for (size_t i = 0; i < ls.n; i++) {
		int c = strcmp(ls.v[i].name, name);
		if (c == 0)
			continue;
		if (c > 0 && !done) {
			o[n++] = (struct label){name, value};
			done = true;
		}
		o[n++] = ls.v[i];
	}
	if (!done)
		o[n++] = (struct label){name, value};
	return (struct lset){o, n};
}

/* A byte string identifying a label set (or the matching labels of one):
 * names and values separated by 0xff, which valid UTF-8 never holds. */
static const char *sig(struct ev *ev, struct lset ls, bool on, char *const *names, size_t nnames)
{
	size_t len = 1;
	for (size_t i = 0; i < ls.n; i++)
		len += strlen(ls.v[i].name) + strlen(ls.v[i].value) + 2;
	char *s = arena_alloc(&ev->step, len);
	size_t n = 0;
	for (size_t i = 0; i < ls.n; i++) {
		const char *name = ls.v[i].name;
		bool listed = in_list(name, names, nnames);
		if (on ? !listed : (listed || strcmp(name, "__name__") == 0))
			continue;
		size_t a = strlen(name), b = strlen(ls.v[i].value);
		memcpy(s + n, name, a);
		n += a;
		s[n++] = '\xff';
		memcpy(s + n, ls.v[i].value, b);
		n += b;
		s[n++] = '\xff';
	}
	s[n] = '\0';
	return s;
}

static const char *full_key(struct ev *ev, struct lset ls)
{
	size_t len = 1;
	for (size_t i = 0; i < ls.n; i++)
		len += strlen(ls.v[i].name) + strlen(ls.v[i].value) + 2;
	char *s = arena_alloc(&ev->step, len);
	size_t n = 0;
	for (size_t i = 0; i < ls.n; i++) {
		size_t a = strlen(ls.v[i].name), b = strlen(ls.v[i].value);
		memcpy(s + n, ls.v[i].name, a);
		n += a;
		s[n++] = '\xff';
		memcpy(s + n, ls.v[i].value, b);
		n += b;
		s[n++] = '\xff';
	}
	s[n] = '\0';
	return s;
}

/* ---- a string-keyed hash map in the step arena ---- */

struct smap {
	const char **keys;
	size_t *vals;
	size_t cap, n;
};

static void smap_init(struct ev *ev, struct smap *m, size_t expect)
{
	m->cap = 16;
	while (m->cap < expect * 2 + 1)
		m->cap *= 2;
	m->keys = arena_calloc(&ev->step, m->cap, sizeof *m->keys);
	m->vals = arena_calloc(&ev->step, m->cap, sizeof *m->vals);
	m->n = 0;
}

/* The slot of key: found (keys[slot] != NULL) or where it would go. */
static size_t smap_slot(const struct smap *m, const char *key)
{
	size_t i = (size_t)fnv1a64_str(key) & (m->cap - 1);
	while (m->keys[i] && strcmp(m->keys[i], key) != 0)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static bool smap_get(const struct smap *m, const char *key, size_t *val)
{
	size_t i = smap_slot(m, key);
	if (!m->keys[i])
		return false;
	if (val)
		*val = m->vals[i];
	return true;
}

/* Insert; the map never fills because smap_init sized it for `expect`. */
static void smap_put(struct smap *m, const char *key, size_t val)
{
	size_t i = smap_slot(m, key);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
}

/* ---- Go's float semantics ---- */

static double go_max(double a, double b)
{
	if (isinf(a) && a > 0)
		return a;
	if (isinf(b) && b > 0)
		return b;
	if (isnan(a) || isnan(b))
		return NAN;
	if (a == 0 && a == b)
		return signbit(a) ? b : a;
	return a > b ? a : b;
}

static double go_min(double a, double b)
{
	if (isinf(a) && a < 0)
		return a;
	if (isinf(b) && b < 0)
		return b;
	if (isnan(a) || isnan(b))
		return NAN;
	if (a == 0 && a == b)
		return signbit(a) ? a : b;
	return a < b ? a : b;
}

/* Prometheus's vectorElemBinop: the value and, for comparisons, whether
 * the element is kept. */
static double elem_binop(enum promql_binop op, double l, double r, bool *keep)
{
	*keep = true;
	switch (op) {
	case PROMQL_OP_ADD: return l + r;
	case PROMQL_OP_SUB: return l - r;
	case PROMQL_OP_MUL: return l * r;
	case PROMQL_OP_DIV: return l / r;
	case PROMQL_OP_POW: return pow(l, r);
	case PROMQL_OP_MOD: return fmod(l, r);
	case PROMQL_OP_ATAN2: return atan2(l, r);
	case PROMQL_OP_EQL: *keep = l == r; return l;
	case PROMQL_OP_NEQ: *keep = l != r; return l;
	case PROMQL_OP_GTR: *keep = l > r; return l;
	case PROMQL_OP_LSS: *keep = l < r; return l;
	case PROMQL_OP_GTE: *keep = l >= r; return l;
	case PROMQL_OP_LTE: *keep = l <= r; return l;
	default: return NAN;
	}
}

static bool is_comparison(enum promql_binop op)
{
	return op >= PROMQL_OP_EQL && op <= PROMQL_OP_LTE;
}

static bool drops_name(enum promql_binop op)
{
	return op <= PROMQL_OP_POW;
}

/* ---- selection ---- */

static const struct promql_expr *unparen(const struct promql_expr *e)
{
	while (e->kind == PROMQL_NODE_PAREN)
		e = e->lhs;
	return e;
}

/* The time a selector or subquery is evaluated at: its @ time, or the
 * step's. */
static int64_t at_time(const struct ev *ev, const struct promql_expr *e)
{
	switch (e->at_mode) {
	case PROMQL_AT_TIME: return e->at_ms;
	case PROMQL_AT_START: return ev->qstart;
	case PROMQL_AT_END: return ev->qend;
	default: return ev->ts;
	}
}

/* at_time over the steps [start, end] of a query: the span it covers. */
static void at_span(const struct ev *ev, const struct promql_expr *e, int64_t *start, int64_t *end)
{
	if (e->at_mode != PROMQL_AT_NONE)
		*start = *end = at_time(ev, e);
}

static struct selection *find_sel(struct ev *ev, const struct promql_expr *node)
{
	for (size_t i = 0; i < ev->nsel; i++)
		if (ev->sel[i].node == node)
			return &ev->sel[i];
	return NULL;
}

/* Select every selector's series once for the whole query: from the
 * earliest sample any step can see to the latest. */
static void select_all(struct ev *ev, const struct promql_expr *e, int64_t start, int64_t end)
{
	if (!e || ev->status)
		return;
	if (e->kind == PROMQL_NODE_VECTOR_SEL || e->kind == PROMQL_NODE_MATRIX_SEL ||
	    e->kind == PROMQL_NODE_SUBQUERY)
		at_span(ev, e, &start, &end);
	if (e->kind == PROMQL_NODE_VECTOR_SEL || e->kind == PROMQL_NODE_MATRIX_SEL) {
		int64_t back = e->kind == PROMQL_NODE_MATRIX_SEL ? e->range_ms : ev->opts.lookback_ms;
		int64_t mint = start - e->offset_ms - back, maxt = end - e->offset_ms;
		if (ev->nsel == ev->capsel) {
			ev->capsel = ev->capsel ? ev->capsel * 2 : 8;
			ev->sel = xrealloc(ev->sel, ev->capsel * sizeof *ev->sel);
		}
		struct selection *s = &ev->sel[ev->nsel++];
		memset(s, 0, sizeof *s);
		s->node = e;
		char err[256] = "";
		/* Evaluated at one time, an instant selector needs only each
		 * series' newest sample. */
		bool latest = e->kind == PROMQL_NODE_VECTOR_SEL && start == end && ev->q->select_latest;
		int rc = (latest ? ev->q->select_latest : ev->q->select)(ev->qctx, e->matchers,
									e->nmatchers, mint, maxt,
									&s->set, err, sizeof err);
		if (rc) {
			ev->nsel--;
			/* A stop is the query's, not the store's: Prometheus's
			 * message as the adapter wrote it. */
			if (rc == GPULSE_ETIMEDOUT || rc == GPULSE_ECANCELED)
				everr(ev, rc, "%s", err);
			else
				everr(ev, rc, "storage: %s", err[0] ? err : gpulse_strerror(rc));
			return;
		}
		s->selected = true;
		if (s->set.nseries > ev->opts.max_series) {
			everr(ev, GPULSE_ELIMIT, "query selects more than %zu series (a selector matched %zu)",
			      ev->opts.max_series, s->set.nseries);
			return;
		}
		for (size_t i = 0; i < s->set.nseries; i++)
			ev->loaded_samples += s->set.series[i].nsamples;
		if (ev->loaded_samples > ev->opts.max_samples)
			everr(ev, GPULSE_ELIMIT, "query processing would load too many samples into memory in query execution (limit %zu)",
			      ev->opts.max_samples);
		ev_interrupted(ev); /* a slow select may have used up the time */
		return;
	}
	if (e->kind == PROMQL_NODE_SUBQUERY) {
		/* The inner expression is evaluated at the subquery's steps,
		 * up to its range before each evaluation time. */
		select_all(ev, e->lhs, start - e->offset_ms - e->range_ms, end - e->offset_ms);
		return;
	}
	select_all(ev, e->param, start, end);
	select_all(ev, e->lhs, start, end);
	select_all(ev, e->rhs, start, end);
	for (size_t i = 0; i < e->nargs; i++)
		select_all(ev, e->args[i], start, end);
}

/* The samples of series s in [mint, maxt], stale markers left out, in
 * ev->tmp. */
static size_t window(struct ev *ev, const struct promql_series *s, int64_t mint, int64_t maxt)
{
	size_t lo = 0, hi = s->nsamples;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->samples[mid].t_ms < mint)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t n = 0;
	for (size_t i = lo; i < s->nsamples && s->samples[i].t_ms <= maxt; i++) {
		if (stale_nan_is(s->samples[i].v))
			continue;
		if (n == ev->tmpcap) {
			ev->tmpcap = ev->tmpcap ? ev->tmpcap * 2 : 256;
			ev->tmp = xrealloc(ev->tmp, ev->tmpcap * sizeof *ev->tmp);
		}
		ev->tmp[n++] = s->samples[i];
	}
	return n;
}

static struct lset series_lset(const struct promql_series *s)
{
	return (struct lset){s->labels, s->nlabels};
}

/* ---- evaluation ---- */

static bool eval(struct ev *ev, const struct promql_expr *e, struct value *out);

static void vec_alloc(struct ev *ev, struct value *v, size_t cap)
{
	v->type = PROMQL_TYPE_VECTOR;
	v->s = arena_alloc(&ev->step, (cap ? cap : 1) * sizeof *v->s);
	v->n = 0;
}

static bool eval_vector_sel(struct ev *ev, const struct promql_expr *e, struct value *out)
{
	struct selection *sel = find_sel(ev, e);
	vec_alloc(ev, out, sel->set.nseries);
	int64_t ref = at_time(ev, e) - e->offset_ms;
	for (size_t i = 0; i < sel->set.nseries; i++) {
		if (ev_tick(ev))
			return false;
		const struct promql_series *s = &sel->set.series[i];
		/* The latest sample at or before ref... */
		size_t lo = 0, hi = s->nsamples;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (s->samples[mid].t_ms <= ref)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == 0)
			continue;
		const struct promql_sample *p = &s->samples[lo - 1];
		/* ...within the lookback delta (inclusive, as in 2.x), and not
		 * a staleness marker. */
		if (p->t_ms < ref - ev->opts.lookback_ms || stale_nan_is(p->v))
			continue;
		out->s[out->n++] = (struct vsample){series_lset(s), p->v, p->t_ms};
	}
	return true;
}

/* Prometheus's extrapolatedRate (rate, increase, delta). */
static bool extrapolated_rate(const struct promql_sample *p, size_t n, int64_t range_start,
			      int64_t range_end, int64_t range_ms, bool is_counter, bool is_rate, double *out)
{
	if (n < 2)
		return false;
	double result = p[n - 1].v - p[0].v;
	if (is_counter) {
		double last = 0;
		for (size_t i = 0; i < n; i++) {
			if (p[i].v < last)
				result += last;
			last = p[i].v;
		}
	}
	double to_start = (double)(p[0].t_ms - range_start) / 1000;
	double to_end = (double)(range_end - p[n - 1].t_ms) / 1000;
	double sampled = (double)(p[n - 1].t_ms - p[0].t_ms) / 1000;
	double avg_between = sampled / (double)(n - 1);
	if (is_counter && result > 0 && p[0].v >= 0) {
		double to_zero = sampled * (p[0].v / result);
		if (to_zero < to_start)
			to_start = to_zero;
	}
	double threshold = avg_between * 1.1;
	double interval = sampled;
	if (to_start < threshold)
		interval += to_start;
	else
		interval += avg_between / 2;
	if (to_end < threshold)
		interval += to_end;
	else
		interval += avg_between / 2;
	double factor = interval / sampled;
	if (is_rate)
		factor /= (double)range_ms / 1000;
	*out = result * factor;
	return true;
}

static void kahan_inc(double inc, double *sum, double *c)
{
	double t = *sum + inc;
	if (fabs(*sum) >= fabs(inc))
		*c += (*sum - t) + inc;
	else
		*c += (inc - t) + *sum;
	*sum = t;
}

static bool over_time(enum promql_func_id id, const struct promql_sample *p, size_t n, double q,
		      double *out)
{
	if (n == 0)
		return false;
	switch (id) {
	case PROMQL_FN_AVG_OVER_TIME: {
		/* Incremental mean with Kahan-Neumaier compensation, as the
		 * promtool we check against computes it. */
		double mean = 0, c = 0, count = 0;
		for (size_t i = 0; i < n; i++) {
			count++;
			if (isinf(mean)) {
				if (isinf(p[i].v) && (mean > 0) == (p[i].v > 0))
					continue;
				if (!isinf(p[i].v) && !isnan(p[i].v))
					continue;
			}
			kahan_inc(p[i].v / count - mean / count, &mean, &c);
		}
		*out = isinf(mean) ? mean : mean + c;
		return true;
	}
	case PROMQL_FN_MIN_OVER_TIME:
	case PROMQL_FN_MAX_OVER_TIME: {
		double m = p[0].v;
		for (size_t i = 0; i < n; i++) {
			bool better = id == PROMQL_FN_MAX_OVER_TIME ? p[i].v > m : p[i].v < m;
			if (better || isnan(m))
				m = p[i].v;
		}
		*out = m;
		return true;
	}
	case PROMQL_FN_SUM_OVER_TIME: {
		double sum = 0, c = 0;
		for (size_t i = 0; i < n; i++)
			kahan_inc(p[i].v, &sum, &c);
		*out = isinf(sum) ? sum : sum + c;
		return true;
	}
	case PROMQL_FN_COUNT_OVER_TIME:
		*out = (double)n;
		return true;
	case PROMQL_FN_STDDEV_OVER_TIME:
	case PROMQL_FN_STDVAR_OVER_TIME: {
		double count = 0, mean = 0, cmean = 0, aux = 0, caux = 0;
		for (size_t i = 0; i < n; i++) {
			count++;
			double delta = p[i].v - (mean + cmean);
			kahan_inc(delta / count, &mean, &cmean);
			kahan_inc(delta * (p[i].v - (mean + cmean)), &aux, &caux);
		}
		double var = (aux + caux) / count;
		*out = id == PROMQL_FN_STDDEV_OVER_TIME ? sqrt(var) : var;
		return true;
	}
	case PROMQL_FN_QUANTILE_OVER_TIME: {
		double *v = xmalloc(n * sizeof *v);
		for (size_t i = 0; i < n; i++)
			v[i] = p[i].v;
		*out = quantile_of(v, n, q);
		free(v);
		return true;
	}
	case PROMQL_FN_LAST_OVER_TIME:
		*out = p[n - 1].v;
		return true;
	default:
		return false;
	}
}

/* Least-squares line through the samples, x in seconds from t0, as
 * Prometheus's linearRegression (compensated sums; a constant series has
 * slope 0 exactly, NaN when it is infinite). */
static void linear_regression(const struct promql_sample *p, size_t n, int64_t t0, double *slope,
			      double *intercept)
{
	double sx = 0, cx = 0, sy = 0, cy = 0, sxy = 0, cxy = 0, sx2 = 0, cx2 = 0;
	bool const_y = true;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && p[i].v != p[0].v)
			const_y = false;
		double x = (double)(p[i].t_ms - t0) / 1e3;
		kahan_inc(x, &sx, &cx);
		kahan_inc(p[i].v, &sy, &cy);
		kahan_inc(x * p[i].v, &sxy, &cxy);
		kahan_inc(x * x, &sx2, &cx2);
	}
	if (const_y) {
		*slope = isinf(p[0].v) ? NAN : 0;
		*intercept = isinf(p[0].v) ? NAN : p[0].v;
		return;
	}
	sx += cx;
	sy += cy;
	sxy += cxy;
	sx2 += cx2;
	double cnt = (double)n;
	double cov = sxy - sx * sy / cnt, var = sx2 - sx * sx / cnt;
	*slope = cov / var;
	*intercept = sy / cnt - *slope * sx / cnt;
}

/* Double exponential smoothing with smoothing factor sf and trend factor
 * tf, as Prometheus's holt_winters. */
static double holt_winters(const struct promql_sample *p, size_t n, double sf, double tf)
{
	double s0 = 0, s1 = p[0].v, b = p[1].v - p[0].v;
	for (size_t i = 1; i < n; i++) {
		double x = sf * p[i].v;
		if (i > 1)
			b = tf * (s1 - s0) + (1 - tf) * b;
		double y = (1 - sf) * (s1 + b);
		s0 = s1;
		s1 = x + y;
	}
	return s1;
}

/* A subquery at ev->ts: the inner expression evaluated at every multiple
 * of the step (absolute, as Prometheus aligns them) in [ts - offset -
 * range, ts - offset], gathered into series in the step arena. */
static bool eval_subquery(struct ev *ev, const struct promql_expr *sq, struct promql_series_set *out)
{
	memset(out, 0, sizeof *out);
	int64_t step = sq->step_ms ? sq->step_ms : ev->opts.subquery_step_ms;
	int64_t end = at_time(ev, sq) - sq->offset_ms, first = end - sq->range_ms;
	int64_t t0 = first / step * step; /* Go's division truncates: fixed below */
	if (t0 < first)
		t0 += step;
	int64_t saved = ev->ts;
	size_t nsteps = t0 <= end ? (size_t)((end - t0) / step) + 1 : 0;
	/* Each step's evaluation and each point it gives count against the
	 * query's sample limit, over all the steps of a range query, so that
	 * work stays bounded. */
	ev->loaded_samples += nsteps;
	if (nsteps > ev->opts.max_samples || ev->loaded_samples > ev->opts.max_samples) {
		everr(ev, GPULSE_ELIMIT, "subquery of %zu steps is over the limit of %zu samples", nsteps,
		      ev->opts.max_samples);
		return false;
	}
	struct smap idx;
	smap_init(ev, &idx, 16);
	struct promql_series *series = NULL;
	struct promql_sample **pts = NULL; /* series[k].samples, writable */
	const char **keys = NULL;          /* series[k]'s key in idx */
	size_t *cap = NULL, n = 0, ncap = 0;
	bool ok = true;
	for (int64_t t = t0; t <= end && ok; t += step) {
		ev->ts = t;
		struct value v;
		if (ev_interrupted(ev) || !eval(ev, sq->lhs, &v)) {
			ok = false;
			break;
		}
		for (size_t i = 0; i < v.n; i++) {
			const char *key = full_key(ev, v.s[i].ls);
			size_t k;
			if (!smap_get(&idx, key, &k)) {
				if (n == ncap) {
					size_t nc = ncap ? ncap * 2 : 16;
					struct promql_series *ns = arena_calloc(&ev->step, nc, sizeof *ns);
					size_t *ncp = arena_calloc(&ev->step, nc, sizeof *ncp);
					struct promql_sample **npt = arena_calloc(&ev->step, nc, sizeof *npt);
					const char **nk = arena_calloc(&ev->step, nc, sizeof *nk);
					if (n) {
						memcpy(ns, series, n * sizeof *ns);
						memcpy(ncp, cap, n * sizeof *ncp);
						memcpy(npt, pts, n * sizeof *npt);
						memcpy(nk, keys, n * sizeof *nk);
					}
					series = ns;
					cap = ncp;
					pts = npt;
					keys = nk;
					ncap = nc;
					/* the map grows with the series (smap_put expects room) */
					struct smap bigger;
					smap_init(ev, &bigger, nc);
					for (size_t j = 0; j < n; j++)
						smap_put(&bigger, keys[j], j);
					idx = bigger;
				}
				k = n++;
				smap_put(&idx, key, k);
				keys[k] = key;
				series[k].labels = v.s[i].ls.v;
				series[k].nlabels = v.s[i].ls.n;
			}
			struct promql_series *s = &series[k];
			if (s->nsamples == cap[k]) {
				size_t nc = cap[k] ? cap[k] * 2 : 8;
				struct promql_sample *np = arena_alloc(&ev->step, nc * sizeof *np);
				if (s->nsamples)
					memcpy(np, pts[k], s->nsamples * sizeof *np);
				pts[k] = np;
				s->samples = np;
				cap[k] = nc;
			}
			pts[k][s->nsamples++] = (struct promql_sample){t, v.s[i].v};
			if (++ev->loaded_samples > ev->opts.max_samples) {
				everr(ev, GPULSE_ELIMIT, "query processing would load too many samples into memory in query execution (limit %zu)",
				      ev->opts.max_samples);
				ok = false;
				break;
			}
		}
	}
	ev->ts = saved;
	out->series = series;
	out->nseries = n;
	return ok;
}

/* The series a range function reads: a range selector's, or a
 * subquery's evaluated now. */
static bool range_input(struct ev *ev, const struct promql_expr *ms, struct promql_series_set *out)
{
	if (ms->kind == PROMQL_NODE_SUBQUERY)
		return eval_subquery(ev, ms, out);
	*out = find_sel(ev, ms)->set;
	return true;
}

/* The range functions other than rate's family and *_over_time: false
 * when the series gives no output. sc holds the scalar arguments. */
static bool range_fn(struct ev *ev, enum promql_func_id id, const struct promql_sample *p, size_t n,
		     const double *sc, double *out)
{
	switch (id) {
	case PROMQL_FN_CHANGES:
	case PROMQL_FN_RESETS: {
		if (n == 0)
			return false;
		double count = 0;
		for (size_t i = 1; i < n; i++) {
			double prev = p[i - 1].v, cur = p[i].v;
			if (id == PROMQL_FN_CHANGES ? cur != prev && !(isnan(cur) && isnan(prev)) : cur < prev)
				count++;
		}
		*out = count;
		return true;
	}
	case PROMQL_FN_IDELTA:
		if (n < 2)
			return false;
		*out = p[n - 1].v - p[n - 2].v;
		return true;
	case PROMQL_FN_DERIV: {
		if (n < 2)
			return false;
		double slope, icpt;
		linear_regression(p, n, p[0].t_ms, &slope, &icpt);
		*out = slope;
		return true;
	}
	case PROMQL_FN_PREDICT_LINEAR: {
		if (n < 2)
			return false;
		double slope, icpt;
		linear_regression(p, n, ev->ts, &slope, &icpt);
		*out = slope * sc[0] + icpt;
		return true;
	}
	case PROMQL_FN_HOLT_WINTERS:
		if (n < 2)
			return false;
		*out = holt_winters(p, n, sc[0], sc[1]);
		return true;
	case PROMQL_FN_PRESENT_OVER_TIME:
		if (n == 0)
			return false;
		*out = 1;
		return true;
	default:
		return false;
	}
}

static struct lset absent_labels(struct ev *ev, const struct promql_expr *arg);

static bool check_unique(struct ev *ev, const struct value *v)
{
	if (v->type != PROMQL_TYPE_VECTOR || v->n < 2)
		return true;
	struct smap m;
	smap_init(ev, &m, v->n);
	for (size_t i = 0; i < v->n; i++) {
		const char *k = full_key(ev, v->s[i].ls);
		if (smap_get(&m, k, NULL)) {
			everr(ev, GPULSE_EINVAL, "vector cannot contain metrics with the same labelset");
			return false;
		}
		smap_put(&m, k, i);
	}
	return true;
}

/* Go's %f of v: "NaN", "+Inf", "-Inf" or six decimals. */
static void go_fmt_f(char *b, size_t len, double v)
{
	if (isnan(v))
		snprintf(b, len, "NaN");
	else if (isinf(v))
		snprintf(b, len, "%s", v > 0 ? "+Inf" : "-Inf");
	else
		snprintf(b, len, "%f", v);
}

/* holt_winters's smoothing and trend factors as Prometheus checks them:
 * an error unless 0 < f < 1, though a NaN passes (and gives NaN). */
static bool holt_winters_factors_ok(struct ev *ev, const double *sc)
{
	for (int i = 0; i < 2; i++) {
		if (sc[i] <= 0 || sc[i] >= 1) {
			char got[400];
			go_fmt_f(got, sizeof got, sc[i]);
			everr(ev, GPULSE_EINVAL, "invalid %s factor. Expected: 0 < %s < 1, got: %s",
			      i ? "trend" : "smoothing", i ? "tf" : "sf", got);
			return false;
		}
	}
	return true;
}

static bool eval_matrix_call(struct ev *ev, const struct promql_expr *e, struct value *out)
{
	enum promql_func_id id = e->func->id;
	/* The scalar arguments: quantile_over_time's first, predict_linear's
	 * and holt_winters's after the range. */
	double sc[2] = {0, 0};
	size_t nsc = 0, mi = 0;
	for (size_t i = 0; i < e->nargs; i++) {
		if (e->args[i]->type == PROMQL_TYPE_MATRIX) {
			mi = i;
			continue;
		}
		struct value v;
		if (!eval(ev, e->args[i], &v))
			return false;
		if (nsc < 2)
			sc[nsc++] = v.scalar;
	}
	const struct promql_expr *ms = unparen(e->args[mi]);
	struct promql_series_set set;
	if (!range_input(ev, ms, &set))
		return false;
	vec_alloc(ev, out, set.nseries ? set.nseries : 1);
	int64_t range_end = at_time(ev, ms) - ms->offset_ms;
	int64_t range_start = range_end - ms->range_ms;
	bool any = false;
	for (size_t i = 0; i < set.nseries; i++) {
		if (ev_tick(ev))
			return false;
		const struct promql_series *s = &set.series[i];
		size_t n = window(ev, s, range_start, range_end);
		any = any || n > 0;
		/* Prometheus checks holt_winters's factors in the function, which
		 * runs only on a window with samples: over no data the answer is
		 * empty, whatever the factors. */
		if (id == PROMQL_FN_HOLT_WINTERS && n > 0 && !holt_winters_factors_ok(ev, sc))
			return false;
		double v;
		bool ok;
		switch (id) {
		case PROMQL_FN_RATE:
			ok = extrapolated_rate(ev->tmp, n, range_start, range_end, ms->range_ms, true, true, &v);
			break;
		case PROMQL_FN_INCREASE:
			ok = extrapolated_rate(ev->tmp, n, range_start, range_end, ms->range_ms, true, false, &v);
			break;
		case PROMQL_FN_DELTA:
			ok = extrapolated_rate(ev->tmp, n, range_start, range_end, ms->range_ms, false, false, &v);
			break;
		case PROMQL_FN_IRATE: {
			ok = false;
			if (n < 2)
				break;
			struct promql_sample last = ev->tmp[n - 1], prev = ev->tmp[n - 2];
			v = last.v < prev.v ? last.v : last.v - prev.v;
			int64_t dt = last.t_ms - prev.t_ms;
			if (dt == 0)
				break;
			v /= (double)dt / 1000;
			ok = true;
			break;
		}
		case PROMQL_FN_ABSENT_OVER_TIME:
			ok = false; /* answered below, from all the series */
			break;
		case PROMQL_FN_AVG_OVER_TIME:
		case PROMQL_FN_MIN_OVER_TIME:
		case PROMQL_FN_MAX_OVER_TIME:
		case PROMQL_FN_SUM_OVER_TIME:
		case PROMQL_FN_COUNT_OVER_TIME:
		case PROMQL_FN_STDDEV_OVER_TIME:
		case PROMQL_FN_STDVAR_OVER_TIME:
		case PROMQL_FN_QUANTILE_OVER_TIME:
		case PROMQL_FN_LAST_OVER_TIME:
			ok = over_time(id, ev->tmp, n, sc[0], &v);
			break;
		default:
			ok = range_fn(ev, id, ev->tmp, n, sc, &v);
			break;
		}
		if (!ok)
			continue;
		struct lset ls = series_lset(s);
		if (id != PROMQL_FN_LAST_OVER_TIME)
			ls = drop_name(ev, ls);
		out->s[out->n++] = (struct vsample){ls, v};
	}
	if (id == PROMQL_FN_ABSENT_OVER_TIME && !any)
		out->s[out->n++] = (struct vsample){absent_labels(ev, ms), 1};
	return check_unique(ev, out);
}

/* absent(): the labels of the argument's equality matchers. Parentheses
 * around the selector are seen through, as Prometheus's engine unwraps a
 * call's arguments (unwrapParenExpr) before absent reads the matchers:
 * absent((x{a="b"})) is {a="b"}. A subquery has no matchers to it (its
 * result stands in for a matrix selector without any): {}. */
static struct lset absent_labels(struct ev *ev, const struct promql_expr *arg)
{
	struct lset ls = {NULL, 0};
	arg = unparen(arg);
	if (arg->kind != PROMQL_NODE_VECTOR_SEL && arg->kind != PROMQL_NODE_MATRIX_SEL)
		return ls;
	const char **dropped = arena_calloc(&ev->step, arg->nmatchers + 1, sizeof *dropped);
	size_t ndropped = 0;
	for (size_t i = 0; i < arg->nmatchers; i++) {
		const struct promql_matcher *m = &arg->matchers[i];
		if (strcmp(m->name, "__name__") == 0)
			continue;
		if (m->op == PROMQL_MATCH_EQ && !lset_get(ls, m->name))
			ls = lset_set(ev, ls, m->name, m->value);
		else
			dropped[ndropped++] = m->name;
	}
	for (size_t i = 0; i < ndropped; i++)
		ls = lset_set(ev, ls, dropped[i], "");
	return ls;
}

/* Go's math on one value, for the element-wise functions. */
static double math_fn(enum promql_func_id id, double v)
{
	switch (id) {
	case PROMQL_FN_ABS: return fabs(v);
	case PROMQL_FN_CEIL: return ceil(v);
	case PROMQL_FN_FLOOR: return floor(v);
	case PROMQL_FN_EXP: return exp(v);
	case PROMQL_FN_LN: return log(v);
	case PROMQL_FN_LOG2: return log2(v);
	case PROMQL_FN_LOG10: return log10(v);
	case PROMQL_FN_SQRT: return sqrt(v);
	case PROMQL_FN_SGN: return v > 0 ? 1 : v < 0 ? -1 : v; /* 0, -0 and NaN stay */
	case PROMQL_FN_DEG: return v * 180 / M_PI;
	case PROMQL_FN_RAD: return v * M_PI / 180;
	case PROMQL_FN_ACOS: return acos(v);
	case PROMQL_FN_ACOSH: return acosh(v);
	case PROMQL_FN_ASIN: return asin(v);
	case PROMQL_FN_ASINH: return asinh(v);
	case PROMQL_FN_ATAN: return atan(v);
	case PROMQL_FN_ATANH: return atanh(v);
	case PROMQL_FN_COS: return cos(v);
	case PROMQL_FN_COSH: return cosh(v);
	case PROMQL_FN_SIN: return sin(v);
	case PROMQL_FN_SINH: return sinh(v);
	case PROMQL_FN_TAN: return tan(v);
	case PROMQL_FN_TANH: return tanh(v);
	default: return v;
	}
}

/* A calendar field of unix time sec (UTC), as Prometheus gives it:
 * time.Unix(sec, 0).UTC() in Go 1.19 (Debian's Prometheus 2.42). A
 * sample value becomes sec as Go's int64(v) (gofloat_to_int64), so NaN,
 * the infinities and values beyond int64 are INT64_MIN and have a date
 * too (month(vector(NaN)) is 12). Go's time package then
 * works in unsigned 64-bit seconds since its absolute zero year, which
 * wraps for times near either end of int64 (INT64_MIN lands in year
 * 292277026596), so its algorithm is followed here step by step rather
 * than gmtime_r, which refuses years beyond int's range. */
static bool calendar_fn(enum promql_func_id id, int64_t sec, double *out)
{
	enum {
		SECS_PER_DAY = 86400,
		DAYS_PER_400Y = 365 * 400 + 97,
		DAYS_PER_100Y = 365 * 100 + 24,
		DAYS_PER_4Y = 365 * 4 + 1,
	};
	static const int64_t absolute_zero_year = -292277022399;
	/* unixToInternal + internalToAbsolute in Go's time package. */
	static const uint64_t unix_to_absolute = 9223372028715321600u;
	static const int days_before[13] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334,
					    365};
	uint64_t abs = (uint64_t)sec + unix_to_absolute;

	/* absDate: 400-, 100- and 4-year cycles, then years. */
	uint64_t d = abs / SECS_PER_DAY;
	uint64_t n = d / DAYS_PER_400Y;
	uint64_t y = 400 * n;
	d -= DAYS_PER_400Y * n;
	n = d / DAYS_PER_100Y;
	n -= n >> 2;
	y += 100 * n;
	d -= DAYS_PER_100Y * n;
	n = d / DAYS_PER_4Y;
	y += 4 * n;
	d -= DAYS_PER_4Y * n;
	n = d / 365;
	n -= n >> 2;
	y += n;
	d -= 365 * n;
	int64_t year = (int64_t)y + absolute_zero_year;
	int yday = (int)d; /* from 0 */
	bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);

	int month, day = yday; /* month from 0 */
	if (leap && day == 31 + 29 - 1) {
		month = 1;
		day = 29;
	} else {
		if (leap && day > 31 + 29 - 1)
			day--;
		month = day / 31; /* at most one month low */
		if (day >= days_before[month + 1])
			month++;
		day = day - days_before[month] + 1;
	}
	switch (id) {
	case PROMQL_FN_DAY_OF_MONTH: *out = day; break;
	/* 1 January of the absolute zero year was a Monday. */
	case PROMQL_FN_DAY_OF_WEEK: *out = (double)((abs + SECS_PER_DAY) % (7 * SECS_PER_DAY) / SECS_PER_DAY); break;
	case PROMQL_FN_DAY_OF_YEAR: *out = yday + 1; break;
	case PROMQL_FN_DAYS_IN_MONTH:
		*out = days_before[month + 1] - days_before[month] + (month == 1 && leap);
		break;
	case PROMQL_FN_HOUR: *out = (double)(abs % SECS_PER_DAY / 3600); break;
	case PROMQL_FN_MINUTE: *out = (double)(abs % 3600 / 60); break;
	case PROMQL_FN_MONTH: *out = month + 1; break;
	case PROMQL_FN_YEAR: *out = (double)year; break;
	default: return false;
	}
	return true;
}

#define LABEL_VALUE_MAX (1 << 20) /* what label_replace and label_join may build */

static bool eval_label_replace(struct ev *ev, const struct promql_expr *e, const struct value *v,
			       struct value *out)
{
	struct value a[4];
	for (int i = 0; i < 4; i++)
		if (!eval(ev, e->args[i + 1], &a[i]))
			return false;
	const char *dst = a[0].string, *repl = a[1].string, *src = a[2].string, *re = a[3].string;
	if (!str_is_label_name(dst)) {
		everr(ev, GPULSE_EINVAL, "invalid destination label name in label_replace(): %s", dst);
		return false;
	}
	char msg[256];
	struct rx *rx;
	int rc = rx_compile(re, RX_ANCHORED, &rx, msg, sizeof msg);
	if (rc != 0) {
		everr(ev, rc == GPULSE_ENOMEM ? GPULSE_ENOMEM : GPULSE_EINVAL,
		      "invalid regular expression in label_replace(): %s", msg);
		return false;
	}
	size_t nsp = rx_groups(rx) + 1;
	struct rx_span *sp = arena_alloc(&ev->step, nsp * sizeof *sp);
	vec_alloc(ev, out, v->n);
	struct buf b;
	buf_init(&b, LABEL_VALUE_MAX);
	for (size_t i = 0; i < v->n; i++) {
		struct lset ls = v->s[i].ls;
		const char *sv = lset_get(ls, src);
		sv = sv ? sv : "";
		bool found;
		rc = rx_exec(rx, sv, strlen(sv), 0, sp, nsp, &found);
		if (rc == GPULSE_ENOTSUP) {
			everr(ev, GPULSE_EINVAL, "label_replace(): the submatches of \"%.60s\" are not supported: %s",
			      re, rx_exec_unsupported(rx));
			break;
		}
		if (rc != 0) {
			everr(ev, rc, "label_replace(): matching %s=\"%.60s\" against the regular "
			      "expression stopped at its cost limit", src, sv);
			break;
		}
		if (found) {
			buf_reset(&b);
			rx_expand(rx, &b, repl, sv, sp, nsp);
			if (b.failed) {
				everr(ev, GPULSE_ELIMIT, "label_replace(): a value over %d bytes", LABEL_VALUE_MAX);
				break;
			}
			ls = lset_set(ev, ls, dst, arena_strdup(&ev->step, b.data ? b.data : ""));
		}
		out->s[out->n++] = (struct vsample){ls, v->s[i].v};
	}
	buf_free(&b);
	rx_free(rx);
	return !ev->status && check_unique(ev, out);
}

static bool eval_label_join(struct ev *ev, const struct promql_expr *e, const struct value *v,
			    struct value *out)
{
	size_t ns = e->nargs - 1;
	const char **str = arena_calloc(&ev->step, ns, sizeof *str);
	for (size_t i = 0; i < ns; i++) {
		struct value a;
		if (!eval(ev, e->args[i + 1], &a))
			return false;
		str[i] = a.string;
	}
	if (!str_is_label_name(str[0])) {
		everr(ev, GPULSE_EINVAL, "invalid destination label name in label_join(): %s", str[0]);
		return false;
	}
	for (size_t i = 2; i < ns; i++)
		if (!str_is_label_name(str[i])) {
			everr(ev, GPULSE_EINVAL, "invalid source label name in label_join(): %s", str[i]);
			return false;
		}
	vec_alloc(ev, out, v->n);
	struct buf b;
	buf_init(&b, LABEL_VALUE_MAX);
	for (size_t i = 0; i < v->n; i++) {
		buf_reset(&b);
		for (size_t k = 2; k < ns; k++) {
			const char *lv = lset_get(v->s[i].ls, str[k]);
			if (k > 2)
				buf_puts(&b, str[1]);
			buf_puts(&b, lv ? lv : "");
		}
		if (b.failed) {
			everr(ev, GPULSE_ELIMIT, "label_join(): a value over %d bytes", LABEL_VALUE_MAX);
			break;
		}
		struct lset ls = lset_set(ev, v->s[i].ls, str[0], arena_strdup(&ev->step, b.data ? b.data : ""));
		out->s[out->n++] = (struct vsample){ls, v->s[i].v};
	}
	buf_free(&b);
	return !ev->status && check_unique(ev, out);
}

/* Classic histograms: the q-quantile of each group of `le` buckets, as
 * Prometheus's bucketQuantile (buckets of one bound merged, counts made
 * monotonic, linear interpolation inside the bucket). */
struct bucket {
	double le, count;
};

/* A bucket whose le is NaN (which Go's ParseFloat reads) sorts last, so
 * that the histogram has no +Inf bucket at the end and gives NaN: Go's
 * sort leaves a NaN bound where its comparisons happen to, so Prometheus's
 * answer for such a histogram hangs on the order of the input. */
static int cmp_bucket(const void *a, const void *b)
{
	double x = ((const struct bucket *)a)->le, y = ((const struct bucket *)b)->le;
	if (isnan(x) || isnan(y))
		return isnan(x) - isnan(y);
	return x < y ? -1 : x > y;
}

static double bucket_quantile(double q, struct bucket *bk, size_t n)
{
	if (isnan(q))
		return NAN;
	if (q < 0)
		return -INFINITY;
	if (q > 1)
		return INFINITY;
	qsort(bk, n, sizeof *bk, cmp_bucket);
	if (!(isinf(bk[n - 1].le) && bk[n - 1].le > 0))
		return NAN;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m > 0 && bk[m - 1].le == bk[i].le)
			bk[m - 1].count += bk[i].count;
		else
			bk[m++] = bk[i];
	}
	double max = -INFINITY;
	for (size_t i = 0; i < m; i++) {
		if (bk[i].count > max)
			max = bk[i].count;
		else if (bk[i].count < max)
			bk[i].count = max;
	}
	if (m < 2)
		return NAN;
	double obs = bk[m - 1].count;
	if (obs == 0)
		return NAN;
	double rank = q * obs;
	size_t b = 0;
	while (b < m - 1 && !(bk[b].count >= rank))
		b++;
	if (b == m - 1)
		return bk[m - 2].le;
	if (b == 0 && bk[0].le <= 0)
		return bk[0].le;
	double start = 0, end = bk[b].le, count = bk[b].count;
	if (b > 0) {
		start = bk[b - 1].le;
		count -= bk[b - 1].count;
		rank -= bk[b - 1].count;
	}
	return start + (end - start) * (rank / count);
}

static bool eval_histogram_quantile(struct ev *ev, double q, const struct value *v, struct value *out)
{
	static char *const le[] = {"le"};
	struct smap groups;
	smap_init(ev, &groups, v->n);
	size_t *first = arena_calloc(&ev->step, v->n ? v->n : 1, sizeof *first);
	size_t *next = arena_calloc(&ev->step, v->n ? v->n : 1, sizeof *next);
	double *bound = arena_calloc(&ev->step, v->n ? v->n : 1, sizeof *bound);
	size_t ngroups = 0;
	for (size_t i = 0; i < v->n; i++) {
		const char *lv = lset_get(v->s[i].ls, "le");
		/* No le, or one that Go's ParseFloat refuses (" 1", "1e500"):
		 * not a bucket, skipped as Prometheus does. */
		if (!lv || gofloat_parse(lv, &bound[i]) != 0)
			continue;
		/* A histogram is all labels but le, its name included: two
		 * histograms differing only by name stay apart (and, with the
		 * name dropped, give "vector cannot contain metrics with the
		 * same labelset", as in Prometheus). */
		const char *key = full_key(ev, lset_filter(ev, v->s[i].ls, false, false, le, 1));
		size_t g;
		next[i] = SIZE_MAX;
		if (smap_get(&groups, key, &g)) {
			next[i] = first[g];
			first[g] = i;
		} else {
			first[ngroups] = i;
			smap_put(&groups, key, ngroups++);
		}
	}
	vec_alloc(ev, out, ngroups ? ngroups : 1);
	struct bucket *bk = arena_calloc(&ev->step, v->n ? v->n : 1, sizeof *bk);
	for (size_t g = 0; g < ngroups; g++) {
		size_t n = 0;
		for (size_t i = first[g]; i != SIZE_MAX; i = next[i])
			bk[n++] = (struct bucket){bound[i], v->s[i].v};
		struct lset ls = lset_filter(ev, v->s[first[g]].ls, true, false, le, 1);
		out->s[out->n++] = (struct vsample){ls, bucket_quantile(q, bk, n)};
	}
	return check_unique(ev, out);
}

/* sort and sort_desc both put NaN last: Prometheus sorts the reverse
 * order with NaN first (vectorByReverseValueHeap, vectorByValueHeap) and
 * then reverses it (sort.Reverse). */
static int cmp_vsample_value(const void *a, const void *b)
{
	double x = ((const struct vsample *)a)->v, y = ((const struct vsample *)b)->v;
	if (isnan(x) || isnan(y))
		return isnan(x) ? (isnan(y) ? 0 : 1) : -1;
	return x < y ? -1 : x > y;
}

static int cmp_vsample_value_desc(const void *a, const void *b)
{
	double x = ((const struct vsample *)a)->v, y = ((const struct vsample *)b)->v;
	if (isnan(x) || isnan(y))
		return isnan(x) ? (isnan(y) ? 0 : 1) : -1;
	return x > y ? -1 : x < y;
}

static bool eval_call(struct ev *ev, const struct promql_expr *e, struct value *out)
{
	const struct promql_func *f = e->func;
	for (size_t i = 0; i < e->nargs; i++)
		if (e->args[i]->type == PROMQL_TYPE_MATRIX)
			return eval_matrix_call(ev, e, out);
	switch (f->id) {
	case PROMQL_FN_LABEL_REPLACE:
	case PROMQL_FN_LABEL_JOIN: {
		struct value v;
		if (!eval(ev, e->args[0], &v))
			return false;
		return f->id == PROMQL_FN_LABEL_REPLACE ? eval_label_replace(ev, e, &v, out)
							: eval_label_join(ev, e, &v, out);
	}
	default:
		break;
	}
	struct value a[3];
	for (size_t i = 0; i < e->nargs && i < 3; i++)
		if (!eval(ev, e->args[i], &a[i]))
			return false;
	switch (f->id) {
	case PROMQL_FN_TIME:
		out->type = PROMQL_TYPE_SCALAR;
		out->scalar = (double)ev->ts / 1000;
		return true;
	case PROMQL_FN_PI:
		out->type = PROMQL_TYPE_SCALAR;
		out->scalar = M_PI;
		return true;
	case PROMQL_FN_VECTOR:
		vec_alloc(ev, out, 1);
		out->s[out->n++] = (struct vsample){{NULL, 0}, a[0].scalar};
		return true;
	case PROMQL_FN_SCALAR:
		out->type = PROMQL_TYPE_SCALAR;
		out->scalar = a[0].n == 1 ? a[0].s[0].v : NAN;
		return true;
	case PROMQL_FN_ABSENT:
		vec_alloc(ev, out, 1);
		if (a[0].n == 0)
			out->s[out->n++] = (struct vsample){absent_labels(ev, e->args[0]), 1};
		return true;
	case PROMQL_FN_HISTOGRAM_QUANTILE:
		return eval_histogram_quantile(ev, a[0].scalar, &a[1], out);
	case PROMQL_FN_SORT:
	case PROMQL_FN_SORT_DESC:
		*out = a[0];
		qsort(out->s, out->n, sizeof *out->s,
		      f->id == PROMQL_FN_SORT ? cmp_vsample_value : cmp_vsample_value_desc);
		return true;
	case PROMQL_FN_DAY_OF_MONTH:
	case PROMQL_FN_DAY_OF_WEEK:
	case PROMQL_FN_DAY_OF_YEAR:
	case PROMQL_FN_DAYS_IN_MONTH:
	case PROMQL_FN_HOUR:
	case PROMQL_FN_MINUTE:
	case PROMQL_FN_MONTH:
	case PROMQL_FN_YEAR:
		if (e->nargs == 0) { /* of vector(time()) */
			vec_alloc(ev, out, 1);
			double v;
			if (calendar_fn(f->id, ev->ts / 1000, &v))
				out->s[out->n++] = (struct vsample){{NULL, 0}, v};
			return true;
		}
		vec_alloc(ev, out, a[0].n);
		for (size_t i = 0; i < a[0].n; i++) {
			double v;
			if (calendar_fn(f->id, gofloat_to_int64(a[0].s[i].v), &v))
				out->s[out->n++] = (struct vsample){drop_name(ev, a[0].s[i].ls), v};
		}
		return check_unique(ev, out);
	default:
		break;
	}
	vec_alloc(ev, out, a[0].n);
	if (f->id == PROMQL_FN_CLAMP && a[2].scalar < a[1].scalar)
		return true; /* max below min: an empty vector */
	double to_nearest_inverse = 1;
	if (f->id == PROMQL_FN_ROUND && e->nargs == 2)
		to_nearest_inverse = 1.0 / a[1].scalar;
	bool selector = unparen(e->args[0])->kind == PROMQL_NODE_VECTOR_SEL;
	for (size_t i = 0; i < a[0].n; i++) {
		double v = a[0].s[i].v;
		switch (f->id) {
		case PROMQL_FN_CLAMP_MIN: v = go_max(a[1].scalar, v); break;
		case PROMQL_FN_CLAMP_MAX: v = go_min(a[1].scalar, v); break;
		case PROMQL_FN_CLAMP: v = go_max(a[1].scalar, go_min(a[2].scalar, v)); break;
		case PROMQL_FN_ROUND:
			v = floor(v * to_nearest_inverse + 0.5) / to_nearest_inverse;
			break;
		case PROMQL_FN_TIMESTAMP:
			/* A selector's samples keep their own time; any other
			 * expression's samples are at the evaluation time. */
			v = (double)(selector ? a[0].s[i].t : ev->ts) / 1000;
			break;
		default: v = math_fn(f->id, v); break;
		}
		out->s[out->n++] = (struct vsample){drop_name(ev, a[0].s[i].ls), v};
	}
	return check_unique(ev, out);
}

/* ---- aggregation ---- */

struct group {
	struct lset ls;
	double value, mean;
	size_t count;
	struct vsample *heap; /* topk, bottomk */
	size_t heapn;
	double *vals;         /* quantile */
};

/* Go's container/heap over vectorByValueHeap (topk: smallest on top) or
 * vectorByReverseValueHeap (bottomk: largest on top), so ties keep the
 * same series as Prometheus. */
static bool heap_less(const struct vsample *h, size_t i, size_t j, bool reverse)
{
	if (isnan(h[i].v) && !isnan(h[j].v))
		return true;
	return reverse ? h[i].v > h[j].v : h[i].v < h[j].v;
}

static void heap_swap(struct vsample *h, size_t i, size_t j)
{
	struct vsample t = h[i];
	h[i] = h[j];
	h[j] = t;
}

static void heap_up(struct vsample *h, size_t j, bool rev)
{
	while (j > 0) {
		size_t i = (j - 1) / 2;
		if (!heap_less(h, j, i, rev))
			break;
		heap_swap(h, i, j);
		j = i;
	}
}

static bool heap_down(struct vsample *h, size_t i0, size_t n, bool rev)
{
	size_t i = i0;
	for (;;) {
		size_t j1 = 2 * i + 1;
		if (j1 >= n)
			break;
		size_t j = j1;
		if (j1 + 1 < n && heap_less(h, j1 + 1, j1, rev))
			j = j1 + 1;
		if (!heap_less(h, j, i, rev))
			break;
		heap_swap(h, i, j);
		i = j;
	}
	return i > i0;
}

static int cmp_vsample_desc(const void *a, const void *b)
{
	double x = ((const struct vsample *)a)->v, y = ((const struct vsample *)b)->v;
	return x > y ? -1 : x < y ? 1 : 0;
}

static int cmp_vsample_asc(const void *a, const void *b)
{
	return -cmp_vsample_desc(a, b);
}

static bool eval_agg(struct ev *ev, const struct promql_expr *e, struct value *out)
{
	struct value in, param = {0};
	if (e->param && !eval(ev, e->param, &param))
		return false;
	if (!eval(ev, e->lhs, &in))
		return false;
	int64_t k = 0;
	bool is_k = e->agg == PROMQL_AGG_TOPK || e->agg == PROMQL_AGG_BOTTOMK;
	if (is_k) {
		double f = param.scalar;
		if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0)) {
			char tmp[40];
			snprintf(tmp, sizeof tmp, "%g", f);
			everr(ev, GPULSE_EINVAL, "Scalar value %s overflows int64", tmp);
			return false;
		}
		k = (int64_t)f;
		if (k < 1) {
			vec_alloc(ev, out, 0);
			return true;
		}
	}
	const char *value_label = e->agg == PROMQL_AGG_COUNT_VALUES ? param.string : NULL;
	if (value_label && !str_is_label_name(value_label)) {
		everr(ev, GPULSE_EINVAL, "invalid label name \"%s\"", value_label);
		return false;
	}
	struct group *groups = arena_calloc(&ev->step, in.n ? in.n : 1, sizeof *groups);
	size_t ngroups = 0;
	struct smap m;
	smap_init(ev, &m, in.n);
	bool rev = e->agg == PROMQL_AGG_BOTTOMK;
	size_t heapcap = is_k ? ((uint64_t)k > in.n ? in.n : (size_t)k) : 0;
	for (size_t i = 0; i < in.n; i++) {
		const struct vsample *s = &in.s[i];
		/* count_values: the value becomes a label of the series before
		 * grouping, as in Prometheus, so `by` keeps it (Prometheus adds
		 * it to the by list) and `without` naming it drops it. */
		struct lset sl = s->ls;
		const char *value_text = NULL;
		if (value_label) {
			struct buf num;
			buf_init(&num, 512);
			promql_format_value(&num, s->v); /* Go's FormatFloat(v, 'f', -1, 64) */
			value_text = arena_strdup(&ev->step, num.data ? num.data : "");
			buf_free(&num);
			sl = lset_set(ev, sl, value_label, value_text);
		}
		struct lset gl;
		if (e->without) {
			gl = lset_filter(ev, sl, true, false, e->grouping, e->ngrouping);
		} else {
			gl = lset_filter(ev, sl, false, true, e->grouping, e->ngrouping);
			if (value_label)
				gl = lset_set(ev, gl, value_label, value_text);
		}
		const char *key = full_key(ev, gl);
		size_t gi;
		if (!smap_get(&m, key, &gi)) {
			gi = ngroups++;
			smap_put(&m, key, gi);
			struct group *g = &groups[gi];
			g->ls = gl;
			g->value = s->v;
			g->mean = s->v;
			g->count = 1;
			if (e->agg == PROMQL_AGG_STDDEV || e->agg == PROMQL_AGG_STDVAR)
				g->value = 0;
			if (is_k) {
				g->heap = arena_alloc(&ev->step, heapcap * sizeof *g->heap);
				g->heap[0] = *s;
				g->heapn = 1;
			}
			if (e->agg == PROMQL_AGG_QUANTILE) {
				g->vals = arena_alloc(&ev->step, in.n * sizeof *g->vals);
				g->vals[0] = s->v;
				g->heapn = 1;
			}
			continue;
		}
		struct group *g = &groups[gi];
		switch (e->agg) {
		case PROMQL_AGG_SUM:
			g->value += s->v;
			break;
		case PROMQL_AGG_AVG:
			g->count++;
			if (isinf(g->mean)) {
				if (isinf(s->v) && (g->mean > 0) == (s->v > 0))
					break;
				if (!isinf(s->v) && !isnan(s->v))
					break;
			}
			g->mean += s->v / (double)g->count - g->mean / (double)g->count;
			break;
		case PROMQL_AGG_MAX:
			if (g->value < s->v || isnan(g->value))
				g->value = s->v;
			break;
		case PROMQL_AGG_MIN:
			if (g->value > s->v || isnan(g->value))
				g->value = s->v;
			break;
		case PROMQL_AGG_COUNT:
		case PROMQL_AGG_COUNT_VALUES:
			g->count++;
			break;
		case PROMQL_AGG_GROUP:
			break;
		case PROMQL_AGG_STDDEV:
		case PROMQL_AGG_STDVAR: {
			g->count++;
			double delta = s->v - g->mean;
			g->mean += delta / (double)g->count;
			g->value += delta * (s->v - g->mean);
			break;
		}
		case PROMQL_AGG_TOPK:
		case PROMQL_AGG_BOTTOMK:
			if ((int64_t)g->heapn < k) {
				g->heap[g->heapn++] = *s;
				heap_up(g->heap, g->heapn - 1, rev);
			} else if ((rev ? g->heap[0].v > s->v : g->heap[0].v < s->v) ||
				   (isnan(g->heap[0].v) && !isnan(s->v))) {
				g->heap[0] = *s;
				if (!heap_down(g->heap, 0, g->heapn, rev))
					heap_up(g->heap, 0, rev);
			}
			break;
		case PROMQL_AGG_QUANTILE:
			g->vals[g->heapn++] = s->v;
			break;
		}
	}
	size_t nout = 0;
	for (size_t i = 0; i < ngroups; i++)
		nout += is_k ? groups[i].heapn : 1;
	vec_alloc(ev, out, nout);
	for (size_t i = 0; i < ngroups; i++) {
		struct group *g = &groups[i];
		double v = g->value;
		switch (e->agg) {
		case PROMQL_AGG_AVG: v = g->mean; break;
		case PROMQL_AGG_COUNT:
		case PROMQL_AGG_COUNT_VALUES: v = (double)g->count; break;
		case PROMQL_AGG_GROUP: v = 1; break;
		case PROMQL_AGG_STDDEV: v = sqrt(g->value / (double)g->count); break;
		case PROMQL_AGG_STDVAR: v = g->value / (double)g->count; break;
		case PROMQL_AGG_QUANTILE: v = quantile_of(g->vals, g->heapn, param.scalar); break;
		case PROMQL_AGG_TOPK:
		case PROMQL_AGG_BOTTOMK:
			qsort(g->heap, g->heapn, sizeof *g->heap, rev ? cmp_vsample_asc : cmp_vsample_desc);
			for (size_t j = 0; j < g->heapn; j++)
				out->s[out->n++] = g->heap[j];
			continue;
		default: break;
		}
		out->s[out->n++] = (struct vsample){g->ls, v};
	}
	return true;
}

/* ---- binary operators ---- */

static void fmt_lset(struct buf *b, struct lset ls)
{
	promql_format_labels(b, ls.v, ls.n);
}

static bool eval_vector_binop(struct ev *ev, const struct promql_expr *e, struct value *l,
			      struct value *r, struct value *out)
{
	bool on = e->has_matching && e->on;
	char *const *names = e->match_labels;
	size_t nnames = e->nmatch_labels;
	enum promql_binop op = e->op;
	if (op == PROMQL_OP_AND || op == PROMQL_OP_UNLESS) {
		vec_alloc(ev, out, l->n);
		if (l->n == 0 || r->n == 0) {
			if (op == PROMQL_OP_UNLESS)
				*out = *l;
			return true;
		}
		struct smap rs;
		smap_init(ev, &rs, r->n);
		for (size_t i = 0; i < r->n; i++)
			smap_put(&rs, sig(ev, r->s[i].ls, on, names, nnames), i);
		for (size_t i = 0; i < l->n; i++) {
			bool found = smap_get(&rs, sig(ev, l->s[i].ls, on, names, nnames), NULL);
			if (found == (op == PROMQL_OP_AND))
				out->s[out->n++] = l->s[i];
		}
		return true;
	}
	if (op == PROMQL_OP_OR) {
		vec_alloc(ev, out, l->n + r->n);
		struct smap ls;
		smap_init(ev, &ls, l->n);
		for (size_t i = 0; i < l->n; i++) {
			smap_put(&ls, sig(ev, l->s[i].ls, on, names, nnames), i);
			out->s[out->n++] = l->s[i];
		}
		for (size_t i = 0; i < r->n; i++)
			if (l->n == 0 || !smap_get(&ls, sig(ev, r->s[i].ls, on, names, nnames), NULL))
				out->s[out->n++] = r->s[i];
		return true;
	}
	/* For group_right, swap sides so the right is always the "one". */
	bool swap = e->card == PROMQL_CARD_ONE_TO_MANY;
	struct value *lhs = swap ? r : l, *rhs = swap ? l : r;
	/* At most one result per sample of the "many" side: sized after the
	 * swap, as group_right's many side is the right operand. */
	vec_alloc(ev, out, lhs->n);
	if (l->n == 0 || r->n == 0)
		return true;
	struct smap right;
	smap_init(ev, &right, rhs->n);
	for (size_t i = 0; i < rhs->n; i++) {
		const char *s = sig(ev, rhs->s[i].ls, on, names, nnames);
		size_t dup;
		if (smap_get(&right, s, &dup)) {
			struct buf b;
			buf_init(&b, 2048);
			fmt_lset(&b, lset_filter(ev, rhs->s[i].ls, !on, on, names, nnames));
			buf_printf(&b, " on the %s hand-side of the operation: [", swap ? "left" : "right");
			fmt_lset(&b, rhs->s[i].ls);
			buf_puts(&b, ", ");
			fmt_lset(&b, rhs->s[dup].ls);
			buf_puts(&b, "];many-to-many matching not allowed: matching labels must be unique on one side");
			everr(ev, GPULSE_EINVAL, "found duplicate series for the match group %s", b.data ? b.data : "");
			buf_free(&b);
			return false;
		}
		smap_put(&right, s, i);
	}
	struct smap matched, inserted;
	smap_init(ev, &matched, lhs->n);
	smap_init(ev, &inserted, lhs->n);
	for (size_t i = 0; i < lhs->n; i++) {
		const struct vsample *ls = &lhs->s[i];
		const char *s = sig(ev, ls->ls, on, names, nnames);
		size_t ri;
		if (!smap_get(&right, s, &ri))
			continue;
		const struct vsample *rs = &rhs->s[ri];
		double vl = ls->v, vr = rs->v;
		if (swap) {
			vl = rs->v;
			vr = ls->v;
		}
		bool keep;
		double v = elem_binop(op, vl, vr, &keep);
		if (e->return_bool) {
			v = keep ? 1 : 0;
		} else if (!keep) {
			continue;
		}
		/* resultMetric: labels of the "many" side. */
		struct lset m = ls->ls;
		if (drops_name(op))
			m = drop_name(ev, m);
		if (e->card == PROMQL_CARD_ONE_TO_ONE) {
			if (on)
				m = lset_filter(ev, m, false, true, names, nnames);
			else
				m = lset_filter(ev, m, false, false, names, nnames);
		}
		for (size_t j = 0; j < e->ninclude; j++) {
			const char *iv = lset_get(rs->ls, e->include[j]);
			m = lset_set(ev, m, e->include[j], iv ? iv : "");
		}
		if (e->return_bool)
			m = drop_name(ev, m);
		if (e->card == PROMQL_CARD_ONE_TO_ONE) {
			if (smap_get(&matched, s, NULL)) {
				everr(ev, GPULSE_EINVAL,
				      "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)");
				return false;
			}
			smap_put(&matched, s, i);
		} else {
			/* Grouping labels must make every result unique. */
			const char *key = full_key(ev, m);
			size_t klen = strlen(s) + strlen(key) + 2;
			char *both = arena_alloc(&ev->step, klen);
			snprintf(both, klen, "%s\x01%s", s, key);
			if (smap_get(&inserted, both, NULL)) {
				everr(ev, GPULSE_EINVAL, "multiple matches for labels: grouping labels must ensure unique matches");
				return false;
			}
			smap_put(&inserted, both, i);
		}
		out->s[out->n++] = (struct vsample){m, v};
	}
	return true;
}

static bool eval_binary(struct ev *ev, const struct promql_expr *e, struct value *out)
{
	struct value l, r;
	if (!eval(ev, e->lhs, &l) || !eval(ev, e->rhs, &r))
		return false;
	bool keep;
	if (l.type == PROMQL_TYPE_SCALAR && r.type == PROMQL_TYPE_SCALAR) {
		out->type = PROMQL_TYPE_SCALAR;
		out->scalar = elem_binop(e->op, l.scalar, r.scalar, &keep);
		if (is_comparison(e->op))
			out->scalar = keep ? 1 : 0;
		return true;
	}
	if (l.type == PROMQL_TYPE_VECTOR && r.type == PROMQL_TYPE_VECTOR) {
		if (!eval_vector_binop(ev, e, &l, &r, out))
			return false;
		return check_unique(ev, out);
	}
	bool swap = l.type == PROMQL_TYPE_SCALAR;
	struct value *vec = swap ? &r : &l;
	double sc = swap ? l.scalar : r.scalar;
	vec_alloc(ev, out, vec->n);
	for (size_t i = 0; i < vec->n; i++) {
		double lv = vec->s[i].v, rv = sc;
		if (swap) {
			lv = sc;
			rv = vec->s[i].v;
		}
		double v = elem_binop(e->op, lv, rv, &keep);
		if (is_comparison(e->op) && swap)
			v = rv;
		if (e->return_bool) {
			v = keep ? 1 : 0;
			keep = true;
		}
		if (!keep)
			continue;
		struct lset ls = vec->s[i].ls;
		if (drops_name(e->op) || e->return_bool)
			ls = drop_name(ev, ls);
		out->s[out->n++] = (struct vsample){ls, v};
	}
	return check_unique(ev, out);
}

static bool eval(struct ev *ev, const struct promql_expr *e, struct value *out)
{
	memset(out, 0, sizeof *out);
	if (ev_interrupted(ev))
		return false;
	switch (e->kind) {
	case PROMQL_NODE_NUMBER:
		out->type = PROMQL_TYPE_SCALAR;
		out->scalar = e->number;
		return true;
	case PROMQL_NODE_STRING:
		out->type = PROMQL_TYPE_STRING;
		out->string = e->string;
		return true;
	case PROMQL_NODE_PAREN:
		return eval(ev, e->lhs, out);
	case PROMQL_NODE_VECTOR_SEL:
		return eval_vector_sel(ev, e, out);
	case PROMQL_NODE_MATRIX_SEL:
	case PROMQL_NODE_SUBQUERY:
		everr(ev, GPULSE_EINVAL, "a range vector can only be a function argument or the whole query");
		return false;
	case PROMQL_NODE_CALL:
		return eval_call(ev, e, out);
	case PROMQL_NODE_AGG:
		return eval_agg(ev, e, out);
	case PROMQL_NODE_BINARY:
		return eval_binary(ev, e, out);
	case PROMQL_NODE_UNARY: {
		struct value a;
		if (!eval(ev, e->lhs, &a))
			return false;
		if (a.type == PROMQL_TYPE_SCALAR) {
			out->type = PROMQL_TYPE_SCALAR;
			out->scalar = -a.scalar;
			return true;
		}
		vec_alloc(ev, out, a.n);
		for (size_t i = 0; i < a.n; i++)
			out->s[out->n++] = (struct vsample){drop_name(ev, a.s[i].ls), -a.s[i].v};
		return check_unique(ev, out);
	}
	}
	return false;
}

/* ---- results ---- */

struct rseries {
	struct lset ls;
	struct promql_sample *pts;
	size_t n, cap;
};

static struct label *copy_labels(struct arena *a, struct lset ls)
{
	struct label *o = arena_alloc(a, (ls.n ? ls.n : 1) * sizeof *o);
	for (size_t i = 0; i < ls.n; i++) {
		o[i].name = arena_strdup(a, ls.v[i].name);
		o[i].value = arena_strdup(a, ls.v[i].value);
	}
	return o;
}

static void ev_init(struct ev *ev, const struct promql_queryable *q, void *qctx, const struct promql_opts *opts)
{
	memset(ev, 0, sizeof *ev);
	ev->q = q;
	ev->qctx = qctx;
	if (opts)
		ev->opts = *opts;
	else
		promql_opts_default(&ev->opts);
	ev->watch = ev->opts.deadline_ns != 0 || ev->opts.cancelled != NULL;
}

static int ev_finish(struct ev *ev, char *err, size_t errlen)
{
	for (size_t i = 0; i < ev->nsel; i++)
		if (ev->sel[i].selected)
			ev->q->release(ev->qctx, &ev->sel[i].set);
	free(ev->sel);
	free(ev->tmp);
	arena_free(&ev->step);
	if (ev->status)
		str_errf(err, errlen, "%s", ev->err);
	return ev->status;
}

struct result_mem {
	struct promql_result r;
	struct arena a;
};

static struct result_mem *result_new(void)
{
	return xcalloc(1, sizeof(struct result_mem));
}

void promql_result_free(struct promql_result *r)
{
	if (!r)
		return;
	struct result_mem *m = r->mem;
	arena_free(&m->a);
	free(m);
}

void promql_opts_default(struct promql_opts *o)
{
	memset(o, 0, sizeof *o);
	o->lookback_ms = PROMQL_DEFAULT_LOOKBACK_MS;
	o->max_series = PROMQL_DEFAULT_MAX_SERIES;
	o->max_samples = PROMQL_DEFAULT_MAX_SAMPLES;
	o->subquery_step_ms = 60000;
}

int promql_eval_instant(const struct promql_expr *e, const struct promql_queryable *q, void *qctx,
			const struct promql_opts *opts, int64_t t_ms,
			struct promql_result **out, char *err, size_t errlen)
{
	struct ev ev;
	*out = NULL;
	ev_init(&ev, q, qctx, opts);
	ev.qstart = ev.qend = t_ms;
	select_all(&ev, e, t_ms, t_ms);
	struct result_mem *m = result_new();
	struct promql_result *r = &m->r;
	r->mem = m;
	r->t_ms = t_ms;
	r->type = e->type;
	ev.ts = t_ms;
	const struct promql_expr *u = unparen(e);
	if (ev.status) {
		/* reported below */
	} else if (u->kind == PROMQL_NODE_MATRIX_SEL || u->kind == PROMQL_NODE_SUBQUERY) {
		struct promql_series_set set;
		if (!range_input(&ev, u, &set))
			set.nseries = 0; /* the error is reported below */
		struct promql_result_series *rs = arena_calloc(&m->a, set.nseries + 1, sizeof *rs);
		int64_t maxt = at_time(&ev, u) - u->offset_ms;
		for (size_t i = 0; i < set.nseries && !ev_tick(&ev); i++) {
			size_t n = window(&ev, &set.series[i], maxt - u->range_ms, maxt);
			if (n == 0)
				continue;
			struct promql_sample *pts = arena_alloc(&m->a, n * sizeof *pts);
			memcpy(pts, ev.tmp, n * sizeof *pts);
			struct lset ls = series_lset(&set.series[i]);
			rs[r->nseries++] = (struct promql_result_series){copy_labels(&m->a, ls), ls.n, pts, n};
		}
		r->series = rs;
	} else {
		struct value v;
		if (eval(&ev, e, &v)) {
			if (v.type == PROMQL_TYPE_SCALAR) {
				r->scalar = v.scalar;
			} else if (v.type == PROMQL_TYPE_STRING) {
				r->string = arena_strdup(&m->a, v.string);
			} else {
				struct promql_result_series *rs = arena_calloc(&m->a, v.n + 1, sizeof *rs);
				for (size_t i = 0; i < v.n; i++) {
					struct promql_sample *pt = arena_alloc(&m->a, sizeof *pt);
					pt->t_ms = t_ms;
					pt->v = v.s[i].v;
					rs[i] = (struct promql_result_series){copy_labels(&m->a, v.s[i].ls), v.s[i].ls.n, pt, 1};
				}
				r->series = rs;
				r->nseries = v.n;
			}
		}
	}
	int rc = ev_finish(&ev, err, errlen);
	if (rc) {
		promql_result_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

static int cmp_rseries(const void *a, const void *b)
{
	return lset_cmp(((const struct rseries *)a)->ls, ((const struct rseries *)b)->ls);
}

int promql_eval_range(const struct promql_expr *e, const struct promql_queryable *q, void *qctx,
		      const struct promql_opts *opts, int64_t start_ms, int64_t end_ms, int64_t step_ms,
		      struct promql_result **out, char *err, size_t errlen)
{
	*out = NULL;
	if (e->type != PROMQL_TYPE_SCALAR && e->type != PROMQL_TYPE_VECTOR) {
		str_errf(err, errlen, "invalid expression type \"%s\" for range query, must be Scalar or instant Vector",
			 promql_type_name(e->type));
		return GPULSE_EINVAL;
	}
	if (step_ms <= 0 || end_ms < start_ms) {
		str_errf(err, errlen, "%s", step_ms <= 0 ? "zero or negative query resolution step widths are not accepted"
							: "end timestamp must not be before start time");
		return GPULSE_EINVAL;
	}
	if ((end_ms - start_ms) / step_ms > PROMQL_MAX_STEPS) {
		str_errf(err, errlen, "exceeded maximum resolution of %d points per timeseries", PROMQL_MAX_STEPS);
		return GPULSE_ELIMIT;
	}
	struct ev ev;
	ev_init(&ev, q, qctx, opts);
	ev.qstart = start_ms;
	ev.qend = end_ms;
	select_all(&ev, e, start_ms, end_ms);
	struct result_mem *m = result_new();
	struct promql_result *r = &m->r;
	r->mem = m;
	r->type = PROMQL_TYPE_MATRIX;
	/* Series are collected in the result arena keyed by their label set;
	 * the map lives there too, as its keys outlive every step. */
	struct rseries *rs = NULL;
	size_t nrs = 0, caprs = 0, total = 0;
	size_t mapcap = 64;
	const char **keys = xcalloc(mapcap, sizeof *keys);
	size_t *vals = xcalloc(mapcap, sizeof *vals);
	for (int64_t t = start_ms; t <= end_ms && !ev.status; t += step_ms) {
		ev.ts = t;
		struct value v;
		if (ev_interrupted(&ev) || !eval(&ev, e, &v))
			break;
		if (v.type == PROMQL_TYPE_SCALAR) {
			vec_alloc(&ev, &v, 1);
			v.s[v.n++] = (struct vsample){{NULL, 0}, v.scalar};
		}
		total += v.n;
		if (total > ev.opts.max_samples) {
			everr(&ev, GPULSE_ELIMIT, "query processing would load too many samples into memory in query execution (limit %zu)",
			      ev.opts.max_samples);
			break;
		}
		for (size_t i = 0; i < v.n; i++) {
			const char *k = full_key(&ev, v.s[i].ls);
			if (nrs * 2 + 2 > mapcap) {
				size_t ncap = mapcap * 2;
				const char **nk = xcalloc(ncap, sizeof *nk);
				size_t *nv = xcalloc(ncap, sizeof *nv);
				for (size_t j = 0; j < mapcap; j++) {
					if (!keys[j])
						continue;
					size_t h = (size_t)fnv1a64_str(keys[j]) & (ncap - 1);
					while (nk[h])
						h = (h + 1) & (ncap - 1);
					nk[h] = keys[j];
					nv[h] = vals[j];
				}
				free(keys);
				free(vals);
				keys = nk;
				vals = nv;
				mapcap = ncap;
			}
			size_t h = (size_t)fnv1a64_str(k) & (mapcap - 1);
			while (keys[h] && strcmp(keys[h], k) != 0)
				h = (h + 1) & (mapcap - 1);
			struct rseries *s;
			if (!keys[h]) {
				if (nrs == caprs) {
					caprs = caprs ? caprs * 2 : 16;
					rs = xrealloc(rs, caprs * sizeof *rs);
				}
				s = &rs[nrs];
				memset(s, 0, sizeof *s);
				s->ls.v = copy_labels(&m->a, v.s[i].ls);
				s->ls.n = v.s[i].ls.n;
				keys[h] = arena_strdup(&m->a, k);
				vals[h] = nrs++;
			} else {
				s = &rs[vals[h]];
			}
			if (s->n == s->cap) {
				s->cap = s->cap ? s->cap * 2 : 16;
				s->pts = xrealloc(s->pts, s->cap * sizeof *s->pts);
			}
			s->pts[s->n++] = (struct promql_sample){t, v.s[i].v};
		}
		/* Nothing of this step is needed any more. */
		arena_free(&ev.step);
		if (t > INT64_MAX - step_ms)
			break;
	}
	free(keys);
	free(vals);
	if (!ev.status && nrs > 0) {
		qsort(rs, nrs, sizeof *rs, cmp_rseries);
		struct promql_result_series *out_s = arena_calloc(&m->a, nrs, sizeof *out_s);
		for (size_t i = 0; i < nrs; i++) {
			struct promql_sample *pts = arena_alloc(&m->a, rs[i].n * sizeof *pts);
			memcpy(pts, rs[i].pts, rs[i].n * sizeof *pts);
			out_s[i] = (struct promql_result_series){rs[i].ls.v, rs[i].ls.n, pts, rs[i].n};
		}
		r->series = out_s;
		r->nseries = nrs;
	}
	for (size_t i = 0; i < nrs; i++)
		free(rs[i].pts);
	free(rs);
	int rc = ev_finish(&ev, err, errlen);
	if (rc) {
		promql_result_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* ---- formatting ---- */

int promql_format_value(struct buf *b, double v)
{
	return gofloat_put(b, v, 'f');
}

int promql_put_json_labels(struct buf *b, const struct label *l, size_t n)
{
	buf_putc(b, '{');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(b, ',');
		buf_put_json_string(b, l[i].name);
		buf_putc(b, ':');
		buf_put_json_string(b, l[i].value);
	}
	return buf_putc(b, '}');
}

int promql_format_labels(struct buf *b, const struct label *labels, size_t n)
{
	buf_putc(b, '{');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_puts(b, ", ");
		buf_puts(b, labels[i].name);
		buf_putc(b, '=');
		promql_quote(b, labels[i].value);
	}
	return buf_putc(b, '}');
}
