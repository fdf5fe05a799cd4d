/* gpulsed's baseline benchmarks (issue 15, docs/internals/bench.md): the
 * `bench:` configuration section, a scheduler thread that runs `gpulse
 * bench --json` as a child process on a GPU that has been idle for
 * bench.idle_for with no process on it, once per bench.schedule, and
 * kills it (keeping nothing, retrying after bench.retry_interval) when
 * another process appears on that GPU; the comparison of each result with
 * the card's stored history and the fleet; the results in the store
 * (records of kind "bench", series gpulse_bench_*) and on /metrics; and
 * what its three endpoints (api/bench.h: POST /api/v1/bench,
 * /api/v1/bench/status, /api/v1/bench/results) ask of it.
 *
 * The benchmark never runs on the sampling threads nor in gpulsed's
 * process: a driver fault or a hung CUDA call takes the child, not the
 * daemon, and /metrics never waits for it. */
#ifndef GPULSE_BENCHD_H
#define GPULSE_BENCHD_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "daemon/config.h"
#include "collect/bus.h"
#include "http/http_server.h"
#include "store/tsdb.h"
#include "common/metric.h"

#define BENCHD_MAX_GPUS 64
#define BENCHD_RECORD_KIND "bench"

struct benchd;

/* Start the scheduler (when bench.enabled and `nvml` is true: a replay
 * has no GPU to measure). It learns each GPU's utilization and processes
 * from `bus` (what the collector sampled), never from NVML itself. `c`,
 * `bus` and `db` (may be NULL: storage off or not open yet) must outlive
 * it. *out is set in every case but out of memory
 * (GPULSE_ENOMEM); with the scheduler off, the endpoints still answer
 * (POST starts a run on demand when `nvml`). */
int benchd_start(struct benchd **out, const struct gpulse_config *c, struct tsdb *db,
		 struct bus *bus, bool nvml);
/* The store opened late. Any thread; accepts NULL. */
void benchd_set_store(struct benchd *b, struct tsdb *db);
/* The metric names benchd writes into the store itself, one point a run
 * (the last run's figures, baselines and verdicts), NULL-terminated: the
 * self-scrape of /metrics (selfscrape_opts.foreign_names) must leave them
 * to it, or a store opened after a run would take them from /metrics and
 * write them every second beside benchd. Its counters (runs, running)
 * are not in it: only the self-scrape stores those. */
extern const char *const benchd_store_metrics[];
/* Route the three endpoints of api/bench.h over b (b may be NULL: they
 * answer 503). */
int benchd_register(struct benchd *b, struct http_server *s);
/* The gpulse_bench_* families (the last run per GPU). ctx: struct benchd. */
void benchd_metrics(void *ctx, struct metric_sink *s);
/* Kill a run in progress, stop the thread, free. Accepts NULL. */
void benchd_stop(struct benchd *b);

/* Tell `hl` (the health score, health_live.h) of each baseline run's
 * regressions from now on; NULL stops. Accepts a NULL `b`. */
struct health_live;
void benchd_set_health(struct benchd *b, struct health_live *hl);

#endif
