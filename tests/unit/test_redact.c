/* Redaction of URLs (src/common/redact.c): the password as Prometheus
 * 2.42 shows a remote_write url with userinfo in /api/v1/status/config
 * (Go's url.URL.Redacted), query values masked too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/redact.h"

static void expect(const char *in, const char *want)
{
	char out[512];
	size_t n = redact_url(out, sizeof out, in);
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));
	char *d = redact_url_dup(in);
	assert_non_null(d);
	assert_string_equal(d, want);
	free(d);
}

static void test_userinfo(void **state)
{
	(void)state;
	/* Prometheus 2.42's answer for this url in its config API. */
	expect("https://user:hunter2@receiver.example:8443/api/v1/write",
	       "https://user:xxxxx@receiver.example:8443/api/v1/write");
	expect("http://u:p@h", "http://u:xxxxx@h");
	expect("http://u:@h/x", "http://u:xxxxx@h/x");
	/* Go splits the userinfo at its last '@' and its first ':'. */
	expect("http://a@b:p:q@h/", "http://a@b:xxxxx@h/");
	/* A username alone stays, as in Go and Prometheus. */
	expect("http://onlyuser@r2.example/push", "http://onlyuser@r2.example/push");
	/* '@' and ':' past the authority are the path's. */
	expect("http://h:9090/a@b:c", "http://h:9090/a@b:c");
	/* Quoted in an error, a URL that does not parse is masked too. */
	expect("htps//user:pass@host/x", "htps//user:xxxxx@host/x");
	expect("user:pass@host", "user:xxxxx@host");
}

static void test_query(void **state)
{
	(void)state;
	expect("https://h/p?token=abc123&tenant=t1", "https://h/p?token=xxxxx&tenant=xxxxx");
	expect("https://u:pw@h/p?api_key=k#frag", "https://u:xxxxx@h/p?api_key=xxxxx#frag");
	expect("https://h/p?bare&empty=&x=1&", "https://h/p?xxxxx&empty=&x=xxxxx&");
	expect("https://h/p?", "https://h/p?");
	expect("https://h/p#a?b=c", "https://h/p#a?b=c");
}

static void test_plain(void **state)
{
	(void)state;
	expect("", "");
	expect("/etc/gpulse/token", "/etc/gpulse/token");
	expect("http://127.0.0.1:9093/api/v2/alerts", "http://127.0.0.1:9093/api/v2/alerts");
}

/* Cut to fit as snprintf, the whole length returned; nothing of the
 * password in a cut result either. */
static void test_cut(void **state)
{
	(void)state;
	const char *in = "https://user:hunter2@host/p";
	const char *want = "https://user:xxxxx@host/p";
	char out[16];
	memset(out, 'Z', sizeof out);
	assert_int_equal(redact_url(out, sizeof out, in), strlen(want));
	assert_int_equal(strlen(out), sizeof out - 1);
	assert_memory_equal(out, want, sizeof out - 1);
	assert_int_equal(redact_url(out, 1, in), strlen(want));
	assert_string_equal(out, "");
	assert_int_equal(redact_url(NULL, 0, in), strlen(want));
	assert_null(redact_url_dup(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_userinfo),
		cmocka_unit_test(test_query),
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
