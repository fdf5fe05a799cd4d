/* gpulsed's hookup of continuous CUDA profiling (issue 5, DESIGN.md
 * decision 7): the `profiling:` configuration section, the socket server
 * for libgpulse-inject.so (src/profile/profile_server.h) and its
 * aggregate, the families it adds to /metrics, and what its three HTTP
 * endpoints (api/profiling.h: /api/v1/processes, /api/v1/kernels,
 * /api/v1/trace) read. */
#ifndef GPULSE_PROFILING_H
#define GPULSE_PROFILING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "daemon/config.h"
#include "http/http_server.h"
#include "profile/profile_timeline.h"
#include "store/tsdb.h"
#include "common/metric.h"

struct profiling;


/* Start serving the socket when profiling.enabled. A socket that cannot
 * be served (another gpulsed holds it, no permission) is logged and
 * leaves profiling off: GPU monitoring goes on. *out is set in every case
 * but out of memory (GPULSE_ENOMEM); `c` and `db` must outlive it. */
int profiling_start(struct profiling **out, const struct gpulse_config *c, struct tsdb *db,
		    profile_uuid_fn *resolve, void *resolve_ctx);
/* What traced processes did on GPU `gpu` over [a_s, b_s), for the
 * diagnosis (profile_timeline.h). False when nothing was traced there or
 * profiling is off. p may be NULL. */
bool profiling_window(struct profiling *p, int gpu, double a_s, double b_s,
		      struct profile_window_sum *out);
/* Each traced process's kernel time by kind on GPU `gpu` over [a_s, b_s)
 * (profile_timeline_pids), for the per-process activity split; 0 when
 * profiling is off. p may be NULL. */
size_t profiling_pids(struct profiling *p, int gpu, double a_s, double b_s,
		      struct profile_pid_sum *out, size_t max);
/* True when process pid runs the injection library (it said HELLO and is
 * still tracked). p may be NULL. */
bool profiling_has(struct profiling *p, uint32_t pid);
/* Route the three endpoints of api/profiling.h over p (p may be NULL:
 * they answer 503). */
int profiling_register(struct profiling *p, struct http_server *s);
/* self_stats.profile_metrics: the gpulse_process_*, gpulse_inject_* and
 * gpulse_profile_* families. ctx is a struct profiling. */
void profiling_metrics(void *ctx, struct metric_sink *s);
/* Append the profiling series to `db` from now on (started without a
 * store: one that opened late). Any thread; accepts NULL. */
void profiling_set_store(struct profiling *p, struct tsdb *db);
/* The metric names the profiler writes into the store itself (the
 * gpulse_inject_* and per-process profiling families), which the store's
 * scrape of /metrics must leave to it; static strings, into out[0..cap),
 * *n of them. 0, or GPULSE_ELIMIT when cap is too small. None when
 * profiling is off; p may be NULL. */
int profiling_store_metrics(struct profiling *p, const char **out, size_t cap, size_t *n);
/* Make captures in progress answer now (gpulsed is stopping): call
 * before stopping the HTTP server. Accepts NULL. */
void profiling_interrupt(struct profiling *p);
/* Stop the socket thread and free. Accepts NULL. */
void profiling_stop(struct profiling *p);

/* True when process `pid` has the injection library connected now. */
bool profiling_has_library(struct profiling *p, uint32_t pid);
/* A capture of `seconds` of process `pid` (its library traces
 * everything meanwhile, with the lasting cost `gpulse trace` states),
 * appended to `out` as the Perfetto JSON /api/v1/trace answers. Blocks
 * for the capture (seconds + the grace). 0; GPULSE_ENOENT (no library of
 * that pid), GPULSE_EBUSY (a capture of it runs), GPULSE_EINVAL
 * (profiling off), GPULSE_ESTATE (stopping), each with one sentence in
 * err; or buf's error. */
int profiling_capture(struct profiling *p, uint32_t pid, unsigned seconds, struct buf *out,
		      char *err, size_t errlen);

#endif
