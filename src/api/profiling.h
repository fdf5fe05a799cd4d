/* The endpoints of continuous CUDA profiling (issue 5, DESIGN.md
 * decision 7), over the profiler's aggregate (profile/profile_agg.h):
 *
 *   GET /api/v1/processes               traced processes and their library's status
 *   GET /api/v1/kernels?pid=N&gpu=N&limit=N&per_process=N   top kernels by GPU time
 *       (per_process: at most N of each process on each GPU)
 *   GET /api/v1/trace?pid=N&seconds=S   a capture, as Chrome trace-event JSON
 *
 * /api/v1/trace is a write action (it makes a process trace everything):
 * the HTTP server (http_route_writes) serves it only with the write token
 * (http.write_token_file), or, with none configured, on a numeric
 * loopback listen; 403 otherwise. */
#ifndef GPULSE_API_PROFILING_H
#define GPULSE_API_PROFILING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "http/http_server.h"
#include "profile/profile_agg.h"

#define API_PROFILING_MAX_TRACE_SECONDS 600
#define API_PROFILING_DEFAULT_TRACE_SECONDS 5
#define API_PROFILING_MAX_KERNEL_ROWS 10000

/* A capture of `seconds` of process `pid`, appended to out as the
 * Perfetto JSON /api/v1/trace answers (profiling_capture in gpulsed):
 * 0; GPULSE_ENOENT (404), GPULSE_EBUSY (409), GPULSE_EINVAL or
 * GPULSE_ESTATE (503), each with one sentence in err; or buf's error. */
typedef int api_capture_fn(void *ctx, uint32_t pid, unsigned seconds, struct buf *out,
			   char *err, size_t errlen);

/* What the endpoints read; set before api_profiling_register, fixed
 * while the server runs. */
struct api_profiling {
	bool enabled;                  /* profiling.enabled */
	const char *socket;            /* profiling.socket */
	bool serving;                  /* the socket is served */
	const char *why_off;           /* why not, while !serving */
	struct profile_agg *agg;       /* NULL: profiling off */
	api_capture_fn *capture;
	void *capture_ctx;
	struct http_pool *captures;    /* set by api_profiling_register: runs the captures */
};

/* Route the three endpoints on `s` (p must outlive the server; NULL:
 * they answer 503 "profiling is not set up"). A capture runs on a pool
 * of PROFILE_MAX_CAPTURES threads of its own, with the connection
 * suspended; one more is refused at once. 0 or the server's error. */
int api_profiling_register(struct http_server *s, struct api_profiling *p);

#endif
