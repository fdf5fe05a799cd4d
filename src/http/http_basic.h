/* HTTP Basic authentication against bcrypt hashes (issue 14), as
 * Prometheus's web configuration does it (`basic_auth_users`: user name to
 * bcrypt hash). bcrypt is slow on purpose (about 100 ms at cost 10), so a
 * verification never runs on an HTTP thread: the server asks
 * http_basic_cached first (microseconds: a keyed digest of a pair that
 * verified before), and only on a miss hands the request to a pool that
 * calls http_basic_verify. Failures are limited per client address
 * (IPv6 per /64), so a flood of wrong passwords costs at most a few
 * bcrypt runs a second per address, never the scrapes. */
#ifndef GPULSE_HTTP_BASIC_H
#define GPULSE_HTTP_BASIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_BASIC_MAX_USERS 16
#define HTTP_BASIC_MAX_NAME 64       /* bytes of a user name */
#define HTTP_BASIC_MAX_PASSWORD 256  /* longer passwords never verify */
#define HTTP_BASIC_CACHE 64          /* verified pairs remembered */
#define HTTP_BASIC_ADDRESSES 256     /* addresses whose failures are tracked */
#define HTTP_BASIC_FAIL_BURST 5      /* failures an address may make at once */
#define HTTP_BASIC_FAIL_PERIOD_NS 2000000000LL /* then one per this long */

struct sockaddr;

struct http_basic_user {
	const char *name;            /* no ':' (Basic splits there), no control bytes */
	const char *hash;            /* "$2a$", "$2b$" or "$2y$" bcrypt, 60 bytes */
};

/* True when `hash` has bcrypt's form: $2a$, $2b$ or $2y$, a cost of 04 to
 * 31, '$', then 53 characters of bcrypt's base64. Pure. */
bool http_basic_hash_ok(const char *hash);
/* True when `name` may be a Basic user name: 1..HTTP_BASIC_MAX_NAME bytes,
 * no ':' and no control characters. Pure. */
bool http_basic_name_ok(const char *name);

struct http_basic;

/* The user table, copied (the strings need not outlive the call). 0,
 * GPULSE_EINVAL (n is 0 or too many, a bad name or hash, a name twice),
 * GPULSE_EIO (no random key for the cache) or GPULSE_ENOMEM. Free with
 * http_basic_free, which accepts NULL and wipes what it held. */
int http_basic_new(struct http_basic **out, const struct http_basic_user *users, size_t n);
void http_basic_free(struct http_basic *b);

/* True when user:pass verified before. Compares a keyed SHA-256 digest of
 * the pair (the password itself is never kept) with every cached one, in
 * time that does not depend on where or whether it matches. Thread-safe,
 * quick: for the HTTP threads. */
bool http_basic_cached(struct http_basic *b, const char *user, const char *pass);

/* Run bcrypt (slow: for a pool thread) and cache a success. An unknown
 * user is checked against a dummy hash of the same cost as the first
 * user's, so the time taken does not say which names exist. Thread-safe. */
bool http_basic_verify(struct http_basic *b, const char *user, const char *pass);

/* The failure limiter. Each address has a bucket of HTTP_BASIC_FAIL_BURST
 * tries that refills one per HTTP_BASIC_FAIL_PERIOD_NS. http_basic_try
 * takes a try before an uncached password is verified, so that attempts
 * under way at once count (taking it only once bcrypt had failed let 8
 * concurrent clients make 65 attempts in 13 s instead of 11); false when
 * the bucket is empty, with *retry_s (when not NULL) the whole seconds
 * until it is not. http_basic_refund gives the try back when the
 * password verified (or was never verified): only failures are limited.
 * The table holds HTTP_BASIC_ADDRESSES addresses; a new one replaces the
 * one whose bucket is fullest (it has the least to remember).
 * Thread-safe. */
bool http_basic_try(struct http_basic *b, const struct sockaddr *peer, int64_t now_ns,
		    unsigned *retry_s);
void http_basic_refund(struct http_basic *b, const struct sockaddr *peer, int64_t now_ns);

/* Counters since start: verifications run, and failures (wrong user or
 * password, verified or refused by the limiter). */
void http_basic_stats(struct http_basic *b, uint64_t *verified, uint64_t *failed);

#endif
