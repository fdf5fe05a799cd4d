/* libFuzzer target for `gpulse top`'s parsers of gpulsed's API answers
 * (src/cli/top/top_model.h): any bytes, given to each of the five
 * parsers in turn as one refresh would (and to the history backfill's), must parse or be refused with a
 * reason naming the endpoint, never crash or overrun; what parses must
 * keep its bounds (counts, NUL-terminated text free of control bytes),
 * and the history, sort and filter must take it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/top/top_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	if (n == cap)
		__builtin_trap();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			__builtin_trap();
}

static struct top_data *d;
static struct top_history *h;
static struct top_backfill *b;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!d) {
		d = calloc(1, sizeof *d);
		h = calloc(1, sizeof *h);
		b = calloc(1, sizeof *b);
		if (!d || !h || !b)
			return 0;
		top_history_init(h);
	}
	const char *body = (const char *)data;
	char err[256];
	int (*const parsers[])(struct top_data *, const char *, size_t, char *, size_t) = {
		top_parse_processes, top_parse_kernels, top_parse_alerts, top_parse_diagnosis,
	};
	err[0] = '\0';
	/* A failed /api/v1/gpus leaves an empty refresh, which the other
	 * parsers must take too. */
	if (top_parse_gpus(d, body, size, err, sizeof err) != 0 && !strstr(err, "/api/v1/gpus"))
		__builtin_trap();
	for (size_t i = 0; i < sizeof parsers / sizeof parsers[0]; i++) {
		err[0] = '\0';
		if (parsers[i](d, body, size, err, sizeof err) != 0 && !strstr(err, "/api/v1/"))
			__builtin_trap();
	}
	if (d->ngpus < 0 || d->ngpus > TOP_GPU_MAX || d->nprocs < 0 || d->nprocs > TOP_PROC_MAX ||
	    d->nalerts < 0 || d->nalerts > TOP_ALERT_MAX)
		__builtin_trap();
	for (int i = 0; i < d->ngpus; i++) {
		const struct top_gpu *g = &d->gpus[i];
		check_text(g->uuid, sizeof g->uuid);
		check_text(g->model, sizeof g->model);
		check_text(g->throttle, sizeof g->throttle);
		check_text(g->advice, sizeof g->advice);
		check_text(g->findings, sizeof g->findings);
	}
	for (int i = 0; i < d->nprocs; i++) {
		const struct top_proc *p = &d->procs[i];
		check_text(p->comm, sizeof p->comm);
		check_text(p->cmdline, sizeof p->cmdline);
		check_text(p->kernel, sizeof p->kernel);
		if (p->have_kernel && !(p->kernel_share >= 0 && p->kernel_share <= 1))
			__builtin_trap();
	}
	for (int i = 0; i < d->nalerts; i++) {
		check_text(d->alerts[i].name, sizeof d->alerts[i].name);
		check_text(d->alerts[i].summary, sizeof d->alerts[i].summary);
	}
	top_history_push(h, d);
	err[0] = '\0';
	if (top_parse_backfill(b, d, body, size, 1796180000, 1, 64, err, sizeof err) == 0) {
		if (b->n != 64 || b->ngpus != d->ngpus)
			__builtin_trap();
		for (int i = 0; i < b->ngpus; i++)
			for (int m = 0; m < TM_COUNT; m++)
				for (unsigned k = 0; k < b->n; k++)
					if (b->v[i][m][k] < 0) /* NAN or a ratio, never negative */
						__builtin_trap();
		top_history_seed(h, b);
		if (h->count > TOP_HIST_LEN)
			__builtin_trap();
	} else if (!strstr(err, "/api/v1/query_range")) {
		__builtin_trap();
	}
	int idx[TOP_PROC_MAX];
	int n = top_procs_view(d, "a", TOP_SORT_COMMAND, size & 1, idx, TOP_PROC_MAX);
	for (int i = 0; i < n; i++)
		if (idx[i] < 0 || idx[i] >= d->nprocs)
			__builtin_trap();
	return 0;
}
