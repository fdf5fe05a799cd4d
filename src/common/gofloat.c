/* Go's strconv float text; see gofloat.h. Hand-written: the C library
 * prints a given precision, not the shortest one that round-trips, and
 * lays it out by C's %g rules, not Go's. */
#include "common/gofloat.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/status.h"
#include "common/xalloc.h"

/* The shortest decimal digits of a (finite, > 0) that strtod reads back
 * as a: digits d[0..nd) with a = 0.d1d2... x 10^dp. For each precision p
 * the correctly rounded p digits are tried, then the p-digit neighbour on
 * the other side of a: at a power of two the doubles below are twice as
 * dense as those above, so the interval that reads back as a reaches
 * twice as far up as down and the farther neighbour may read back where
 * the nearer does not (2^-1017 is "7.120236347223045e-307", 16 digits,
 * where rounding to 16 digits gives ...044 which does not read back).
 * Go takes such digits too (its shortest is over the whole interval).
 *
 * A normal double's search starts at 15 digits: its half-ulp is at most
 * 2^-53 of it, less than a tenth of the spacing of 15-digit decimals, so
 * any digits of 15 or fewer that read back are the 15-digit rounding
 * with zeros after them, which the trim below takes off. One or two
 * conversions instead of up to 17. A subnormal's digits are coarser
 * ("5e-324"): its search starts at one. */
static int shortest_digits(double a, char d[24], int *dp)
{
	char s[48];
	uint64_t m = 0;
	int e10 = 0, p = a >= DBL_MIN ? 15 : 1;
	/* Only at a power of two is the interval lopsided: elsewhere a
	 * neighbour farther than the rounded digits cannot read back. */
	uint64_t bits;
	memcpy(&bits, &a, sizeof bits);
	bool pow2 = (bits & ((1ULL << 52) - 1)) == 0;
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
		if (!pow2)
			continue;
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

/* The layouts write into o, which holds GOFLOAT_TEXT_MAX bytes: the
 * longest text is 'f' of a subnormal ("0.", 323 zeros, 17 digits). */
#define GOFLOAT_TEXT_MAX 400

/* d.ddd, then echar, the exponent's sign and at least two digits. */
static size_t lay_e(char *o, const char *d, int nd, int dp, char echar)
{
	size_t n = 0;
	o[n++] = d[0];
	if (nd > 1) {
		o[n++] = '.';
		memcpy(o + n, d + 1, (size_t)nd - 1);
		n += (size_t)nd - 1;
	}
	int exp = nd ? dp - 1 : 0;
	n += (size_t)snprintf(o + n, 8, "%c%c%02d", echar, exp < 0 ? '-' : '+',
			      exp < 0 ? -exp : exp);
	return n;
}

/* The digits with the point where dp puts it, no exponent. */
static size_t lay_f(char *o, const char *d, int nd, int dp)
{
	size_t n = 0;
	if (dp <= 0) {
		o[n++] = '0';
		if (nd == 0)
			return n;
		o[n++] = '.';
		for (int i = 0; i < -dp; i++)
			o[n++] = '0';
		memcpy(o + n, d, (size_t)nd);
		return n + (size_t)nd;
	}
	if (dp >= nd) {
		memcpy(o, d, (size_t)nd);
		n = (size_t)nd;
		for (int i = nd; i < dp; i++)
			o[n++] = '0';
		return n;
	}
	memcpy(o, d, (size_t)dp);
	n = (size_t)dp;
	o[n++] = '.';
	memcpy(o + n, d + dp, (size_t)(nd - dp));
	return n + (size_t)(nd - dp);
}

/* The sign, and the digits of |v| (v finite): nd 0 for zero. */
static size_t put_sign_digits(char *o, double v, char d[24], int *nd, int *dp)
{
	d[0] = '0';
	d[1] = '\0';
	*nd = 0;
	*dp = 0; /* zero: no digits, as Go's decimal holds it */
	if (v != 0)
		*nd = shortest_digits(fabs(v), d, dp);
	if (!signbit(v))
		return 0;
	o[0] = '-';
	return 1;
}

static size_t special_text(char *o, double v)
{
	const char *t = isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
	size_t n = strlen(t);
	memcpy(o, t, n + 1);
	return n;
}

int gofloat_put(struct buf *b, double v, char fmt)
{
	if (fmt != 'e' && fmt != 'E' && fmt != 'f' && fmt != 'g')
		return GPULSE_EINVAL;
	char o[GOFLOAT_TEXT_MAX];
	size_t n;
	if (!isfinite(v)) {
		n = special_text(o, v);
	} else {
		char d[24];
		int nd, dp;
		n = put_sign_digits(o, v, d, &nd, &dp);
		if (fmt == 'g') {
			int exp = dp - 1;
			fmt = nd && (exp < -4 || exp >= 6) ? 'e' : 'f';
		}
		n += fmt == 'f' ? lay_f(o + n, d, nd, dp) : lay_e(o + n, d, nd, dp, fmt);
	}
	return buf_append(b, o, n);
}

int gofloat_put_sample(struct buf *b, double v)
{
	double a = fabs(v);
	return gofloat_put(b, v, a != 0 && (a < 1e-6 || a >= 1e21) ? 'e' : 'f');
}

size_t gofloat_format_cg(char *out, double v)
{
	if (!isfinite(v))
		return special_text(out, v);
	if (v == 0) { /* -0 too, as client_golang writes it (f == 0) */
		memcpy(out, "0", 2);
		return 1;
	}
	char d[24];
	int nd, dp;
	size_t n = put_sign_digits(out, v, d, &nd, &dp);
	/* C's %.Pg at P = the digits needed, at least 15: 'e' when the
	 * exponent is below -4 or at least P. Either layout is at most
	 * 1 + 6 + 17 bytes here ("-0.0000" and the digits; "-d.", 16
	 * digits, "e-324"), so out[GOFLOAT_CG_MAX] holds it. */
	int prec = nd > 15 ? nd : 15, exp = dp - 1;
	if (nd && (exp < -4 || exp >= prec))
		n += lay_e(out + n, d, nd, dp, 'e');
	else
		n += lay_f(out + n, d, nd, dp);
	out[n] = '\0';
	return n;
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
