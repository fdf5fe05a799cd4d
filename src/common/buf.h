/* A growable byte buffer with a hard maximum size (curl's dynbuf habit):
 * every append either fits under the maximum or fails with GPULSE_ELIMIT,
 * so no input can make gpulse allocate without bound. */
#ifndef GPULSE_BUF_H
#define GPULSE_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
	char *data; /* always NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
	size_t max; /* largest len allowed */
	int failed; /* sticky: an append failed; len is unchanged since */
};

/* Initialise an empty buffer that may grow to `max` bytes. No allocation. */
void buf_init(struct buf *b, size_t max);
/* Release the memory; `b` may be reused after buf_init. Accepts NULL. */
void buf_free(struct buf *b);
/* Forget the contents, keep the allocation, clear the sticky failure. */
void buf_reset(struct buf *b);
/* Make room for `extra` more bytes. 0, GPULSE_ENOMEM or GPULSE_ELIMIT. */
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Append a double as gofloat_format_cg writes it: the shortest text that
 * reads back exactly (Go's digits), "NaN", "+Inf", "-Inf". */
int buf_put_double(struct buf *b, double v);
/* Append `s` as a JSON string literal, quotes included. The literal is
 * always UTF-8: each byte of `s` outside well-formed UTF-8 (utf8.h) is
 * written as \ufffd, as Go's encoding/json writes it. */
int buf_put_json_string(struct buf *b, const char *s);
/* Append the UTC time t_ms (ms since the Unix epoch) in RFC 3339, no
 * quotes: "2026-11-29T19:30:00.250Z" with three fraction digits, or with
 * `trim` as Go's RFC3339Nano writes it (trailing zeros and a zero
 * fraction left out). t_ms <= 0 is Go's zero time,
 * "0001-01-01T00:00:00Z", as Prometheus's APIs write "never". */
int buf_put_rfc3339(struct buf *b, int64_t t_ms, bool trim);
/* Append `s` escaped for a Prometheus label value (\\, \", \n), no quotes. */
int buf_put_label_value(struct buf *b, const char *s);
/* Hand the data to the caller, who frees it with free(); `b` becomes empty.
 * Returns NULL if nothing was ever appended. */
char *buf_steal(struct buf *b);

#endif
