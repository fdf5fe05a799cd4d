/* `gpulse query` rendering: documents shaped like gpulsed's
 * /api/v1/query and /api/v1/query_range answers, rendered into memory.
 * Labels print `__name__` first and the rest sorted, values as the daemon
 * wrote them, a range as min/max/last with a sparkline scaled to the
 * series' own min..max (blocks in UTF-8, "_.-=#" otherwise); scalars and
 * strings plainly; an empty result says so; a wrong shape is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_query.h"
#include "common/status.h"

static char *render(const char *json, bool sparkline, bool utf8, int *rc_out)
{
	json_error_t jerr;
	json_t *root = json_loads(json, 0, &jerr);
	if (!root)
		fail_msg("test JSON does not parse: %s at %d", jerr.text, jerr.position);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	*rc_out = query_render(root, f, sparkline, utf8);
	fclose(f);
	json_decref(root);
	return text;
}

/* The line of `text` that contains `needle`, copied into `line`. */
static const char *line_with(const char *text, const char *needle, char *line, size_t len)
{
	const char *p = strstr(text, needle);
	if (!p)
		fail_msg("no \"%s\" in:\n%s", needle, text);
	const char *start = p, *end = strchr(p, '\n');
	while (start > text && start[-1] != '\n')
		start--;
	if (!end)
		end = p + strlen(p);
	snprintf(line, len, "%.*s", (int)(end - start), start);
	return line;
}

static void test_instant_vector(void **state)
{
	(void)state;
	int rc;
	char *t = render(
		"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		"{\"metric\":{\"uuid\":\"GPU-1\",\"__name__\":\"gpulse_gpu_power_watts\",\"gpu\":\"0\"},"
		"\"value\":[1795965289.3,\"690.1\"]},"
		"{\"metric\":{\"__name__\":\"gpulse_gpu_power_watts\",\"gpu\":\"1\",\"uuid\":\"GPU-2\"},"
		"\"value\":[1795965289.3,\"NaN\"]},"
		"{\"metric\":{\"gpu\":\"2\",\"evil\":\"a\\u001b[2Jb\"},\"value\":[1795965289.3,\"1e+21\"]}"
		"]}}",
		false, true, &rc);
	char line[512];
	assert_int_equal(rc, 0);
	assert_string_equal(line_with(t, "SERIES", line, sizeof line),
			    "SERIES                                         VALUE");
	assert_string_equal(line_with(t, "gpu=\"0\"", line, sizeof line),
			    "gpulse_gpu_power_watts{gpu=\"0\", uuid=\"GPU-1\"}  690.1");
	assert_string_equal(line_with(t, "gpu=\"1\"", line, sizeof line),
			    "gpulse_gpu_power_watts{gpu=\"1\", uuid=\"GPU-2\"}    NaN");
	/* No name: the labels alone, sorted, control bytes replaced. */
	assert_string_equal(line_with(t, "gpu=\"2\"", line, sizeof line),
			    "{evil=\"a?[2Jb\", gpu=\"2\"}                       1e+21");
	assert_null(strchr(t, '\033'));
	free(t);
}

static const char matrix[] =
	"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
	"{\"metric\":{\"__name__\":\"gpulse_gpu_utilization_ratio\",\"gpu\":\"0\"},\"values\":["
	"[1,\"0\"],[2,\"0.25\"],[3,\"0.5\"],[4,\"0.75\"],[5,\"1\"],[6,\"0.5\"]]},"
	"{\"metric\":{\"__name__\":\"gpulse_gpu_utilization_ratio\",\"gpu\":\"1\"},\"values\":["
	"[1,\"0.3\"],[2,\"0.3\"],[3,\"NaN\"]]}"
	"]}}";

static void test_matrix_sparkline_utf8(void **state)
{
	(void)state;
	int rc;
	char *t = render(matrix, true, true, &rc);
	char line[512];
	assert_int_equal(rc, 0);
	assert_string_equal(line_with(t, "SERIES", line, sizeof line),
			    "SERIES                                 MIN  MAX  LAST  TREND");
	/* min/max/last as the daemon wrote them; one block per point, scaled
	 * to 0..1. */
	assert_string_equal(line_with(t, "gpu=\"0\"", line, sizeof line),
			    "gpulse_gpu_utilization_ratio{gpu=\"0\"}    0    1   0.5  ▁▃▅▆█▅");
	/* Flat: the middle block; NaN: a gap, and it is still the last. */
	assert_string_equal(line_with(t, "gpu=\"1\"", line, sizeof line),
			    "gpulse_gpu_utilization_ratio{gpu=\"1\"}  0.3  0.3   NaN  ▄▄ ");
	free(t);
}

static void test_matrix_sparkline_ascii(void **state)
{
	(void)state;
	int rc;
	char *t = render(matrix, true, false, &rc);
	char line[512];
	assert_int_equal(rc, 0);
	assert_string_equal(line_with(t, "gpu=\"0\"", line, sizeof line),
			    "gpulse_gpu_utilization_ratio{gpu=\"0\"}    0    1   0.5  _.-=#-");
	assert_string_equal(line_with(t, "gpu=\"1\"", line, sizeof line),
			    "gpulse_gpu_utilization_ratio{gpu=\"1\"}  0.3  0.3   NaN  -- ");
	for (const unsigned char *p = (const unsigned char *)t; *p; p++)
		assert_true(*p < 0x80);
	free(t);
}

static void test_matrix_without_sparkline(void **state)
{
	(void)state;
	int rc;
	char *t = render(matrix, false, true, &rc);
	char line[512];
	assert_int_equal(rc, 0);
	assert_string_equal(line_with(t, "SERIES", line, sizeof line),
			    "SERIES                                 MIN  MAX  LAST");
	assert_null(strstr(t, "TREND"));
	assert_null(strstr(t, "▁"));
	free(t);
}

/* A long series is averaged into at most 40 characters. */
static void test_matrix_long(void **state)
{
	(void)state;
	char doc[16384];
	int o = snprintf(doc, sizeof doc, "{\"resultType\":\"matrix\",\"result\":[{\"metric\":"
					 "{\"__name__\":\"x\"},\"values\":[");
	for (int i = 0; i < 400; i++)
		o += snprintf(doc + o, sizeof doc - (size_t)o, "%s[%d,\"%d\"]", i ? "," : "", i, i);
	snprintf(doc + o, sizeof doc - (size_t)o, "]}]}");
	int rc;
	char *t = render(doc, true, false, &rc);
	char line[512];
	assert_int_equal(rc, 0);
	const char *l = line_with(t, "399", line, sizeof line);
	const char *spark = strrchr(l, ' ') + 1;
	assert_int_equal(strlen(spark), 40);
	assert_int_equal(spark[0], '_');
	assert_int_equal(spark[39], '#');
	assert_non_null(strstr(l, "x         0  399   399  "));
	free(t);
}

static void test_scalar_and_string(void **state)
{
	(void)state;
	int rc;
	char *t = render("{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\","
			 "\"result\":[1795965289.3,\"2\"]}}",
			 true, true, &rc);
	assert_int_equal(rc, 0);
	assert_string_equal(t, "2\n");
	free(t);
	t = render("{\"data\":{\"resultType\":\"string\",\"result\":[1795965289.3,\"hi\\u0007\"]}}",
		   false, false, &rc);
	assert_int_equal(rc, 0);
	assert_string_equal(t, "hi?\n");
	free(t);
}

static void test_empty(void **state)
{
	(void)state;
	int rc;
	char *t = render("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}",
			 false, true, &rc);
	assert_int_equal(rc, 0);
	assert_string_equal(t, "no data\n");
	free(t);
	t = render("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]}}",
		   true, true, &rc);
	assert_int_equal(rc, 0);
	assert_string_equal(t, "no data\n");
	free(t);
}

static void test_bad_shape(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"{\"status\":\"success\",\"data\":{}}",
		"{\"data\":{\"resultType\":\"vector\",\"result\":{}}}",
		"{\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"value\":[1,2]}]}}",
		"{\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":{},\"values\":[[1]]}]}}",
		"{\"data\":{\"resultType\":\"scalar\",\"result\":\"2\"}}",
		"{\"data\":{\"resultType\":\"histogram\",\"result\":[]}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc;
		char *t = render(bad[i], true, true, &rc);
		assert_int_equal(rc, GPULSE_EPARSE);
		assert_string_equal(t, "");
		free(t);
	}
}

static void test_durations(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		double want;
	} ok[] = {
		{"30s", 30}, {"5m", 300}, {"1h30m", 5400}, {"90", 90}, {"0.5", 0.5},
		{"250ms", 0.25}, {"1d", 86400}, {"1w", 604800}, {"1h1m1s", 3661},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		double v = 0;
		assert_int_equal(query_parse_duration(ok[i].s, &v), 0);
		assert_true(v == ok[i].want);
	}
	static const char *const bad[] = {"", "0", "0s", "-5m", "5x", "m", "1m1h", "1s1s", "5 m",
					  "1.5h", "nan", "inf"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		double v = 0;
		if (query_parse_duration(bad[i], &v) == 0)
			fail_msg("\"%s\" parsed as %g", bad[i], v);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_instant_vector),
		cmocka_unit_test(test_matrix_sparkline_utf8),
		cmocka_unit_test(test_matrix_sparkline_ascii),
		cmocka_unit_test(test_matrix_without_sparkline),
		cmocka_unit_test(test_matrix_long),
		cmocka_unit_test(test_scalar_and_string),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_bad_shape),
		cmocka_unit_test(test_durations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
