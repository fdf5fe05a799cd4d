/* Go's strconv.ParseFloat(s, 64), whose verdict Prometheus takes on a
 * number held in a label (histogram_quantile's `le`): what it accepts and
 * what it refuses, so a bucket Prometheus ignores is ignored here too. */
#ifndef GPULSE_PROMQL_GOFLOAT_H
#define GPULSE_PROMQL_GOFLOAT_H

/* Read all of s as Go's ParseFloat(s, 64) does: an optional sign, then a
 * decimal float ("1", "1.", ".5", "1e-3"), a hexadecimal float with a
 * mandatory binary exponent ("0x1.8p1"), digits optionally separated by
 * single underscores ("1_000", "0x_1p0"), "Inf" or "Infinity" in any case
 * with an optional sign, or "NaN" in any case without one. Nothing else:
 * no spaces around, no "0x10" (no exponent), no "0b1".
 * 0 and *out set on success (underflow gives 0 or a subnormal, as in Go);
 * GPULSE_ERANGE with *out = ±Inf when the magnitude overflows (Go's
 * ErrRange); GPULSE_EPARSE with *out untouched otherwise. */
int promql_parse_go_float(const char *s, double *out);

#endif
