/* The query API's parameter parsing and time formatting, as Prometheus's
 * web/api/v1 does them: Unix seconds with a fraction rounded to the
 * millisecond, RFC 3339 with offsets, steps as seconds or durations, and
 * times written back as seconds with at most three decimals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "api/query.h"
#include "common/buf.h"
#include "common/status.h"

static int64_t t_of(const char *s)
{
	int64_t t = -1;
	if (api_parse_time(s, &t) != 0)
		fail_msg("\"%s\" did not parse", s);
	return t;
}

static void test_parse_time(void **state)
{
	(void)state;
	assert_int_equal(t_of("1700000000"), 1700000000000LL);
	assert_int_equal(t_of("1700000000.123"), 1700000000123LL);
	assert_int_equal(t_of("1700000000.1235"), 1700000000124LL);
	assert_int_equal(t_of("-1.5"), -1500);
	assert_int_equal(t_of("1e9"), 1000000000000LL);
	assert_int_equal(t_of("2023-11-14T22:13:20Z"), 1700000000000LL);
	assert_int_equal(t_of("2023-11-14T22:13:20.123Z"), 1700000000123LL);
	assert_int_equal(t_of("2023-11-14T22:13:20.1239Z"), 1700000000123LL);
	assert_int_equal(t_of("2023-11-15T00:13:20+02:00"), 1700000000000LL);
	assert_int_equal(t_of("2023-11-14T21:13:20.5-01:00"), 1700000000500LL);
	const char *bad[] = {"", "now", "1700000000x", "NaN", "inf", "2023-11-14", "2023-11-14T22:13:20",
			     "2023-13-14T22:13:20Z", "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20Zjunk"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int64_t t;
		if (api_parse_time(bad[i], &t) == 0)
			fail_msg("\"%s\" parsed", bad[i]);
	}
	int64_t t;
	assert_int_not_equal(api_parse_time(NULL, &t), 0);
}

static void test_parse_duration(void **state)
{
	(void)state;
	int64_t ms;
	assert_int_equal(api_parse_duration("15", &ms), 0);
	assert_int_equal(ms, 15000);
	assert_int_equal(api_parse_duration("0.5", &ms), 0);
	assert_int_equal(ms, 500);
	assert_int_equal(api_parse_duration("15s", &ms), 0);
	assert_int_equal(ms, 15000);
	assert_int_equal(api_parse_duration("1m30s", &ms), 0);
	assert_int_equal(ms, 90000);
	assert_int_equal(api_parse_duration("250ms", &ms), 0);
	assert_int_equal(ms, 250);
	assert_int_not_equal(api_parse_duration("", &ms), 0);
	assert_int_not_equal(api_parse_duration("fast", &ms), 0);
	assert_int_not_equal(api_parse_duration(NULL, &ms), 0);
}

static void test_put_time(void **state)
{
	(void)state;
	static const struct {
		int64_t t;
		const char *want;
	} cases[] = {
		{1700000000000LL, "1700000000"}, {1700000000123LL, "1700000000.123"},
		{1700000000120LL, "1700000000.12"}, {1700000000100LL, "1700000000.1"},
		{1700000000001LL, "1700000000.001"}, {0, "0"}, {-1500, "-1.5"}, {5, "0.005"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct buf b;
		buf_init(&b, 256);
		assert_int_equal(api_put_time(&b, cases[i].t), 0);
		assert_int_equal(buf_putc(&b, '\0'), 0);
		assert_string_equal(b.data, cases[i].want);
		buf_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_time),
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_put_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
