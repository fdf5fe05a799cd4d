/* Tests for HTTP Basic authentication's core (src/http/http_basic.c):
 * the hash and name checks, bcrypt verification against fixed vectors
 * (two from crypt_blowfish's own test suite, so not only our library's
 * word), the dummy hash that makes unknown users cost what known ones do,
 * the cache of verified pairs (never of failures), and the per-address
 * failure limiter (IPv6 per /64; a try is taken before bcrypt and given
 * back on success). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <cmocka.h>

#include "http/http_basic.h"
#include "common/status.h"

/* crypt_blowfish 1.3's wrapper.c test vectors (Solar Designer). */
#define CB_HASH "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW" /* "U*U" */
#define CB_HASH2 "$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK" /* "U*U*" */
/* Cost 10, as htpasswd -B makes them: "hunter2". */
#define H10 "$2y$10$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e"
/* Cost 4, $2b$: "correct horse". */
#define H04 "$2b$04$gpulsetestsaltgpulse.usdyC1vXtlPhUkTAUkyESI9kLY5zIeCe"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_forms(void **state)
{
	(void)state;
	assert_true(http_basic_hash_ok(CB_HASH));
	assert_true(http_basic_hash_ok(H10));
	assert_true(http_basic_hash_ok(H04));
	assert_false(http_basic_hash_ok(NULL));
	assert_false(http_basic_hash_ok(""));
	assert_false(http_basic_hash_ok("hunter2"));
	assert_false(http_basic_hash_ok("$2x$10$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e"));
	assert_false(http_basic_hash_ok("$2y$03$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e"));
	assert_false(http_basic_hash_ok("$2y$32$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e"));
	assert_false(http_basic_hash_ok("$2y$10$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5"));
	assert_false(http_basic_hash_ok("$2y$10$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e!"));
	assert_false(http_basic_hash_ok("$2y$10$gpulsetestsaltgpulse-u9bzToBj4eZj15FTExTvvzxdnHDxia5e"));
	/* SHA-512 crypt is not bcrypt. */
	assert_false(http_basic_hash_ok("$6$salt$abc"));

	assert_true(http_basic_name_ok("alice"));
	assert_true(http_basic_name_ok("prometheus@scraper-01"));
	assert_false(http_basic_name_ok(""));
	assert_false(http_basic_name_ok(NULL));
	assert_false(http_basic_name_ok("a:b"));
	assert_false(http_basic_name_ok("a\tb"));
	char longname[HTTP_BASIC_MAX_NAME + 2];
	memset(longname, 'x', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	assert_false(http_basic_name_ok(longname));
	longname[HTTP_BASIC_MAX_NAME] = '\0';
	assert_true(http_basic_name_ok(longname));

	struct http_basic *b = NULL;
	struct http_basic_user bad[] = {{"a:b", H10}};
	assert_int_equal(http_basic_new(&b, bad, 1), GPULSE_EINVAL);
	struct http_basic_user twice[] = {{"a", H10}, {"a", H04}};
	assert_int_equal(http_basic_new(&b, twice, 2), GPULSE_EINVAL);
	struct http_basic_user nohash[] = {{"a", "plain"}};
	assert_int_equal(http_basic_new(&b, nohash, 1), GPULSE_EINVAL);
	assert_int_equal(http_basic_new(&b, nohash, 0), GPULSE_EINVAL);
	assert_null(b);
	http_basic_free(NULL);
}

static void test_verify_and_cache(void **state)
{
	(void)state;
	struct http_basic *b = NULL;
	struct http_basic_user users[] = {{"alice", H10}, {"bob", H04}, {"carol", CB_HASH},
					  {"dave", CB_HASH2}};
	assert_int_equal(http_basic_new(&b, users, 4), 0);

	assert_true(http_basic_verify(b, "carol", "U*U"));
	assert_true(http_basic_verify(b, "dave", "U*U*"));
	assert_false(http_basic_verify(b, "carol", "U*U*"));
	assert_true(http_basic_verify(b, "bob", "correct horse"));
	assert_false(http_basic_verify(b, "bob", "correct horsE"));
	assert_false(http_basic_verify(b, "bob", "hunter2")); /* alice's */
	assert_false(http_basic_verify(b, "BOB", "correct horse"));

	/* Not cached before it verifies; cached after; a failure never is. */
	assert_false(http_basic_cached(b, "alice", "hunter2"));
	double t0 = now_s();
	assert_true(http_basic_verify(b, "alice", "hunter2"));
	double known = now_s() - t0;
	assert_true(http_basic_cached(b, "alice", "hunter2"));
	assert_false(http_basic_cached(b, "alice", "hunter3"));
	assert_false(http_basic_cached(b, "alice", "hunter2 "));
	assert_false(http_basic_cached(b, "bob", "hunter2"));
	/* "alice"+"hunter2" is not "alicehunter"+"2" nor "alic"+"ehunter2". */
	assert_false(http_basic_cached(b, "alic", "ehunter2"));
	assert_false(http_basic_verify(b, "alice", "wrong"));
	assert_false(http_basic_cached(b, "alice", "wrong"));
	/* Verification is bcrypt at cost 10: tens of milliseconds; the
	 * cache is a keyed digest: far less. */
	assert_true(known > 0.01);
	t0 = now_s();
	for (int i = 0; i < 1000; i++)
		assert_true(http_basic_cached(b, "alice", "hunter2"));
	double cached = (now_s() - t0) / 1000;
	assert_true(cached < known / 100);

	/* An unknown user costs a bcrypt run of the first user's cost too,
	 * so timing does not tell names that exist. */
	t0 = now_s();
	assert_false(http_basic_verify(b, "mallory", "hunter2"));
	double unknown = now_s() - t0;
	if (unknown < known / 4)
		fail_msg("unknown user took %.1f ms, a known one %.1f ms", unknown * 1e3, known * 1e3);
	/* Too long a password never verifies, and is never cached. */
	char big[HTTP_BASIC_MAX_PASSWORD + 2];
	memset(big, 'p', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_false(http_basic_verify(b, "alice", big));
	assert_false(http_basic_cached(b, "alice", big));

	uint64_t verified, failed;
	http_basic_stats(b, &verified, &failed);
	assert_int_equal(verified, 11);
	assert_int_equal(failed, 7);
	http_basic_free(b);
}

static struct sockaddr_in v4(const char *a)
{
	struct sockaddr_in s = {.sin_family = AF_INET};
	assert_int_equal(inet_pton(AF_INET, a, &s.sin_addr), 1);
	return s;
}

static struct sockaddr_in6 v6(const char *a)
{
	struct sockaddr_in6 s = {.sin6_family = AF_INET6};
	assert_int_equal(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
	return s;
}

static void test_failure_limit(void **state)
{
	(void)state;
	struct http_basic *b = NULL;
	struct http_basic_user users[] = {{"bob", H04}};
	assert_int_equal(http_basic_new(&b, users, 1), 0);
	struct sockaddr_in a = v4("192.0.2.1"), other = v4("192.0.2.2");
	struct sockaddr_in6 n1 = v6("2001:db8:1:2::1"), n2 = v6("2001:db8:1:2:ffff::9"),
			    n3 = v6("2001:db8:1:3::1");
	const struct sockaddr *pa = (const struct sockaddr *)&a;
	int64_t t = 1000000000000LL;
	unsigned retry = 0;

	/* A burst of failures, then none until the bucket refills. */
	for (int i = 0; i < HTTP_BASIC_FAIL_BURST; i++)
		assert_true(http_basic_try(b, pa, t, &retry));
	assert_false(http_basic_try(b, pa, t, &retry));
	assert_int_equal(retry, HTTP_BASIC_FAIL_PERIOD_NS / 1000000000);
	assert_false(http_basic_try(b, pa, t + HTTP_BASIC_FAIL_PERIOD_NS / 2, &retry));
	assert_int_equal(retry, 1);
	/* Another address is not affected. */
	assert_true(http_basic_try(b, (const struct sockaddr *)&other, t, NULL));
	/* One failure more per period. */
	t += HTTP_BASIC_FAIL_PERIOD_NS;
	assert_true(http_basic_try(b, pa, t, NULL));
	assert_false(http_basic_try(b, pa, t, NULL));
	/* A try that verified is given back. */
	http_basic_refund(b, pa, t);
	assert_true(http_basic_try(b, pa, t, NULL));
	assert_false(http_basic_try(b, pa, t, NULL));

	/* IPv6 counts per /64. */
	for (int i = 0; i < HTTP_BASIC_FAIL_BURST; i++)
		assert_true(http_basic_try(b, (const struct sockaddr *)&n1, t, NULL));
	assert_false(http_basic_try(b, (const struct sockaddr *)&n2, t, NULL));
	assert_true(http_basic_try(b, (const struct sockaddr *)&n3, t, NULL));

	/* A table full of other addresses forgets the fullest buckets, not
	 * the empty one of an address that keeps failing. */
	for (int i = 0; i < HTTP_BASIC_ADDRESSES * 2; i++) {
		struct sockaddr_in x = {.sin_family = AF_INET};
		x.sin_addr.s_addr = htonl(0x0a000000u + (uint32_t)i);
		assert_true(http_basic_try(b, (const struct sockaddr *)&x, t, NULL));
	}
	assert_false(http_basic_try(b, pa, t, NULL));
	http_basic_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_verify_and_cache),
		cmocka_unit_test(test_failure_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
