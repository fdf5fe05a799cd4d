/* FNV-1a (common/hash.h) against the published test vectors of the
 * algorithm's authors (Fowler, Noll, Vo: "FNV-1a 64-bit" column of
 * http://www.isthe.com/chongo/src/fnv/test_fnv.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"

static const struct {
	const char *s;
	uint64_t want;
} vectors[] = {
	{"", 0xcbf29ce484222325ull},
	{"a", 0xaf63dc4c8601ec8cull},
	{"b", 0xaf63df4c8601f1a5ull},
	{"c", 0xaf63de4c8601eff2ull},
	{"foo", 0xdcb27518fed9d577ull},
	{"foobar", 0x85944171f73967e8ull},
	{"chongo was here!\n", 0x46810940eff5f915ull},
};

static void test_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
		const char *s = vectors[i].s;
		if (fnv1a64_str(s) != vectors[i].want)
			fail_msg("fnv1a64_str(\"%s\") = %016llx, want %016llx", s,
				 (unsigned long long)fnv1a64_str(s), (unsigned long long)vectors[i].want);
		assert_true(fnv1a64(s, strlen(s)) == vectors[i].want);
	}
}

/* Hashing in pieces is hashing the whole. */
static void test_incremental(void **state)
{
	(void)state;
	uint64_t h = fnv1a64_add(FNV1A64_OFFSET, "foo", 3);
	assert_true(fnv1a64_add_str(h, "bar") == 0x85944171f73967e8ull);
	/* A NUL inside the bytes counts: only the _str forms stop at one. */
	assert_true(fnv1a64("a\0b", 3) != fnv1a64_str("ab"));
}

/* Fields end with 0xff: a different split of the same bytes differs, and
 * the 0xff is hashed as a byte would be. */
static void test_fields(void **state)
{
	(void)state;
	uint64_t ab_c = fnv1a64_add_field(fnv1a64_add_field(FNV1A64_OFFSET, "ab"), "c");
	uint64_t a_bc = fnv1a64_add_field(fnv1a64_add_field(FNV1A64_OFFSET, "a"), "bc");
	assert_true(ab_c != a_bc);
	assert_true(fnv1a64_add_field(FNV1A64_OFFSET, "ab") == fnv1a64("ab\xff", 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_incremental),
		cmocka_unit_test(test_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
