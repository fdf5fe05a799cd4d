/* Prometheus's query API over the store; see api.h. Each handler checks
 * its parameters as Prometheus's web/api/v1 does and with its messages,
 * evaluates through promql_eval_* over tsdb_queryable, and writes the
 * answer in Prometheus's JSON (values as strings, times as seconds with
 * millisecond precision). */
#include "api/query.h"

#include <ctype.h>
#include <malloc.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/duration.h"
#include "common/gofloat.h"
#include "promql/parser.h"
#include "common/status.h"
#include "common/str.h"
#include "promql/tsdb_queryable.h"

#define API_MIN_TIME_MS (-(1LL << 52))
#define API_MAX_TIME_MS (1LL << 52)

void api_init(struct api *a, struct tsdb *db)
{
	memset(a, 0, sizeof *a);
	a->db = db;
	pthread_mutex_init(&a->why_mu, NULL);
	promql_opts_default(&a->opts);
	a->timeout_ns = API_DEFAULT_TIMEOUT_NS;
	a->max_concurrency = API_DEFAULT_MAX_CONCURRENCY;
}

void api_stats(struct api *a, struct api_stats *out)
{
	struct http_pool_stats ps;
	http_pool_stats(a->pool, &ps);
	memset(out, 0, sizeof *out);
	out->running = ps.running;
	out->queued = ps.queued;
	out->started_total = ps.started_total;
	out->rejected_total = ps.rejected_total;
	out->timed_out_total = atomic_load_explicit(&a->timed_out_total, memory_order_relaxed);
	out->cancelled_total = ps.gone_total +
			       atomic_load_explicit(&a->cancelled_total, memory_order_relaxed);
}

void api_set_store(struct api *a, struct tsdb *db)
{
	atomic_store_explicit(&a->db, db, memory_order_release);
}

void api_set_unavailable(struct api *a, const char *why)
{
	pthread_mutex_lock(&a->why_mu);
	snprintf(a->why, sizeof a->why, "%s", why ? why : "");
	pthread_mutex_unlock(&a->why_mu);
}

/* ---- parameters -------------------------------------------------------- */

int api_parse_time(const char *s, int64_t *t_ms)
{
	if (!s || !*s)
		return GPULSE_EINVAL;
	char *end;
	double v = strtod(s, &end);
	if (*end == '\0' && end != s) {
		/* As Prometheus: whole seconds, then the fraction rounded to ms. */
		if (!isfinite(v) || fabs(v) > (double)API_MAX_TIME_MS / 1000)
			return GPULSE_EINVAL;
		double whole;
		double frac = modf(v, &whole);
		*t_ms = (int64_t)whole * 1000 + (int64_t)llround(frac * 1000);
		return GPULSE_OK;
	}
	return clock_parse_rfc3339(s, t_ms);
}

int api_parse_duration(const char *s, int64_t *ms)
{
	int64_t ns;
	if (!s || !*s || duration_parse_arg(s, &ns) != 0)
		return GPULSE_EINVAL;
	*ms = ns / 1000000;
	return GPULSE_OK;
}

int api_put_time(struct buf *b, int64_t t_ms)
{
	const char *sign = "";
	uint64_t u = (uint64_t)t_ms;
	if (t_ms < 0) {
		sign = "-";
		u = (uint64_t)0 - u;
	}
	uint64_t sec = u / 1000, ms = u % 1000;
	if (ms == 0)
		return buf_printf(b, "%s%llu", sign, (unsigned long long)sec);
	char frac[4];
	snprintf(frac, sizeof frac, "%03u", (unsigned)ms);
	for (int i = 2; i > 0 && frac[i] == '0'; i--)
		frac[i] = '\0';
	return buf_printf(b, "%s%llu.%s", sign, (unsigned long long)sec, frac);
}

/* ---- envelopes ------------------------------------------------------------ */

static int bad_param(struct http_response *resp, const char *param, const char *what)
{
	char msg[1200];
	snprintf(msg, sizeof msg, "invalid parameter \"%s\": %s", param, what);
	return http_api_error(resp, 400, "bad_data", msg);
}

/* Any parameter holding a NUL byte is refused: C strings would read it
 * cut short (query=1%00+5 as "1"). Prometheus's messages differ with the
 * parameter (the parser's "unexpected character: '\x00'", a time's
 * "cannot parse"); all are 400 bad_data naming it. true after writing
 * the 400. */
static bool nul_param(const struct http_request *req, struct http_response *resp)
{
	const char *name = http_request_nul_arg(req);
	if (!name)
		return false;
	char param[200];
	str_copy(param, sizeof param, name);
	bad_param(resp, param, "the value holds a NUL byte (%00)");
	return true;
}

static int bad_time(struct http_response *resp, const char *param, const char *value)
{
	char what[300];
	snprintf(what, sizeof what, "cannot parse \"%.200s\" to a valid timestamp", value ? value : "");
	return bad_param(resp, param, what);
}

static bool storage_off(struct api *a, struct http_response *resp)
{
	char msg[900], fault[700];
	bool why;
	struct tsdb *db = atomic_load_explicit(&a->db, memory_order_acquire);
	if (db) {
		/* Open but not writable (read-only, deleted and not yet made
		 * again): its history may be incomplete, as docs/GPULSED.md says. */
		if (tsdb_unwritable(db, fault, sizeof fault) == 0)
			return false;
		snprintf(msg, sizeof msg, "storage unavailable: %s", fault);
		why = true;
	} else {
		pthread_mutex_lock(&a->why_mu);
		why = a->why[0] != '\0';
		if (why)
			snprintf(msg, sizeof msg, "storage unavailable: %s", a->why);
		pthread_mutex_unlock(&a->why_mu);
	}
	if (!why)
		snprintf(msg, sizeof msg, "storage is disabled: start gpulsed with storage.path or "
			 "--storage-path to query its history");
	http_api_error(resp, 503, "unavailable", msg);
	return true;
}

/* A result too large for the response bound is the client's to narrow. */
static int finish(struct http_response *resp)
{
	if (resp->body.failed)
		return http_api_error(resp, 422, "execution",
				 "the result exceeds the response size bound; narrow the query or "
				 "raise the step");
	return 0;
}

/* How long the request this query thread serves waited for its slot, and
 * its whole allowance (timed_out_queued sets both as the handler starts;
 * a pool thread serves one request at a time). */
static _Thread_local int64_t queued_ns, allowed_ns;

static int eval_error(struct api *a, struct http_response *resp, int rc, const char *err)
{
	if (rc == GPULSE_ELIMIT || rc == GPULSE_EINVAL || rc == GPULSE_ERANGE)
		return http_api_error(resp, 422, "execution", err);
	/* As Prometheus's API: both 503. Nobody reads a canceled answer; it
	 * is written for the log of whatever proxy sits between. */
	if (rc == GPULSE_ETIMEDOUT) {
		atomic_fetch_add_explicit(&a->timed_out_total, 1, memory_order_relaxed);
		/* A query that got its slot with little of its time left
		 * (behind another that ran to the same timeout) stops in
		 * evaluation; the message says where its time went, when the
		 * wait took a tenth of it or more (a wait of a few ms does not
		 * explain a timeout, and Prometheus's plain message stays). */
		if (queued_ns > 0 && allowed_ns > 0 && queued_ns * 10 >= allowed_ns) {
			char msg[768];
			snprintf(msg, sizeof msg, "%s, after waiting %.3fs of its %.3fs in the query queue",
				 err, (double)queued_ns / 1e9, (double)allowed_ns / 1e9);
			return http_api_error(resp, 503, "timeout", msg);
		}
		return http_api_error(resp, 503, "timeout", err);
	}
	if (rc == GPULSE_ECANCELED) {
		atomic_fetch_add_explicit(&a->cancelled_total, 1, memory_order_relaxed);
		return http_api_error(resp, 503, "canceled", err);
	}
	return http_api_error(resp, 500, "internal", err);
}

static bool client_gone(void *ctx)
{
	return http_request_gone(ctx);
}

/* The evaluator's options for one request: a->opts, the deadline counted
 * from the request's arrival, and its client's hang-up as the cancel
 * test. A `timeout` argument shortens the deadline, never lengthens it
 * (Prometheus's: "capped by the value of the --query.timeout flag"). -1
 * after writing a 400 for a bad one. */
static int request_opts(const struct api *a, const struct http_request *req,
			struct http_response *resp, struct promql_opts *o)
{
	*o = a->opts;
	int64_t timeout_ns = a->timeout_ns;
	const char *ts = http_request_arg(req, "timeout");
	if (ts) {
		int64_t ms;
		if (api_parse_duration(ts, &ms) != 0 || ms <= 0) {
			char what[300];
			snprintf(what, sizeof what, "cannot parse \"%.200s\" to a valid duration", ts);
			bad_param(resp, "timeout", what);
			return -1;
		}
		if (timeout_ns <= 0 || ms * 1000000 < timeout_ns)
			timeout_ns = ms * 1000000;
	}
	if (timeout_ns > 0)
		o->deadline_ns = req->received_ns + timeout_ns;
	if (req->job) {
		o->cancelled = client_gone;
		o->cancelled_ctx = (void *)(uintptr_t)req;
	}
	return 0;
}

/* A request that waited past its deadline for a slot is answered as
 * Prometheus answers one: "query timed out in query queue". One that
 * waited less has its wait noted for a later timeout's message. */
static bool timed_out_queued(struct api *a, const struct http_request *req,
			     const struct promql_opts *o, struct http_response *resp)
{
	int64_t now = clock_mono_ns();
	queued_ns = allowed_ns = 0;
	if (!o->deadline_ns)
		return false;
	if (now >= o->deadline_ns) {
		eval_error(a, resp, GPULSE_ETIMEDOUT, "query timed out in query queue");
		return true;
	}
	/* Only a wait worth a mention: a millisecond is the pool's hand-over. */
	if (req->job && now - req->received_ns >= 1000000) {
		queued_ns = now - req->received_ns;
		allowed_ns = o->deadline_ns - req->received_ns;
	}
	return false;
}

static void put_point(struct buf *b, int64_t t_ms, double v)
{
	buf_putc(b, '[');
	api_put_time(b, t_ms);
	buf_puts(b, ",\"");
	gofloat_put_sample(b, v);
	buf_puts(b, "\"]");
}

/* Points written between two looks at the deadline: formatting is about
 * 100 ns a point, so a look every few hundred microseconds. */
#define API_POINTS_PER_CHECK 4096

/* The answer to r. Formatting millions of points takes seconds, so the
 * query's deadline and its client's hang-up are checked as it goes, and it
 * stops at once when the response bound is reached (finish answers 422).
 * 0, or GPULSE_ETIMEDOUT / GPULSE_ECANCELED with the message in err. */
static int put_result(struct buf *b, const struct promql_result *r, const struct promql_opts *o,
		      char *err, size_t errlen)
{
	int64_t next_poll_ns = 0;
	size_t until_check = API_POINTS_PER_CHECK;
	static const char *const kinds[] = {
		[PROMQL_TYPE_SCALAR] = "scalar", [PROMQL_TYPE_VECTOR] = "vector",
		[PROMQL_TYPE_MATRIX] = "matrix", [PROMQL_TYPE_STRING] = "string",
	};
	buf_puts(b, "{\"status\":\"success\",\"data\":{\"resultType\":\"");
	buf_puts(b, kinds[r->type]);
	buf_puts(b, "\",\"result\":");
	switch (r->type) {
	case PROMQL_TYPE_SCALAR:
		/* Prometheus writes a scalar answer with Go's 'f' always
		 * (promql.Scalar's MarshalJSON: "1000000000000000000000"), and
		 * vector and matrix samples with 'e' at the extremes
		 * (marshalPointJSON: "1e+21"), found by the generative test. */
		buf_putc(b, '[');
		api_put_time(b, r->t_ms);
		buf_puts(b, ",\"");
		gofloat_put(b, r->scalar, 'f');
		buf_puts(b, "\"]");
		break;
	case PROMQL_TYPE_STRING:
		buf_putc(b, '[');
		api_put_time(b, r->t_ms);
		buf_putc(b, ',');
		buf_put_json_string(b, r->string ? r->string : "");
		buf_putc(b, ']');
		break;
	default: {
		bool vector = r->type == PROMQL_TYPE_VECTOR;
		buf_putc(b, '[');
		for (size_t i = 0; i < r->nseries; i++) {
			const struct promql_result_series *s = &r->series[i];
			if (i)
				buf_putc(b, ',');
			buf_puts(b, "{\"metric\":");
			promql_put_json_labels(b, s->labels, s->nlabels);
			buf_puts(b, vector ? ",\"value\":" : ",\"values\":[");
			for (size_t k = 0; k < s->npoints; k++) {
				if (k)
					buf_putc(b, ',');
				put_point(b, s->points[k].t_ms, s->points[k].v);
				if (--until_check == 0) {
					until_check = API_POINTS_PER_CHECK;
					if (b->failed)
						return 0;
					int stop = promql_check_stop(o, &next_poll_ns, "result formatting",
								     err, errlen);
					if (stop)
						return stop;
				}
				if (vector)
					break;
			}
			buf_puts(b, vector ? "}" : "]}");
			if (b->failed)
				return 0;
		}
		buf_putc(b, ']');
		break;
	}
	}
	buf_puts(b, "}}\n");
	return 0;
}

static int parse_query(struct http_response *resp, const char *q, struct promql_expr **e)
{
	char err[512];
	if (promql_parse(q ? q : "", e, err, sizeof err) != 0) {
		bad_param(resp, "query", err);
		return -1;
	}
	return 0;
}

/* ---- /api/v1/query and /api/v1/query_range ------------------------------------ */

static int query_instant(void *ctx, const struct http_request *req, struct http_response *resp)
{
	if (nul_param(req, resp))
		return 0;
	struct api *a = ctx;
	if (storage_off(a, resp))
		return 0;
	const char *ts = http_request_arg(req, "time");
	int64_t t_ms = clock_wall_ns() / 1000000;
	if (ts && api_parse_time(ts, &t_ms) != 0)
		return bad_time(resp, "time", ts);
	struct promql_opts o;
	if (request_opts(a, req, resp, &o) || timed_out_queued(a, req, &o, resp))
		return 0;
	struct promql_expr *e;
	if (parse_query(resp, http_request_arg(req, "query"), &e))
		return 0;
	struct tsdb_queryable_ctx qc = {a->db, a->opts.max_series, a->opts.max_samples, true, &o};
	struct promql_result *r = NULL;
	char err[512];
	int rc = promql_eval_instant(e, &tsdb_queryable, &qc, &o, t_ms, &r, err, sizeof err);
	promql_expr_free(e);
	if (rc)
		return eval_error(a, resp, rc, err);
	resp->content_type = "application/json";
	rc = put_result(&resp->body, r, &o, err, sizeof err);
	promql_result_free(r);
	if (rc)
		return eval_error(a, resp, rc, err);
	return finish(resp);
}

static int query_range(void *ctx, const struct http_request *req, struct http_response *resp)
{
	if (nul_param(req, resp))
		return 0;
	struct api *a = ctx;
	if (storage_off(a, resp))
		return 0;
	const char *ss = http_request_arg(req, "start"), *es = http_request_arg(req, "end");
	const char *st = http_request_arg(req, "step");
	int64_t start, end, step;
	if (api_parse_time(ss, &start) != 0)
		return bad_time(resp, "start", ss);
	if (api_parse_time(es, &end) != 0)
		return bad_time(resp, "end", es);
	if (end < start)
		return bad_param(resp, "end", "end timestamp must not be before start time");
	if (api_parse_duration(st, &step) != 0) {
		char what[300];
		snprintf(what, sizeof what, "cannot parse \"%.200s\" to a valid duration", st ? st : "");
		return bad_param(resp, "step", what);
	}
	if (step <= 0)
		return bad_param(resp, "step", "zero or negative query resolution step widths are not "
					       "accepted. Try a positive integer");
	if ((end - start) / step > PROMQL_MAX_STEPS)
		return http_api_error(resp, 400, "bad_data",
				 "exceeded maximum resolution of 11,000 points per timeseries. Try "
				 "decreasing the query resolution (?step=XX)");
	if (end - start > API_MAX_RANGE_MS) {
		char d[32], msg[160];
		duration_format(API_MAX_RANGE_MS * 1000000, d, sizeof d);
		snprintf(msg, sizeof msg, "the query range exceeds the maximum of %s", d);
		return bad_param(resp, "end", msg);
	}
	struct promql_expr *e;
	if (parse_query(resp, http_request_arg(req, "query"), &e))
		return 0;
	if (e->type != PROMQL_TYPE_SCALAR && e->type != PROMQL_TYPE_VECTOR) {
		char msg[160];
		snprintf(msg, sizeof msg, "invalid expression type \"%s\" for range query, must be "
			 "Scalar or instant Vector", promql_type_name(e->type));
		promql_expr_free(e);
		return http_api_error(resp, 400, "bad_data", msg);
	}
	struct promql_opts o;
	if (request_opts(a, req, resp, &o) || timed_out_queued(a, req, &o, resp)) {
		promql_expr_free(e);
		return 0;
	}
	struct tsdb_queryable_ctx qc = {a->db, a->opts.max_series, a->opts.max_samples, true, &o};
	struct promql_result *r = NULL;
	char err[512];
	int rc = promql_eval_range(e, &tsdb_queryable, &qc, &o, start, end, step, &r, err,
				   sizeof err);
	promql_expr_free(e);
	if (rc)
		return eval_error(a, resp, rc, err);
	resp->content_type = "application/json";
	rc = put_result(&resp->body, r, &o, err, sizeof err);
	promql_result_free(r);
	if (rc)
		return eval_error(a, resp, rc, err);
	return finish(resp);
}

/* A query may take hundreds of MB (up to query.max_samples samples, and
 * its answer) in blocks that glibc keeps once freed: in the query
 * thread's own malloc arena, and, under the mmap threshold that glibc
 * raises after each large free (up to 32 MiB), in heap it does not give
 * back. Repeating a query the sample limit refuses took RSS from 25 MB
 * to 340 MB. So the threshold is fixed (api_register: blocks from 1 MiB
 * are mapped and unmapped on free) and each query ends by trimming what
 * was freed in every arena (a walk of the free lists: well under a
 * millisecond against the query's own cost). */
#define API_MMAP_THRESHOLD_BYTES (1 << 20)

static void release_query_memory(void)
{
	malloc_trim(0);
}

static int handle_query(void *ctx, const struct http_request *req, struct http_response *resp)
{
	int rc = query_instant(ctx, req, resp);
	release_query_memory();
	return rc;
}

static int handle_query_range(void *ctx, const struct http_request *req,
			      struct http_response *resp)
{
	int rc = query_range(ctx, req, resp);
	release_query_memory();
	return rc;
}

/* ---- /api/v1/series, labels, label values ---------------------------------------- */

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* What one walk over selected series calls per series: 0 to go on, -1
 * after writing an error to resp, or a status code. */
typedef int series_fn(void *cb, const struct label *l, size_t n, struct http_response *resp);

/* match[], start and end as /api/v1/series, /api/v1/labels and
 * /api/v1/label/NAME/values read them (Prometheus's parseMatchersParam
 * and parseTimeParam with minTime/maxTime defaults). -1 after a 400. */
static int series_params(const struct http_request *req, struct http_response *resp,
			 const char **match, size_t *nm, int64_t *start, int64_t *end)
{
	*nm = http_request_args(req, "match[]", match, API_MAX_MATCH);
	if (*nm > API_MAX_MATCH) {
		char msg[96];
		snprintf(msg, sizeof msg, "more than %d match[] parameters", API_MAX_MATCH);
		http_api_error(resp, 400, "bad_data", msg);
		return -1;
	}
	const char *ss = http_request_arg(req, "start"), *es = http_request_arg(req, "end");
	*start = API_MIN_TIME_MS;
	*end = API_MAX_TIME_MS;
	if (ss && api_parse_time(ss, start) != 0) {
		bad_time(resp, "start", ss);
		return -1;
	}
	if (es && api_parse_time(es, end) != 0) {
		bad_time(resp, "end", es);
		return -1;
	}
	if (*end < *start) {
		/* Prometheus's store answers nothing then; so does the walk. */
		*end = *start;
	}
	return 0;
}

/* Call fn for every series that any of match[] selects with data in
 * [start, end] (a series two selectors pick comes twice). */
static int each_series(struct api *a, struct http_response *resp, const struct promql_opts *o,
		       const char *const *match, size_t nm, int64_t start, int64_t end,
		       series_fn *fn, void *cb)
{
	int64_t next_poll_ns = 0;
	int rc = 0;
	for (size_t i = 0; i < nm && !rc; i++) {
		struct promql_expr *e;
		char err[512];
		if (promql_parse(match[i], &e, err, sizeof err) != 0) {
			bad_param(resp, "match[]", err);
			return -1;
		}
		if (e->kind != PROMQL_NODE_VECTOR_SEL || e->offset_ms != 0) {
			promql_expr_free(e);
			char what[300];
			snprintf(what, sizeof what, "\"%.200s\" is not a series selector", match[i]);
			bad_param(resp, "match[]", what);
			return -1;
		}
		if (e->nmatchers > TSDB_MAX_MATCHERS) {
			promql_expr_free(e);
			char what[96];
			snprintf(what, sizeof what, "more than %d label matchers", TSDB_MAX_MATCHERS);
			bad_param(resp, "match[]", what);
			return -1;
		}
		struct tsdb_matcher tm[TSDB_MAX_MATCHERS];
		size_t k = e->nmatchers;
		for (size_t j = 0; j < k; j++) {
			enum promql_match_op op = e->matchers[j].op;
			tm[j] = (struct tsdb_matcher){
				op == PROMQL_MATCH_NEQ ? TSDB_MATCH_NE : op == PROMQL_MATCH_RE ? TSDB_MATCH_RE
					: op == PROMQL_MATCH_NRE ? TSDB_MATCH_NRE : TSDB_MATCH_EQ,
				e->matchers[j].name, e->matchers[j].value};
		}
		struct tsdb_select_opts so = {.mint = start, .maxt = end, .mode = TSDB_READ_SPAN};
		struct tsdb_iter *it = NULL;
		int src = tsdb_select(a->db, tm, k, &so, &it, err, sizeof err);
		if (src) {
			promql_expr_free(e);
			if (src == GPULSE_EINVAL)
				bad_param(resp, "match[]", err);
			else
				eval_error(a, resp, src, err);
			return -1;
		}
		int more;
		while ((more = tsdb_iter_next_series(it)) == 1) {
			int stop = promql_check_stop(o, &next_poll_ns, "series selection", err, sizeof err);
			if (stop) {
				eval_error(a, resp, stop, err);
				rc = -1;
				break;
			}
			size_t nl;
			const struct label *tl = tsdb_iter_labels(it, &nl);
			rc = fn(cb, tl, nl, resp);
			if (rc)
				break;
		}
		if (more < 0 && !rc) {
			http_api_error(resp, 500, "internal", gpulse_strerror(-more));
			rc = -1;
		}
		tsdb_iter_free(it);
		promql_expr_free(e);
	}
	return rc;
}

/* A growing array of strings, sorted and made unique at the end. */
struct strset {
	char **v;
	size_t n, cap;
	const char *label;           /* label values: whose */
	struct buf one;              /* series: the JSON object being built */
};

static int strset_add(struct strset *ss, const char *s, size_t len, struct http_response *resp)
{
	if (ss->n == API_MAX_SERIES_RESULT) {
		char msg[96];
		snprintf(msg, sizeof msg, "more than %d series or values match", API_MAX_SERIES_RESULT);
		http_api_error(resp, 422, "execution", msg);
		return -1;
	}
	if (ss->n == ss->cap) {
		size_t cap = ss->cap ? ss->cap * 2 : 64;
		char **grown = realloc(ss->v, cap * sizeof *grown);
		if (!grown)
			return GPULSE_ENOMEM;
		ss->v = grown;
		ss->cap = cap;
	}
	ss->v[ss->n] = strndup(s, len);
	if (!ss->v[ss->n])
		return GPULSE_ENOMEM;
	ss->n++;
	/* Keep the set small as it grows: every 4096 additions, sort and
	 * drop duplicates (label names repeat in every series). */
	if (ss->n % 4096 == 0) {
		qsort(ss->v, ss->n, sizeof *ss->v, cmp_str);
		size_t w = 0;
		for (size_t i = 0; i < ss->n; i++) {
			if (w && strcmp(ss->v[i], ss->v[w - 1]) == 0)
				free(ss->v[i]);
			else
				ss->v[w++] = ss->v[i];
		}
		ss->n = w;
	}
	return 0;
}

static void strset_finish(struct strset *ss)
{
	if (ss->n > 1)
		qsort(ss->v, ss->n, sizeof *ss->v, cmp_str);
	size_t w = 0;
	for (size_t i = 0; i < ss->n; i++) {
		if (w && strcmp(ss->v[i], ss->v[w - 1]) == 0)
			free(ss->v[i]);
		else
			ss->v[w++] = ss->v[i];
	}
	ss->n = w;
}

static void strset_free(struct strset *ss)
{
	for (size_t i = 0; i < ss->n; i++)
		free(ss->v[i]);
	free(ss->v);
	buf_free(&ss->one);
}

static int add_series_json(void *cb, const struct label *tl, size_t nl,
			   struct http_response *resp)
{
	struct strset *ss = cb;
	buf_reset(&ss->one);
	buf_putc(&ss->one, '{');
	for (size_t j = 0; j < nl; j++) {
		if (j)
			buf_putc(&ss->one, ',');
		buf_put_json_string(&ss->one, tl[j].name);
		buf_putc(&ss->one, ':');
		buf_put_json_string(&ss->one, tl[j].value);
	}
	buf_putc(&ss->one, '}');
	if (ss->one.failed)
		return 0;
	return strset_add(ss, ss->one.data, ss->one.len, resp);
}

static int add_label_names(void *cb, const struct label *tl, size_t nl,
			   struct http_response *resp)
{
	struct strset *ss = cb;
	for (size_t j = 0; j < nl; j++) {
		int rc = strset_add(ss, tl[j].name, strlen(tl[j].name), resp);
		if (rc)
			return rc;
	}
	return 0;
}

static int add_label_value(void *cb, const struct label *tl, size_t nl,
			   struct http_response *resp)
{
	struct strset *ss = cb;
	for (size_t j = 0; j < nl; j++)
		if (strcmp(tl[j].name, ss->label) == 0)
			return strset_add(ss, tl[j].value, strlen(tl[j].value), resp);
	return 0;
}

static int put_strings(struct http_response *resp, char **s, size_t n)
{
	resp->content_type = "application/json";
	buf_puts(&resp->body, "{\"status\":\"success\",\"data\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(&resp->body, ',');
		buf_put_json_string(&resp->body, s[i]);
	}
	buf_puts(&resp->body, "]}\n");
	return finish(resp);
}

/* Every series matching match[] (or, for the label endpoints without
 * match[], every series) with data in [start, end], through fn into ss;
 * then ss sorted and unique. -1 after an error answer, or a status. */
static int collect(struct api *a, const struct http_request *req, struct http_response *resp,
		   const char **match, size_t nm, int64_t start, int64_t end, series_fn *fn,
		   struct strset *ss)
{
	struct promql_opts o;
	if (request_opts(a, req, resp, &o) || timed_out_queued(a, req, &o, resp))
		return -1;
	static const char *const all[] = {"{__name__=~\".+\"}"};
	int rc = nm ? each_series(a, resp, &o, match, nm, start, end, fn, ss)
		    : each_series(a, resp, &o, all, 1, start, end, fn, ss);
	if (!rc)
		strset_finish(ss);
	return rc;
}

static int handle_series(void *ctx, const struct http_request *req, struct http_response *resp)
{
	if (nul_param(req, resp))
		return 0;
	struct api *a = ctx;
	if (storage_off(a, resp))
		return 0;
	const char *match[API_MAX_MATCH];
	size_t nm;
	int64_t start, end;
	if (series_params(req, resp, match, &nm, &start, &end))
		return 0;
	if (nm == 0)
		return http_api_error(resp, 400, "bad_data", "no match[] parameter provided");
	struct strset ss = {0};
	buf_init(&ss.one, 1 << 20);
	int rc = collect(a, req, resp, match, nm, start, end, add_series_json, &ss);
	if (!rc) {
		resp->content_type = "application/json";
		buf_puts(&resp->body, "{\"status\":\"success\",\"data\":[");
		for (size_t i = 0; i < ss.n; i++) {
			if (i)
				buf_putc(&resp->body, ',');
			buf_puts(&resp->body, ss.v[i]);
		}
		buf_puts(&resp->body, "]}\n");
	}
	strset_free(&ss);
	if (rc > 0)
		return rc;
	return rc ? 0 : finish(resp);
}

/* The label names (label NULL) or the values of `label` among the series
 * match[] selects within start/end: /api/v1/labels and
 * /api/v1/label/NAME/values answer the same way. */
static int label_strings(struct api *a, const struct http_request *req,
			 struct http_response *resp, const char *label)
{
	const char *match[API_MAX_MATCH];
	size_t nm;
	int64_t start, end;
	if (series_params(req, resp, match, &nm, &start, &end))
		return 0;
	int rc;
	if (nm == 0 && start == API_MIN_TIME_MS && end == API_MAX_TIME_MS) {
		/* No restriction: the store's index answers without reading data. */
		char **s = NULL;
		size_t n = 0;
		rc = label ? tsdb_label_values(a->db, label, &s, &n) : tsdb_label_names(a->db, &s, &n);
		if (label && rc == GPULSE_ENOENT)
			return put_strings(resp, NULL, 0);
		if (rc)
			return http_api_error(resp, 500, "internal", gpulse_strerror(rc));
		rc = put_strings(resp, s, n);
		tsdb_strings_free(s, n);
		return rc;
	}
	struct strset ss = {.label = label};
	rc = collect(a, req, resp, match, nm, start, end, label ? add_label_value : add_label_names,
		     &ss);
	if (!rc)
		rc = put_strings(resp, ss.v, ss.n);
	strset_free(&ss);
	return rc < 0 ? 0 : rc;
}

static int handle_labels(void *ctx, const struct http_request *req, struct http_response *resp)
{
	if (nul_param(req, resp))
		return 0;
	struct api *a = ctx;
	if (storage_off(a, resp))
		return 0;
	return label_strings(a, req, resp, NULL);
}

static bool label_name_ok(const char *s, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return false;
	return true;
}

/* /api/v1/label/NAME/values */
static int handle_label_values(void *ctx, const struct http_request *req,
			       struct http_response *resp)
{
	if (nul_param(req, resp))
		return 0;
	struct api *a = ctx;
	static const char prefix[] = "/api/v1/label/", suffix[] = "/values";
	const char *name = req->path + sizeof prefix - 1;
	size_t len = strlen(name);
	if (len < sizeof suffix || strcmp(name + len - (sizeof suffix - 1), suffix) != 0) {
		resp->status = 404;
		return buf_puts(&resp->body, "404 page not found\n");
	}
	len -= sizeof suffix - 1;
	if (storage_off(a, resp))
		return 0;
	char label[TSDB_MAX_LABEL_NAME];
	if (!label_name_ok(name, len) || len >= sizeof label) {
		char msg[200];
		snprintf(msg, sizeof msg, "invalid label name: \"%.*s\"", (int)(len < 100 ? len : 100), name);
		return http_api_error(resp, 400, "bad_data", msg);
	}
	memcpy(label, name, len);
	label[len] = '\0';
	return label_strings(a, req, resp, label);
}

/* ---- /api/v1/format_query, /api/v1/query_exemplars ---------------------------- */

/* Prometheus's canonical text of the expression (its String() form; the
 * multi-line prettifier of long expressions is not reproduced). */
static int handle_format_query(void *ctx, const struct http_request *req,
			       struct http_response *resp)
{
	if (nul_param(req, resp))
		return 0;
	(void)ctx;
	struct promql_expr *e;
	if (parse_query(resp, http_request_arg(req, "query"), &e))
		return 0;
	struct buf f;
	buf_init(&f, 1 << 20);
	int rc = promql_expr_format(e, &f);
	promql_expr_free(e);
	if (rc) {
		buf_free(&f);
		return http_api_error(resp, 422, "execution", "the formatted query exceeds its bound");
	}
	resp->content_type = "application/json";
	buf_puts(&resp->body, "{\"status\":\"success\",\"data\":");
	buf_put_json_string(&resp->body, f.data ? f.data : "");
	buf_puts(&resp->body, "}\n");
	buf_free(&f);
	return finish(resp);
}

/* gpulse stores no exemplars: the parameters are checked as Prometheus
 * checks them and the answer is empty. */
static int handle_exemplars(void *ctx, const struct http_request *req, struct http_response *resp)
{
	if (nul_param(req, resp))
		return 0;
	(void)ctx;
	const char *ss = http_request_arg(req, "start"), *es = http_request_arg(req, "end");
	int64_t start = API_MIN_TIME_MS, end = API_MAX_TIME_MS;
	if (ss && api_parse_time(ss, &start) != 0)
		return bad_time(resp, "start", ss);
	if (es && api_parse_time(es, &end) != 0)
		return bad_time(resp, "end", es);
	if (end < start)
		return bad_param(resp, "end", "end timestamp must not be before start timestamp");
	struct promql_expr *e;
	if (parse_query(resp, http_request_arg(req, "query"), &e))
		return 0;
	promql_expr_free(e);
	resp->content_type = "application/json";
	return buf_puts(&resp->body, "{\"status\":\"success\",\"data\":[]}\n");
}

/* The pool is full: answered on the HTTP thread, at once. */
static int handle_busy(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api *a = ctx;
	(void)req;
	char msg[256];
	snprintf(msg, sizeof msg, "too many queries: %u running (query.max_concurrency) and %d "
		 "waiting; try again later", a->max_concurrency, API_MAX_QUEUED);
	return http_api_error(resp, 503, "unavailable", msg);
}

int api_register(struct http_server *s, struct api *a)
{
	/* Every endpoint reads the store, which may take long: all of them
	 * run on the pool, none on the threads that serve /metrics. */
	static const struct {
		const char *path;
		http_handler_fn *fn;
	} routes[] = {
		{"/api/v1/query", handle_query},
		{"/api/v1/query_range", handle_query_range},
		{"/api/v1/series", handle_series},
		{"/api/v1/labels", handle_labels},
		{"/api/v1/label/", handle_label_values},
		{"/api/v1/format_query", handle_format_query},
		{"/api/v1/query_exemplars", handle_exemplars},
	};
	mallopt(M_MMAP_THRESHOLD, API_MMAP_THRESHOLD_BYTES);
	int rc = http_pool_new(s, "gpulse-query", a->max_concurrency ? a->max_concurrency
								   : API_DEFAULT_MAX_CONCURRENCY,
			       API_MAX_QUEUED, API_QUERY_NICE, &a->pool);
	/* As Prometheus's router: all but label values take GET and POST
	 * with a form body (Grafana's data source posts by default). */
	for (size_t i = 0; !rc && i < sizeof routes / sizeof routes[0]; i++) {
		rc = http_route_deferred(s, routes[i].path, routes[i].fn, handle_busy, a, a->pool);
		if (!rc && strcmp(routes[i].path, "/api/v1/label/") != 0)
			rc = http_route_form(s, routes[i].path);
	}
	return rc;
}
