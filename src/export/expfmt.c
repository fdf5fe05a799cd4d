/* Prometheus's text format, read; see expfmt.h. Hand-written: the
 * format's C readers are whole client libraries, and a sample line is a
 * few dozen lines to read. */
#include "export/expfmt.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

#define VALUE_MAX 64 /* bytes of one sample's value text */

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

/* Past a name at q: NULL when there is none. */
static const char *skip_name(const char *q, const char *end)
{
	if (q == end || !name_char(*q, true))
		return NULL;
	while (q < end && name_char(*q, false))
		q++;
	return q;
}

enum expfmt_kind expfmt_line(const char *p, const char *end, struct expfmt_sample *out)
{
	if (p == end || *p == '#')
		return EXPFMT_OTHER;
	const char *q = skip_name(p, end);
	if (!q)
		return EXPFMT_BAD;
	size_t namelen = (size_t)(q - p);
	if (q < end && *q == '{') {
		q++;
		while (q < end && *q != '}') {
			if (!(q = skip_name(q, end)))
				return EXPFMT_BAD;
			if (end - q < 2 || q[0] != '=' || q[1] != '"')
				return EXPFMT_BAD;
			for (q += 2; q < end && *q != '"'; q++)
				if (*q == '\\')
					q++;
			if (q >= end)
				return EXPFMT_BAD;
			q++;
			if (q < end && *q == ',')
				q++;
		}
		if (q >= end)
			return EXPFMT_BAD;
		q++;
	}
	size_t keylen = (size_t)(q - p);
	if (q == end || *q != ' ')
		return EXPFMT_BAD;
	while (q < end && *q == ' ')
		q++;
	const char *val = q;
	while (q < end && *q != ' ')
		q++;
	size_t vl = (size_t)(q - val);
	char text[VALUE_MAX];
	if (vl == 0 || vl >= sizeof text)
		return EXPFMT_BAD;
	memcpy(text, val, vl);
	text[vl] = '\0';
	char *e;
	double v = strtod(text, &e); /* also +Inf, -Inf, NaN */
	if (*e)
		return EXPFMT_BAD;
	*out = (struct expfmt_sample){.keylen = keylen, .namelen = namelen, .v = v};
	return EXPFMT_SAMPLE;
}

int expfmt_labels(const char *key, size_t keylen, size_t namelen, char *scratch, size_t cap,
		  expfmt_label_fn *fn, void *ctx)
{
	const char *q = key + namelen, *end = key + keylen;
	if (namelen + 1 > cap)
		return GPULSE_ELIMIT;
	memcpy(scratch, key, namelen);
	scratch[namelen] = '\0';
	int rc = fn(ctx, "__name__", scratch);
	if (rc)
		return rc;
	size_t w = namelen + 1;
	if (q < end && *q == '{')
		q++;
	while (q < end && *q != '}') {
		const char *nm = q;
		while (q < end && name_char(*q, false))
			q++;
		size_t nl = (size_t)(q - nm);
		if (nl == 0 || end - q < 2 || q[0] != '=' || q[1] != '"')
			return GPULSE_EPARSE;
		if (w + nl + 1 > cap)
			return GPULSE_ELIMIT;
		char *name = scratch + w;
		memcpy(name, nm, nl);
		name[nl] = '\0';
		w += nl + 1;
		char *value = scratch + w;
		for (q += 2; q < end && *q != '"'; q++) {
			if (w + 1 >= cap)
				return GPULSE_ELIMIT;
			if (*q == '\\' && q + 1 < end) {
				q++;
				scratch[w++] = *q == 'n' ? '\n' : *q;
			} else {
				scratch[w++] = *q;
			}
		}
		if (q >= end || w >= cap)
			return q >= end ? GPULSE_EPARSE : GPULSE_ELIMIT;
		scratch[w++] = '\0';
		q++;
		if (q < end && *q == ',')
			q++;
		if (*value && (rc = fn(ctx, name, value)) != 0)
			return rc;
	}
	return 0;
}
