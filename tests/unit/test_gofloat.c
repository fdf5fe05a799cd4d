/* Go's strconv.FormatFloat(v, fmt, -1, 64) (src/common/gofloat.c). The
 * expected strings follow Go's documented algorithm: the shortest digits
 * that read back to the same double (the closest when several are as
 * short), then 'e' (d.ddde+XX, two exponent digits at least), 'f' (no
 * exponent) or 'g' (exponent below -4 or from 6 on, as shortest %g). */
#include <math.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/gofloat.h"
#include "common/status.h"

struct row {
	double v;
	const char *e, *f, *g, *sample;
};

static const struct row rows[] = {
	{0.0, "0e+00", "0", "0", "0"},
	{-0.0, "-0e+00", "-0", "-0", "-0"},
	{1, "1e+00", "1", "1", "1"},
	{-1.5, "-1.5e+00", "-1.5", "-1.5", "-1.5"},
	{0.1, "1e-01", "0.1", "0.1", "0.1"},
	{100, "1e+02", "100", "100", "100"},
	{123456, "1.23456e+05", "123456", "123456", "123456"},
	{1e6, "1e+06", "1000000", "1e+06", "1000000"},
	{0.0001, "1e-04", "0.0001", "0.0001", "0.0001"},
	{0.00001, "1e-05", "0.00001", "1e-05", "0.00001"},
	/* The API's cut-offs: 1e-6 itself is 'f', 1e21 itself 'e'. */
	{1e-6, "1e-06", "0.000001", "1e-06", "0.000001"},
	{9.99999e-7, "9.99999e-07", "0.000000999999", "9.99999e-07", "9.99999e-07"},
	{5.62181803979911e-07, "5.62181803979911e-07", "0.000000562181803979911",
	 "5.62181803979911e-07", "5.62181803979911e-07"},
	{1e21, "1e+21", "1000000000000000000000", "1e+21", "1e+21"},
	{-1e21, "-1e+21", "-1000000000000000000000", "-1e+21", "-1e+21"},
	{9.99999e20, "9.99999e+20", "999999000000000000000", "9.99999e+20",
	 "999999000000000000000"},
	/* 17 significant digits, the last rounded: 123456789012345678 reads
	 * as this double, whose shortest digits end in 68. */
	{123456789012345680000.0, "1.2345678901234568e+20", "123456789012345680000",
	 "1.2345678901234568e+20", "123456789012345680000"},
	{0.30000000000000004, "3.0000000000000004e-01", "0.30000000000000004",
	 "0.30000000000000004", "0.30000000000000004"},
	{1.7976931348623157e308, "1.7976931348623157e+308", NULL, "1.7976931348623157e+308",
	 "1.7976931348623157e+308"},
	/* The smallest normal double, the largest subnormal, the smallest
	 * subnormal (one digit is enough: 5e-324 reads back as 2^-1074). */
	{2.2250738585072014e-308, "2.2250738585072014e-308", NULL, "2.2250738585072014e-308",
	 "2.2250738585072014e-308"},
	{2.225073858507201e-308, "2.225073858507201e-308", NULL, "2.225073858507201e-308",
	 "2.225073858507201e-308"},
	{4.9406564584124654e-324, "5e-324", NULL, "5e-324", "5e-324"},
	{-4.9406564584124654e-324, "-5e-324", NULL, "-5e-324", "-5e-324"},
	/* 2^-1017: rounding to 16 digits gives ...044e-307, which reads back
	 * as another double; ...045e-307, above, is within half the gap to
	 * the next double up (twice the gap below, at a power of two) and
	 * reads back: 16 digits, not the 17 of ...0444e-307. */
	{0x1p-1017, "7.120236347223045e-307", NULL, "7.120236347223045e-307",
	 "7.120236347223045e-307"},
	{NAN, "NaN", "NaN", "NaN", "NaN"},
	{INFINITY, "+Inf", "+Inf", "+Inf", "+Inf"},
	{-INFINITY, "-Inf", "-Inf", "-Inf", "-Inf"},
};

static void check(double v, char fmt, const char *want)
{
	struct buf b;
	buf_init(&b, 4096);
	int rc = fmt == 's' ? gofloat_put_sample(&b, v) : gofloat_put(&b, v, fmt);
	assert_int_equal(rc, 0);
	if (strcmp(b.data, want) != 0)
		fail_msg("%.17g as '%c': \"%s\", want \"%s\"", v, fmt, b.data, want);
	/* What is written reads back as v. */
	if (!isnan(v))
		assert_true(strtod(b.data, NULL) == v || (isinf(v) && isinf(strtod(b.data + 1, NULL))));
	buf_free(&b);
}

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		check(r->v, 'e', r->e);
		if (r->f)
			check(r->v, 'f', r->f);
		check(r->v, 'g', r->g);
		check(r->v, 's', r->sample);
	}
}

/* 'f' of the extremes has no exponent: every digit is written. */
static void test_f_extremes(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 4096);
	assert_int_equal(gofloat_put(&b, 4.9406564584124654e-324, 'f'), 0);
	assert_int_equal(b.len, strlen("0.") + 323 + 1);
	assert_string_equal(b.data + b.len - 2, "05");
	buf_reset(&b);
	assert_int_equal(gofloat_put(&b, 1e308, 'f'), 0);
	assert_int_equal(b.len, 309);
	assert_true(b.data[0] == '1' && strspn(b.data + 1, "0") == 308);
	buf_free(&b);
}

static void test_upper_and_bad_fmt(void **state)
{
	(void)state;
	check(1e21, 'E', "1E+21");
	check(0.3, 'E', "3E-01");
	struct buf b;
	buf_init(&b, 64);
	assert_int_equal(gofloat_put(&b, 1, 'x'), GPULSE_EINVAL);
	buf_free(&b);
	/* A bound too small for the text fails, as every buf append. */
	buf_init(&b, 4);
	assert_int_equal(gofloat_put(&b, 1e21, 'f'), GPULSE_ELIMIT);
	buf_free(&b);
}

/* Every power of two: the digits are as short as any that read back. */
static void test_powers_of_two_round_trip(void **state)
{
	(void)state;
	for (int k = -1074; k <= 1023; k++) {
		double v = ldexp(1, k);
		struct buf b;
		buf_init(&b, 64);
		assert_int_equal(gofloat_put(&b, v, 'e'), 0);
		assert_true(strtod(b.data, NULL) == v);
		buf_free(&b);
	}
}

/* The exposition's layout (gofloat_format_cg): C's %g at the precision
 * the shortest digits need, at least 15; zero as client_golang writes it. */
static void test_cg_table(void **state)
{
	(void)state;
	static const struct {
		double v;
		const char *want;
	} cg_rows[] = {
		{0.1, "0.1"},
		{1e21, "1e+21"},
		{1e-7, "1e-07"},
		{1e-4, "0.0001"},
		{NAN, "NaN"},
		{INFINITY, "+Inf"},
		{-INFINITY, "-Inf"},
		{0.0, "0"},
		{-0.0, "0"},
		{5e-324, "5e-324"},
		{1e6, "1000000"},
		{81559191552, "81559191552"},
		{-1234567.5, "-1234567.5"},
		{1e15, "1e+15"},
		{999999999999999, "999999999999999"},
		{1e15 + 0.5, "1000000000000000.5"},
		{0.30000000000000004, "0.30000000000000004"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		/* Go's digits where %.16g's do not read back: 16, not 17. */
		{0x1p-1017, "7.120236347223045e-307"},
	};
	for (size_t i = 0; i < sizeof cg_rows / sizeof cg_rows[0]; i++) {
		char out[GOFLOAT_CG_MAX];
		size_t n = gofloat_format_cg(out, cg_rows[i].v);
		if (strcmp(out, cg_rows[i].want) != 0 || n != strlen(out))
			fail_msg("%.17g: \"%s\", want \"%s\"", cg_rows[i].v, out, cg_rows[i].want);
	}
}

/* Against glibc's printf: the first of %.15g, %.16g, %.17g that reads
 * back is the same text, except where Go's digits are shorter than the
 * 17 printf fell back to (the neighbour that reads back at a power of
 * two); those read back too, in 16 digits. Values from a fixed
 * xorshift sequence over every exponent. */
static void test_cg_against_printf(void **state)
{
	(void)state;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		double v;
		memcpy(&v, &x, sizeof v);
		if (!isfinite(v) || v == 0)
			continue;
		if (i % 4 == 0) /* short decimals too, where most gauges are */
			v = (double)(x % 100000) / 1000;
		char ref[40];
		int prec = 15;
		for (; prec <= 17; prec++) {
			snprintf(ref, sizeof ref, "%.*g", prec, v);
			if (strtod(ref, NULL) == v)
				break;
		}
		char out[GOFLOAT_CG_MAX];
		gofloat_format_cg(out, v);
		if (strcmp(out, ref) == 0)
			continue;
		if (prec != 17 || strtod(out, NULL) != v)
			fail_msg("%a: \"%s\", printf \"%s\"", v, out, ref);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cg_table),
		cmocka_unit_test(test_cg_against_printf),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_f_extremes),
		cmocka_unit_test(test_upper_and_bad_fmt),
		cmocka_unit_test(test_powers_of_two_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
