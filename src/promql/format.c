/* An expression written back as PromQL text in Prometheus's canonical
 * style, the text parsing back to an equal tree (promql_expr_format), and
 * strings quoted as Go's strconv.Quote does (promql_quote); see parser.h.
 * Apart from parser.c: printing a tree shares nothing with reading one. */
#include "promql/parser.h"

#include "common/buf.h"
#include "common/gofloat.h"
#include "common/status.h"
#include "promql/lexer.h"

int promql_quote(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	buf_putc(b, '"');
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		switch (*c) {
		case '"': buf_puts(b, "\\\""); break;
		case '\\': buf_puts(b, "\\\\"); break;
		case '\n': buf_puts(b, "\\n"); break;
		case '\t': buf_puts(b, "\\t"); break;
		case '\r': buf_puts(b, "\\r"); break;
		default:
			/* Bytes >= 0x80 pass through: label values are UTF-8. */
			if (*c < 0x20 || *c == 0x7f) {
				char esc[5] = {'\\', 'x', hex[*c >> 4], hex[*c & 15], 0};
				buf_puts(b, esc);
			} else {
				buf_putc(b, (char)*c);
			}
		}
	}
	return buf_putc(b, '"');
}

/* A number literal as Prometheus prints one: Go's %v, the shortest
 * digits, in exponent form below 1e-4 and from 1e6. */
static void put_number(struct buf *b, double v)
{
	gofloat_put(b, v, 'g');
}

static void put_label_list(struct buf *b, char **v, size_t n)
{
	buf_putc(b, '(');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_puts(b, ", ");
		buf_puts(b, v[i]);
	}
	buf_putc(b, ')');
}

static const char *match_op_text(enum promql_match_op op)
{
	switch (op) {
	case PROMQL_MATCH_EQ: return "=";
	case PROMQL_MATCH_NEQ: return "!=";
	case PROMQL_MATCH_RE: return "=~";
	case PROMQL_MATCH_NRE: return "!~";
	}
	return "?";
}

/* A selector's or subquery's modifiers as Prometheus prints them: the @
 * first (" @ 100.000", " @ start()", " @ end()"), then " offset 5m". */
static void format_modifiers(const struct promql_expr *e, struct buf *b)
{
	if (e->at_mode == PROMQL_AT_TIME)
		buf_printf(b, " @ %.3f", (double)e->at_ms / 1000);
	else if (e->at_mode == PROMQL_AT_START)
		buf_puts(b, " @ start()");
	else if (e->at_mode == PROMQL_AT_END)
		buf_puts(b, " @ end()");
	if (e->offset_ms) {
		char dur[64];
		promql_format_duration(e->offset_ms, dur, sizeof dur);
		buf_printf(b, " offset %s", dur);
	}
}

int promql_expr_format(const struct promql_expr *e, struct buf *b)
{
	char dur[64];
	switch (e->kind) {
	case PROMQL_NODE_NUMBER:
		put_number(b, e->number);
		break;
	case PROMQL_NODE_STRING:
		promql_quote(b, e->string);
		break;
	case PROMQL_NODE_VECTOR_SEL:
	case PROMQL_NODE_MATRIX_SEL: {
		size_t shown = 0;
		if (e->metric_name)
			buf_puts(b, e->metric_name);
		for (size_t i = 0; i < e->nmatchers; i++) {
			const struct promql_matcher *m = &e->matchers[i];
			if (e->metric_name && i == 0)
				continue; /* the name itself */
			buf_puts(b, shown++ ? "," : "{");
			buf_puts(b, m->name);
			buf_puts(b, match_op_text(m->op));
			promql_quote(b, m->value);
		}
		if (shown)
			buf_putc(b, '}');
		if (e->kind == PROMQL_NODE_MATRIX_SEL) {
			promql_format_duration(e->range_ms, dur, sizeof dur);
			buf_printf(b, "[%s]", dur);
		}
		format_modifiers(e, b);
		break;
	}
	case PROMQL_NODE_SUBQUERY:
		promql_expr_format(e->lhs, b);
		promql_format_duration(e->range_ms, dur, sizeof dur);
		buf_printf(b, "[%s:", dur);
		if (e->step_ms) {
			promql_format_duration(e->step_ms, dur, sizeof dur);
			buf_puts(b, dur);
		}
		buf_putc(b, ']');
		format_modifiers(e, b);
		break;
	case PROMQL_NODE_CALL:
		buf_puts(b, e->func->name);
		buf_putc(b, '(');
		for (size_t i = 0; i < e->nargs; i++) {
			if (i)
				buf_puts(b, ", ");
			promql_expr_format(e->args[i], b);
		}
		buf_putc(b, ')');
		break;
	case PROMQL_NODE_AGG:
		buf_puts(b, promql_agg_name(e->agg));
		if (e->without || e->ngrouping) {
			buf_puts(b, e->without ? " without " : " by ");
			put_label_list(b, e->grouping, e->ngrouping);
			buf_putc(b, ' ');
		}
		buf_putc(b, '(');
		if (e->param) {
			promql_expr_format(e->param, b);
			buf_puts(b, ", ");
		}
		promql_expr_format(e->lhs, b);
		buf_putc(b, ')');
		break;
	case PROMQL_NODE_BINARY:
		promql_expr_format(e->lhs, b);
		buf_printf(b, " %s", promql_binop_name(e->op));
		if (e->return_bool)
			buf_puts(b, " bool");
		if (e->has_matching) {
			buf_puts(b, e->on ? " on " : " ignoring ");
			put_label_list(b, e->match_labels, e->nmatch_labels);
			if (e->card == PROMQL_CARD_MANY_TO_ONE || e->card == PROMQL_CARD_ONE_TO_MANY) {
				buf_puts(b, e->card == PROMQL_CARD_MANY_TO_ONE ? " group_left " : " group_right ");
				put_label_list(b, e->include, e->ninclude);
			}
		}
		buf_putc(b, ' ');
		promql_expr_format(e->rhs, b);
		break;
	case PROMQL_NODE_UNARY:
		buf_putc(b, '-');
		promql_expr_format(e->lhs, b);
		break;
	case PROMQL_NODE_PAREN:
		buf_putc(b, '(');
		promql_expr_format(e->lhs, b);
		buf_putc(b, ')');
		break;
	}
	return b->failed ? GPULSE_ELIMIT : 0;
}
