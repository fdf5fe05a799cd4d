/* The part of Go's text/template that Prometheus alert rules use, with
 * Prometheus's template data and functions, so `labels` and `annotations`
 * expand here exactly as Prometheus expands them: `{{ $labels.x }}`,
 * `{{ $value }}`, `{{ $externalLabels.x }}`, `{{ $externalURL }}`, the dot
 * forms (.Labels, .Value ...), pipelines, `if`/`else if`/`else`/`end`,
 * `with`, variables (`$x := ...`), comments, trim markers, and the
 * functions humanize, humanize1024, humanizePercentage, humanizeDuration,
 * humanizeTimestamp, printf, print, toUpper, toLower, title, eq, ne, lt,
 * le, gt, ge, and, or, not, len, index, match, reReplaceAll, stripPort,
 * stripDomain, safeHtml. Numbers print as Go prints them (%v, %.4g).
 *
 * Hand-written because no C library implements Go templates; the grammar
 * is small and every size is bounded (text, nodes, nesting, output).
 * Prometheus's query functions (query, first, label, value, ...) need a
 * query engine inside templates and are refused at parse time, naming
 * the function. */
#ifndef GPULSE_RULES_TEMPLATE_H
#define GPULSE_RULES_TEMPLATE_H

#include <stddef.h>

#include "common/buf.h"
#include "promql/queryable.h"

#define TMPL_MAX_TEXT   (64 * 1024)  /* bytes of one template */
#define TMPL_MAX_NODES  4096         /* parse nodes of one template */
#define TMPL_MAX_DEPTH  32           /* nesting of if/with and parentheses */
#define TMPL_MAX_OUTPUT (64 * 1024)  /* bytes of one expansion */

struct tmpl;

/* What a template sees: Prometheus's alert template data. */
struct tmpl_data {
	const struct label *labels;      /* the sample's labels ($labels) */
	size_t nlabels;
	const struct label *ext_labels;  /* $externalLabels */
	size_t next_labels;
	const char *external_url;               /* $externalURL; NULL: "" */
	double value;                           /* $value */
};

/* Parse `text` as the template named `name` (Prometheus names alert
 * templates "__alert_" + the alert's name; messages use it). On success
 * *out is freed with tmpl_free. On failure a status and err holds Go's
 * message, "template: NAME:LINE: reason". */
int tmpl_parse(const char *name, const char *text, struct tmpl **out, char *err, size_t errlen);

/* Accepts NULL. */
void tmpl_free(struct tmpl *t);

/* Expand t with d, appending the text to out. On an execution error
 * (Go's: comparing a float with an integer, a function given the wrong
 * type) Prometheus's text replaces the output:
 * "<error expanding template: ...>", and GPULSE_EINVAL is returned;
 * GPULSE_ELIMIT when the output would pass TMPL_MAX_OUTPUT. */
int tmpl_expand(const struct tmpl *t, const struct tmpl_data *d, struct buf *out);

/* Append v as Go's fmt prints a float64 with %v ("90", "0.5",
 * "1.234567e+06", "+Inf", "NaN"). */
void tmpl_format_float(struct buf *b, double v);

#endif
