/* `gpulse fleet`'s judging parts (src/cli/fleet.c): the instant-vector
 * parser (shapes that parse, shapes refused with a reason, the bound on
 * series) and the robust z-score with its outlier rule, against values
 * worked out here from the definition. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/fleet.h"
#include "common/status.h"

static int parse(const char *text, size_t max, struct fleet_vector *v, char *err, size_t errlen)
{
	return fleet_parse_vector(text, strlen(text), max, v, err, errlen);
}

static void test_parse_vector(void **state)
{
	(void)state;
	const char *text =
		"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		"{\"metric\":{\"__name__\":\"gpulse_gpu_up\",\"instance\":\"n1:9401\",\"gpu\":\"0\","
		"\"uuid\":\"GPU-a\"},\"value\":[1700000000.5,\"1\"]},"
		"{\"metric\":{\"gpu\":\"1\"},\"value\":[1700000000.5,\"NaN\"]},"
		"{\"metric\":{},\"value\":[1700000000,\"-Inf\"]},"
		"{\"metric\":{\"gpu\":\"2\"},\"value\":[1700000000,\"2.5e-3\"]}]}}";
	struct fleet_vector v;
	char err[256] = "";
	assert_int_equal(parse(text, 10, &v, err, sizeof err), 0);
	assert_int_equal(v.n, 4);
	assert_string_equal(fleet_label(&v.s[0], "instance"), "n1:9401");
	assert_string_equal(fleet_label(&v.s[0], "uuid"), "GPU-a");
	assert_string_equal(fleet_label(&v.s[1], "uuid"), "");
	assert_true(v.s[0].value == 1);
	assert_true(isnan(v.s[1].value));
	assert_true(isinf(v.s[2].value) && v.s[2].value < 0);
	assert_true(fabs(v.s[3].value - 0.0025) < 1e-15);
	fleet_vector_free(&v);
	fleet_vector_free(&v); /* twice: a freed vector is a zeroed one */

	/* An empty answer is a vector of no samples. */
	assert_int_equal(parse("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}",
			       10, &v, err, sizeof err),
			 0);
	assert_int_equal(v.n, 0);
	fleet_vector_free(&v);
}

static void test_parse_refusals(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		int rc;
		const char *says;
	} bad[] = {
		{"<html>502 Bad Gateway</html>", GPULSE_EPARSE, "not JSON"},
		{"{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error at char 3\"}",
		 GPULSE_EIO, "parse error at char 3"},
		{"{\"data\":{}}", GPULSE_EPARSE, "status"},
		{"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]}}", GPULSE_EPARSE,
		 "matrix"},
		{"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\"}}", GPULSE_EPARSE, "data.result"},
		{"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"value\":[1,\"1\"]}]}}",
		 GPULSE_EPARSE, "result[0]"},
		{"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		 "{\"metric\":{},\"value\":[1,\"1\"]},{\"metric\":{\"gpu\":0},\"value\":[1,\"1\"]}]}}",
		 GPULSE_EPARSE, "result[1] label \"gpu\""},
		{"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		 "{\"metric\":{},\"value\":[1,1]}]}}",
		 GPULSE_EPARSE, "value is not a number in a string"},
		{"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		 "{\"metric\":{},\"value\":[1,\"12abc\"]}]}}",
		 GPULSE_EPARSE, "result[0] value"},
		{"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		 "{\"metric\":{},\"value\":[\"1\",\"1\"]}]}}",
		 GPULSE_EPARSE, "[time, \"value\"]"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct fleet_vector v;
		char err[256] = "";
		assert_int_equal(parse(bad[i].text, 10, &v, err, sizeof err), bad[i].rc);
		if (!strstr(err, bad[i].says))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err, bad[i].says);
		assert_int_equal(v.n, 0);
		assert_null(v.s);
		fleet_vector_free(&v);
	}
	/* The bound: three series where two are allowed. */
	const char *three = "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
			    "{\"metric\":{},\"value\":[1,\"1\"]},{\"metric\":{},\"value\":[1,\"1\"]},"
			    "{\"metric\":{},\"value\":[1,\"1\"]}]}}";
	struct fleet_vector v;
	char err[256] = "";
	assert_int_equal(parse(three, 2, &v, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "3 series"));
	assert_int_equal(parse(three, 3, &v, err, sizeof err), 0);
	fleet_vector_free(&v);
}

static void test_robust_z(void **state)
{
	(void)state;
	/* median 3; deviations 2 1 0 1 97, MAD 1: z = 0.6745 (x - 3). */
	const double x[] = {1, 2, 3, 4, 100};
	double z[6], med = 0;
	assert_int_equal(fleet_robust_z(x, 5, z, &med), 0);
	assert_true(med == 3);
	for (int i = 0; i < 5; i++)
		assert_true(fabs(z[i] - 0.6745 * (x[i] - 3)) < 1e-12);
	assert_true(fleet_is_outlier(x[4], z[4], med, 10));
	assert_false(fleet_is_outlier(x[0], z[0], med, 0));
	/* Far in z but within min_abs of the median: not an outlier. */
	assert_false(fleet_is_outlier(x[4], z[4], med, 98));

	/* More than half equal: MAD 0, so the mean absolute deviation
	 * (10 / 5 = 2) times 1.2533 scales it: z(20) = 10 / 2.5066. */
	const double same[] = {10, 10, 10, 10, 20};
	assert_int_equal(fleet_robust_z(same, 5, z, &med), 0);
	assert_true(med == 10);
	assert_true(fabs(z[4] - 10 / (1.2533 * 2)) < 1e-12);
	assert_true(z[0] == 0);
	assert_true(fleet_is_outlier(same[4], z[4], med, 1));

	/* All equal: nobody is odd. */
	const double flat[] = {5, 5, 5};
	assert_int_equal(fleet_robust_z(flat, 3, z, &med), 0);
	for (int i = 0; i < 3; i++) {
		assert_true(z[i] == 0);
		assert_false(fleet_is_outlier(flat[i], z[i], med, 0));
	}

	/* Non-finite values take no part and get NAN; an even count's
	 * median is the mean of the middle two. */
	const double gaps[] = {NAN, 1, 2, INFINITY, 3, 4};
	assert_int_equal(fleet_robust_z(gaps, 6, z, &med), 0);
	assert_true(med == 2.5);
	assert_true(isnan(z[0]) && isnan(z[3]));
	assert_false(fleet_is_outlier(gaps[0], z[0], med, 0));

	/* Too few peers to judge. */
	const double two[] = {1, 100, NAN};
	assert_int_equal(fleet_robust_z(two, 3, z, &med), GPULSE_EINVAL);
	assert_true(isnan(z[0]) && isnan(z[1]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_vector),
		cmocka_unit_test(test_parse_refusals),
		cmocka_unit_test(test_robust_z),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
