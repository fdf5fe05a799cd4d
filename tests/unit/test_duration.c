/* Prometheus durations (common/duration.c) against the rules of
 * Prometheus's model.ParseDuration (prometheus/common model/time.go and
 * the cases of its time_test.go): units y w d h m s ms, 1y = 365d,
 * 1w = 7d, each unit once and largest first, "0" alone without a unit,
 * overflow past int64 nanoseconds refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/duration.h"
#include "common/status.h"

#define MS 1000000LL
#define S (1000 * MS)
#define M (60 * S)
#define H (60 * M)
#define D (24 * H)
#define W (7 * D)
#define Y (365 * D)

static void test_valid(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int64_t ns;
	} ok[] = {
		{"0", 0},
		{"0w", 0},
		{"0s", 0},
		{"324ms", 324 * MS},
		{"3s", 3 * S},
		{"5m", 5 * M},
		{"1h", H},
		{"1h30m", H + 30 * M},
		{"4d", 4 * D},
		{"4d1h", 4 * D + H},
		{"14d", 14 * D},
		{"3w", 3 * W},
		{"1w4d", W + 4 * D},
		{"10y", 10 * Y},
		{"1y", Y},
		{"1d", D},
		{"1w", W},
		{"1y1w1d1h1m1s1ms", Y + W + D + H + M + S + MS},
		{"292y", 292 * Y},  /* the largest whole number of years that fits */
		{"9223372036854ms", 9223372036854 * MS},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		int64_t ns = -1;
		char err[128] = "";
		int rc = duration_parse(ok[i].s, strlen(ok[i].s), &ns, err, sizeof err);
		if (rc != 0 || ns != ok[i].ns)
			fail_msg("\"%s\": rc %d (%s), %lld ns, want %lld", ok[i].s, rc, err,
				 (long long)ns, (long long)ok[i].ns);
	}
	/* The length bounds the text: what follows is not read. */
	int64_t ns = 0;
	assert_int_equal(duration_parse("5m30s", 2, &ns, NULL, 0), 0);
	assert_true(ns == 5 * M);
}

static void test_invalid(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int rc;
		const char *err;
	} bad[] = {
		{"", GPULSE_EPARSE, "empty duration string"},
		{"1", GPULSE_EPARSE, "not a valid duration string: \"1\""},
		{"d", GPULSE_EPARSE, "not a valid duration string: \"d\""},
		{"-1w", GPULSE_EPARSE, "not a valid duration string: \"-1w\""},
		{"+1s", GPULSE_EPARSE, "not a valid duration string: \"+1s\""},
		{"1.5d", GPULSE_EPARSE, "unknown unit \".\" in duration \"1.5d\""},
		{"5q", GPULSE_EPARSE, "unknown unit \"q\" in duration \"5q\""},
		{"1us", GPULSE_EPARSE, "unknown unit \"us\" in duration \"1us\""},
		{"1h ", GPULSE_EPARSE, "unknown unit \"h \" in duration \"1h \""},
		{"1 h", GPULSE_EPARSE, "unknown unit \" h\" in duration \"1 h\""},
		{"1y1m1d", GPULSE_EPARSE, "not a valid duration string: \"1y1m1d\""},
		{"5m1h", GPULSE_EPARSE, "not a valid duration string: \"5m1h\""},
		{"1w1y", GPULSE_EPARSE, "not a valid duration string: \"1w1y\""},
		{"1s1s", GPULSE_EPARSE, "not a valid duration string: \"1s1s\""},
		{"1ms1s", GPULSE_EPARSE, "not a valid duration string: \"1ms1s\""},
		{"294y", GPULSE_ERANGE, "duration out of range"},
		{"200y10400w", GPULSE_ERANGE, "duration out of range"},
		{"107675d", GPULSE_ERANGE, "duration out of range"},
		{"2584200h", GPULSE_ERANGE, "duration out of range"},
		{"99999999999999999999ms", GPULSE_ERANGE, "duration out of range"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int64_t ns = -42;
		char err[128] = "";
		int rc = duration_parse(bad[i].s, strlen(bad[i].s), &ns, err, sizeof err);
		if (rc != bad[i].rc || strcmp(err, bad[i].err) != 0 || ns != -42)
			fail_msg("\"%s\": rc %d \"%s\" (ns %lld), want rc %d \"%s\"", bad[i].s, rc, err,
				 (long long)ns, bad[i].rc, bad[i].err);
	}
	/* No message buffer: the verdict alone. */
	int64_t ns;
	assert_int_equal(duration_parse("5m1h", 4, &ns, NULL, 0), GPULSE_EPARSE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_invalid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
