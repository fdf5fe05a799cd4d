/* Tests for the per-address token buckets (src/http/http_limit.c): burst,
 * refill, Retry-After's rounding, IPv6 per /64 and IPv4-mapped as IPv4,
 * and a table full of new addresses that does not forget a limited one. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "http/http_limit.h"
#include "common/status.h"

#define SEC 1000000000LL

static const struct sockaddr *sa4(struct sockaddr_in *s, const char *a)
{
	memset(s, 0, sizeof *s);
	s->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, a, &s->sin_addr), 1);
	return (const struct sockaddr *)s;
}

static const struct sockaddr *sa6(struct sockaddr_in6 *s, const char *a)
{
	memset(s, 0, sizeof *s);
	s->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, a, &s->sin6_addr), 1);
	return (const struct sockaddr *)s;
}

static void test_bucket(void **state)
{
	(void)state;
	struct http_limit *l = NULL;
	assert_int_equal(http_limit_new(&l, 0, 1, 1), GPULSE_EINVAL);
	assert_int_equal(http_limit_new(&l, 1, 0.5, 1), GPULSE_EINVAL);
	assert_int_equal(http_limit_new(&l, 1, 1, 0), GPULSE_EINVAL);
	assert_null(l);
	http_limit_free(NULL);

	assert_int_equal(http_limit_new(&l, 4, 3, 16), 0); /* 4/s, burst 3 */
	assert_int_equal(http_limit_retry_s(l), 1);
	struct sockaddr_in a, b;
	int64_t t = 100 * SEC;
	unsigned retry = 0;
	for (int i = 0; i < 3; i++)
		assert_true(http_limit_take(l, sa4(&a, "198.51.100.7"), t, &retry));
	assert_false(http_limit_peek(l, sa4(&a, "198.51.100.7"), t, &retry));
	assert_false(http_limit_take(l, sa4(&a, "198.51.100.7"), t, &retry));
	assert_int_equal(retry, 1);
	assert_true(http_limit_take(l, sa4(&b, "198.51.100.8"), t, NULL));
	/* A quarter second gives one token back, no more. */
	t += SEC / 4;
	assert_true(http_limit_peek(l, sa4(&a, "198.51.100.7"), t, NULL));
	assert_true(http_limit_take(l, sa4(&a, "198.51.100.7"), t, NULL));
	assert_false(http_limit_take(l, sa4(&a, "198.51.100.7"), t, NULL));
	/* Long idle refills to the burst, not beyond. */
	t += 60 * SEC;
	for (int i = 0; i < 3; i++)
		assert_true(http_limit_take(l, sa4(&a, "198.51.100.7"), t, NULL));
	assert_false(http_limit_take(l, sa4(&a, "198.51.100.7"), t, NULL));
	/* A clock that goes backwards (it should not) takes nothing back. */
	assert_false(http_limit_take(l, sa4(&a, "198.51.100.7"), t - SEC, NULL));
	http_limit_free(l);

	/* A slow rate: Retry-After rounds up. */
	assert_int_equal(http_limit_new(&l, 0.3, 1, 4), 0);
	assert_int_equal(http_limit_retry_s(l), 4);
	assert_true(http_limit_take(l, sa4(&a, "192.0.2.1"), t, NULL));
	assert_false(http_limit_take(l, sa4(&a, "192.0.2.1"), t, &retry));
	assert_int_equal(retry, 4);
	http_limit_free(l);
}

static void test_addresses(void **state)
{
	(void)state;
	struct http_limit *l = NULL;
	assert_int_equal(http_limit_new(&l, 1, 2, 8), 0);
	struct sockaddr_in6 x;
	struct sockaddr_in y;
	int64_t t = 5 * SEC;
	/* One /64 is one client; the next /64 is another. */
	assert_true(http_limit_take(l, sa6(&x, "2001:db8:0:1::1"), t, NULL));
	assert_true(http_limit_take(l, sa6(&x, "2001:db8:0:1:8000::2"), t, NULL));
	assert_false(http_limit_take(l, sa6(&x, "2001:db8:0:1:ffff:ffff:ffff:ffff"), t, NULL));
	assert_true(http_limit_take(l, sa6(&x, "2001:db8:0:2::1"), t, NULL));
	/* IPv4-mapped IPv6 is the IPv4 address. */
	assert_true(http_limit_take(l, sa4(&y, "203.0.113.5"), t, NULL));
	assert_true(http_limit_take(l, sa6(&x, "::ffff:203.0.113.5"), t, NULL));
	assert_false(http_limit_take(l, sa4(&y, "203.0.113.5"), t, NULL));
	/* 100 new addresses through a table of 8 do not free the limited one. */
	for (int i = 0; i < 100; i++) {
		struct sockaddr_in z = {.sin_family = AF_INET};
		z.sin_addr.s_addr = htonl(0x0a000000u + (uint32_t)i);
		assert_true(http_limit_take(l, (const struct sockaddr *)&z, t, NULL));
	}
	assert_false(http_limit_take(l, sa4(&y, "203.0.113.5"), t, NULL));
	http_limit_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket),
		cmocka_unit_test(test_addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
