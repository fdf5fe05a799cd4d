/* gpulsed's scheduled silent-corruption screening (issue 38,
 * docs/internals/bench.md "Screening"): the `screen:` configuration
 * section's schedule per GPU, and what becomes of each run of `gpulse
 * bench --screen --json`: compared with the card's own earlier digests
 * (screen_compare, the newest passing run on the same driver and
 * kernels; a change of either starts a new reference), kept in the store
 * (records of kind "screen"), published on /metrics
 * (gpulse_gpu_screen_*), told to the health score (a mismatch drains the
 * card) and shown in /api/v1/bench/status.
 *
 * benchd owns the child: its one scheduler thread watches the GPUs,
 * spawns the screening as it spawns a benchmark, kills it when another
 * process appears, and hands the end of the run here. So a benchmark and
 * a screening never run at once, and the quiet-window rules (bench.idle_for,
 * bench.idle_utilization_percent, bench.retry_interval, bench.run_timeout,
 * bench.command) are the same for both. */
#ifndef GPULSE_SCREEND_H
#define GPULSE_SCREEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "daemon/config.h"
#include "profile/profile_emit.h"
#include "store/tsdb.h"

#define SCREEND_RECORD_KIND "screen"

struct screend;
struct health_live;

/* A screening state for `c` (which must outlive it): NULL on out of
 * memory only. */
struct screend *screend_create(const struct gpulse_config *c);
void screend_destroy(struct screend *s); /* accepts NULL */

/* Whether the schedule runs (screen.enabled and an interval). */
bool screend_scheduled(const struct screend *s);

/* Whether GPU `gpu` (`uuid`) is due for a screening at wall time
 * `now_ms`. The first call for a GPU reads its newest stored run from
 * `db` (may be NULL), which sets when the next is due and restores the
 * last result (its metrics, and a mismatch's health finding) across a
 * restart of gpulsed. Scheduler thread. */
bool screend_due(struct screend *s, struct tsdb *db, int gpu, const char *uuid, int64_t now_ms);

/* A screening run of `gpu` started (`now_ms`, wall): counted as running
 * until screend_finish. */
void screend_started(struct screend *s, int gpu);

/* The run of `gpu` ended at `now_ms`: `exit_status` (waitpid's), its
 * stdout `out` (the --json result), the last line of its stderr
 * `errline`, and, when gpulsed killed it, why (`abort_why`, "" when
 * not). Keeps and publishes the result; sets the next due time (a
 * period on, or bench.retry_interval after an abort, a refusal or a
 * failure). Fills `state` (benchd's run states: done, aborted, refused,
 * failed) and `msg` (a sentence). Scheduler thread. */
void screend_finish(struct screend *s, struct tsdb *db, int gpu, int exit_status,
		    const struct buf *out, const char *errline, const char *abort_why,
		    int64_t now_ms, char *state, size_t state_len, char *msg, size_t msg_len);

/* Tell `hl` (health_live.h) of mismatches from now on; NULL stops. */
void screend_set_health(struct screend *s, struct health_live *hl);

/* The gpulse_gpu_screen_* families. `ngpus`: the GPUs the bus has (their
 * run counters are shown at 0 before any run). */
void screend_emit(struct screend *s, struct profile_emitter *e, unsigned ngpus);

/* `,"screen":{...}` for GPU `gpu`'s status document: the schedule, the
 * last run's outcome, its mismatches and notes. */
void screend_status_json(struct screend *s, int gpu, struct buf *o);

#endif
