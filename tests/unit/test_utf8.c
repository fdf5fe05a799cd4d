/* UTF-8 well-formedness (src/common/utf8.c) and the JSON string writer
 * that relies on it (buf_put_json_string). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

static void test_seq_len(void **state)
{
	(void)state;
	assert_int_equal(utf8_seq_len((const unsigned char *)"a"), 1);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xc3\xa9"), 2);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82\xac"), 3);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf0\x9f\x98\x80"), 4);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xef\xbf\xbd"), 3);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf4\x8f\xbf\xbf"), 4);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\x80"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xc0\xaf"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe0\x80\xaf"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf0\x80\x80\xaf"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xed\xa0\x80"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf4\x90\x80\x80"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf5\x80\x80\x80"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xff"), 0);
}

static void test_clean(void **state)
{
	(void)state;
	char out[16];
	assert_int_equal(utf8_clean(out, sizeof out, "plain"), 5);
	assert_string_equal(out, "plain");
	utf8_clean(out, sizeof out, "caf\xc3\xa9");
	assert_string_equal(out, "caf\xc3\xa9");
	utf8_clean(out, sizeof out, "a\xff" "b\xc3");
	assert_string_equal(out, "a?b?");
	utf8_clean(out, sizeof out, "\xed\xa0\x80"); /* a surrogate */
	assert_string_equal(out, "???");
	utf8_clean(out, sizeof out, "\xc0\xaf"); /* overlong '/' */
	assert_string_equal(out, "??");
	/* Truncation never splits a character. */
	utf8_clean(out, 6, "abcd\xc3\xa9");
	assert_string_equal(out, "abcd");
	assert_int_equal(utf8_clean(out, 1, "abc"), 0);
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seq_len),
		cmocka_unit_test(test_clean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
