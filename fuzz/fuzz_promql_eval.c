/* libFuzzer target for the PromQL evaluator: any expression that parses
 * is evaluated, instant and range, over a small fixed store shaped like
 * gpulse's own metrics (an info metric, a ratio per GPU and resource,
 * counters with resets, histograms, NaN and stale samples), and must not
 * crash, leak or overflow. fuzz_promql covers the parser and printer;
 * this target spends its inputs on evaluation. Each input's cost is
 * bounded (a sample limit and a deadline), so heavy expressions end
 * with an error instead of a fuzzer timeout. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "promql/eval.h"
#include "promql/memstore.h"
#include "promql/parser.h"
#include "common/stale.h"

#define MIN_MS 60000LL
#define NSTEPS 30 /* samples per series, a minute apart */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void add(struct memstore *ms, const struct label *l, size_t n, int step, double v)
{
	if (memstore_add(ms, l, n, step * MIN_MS, v) != 0)
		abort();
}

static struct memstore *store(void)
{
	static struct memstore *ms;
	if (ms)
		return ms;
	ms = memstore_new(200, 20000);
	static const char *const gpus[] = {"0", "1"};
	static const char *const uuids[] = {"GPU-aaaa", "GPU-bbbb"};
	static const char *const res[] = {"sm_active", "tensor", "pipe", "clock", "dram",
					  "pcie", "memory", "busy"};
	static const char *const les[] = {"0.1", "0.5", "1", "+Inf", " 2", "1e500"};
	for (int g = 0; g < 2; g++) {
		struct label info[4] = {{"__name__", "gpulse_gpu_info"}, {"gpu", gpus[g]},
					       {"source", g ? "dcgm" : "nvml"}, {"uuid", uuids[g]}};
		struct label ctr[3] = {{"__name__", "gpulse_gpu_energy_joules_total"}, {"gpu", gpus[g]},
					      {"job", "gpulse"}};
		for (int i = 0; i < NSTEPS; i++) {
			add(ms, info, 4, i, 1);
			/* a reset at 12, a gap from 20 to 23 */
			if (i < 20 || i > 23)
				add(ms, ctr, 3, i, i == 12 ? 3 : 100.0 * i * (g + 1));
		}
		for (size_t r = 0; r < sizeof res / sizeof res[0]; r++) {
			struct label l[3] = {{"__name__", "gpulse_gpu_headroom_ratio"}, {"gpu", gpus[g]},
						    {"resource", res[r]}};
			for (int i = 0; i < NSTEPS; i++) {
				double v = 0.05 * (double)r + 0.01 * i + 0.1 * g;
				if (r == 3 && i == 15)
					v = stale_nan();
				else if (r == 4 && i % 7 == 0)
					v = __builtin_nan("");
				add(ms, l, 3, i, v);
			}
		}
		for (size_t b = 0; b < sizeof les / sizeof les[0]; b++) {
			struct label l[3] = {{"__name__", "gpulse_kernel_seconds_bucket"}, {"gpu", gpus[g]},
						    {"le", les[b]}};
			for (int i = 0; i < NSTEPS; i++)
				add(ms, l, 3, i, (double)(i * (b + 1) * (g + 1)));
		}
	}
	struct label up[3] = {{"__name__", "up"}, {"instance", "a:9400"}, {"job", "gpulse"}};
	for (int i = 0; i < NSTEPS; i += 3)
		add(ms, up, 3, i, i % 2);
	return ms;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 512) /* longer expressions add parse work, not evaluation */
		return 0;
	char text[513];
	memcpy(text, data, size);
	text[size] = '\0';
	struct promql_expr *e;
	char err[512];
	if (promql_parse(text, &e, err, sizeof err) != 0)
		return 0;
	struct promql_opts o;
	promql_opts_default(&o);
	o.max_samples = 50000;
	o.max_series = 100;
	/* A bound on time too: subqueries of subqueries stay under the
	 * sample limit while taking long. Replays are unaffected but for
	 * the error a slow machine may give. */
	o.deadline_ns = clock_mono_ns() + 200 * 1000000LL;
	struct memstore *ms = store();
	static const int64_t at[] = {0, 7 * MIN_MS, 15 * MIN_MS + 30000, 29 * MIN_MS, 40 * MIN_MS};
	struct promql_result *r;
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		if (promql_eval_instant(e, &memstore_queryable, ms, &o, at[i], &r, err, sizeof err) == 0)
			promql_result_free(r);
	}
	if (e->type == PROMQL_TYPE_SCALAR || e->type == PROMQL_TYPE_VECTOR) {
		if (promql_eval_range(e, &memstore_queryable, ms, &o, 0, 32 * MIN_MS, 150000, &r, err,
				      sizeof err) == 0)
			promql_result_free(r);
	}
	promql_expr_free(e);
	return 0;
}
