/* The PromQL syntax tree that promql_parse builds and promql_eval walks.
 *
 * Ownership: a tree is one allocation graph owned by its root. Every
 * pointer inside a node (strings, matcher arrays, child nodes, grouping
 * label arrays) belongs to that node and is released by
 * promql_expr_free(root). Nodes are never shared between trees. Trees are
 * immutable after parsing, so one tree may be evaluated by many threads at
 * once. */
#ifndef GPULSE_PROMQL_AST_H
#define GPULSE_PROMQL_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rx;

/* Types of PromQL values, as the type checker sees them. */
/* The @ modifier: none, a fixed time, the query's start() or end(). */
enum { PROMQL_AT_NONE, PROMQL_AT_TIME, PROMQL_AT_START, PROMQL_AT_END };

enum promql_type {
	PROMQL_TYPE_SCALAR,
	PROMQL_TYPE_VECTOR, /* instant vector */
	PROMQL_TYPE_MATRIX, /* range vector */
	PROMQL_TYPE_STRING,
};

enum promql_match_op {
	PROMQL_MATCH_EQ,   /* =  */
	PROMQL_MATCH_NEQ,  /* != */
	PROMQL_MATCH_RE,   /* =~ */
	PROMQL_MATCH_NRE,  /* !~ */
};

/* One label matcher. A regular expression is anchored at both ends, as in
 * Prometheus, and compiled once at parse time (RE2's syntax, rx.h). */
struct promql_matcher {
	enum promql_match_op op;
	char *name;   /* owned */
	char *value;  /* owned, escapes already resolved */
	struct rx *re; /* owned; compiled when op is RE or NRE */
};

/* Whether `value` (never NULL; "" for a missing label) satisfies m, in
 * *matched. 0, or GPULSE_ELIMIT when the regular expression exceeded its
 * match limit (rx_match) or GPULSE_ENOMEM, with a sentence naming the
 * matcher in err (may be NULL): the caller fails, never reads it as no
 * match, which would silently drop what it should have selected. */
int promql_matcher_matches(const struct promql_matcher *m, const char *value, bool *matched,
			   char *err, size_t errlen);

enum promql_node_kind {
	PROMQL_NODE_NUMBER,
	PROMQL_NODE_STRING,
	PROMQL_NODE_VECTOR_SEL, /* foo{a="b"} [offset d] */
	PROMQL_NODE_MATRIX_SEL, /* foo{a="b"}[5m] [offset d] */
	PROMQL_NODE_CALL,
	PROMQL_NODE_AGG,
	PROMQL_NODE_BINARY,
	PROMQL_NODE_UNARY,      /* unary minus (plus is folded away) */
	PROMQL_NODE_PAREN,
	PROMQL_NODE_SUBQUERY,   /* expr[range:step] [offset d]; lhs is expr */
};

enum promql_binop {
	PROMQL_OP_ADD, PROMQL_OP_SUB, PROMQL_OP_MUL, PROMQL_OP_DIV,
	PROMQL_OP_MOD, PROMQL_OP_POW,
	PROMQL_OP_ATAN2,   /* keeps the metric name, as in Prometheus */
	PROMQL_OP_EQL, PROMQL_OP_NEQ, PROMQL_OP_GTR, PROMQL_OP_LSS,
	PROMQL_OP_GTE, PROMQL_OP_LTE,
	PROMQL_OP_AND, PROMQL_OP_OR, PROMQL_OP_UNLESS,
};

enum promql_agg_op {
	PROMQL_AGG_SUM, PROMQL_AGG_AVG, PROMQL_AGG_MIN, PROMQL_AGG_MAX,
	PROMQL_AGG_COUNT, PROMQL_AGG_STDDEV, PROMQL_AGG_TOPK,
	PROMQL_AGG_BOTTOMK, PROMQL_AGG_QUANTILE, PROMQL_AGG_STDVAR,
	PROMQL_AGG_GROUP, PROMQL_AGG_COUNT_VALUES,
};

enum promql_card {
	PROMQL_CARD_ONE_TO_ONE,
	PROMQL_CARD_MANY_TO_ONE,  /* group_left */
	PROMQL_CARD_ONE_TO_MANY,  /* group_right */
	PROMQL_CARD_MANY_TO_MANY, /* set operators */
};

struct promql_func; /* defined in parser.h */

struct promql_expr {
	enum promql_node_kind kind;
	enum promql_type type;  /* result type, set by the parser */
	int pos;                /* 1-based character position in the source */

	/* NUMBER */
	double number;
	/* STRING (owned) */
	char *string;

	/* VECTOR_SEL and MATRIX_SEL */
	char *metric_name;                /* owned; NULL when only {..} given */
	struct promql_matcher *matchers;  /* owned array, name matcher included */
	size_t nmatchers;
	int64_t range_ms;                 /* MATRIX_SEL and SUBQUERY */
	int64_t offset_ms;                /* selectors and SUBQUERY */
	int64_t step_ms;                  /* SUBQUERY: 0 for the default step */
	uint8_t at_mode;                  /* selectors, SUBQUERY: PROMQL_AT_* */
	int64_t at_ms;                    /* PROMQL_AT_TIME */

	/* CALL */
	const struct promql_func *func;   /* static table entry */
	struct promql_expr **args;        /* owned array of owned nodes */
	size_t nargs;

	/* AGG: param is the k or phi of topk/bottomk/quantile, else NULL */
	enum promql_agg_op agg;
	struct promql_expr *param;
	bool without;
	char **grouping;                  /* owned array of owned strings */
	size_t ngrouping;

	/* BINARY, UNARY (rhs unused), PAREN (lhs is the inner expression),
	 * AGG (lhs is the aggregated expression) */
	enum promql_binop op;
	struct promql_expr *lhs;
	struct promql_expr *rhs;
	bool return_bool;
	bool has_matching;   /* on(...) or ignoring(...) was written */
	bool on;             /* on (true) or ignoring (false) */
	char **match_labels; /* owned */
	size_t nmatch_labels;
	enum promql_card card;
	char **include;      /* group_left/right labels, owned */
	size_t ninclude;
};

/* Release a tree and everything it owns. Accepts NULL. */
void promql_expr_free(struct promql_expr *e);

#endif
