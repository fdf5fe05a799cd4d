/* PromQL evaluation with Prometheus 2.x semantics: an instant query at one
 * time or a range query over [start, end] every step, reading series
 * through a promql_queryable. See docs/internals/promql.md. */
#ifndef GPULSE_PROMQL_EVAL_H
#define GPULSE_PROMQL_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "promql/ast.h"
#include "common/buf.h"
#include "promql/queryable.h"

#define PROMQL_DEFAULT_LOOKBACK_MS (5 * 60 * 1000)
#define PROMQL_DEFAULT_MAX_SERIES  100000   /* per selector */
#define PROMQL_DEFAULT_MAX_SAMPLES 5000000  /* loaded or produced per query */
#define PROMQL_MAX_STEPS           11000    /* as Prometheus's API allows */
#define PROMQL_CANCEL_POLL_NS      (10 * 1000000LL) /* `cancelled` asked at most this often */

/* Asked now and then while a query runs: true when whoever wanted the
 * answer has gone (the HTTP client hung up), which stops the query. Runs
 * on the evaluating thread; must be cheap (a poll(2) of a socket is). */
typedef bool promql_cancelled_fn(void *ctx);

struct promql_opts {
	int64_t lookback_ms;       /* instant selectors look this far back */
	size_t max_series;         /* series one selector may select */
	size_t max_samples;        /* samples one query may load or produce */
	int64_t subquery_step_ms;  /* a subquery's step when it names none (Prometheus:
				    * the evaluation interval; default 1m) */
	/* When to give up, both optional (the defaults: never, as rules and
	 * promtool-style tests want). The evaluator looks at the monotonic
	 * clock once per step, per subquery step, per node and every few
	 * series, and the storage adapter every few thousand samples, so a
	 * query stops within milliseconds of either. */
	int64_t deadline_ns;       /* clock_mono_ns() time; 0: none. Past it:
				    * GPULSE_ETIMEDOUT "query timed out in ..." */
	promql_cancelled_fn *cancelled; /* NULL: never asked. True: GPULSE_ECANCELED
					 * "query was canceled in ..." */
	void *cancelled_ctx;
};

/* Fill *o with the defaults above. */
void promql_opts_default(struct promql_opts *o);

/* Whether a query under `o` must stop now: 0 to go on, GPULSE_ETIMEDOUT
 * past o->deadline_ns, GPULSE_ECANCELED when o->cancelled says so, with
 * Prometheus's message naming `stage` in err ("query timed out in
 * expression evaluation"). *next_poll_ns (start it at 0) rate-limits
 * o->cancelled to once per PROMQL_CANCEL_POLL_NS. One clock read when
 * either is set, nothing when neither is: call it per step or series.
 * For storage adapters too (tsdb_queryable). */
int promql_check_stop(const struct promql_opts *o, int64_t *next_poll_ns, const char *stage,
		      char *err, size_t errlen);

/* One series of a result. For a vector every series has exactly one
 * point (at the evaluation time); for a matrix, points in time order. */
struct promql_result_series {
	const struct label *labels; /* sorted by name */
	size_t nlabels;
	const struct promql_sample *points;
	size_t npoints;
};

struct promql_result {
	enum promql_type type;  /* SCALAR, VECTOR, MATRIX or STRING */
	int64_t t_ms;           /* SCALAR and STRING: the evaluation time */
	double scalar;          /* SCALAR */
	const char *string;     /* STRING */
	const struct promql_result_series *series; /* VECTOR and MATRIX */
	size_t nseries;
	void *mem;              /* owns everything above */
};

/* Evaluate `e` at t_ms. On success *out is a new result the caller frees
 * with promql_result_free; the tree and the storage are not retained. A
 * vector keeps Prometheus's order (topk/bottomk sorted by value, others
 * as produced); an instant query of a range selector gives a matrix.
 * Errors: a status code with a message in err (for example
 * GPULSE_EINVAL "found duplicate series for the match group ...",
 * GPULSE_ELIMIT "query processing would load too many samples ...",
 * GPULSE_ETIMEDOUT and GPULSE_ECANCELED from opts->deadline_ns and
 * opts->cancelled, see promql_check_stop). */
int promql_eval_instant(const struct promql_expr *e, const struct promql_queryable *q, void *qctx,
			const struct promql_opts *opts, int64_t t_ms,
			struct promql_result **out, char *err, size_t errlen);

/* Evaluate `e` at start, start+step, ... <= end, each step on its own as
 * Prometheus 2.x does; the result is always a MATRIX, series sorted by
 * labels. The expression must be of scalar or instant vector type. */
int promql_eval_range(const struct promql_expr *e, const struct promql_queryable *q, void *qctx,
		      const struct promql_opts *opts, int64_t start_ms, int64_t end_ms, int64_t step_ms,
		      struct promql_result **out, char *err, size_t errlen);

/* Accepts NULL. */
void promql_result_free(struct promql_result *r);

/* Append strconv.FormatFloat(v, 'f', -1, 64), "NaN", "+Inf", "-Inf"
 * (gofloat_put 'f'): count_values's label values, and the text the
 * PromQL test driver compares. */
int promql_format_value(struct buf *b, double v);

/* Append a label set as a JSON object, {"a":"1","b":"2"}, as Prometheus's
 * APIs write labels. */
int promql_put_json_labels(struct buf *b, const struct label *l, size_t n);

/* Append a label set as Prometheus prints one: {a="1", b="2"}. */
int promql_format_labels(struct buf *b, const struct label *labels, size_t n);

#endif
