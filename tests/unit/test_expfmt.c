/* Reading Prometheus's text format (src/export/expfmt.c), on the example
 * of the format's documentation (prometheus/docs, "Exposition formats",
 * text format example): HELP and TYPE lines, timestamps, runs of spaces,
 * escapes in label values, +Inf. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "export/expfmt.h"
#include "common/status.h"

static const char *const doc_example[] = {
	"# HELP http_requests_total The total number of HTTP requests.",
	"# TYPE http_requests_total counter",
	"http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000",
	"http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000",
	"",
	"# Escaping in label values:",
	"msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find "
	"file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9",
	"# Minimalistic line:",
	"metric_without_timestamp_and_labels 12.47",
	"# A weird metric from before the epoch:",
	"something_weird{problem=\"division by zero\"} +Inf -3982045",
};

struct got {
	int n;
	char name[8][64], value[8][64];
};

static int collect(void *ctx, const char *name, const char *value)
{
	struct got *g = ctx;
	if (g->n == 8)
		return GPULSE_ELIMIT;
	strcpy(g->name[g->n], name);
	strcpy(g->value[g->n], value);
	g->n++;
	return 0;
}

static struct expfmt_sample line(const char *s, enum expfmt_kind want)
{
	struct expfmt_sample smp = {0};
	enum expfmt_kind k = expfmt_line(s, s + strlen(s), &smp);
	if (k != want)
		fail_msg("\"%s\": kind %d, want %d", s, k, want);
	return smp;
}

static struct got labels(const char *s, const struct expfmt_sample *smp)
{
	struct got g = {0};
	char scratch[256];
	assert_int_equal(expfmt_labels(s, smp->keylen, smp->namelen, scratch, sizeof scratch,
				       collect, &g), 0);
	return g;
}

static void test_doc_example(void **state)
{
	(void)state;
	int kinds[] = {0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1};
	for (size_t i = 0; i < sizeof doc_example / sizeof doc_example[0]; i++)
		line(doc_example[i], kinds[i] ? EXPFMT_SAMPLE : EXPFMT_OTHER);

	const char *s = doc_example[2];
	struct expfmt_sample smp = line(s, EXPFMT_SAMPLE);
	assert_int_equal(smp.namelen, strlen("http_requests_total"));
	assert_int_equal(smp.keylen, strlen("http_requests_total{method=\"post\",code=\"200\"}"));
	assert_true(smp.v == 1027);
	struct got g = labels(s, &smp);
	assert_int_equal(g.n, 3);
	assert_string_equal(g.name[0], "__name__");
	assert_string_equal(g.value[0], "http_requests_total");
	assert_string_equal(g.name[1], "method");
	assert_string_equal(g.value[1], "post");
	assert_string_equal(g.name[2], "code");
	assert_string_equal(g.value[2], "200");

	smp = line(doc_example[3], EXPFMT_SAMPLE); /* spaces before the value */
	assert_true(smp.v == 3);

	s = doc_example[6];
	smp = line(s, EXPFMT_SAMPLE);
	assert_true(smp.v == 1.458255915e9);
	g = labels(s, &smp);
	assert_int_equal(g.n, 3);
	assert_string_equal(g.value[1], "C:\\DIR\\FILE.TXT");
	assert_string_equal(g.value[2], "Cannot find file:\n\"FILE.TXT\"");

	smp = line(doc_example[8], EXPFMT_SAMPLE);
	assert_true(smp.v == 12.47);
	assert_int_equal(smp.keylen, smp.namelen);
	g = labels(doc_example[8], &smp);
	assert_int_equal(g.n, 1);

	smp = line(doc_example[10], EXPFMT_SAMPLE);
	assert_true(isinf(smp.v) && smp.v > 0);
	assert_true(isnan(line("x NaN", EXPFMT_SAMPLE).v));
}

static void test_bad_lines(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"1abc 1",                /* a name cannot start with a digit */
		"name{a=1} 2",           /* an unquoted value */
		"name{a=\"x\"}",         /* no value */
		"name{a=\"x\"} ",        /* no value */
		"name 1x",               /* not a number */
		"name{a=\"x\" 1",        /* labels never closed */
		"name{a=\"x 1",          /* a value never closed */
		"name{1a=\"x\"} 1",      /* a label name starting with a digit */
		"name\t1",               /* a tab is not the separator */
		" name 1",               /* leading space */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		line(bad[i], EXPFMT_BAD);
}

/* An empty value is no label; a scratch too small says so; the
 * callback's verdict stops the walk. */
static void test_labels_edges(void **state)
{
	(void)state;
	const char *s = "m{a=\"\",b=\"y\"} 1";
	struct expfmt_sample smp = line(s, EXPFMT_SAMPLE);
	struct got g = labels(s, &smp);
	assert_int_equal(g.n, 2);
	assert_string_equal(g.name[1], "b");
	char scratch[6];
	assert_int_equal(expfmt_labels(s, smp.keylen, smp.namelen, scratch, sizeof scratch, collect,
				       &g), GPULSE_ELIMIT);
	/* keylen + 2 is always enough. */
	const char *t = "n{a=\"b\",c=\"d\",e=\"f\"} 1";
	smp = line(t, EXPFMT_SAMPLE);
	char fit[64];
	g = (struct got){0};
	assert_int_equal(expfmt_labels(t, smp.keylen, smp.namelen, fit, smp.keylen + 2, collect, &g),
			 0);
	assert_int_equal(g.n, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doc_example),
		cmocka_unit_test(test_bad_lines),
		cmocka_unit_test(test_labels_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
