/* Tests for the embedded file server (src/http/http_static.c) and the
 * public paths of the HTTP server (http_path_public), through libcurl on
 * 127.0.0.1:0: types, ETags and 304, gzip only when accepted (and the
 * gzip body inflates to the file), the security headers, 404 under the
 * mount (for POST too, where an asset or a GET route is 405), assets
 * served without the token while every other path keeps its 401; the
 * header parsers on their own; and the dashboard as built into gpulsed
 * (web_assets.c): "/" is its HTML, every asset it names is in the table,
 * and the whole is within the 500 KB budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <zlib.h>

#include "common/buf.h"
#include "http/http_server.h"
#include "http/http_static.h"
#include "http_test.h"
#include "common/status.h"
#include "api/web.h"
#include "api/web_assets.h"

/* GET url with up to two extra request headers (NULL: none). */
static void fetch(struct reply *r, const char *url, const char *h1, const char *h2)
{
	http_test_fetch(r, url, NULL, h1, h2, NULL);
}

/* The value of response header `name` (copied into out), or false. */
static bool header(const struct reply *r, const char *name, char *out, size_t outlen)
{
	const char *h = r->headers.data;
	size_t n = strlen(name);
	for (const char *line = h; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
			const char *v = line + n + 1;
			while (*v == ' ')
				v++;
			size_t len = strcspn(v, "\r\n");
			if (len >= outlen)
				len = outlen - 1;
			memcpy(out, v, len);
			out[len] = '\0';
			return true;
		}
	}
	return false;
}

static const unsigned char page[] = "<!doctype html><title>t</title>"
				    "<p>the same words again and again, the same words again and again</p>";
static const unsigned char script[] =
	"export const x = 1; // a script that gzip squeezes well\n"
	"export const y = 2; // a script that gzip squeezes well\n"
	"export const z = 3; // a script that gzip squeezes well\n"
	"export const w = 4; // a script that gzip squeezes well\n";
static const unsigned char tiny[] = "a";

static const struct http_asset assets[] = {
	{"/", page, sizeof page - 1},
	{"/ui/app.js", script, sizeof script - 1},
	{"/ui/t.txt", tiny, sizeof tiny - 1},
};

static int h_data(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	return buf_puts(&resp->body, "secret data\n");
}

static bool knows_nothing(void *ctx, const char *path)
{
	(void)ctx;
	(void)path;
	return false;
}

struct srv {
	struct http_server *s;
	struct http_static *st;
	char url[128];
};

static void start(struct srv *v, const char *token)
{
	struct http_config cfg = {.listen = "127.0.0.1:0", .auth_token = token};
	char err[256];
	assert_int_equal(http_server_start(&v->s, &cfg, err, sizeof err), 0);
	assert_int_equal(http_static_new(assets, 3, "default-src 'self'", &v->st), 0);
	assert_int_equal(http_route(v->s, "/api/v1/data", h_data, NULL), 0);
	assert_int_equal(http_static_register(v->st, v->s, "/"), 0);
}

static const char *url(struct srv *v, const char *path)
{
	snprintf(v->url, sizeof v->url, "http://127.0.0.1:%d%s", http_server_port(v->s), path);
	return v->url;
}

static void stop(struct srv *v)
{
	http_server_stop(v->s);
	http_static_free(v->st);
}

static void test_serving(void **state)
{
	(void)state;
	struct srv v;
	struct reply r;
	char h[512], etag[64], etag_gz[64];
	start(&v, NULL);

	fetch(&r, url(&v, "/"), NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body.len, sizeof page - 1);
	assert_memory_equal(r.body.data, page, sizeof page - 1);
	assert_true(header(&r, "Content-Type", h, sizeof h));
	assert_string_equal(h, "text/html; charset=utf-8");
	assert_true(header(&r, "Content-Security-Policy", h, sizeof h));
	assert_string_equal(h, "default-src 'self'");
	assert_true(header(&r, "X-Content-Type-Options", h, sizeof h));
	assert_string_equal(h, "nosniff");
	assert_true(header(&r, "Cache-Control", h, sizeof h));
	assert_string_equal(h, "no-cache");
	assert_true(header(&r, "Vary", h, sizeof h));
	assert_false(header(&r, "Content-Encoding", h, sizeof h));
	assert_true(header(&r, "ETag", etag, sizeof etag));
	assert_true(etag[0] == '"' && etag[strlen(etag) - 1] == '"');
	reply_free(&r);

	/* The same ETag again; If-None-Match with it (alone, in a list, weak)
	 * is 304 with no body; another tag is 200. */
	fetch(&r, url(&v, "/"), NULL, NULL);
	assert_true(header(&r, "ETag", h, sizeof h));
	assert_string_equal(h, etag);
	reply_free(&r);
	char inm[160];
	const char *before[] = {"", "\"other\", ", "W/", NULL};
	for (size_t i = 0; i < 4; i++) {
		if (before[i])
			snprintf(inm, sizeof inm, "If-None-Match: %s%s", before[i], etag);
		else
			snprintf(inm, sizeof inm, "If-None-Match: *");
		fetch(&r, url(&v, "/"), inm, NULL);
		if (r.status != 304)
			fail_msg("%s: %ld", inm, r.status);
		assert_int_equal(r.body.len, 0);
		reply_free(&r);
	}
	fetch(&r, url(&v, "/"), "If-None-Match: \"0000000000000000\"", NULL);
	assert_int_equal(r.status, 200);
	reply_free(&r);

	/* gzip when accepted: its own ETag, and it inflates to the file. */
	fetch(&r, url(&v, "/ui/app.js"), "Accept-Encoding: gzip, deflate", NULL);
	assert_int_equal(r.status, 200);
	assert_true(header(&r, "Content-Type", h, sizeof h));
	assert_string_equal(h, "text/javascript; charset=utf-8");
	assert_true(header(&r, "Content-Encoding", h, sizeof h));
	assert_string_equal(h, "gzip");
	assert_true(header(&r, "ETag", etag_gz, sizeof etag_gz));
	assert_true(r.body.len < sizeof script - 1);
	unsigned char plain[512];
	z_stream z;
	memset(&z, 0, sizeof z);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)r.body.data;
	z.avail_in = (uInt)r.body.len;
	z.next_out = plain;
	z.avail_out = sizeof plain;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	assert_int_equal(z.total_out, sizeof script - 1);
	assert_memory_equal(plain, script, sizeof script - 1);
	inflateEnd(&z);
	reply_free(&r);
	/* Refused (q=0) or not offered: plain, with the other ETag; a client
	 * holding the gzip copy's tag still gets 304. */
	fetch(&r, url(&v, "/ui/app.js"), "Accept-Encoding: gzip;q=0, identity", NULL);
	assert_false(header(&r, "Content-Encoding", h, sizeof h));
	assert_int_equal(r.body.len, sizeof script - 1);
	assert_true(header(&r, "ETag", h, sizeof h));
	assert_string_not_equal(h, etag_gz);
	reply_free(&r);
	snprintf(inm, sizeof inm, "If-None-Match: %s", etag_gz);
	fetch(&r, url(&v, "/ui/app.js"), inm, NULL);
	assert_int_equal(r.status, 304);
	reply_free(&r);
	/* A one-byte file gains nothing from gzip and is sent as it is. */
	fetch(&r, url(&v, "/ui/t.txt"), "Accept-Encoding: gzip", NULL);
	assert_false(header(&r, "Content-Encoding", h, sizeof h));
	assert_int_equal(r.body.len, 1);
	reply_free(&r);

	/* Not in the table: 404, under the mount and elsewhere. */
	fetch(&r, url(&v, "/ui/nope.js"), NULL, NULL);
	assert_int_equal(r.status, 404);
	reply_free(&r);
	fetch(&r, url(&v, "/index.html"), NULL, NULL);
	assert_int_equal(r.status, 404);
	reply_free(&r);

	/* POST: 404 where no asset is (as to a path with no route), 405 on
	 * an asset and on a GET-only route, which exist. */
	const char *absent[] = {"/ui/nope.js", "/index.html", "/ui/"};
	for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
		http_test_fetch(&r, url(&v, absent[i]), "POST", NULL, NULL, "x=1");
		if (r.status != 404)
			fail_msg("POST %s: %ld", absent[i], r.status);
		reply_free(&r);
	}
	const char *present[] = {"/", "/ui/app.js", "/api/v1/data"};
	for (size_t i = 0; i < sizeof present / sizeof present[0]; i++) {
		http_test_fetch(&r, url(&v, present[i]), "POST", NULL, NULL, NULL);
		if (r.status != 405)
			fail_msg("POST %s: %ld", present[i], r.status);
		assert_true(header(&r, "Allow", h, sizeof h));
		assert_string_equal(h, "GET, HEAD");
		reply_free(&r);
	}
	/* Only a prefix route takes the test, and only a real one. */
	assert_int_equal(http_route_known(v.s, "/api/v1/data", knows_nothing), GPULSE_EINVAL);
	assert_int_equal(http_route_known(v.s, "/", NULL), GPULSE_EINVAL);
	assert_int_equal(http_route_known(v.s, "/other/", knows_nothing), GPULSE_ENOENT);

	size_t raw, sent;
	http_static_sizes(v.st, &raw, &sent);
	assert_int_equal(raw, sizeof page - 1 + sizeof script - 1 + 1);
	assert_true(sent < raw);
	stop(&v);
}

/* With a token, the assets load without it (the page must load to ask
 * for it); the data routes, unknown paths and unknown assets do not. */
static void test_public_with_token(void **state)
{
	(void)state;
	struct srv v;
	struct reply r;
	start(&v, "t0ken");
	const struct {
		const char *path;
		const char *auth;
		long status;
	} cases[] = {
		{"/", NULL, 200},
		{"/?gpu=1&range=900", NULL, 200},
		{"/ui/app.js", NULL, 200},
		{"/ui/app.js", "Authorization: Bearer wrong", 200},
		{"/api/v1/data", NULL, 401},
		{"/api/v1/data", "Authorization: Bearer wrong", 401},
		{"/api/v1/data", "Authorization: Bearer t0ken", 200},
		{"/ui/nope.js", NULL, 401},
		{"/nope", NULL, 401},
		{"/nope", "Authorization: Bearer t0ken", 404},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		fetch(&r, url(&v, cases[i].path), cases[i].auth, NULL);
		if (r.status != cases[i].status)
			fail_msg("%s with %s: %ld, want %ld", cases[i].path,
				 cases[i].auth ? cases[i].auth : "(none)", r.status, cases[i].status);
		reply_free(&r);
	}
	/* A public path cannot be made a write route, nor the reverse. */
	assert_int_equal(http_route_writes(v.s, "/"), GPULSE_EINVAL);
	assert_int_equal(http_route_writes(v.s, "/api/v1/data"), 0);
	assert_int_equal(http_path_public(v.s, "/api/v1/data"), GPULSE_EINVAL);
	assert_int_equal(http_path_public(v.s, "no-slash"), GPULSE_EINVAL);
	stop(&v);
}

static void test_table_errors(void **state)
{
	(void)state;
	struct http_static *st = NULL;
	const struct http_asset bad_ext[] = {{"/ui/x.exe", tiny, 1}};
	const struct http_asset no_slash[] = {{"ui/x.js", tiny, 1}};
	const struct http_asset twice[] = {{"/a.js", tiny, 1}, {"/a.js", tiny, 1}};
	assert_int_equal(http_static_new(bad_ext, 1, NULL, &st), GPULSE_EINVAL);
	assert_null(st);
	assert_int_equal(http_static_new(no_slash, 1, NULL, &st), GPULSE_EINVAL);
	assert_int_equal(http_static_new(twice, 2, NULL, &st), GPULSE_EINVAL);
	assert_int_equal(http_static_new(assets, HTTP_STATIC_MAX_ASSETS + 1, NULL, &st), GPULSE_ELIMIT);
	assert_int_equal(http_static_new(assets, 0, NULL, &st), 0);
	http_static_free(st);
	http_static_free(NULL);
}

static void test_parsers(void **state)
{
	(void)state;
	assert_true(http_accepts_gzip("gzip"));
	assert_true(http_accepts_gzip("deflate, gzip;q=1.0, *;q=0.5"));
	assert_true(http_accepts_gzip("GZIP"));
	assert_true(http_accepts_gzip("x-gzip"));
	assert_true(http_accepts_gzip("br;q=1, gzip;q=0.001"));
	assert_true(http_accepts_gzip("*"));
	assert_false(http_accepts_gzip("gzip;q=0"));
	assert_false(http_accepts_gzip("gzip; q=0.000"));
	assert_false(http_accepts_gzip("gzip;q=0, *"));  /* named refusal wins */
	assert_false(http_accepts_gzip("identity"));
	assert_false(http_accepts_gzip("gzipx, xgzip"));
	assert_false(http_accepts_gzip(""));
	assert_false(http_accepts_gzip(NULL));
	assert_false(http_accepts_gzip("*;q=0"));

	assert_true(http_etag_matches("\"abc\"", "\"abc\""));
	assert_true(http_etag_matches(" W/\"abc\" ", "\"abc\""));
	assert_true(http_etag_matches("\"x\",\"abc\"", "\"abc\""));
	assert_true(http_etag_matches("*", "\"abc\""));
	assert_false(http_etag_matches("\"abcd\"", "\"abc\""));
	assert_false(http_etag_matches("\"ab\"", "\"abc\""));
	assert_false(http_etag_matches("abc", "\"abc\""));
	assert_false(http_etag_matches("", "\"abc\""));
	assert_false(http_etag_matches(NULL, "\"abc\""));
	assert_false(http_etag_matches(",,,", "\"abc\""));
}

/* The dashboard as embedded in gpulsed: "/" is the HTML, each file it
 * names is in the table, and the total keeps the budget. */
static void test_embedded_dashboard(void **state)
{
	(void)state;
	assert_true(web_nassets >= 5);
	assert_true(web_assets_bytes <= 500u * 1024);
	size_t sum = 0;
	const struct http_asset *index = NULL;
	for (size_t i = 0; i < web_nassets; i++) {
		sum += web_assets[i].len;
		if (strcmp(web_assets[i].path, "/") == 0)
			index = &web_assets[i];
	}
	assert_int_equal(sum, web_assets_bytes);
	assert_non_null(index);
	char *html = strndup((const char *)index->data, index->len);
	assert_non_null(strstr(html, "<!doctype html>"));
	/* Every src= and href= under /ui/ is served. */
	int named = 0;
	for (const char *p = html; (p = strstr(p, "\"/ui/")); p++) {
		size_t n = strcspn(p + 1, "\"");
		char path[256];
		assert_true(n < sizeof path);
		memcpy(path, p + 1, n);
		path[n] = '\0';
		bool found = false;
		for (size_t i = 0; i < web_nassets; i++)
			found |= strcmp(web_assets[i].path, path) == 0;
		if (!found)
			fail_msg("index.html names %s, which is not embedded", path);
		named++;
	}
	assert_true(named >= 4);
	free(html);
	/* The table is valid for the server (types known, no duplicates). */
	struct http_static *st;
	assert_int_equal(http_static_new(web_assets, web_nassets, web_csp, &st), 0);
	size_t raw, sent;
	http_static_sizes(st, &raw, &sent);
	assert_int_equal(raw, web_assets_bytes);
	assert_true(sent < raw / 2);
	http_static_free(st);
	assert_non_null(strstr(web_csp, "default-src 'none'"));
	assert_null(strstr(web_csp, "unsafe"));
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_serving),
		cmocka_unit_test(test_public_with_token),
		cmocka_unit_test(test_table_errors),
		cmocka_unit_test(test_parsers),
		cmocka_unit_test(test_embedded_dashboard),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
