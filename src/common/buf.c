/* Bounded growable buffer; see buf.h. */
#include "common/buf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gofloat.h"
#include "common/status.h"
#include "common/utf8.h"

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
	b->failed = 0;
}

void buf_free(struct buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	b->failed = 0;
	if (b->data)
		b->data[0] = '\0';
}

int buf_reserve(struct buf *b, size_t extra)
{
	if (b->failed)
		return GPULSE_ELIMIT;
	if (extra > b->max || b->len > b->max - extra) {
		b->failed = 1;
		return GPULSE_ELIMIT;
	}
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	char *p = realloc(b->data, cap);
	if (!p) {
		b->failed = 1;
		return GPULSE_ENOMEM;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	int rc = buf_reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	char small[256];
	int n = vsnprintf(small, sizeof small, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return GPULSE_EINVAL;
	if ((size_t)n < sizeof small)
		return buf_append(b, small, (size_t)n);
	int rc = buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

int buf_put_double(struct buf *b, double v)
{
	char tmp[GOFLOAT_CG_MAX];
	size_t n = gofloat_format_cg(tmp, v);
	return buf_append(b, tmp, n);
}

/* Text that is not UTF-8 (a request's bytes, an NVML string, a comm) must
 * not reach a JSON answer as is: each byte outside well-formed UTF-8 is
 * written as \ufffd, one per byte, as Go's encoding/json (and so
 * Prometheus) writes it. Runs of plain bytes are appended at once. */
int buf_put_json_string(struct buf *b, const char *s)
{
	int rc = buf_putc(b, '"');
	const unsigned char *p = (const unsigned char *)s, *run = p;
	while (!rc && *p) {
		const char *esc = NULL;
		size_t n = 1;
		switch (*p) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default:
			if (*p >= 0x20 && (n = utf8_seq_len(p)) != 0) {
				p += n;
				continue;
			}
			n = 1;
		}
		rc = buf_append(b, run, (size_t)(p - run));
		if (rc)
			break;
		if (esc)
			rc = buf_puts(b, esc);
		else if (*p < 0x20)
			rc = buf_printf(b, "\\u%04x", *p);
		else
			rc = buf_puts(b, "\\ufffd");
		p += n;
		run = p;
	}
	if (!rc)
		rc = buf_append(b, run, (size_t)(p - run));
	return rc ? rc : buf_putc(b, '"');
}

int buf_put_label_value(struct buf *b, const char *s)
{
	int rc = 0;
	for (const char *p = s; !rc && *p; p++) {
		switch (*p) {
		case '"': rc = buf_puts(b, "\\\""); break;
		case '\\': rc = buf_puts(b, "\\\\"); break;
		case '\n': rc = buf_puts(b, "\\n"); break;
		default: rc = buf_putc(b, *p);
		}
	}
	return rc;
}

char *buf_steal(struct buf *b)
{
	char *p = b->data;
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
	return p;
}

int buf_put_rfc3339(struct buf *b, int64_t t_ms, bool trim)
{
	if (t_ms <= 0)
		return buf_puts(b, "0001-01-01T00:00:00Z");
	time_t s = (time_t)(t_ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	buf_printf(b, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		   tm.tm_hour, tm.tm_min, tm.tm_sec);
	int ms = (int)(t_ms % 1000);
	if (!trim)
		buf_printf(b, ".%03d", ms);
	else if (ms % 100 == 0 && ms)
		buf_printf(b, ".%d", ms / 100);
	else if (ms % 10 == 0 && ms)
		buf_printf(b, ".%02d", ms / 10);
	else if (ms)
		buf_printf(b, ".%03d", ms);
	return buf_putc(b, 'Z');
}
