/* Prometheus durations; see duration.h. Hand-written: no library parses
 * Prometheus's duration syntax, and it is a dozen lines. */
#include "common/duration.h"

#include <stdbool.h>
#include <string.h>

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
