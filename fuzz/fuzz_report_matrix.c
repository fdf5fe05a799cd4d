/* libFuzzer target for the capacity report's parser of Prometheus
 * range-query answers (report_parse_matrix): any bytes must parse or be
 * refused with a reason, never crash; what parses is then laid on the
 * report's grid as every metric the report asks for (any labels, any
 * times, NaN and infinities) and rendered as text, JSON and HTML. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
	const char *data;
	size_t size;
};

static int fz_query(void *ctx, const char *expr, int64_t start_ms, int64_t end_ms, int64_t step_ms,
		    bool rollups, struct report_matrix *out, char *err, size_t errlen)
{
	(void)expr, (void)start_ms, (void)end_ms, (void)step_ms, (void)rollups;
	const struct fz *f = ctx;
	return report_parse_matrix(f->data, f->size, 64, 20000, out, err, errlen);
}

static const struct report_source_ops fz_ops = {.kind = "fuzz", .query_range = fz_query};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct report_matrix m = {0};
	char err[512] = "";
	int rc = report_parse_matrix((const char *)data, size, 64, 20000, &m, err, sizeof err);
	report_matrix_free(&m);
	if (rc != 0) {
		if (!err[0])
			__builtin_trap();
		return 0;
	}
	struct fz f = {(const char *)data, size};
	struct report_source src = {.ops = &fz_ops, .ctx = &f, .where = "fuzz",
				    .raw_retention_ms = 1800000, .fleet = size % 2 == 0};
	struct report_opts o = {.start_ms = 0, .end_ms = 3600000, .step_ms = 60000,
				.now_ms = 3600000, .gpu = -1, .min_history_ms = 60000};
	struct report *r = NULL;
	if (report_build(&src, &o, &r, err, sizeof err) != 0) {
		if (!err[0])
			__builtin_trap();
		return 0;
	}
	FILE *null = fopen("/dev/null", "w");
	if (null) {
		report_write_text(r, null, true);
		report_write_json(r, null);
		report_write_html(r, null);
		fclose(null);
	}
	report_free(r);
	return 0;
}
