/* The Prometheus error answer (common/promjson.c): the exact bytes
 * Prometheus's API writes for an error (web/api/v1: status, errorType,
 * error, in that order), read back by jansson and by promjson_open as the
 * CLI reads a server's error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/promjson.h"
#include "common/status.h"

static void test_error_bytes(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 4096);
	assert_int_equal(promjson_put_error(&b, "bad_data", "invalid parameter \"query\": 1 +"), 0);
	assert_string_equal(b.data, "{\"status\":\"error\",\"errorType\":\"bad_data\","
				    "\"error\":\"invalid parameter \\\"query\\\": 1 +\"}\n");
	buf_free(&b);
}

/* Control characters and invalid UTF-8 in a message still give JSON that
 * says the same text back. */
static void test_error_reads_back(void **state)
{
	(void)state;
	const char *msg = "line one\nline\ttwo \\ \"q\" \x01 end";
	struct buf b;
	buf_init(&b, 4096);
	assert_int_equal(promjson_put_error(&b, "execution", msg), 0);
	json_error_t je;
	json_t *j = json_loadb(b.data, b.len, 0, &je);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "status")), "error");
	assert_string_equal(json_string_value(json_object_get(j, "errorType")), "execution");
	assert_string_equal(json_string_value(json_object_get(j, "error")), msg);
	json_decref(j);

	json_t *root = NULL, *result = NULL;
	const char *type = NULL;
	char err[512];
	assert_int_equal(promjson_open(b.data, b.len, &root, &type, &result, err, sizeof err),
			 GPULSE_EIO);
	assert_null(root);
	assert_non_null(strstr(err, "line\ttwo"));
	buf_free(&b);
}

/* A full buffer says so, as every buf writer does. */
static void test_error_bounded(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 16);
	assert_int_equal(promjson_put_error(&b, "internal", "a message longer than the bound"),
			 GPULSE_ELIMIT);
	assert_true(b.failed);
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_error_bytes),
		cmocka_unit_test(test_error_reads_back),
		cmocka_unit_test(test_error_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
