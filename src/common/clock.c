/* Clock helpers; see clock.h. */
#include "common/clock.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <time.h>

#include "common/status.h"

static int64_t clock_read(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

int64_t clock_mono_ns(void)
{
	return clock_read(CLOCK_MONOTONIC);
}

int64_t clock_wall_ns(void)
{
	return clock_read(CLOCK_REALTIME);
}

int64_t clock_wall_ms(const struct clock_wall *c)
{
	if (c && c->now_ms)
		return c->now_ms(c->ctx);
	return clock_wall_ns() / NS_PER_MS;
}

int64_t clock_process_cpu_ns(void)
{
	return clock_read(CLOCK_PROCESS_CPUTIME_ID);
}

int64_t clock_thread_cpu_ns(void)
{
	return clock_read(CLOCK_THREAD_CPUTIME_ID);
}

/* Relative sleeps, recomputed from the monotonic clock after each wake,
 * rather than one absolute clock_nanosleep: the same on Linux, but the
 * tests move the wall clock with libfaketime, which shifts absolute
 * monotonic deadlines by its offset as if they were wall-clock ones. */
void clock_sleep_until(int64_t deadline_ns)
{
	for (int64_t left; (left = deadline_ns - clock_mono_ns()) > 0;) {
		struct timespec ts = {.tv_sec = left / NS_PER_SEC, .tv_nsec = left % NS_PER_SEC};
		nanosleep(&ts, NULL);
	}
}

/* ---- RFC 3339 ---- */

static int two_digits(const char *p, int *v)
{
	if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]))
		return -1;
	*v = (p[0] - '0') * 10 + (p[1] - '0');
	return 0;
}

int clock_parse_rfc3339(const char *s, int64_t *t_ms)
{
	int y = 0, mo, d, h, mi, se;
	for (int i = 0; i < 4; i++) {
		if (!isdigit((unsigned char)s[i]))
			return GPULSE_EINVAL;
		y = y * 10 + (s[i] - '0');
	}
	if (s[4] != '-' || two_digits(s + 5, &mo) || s[7] != '-' || two_digits(s + 8, &d) ||
	    (s[10] != 'T' && s[10] != 't') || two_digits(s + 11, &h) || s[13] != ':' ||
	    two_digits(s + 14, &mi) || s[16] != ':' || two_digits(s + 17, &se))
		return GPULSE_EINVAL;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return GPULSE_EINVAL;
	const char *p = s + 19;
	int64_t frac_ms = 0;
	if (*p == '.') {
		p++;
		int digits = 0;
		double scale = 100;
		double frac = 0;
		while (isdigit((unsigned char)*p)) {
			frac += (*p - '0') * scale;
			scale /= 10;
			p++;
			digits++;
		}
		if (!digits)
			return GPULSE_EINVAL;
		frac_ms = (int64_t)floor(frac + 1e-9); /* time.Time truncates to ms */
	}
	int64_t off_s = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om;
		if (two_digits(p + 1, &oh) || p[3] != ':' || two_digits(p + 4, &om) || oh > 23 ||
		    om > 59)
			return GPULSE_EINVAL;
		off_s = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return GPULSE_EINVAL;
	}
	if (*p)
		return GPULSE_EINVAL;
	struct tm tm = {.tm_year = y - 1900,
			.tm_mon = mo - 1,
			.tm_mday = d,
			.tm_hour = h,
			.tm_min = mi,
			.tm_sec = se};
	time_t t = timegm(&tm);
	*t_ms = ((int64_t)t - off_s) * 1000 + frac_ms;
	return GPULSE_OK;
}
