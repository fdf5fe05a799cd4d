/* The rate-limited complaint helper (src/common/log.c) against an injected
 * monotonic clock: the first report out, the next ones counted, a report
 * after the back-off carrying the count, the back-off doubling up to a
 * day, and complaint_clear resetting it. stderr goes to a temporary file
 * that each test reads back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

#define S 1000000000LL

static FILE *capture;
static int saved_stderr = -1;

static int setup(void **state)
{
	(void)state;
	fflush(stderr);
	capture = tmpfile();
	if (!capture)
		return -1;
	saved_stderr = dup(STDERR_FILENO);
	if (saved_stderr < 0 || dup2(fileno(capture), STDERR_FILENO) < 0)
		return -1;
	log_set_level(LOG_INFO);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	/* Everything captured (cmocka's failure messages among it) is shown
	 * once the real stderr is back. */
	char buf[4096];
	size_t n;
	rewind(capture);
	while ((n = fread(buf, 1, sizeof buf, capture)) > 0)
		fwrite(buf, 1, n, stderr);
	fclose(capture);
	return 0;
}

/* What was logged since the last call, one string (static storage). */
static const char *logged(void)
{
	static char buf[8192];
	static long at;
	fflush(stderr);
	fseek(capture, at, SEEK_SET);
	size_t n = fread(buf, 1, sizeof buf - 1, capture);
	buf[n] = '\0';
	at += (long)n;
	return buf;
}

static unsigned lines(const char *s)
{
	unsigned n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void assert_matches(const char *s, const char *re)
{
	regex_t r;
	assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
	int rc = regexec(&r, s, 0, NULL, 0);
	regfree(&r);
	if (rc != 0)
		fail_msg("\"%s\" does not match /%s/", s, re);
}

static void test_first_then_suppressed_then_counted(void **state)
{
	(void)state;
	logged();
	struct complaint c = {0};
	int64_t t = 1000 * S;
	assert_true(complain_at(&c, t, "disk %d failed", 1));
	const char *out = logged();
	assert_int_equal(lines(out), 1);
	assert_matches(out, "^gpulse: warning: disk 1 failed\n$");

	/* 1999 more within the first back-off: none printed, all counted. */
	for (int i = 0; i < 1999; i++)
		assert_false(complain_at(&c, t + i * (COMPLAINT_FIRST_NS / 2000), "disk %d failed", 1));
	assert_string_equal(logged(), "");
	assert_int_equal(c.suppressed, 1999);

	/* At the end of the back-off: printed with the count and the time of
	 * the previous report. */
	assert_true(complain_at(&c, t + COMPLAINT_FIRST_NS, "disk %d failed", 2));
	out = logged();
	assert_int_equal(lines(out), 1);
	assert_matches(out, "^gpulse: warning: disk 2 failed \\(and 1999 more like it since "
		       "[0-9]{2}:[0-9]{2}:[0-9]{2}\\)\n$");
	assert_int_equal(c.suppressed, 0);

	/* The next one out after a quiet spell says no count. */
	assert_true(complain_at(&c, t + 100 * S, "disk %d failed", 3));
	assert_matches(logged(), "^gpulse: warning: disk 3 failed\n$");
}

static void test_backoff_doubles_to_a_day(void **state)
{
	(void)state;
	logged();
	struct complaint c = {0};
	int64_t t = 5 * S;
	assert_true(complain_at(&c, t, "x"));
	int64_t want = COMPLAINT_FIRST_NS;
	unsigned printed = 1;
	for (int i = 0; i < 30; i++) {
		assert_int_equal(c.interval_ns, want);
		/* Just before the back-off ends: quiet. */
		assert_false(complain_at(&c, t + want - 1, "x"));
		t += want;
		assert_true(complain_at(&c, t, "x"));
		printed++;
		want = want * 2 > COMPLAINT_MAX_NS ? COMPLAINT_MAX_NS : want * 2;
	}
	assert_int_equal(c.interval_ns, COMPLAINT_MAX_NS);
	assert_int_equal(COMPLAINT_MAX_NS, 86400 * S);
	const char *out = logged();
	assert_int_equal(lines(out), printed);
	assert_non_null(strstr(out, "x (and 1 more like it since "));
}

static void test_clear_resets(void **state)
{
	(void)state;
	logged();
	struct complaint c = {0};
	/* Clearing what was never reported says nothing. */
	complaint_clear(&c, "back");
	assert_string_equal(logged(), "");

	int64_t t = 7 * S;
	assert_true(complain_at(&c, t, "down"));
	assert_true(complain_at(&c, t + COMPLAINT_FIRST_NS, "down"));
	assert_int_equal(c.interval_ns, 2 * COMPLAINT_FIRST_NS);
	assert_false(complain_at(&c, t + COMPLAINT_FIRST_NS + 1, "down"));
	logged();

	complaint_clear(&c, "up again");
	assert_matches(logged(), "^gpulse: info: up again \\(1 more complaints since "
		       "[0-9:]{8} went unreported\\)\n$");
	assert_int_equal(c.interval_ns, 0);
	assert_int_equal(c.suppressed, 0);
	complaint_clear(&c, "up again");
	assert_string_equal(logged(), "");

	/* After the reset the next failure is reported at once, and the
	 * back-off starts from the first interval again. */
	assert_true(complain_at(&c, t + COMPLAINT_FIRST_NS + 2, "down"));
	assert_int_equal(c.interval_ns, COMPLAINT_FIRST_NS);
	assert_matches(logged(), "^gpulse: warning: down\n$");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_then_suppressed_then_counted),
		cmocka_unit_test(test_backoff_doubles_to_a_day),
		cmocka_unit_test(test_clear_resets),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
