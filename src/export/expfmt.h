/* Reading Prometheus's text exposition format (0.0.4), the other side of
 * prom.c: the sample lines of a /metrics page, for the readers of
 * gpulsed's own page (the live store that alerting rules read without
 * storage, and the store's self-scrape). Only what those need: a sample
 * line's key (name{labels}), name and value, and its labels one by one.
 * Timestamps, HELP and TYPE are not read. */
#ifndef GPULSE_EXPFMT_H
#define GPULSE_EXPFMT_H

#include <stddef.h>

enum expfmt_kind {
	EXPFMT_OTHER,   /* blank, or a comment (# HELP, # TYPE, ...) */
	EXPFMT_SAMPLE,  /* a sample: *out filled */
	EXPFMT_BAD,     /* neither */
};

struct expfmt_sample {
	size_t keylen;  /* name{labels}: the line's first keylen bytes */
	size_t namelen; /* the metric name: its first namelen bytes */
	double v;       /* the value; NaN, +Inf and -Inf included */
};

/* Read the line p[0..end) (no newline). A sample is a metric name
 * ([a-zA-Z_:][a-zA-Z0-9_:]*), optionally labels {name="value",...} with
 * label names of the same characters and values with backslash escapes,
 * then one or more spaces and a value strtod reads whole (up to 63
 * bytes), then anything (a timestamp, not read). */
enum expfmt_kind expfmt_line(const char *p, const char *end, struct expfmt_sample *out);

/* Called for each label, __name__ (the metric name) first, then the
 * others in the order written; name and value are NUL-terminated. A
 * non-zero return stops the walk and is returned by expfmt_labels. */
typedef int expfmt_label_fn(void *ctx, const char *name, const char *value);

/* Walk the labels of key[0..keylen), a sample's key that expfmt_line
 * read (namelen its name's length), unescaping values (\\n is a newline,
 * a backslash takes the next byte as is) into scratch[cap]. A label with
 * an empty value is no label, as in Prometheus, and is skipped.
 * 0, GPULSE_ELIMIT (scratch too small: keylen + 2 always suffices),
 * GPULSE_EPARSE (key not as expfmt_line reads it), or fn's return. */
int expfmt_labels(const char *key, size_t keylen, size_t namelen, char *scratch, size_t cap,
		  expfmt_label_fn *fn, void *ctx);

#endif
