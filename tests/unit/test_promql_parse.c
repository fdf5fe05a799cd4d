/* Tests for the PromQL parser (src/promql/parser.c, lexer.c): valid
 * expressions print back in Prometheus's canonical form (which shows
 * precedence and associativity through the tree's shape), invalid ones
 * fail with the right message at the right 1-based position, bounds on
 * length, depth and size hold, and formatting round-trips. Also the
 * series notation of promtool's input_series (series.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "promql/lexer.h"
#include "promql/parser.h"
#include "promql/queryable.h"
#include "common/rx.h"
#include "promql/series.h"
#include "common/stale.h"
#include "common/status.h"

static char *format(const struct promql_expr *e)
{
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(promql_expr_format(e, &b), 0);
	return buf_steal(&b);
}

/* Parse `in`, check the canonical form, and that the form parses back to
 * itself. */
static void check_valid(const char *in, const char *want, enum promql_type type)
{
	struct promql_expr *e;
	char err[512] = "";
	int rc = promql_parse(in, &e, err, sizeof err);
	if (rc != 0)
		fail_msg("%s: %s", in, err);
	char *got = format(e);
	if (strcmp(got, want) != 0)
		fail_msg("%s: got '%s', want '%s'", in, got, want);
	if (e->type != type)
		fail_msg("%s: type %s, want %s", in, promql_type_name(e->type), promql_type_name(type));
	struct promql_expr *again;
	assert_int_equal(promql_parse(got, &again, err, sizeof err), 0);
	char *got2 = format(again);
	assert_string_equal(got, got2);
	free(got);
	free(got2);
	promql_expr_free(e);
	promql_expr_free(again);
}

static void test_valid(void **state)
{
	(void)state;
	const enum promql_type S = PROMQL_TYPE_SCALAR, V = PROMQL_TYPE_VECTOR, M = PROMQL_TYPE_MATRIX;
	static const struct {
		const char *in, *want;
		int type;
	} cases[] = {
		{"foo", "foo", 1},
		{"  foo  # a comment", "foo", 1},
		{"foo:bar:rate5m", "foo:bar:rate5m", 1},
		{":foo", ":foo", 1},
		{"foo{a=\"b\"}", "foo{a=\"b\"}", 1},
		{"foo{a='b', c!=\"d\", e=~\"f.*\", g!~`h\\d`,}", "foo{a=\"b\",c!=\"d\",e=~\"f.*\",g!~\"h\\\\d\"}", 1},
		{"{__name__=\"foo\"}", "{__name__=\"foo\"}", 1},
		{"{__name__=~\"foo|bar\", job!=\"\"}", "{__name__=~\"foo|bar\",job!=\"\"}", 1},
		{"foo{a=\"\\n\\t\\\"\\x41\\u00e9\\101\"}", "foo{a=\"\\n\\t\\\"A\xc3\xa9" "A\"}", 1},
		{"foo{on=\"x\", by=\"y\"}", "foo{on=\"x\",by=\"y\"}", 1},
		{"foo{a=~\"x*?(y|z)+[*+]{2,3}\"}", "foo{a=~\"x*?(y|z)+[*+]{2,3}\"}", 1},
		{"foo[5m]", "foo[5m]", 2},
		{"foo[1h30m]", "foo[1h30m]", 2},
		{"foo[90s]", "foo[1m30s]", 2},
		{"foo[1d]", "foo[1d]", 2},
		{"foo offset 5m", "foo offset 5m", 1},
		{"foo[5m] offset 1w", "foo[5m] offset 1w", 2},
		{"foo offset -30s", "foo offset -30s", 1},
		{"1", "1", 0},
		{"1.5e3", "1500", 0},
		{"5e19", "5e+19", 0},
		{"1e300 * 0.1", "1e+300 * 0.1", 0},
		{"123456789012", "1.23456789012e+11", 0},
		{"100000", "100000", 0},
		{"0.0001", "0.0001", 0},
		{"0.00001", "1e-05", 0},
		{"0x1F", "31", 0},
		{"010", "8", 0},
		{".5", "0.5", 0},
		{"Inf", "+Inf", 0},
		{"-inf", "-Inf", 0},
		{"NaN", "NaN", 0},
		{"-1", "-1", 0},
		{"\"a string\"", "\"a string\"", 3},
		{"1 + 2 * 3", "1 + 2 * 3", 0},
		{"(1 + 2) * 3", "(1 + 2) * 3", 0},
		{"-foo", "-foo", 1},
		{"sum(foo)", "sum(foo)", 1},
		{"SUM(foo)", "sum(foo)", 1},
		{"sum by (a, b) (foo)", "sum by (a, b) (foo)", 1},
		{"sum(foo) by (a)", "sum by (a) (foo)", 1},
		{"sum without (a) (foo)", "sum without (a) (foo)", 1},
		{"sum by () (foo)", "sum(foo)", 1},
		{"count(foo) without ()", "count without () (foo)", 1},
		{"topk(3, foo)", "topk(3, foo)", 1},
		{"bottomk by (x) (1, foo)", "bottomk by (x) (1, foo)", 1},
		{"quantile(0.9, rate(foo[5m]))", "quantile(0.9, rate(foo[5m]))", 1},
		{"rate(foo[5m])", "rate(foo[5m])", 1},
		{"foo[5m:1m]", "foo[5m:1m]", 2},
		{"foo @ 100", "foo @ 100.000", 1},
		{"foo offset 5m @ 1.5", "foo @ 1.500 offset 5m", 1},
		{"rate(foo[1m] @ end())", "rate(foo[1m] @ end())", 1},
		{"max_over_time(foo[5m:] @ start())", "max_over_time(foo[5m:] @ start())", 1},
		{"foo @ -60", "foo @ -60.000", 1},
		{"max_over_time(rate(foo[1m])[1h:] offset 5m)", "max_over_time(rate(foo[1m])[1h:] offset 5m)", 1},
		{"(a + b)[10m:30s]", "(a + b)[10m:30s]", 2},
		{"sum(x)[2h:5m]", "sum(x)[2h:5m]", 2},
		{"quantile_over_time(0.5, foo[10m])", "quantile_over_time(0.5, foo[10m])", 1},
		{"round(foo)", "round(foo)", 1},
		{"round(foo, 0.5)", "round(foo, 0.5)", 1},
		{"time()", "time()", 0},
		{"vector(1)", "vector(1)", 1},
		{"scalar(foo)", "scalar(foo)", 0},
		{"absent(foo{a=\"b\"})", "absent(foo{a=\"b\"})", 1},
		{"foo > bool 1", "foo > bool 1", 1},
		{"1 == bool 1", "1 == bool 1", 0},
		{"a + on(x, y) b", "a + on (x, y) b", 1},
		{"a + ignoring(x) group_left(y) b", "a + ignoring (x) group_left (y) b", 1},
		{"a * on(x) group_right b", "a * on (x) group_right () b", 1},
		{"a and b or c unless d", "a and b or c unless d", 1},
		{"a and on(x) b", "a and on (x) b", 1},
		{"a AND b", "a and b", 1},
		{"rate(foo[5m]) > 0.5 and on(gpu) bar", "rate(foo[5m]) > 0.5 and on (gpu) bar", 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		enum promql_type t = cases[i].type == 0 ? S : cases[i].type == 1 ? V : cases[i].type == 2 ? M : PROMQL_TYPE_STRING;
		check_valid(cases[i].in, cases[i].want, t);
	}
}

/* Precedence and associativity, seen through the tree. */
static void test_precedence(void **state)
{
	(void)state;
	struct promql_expr *e;
	char err[256];
	/* ^ is right-associative: 2 ^ (3 ^ 2) */
	assert_int_equal(promql_parse("2 ^ 3 ^ 2", &e, err, sizeof err), 0);
	assert_int_equal(e->kind, PROMQL_NODE_BINARY);
	assert_int_equal(e->lhs->kind, PROMQL_NODE_NUMBER);
	assert_int_equal(e->rhs->kind, PROMQL_NODE_BINARY);
	promql_expr_free(e);
	/* - is left-associative: (1 - 2) - 3 */
	assert_int_equal(promql_parse("1 - 2 - 3", &e, err, sizeof err), 0);
	assert_int_equal(e->lhs->kind, PROMQL_NODE_BINARY);
	assert_int_equal(e->rhs->kind, PROMQL_NODE_NUMBER);
	promql_expr_free(e);
	/* unary minus binds looser than ^: -(a ^ 2) */
	assert_int_equal(promql_parse("-a ^ 2", &e, err, sizeof err), 0);
	assert_int_equal(e->kind, PROMQL_NODE_UNARY);
	assert_int_equal(e->lhs->kind, PROMQL_NODE_BINARY);
	assert_int_equal(e->lhs->op, PROMQL_OP_POW);
	promql_expr_free(e);
	/* ...but tighter than *: (-a) * 2 */
	assert_int_equal(promql_parse("-a * 2", &e, err, sizeof err), 0);
	assert_int_equal(e->kind, PROMQL_NODE_BINARY);
	assert_int_equal(e->lhs->kind, PROMQL_NODE_UNARY);
	promql_expr_free(e);
	/* or binds loosest, and/unless above it, comparisons above those */
	assert_int_equal(promql_parse("a or b and c > 1", &e, err, sizeof err), 0);
	assert_int_equal(e->op, PROMQL_OP_OR);
	assert_int_equal(e->rhs->op, PROMQL_OP_AND);
	assert_int_equal(e->rhs->rhs->op, PROMQL_OP_GTR);
	promql_expr_free(e);
	/* + below *, comparison below + */
	assert_int_equal(promql_parse("a + b * c == d % e", &e, err, sizeof err), 0);
	assert_int_equal(e->op, PROMQL_OP_EQL);
	assert_int_equal(e->lhs->op, PROMQL_OP_ADD);
	assert_int_equal(e->lhs->rhs->op, PROMQL_OP_MUL);
	assert_int_equal(e->rhs->op, PROMQL_OP_MOD);
	promql_expr_free(e);
	/* a selector's matchers and offset */
	assert_int_equal(promql_parse("foo{a=~\"x|y\"}[5m] offset 1h", &e, err, sizeof err), 0);
	assert_int_equal(e->kind, PROMQL_NODE_MATRIX_SEL);
	assert_int_equal(e->range_ms, 300000);
	assert_int_equal(e->offset_ms, 3600000);
	assert_int_equal(e->nmatchers, 2);
	bool matched;
	assert_int_equal(promql_matcher_matches(&e->matchers[1], "x", &matched, NULL, 0), 0);
	assert_true(matched);
	assert_int_equal(promql_matcher_matches(&e->matchers[1], "xy", &matched, NULL, 0), 0);
	assert_false(matched);
	promql_expr_free(e);
	/* A pattern that exceeds its match limit (the DFA fallback's
	 * workspace shrunk so it cannot decide either) is an error naming
	 * the matcher, never "no match". */
	rx_set_limits(0, 20);
	assert_int_equal(promql_parse("{k=~\"(x+x+)+y\"}", &e, err, sizeof err), 0);
	char why[256] = "";
	matched = true;
	assert_int_equal(promql_matcher_matches(&e->matchers[0],
						"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxyy", &matched,
						why, sizeof why),
			 GPULSE_ELIMIT);
	assert_false(matched);
	assert_string_equal(why, "regular expression in matcher k=~\"(x+x+)+y\" exceeded its match limit");
	promql_expr_free(e);
	rx_set_limits(0, 0);
}

static void check_invalid(const char *in, int pos, const char *want)
{
	struct promql_expr *e = (struct promql_expr *)1;
	char err[512] = "";
	int rc = promql_parse(in, &e, err, sizeof err);
	if (rc == 0)
		fail_msg("'%s' parsed", in);
	assert_null(e);
	char prefix[64];
	snprintf(prefix, sizeof prefix, "parse error at char %d: ", pos);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, want))
		fail_msg("'%s': got '%s', want '%s...%s'", in, err, prefix, want);
}

static void test_invalid(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		int pos;
		const char *want;
	} cases[] = {
		{"", 1, "no expression found"},
		{"foo[5m", 7, "unexpected end of input in range"},
		{"sum(foo]", 8, "unexpected \"]\""},
		{"foo{a=\"b\"", 10, "unexpected end of input in label matching"},
		{"foo{a}", 6, "expected label matching operator"},
		{"foo{a=b}", 7, "expected string"},
		{"{}", 1, "vector selector must contain at least one non-empty matcher"},
		{"{a=\"\"}", 1, "at least one non-empty matcher"},
		{"{a=~\".*\"}", 1, "at least one non-empty matcher"},
		{"foo{__name__=\"bar\"}", 5, "metric name must not be set twice"},
		{"foo{a=~\"(\"}", 5, "invalid regular expression"},
		{"foo{a=~\"x**\"}", 5, "invalid nested repetition operator"},
		{"foo{a=~\"x{2}{3}\"}", 5, "invalid nested repetition operator"},
		{"foo{a=~\"x{1001}\"}", 5, "invalid repeat count"},
		{"foo{a=~\"(x{40}){40}\"}", 5, "invalid repeat count: `{40}` at byte 8"},
		{"foo{a=~\"(a)\\\\1\"}", 5, "backreferences are not supported"},
		{"foo{a=~\"a(?<=b)\"}", 5, "invalid or unsupported Perl syntax (lookbehind)"},
		{"foo{a=\"\\q\"}", 7, "unknown escape sequence"},
		{"foo{a=\"abc", 7, "unterminated quoted string"},
		{"rate(foo)", 6, "expected type range vector in call to function \"rate\", got instant vector"},
		{"abs(foo[5m])", 5, "expected type instant vector in call to function \"abs\", got range vector"},
		{"rate(foo[5m], 1)", 1, "expected 1 argument(s) in call to \"rate\", got 2"},
		{"round(foo, 1, 2)", 1, "expected at most 2 argument(s)"},
		{"time(1)", 1, "expected 0 argument(s)"},
		{"nosuch(foo)", 1, "unknown function with name \"nosuch\""},
		{"histogram_fraction(0, 1, foo)", 1, "function \"histogram_fraction\" is not supported"},
		{"label_join(foo, \"a\")", 1, "expected at least 3 argument(s) in call to \"label_join\", got 2"},
		{"label_join(foo, \"a\", \",\", \"b\", 1)", 32, "expected type string in call to function \"label_join\", got scalar"},
		{"label_replace(foo, \"a\", \"b\", \"c\")", 1, "expected 5 argument(s) in call to \"label_replace\", got 4"},
		{"clamp(foo, 1)", 1, "expected 3 argument(s) in call to \"clamp\", got 2"},
		{"predict_linear(foo, 60)", 16, "expected type range vector in call to function \"predict_linear\""},
		{"hour(foo, bar)", 1, "expected at most 1 argument(s) in call to \"hour\", got 2"},
		{"count_values(1, foo)", 14, "expected type string in aggregation parameter, got scalar"},
		{"stdvar(\"a\", foo)", 11, "unexpected \",\" in aggregation"},
		{"sum(foo[5m])", 5, "expected type instant vector in aggregation expression, got range vector"},
		{"topk(foo, bar)", 6, "expected type scalar in aggregation parameter, got instant vector"},
		{"topk(bar)", 9, "unexpected \")\" in aggregation"},
		{"1 > 2", 3, "comparisons between scalars must use BOOL modifier"},
		{"foo + bool bar", 7, "bool modifier can only be used on comparison operators"},
		{"1 and foo", 3, "set operator \"and\" not allowed in binary scalar expression"},
		{"foo and on(a) group_left bar", 15, "no grouping allowed for \"and\" operation"},
		{"1 + on(a) foo", 3, "vector matching only allowed between instant vectors"},
		{"foo[5m] + 1", 1, "binary expression must contain only scalar and instant vector types"},
		{"foo + on(a) group_left(a) bar", 13, "label \"a\" must not occur in ON and GROUP clause at once"},
		{"foo[5m:1m][10m:]", 11, "subquery is only allowed on instant vector, got range vector"},
		{"foo[5m:0s]", 8, "zero or negative subquery step"},
		{"foo[5m:1m", 10, "unexpected end of input in subquery selector"},
		{"rate(foo[5m:])[1m]", 15, "ranges only allowed for vector selectors"},
		{"sum(foo[5m:])", 5, "expected type instant vector in aggregation expression, got range vector"},
		{"(foo)[5m]", 6, "ranges only allowed for vector selectors"},
		{"foo @ bar", 7, "unexpected identifier \"bar\" in @, expected timestamp"},
		{"foo @ 1 @ 2", 9, "@ <timestamp> may not be set multiple times"},
		{"sum(foo) @ 100", 10, "@ modifier must be preceded by an instant vector selector"},
		{"foo @ 100 [5m]", 11, "no @ modifiers allowed before range"},
		{"foo @ Inf", 7, "timestamp out of bounds for @ modifier"},
		{"sum(foo) offset 5m", 10, "offset modifier must be preceded by an instant vector selector"},
		{"foo offset 5m offset 1m", 15, "offset may not be set multiple times"},
		{"foo offset 5m[1m]", 14, "no offset modifiers allowed before range"},
		{"foo[5x]", 5, "bad number or duration syntax"},
		{"foo[1.5m]", 5, "bad number or duration syntax"},
		{"foo[0s]", 4, "range must be greater than 0s"},
		{"1 +", 4, "unexpected end of input"},
		{"foo bar", 5, "unexpected identifier \"bar\""},
		{"foo )", 5, "unexpected \")\""},
		{"sum", 4, "unexpected end of input in aggregation"},
		{"by", 1, "unexpected \"by\""},
		{"foo atan2", 10, "unexpected end of input"},
		{"foo ! bar", 5, "unexpected character after '!'"},
		{"foo $ bar", 5, "unexpected character: '$'"},
		{"-\"str\"", 1, "unary expression only allowed on expressions of type scalar or instant vector"},
		{"a + group_left b", 5, "group_left/group_right need an on or ignoring clause"},
		{"sum by (a:b) (foo)", 9, "expected label"},
		{"sum(foo) by (a) by (b)", 17, "unexpected \"by\""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		check_invalid(cases[i].in, cases[i].pos, cases[i].want);
}

static void test_bounds(void **state)
{
	(void)state;
	struct promql_expr *e;
	char err[256];
	/* Deep nesting is refused, not a stack overflow. */
	size_t n = 20000;
	char *deep = malloc(2 * n + 2);
	memset(deep, '(', n);
	deep[n] = '1';
	memset(deep + n + 1, ')', n);
	deep[2 * n + 1] = '\0';
	assert_int_equal(promql_parse(deep, &e, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "nested too deeply"));
	memset(deep, '-', 2 * n);
	deep[2 * n] = '1';
	deep[2 * n + 1] = '\0';
	assert_int_not_equal(promql_parse(deep, &e, err, sizeof err), 0);
	free(deep);
	/* Too long. */
	char *lng = malloc(PROMQL_MAX_EXPR_LEN + 2);
	memset(lng, 'a', PROMQL_MAX_EXPR_LEN + 1);
	lng[PROMQL_MAX_EXPR_LEN + 1] = '\0';
	assert_int_equal(promql_parse(lng, &e, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "longer than"));
	free(lng);
	/* Too many nodes (flat, so depth is no issue). */
	struct buf b;
	buf_init(&b, 1 << 20);
	for (int i = 0; i < PROMQL_MAX_NODES; i++)
		buf_puts(&b, i ? " + 1" : "1");
	assert_int_equal(promql_parse(b.data, &e, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "too large"));
	buf_free(&b);
	/* Nesting just under the bound works. */
	assert_int_equal(promql_parse("((((((((((1))))))))))", &e, err, sizeof err), 0);
	promql_expr_free(e);
}

static void test_durations(void **state)
{
	(void)state;
	int64_t ms;
	assert_int_equal(promql_parse_duration("1h30m", 5, &ms), 0);
	assert_int_equal(ms, 5400000);
	assert_int_equal(promql_parse_duration("5m", 2, &ms), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(promql_parse_duration("1y2w3d4h5m6s7ms", 15, &ms), 0);
	assert_int_equal(ms, 31536000000LL + 2 * 604800000LL + 3 * 86400000LL + 4 * 3600000 + 5 * 60000 + 6000 + 7);
	assert_int_equal(promql_parse_duration("0", 1, &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_not_equal(promql_parse_duration("5m1h", 4, &ms), 0);
	assert_int_not_equal(promql_parse_duration("5", 1, &ms), 0);
	assert_int_not_equal(promql_parse_duration("5q", 2, &ms), 0);
	assert_int_not_equal(promql_parse_duration("99999999999999999999y", 21, &ms), 0);
	char out[64];
	promql_format_duration(5400000, out, sizeof out);
	assert_string_equal(out, "1h30m");
	promql_format_duration(0, out, sizeof out);
	assert_string_equal(out, "0s");
	promql_format_duration(1500, out, sizeof out);
	assert_string_equal(out, "1s500ms");
}

static void expect_values(const char *text, const char *want)
{
	struct promql_series_value *v;
	size_t n;
	char err[256];
	if (promql_parse_series_values(text, &v, &n, err, sizeof err) != 0)
		fail_msg("%s: %s", text, err);
	struct buf b;
	buf_init(&b, 4096);
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(&b, ' ');
		if (v[i].omitted)
			buf_putc(&b, '_');
		else if (stale_nan_is(v[i].v))
			buf_puts(&b, "stale");
		else
			buf_put_double(&b, v[i].v);
	}
	if (strcmp(b.data ? b.data : "", want) != 0)
		fail_msg("%s: got '%s', want '%s'", text, b.data ? b.data : "", want);
	buf_free(&b);
	free(v);
}

static void test_series_values(void **state)
{
	(void)state;
	expect_values("1+1x3", "1 2 3 4");
	expect_values("5-2x3", "5 3 1 -1");
	expect_values("-1+1x2", "-1 0 1");
	expect_values("7x2", "7 7 7");
	expect_values("1 _ stale 2", "1 _ stale 2");
	expect_values("_x3 4", "_ _ _ 4");
	expect_values("  1e3  -2.5 +Inf -Inf ", "1000 -2.5 +Inf -Inf");
	expect_values("1+1x10 _ stale 5-2x3",
		      "1 2 3 4 5 6 7 8 9 10 11 _ stale 5 3 1 -1");
	expect_values("1.5e1+1e-1x1", "15 15.1");
	expect_values("", "");
	/* Added up step by step as promtool does, not a + b*i. */
	struct promql_series_value *v;
	size_t n;
	char err[256];
	assert_int_equal(promql_parse_series_values("0.1+0.1x2", &v, &n, err, sizeof err), 0);
	assert_int_equal(n, 3);
	assert_true(v[2].v == 0.1 + 0.1 + 0.1);
	free(v);
	assert_int_equal(promql_parse_series_values("1 foo", &v, &n, err, sizeof err), GPULSE_EPARSE);
	assert_non_null(strstr(err, "\"foo\""));
	assert_int_equal(promql_parse_series_values("1+x3", &v, &n, err, sizeof err), GPULSE_EPARSE);
	assert_int_equal(promql_parse_series_values("1x99999999", &v, &n, err, sizeof err), GPULSE_ELIMIT);

	struct label *l;
	assert_int_equal(promql_parse_series_labels("up{job=\"a\", instance=\"b\"}", &l, &n, err, sizeof err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(l[0].name, "__name__");
	assert_string_equal(l[0].value, "up");
	assert_string_equal(l[1].name, "instance");
	assert_string_equal(l[2].name, "job");
	assert_string_equal(l[2].value, "a");
	free(l);
	assert_int_not_equal(promql_parse_series_labels("up{a=~\"x\"}", &l, &n, err, sizeof err), 0);
	assert_int_not_equal(promql_parse_series_labels("sum(up)", &l, &n, err, sizeof err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_series_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
