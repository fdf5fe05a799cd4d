/* `gpulse query`: PromQL against gpulsed's history (/api/v1/query and
 * /api/v1/query_range), printed as a table, with sparklines for a range. */
#ifndef GPULSE_CMD_QUERY_H
#define GPULSE_CMD_QUERY_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "cli/commands.h"

/* Render a query answer in Prometheus's JSON (the whole envelope, or its
 * "data" object) to `out`:
 *   vector  one row per series: labels (`__name__` first, then the rest
 *           sorted, name="value"), and the value as the daemon wrote it;
 *   matrix  one row per series: labels, min, max, last and, when
 *           `sparkline`, the points scaled to the series' min..max, in
 *           block characters when `utf8`, else in "_.-=#";
 *   scalar, string: the value alone.
 * An empty vector or matrix prints "no data". Text from the daemon is
 * printed with control characters replaced. Returns 0, or GPULSE_EPARSE
 * when `root` does not have that shape (nothing is printed then). */
int query_render(json_t *root, FILE *out, bool sparkline, bool utf8);

/* Parse a duration as Prometheus does: "30s", "5m", "1h30m", "250ms",
 * "2d", "1w", "1y", or bare (possibly fractional) seconds "90", "0.5".
 * On 0, *seconds is positive. GPULSE_EINVAL otherwise. */
int query_parse_duration(const char *s, double *seconds);

#endif
