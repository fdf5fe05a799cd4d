/* Durations written as Prometheus writes them ("5m", "1h30m", "1d",
 * "250ms"): the one parser behind PromQL's range and offset durations,
 * rule files' `for` and `interval`, gpulsed's configuration and query
 * parameters, and the CLI's options. */
#ifndef GPULSE_DURATION_H
#define GPULSE_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parse s[0..len) as Prometheus's model.ParseDuration does: "0", or one
 * or more NUMBER UNIT pairs, units y (365 days), w (7 days), d, h, m, s,
 * ms, each at most once and largest first ("1h30m", not "30m1h"); digits
 * only (no sign, fraction or space), a unit being every non-digit up to
 * the next digit. *ns set on success; 0. Otherwise *ns is untouched and
 * err (if not NULL) holds Prometheus's message: GPULSE_EPARSE ("empty
 * duration string", `not a valid duration string: "5m1h"`, `unknown unit
 * "q" in duration "5q"`) or GPULSE_ERANGE ("duration out of range": past
 * int64 nanoseconds, about 292 years). */
int duration_parse(const char *s, size_t len, int64_t *ns, char *err, size_t errlen);

/* Parse a duration as gpulsed's settings and query parameters take it:
 * Prometheus style (duration_parse: "100ms", "1s", "5m", "1h30m") or a
 * bare number of seconds ("30", "0.25"). 0, GPULSE_EINVAL (bad syntax,
 * negative) or GPULSE_ERANGE (does not fit in int64 nanoseconds). */
int duration_parse_arg(const char *s, int64_t *ns);

/* Write `ns` as duration_parse_arg reads it back: "1h30m", "100ms",
 * "0s", or seconds with a fraction when finer than a millisecond. */
void duration_format(int64_t ns, char *out, size_t outlen);

#endif
