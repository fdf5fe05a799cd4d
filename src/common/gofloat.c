/* Go's strconv float text; see gofloat.h. Hand-written: the C library
 * prints a given precision, not the shortest one that round-trips, and
 * lays it out by C's %g rules, not Go's. */
#include "gofloat.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "status.h"
#include "xalloc.h"

/* The shortest decimal digits of a (finite, > 0) that strtod reads back
 * as a: digits d[0..nd) with a = 0.d1d2... x 10^dp. For each precision p
 * the correctly rounded p digits are tried, then the p-digit neighbour on
 * the other side of a: at a power of two the doubles below are twice as
 * dense as those above, so the interval that reads back as a reaches
 * twice as far up as down and the farther neighbour may read back where
 * the nearer does not (2^-1017 is "7.120236347223045e-307", 16 digits,
 * where rounding to 16 digits gives ...044 which does not read back).
 * Go takes such digits too (its shortest is over the whole interval). */
static int shortest_digits(double a, char d[24], int *dp)
{
	char s[48];
	uint64_t m = 0;
	int e10 = 0, p = 1;
	for (; p <= 17; p++) {
		snprintf(s, sizeof s, "%.*e", p - 1, a);
		char *end;
		double r = strtod(s, &end);
		/* s is d.ddde[+-]xx: the mantissa's digits as an integer. */
		m = 0;
		const char *q = s;
		for (; *q && *q != 'e'; q++)
			if (*q >= '0' && *q <= '9')
				m = m * 10 + (uint64_t)(*q - '0');
		e10 = atoi(q + 1);
		if (r == a)
			break;
		uint64_t lo = 1, hi;
		for (int i = 1; i < p; i++)
			lo *= 10;
		hi = lo * 10;
		uint64_t m2 = m;
		int e2 = e10;
		if (r < a && ++m2 == hi) {
			m2 = lo;
			e2++;
		} else if (r > a && m2-- == lo) {
			m2 = hi - 1;
			e2--;
		}
		snprintf(s, sizeof s, "%llue%d", (unsigned long long)m2, e2 - (p - 1));
		if (strtod(s, NULL) == a) {
			m = m2;
			e10 = e2;
			break;
		}
	}
	/* 17 digits always read back; p > 17 cannot happen. */
	int nd = snprintf(d, 24, "%llu", (unsigned long long)m);
	while (nd > 1 && d[nd - 1] == '0')
		nd--;
	d[nd] = '\0';
	*dp = e10 + 1;
	return nd;
}

static void put_e(struct buf *b, const char *d, int nd, int dp, char echar)
{
	buf_putc(b, d[0]);
	if (nd > 1) {
		buf_putc(b, '.');
		buf_append(b, d + 1, (size_t)nd - 1);
	}
	int exp = nd ? dp - 1 : 0;
	buf_printf(b, "%c%c%02d", echar, exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
}

static void put_f(struct buf *b, const char *d, int nd, int dp)
{
	if (dp <= 0) {
		buf_putc(b, '0');
		if (nd == 0)
			return;
		buf_putc(b, '.');
		for (int i = 0; i < -dp; i++)
			buf_putc(b, '0');
		buf_append(b, d, (size_t)nd);
	} else if (dp >= nd) {
		buf_append(b, d, (size_t)nd);
		for (int i = nd; i < dp; i++)
			buf_putc(b, '0');
	} else {
		buf_append(b, d, (size_t)dp);
		buf_putc(b, '.');
		buf_append(b, d + dp, (size_t)(nd - dp));
	}
}

int gofloat_put(struct buf *b, double v, char fmt)
{
	if (fmt != 'e' && fmt != 'E' && fmt != 'f' && fmt != 'g')
		return GPULSE_EINVAL;
	if (isnan(v))
		return buf_puts(b, "NaN");
	if (isinf(v))
		return buf_puts(b, v > 0 ? "+Inf" : "-Inf");
	char d[24] = "0";
	int nd = 0, dp = 0; /* zero: no digits, as Go's decimal holds it */
	if (v != 0)
		nd = shortest_digits(fabs(v), d, &dp);
	if (signbit(v))
		buf_putc(b, '-');
	if (fmt == 'g') {
		int exp = dp - 1;
		fmt = nd && (exp < -4 || exp >= 6) ? 'e' : 'f';
	}
	if (fmt == 'f')
		put_f(b, d, nd, dp);
	else
		put_e(b, d, nd, dp, fmt);
	return b->failed ? GPULSE_ELIMIT : 0;
}

int gofloat_put_sample(struct buf *b, double v)
{
	double a = fabs(v);
	return gofloat_put(b, v, a != 0 && (a < 1e-6 || a >= 1e21) ? 'e' : 'f');
}

/* ---- reading: strconv.ParseFloat ----------------------------------- */

/* Go's strconv.ParseFloat(s, 64) acceptance, written out because strtod
 * differs at the edges that matter: it skips leading spaces, reads "0x10"
 * without an exponent, refuses "1_000", and gives ERANGE for underflow,
 * which Go accepts. The syntax is checked here as Go's readFloat and
 * underscoreOK check it; the conversion itself is strtod's (correctly
 * rounded in glibc, as Go's is). */
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

int gofloat_parse(const char *s, double *out)
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

int64_t gofloat_to_int64(double v)
{
	return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}
