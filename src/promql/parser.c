/* PromQL parser; see parser.h. Hand-written (no C PromQL parser exists):
 * recursive descent for primaries, precedence climbing for binary
 * operators. Every function returns a new node or NULL with p->err set;
 * on failure the partial subtree is freed before returning. */
#include "promql/parser.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "promql/lexer.h"
#include "common/gofloat.h"
#include "common/rx.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

#define ARGS_MAX 64 /* arguments of one call (label_join takes any number) */

static const struct promql_func funcs[] = {
	{"rate", PROMQL_FN_RATE, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"irate", PROMQL_FN_IRATE, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"increase", PROMQL_FN_INCREASE, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"delta", PROMQL_FN_DELTA, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"avg_over_time", PROMQL_FN_AVG_OVER_TIME, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"min_over_time", PROMQL_FN_MIN_OVER_TIME, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"max_over_time", PROMQL_FN_MAX_OVER_TIME, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"sum_over_time", PROMQL_FN_SUM_OVER_TIME, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"count_over_time", PROMQL_FN_COUNT_OVER_TIME, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"stddev_over_time", PROMQL_FN_STDDEV_OVER_TIME, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"quantile_over_time", PROMQL_FN_QUANTILE_OVER_TIME, {PROMQL_TYPE_SCALAR, PROMQL_TYPE_MATRIX}, 2, 2, PROMQL_TYPE_VECTOR},
	{"last_over_time", PROMQL_FN_LAST_OVER_TIME, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR},
	{"abs", PROMQL_FN_ABS, {PROMQL_TYPE_VECTOR}, 1, 1, PROMQL_TYPE_VECTOR},
	{"clamp_min", PROMQL_FN_CLAMP_MIN, {PROMQL_TYPE_VECTOR, PROMQL_TYPE_SCALAR}, 2, 2, PROMQL_TYPE_VECTOR},
	{"clamp_max", PROMQL_FN_CLAMP_MAX, {PROMQL_TYPE_VECTOR, PROMQL_TYPE_SCALAR}, 2, 2, PROMQL_TYPE_VECTOR},
	{"round", PROMQL_FN_ROUND, {PROMQL_TYPE_VECTOR, PROMQL_TYPE_SCALAR}, 1, 2, PROMQL_TYPE_VECTOR},
	{"absent", PROMQL_FN_ABSENT, {PROMQL_TYPE_VECTOR}, 1, 1, PROMQL_TYPE_VECTOR},
	{"time", PROMQL_FN_TIME, {PROMQL_TYPE_SCALAR}, 0, 0, PROMQL_TYPE_SCALAR},
	{"vector", PROMQL_FN_VECTOR, {PROMQL_TYPE_SCALAR}, 1, 1, PROMQL_TYPE_VECTOR},
	{"scalar", PROMQL_FN_SCALAR, {PROMQL_TYPE_VECTOR}, 1, 1, PROMQL_TYPE_SCALAR},
#define V_TO_V(name, id) {name, id, {PROMQL_TYPE_VECTOR}, 1, 1, PROMQL_TYPE_VECTOR}
#define CAL(name, id) {name, id, {PROMQL_TYPE_VECTOR}, 0, 1, PROMQL_TYPE_VECTOR}
#define M_TO_V(name, id) {name, id, {PROMQL_TYPE_MATRIX}, 1, 1, PROMQL_TYPE_VECTOR}
	V_TO_V("ceil", PROMQL_FN_CEIL), V_TO_V("floor", PROMQL_FN_FLOOR),
	V_TO_V("exp", PROMQL_FN_EXP), V_TO_V("ln", PROMQL_FN_LN),
	V_TO_V("log2", PROMQL_FN_LOG2), V_TO_V("log10", PROMQL_FN_LOG10),
	V_TO_V("sqrt", PROMQL_FN_SQRT), V_TO_V("sgn", PROMQL_FN_SGN),
	V_TO_V("deg", PROMQL_FN_DEG), V_TO_V("rad", PROMQL_FN_RAD),
	V_TO_V("acos", PROMQL_FN_ACOS), V_TO_V("acosh", PROMQL_FN_ACOSH),
	V_TO_V("asin", PROMQL_FN_ASIN), V_TO_V("asinh", PROMQL_FN_ASINH),
	V_TO_V("atan", PROMQL_FN_ATAN), V_TO_V("atanh", PROMQL_FN_ATANH),
	V_TO_V("cos", PROMQL_FN_COS), V_TO_V("cosh", PROMQL_FN_COSH),
	V_TO_V("sin", PROMQL_FN_SIN), V_TO_V("sinh", PROMQL_FN_SINH),
	V_TO_V("tan", PROMQL_FN_TAN), V_TO_V("tanh", PROMQL_FN_TANH),
	V_TO_V("timestamp", PROMQL_FN_TIMESTAMP), V_TO_V("sort", PROMQL_FN_SORT),
	V_TO_V("sort_desc", PROMQL_FN_SORT_DESC),
	{"clamp", PROMQL_FN_CLAMP, {PROMQL_TYPE_VECTOR, PROMQL_TYPE_SCALAR, PROMQL_TYPE_SCALAR}, 3, 3, PROMQL_TYPE_VECTOR},
	{"pi", PROMQL_FN_PI, {PROMQL_TYPE_SCALAR}, 0, 0, PROMQL_TYPE_SCALAR},
	CAL("day_of_month", PROMQL_FN_DAY_OF_MONTH), CAL("day_of_week", PROMQL_FN_DAY_OF_WEEK),
	CAL("day_of_year", PROMQL_FN_DAY_OF_YEAR), CAL("days_in_month", PROMQL_FN_DAYS_IN_MONTH),
	CAL("hour", PROMQL_FN_HOUR), CAL("minute", PROMQL_FN_MINUTE),
	CAL("month", PROMQL_FN_MONTH), CAL("year", PROMQL_FN_YEAR),
	M_TO_V("changes", PROMQL_FN_CHANGES), M_TO_V("resets", PROMQL_FN_RESETS),
	M_TO_V("deriv", PROMQL_FN_DERIV), M_TO_V("idelta", PROMQL_FN_IDELTA),
	M_TO_V("stdvar_over_time", PROMQL_FN_STDVAR_OVER_TIME),
	M_TO_V("present_over_time", PROMQL_FN_PRESENT_OVER_TIME),
	M_TO_V("absent_over_time", PROMQL_FN_ABSENT_OVER_TIME),
	{"predict_linear", PROMQL_FN_PREDICT_LINEAR, {PROMQL_TYPE_MATRIX, PROMQL_TYPE_SCALAR}, 2, 2, PROMQL_TYPE_VECTOR},
	{"holt_winters", PROMQL_FN_HOLT_WINTERS, {PROMQL_TYPE_MATRIX, PROMQL_TYPE_SCALAR, PROMQL_TYPE_SCALAR}, 3, 3, PROMQL_TYPE_VECTOR},
	{"label_replace", PROMQL_FN_LABEL_REPLACE,
	 {PROMQL_TYPE_VECTOR, PROMQL_TYPE_STRING, PROMQL_TYPE_STRING, PROMQL_TYPE_STRING, PROMQL_TYPE_STRING},
	 5, 5, PROMQL_TYPE_VECTOR},
	{"label_join", PROMQL_FN_LABEL_JOIN,
	 {PROMQL_TYPE_VECTOR, PROMQL_TYPE_STRING, PROMQL_TYPE_STRING, PROMQL_TYPE_STRING}, 3, -1, PROMQL_TYPE_VECTOR},
	{"histogram_quantile", PROMQL_FN_HISTOGRAM_QUANTILE, {PROMQL_TYPE_SCALAR, PROMQL_TYPE_VECTOR}, 2, 2, PROMQL_TYPE_VECTOR},
#undef V_TO_V
#undef CAL
#undef M_TO_V
};

/* Prometheus functions outside the subset: named as unsupported rather
 * than unknown, so a user sees the difference. */
static const char *const unsupported_funcs[] = {
	"histogram_count", "histogram_fraction", "histogram_sum", /* native histograms */
};

static const char *const agg_names[] = {
	[PROMQL_AGG_SUM] = "sum", [PROMQL_AGG_AVG] = "avg",
	[PROMQL_AGG_MIN] = "min", [PROMQL_AGG_MAX] = "max",
	[PROMQL_AGG_COUNT] = "count", [PROMQL_AGG_STDDEV] = "stddev",
	[PROMQL_AGG_TOPK] = "topk", [PROMQL_AGG_BOTTOMK] = "bottomk",
	[PROMQL_AGG_QUANTILE] = "quantile", [PROMQL_AGG_STDVAR] = "stdvar",
	[PROMQL_AGG_GROUP] = "group", [PROMQL_AGG_COUNT_VALUES] = "count_values",
};

static const char *const binop_names[] = {
	[PROMQL_OP_ADD] = "+", [PROMQL_OP_SUB] = "-", [PROMQL_OP_MUL] = "*",
	[PROMQL_OP_DIV] = "/", [PROMQL_OP_MOD] = "%", [PROMQL_OP_POW] = "^",
	[PROMQL_OP_ATAN2] = "atan2",
	[PROMQL_OP_EQL] = "==", [PROMQL_OP_NEQ] = "!=", [PROMQL_OP_GTR] = ">",
	[PROMQL_OP_LSS] = "<", [PROMQL_OP_GTE] = ">=", [PROMQL_OP_LTE] = "<=",
	[PROMQL_OP_AND] = "and", [PROMQL_OP_OR] = "or",
	[PROMQL_OP_UNLESS] = "unless",
};

const char *promql_type_name(enum promql_type t)
{
	switch (t) {
	case PROMQL_TYPE_SCALAR: return "scalar";
	case PROMQL_TYPE_VECTOR: return "instant vector";
	case PROMQL_TYPE_MATRIX: return "range vector";
	case PROMQL_TYPE_STRING: return "string";
	}
	return "unknown";
}

const char *promql_binop_name(enum promql_binop op)
{
	return binop_names[op];
}

const char *promql_agg_name(enum promql_agg_op op)
{
	return agg_names[op];
}

int promql_matcher_matches(const struct promql_matcher *m, const char *value, bool *matched,
			   char *err, size_t errlen)
{
	*matched = false;
	switch (m->op) {
	case PROMQL_MATCH_EQ:
		*matched = strcmp(m->value, value) == 0;
		return 0;
	case PROMQL_MATCH_NEQ:
		*matched = strcmp(m->value, value) != 0;
		return 0;
	case PROMQL_MATCH_RE:
	case PROMQL_MATCH_NRE: {
		bool hit = false;
		int rc = rx_match(m->re, value, strlen(value), &hit);
		if (rc) {
			if (err)
				str_errf(err, errlen, "regular expression in matcher %s%s\"%.200s\" %s",
					 m->name, m->op == PROMQL_MATCH_RE ? "=~" : "!~", m->value,
					 rc == GPULSE_ELIMIT ? "exceeded its match limit"
							     : "ran out of memory");
			return rc;
		}
		*matched = (m->op == PROMQL_MATCH_RE) == hit;
		return 0;
	}
	}
	return 0;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void promql_expr_free(struct promql_expr *e)
{
	if (!e)
		return;
	free(e->string);
	free(e->metric_name);
	for (size_t i = 0; i < e->nmatchers; i++) {
		free(e->matchers[i].name);
		free(e->matchers[i].value);
		rx_free(e->matchers[i].re);
	}
	free(e->matchers);
	for (size_t i = 0; i < e->nargs; i++)
		promql_expr_free(e->args[i]);
	free(e->args);
	promql_expr_free(e->param);
	free_strv(e->grouping, e->ngrouping);
	promql_expr_free(e->lhs);
	promql_expr_free(e->rhs);
	free_strv(e->match_labels, e->nmatch_labels);
	free_strv(e->include, e->ninclude);
	free(e);
}

struct parser {
	struct promql_lexer lx;
	struct promql_token tok;   /* current token */
	struct promql_token next;  /* one token of lookahead */
	bool has_next;
	int depth;
	int nodes;
	int status;                /* 0 until the first error */
	char err[400];
};

static void perr(struct parser *p, int pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void perr(struct parser *p, int pos, const char *fmt, ...)
{
	if (p->status)
		return;
	p->status = GPULSE_EPARSE;
	char msg[320];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(p->err, sizeof p->err, "parse error at char %d: %s", pos, msg);
}

static void advance(struct parser *p)
{
	free(p->tok.string);
	if (p->has_next) {
		p->tok = p->next;
		p->has_next = false;
	} else {
		promql_lexer_next(&p->lx, &p->tok);
	}
}

static const struct promql_token *peek(struct parser *p)
{
	if (!p->has_next) {
		promql_lexer_next(&p->lx, &p->next);
		p->has_next = true;
	}
	return &p->next;
}

/* A short description of a token for "unexpected ..." messages. */
static void describe(const struct promql_token *t, char *out, size_t outlen)
{
	int n = t->len > 40 ? 40 : (int)t->len;
	switch (t->kind) {
	case PROMQL_TOK_EOF: snprintf(out, outlen, "end of input"); break;
	case PROMQL_TOK_IDENT: snprintf(out, outlen, "identifier \"%.*s\"", n, t->text); break;
	case PROMQL_TOK_NUMBER: snprintf(out, outlen, "number \"%.*s\"", n, t->text); break;
	case PROMQL_TOK_DURATION: snprintf(out, outlen, "duration \"%.*s\"", n, t->text); break;
	case PROMQL_TOK_STRING: snprintf(out, outlen, "string %.*s", n, t->text); break;
	default: snprintf(out, outlen, "\"%.*s\"", n, t->text); break;
	}
}

/* Report the current token as unexpected; a lexer error wins. */
static void unexpected(struct parser *p, const char *context, const char *expected)
{
	char d[64];
	if (p->tok.kind == PROMQL_TOK_ERROR) {
		perr(p, p->tok.pos, "%s", p->tok.error);
		return;
	}
	describe(&p->tok, d, sizeof d);
	if (expected)
		perr(p, p->tok.pos, "unexpected %s in %s, expected %s", d, context, expected);
	else
		perr(p, p->tok.pos, "unexpected %s in %s", d, context);
}

static struct promql_expr *new_node(struct parser *p, enum promql_node_kind kind, int pos)
{
	if (++p->nodes > PROMQL_MAX_NODES) {
		perr(p, pos, "expression too large: more than %d nodes", PROMQL_MAX_NODES);
		p->status = GPULSE_ELIMIT;
		return NULL;
	}
	struct promql_expr *e = xcalloc(1, sizeof *e);
	e->kind = kind;
	e->pos = pos;
	return e;
}

static bool is_keyword(enum promql_tok k)
{
	return k >= PROMQL_TOK_AND;
}

/* A label name: an identifier or keyword spelled [a-zA-Z_][a-zA-Z0-9_]*. */
static bool tok_is_label_name(const struct promql_token *t)
{
	if (t->kind != PROMQL_TOK_IDENT && !is_keyword(t->kind))
		return false;
	return memchr(t->text, ':', t->len) == NULL;
}

static char *tok_strdup(const struct promql_token *t)
{
	char *s = xmalloc(t->len + 1);
	memcpy(s, t->text, t->len);
	s[t->len] = '\0';
	return s;
}

static struct promql_expr *parse_expr(struct parser *p, int min_prec);

/* "(a, b, c)" for by/without/on/ignoring/group_x. The current token is
 * the opening parenthesis. */
static bool parse_label_list(struct parser *p, const char *context, char ***out, size_t *n)
{
	if (p->tok.kind != PROMQL_TOK_LPAREN) {
		unexpected(p, context, "\"(\"");
		return false;
	}
	advance(p);
	size_t cap = 0;
	while (p->tok.kind != PROMQL_TOK_RPAREN) {
		if (!tok_is_label_name(&p->tok)) {
			unexpected(p, context, "label");
			return false;
		}
		if (*n >= 1000) {
			perr(p, p->tok.pos, "too many labels in %s", context);
			return false;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 4;
			*out = xrealloc(*out, cap * sizeof **out);
		}
		(*out)[(*n)++] = tok_strdup(&p->tok);
		advance(p);
		if (p->tok.kind == PROMQL_TOK_COMMA)
			advance(p);
		else if (p->tok.kind != PROMQL_TOK_RPAREN) {
			unexpected(p, context, "\",\" or \")\"");
			return false;
		}
	}
	advance(p);
	return true;
}

static bool compile_matcher(struct parser *p, struct promql_matcher *m, int pos)
{
	if (m->op != PROMQL_MATCH_RE && m->op != PROMQL_MATCH_NRE)
		return true;
	char msg[256];
	int rc = rx_compile(m->value, RX_ANCHORED, &m->re, msg, sizeof msg);
	if (rc != 0) {
		perr(p, pos, "invalid regular expression \"%.60s\": %s", m->value,
		     rc == GPULSE_ENOMEM ? "out of memory" : msg);
		if (rc == GPULSE_ENOMEM)
			p->status = GPULSE_ENOMEM;
		return false;
	}
	return true;
}

/* A vector selector: the metric name (if any) has been consumed and is
 * passed as `name`; the current token may be "{". */
static struct promql_expr *parse_selector(struct parser *p, char *name, int pos)
{
	struct promql_expr *e = new_node(p, PROMQL_NODE_VECTOR_SEL, pos);
	if (!e) {
		free(name);
		return NULL;
	}
	e->type = PROMQL_TYPE_VECTOR;
	e->metric_name = name;
	size_t cap = 0;
	if (name) {
		cap = 4;
		e->matchers = xcalloc(cap, sizeof *e->matchers);
		e->matchers[0].op = PROMQL_MATCH_EQ;
		e->matchers[0].name = xstrdup("__name__");
		e->matchers[0].value = xstrdup(name);
		e->nmatchers = 1;
	}
	if (p->tok.kind == PROMQL_TOK_LBRACE) {
		advance(p);
		while (p->tok.kind != PROMQL_TOK_RBRACE) {
			if (!tok_is_label_name(&p->tok)) {
				unexpected(p, "label matching", "label");
				goto fail;
			}
			int mpos = p->tok.pos;
			char *lname = tok_strdup(&p->tok);
			advance(p);
			enum promql_match_op op;
			switch (p->tok.kind) {
			case PROMQL_TOK_ASSIGN: op = PROMQL_MATCH_EQ; break;
			case PROMQL_TOK_NEQ: op = PROMQL_MATCH_NEQ; break;
			case PROMQL_TOK_EQL_RE: op = PROMQL_MATCH_RE; break;
			case PROMQL_TOK_NEQ_RE: op = PROMQL_MATCH_NRE; break;
			default:
				free(lname);
				unexpected(p, "label matching", "label matching operator");
				goto fail;
			}
			advance(p);
			if (p->tok.kind != PROMQL_TOK_STRING) {
				free(lname);
				unexpected(p, "label matching", "string");
				goto fail;
			}
			if (e->nmatchers >= 256) {
				free(lname);
				perr(p, mpos, "too many label matchers (at most 256)");
				goto fail;
			}
			if (e->nmatchers == cap) {
				cap = cap ? cap * 2 : 4;
				e->matchers = xrealloc(e->matchers, cap * sizeof *e->matchers);
			}
			struct promql_matcher *m = &e->matchers[e->nmatchers];
			memset(m, 0, sizeof *m);
			m->op = op;
			m->name = lname;
			m->value = p->tok.string;
			p->tok.string = NULL;
			e->nmatchers++;
			if (!compile_matcher(p, m, mpos))
				goto fail;
			if (name && strcmp(lname, "__name__") == 0) {
				perr(p, mpos, "metric name must not be set twice: \"%.60s\" or \"%.60s\"", name, m->value);
				goto fail;
			}
			advance(p);
			if (p->tok.kind == PROMQL_TOK_COMMA)
				advance(p);
			else if (p->tok.kind != PROMQL_TOK_RBRACE) {
				unexpected(p, "label matching", "\",\" or \"}\"");
				goto fail;
			}
		}
		advance(p);
	}
	bool non_empty = false;
	for (size_t i = 0; i < e->nmatchers; i++) {
		/* The empty subject: no pattern's cost limit stops on it, and
		 * one that did would count as not matching it, as before. */
		bool empty;
		promql_matcher_matches(&e->matchers[i], "", &empty, NULL, 0);
		if (!empty)
			non_empty = true;
	}
	if (!non_empty) {
		perr(p, pos, "vector selector must contain at least one non-empty matcher");
		goto fail;
	}
	return e;
fail:
	promql_expr_free(e);
	return NULL;
}

/* ":step]" after "expr[range" (the colon is the current token): a
 * subquery over e, which it takes. NULL on error (e is then the caller's
 * to free). */
static struct promql_expr *parse_subquery(struct parser *p, struct promql_expr *e, int64_t range, int pos)
{
	advance(p); /* : */
	int64_t step = 0;
	if (p->tok.kind == PROMQL_TOK_DURATION) {
		step = p->tok.duration_ms;
		if (step <= 0) {
			perr(p, p->tok.pos, "zero or negative subquery step");
			return NULL;
		}
		advance(p);
	}
	if (p->tok.kind != PROMQL_TOK_RBRACKET) {
		unexpected(p, "subquery selector", "\"]\"");
		return NULL;
	}
	if (e->type != PROMQL_TYPE_VECTOR) {
		perr(p, pos, "subquery is only allowed on instant vector, got %s", promql_type_name(e->type));
		return NULL;
	}
	if (range <= 0) {
		perr(p, pos, "range must be greater than 0s");
		return NULL;
	}
	advance(p); /* ] */
	struct promql_expr *sq = new_node(p, PROMQL_NODE_SUBQUERY, e->pos);
	if (!sq)
		return NULL;
	sq->lhs = e;
	sq->type = PROMQL_TYPE_MATRIX;
	sq->range_ms = range;
	sq->step_ms = step;
	return sq;
}

/* An optional "+" or "-" (of an offset or an @ time): -1 or 1. */
static int parse_sign(struct parser *p)
{
	if (p->tok.kind != PROMQL_TOK_SUB && p->tok.kind != PROMQL_TOK_ADD)
		return 1;
	int sign = p->tok.kind == PROMQL_TOK_SUB ? -1 : 1;
	advance(p);
	return sign;
}

/* "@ T", "@ start()" or "@ end()" after a selector or subquery (the @
 * is the current token). T is Unix seconds, to the millisecond. */
static bool parse_at(struct parser *p, struct promql_expr *e)
{
	int pos = p->tok.pos;
	if (e->kind != PROMQL_NODE_VECTOR_SEL && e->kind != PROMQL_NODE_MATRIX_SEL &&
	    e->kind != PROMQL_NODE_SUBQUERY) {
		perr(p, pos, "@ modifier must be preceded by an instant vector selector or range vector selector or a subquery");
		return false;
	}
	if (e->at_mode != PROMQL_AT_NONE) {
		perr(p, pos, "@ <timestamp> may not be set multiple times");
		return false;
	}
	advance(p);
	if (p->tok.kind == PROMQL_TOK_IDENT && peek(p)->kind == PROMQL_TOK_LPAREN &&
	    ((p->tok.len == 5 && memcmp(p->tok.text, "start", 5) == 0) ||
	     (p->tok.len == 3 && memcmp(p->tok.text, "end", 3) == 0))) {
		e->at_mode = p->tok.len == 5 ? PROMQL_AT_START : PROMQL_AT_END;
		advance(p);
		advance(p);
		if (p->tok.kind != PROMQL_TOK_RPAREN) {
			unexpected(p, "@", "\")\"");
			return false;
		}
		advance(p);
		return true;
	}
	int sign = parse_sign(p);
	if (p->tok.kind != PROMQL_TOK_NUMBER) {
		unexpected(p, "@", "timestamp");
		return false;
	}
	double t = sign * p->tok.number * 1000;
	if (!(t >= -9.2e18 && t <= 9.2e18)) {
		perr(p, p->tok.pos, "timestamp out of bounds for @ modifier");
		return false;
	}
	e->at_mode = PROMQL_AT_TIME;
	e->at_ms = (int64_t)round(t);
	advance(p);
	return true;
}

/* [range], [range:step], offset and @ after a primary expression. */
static struct promql_expr *parse_postfix(struct parser *p, struct promql_expr *e)
{
	for (;;) {
		if (p->tok.kind == PROMQL_TOK_LBRACKET) {
			int pos = p->tok.pos;
			if (e->kind == PROMQL_NODE_VECTOR_SEL && e->offset_ms != 0) {
				perr(p, pos, "no offset modifiers allowed before range");
				goto fail;
			}
			if (e->kind == PROMQL_NODE_VECTOR_SEL && e->at_mode != PROMQL_AT_NONE) {
				perr(p, pos, "no @ modifiers allowed before range");
				goto fail;
			}
			advance(p);
			if (p->tok.kind != PROMQL_TOK_DURATION) {
				unexpected(p, "range", "duration");
				goto fail;
			}
			int64_t range = p->tok.duration_ms;
			advance(p);
			if (p->tok.kind == PROMQL_TOK_COLON) {
				struct promql_expr *sq = parse_subquery(p, e, range, pos);
				if (!sq)
					goto fail;
				e = sq;
				continue;
			}
			if (p->tok.kind != PROMQL_TOK_RBRACKET) {
				unexpected(p, "range", "\"]\"");
				goto fail;
			}
			if (e->kind != PROMQL_NODE_VECTOR_SEL) {
				perr(p, pos, "ranges only allowed for vector selectors");
				goto fail;
			}
			if (range <= 0) {
				perr(p, pos, "range must be greater than 0s");
				goto fail;
			}
			advance(p);
			e->kind = PROMQL_NODE_MATRIX_SEL;
			e->type = PROMQL_TYPE_MATRIX;
			e->range_ms = range;
		} else if (p->tok.kind == PROMQL_TOK_OFFSET) {
			int pos = p->tok.pos;
			if (e->kind != PROMQL_NODE_VECTOR_SEL && e->kind != PROMQL_NODE_MATRIX_SEL &&
			    e->kind != PROMQL_NODE_SUBQUERY) {
				perr(p, pos, "offset modifier must be preceded by an instant vector selector or range vector selector or a subquery");
				goto fail;
			}
			if (e->offset_ms != 0) {
				perr(p, pos, "offset may not be set multiple times");
				goto fail;
			}
			advance(p);
			int sign = parse_sign(p);
			if (p->tok.kind != PROMQL_TOK_DURATION) {
				unexpected(p, "offset", "duration");
				goto fail;
			}
			e->offset_ms = sign * p->tok.duration_ms;
			advance(p);
		} else if (p->tok.kind == PROMQL_TOK_AT) {
			if (!parse_at(p, e))
				goto fail;
		} else {
			return e;
		}
	}
fail:
	promql_expr_free(e);
	return NULL;
}

static struct promql_expr *parse_call(struct parser *p)
{
	int pos = p->tok.pos;
	const struct promql_func *f = NULL;
	for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
		if (strlen(funcs[i].name) == p->tok.len && memcmp(funcs[i].name, p->tok.text, p->tok.len) == 0)
			f = &funcs[i];
	if (!f) {
		int n = p->tok.len > 60 ? 60 : (int)p->tok.len;
		for (size_t i = 0; i < sizeof unsupported_funcs / sizeof unsupported_funcs[0]; i++)
			if (strlen(unsupported_funcs[i]) == p->tok.len &&
			    memcmp(unsupported_funcs[i], p->tok.text, p->tok.len) == 0) {
				perr(p, pos, "function \"%.*s\" is not supported by gpulse", n, p->tok.text);
				return NULL;
			}
		perr(p, pos, "unknown function with name \"%.*s\"", n, p->tok.text);
		return NULL;
	}
	struct promql_expr *e = new_node(p, PROMQL_NODE_CALL, pos);
	if (!e)
		return NULL;
	e->func = f;
	e->type = f->ret;
	advance(p); /* name */
	advance(p); /* ( */
	size_t cap = 0;
	while (p->tok.kind != PROMQL_TOK_RPAREN) {
		if (e->nargs == ARGS_MAX) {
			perr(p, p->tok.pos, "too many arguments in call to \"%s\"", f->name);
			goto fail;
		}
		if (e->nargs == cap) {
			cap = cap ? cap * 2 : 3;
			e->args = xrealloc(e->args, cap * sizeof *e->args);
		}
		struct promql_expr *a = parse_expr(p, 0);
		if (!a)
			goto fail;
		e->args[e->nargs++] = a;
		if (p->tok.kind == PROMQL_TOK_COMMA) {
			advance(p);
			if (p->tok.kind == PROMQL_TOK_RPAREN) {
				unexpected(p, "function call argument list", "expression");
				goto fail;
			}
		} else if (p->tok.kind != PROMQL_TOK_RPAREN) {
			unexpected(p, "function call argument list", "\",\" or \")\"");
			goto fail;
		}
	}
	advance(p);
	if ((int)e->nargs < f->min_args || (f->max_args >= 0 && (int)e->nargs > f->max_args)) {
		if (f->min_args == f->max_args)
			perr(p, pos, "expected %d argument(s) in call to \"%s\", got %zu", f->min_args, f->name, e->nargs);
		else if ((int)e->nargs < f->min_args)
			perr(p, pos, "expected at least %d argument(s) in call to \"%s\", got %zu", f->min_args, f->name, e->nargs);
		else
			perr(p, pos, "expected at most %d argument(s) in call to \"%s\", got %zu", f->max_args, f->name, e->nargs);
		goto fail;
	}
	for (size_t i = 0; i < e->nargs; i++) {
		/* A variadic function's extra arguments have the type of its
		 * first optional one. */
		size_t ti = f->max_args < 0 && i > (size_t)f->min_args ? (size_t)f->min_args : i;
		enum promql_type want = f->arg_types[ti], got = e->args[i]->type;
		if (want != got) {
			perr(p, e->args[i]->pos, "expected type %s in call to function \"%s\", got %s",
			     promql_type_name(want), f->name, promql_type_name(got));
			goto fail;
		}
	}
	return e;
fail:
	promql_expr_free(e);
	return NULL;
}

static bool parse_grouping(struct parser *p, struct promql_expr *e)
{
	e->without = p->tok.kind == PROMQL_TOK_WITHOUT;
	const char *ctx = e->without ? "without clause" : "by clause";
	advance(p);
	return parse_label_list(p, ctx, &e->grouping, &e->ngrouping);
}

static struct promql_expr *parse_aggregation(struct parser *p)
{
	static const struct {
		const char *name;
		enum promql_agg_op op;
	} aggs[] = {
		{"sum", PROMQL_AGG_SUM}, {"avg", PROMQL_AGG_AVG}, {"min", PROMQL_AGG_MIN},
		{"max", PROMQL_AGG_MAX}, {"count", PROMQL_AGG_COUNT},
		{"stddev", PROMQL_AGG_STDDEV}, {"topk", PROMQL_AGG_TOPK},
		{"bottomk", PROMQL_AGG_BOTTOMK}, {"quantile", PROMQL_AGG_QUANTILE},
		{"stdvar", PROMQL_AGG_STDVAR}, {"group", PROMQL_AGG_GROUP},
		{"count_values", PROMQL_AGG_COUNT_VALUES},
	};
	int pos = p->tok.pos;
	size_t i;
	for (i = 0; i < sizeof aggs / sizeof aggs[0]; i++)
		if (strlen(aggs[i].name) == p->tok.len && strncasecmp(aggs[i].name, p->tok.text, p->tok.len) == 0)
			break;
	if (i == sizeof aggs / sizeof aggs[0]) {
		perr(p, pos, "aggregation \"%.*s\" is not supported by gpulse", (int)p->tok.len, p->tok.text);
		return NULL;
	}
	struct promql_expr *e = new_node(p, PROMQL_NODE_AGG, pos);
	if (!e)
		return NULL;
	e->agg = aggs[i].op;
	e->type = PROMQL_TYPE_VECTOR;
	advance(p);
	bool grouped = false;
	if (p->tok.kind == PROMQL_TOK_BY || p->tok.kind == PROMQL_TOK_WITHOUT) {
		if (!parse_grouping(p, e))
			goto fail;
		grouped = true;
	}
	if (p->tok.kind != PROMQL_TOK_LPAREN) {
		unexpected(p, "aggregation", "\"(\"");
		goto fail;
	}
	advance(p);
	bool has_param = e->agg == PROMQL_AGG_TOPK || e->agg == PROMQL_AGG_BOTTOMK ||
			 e->agg == PROMQL_AGG_QUANTILE || e->agg == PROMQL_AGG_COUNT_VALUES;
	if (has_param) {
		e->param = parse_expr(p, 0);
		if (!e->param)
			goto fail;
		if (p->tok.kind != PROMQL_TOK_COMMA) {
			unexpected(p, "aggregation", "\",\"");
			goto fail;
		}
		advance(p);
	}
	if (p->tok.kind == PROMQL_TOK_RPAREN) {
		unexpected(p, "aggregation", "expression");
		goto fail;
	}
	e->lhs = parse_expr(p, 0);
	if (!e->lhs)
		goto fail;
	if (p->tok.kind != PROMQL_TOK_RPAREN) {
		unexpected(p, "aggregation", "\")\"");
		goto fail;
	}
	advance(p);
	if (!grouped && (p->tok.kind == PROMQL_TOK_BY || p->tok.kind == PROMQL_TOK_WITHOUT)) {
		if (!parse_grouping(p, e))
			goto fail;
	}
	enum promql_type want = e->agg == PROMQL_AGG_COUNT_VALUES ? PROMQL_TYPE_STRING : PROMQL_TYPE_SCALAR;
	if (e->param && e->param->type != want) {
		perr(p, e->param->pos, "expected type %s in aggregation parameter, got %s",
		     promql_type_name(want), promql_type_name(e->param->type));
		goto fail;
	}
	if (e->lhs->type != PROMQL_TYPE_VECTOR) {
		perr(p, e->lhs->pos, "expected type instant vector in aggregation expression, got %s",
		     promql_type_name(e->lhs->type));
		goto fail;
	}
	return e;
fail:
	promql_expr_free(e);
	return NULL;
}

static struct promql_expr *parse_primary(struct parser *p)
{
	struct promql_expr *e = NULL;
	int pos = p->tok.pos;
	switch (p->tok.kind) {
	case PROMQL_TOK_NUMBER:
		e = new_node(p, PROMQL_NODE_NUMBER, pos);
		if (!e)
			return NULL;
		e->type = PROMQL_TYPE_SCALAR;
		e->number = p->tok.number;
		advance(p);
		break;
	case PROMQL_TOK_STRING:
		e = new_node(p, PROMQL_NODE_STRING, pos);
		if (!e)
			return NULL;
		e->type = PROMQL_TYPE_STRING;
		e->string = p->tok.string;
		p->tok.string = NULL;
		advance(p);
		break;
	case PROMQL_TOK_LPAREN: {
		advance(p);
		struct promql_expr *inner = parse_expr(p, 0);
		if (!inner)
			return NULL;
		if (p->tok.kind != PROMQL_TOK_RPAREN) {
			promql_expr_free(inner);
			unexpected(p, "parenthesized expression", "\")\"");
			return NULL;
		}
		advance(p);
		e = new_node(p, PROMQL_NODE_PAREN, pos);
		if (!e) {
			promql_expr_free(inner);
			return NULL;
		}
		e->lhs = inner;
		e->type = inner->type;
		break;
	}
	case PROMQL_TOK_AGGREGATOR:
		e = parse_aggregation(p);
		break;
	case PROMQL_TOK_IDENT:
		if (peek(p)->kind == PROMQL_TOK_LPAREN) {
			e = parse_call(p);
		} else {
			char *name = tok_strdup(&p->tok);
			advance(p);
			e = parse_selector(p, name, pos);
		}
		break;
	case PROMQL_TOK_LBRACE:
		e = parse_selector(p, NULL, pos);
		break;
	default:
		unexpected(p, "expression", NULL);
		return NULL;
	}
	if (!e)
		return NULL;
	return parse_postfix(p, e);
}

static struct promql_expr *parse_unary(struct parser *p)
{
	if (p->tok.kind != PROMQL_TOK_SUB && p->tok.kind != PROMQL_TOK_ADD)
		return parse_primary(p);
	int pos = p->tok.pos;
	bool minus = p->tok.kind == PROMQL_TOK_SUB;
	advance(p);
	/* The operand of a unary operator binds everything tighter than
	 * multiplication, i.e. "^" (Prometheus: unary_expr %prec MUL). */
	struct promql_expr *arg = parse_expr(p, 6);
	if (!arg)
		return NULL;
	if (arg->type != PROMQL_TYPE_SCALAR && arg->type != PROMQL_TYPE_VECTOR) {
		perr(p, pos, "unary expression only allowed on expressions of type scalar or instant vector, got %s",
		     promql_type_name(arg->type));
		promql_expr_free(arg);
		return NULL;
	}
	if (!minus)
		return arg;
	if (arg->kind == PROMQL_NODE_NUMBER) {
		/* Prometheus folds "-1" into the literal -1. */
		arg->number = -arg->number;
		arg->pos = pos;
		return arg;
	}
	struct promql_expr *e = new_node(p, PROMQL_NODE_UNARY, pos);
	if (!e) {
		promql_expr_free(arg);
		return NULL;
	}
	e->op = PROMQL_OP_SUB;
	e->lhs = arg;
	e->type = arg->type;
	return e;
}

static int binop_of(enum promql_tok k, enum promql_binop *op)
{
	switch (k) {
	case PROMQL_TOK_OR: *op = PROMQL_OP_OR; return 1;
	case PROMQL_TOK_AND: *op = PROMQL_OP_AND; return 2;
	case PROMQL_TOK_UNLESS: *op = PROMQL_OP_UNLESS; return 2;
	case PROMQL_TOK_EQLC: *op = PROMQL_OP_EQL; return 3;
	case PROMQL_TOK_NEQ: *op = PROMQL_OP_NEQ; return 3;
	case PROMQL_TOK_GTR: *op = PROMQL_OP_GTR; return 3;
	case PROMQL_TOK_LSS: *op = PROMQL_OP_LSS; return 3;
	case PROMQL_TOK_GTE: *op = PROMQL_OP_GTE; return 3;
	case PROMQL_TOK_LTE: *op = PROMQL_OP_LTE; return 3;
	case PROMQL_TOK_ADD: *op = PROMQL_OP_ADD; return 4;
	case PROMQL_TOK_SUB: *op = PROMQL_OP_SUB; return 4;
	case PROMQL_TOK_MUL: *op = PROMQL_OP_MUL; return 5;
	case PROMQL_TOK_DIV: *op = PROMQL_OP_DIV; return 5;
	case PROMQL_TOK_MOD: *op = PROMQL_OP_MOD; return 5;
	case PROMQL_TOK_ATAN2: *op = PROMQL_OP_ATAN2; return 5;
	case PROMQL_TOK_POW: *op = PROMQL_OP_POW; return 6;
	default: return 0;
	}
}

static bool is_comparison(enum promql_binop op)
{
	return op >= PROMQL_OP_EQL && op <= PROMQL_OP_LTE;
}

static bool is_set_op(enum promql_binop op)
{
	return op >= PROMQL_OP_AND;
}

/* bool, on/ignoring (...), group_left/group_right [(...)] after an
 * operator; the operator has been consumed. */
static bool parse_bin_modifiers(struct parser *p, struct promql_expr *e)
{
	if (p->tok.kind == PROMQL_TOK_BOOL) {
		if (!is_comparison(e->op)) {
			perr(p, p->tok.pos, "bool modifier can only be used on comparison operators");
			return false;
		}
		e->return_bool = true;
		advance(p);
	}
	if (p->tok.kind == PROMQL_TOK_ON || p->tok.kind == PROMQL_TOK_IGNORING) {
		e->has_matching = true;
		e->on = p->tok.kind == PROMQL_TOK_ON;
		const char *ctx = e->on ? "on clause" : "ignoring clause";
		advance(p);
		if (!parse_label_list(p, ctx, &e->match_labels, &e->nmatch_labels))
			return false;
		if (p->tok.kind == PROMQL_TOK_GROUP_LEFT || p->tok.kind == PROMQL_TOK_GROUP_RIGHT) {
			int gpos = p->tok.pos;
			if (is_set_op(e->op)) {
				perr(p, gpos, "no grouping allowed for \"%s\" operation", promql_binop_name(e->op));
				return false;
			}
			e->card = p->tok.kind == PROMQL_TOK_GROUP_LEFT ? PROMQL_CARD_MANY_TO_ONE : PROMQL_CARD_ONE_TO_MANY;
			advance(p);
			if (p->tok.kind == PROMQL_TOK_LPAREN &&
			    !parse_label_list(p, "grouping clause", &e->include, &e->ninclude))
				return false;
			for (size_t i = 0; e->on && i < e->nmatch_labels; i++)
				for (size_t j = 0; j < e->ninclude; j++)
					if (strcmp(e->match_labels[i], e->include[j]) == 0) {
						perr(p, gpos, "label \"%s\" must not occur in ON and GROUP clause at once",
						     e->include[j]);
						return false;
					}
		}
	} else if (p->tok.kind == PROMQL_TOK_GROUP_LEFT || p->tok.kind == PROMQL_TOK_GROUP_RIGHT) {
		perr(p, p->tok.pos, "group_left/group_right need an on or ignoring clause before them");
		return false;
	}
	if (is_set_op(e->op))
		e->card = PROMQL_CARD_MANY_TO_MANY;
	return true;
}

static bool check_binary(struct parser *p, struct promql_expr *e, int op_pos)
{
	enum promql_type lt = e->lhs->type, rt = e->rhs->type;
	if (lt != PROMQL_TYPE_SCALAR && lt != PROMQL_TYPE_VECTOR) {
		perr(p, e->lhs->pos, "binary expression must contain only scalar and instant vector types");
		return false;
	}
	if (rt != PROMQL_TYPE_SCALAR && rt != PROMQL_TYPE_VECTOR) {
		perr(p, e->rhs->pos, "binary expression must contain only scalar and instant vector types");
		return false;
	}
	if (is_comparison(e->op) && !e->return_bool && lt == PROMQL_TYPE_SCALAR && rt == PROMQL_TYPE_SCALAR) {
		perr(p, op_pos, "comparisons between scalars must use BOOL modifier");
		return false;
	}
	if ((lt == PROMQL_TYPE_SCALAR || rt == PROMQL_TYPE_SCALAR) && is_set_op(e->op)) {
		perr(p, op_pos, "set operator \"%s\" not allowed in binary scalar expression", promql_binop_name(e->op));
		return false;
	}
	if ((lt != PROMQL_TYPE_VECTOR || rt != PROMQL_TYPE_VECTOR) && e->has_matching) {
		perr(p, op_pos, "vector matching only allowed between instant vectors");
		return false;
	}
	e->type = (lt == PROMQL_TYPE_VECTOR || rt == PROMQL_TYPE_VECTOR) ? PROMQL_TYPE_VECTOR : PROMQL_TYPE_SCALAR;
	return true;
}

static struct promql_expr *parse_expr(struct parser *p, int min_prec)
{
	if (++p->depth > PROMQL_MAX_DEPTH) {
		perr(p, p->tok.pos, "expression nested too deeply (more than %d levels)", PROMQL_MAX_DEPTH);
		p->status = GPULSE_ELIMIT;
		return NULL;
	}
	struct promql_expr *lhs = parse_unary(p);
	while (lhs) {
		enum promql_binop op;
		int prec = binop_of(p->tok.kind, &op);
		if (prec == 0 || prec < min_prec)
			break;
		int op_pos = p->tok.pos;
		struct promql_expr *e = new_node(p, PROMQL_NODE_BINARY, op_pos);
		if (!e)
			goto fail;
		e->op = op;
		e->lhs = lhs;
		lhs = e;
		advance(p);
		if (!parse_bin_modifiers(p, e))
			goto fail;
		/* "^" is right-associative, every other operator left. */
		e->rhs = parse_expr(p, op == PROMQL_OP_POW ? prec : prec + 1);
		if (!e->rhs || !check_binary(p, e, op_pos))
			goto fail;
	}
	p->depth--;
	return lhs;
fail:
	promql_expr_free(lhs);
	return NULL;
}

int promql_parse(const char *expr, struct promql_expr **out, char *err, size_t errlen)
{
	*out = NULL;
	size_t len = strlen(expr);
	if (len > PROMQL_MAX_EXPR_LEN) {
		str_errf(err, errlen, "parse error at char %d: expression longer than %d bytes",
			 PROMQL_MAX_EXPR_LEN + 1, PROMQL_MAX_EXPR_LEN);
		return GPULSE_ELIMIT;
	}
	struct parser *p = xcalloc(1, sizeof *p);
	promql_lexer_init(&p->lx, expr, len);
	promql_lexer_next(&p->lx, &p->tok);
	struct promql_expr *e = NULL;
	if (p->tok.kind == PROMQL_TOK_EOF) {
		perr(p, 1, "no expression found in input");
	} else {
		e = parse_expr(p, 0);
		if (e && p->tok.kind != PROMQL_TOK_EOF) {
			unexpected(p, "expression", "end of input");
			promql_expr_free(e);
			e = NULL;
		}
	}
	int rc = p->status;
	if (!e && rc == 0)
		rc = GPULSE_EPARSE; /* defensive: every failure sets status */
	if (rc)
		str_errf(err, errlen, "%s", p->err);
	free(p->tok.string);
	if (p->has_next)
		free(p->next.string);
	free(p);
	if (rc) {
		promql_expr_free(e);
		return rc;
	}
	*out = e;
	return 0;
}
