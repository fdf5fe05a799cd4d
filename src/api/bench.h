/* The baseline benchmarks' endpoints (issue 15, docs/internals/bench.md):
 *
 *   POST /api/v1/bench?gpu=N&mode=quick|full   start a run now (a write action)
 *   GET  /api/v1/bench/status[?gpu=N]          the latest run: state, result, verdicts
 *   GET  /api/v1/bench/results?gpu=N[&uuid=U]  stored runs and the trend per figure
 *
 * over the scheduler's callbacks (benchd in gpulsed), which keep the runs
 * and write the documents; here the parameters, the methods and the
 * answers' statuses. */
#ifndef GPULSE_API_BENCH_H
#define GPULSE_API_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "http/http_server.h"

struct api_bench {
	bool can_run;                /* a real GPU source: runs on demand allowed */
	const char *default_mode;    /* quick or full, when mode= is not given */
	int max_gpus;                /* gpu=N must be below it */
	/* Ask for a run of `mode` on GPU `gpu` now: 0 with *id set, or
	 * GPULSE_EBUSY (one runs already) with one sentence in msg. */
	int (*start)(void *ctx, int gpu, const char *mode, long long *id, char *msg, size_t msglen);
	/* Append /api/v1/bench/status's whole document for GPU `gpu` (-1:
	 * the latest run's) to o; buf's status. */
	int (*status)(void *ctx, int gpu, struct buf *o);
	/* Append /api/v1/bench/results's whole document for GPU `gpu` (its
	 * card named by `uuid` when not NULL) to o: buf's status, msg left
	 * empty. Or, with nothing appended, one sentence in msg (answered
	 * 503): GPULSE_EINVAL (no storage), GPULSE_ENOMEM. */
	int (*results)(void *ctx, int gpu, const char *uuid, struct buf *o, char *msg,
		       size_t msglen);
	void *ctx;
};

/* Route the three endpoints on `s` (b must outlive the server; NULL: they
 * answer 503, benchmarks not available). POST /api/v1/bench is a write
 * (http_route_writes). 0 or the server's error. */
int api_bench_register(struct http_server *s, struct api_bench *b);

#endif
