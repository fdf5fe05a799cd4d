/* Go's strconv.ParseFloat(s, 64) acceptance, written out because strtod
 * differs at the edges that matter: it skips leading spaces, reads "0x10"
 * without an exponent, refuses "1_000", and gives ERANGE for underflow,
 * which Go accepts. The syntax is checked here as Go's readFloat and
 * underscoreOK check it; the conversion itself is strtod's (correctly
 * rounded in glibc, as Go's is). */
#include "gofloat.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "status.h"
#include "xalloc.h"

static bool is_digit(char c, bool hex)
{
	char l = (char)(c | 0x20);
	return (c >= '0' && c <= '9') || (hex && l >= 'a' && l <= 'f');
}

/* Go's special(): "Inf" or "Infinity" in any case with an optional sign,
 * "NaN" in any case without one. */
static bool special(const char *s, double *out)
{
	const char *p = s;
	double sign = 1;
	if (*p == '+' || *p == '-')
		sign = *p++ == '-' ? -1 : 1;
	if (strcasecmp(p, "inf") == 0 || strcasecmp(p, "infinity") == 0) {
		*out = sign * INFINITY;
		return true;
	}
	if (p == s && strcasecmp(p, "nan") == 0) {
		*out = NAN;
		return true;
	}
	return false;
}

/* Go's underscoreOK: an underscore only between two digits, or between a
 * base prefix and a digit. */
static bool underscore_ok(const char *s)
{
	char saw = '^';
	if (*s == '+' || *s == '-')
		s++;
	bool hex = false;
	size_t i = 0;
	if (s[0] == '0' && s[1] && strchr("bBoOxX", s[1])) {
		i = 2;
		saw = '0';
		hex = (s[1] | 0x20) == 'x';
	}
	for (; s[i]; i++) {
		if (is_digit(s[i], hex)) {
			saw = '0';
			continue;
		}
		if (s[i] == '_') {
			if (saw != '0')
				return false;
			saw = '_';
			continue;
		}
		if (saw == '_')
			return false;
		saw = '!';
	}
	return saw != '_';
}

/* Go's readFloat, for the whole of s. */
static bool well_formed(const char *s)
{
	size_t i = 0;
	if (s[i] == '+' || s[i] == '-')
		i++;
	bool hex = false;
	if (s[i] == '0' && (s[i + 1] | 0x20) == 'x' && s[i + 2]) {
		hex = true;
		i += 2;
	}
	bool sawdot = false, sawdigits = false, underscores = false;
	for (; s[i]; i++) {
		if (s[i] == '_') {
			underscores = true;
		} else if (s[i] == '.') {
			if (sawdot)
				break;
			sawdot = true;
		} else if (is_digit(s[i], hex)) {
			sawdigits = true;
		} else {
			break;
		}
	}
	if (!sawdigits)
		return false;
	if ((s[i] | 0x20) == (hex ? 'p' : 'e')) {
		i++;
		if (s[i] == '+' || s[i] == '-')
			i++;
		if (s[i] < '0' || s[i] > '9')
			return false;
		for (; (s[i] >= '0' && s[i] <= '9') || s[i] == '_'; i++)
			underscores = underscores || s[i] == '_';
	} else if (hex) {
		return false; /* a hexadecimal mantissa needs its 'p' exponent */
	}
	return s[i] == '\0' && (!underscores || underscore_ok(s));
}

int promql_parse_go_float(const char *s, double *out)
{
	if (special(s, out))
		return 0;
	if (!well_formed(s))
		return GPULSE_EPARSE;
	/* strtod with the underscores taken out. */
	size_t len = strlen(s);
	char *digits = xmalloc(len + 1), *d = digits;
	for (const char *p = s; *p; p++)
		if (*p != '_')
			*d++ = *p;
	*d = '\0';
	errno = 0;
	double v = strtod(digits, &d);
	int rc = *d == '\0' ? 0 : GPULSE_EPARSE;
	free(digits);
	if (rc != 0)
		return rc;
	*out = v;
	/* Go refuses overflow (±Inf with ErrRange) but accepts underflow to
	 * a subnormal or zero; strtod says ERANGE for both. */
	return errno == ERANGE && isinf(v) ? GPULSE_ERANGE : 0;
}
