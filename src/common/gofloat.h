/* Floats written as Go's strconv writes them with precision -1, which is
 * what Prometheus and its templates print: the shortest decimal digits
 * that read back to exactly the same double (the closest such digits when
 * several are as short), laid out as 'e', 'E', 'f' or 'g'. One copy for
 * every caller that must match Go text: the query API's sample values,
 * PromQL number literals, rule template %v, the alert value. */
#ifndef GPULSE_GOFLOAT_H
#define GPULSE_GOFLOAT_H

#include "buf.h"

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

#endif
