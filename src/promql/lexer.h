/* PromQL tokenizer: turns an expression into tokens one at a time, with
 * Prometheus's rules for numbers (hex, octal, Inf, NaN), durations (1h30m),
 * Go-style quoted strings and keywords (case-insensitive). Used by the
 * parser and by the series-notation reader. */
#ifndef GPULSE_PROMQL_LEXER_H
#define GPULSE_PROMQL_LEXER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum promql_tok {
	PROMQL_TOK_EOF,
	PROMQL_TOK_ERROR,
	PROMQL_TOK_IDENT,    /* metric or label name, maybe with colons */
	PROMQL_TOK_NUMBER,
	PROMQL_TOK_DURATION,
	PROMQL_TOK_STRING,
	PROMQL_TOK_LBRACE, PROMQL_TOK_RBRACE,
	PROMQL_TOK_LPAREN, PROMQL_TOK_RPAREN,
	PROMQL_TOK_LBRACKET, PROMQL_TOK_RBRACKET,
	PROMQL_TOK_COMMA, PROMQL_TOK_COLON, PROMQL_TOK_AT,
	/* operators */
	PROMQL_TOK_ADD, PROMQL_TOK_SUB, PROMQL_TOK_MUL, PROMQL_TOK_DIV,
	PROMQL_TOK_MOD, PROMQL_TOK_POW,
	PROMQL_TOK_EQLC,    /* == */
	PROMQL_TOK_NEQ,     /* != */
	PROMQL_TOK_GTR, PROMQL_TOK_LSS, PROMQL_TOK_GTE, PROMQL_TOK_LTE,
	PROMQL_TOK_ASSIGN,  /* = */
	PROMQL_TOK_EQL_RE,  /* =~ */
	PROMQL_TOK_NEQ_RE,  /* !~ */
	/* keywords */
	PROMQL_TOK_AND, PROMQL_TOK_OR, PROMQL_TOK_UNLESS, PROMQL_TOK_ATAN2,
	PROMQL_TOK_BY, PROMQL_TOK_WITHOUT, PROMQL_TOK_ON, PROMQL_TOK_IGNORING,
	PROMQL_TOK_GROUP_LEFT, PROMQL_TOK_GROUP_RIGHT, PROMQL_TOK_BOOL,
	PROMQL_TOK_OFFSET,
	PROMQL_TOK_AGGREGATOR, /* sum, avg, ... (any Prometheus aggregator) */
};

struct promql_token {
	enum promql_tok kind;
	int pos;             /* 1-based byte position of the first character */
	const char *text;    /* points into the source */
	size_t len;
	double number;       /* NUMBER */
	int64_t duration_ms; /* DURATION */
	char *string;        /* STRING, unescaped; owned by the token: free() */
	char error[160];     /* ERROR: the reason */
};

struct promql_lexer {
	const char *src;
	size_t len;
	size_t pos;
	bool series_mode;    /* series notation: 'x' ends a number, no hex */
};

void promql_lexer_init(struct promql_lexer *lx, const char *src, size_t len);
/* Read the next token into *t. A STRING token's t->string must be freed
 * by the caller (free()). Never fails: errors come back as ERROR tokens. */
void promql_lexer_next(struct promql_lexer *lx, struct promql_token *t);

/* Parse a duration such as "1h30m" or "5m" into milliseconds: common
 * duration_parse (Prometheus's syntax), 0 or GPULSE_EPARSE. */
int promql_parse_duration(const char *s, size_t len, int64_t *out_ms);
/* Write a duration as Prometheus does ("1h30m", "0s"). */
void promql_format_duration(int64_t ms, char *out, size_t outlen);

#endif
