/* libFuzzer target for the benchmark result parser
 * (src/bench/bench_result.c): it reads other hosts' files (gpulse bench
 * --compare), a child's output and the store's records, so any bytes.
 * Whatever it accepts must be consistent (min <= median <= max, counts
 * within their arrays) and must write back to JSON that parses again to
 * the same figures. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_result.h"
#include "common/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct bench_result r, again;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	if (bench_result_parse((const char *)data, size, &r, err, sizeof err) != 0) {
		if (!memchr(err, '\0', sizeof err))
			abort();
		return 0;
	}
	if (r.nfig < 0 || r.nfig > BENCH_MAX_FIGURES || r.nskip < 0 || r.nskip > BENCH_MAX_FIGURES ||
	    r.nnotes < 0 || r.nnotes > BENCH_MAX_NOTES)
		abort();
	for (int i = 0; i < r.nfig; i++)
		if (!(r.fig[i].min <= r.fig[i].median && r.fig[i].median <= r.fig[i].max))
			abort();
	struct buf b;
	buf_init(&b, 4u << 20);
	if (bench_result_to_json(&r, &b) == 0) {
		if (bench_result_parse(b.data, b.len, &again, err, sizeof err) != 0)
			abort();
		if (again.nfig != r.nfig || strcmp(again.gpu.uuid, r.gpu.uuid) != 0)
			abort();
		for (int i = 0; i < r.nfig; i++)
			if (again.fig[i].median != r.fig[i].median)
				abort();
	}
	buf_free(&b);
	return 0;
}
