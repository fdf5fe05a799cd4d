/* PromQL parser for gpulse's subset (docs/internals/promql.md): recursive
 * descent with precedence climbing, Prometheus's operator precedence and
 * associativity, type checking, and errors that name the 1-based character
 * position as Prometheus does. Bounded: no input can exhaust the stack or
 * memory. */
#ifndef GPULSE_PROMQL_PARSER_H
#define GPULSE_PROMQL_PARSER_H

#include <stddef.h>

#include "ast.h"
#include "buf.h"

/* Bounds on what one expression may be. */
#define PROMQL_MAX_EXPR_LEN   (64 * 1024) /* bytes of source text */
#define PROMQL_MAX_DEPTH      128         /* nesting of sub-expressions */
#define PROMQL_MAX_NODES      4096        /* AST nodes */
#define PROMQL_MAX_REGEX_LEN  1024        /* bytes of one regular expression */
#define PROMQL_MAX_REGEX_REPEATED_GROUPS 5 /* "(...)*" and the like per regex */

enum promql_func_id {
	PROMQL_FN_RATE, PROMQL_FN_IRATE, PROMQL_FN_INCREASE, PROMQL_FN_DELTA,
	PROMQL_FN_AVG_OVER_TIME, PROMQL_FN_MIN_OVER_TIME, PROMQL_FN_MAX_OVER_TIME,
	PROMQL_FN_SUM_OVER_TIME, PROMQL_FN_COUNT_OVER_TIME,
	PROMQL_FN_STDDEV_OVER_TIME, PROMQL_FN_QUANTILE_OVER_TIME,
	PROMQL_FN_LAST_OVER_TIME,
	PROMQL_FN_ABS, PROMQL_FN_CLAMP_MIN, PROMQL_FN_CLAMP_MAX, PROMQL_FN_ROUND,
	PROMQL_FN_ABSENT, PROMQL_FN_TIME, PROMQL_FN_VECTOR, PROMQL_FN_SCALAR,
};

/* One function of the subset: its signature as the type checker uses it. */
struct promql_func {
	const char *name;
	enum promql_func_id id;
	enum promql_type arg_types[2];
	int min_args, max_args;
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
