/* Prometheus durations; see duration.h. Hand-written: no library parses
 * Prometheus's duration syntax, and it is a dozen lines. */
#include "common/duration.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/status.h"
#include "common/str.h"

static const struct {
	const char *unit;
	uint64_t ns;
} units[] = {
	/* Largest first: the order a duration must use them in. */
	{"y", 365ULL * 86400 * 1000000000},
	{"w", 7ULL * 86400 * 1000000000},
	{"d", 86400ULL * 1000000000},
	{"h", 3600ULL * 1000000000},
	{"m", 60ULL * 1000000000},
	{"s", 1000000000},
	{"ms", 1000000},
};
#define NUNITS (sizeof units / sizeof units[0])

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

int duration_parse(const char *s, size_t len, int64_t *ns, char *err, size_t errlen)
{
	if (len == 1 && s[0] == '0') { /* the one number without a unit */
		*ns = 0;
		return 0;
	}
	if (len == 0) {
		str_errf(err, errlen, "empty duration string");
		return GPULSE_EPARSE;
	}
	int show = len > 64 ? 64 : (int)len; /* a message shows at most so much */
	uint64_t total = 0;
	size_t i = 0, next_unit = 0;
	bool range = false;
	while (i < len) {
		if (!is_digit(s[i])) {
			str_errf(err, errlen, "not a valid duration string: \"%.*s\"", show, s);
			return GPULSE_EPARSE;
		}
		uint64_t v = 0;
		for (; i < len && is_digit(s[i]); i++) {
			if (v > (UINT64_MAX - 9) / 10)
				range = true; /* still read on: a bad unit is the worse news */
			else
				v = v * 10 + (uint64_t)(s[i] - '0');
		}
		size_t u0 = i;
		while (i < len && !is_digit(s[i]))
			i++;
		if (i == u0) {
			str_errf(err, errlen, "not a valid duration string: \"%.*s\"", show, s);
			return GPULSE_EPARSE;
		}
		size_t u = 0;
		while (u < NUNITS && !(strlen(units[u].unit) == i - u0 &&
				       memcmp(units[u].unit, s + u0, i - u0) == 0))
			u++;
		if (u == NUNITS) {
			int ulen = i - u0 > 16 ? 16 : (int)(i - u0);
			str_errf(err, errlen, "unknown unit \"%.*s\" in duration \"%.*s\"", ulen, s + u0,
				 show, s);
			return GPULSE_EPARSE;
		}
		if (u < next_unit) {
			str_errf(err, errlen, "not a valid duration string: \"%.*s\"", show, s);
			return GPULSE_EPARSE;
		}
		next_unit = u + 1;
		if (range || v > (uint64_t)INT64_MAX / units[u].ns ||
		    total + v * units[u].ns > (uint64_t)INT64_MAX)
			range = true;
		else
			total += v * units[u].ns;
	}
	if (range) {
		str_errf(err, errlen, "duration out of range");
		return GPULSE_ERANGE;
	}
	*ns = (int64_t)total;
	return 0;
}

/* A bare number of seconds: digits, optionally a point and up to nine
 * more (nanosecond resolution). */
static int parse_seconds(const char *s, int64_t *ns)
{
	int64_t whole = 0, frac = 0;
	const char *p = s;
	if (!is_digit(*p) && !(*p == '.' && is_digit(p[1])))
		return GPULSE_EINVAL;
	for (; is_digit(*p); p++) {
		if (whole > (INT64_MAX / NS_PER_SEC) / 10)
			return GPULSE_ERANGE;
		whole = whole * 10 + (*p - '0');
	}
	if (whole > INT64_MAX / NS_PER_SEC)
		return GPULSE_ERANGE;
	if (*p == '.') {
		p++;
		if (!is_digit(*p))
			return GPULSE_EINVAL;
		int64_t scale = NS_PER_SEC / 10;
		for (; is_digit(*p); p++) {
			frac += (*p - '0') * scale; /* digits past 1 ns are dropped */
			scale /= 10;
		}
	}
	if (*p)
		return GPULSE_EINVAL;
	int64_t total = whole * NS_PER_SEC;
	if (total > INT64_MAX - frac)
		return GPULSE_ERANGE;
	*ns = total + frac;
	return 0;
}

int duration_parse_arg(const char *s, int64_t *ns)
{
	if (!s || !*s)
		return GPULSE_EINVAL;
	bool all_number = true;
	for (const char *p = s; *p; p++)
		if (!is_digit(*p) && *p != '.')
			all_number = false;
	if (all_number)
		return parse_seconds(s, ns);

	int rc = duration_parse(s, strlen(s), ns, NULL, 0);
	return rc == GPULSE_ERANGE ? GPULSE_ERANGE : rc ? GPULSE_EINVAL : 0;
}

void duration_format(int64_t ns, char *out, size_t outlen)
{
	if (outlen == 0)
		return;
	if (ns == 0) {
		snprintf(out, outlen, "0s");
		return;
	}
	if (ns < 0) {
		/* Never valid, but a message may still need to show one. */
		out[0] = '-';
		if (outlen > 1)
			duration_format(ns == INT64_MIN ? INT64_MAX : -ns, out + 1, outlen - 1);
		else
			out[0] = '\0';
		return;
	}
	if (ns % NS_PER_MS != 0) {
		/* Finer than the smallest unit: seconds with a fraction. */
		char digits[16];
		snprintf(digits, sizeof digits, "%09lld", (long long)(ns % NS_PER_SEC));
		for (int i = 8; i > 0 && digits[i] == '0'; i--)
			digits[i] = '\0';
		snprintf(out, outlen, "%lld.%s", (long long)(ns / NS_PER_SEC), digits);
		return;
	}
	size_t used = 0;
	out[0] = '\0';
	int64_t left = ns;
	for (int u = 0; u < (int)NUNITS && left > 0; u++) {
		int64_t n = left / (int64_t)units[u].ns;
		/* Weeks only when they take the whole day count: 30d reads as
		 * 30d, not 4w2d (both parse to the same value). */
		if (n == 0 || ((int64_t)units[u].ns == 7LL * 86400 * NS_PER_SEC &&
			       (left / (86400LL * NS_PER_SEC)) % 7 != 0))
			continue;
		left -= n * (int64_t)units[u].ns;
		int w = snprintf(out + used, outlen - used, "%lld%s", (long long)n,
				 units[u].unit);
		if (w < 0 || (size_t)w >= outlen - used)
			return;
		used += (size_t)w;
	}
}
