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

#endif
