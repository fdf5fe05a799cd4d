/* PromQL parser for gpulse's subset (docs/internals/promql.md): recursive
 * descent with precedence climbing, Prometheus's operator precedence and
 * associativity, type checking, and errors that name the 1-based character
 * position as Prometheus does. Bounded: no input can exhaust the stack or
 * memory. */
#ifndef GPULSE_PROMQL_PARSER_H
#define GPULSE_PROMQL_PARSER_H

#include <stddef.h>

#include "promql/ast.h"
#include "common/buf.h"

/* Bounds on what one expression may be. */
#define PROMQL_MAX_EXPR_LEN   (64 * 1024) /* bytes of source text */
#define PROMQL_MAX_DEPTH      128         /* nesting of sub-expressions */
#define PROMQL_MAX_NODES      4096        /* AST nodes */

enum promql_func_id {
	PROMQL_FN_RATE, PROMQL_FN_IRATE, PROMQL_FN_INCREASE, PROMQL_FN_DELTA,
	PROMQL_FN_AVG_OVER_TIME, PROMQL_FN_MIN_OVER_TIME, PROMQL_FN_MAX_OVER_TIME,
	PROMQL_FN_SUM_OVER_TIME, PROMQL_FN_COUNT_OVER_TIME,
	PROMQL_FN_STDDEV_OVER_TIME, PROMQL_FN_QUANTILE_OVER_TIME,
	PROMQL_FN_LAST_OVER_TIME,
	PROMQL_FN_ABS, PROMQL_FN_CLAMP_MIN, PROMQL_FN_CLAMP_MAX, PROMQL_FN_ROUND,
	PROMQL_FN_ABSENT, PROMQL_FN_TIME, PROMQL_FN_VECTOR, PROMQL_FN_SCALAR,
	/* Element-wise math on an instant vector. */
	PROMQL_FN_CEIL, PROMQL_FN_FLOOR, PROMQL_FN_EXP, PROMQL_FN_LN, PROMQL_FN_LOG2,
	PROMQL_FN_LOG10, PROMQL_FN_SQRT, PROMQL_FN_SGN, PROMQL_FN_DEG, PROMQL_FN_RAD,
	PROMQL_FN_ACOS, PROMQL_FN_ACOSH, PROMQL_FN_ASIN, PROMQL_FN_ASINH, PROMQL_FN_ATAN,
	PROMQL_FN_ATANH, PROMQL_FN_COS, PROMQL_FN_COSH, PROMQL_FN_SIN, PROMQL_FN_SINH,
	PROMQL_FN_TAN, PROMQL_FN_TANH, PROMQL_FN_CLAMP,
	/* Calendar fields of sample values (or of the evaluation time). */
	PROMQL_FN_DAY_OF_MONTH, PROMQL_FN_DAY_OF_WEEK, PROMQL_FN_DAY_OF_YEAR,
	PROMQL_FN_DAYS_IN_MONTH, PROMQL_FN_HOUR, PROMQL_FN_MINUTE, PROMQL_FN_MONTH,
	PROMQL_FN_YEAR,
	PROMQL_FN_PI, PROMQL_FN_TIMESTAMP, PROMQL_FN_SORT, PROMQL_FN_SORT_DESC,
	/* Over a range vector. */
	PROMQL_FN_CHANGES, PROMQL_FN_RESETS, PROMQL_FN_DERIV, PROMQL_FN_PREDICT_LINEAR,
	PROMQL_FN_IDELTA, PROMQL_FN_STDVAR_OVER_TIME, PROMQL_FN_PRESENT_OVER_TIME,
	PROMQL_FN_ABSENT_OVER_TIME, PROMQL_FN_HOLT_WINTERS,
	/* Labels and histograms. */
	PROMQL_FN_LABEL_REPLACE, PROMQL_FN_LABEL_JOIN, PROMQL_FN_HISTOGRAM_QUANTILE,
};

/* One function of the subset: its signature as the type checker uses it. */
struct promql_func {
	const char *name;
	enum promql_func_id id;
	enum promql_type arg_types[5]; /* variadic: extra arguments take the first optional one's */
	int min_args, max_args;        /* max -1: any number (label_join) */
	enum promql_type ret;
};

/* Parse `expr` (NUL-terminated). On success *out owns a new tree (free it
 * with promql_expr_free) and 0 is returned. On failure *out is NULL,
 * GPULSE_EPARSE (or GPULSE_ELIMIT for a bound) is returned and err holds
 * "parse error at char N: ..." with N the 1-based byte position. */
int promql_parse(const char *expr, struct promql_expr **out, char *err, size_t errlen);

/* Append `e` as PromQL text in Prometheus's canonical style (the text
 * parses back to an equal tree). 0 or the buffer's error. */
int promql_expr_format(const struct promql_expr *e, struct buf *b);

/* "scalar", "instant vector", "range vector", "string". */
const char *promql_type_name(enum promql_type t);

/* The operator's text ("+", "and", ...). */
const char *promql_binop_name(enum promql_binop op);

/* The aggregator's name ("sum", ...). */
const char *promql_agg_name(enum promql_agg_op op);

/* Append `s` as a Go double-quoted string literal (strconv.Quote style). */
int promql_quote(struct buf *b, const char *s);

#endif
