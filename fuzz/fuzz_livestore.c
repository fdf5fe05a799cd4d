/* libFuzzer target for the in-memory store's exposition parser
 * (livestore_ingest, src/daemon/livestore.c): any bytes taken as a scrape
 * must be read or skipped line by line and counted, never crash, leak or
 * read out of bounds, and what it keeps stays within its bounds. The
 * input is not NUL-terminated, on purpose; it is ingested twice, as two
 * scrapes, so series that end get their staleness markers too. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/livestore.h"
#include "promql/parser.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct promql_expr *q[2];
	if (!q[0]) {
		char err[128];
		/* One selector by name and one that names none (every series). */
		if (promql_parse("rate(gpulse_gpu_energy_joules_total[5m])", &q[0], err, sizeof err) ||
		    promql_parse("{gpu=\"0\"}", &q[1], err, sizeof err))
			__builtin_trap();
	}
	struct livestore_opts o = {.interval_ms = 1000, .max_series = 64, .max_samples = 256};
	struct livestore *ls = NULL;
	if (livestore_create(&ls, &o, NULL, NULL) != 0)
		return 0;
	livestore_set_queries(ls, (const struct promql_expr *const *)q, 2);
	char *copy = malloc(size ? size : 1);
	if (!copy)
		__builtin_trap();
	memcpy(copy, data, size);
	livestore_ingest(ls, copy, size, 1000);
	size_t half = size / 2;
	livestore_ingest(ls, copy, half, 2000);
	struct livestore_stats st;
	livestore_get_stats(ls, &st);
	if (st.series > o.max_series || st.samples > o.max_samples)
		__builtin_trap();
	free(copy);
	livestore_destroy(ls);
	return 0;
}
