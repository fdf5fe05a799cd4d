/* Files embedded in the binary, served over HTTP with their Content-Type,
 * a strong ETag (304 on If-None-Match), gzip when the client accepts it
 * and it is smaller, and security headers (a Content-Security-Policy,
 * nosniff). The web dashboard's assets are its one user
 * (docs/internals/web.md). */
#ifndef GPULSE_HTTP_STATIC_H
#define GPULSE_HTTP_STATIC_H

#include <stddef.h>

#include "http/http_server.h"

#define HTTP_STATIC_MAX_ASSETS 32  /* one table holds at most this many */

/* One embedded file. `path` is the request path it answers ("/",
 * "/ui/app.js"); `data` must outlive the table (a static array). */
struct http_asset {
	const char *path;
	const unsigned char *data;
	size_t len;
};

struct http_static;

/* A table serving `assets` (copied: the array need not outlive the call,
 * the data must). Each asset's type comes from its path's extension
 * (.html, .js, .mjs, .css, .svg, .json, .txt, .png, .woff2; "/" and paths ending
 * in '/' are HTML); its gzip form is made here once, with zlib, and kept
 * when smaller. `csp` is sent as Content-Security-Policy with every
 * asset (copied; NULL: none). 0 with *out set; GPULSE_EINVAL (a path that
 * does not start with '/', an extension not in the list, a path twice),
 * GPULSE_ELIMIT (more than HTTP_STATIC_MAX_ASSETS), GPULSE_ENOMEM.
 * Free with http_static_free once the server that serves it has stopped. */
int http_static_new(const struct http_asset *assets, size_t n, const char *csp,
		    struct http_static **out);
/* Accepts NULL. */
void http_static_free(struct http_static *st);

/* Register `st` on `s`: the route `mount` (a prefix route when it ends in
 * '/', http_route's rule) answers the table's paths and 404 for others
 * under it, and every asset's path is made public (http_path_public),
 * so the page loads before it can ask for credentials. 0, or what
 * http_route or http_path_public returned. */
int http_static_register(struct http_static *st, struct http_server *s, const char *mount);

/* The handler http_static_register routes (ctx is the table), for a
 * caller that routes it itself. GET and HEAD: 200 with the body, or 304
 * when If-None-Match names the asset's ETag (either encoding's, or *);
 * 404 for a path not in the table. Headers: Content-Type, ETag,
 * Cache-Control "no-cache" (revalidate every time: the names carry no
 * version, and an upgraded daemon must not run yesterday's script),
 * Vary: Accept-Encoding, Content-Encoding: gzip when sent so,
 * X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer and the
 * CSP. Thread-safe: the table is read-only once made. */
int http_static_handle(void *ctx, const struct http_request *req, struct http_response *resp);

/* Bytes of every asset as stored, and as gzip would send them (each
 * asset's smaller form), for the page-weight figures. */
void http_static_sizes(const struct http_static *st, size_t *raw_bytes, size_t *sent_bytes);

/* True when an Accept-Encoding header value accepts gzip: a "gzip" (or
 * "x-gzip") or "*" coding whose q is not 0. Pure; NULL is false. */
bool http_accepts_gzip(const char *accept_encoding);
/* True when an If-None-Match header value matches `etag` (a quoted strong
 * tag) by the weak comparison of RFC 9110: "*", or a listed tag, W/ or
 * not, equal to it. Pure; NULL is false. */
bool http_etag_matches(const char *if_none_match, const char *etag);

#endif
