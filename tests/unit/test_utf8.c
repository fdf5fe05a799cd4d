/* UTF-8 well-formedness (src/common/utf8.c) and the JSON string writer
 * that relies on it (buf_put_json_string). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/utf8.h"

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

/* buf_put_json_string(s) as a NUL-terminated string the test frees. */
static char *json(const char *s)
{
	struct buf b;
	buf_init(&b, 4096);
	assert_int_equal(buf_put_json_string(&b, s), 0);
	return buf_steal(&b);
}

#define assert_json(in, want)                      \
	do {                                       \
		char *got_ = json(in);             \
		assert_string_equal(got_, want);   \
		free(got_);                        \
	} while (0)

/* Every byte that is not part of well-formed UTF-8 becomes U+FFFD, as Go's
 * encoding/json writes it (the escape \ufffd, one per byte), so every JSON
 * answer is UTF-8 whatever a request or a GPU name held. */
static void test_json_string(void **state)
{
	(void)state;
	/* Valid text, multi-byte included, is unchanged. */
	assert_json("plain", "\"plain\"");
	assert_json("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd \xf4\x8f\xbf\xbf",
		    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd \xf4\x8f\xbf\xbf\"");
	assert_json("", "\"\"");
	/* Escapes as before. */
	assert_json("a\"b\\c\nd\re\tf\x01\x7f", "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001\x7f\"");
	/* Invalid bytes. */
	assert_json("\xff\xfe", "\"\\ufffd\\ufffd\"");
	assert_json("a\x80" "b", "\"a\\ufffdb\"");
	assert_json("\xf5\x80\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	/* Overlong encodings of '/' and of U+0000. */
	assert_json("\xc0\xaf", "\"\\ufffd\\ufffd\"");
	assert_json("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"");
	assert_json("\xf0\x80\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	assert_json("\xc0\x80", "\"\\ufffd\\ufffd\"");
	/* Surrogates, and a code point above U+10FFFF. */
	assert_json("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
	assert_json("\xed\xbf\xbfx", "\"\\ufffd\\ufffd\\ufffdx\"");
	assert_json("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	/* Sequences cut short, at the end and before other text. */
	assert_json("a\xe2\x82", "\"a\\ufffd\\ufffd\"");
	assert_json("\xf0\x9f\x98", "\"\\ufffd\\ufffd\\ufffd\"");
	assert_json("\xc3", "\"\\ufffd\"");
	assert_json("\xc3(\xe2\x82\xac", "\"\\ufffd(\xe2\x82\xac\"");
	assert_json("\xe2\x82\"", "\"\\ufffd\\ufffd\\\"\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seq_len),
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_json_string),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
