/* Embedded files over HTTP: types by extension, gzip made once at start
 * with zlib, strong ETags, conditional GETs, security headers. What is
 * served and why these headers: docs/internals/web.md. */
#include "http/http_static.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "common/hash.h"
#include "common/status.h"

struct asset {
	const char *path;            /* points into the caller's static data */
	char *path_copy;             /* owned copy of path */
	const char *type;
	const unsigned char *data;
	size_t len;
	unsigned char *gz;           /* NULL: gzip is not smaller */
	size_t gz_len;
	char etag[24];               /* "0123456789abcdef" */
	char etag_gz[28];            /* "0123456789abcdef-gz" */
};

struct http_static {
	struct asset assets[HTTP_STATIC_MAX_ASSETS];
	size_t n;
	char *csp;
};

static const struct {
	const char *ext;
	const char *type;
} types[] = {
	{".html", "text/html; charset=utf-8"},
	{".js", "text/javascript; charset=utf-8"},
	{".mjs", "text/javascript; charset=utf-8"},
	{".css", "text/css; charset=utf-8"},
	{".svg", "image/svg+xml"},
	{".json", "application/json"},
	{".txt", "text/plain; charset=utf-8"},
	{".png", "image/png"},
	{".woff2", "font/woff2"},
};

static const char *type_of(const char *path)
{
	size_t n = strlen(path);
	if (n && path[n - 1] == '/')
		return types[0].type;
	const char *slash = strrchr(path, '/');
	const char *dot = strrchr(slash ? slash : path, '.');
	if (!dot)
		return NULL;
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return NULL;
}

/* The gzip form of data (level 9: made once), or NULL with *out_len 0
 * when zlib fails or it would not be smaller. */
static unsigned char *gzip_of(const unsigned char *data, size_t len, size_t *out_len)
{
	*out_len = 0;
	z_stream z;
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	uLong cap = deflateBound(&z, (uLong)len);
	unsigned char *out = malloc(cap ? cap : 1);
	if (!out) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)(uintptr_t)data; /* zlib does not write to it */
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	int rc = deflate(&z, Z_FINISH);
	size_t n = z.total_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END || n >= len) {
		free(out);
		return NULL;
	}
	*out_len = n;
	return out;
}

void http_static_free(struct http_static *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n; i++) {
		free(st->assets[i].gz);
		free(st->assets[i].path_copy);
	}
	free(st->csp);
	free(st);
}

int http_static_new(const struct http_asset *assets, size_t n, const char *csp,
		    struct http_static **out)
{
	*out = NULL;
	if (n > HTTP_STATIC_MAX_ASSETS)
		return GPULSE_ELIMIT;
	struct http_static *st = calloc(1, sizeof *st);
	if (!st)
		return GPULSE_ENOMEM;
	int rc = GPULSE_OK;
	if (csp && !(st->csp = strdup(csp))) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct http_asset *a = &assets[i];
		const char *type = a->path ? type_of(a->path) : NULL;
		if (!a->path || a->path[0] != '/' || strlen(a->path) >= HTTP_MAX_ROUTE_PATH || !type ||
		    (!a->data && a->len)) {
			rc = GPULSE_EINVAL;
			goto out;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(st->assets[j].path, a->path) == 0) {
				rc = GPULSE_EINVAL;
				goto out;
			}
		struct asset *s = &st->assets[st->n];
		if (!(s->path_copy = strdup(a->path))) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		st->n++;
		s->path = s->path_copy;
		s->type = type;
		s->data = a->data;
		s->len = a->len;
		s->gz = a->len ? gzip_of(a->data, a->len, &s->gz_len) : NULL;
		/* FNV-1a: an ETag only has to change when the bytes do, and
		 * nobody gains by forging one for a file they can already read. */
		uint64_t h = fnv1a64(a->data, a->len);
		snprintf(s->etag, sizeof s->etag, "\"%016llx\"", (unsigned long long)h);
		snprintf(s->etag_gz, sizeof s->etag_gz, "\"%016llx-gz\"", (unsigned long long)h);
	}
out:
	if (rc) {
		http_static_free(st);
		return rc;
	}
	*out = st;
	return GPULSE_OK;
}

void http_static_sizes(const struct http_static *st, size_t *raw_bytes, size_t *sent_bytes)
{
	size_t raw = 0, sent = 0;
	for (size_t i = 0; st && i < st->n; i++) {
		raw += st->assets[i].len;
		sent += st->assets[i].gz ? st->assets[i].gz_len : st->assets[i].len;
	}
	*raw_bytes = raw;
	*sent_bytes = sent;
}

/* The next comma-separated element of a header list: skips spaces,
 * returns its start and sets *len (up to the comma), or NULL at the end. */
static const char *next_element(const char **cursor, size_t *len)
{
	const char *p = *cursor;
	while (*p == ' ' || *p == '\t' || *p == ',')
		p++;
	if (!*p)
		return NULL;
	const char *start = p;
	while (*p && *p != ',')
		p++;
	*len = (size_t)(p - start);
	while (*len && (start[*len - 1] == ' ' || start[*len - 1] == '\t'))
		(*len)--;
	*cursor = p;
	return start;
}

bool http_accepts_gzip(const char *accept_encoding)
{
	if (!accept_encoding)
		return false;
	const char *cur = accept_encoding;
	const char *e;
	size_t len;
	bool star = false, gzip = false, gzip_seen = false;
	while ((e = next_element(&cur, &len))) {
		size_t name = 0;
		while (name < len && e[name] != ';' && e[name] != ' ' && e[name] != '\t')
			name++;
		/* q=0 (or 0.0, 0.00, 0.000) refuses the coding. */
		bool refused = false;
		for (size_t i = name; i + 1 < len; i++)
			if ((e[i] == 'q' || e[i] == 'Q') && e[i + 1] == '=') {
				const char *v = e + i + 2;
				size_t left = len - (i + 2);
				refused = left >= 1 && v[0] == '0';
				for (size_t k = 1; refused && k < left && v[k] != ' ' && v[k] != ';'; k++)
					refused = v[k] == '.' || v[k] == '0';
				break;
			}
		if ((name == 4 && strncasecmp(e, "gzip", 4) == 0) ||
		    (name == 6 && strncasecmp(e, "x-gzip", 6) == 0)) {
			gzip_seen = true;
			gzip = !refused;
		} else if (name == 1 && e[0] == '*') {
			star = !refused;
		}
	}
	return gzip_seen ? gzip : star;
}

bool http_etag_matches(const char *if_none_match, const char *etag)
{
	if (!if_none_match || !etag)
		return false;
	size_t want = strlen(etag);
	const char *cur = if_none_match;
	const char *e;
	size_t len;
	while ((e = next_element(&cur, &len))) {
		if (len == 1 && e[0] == '*')
			return true;
		if (len > 2 && e[0] == 'W' && e[1] == '/') {
			e += 2;
			len -= 2;
		}
		if (len == want && memcmp(e, etag, want) == 0)
			return true;
	}
	return false;
}

static const struct asset *find_asset(const struct http_static *st, const char *path)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(path, st->assets[i].path) == 0)
			return &st->assets[i];
	return NULL;
}

int http_static_handle(void *ctx, const struct http_request *req, struct http_response *resp)
{
	const struct http_static *st = ctx;
	const struct asset *a = find_asset(st, req->path);
	if (!a) {
		resp->status = 404;
		return buf_puts(&resp->body, "not found\n");
	}
	bool gz = a->gz && http_accepts_gzip(http_request_header(req, "Accept-Encoding"));
	const char *etag = gz ? a->etag_gz : a->etag;
	resp->content_type = a->type;
	/* Six headers here, the CSP's two below: within HTTP_MAX_RESP_HEADERS. */
	http_response_header(resp, "ETag", etag);
	http_response_header(resp, "Cache-Control", "no-cache");
	http_response_header(resp, "Vary", "Accept-Encoding");
	http_response_header(resp, "X-Content-Type-Options", "nosniff");
	http_response_header(resp, "Referrer-Policy", "no-referrer");
	if (st->csp)
		http_response_header(resp, "Content-Security-Policy", st->csp);
	const char *inm = http_request_header(req, "If-None-Match");
	/* Either encoding's tag names the same file: a client that switched
	 * encodings still holds a good copy of it. */
	if (http_etag_matches(inm, a->etag) || http_etag_matches(inm, a->etag_gz)) {
		resp->status = 304;
		return GPULSE_OK;
	}
	if (gz) {
		http_response_header(resp, "Content-Encoding", "gzip");
		return buf_append(&resp->body, a->gz, a->gz_len);
	}
	return buf_append(&resp->body, a->data, a->len);
}

/* http_known_fn: only the table's paths exist under the mount, so a POST
 * elsewhere below it is 404, not 405. */
static bool static_knows(void *ctx, const char *path)
{
	return find_asset(ctx, path) != NULL;
}

int http_static_register(struct http_static *st, struct http_server *s, const char *mount)
{
	int rc = http_route(s, mount, http_static_handle, st);
	if (!rc && mount[0] && mount[strlen(mount) - 1] == '/')
		rc = http_route_known(s, mount, static_knows);
	for (size_t i = 0; !rc && i < st->n; i++)
		rc = http_path_public(s, st->assets[i].path);
	return rc;
}
