/* Redaction of secrets in URLs (redact.h). Lexical, not a URL parser:
 * it must also mask a URL that does not parse, as an error message
 * quotes it. */
#include "common/redact.h"

#include <stdlib.h>
#include <string.h>

struct out {
	char *p;
	size_t cap, len;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->len < o->cap) {
		size_t room = o->cap - o->len;
		memcpy(o->p + o->len, s, n < room ? n : room);
	}
	o->len += n;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* The last c in [s, end), or NULL. */
static const char *last_in(const char *s, const char *end, char c)
{
	for (const char *q = end; q > s; q--)
		if (q[-1] == c)
			return q - 1;
	return NULL;
}

size_t redact_url(char *out, size_t outlen, const char *url)
{
	/* Room for the terminating NUL: the writer never touches it. */
	struct out o = {out, outlen ? outlen - 1 : 0, 0};
	size_t n = strlen(url);
	const char *end = url + n;
	/* The authority starts after the first "//" ("scheme://", or a
	 * mistyped "htps//" in a message) that comes before any query or
	 * fragment, else at the start, and ends at the path, query or
	 * fragment. */
	const char *sl = strstr(url, "//");
	const char *auth = sl && (size_t)(sl - url) < strcspn(url, "?#") ? sl + 2 : url;
	const char *auth_end = auth + strcspn(auth, "/?#");
	const char *at = last_in(auth, auth_end, '@');
	const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
	if (colon) {
		put(&o, url, (size_t)(colon + 1 - url));
		puts_(&o, REDACT_URL_MASK);
		put(&o, at, (size_t)(auth_end - at));
	} else {
		put(&o, url, (size_t)(auth_end - url));
	}
	const char *hash = auth_end + strcspn(auth_end, "#");
	const char *q = memchr(auth_end, '?', (size_t)(hash - auth_end));
	if (!q) {
		put(&o, auth_end, (size_t)(end - auth_end));
		goto out;
	}
	put(&o, auth_end, (size_t)(q + 1 - auth_end));
	for (const char *p = q + 1; p < hash;) {
		const char *amp = memchr(p, '&', (size_t)(hash - p));
		const char *pe = amp ? amp : hash;
		const char *eq = memchr(p, '=', (size_t)(pe - p));
		if (eq) {
			put(&o, p, (size_t)(eq + 1 - p));
			if (eq + 1 < pe)
				puts_(&o, REDACT_URL_MASK);
		} else if (pe > p) {
			puts_(&o, REDACT_URL_MASK);
		}
		if (amp)
			put(&o, "&", 1);
		p = pe + (amp ? 1 : 0);
	}
	put(&o, hash, (size_t)(end - hash));
out:
	if (outlen)
		out[o.len < o.cap ? o.len : o.cap] = '\0';
	return o.len;
}

char *redact_url_dup(const char *url)
{
	if (!url)
		return NULL;
	size_t n = redact_url(NULL, 0, url);
	char *s = malloc(n + 1);
	if (s)
		redact_url(s, n + 1, url);
	return s;
}
