/* Tests for gofloat_parse (src/common/gofloat.c): Go's
 * strconv.ParseFloat(s, 64) acceptance. Every row of the table was put to
 * Prometheus 2.42 (promtool test rules) as the le of a bucket of
 * histogram_quantile: a bucket Prometheus ignored is a row that must be
 * refused here, and the quantile it gave shows the bound it read. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/gofloat.h"
#include "common/status.h"

enum verdict { OK, REFUSED, RANGE };

struct row {
	const char *text;
	enum verdict verdict;
	double want; /* OK: the value (NAN: a NaN) */
};

static const struct row rows[] = {
	{"1", OK, 1},
	{" 0.1", REFUSED, 0},
	{"0.1 ", REFUSED, 0},
	{"1e500", RANGE, INFINITY},
	{"-1e500", RANGE, -INFINITY},
	{"0x1p2000", RANGE, INFINITY},
	{"1e-500", OK, 0},
	{"0x1p-1080", OK, 0},
	{"1e-320", OK, 1e-320},
	{"Inf", OK, INFINITY},
	{"+inf", OK, INFINITY},
	{"-inf", OK, -INFINITY},
	{"INF", OK, INFINITY},
	{"infinity", OK, INFINITY},
	{"+Infinity", OK, INFINITY},
	{"infin", REFUSED, 0},
	{"infinityx", REFUSED, 0},
	{"nan", OK, NAN},
	{"NaN", OK, NAN},
	{"+nan", REFUSED, 0},
	{"1_0", OK, 10},
	{"0_1", OK, 1},
	{"1__0", REFUSED, 0},
	{"_1", REFUSED, 0},
	{"1_", REFUSED, 0},
	{"1_.5", REFUSED, 0},
	{"1_e1", REFUSED, 0},
	{"1e1_", REFUSED, 0},
	{"1e0_1", OK, 10},
	{"1e_01", REFUSED, 0},
	{"0x1p-2", OK, 0.25},
	{"0X1P-2", OK, 0.25},
	{"0x1P+1", OK, 2},
	{"+0x1p0", OK, 1},
	{"0x_1p-2", OK, 0.25},
	{"0x1_0p0", OK, 16},
	{"0x_p0", REFUSED, 0},
	{"0x10", REFUSED, 0},
	{"0x1.8p1", OK, 3},
	{"0x.8p1", OK, 1},
	{"0x1.p0", OK, 1},
	{"0x1p", REFUSED, 0},
	{"0x", REFUSED, 0},
	{"0b1", REFUSED, 0},
	{"0o7", REFUSED, 0},
	{"1e", REFUSED, 0},
	{"1e+", REFUSED, 0},
	{".5", OK, 0.5},
	{"5.", OK, 5},
	{".", REFUSED, 0},
	{"+.5", OK, 0.5},
	{"-.5e1", OK, -5},
	{"1E1", OK, 10},
	{"1.e1", OK, 10},
	{"00.5", OK, 0.5},
	{"1.0e-2", OK, 0.01},
	{"-0", OK, -0.0},
	{"1.5.5", REFUSED, 0},
	{"++1", REFUSED, 0},
	{"", REFUSED, 0},
};

static void test_go_parse_float_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		double v = 12345;
		int rc = gofloat_parse(r->text, &v);
		int want_rc = r->verdict == OK ? 0 : r->verdict == RANGE ? GPULSE_ERANGE : GPULSE_EPARSE;
		if (rc != want_rc)
			fail_msg("\"%s\": status %d, want %d", r->text, rc, want_rc);
		if (r->verdict == REFUSED) {
			if (v != 12345)
				fail_msg("\"%s\": refused but wrote %g", r->text, v);
			continue;
		}
		bool same = isnan(r->want) ? isnan(v) : v == r->want && signbit(v) == signbit(r->want);
		if (!same)
			fail_msg("\"%s\": got %.17g, want %.17g", r->text, v, r->want);
	}
}

/* Long mantissas read exactly as strtod reads them (correctly rounded). */
static void test_go_parse_float_long(void **state)
{
	(void)state;
	char text[1100] = "0.";
	memset(text + 2, '0', 1000);
	strcpy(text + 1002, "1e1001");
	double v = 0;
	assert_int_equal(gofloat_parse(text, &v), 0);
	assert_true(v == 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_go_parse_float_table),
		cmocka_unit_test(test_go_parse_float_long),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
