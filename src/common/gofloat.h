/* Floats written as Go's strconv writes them with precision -1, which is
 * what Prometheus and its templates print: the shortest decimal digits
 * that read back to exactly the same double (the closest such digits when
 * several are as short), laid out as 'e', 'E', 'f' or 'g'. One copy for
 * every caller that must match Go text: the query API's sample values,
 * PromQL number literals, rule template %v, the alert value. */
#ifndef GPULSE_GOFLOAT_H
#define GPULSE_GOFLOAT_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Append strconv.FormatFloat(v, fmt, -1, 64): fmt 'e' or 'E'
 * ("1e+21", "5e-324": mantissa, sign, at least two exponent digits), 'f'
 * (no exponent: "0.000001", "1000000000000000000000") or 'g' ('e' when
 * the decimal exponent is < -4 or >= 6, as Go's shortest %g, else 'f').
 * NaN is "NaN", infinities "+Inf" and "-Inf"; -0 keeps its sign ("-0").
 * 0 or the buffer's status (GPULSE_ELIMIT, GPULSE_ENOMEM); GPULSE_EINVAL
 * for another fmt. */
int gofloat_put(struct buf *b, double v, char fmt);

/* Append a sample value as Prometheus's HTTP API writes it (web/api/v1
 * marshalValue): 'e' when 0 < |v| < 1e-6 or |v| >= 1e21, else 'f'. */
int gofloat_put_sample(struct buf *b, double v);

/* Write v to out[GOFLOAT_CG_MAX], NUL-terminated, as gpulse's /metrics
 * and JSON numbers have it (buf_put_double): the same shortest digits as
 * above, laid out as C's %g lays out that many digits (at least 15): 'e'
 * when the decimal exponent is below -4 or at least that many, else 'f'
 * ("0.1", "1e-05", "123456789.5", "81559191552", "1.5e+20", "5e-324",
 * "NaN", "+Inf"); zero is "0", -0 included, as client_golang writes it. Prometheus reads it back to the same double; its
 * own client libraries would write 'g' ("8.1559191552e+10"), which this
 * layout predates and tests and users read. Returns the length. */
#define GOFLOAT_CG_MAX 32
size_t gofloat_format_cg(char *out, double v);

/* Go's strconv.ParseFloat(s, 64), whose verdict Prometheus takes on a
 * number held in a label (histogram_quantile's `le`). */
/* Read all of s as Go's ParseFloat(s, 64) does: an optional sign, then a
 * decimal float ("1", "1.", ".5", "1e-3"), a hexadecimal float with a
 * mandatory binary exponent ("0x1.8p1"), digits optionally separated by
 * single underscores ("1_000", "0x_1p0"), "Inf" or "Infinity" in any case
 * with an optional sign, or "NaN" in any case without one. Nothing else:
 * no spaces around, no "0x10" (no exponent), no "0b1".
 * 0 and *out set on success (underflow gives 0 or a subnormal, as in Go);
 * GPULSE_ERANGE with *out = ±Inf when the magnitude overflows (Go's
 * ErrRange); GPULSE_EPARSE with *out untouched otherwise. */
int gofloat_parse(const char *s, double *out);

/* Go's int64(v) as it runs on amd64, where Prometheus runs: truncated
 * toward zero, and INT64_MIN (the instruction's "integer indefinite") for
 * NaN, the infinities and values outside int64's range, which the Go
 * specification leaves to the implementation. Prometheus converts sample
 * values so for time.Unix (the calendar functions) and durations. */
int64_t gofloat_to_int64(double v);

#endif
