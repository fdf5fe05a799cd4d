/* What the tests of the HTTP server share (test_http.c, test_http_static.c):
 * one request through libcurl, its status, body and response headers
 * kept in bounded buffers. Static functions: each test includes it once. */
#ifndef GPULSE_TESTS_HTTP_TEST_H
#define GPULSE_TESTS_HTTP_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <curl/curl.h>

#include "common/buf.h"

struct reply {
	long status;
	struct buf body;
	struct buf headers;
};

static size_t http_test_on_data(char *p, size_t size, size_t n, void *ctx)
{
	buf_append(ctx, p, size * n);
	return size * n;
}

/* One request to url. `method` NULL: GET (with `body`: POST; "HEAD": no
 * body read). h1, h2: extra request header lines, NULL for none. `body`
 * NULL: none. A transfer that fails fails the test; the caller frees *r
 * with reply_free. */
static void http_test_fetch(struct reply *r, const char *url, const char *method,
			    const char *h1, const char *h2, const char *body)
{
	CURL *c = curl_easy_init();
	assert_non_null(c);
	buf_init(&r->body, 4 << 20);
	buf_init(&r->headers, 1 << 16);
	struct curl_slist *hdr = NULL;
	if (h1)
		hdr = curl_slist_append(hdr, h1);
	if (h2)
		hdr = curl_slist_append(hdr, h2);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_test_on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, http_test_on_data);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &r->headers);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	/* the TLS tests' certificates are self-signed */
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	if (method && strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (method)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		fail_msg("%s: %s", url, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
}

static void reply_free(struct reply *r)
{
	buf_free(&r->body);
	buf_free(&r->headers);
}

#endif
