/* Token buckets per client address (issue 14): what one address (IPv6:
 * one /64, as the connection guard counts) may do per second. Used for
 * the request rate limit (http.rate_limit) and for Basic authentication's
 * failures (http_basic.c). Memory is fixed at creation: a table of
 * `addresses` buckets; a new address takes a free slot or replaces the
 * fullest bucket, the one with least to remember, so an address that is
 * being limited keeps its empty bucket while a flood of new addresses
 * passes through. */
#ifndef GPULSE_HTTP_LIMIT_H
#define GPULSE_HTTP_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;
struct http_limit;

/* Buckets of `burst` tokens (at least 1) refilled at `rate_per_s` (above
 * 0) for up to `addresses` (at least 1) addresses. 0, GPULSE_EINVAL or
 * GPULSE_ENOMEM. Free with http_limit_free, which accepts NULL. */
int http_limit_new(struct http_limit **out, double rate_per_s, double burst, size_t addresses);
void http_limit_free(struct http_limit *l);

/* Take one token from `peer`'s bucket: true when there was one. When
 * there was none, false, and *retry_s (when not NULL) is the whole
 * seconds, rounded up, until there is. http_limit_peek says the same
 * without taking the token. Thread-safe; constant time in the table's
 * size. */
bool http_limit_take(struct http_limit *l, const struct sockaddr *peer, int64_t now_ns,
		     unsigned *retry_s);
bool http_limit_peek(struct http_limit *l, const struct sockaddr *peer, int64_t now_ns,
		     unsigned *retry_s);

/* Give back a token taken for `peer` (an attempt that turned out not to
 * count), never beyond the burst. Thread-safe. */
void http_limit_give(struct http_limit *l, const struct sockaddr *peer, int64_t now_ns);

/* Whole seconds, rounded up, an empty bucket waits for one token. */
unsigned http_limit_retry_s(const struct http_limit *l);

#endif
