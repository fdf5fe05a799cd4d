/* Live diagnosis in gpulsed: a bus subscriber keeps the last few minutes
 * of every GPU's fast- and normal-tier values as rows, classifies each
 * window as soon as all its evidence is in, and puts the verdict on the
 * bus (gpulse_gpu_bottleneck{class}). Asked for a range of that history,
 * it classifies it on demand (/api/v1/diagnosis, `gpulse diagnose`).
 *
 * Rows: every fast-tier update starts one. The normal tier's values (GPM
 * counters, measured over the interval since the previous normal read,
 * and the temperature, reasons and processes of that moment) are written
 * back into the rows of that interval when they arrive, so each row holds
 * what was true at its time. A window [a, b) is judged once a fast update
 * at or after b and, if the GPU has a normal tier, a normal update at or
 * after b have arrived. Slow-tier values are not kept in rows; the last
 * power limit reported (by any tier) is kept as the GPU's peak. */
#ifndef GPULSE_DIAG_LIVE_H
#define GPULSE_DIAG_LIVE_H

#include <stdbool.h>
#include <stddef.h>

#include "collect/bus.h"
#include "diagnose/diagnose.h"
#include "diagnose/peaks.h"

struct diag_live;

/* Subscribe to `bus`: windows of `window_s` (aligned to multiples of it in
 * Unix time), history of `history_s` per GPU at `rate_hz` fast-tier
 * samples a second (memory: about 160 bytes a sample, allocated when a GPU
 * first reports; faster samples shorten the history). Call before
 * collection starts. 0, GPULSE_EINVAL, GPULSE_ENOMEM or GPULSE_ELIMIT (no
 * subscriber slot). */
int diag_live_create(struct diag_live **out, struct bus *bus, double window_s, double history_s,
		     double rate_hz);
/* Accepts NULL. The bus's publishers must have stopped. */
void diag_live_destroy(struct diag_live *dl);

/* Called with every window the live diagnosis judges, on the bus's
 * publishing thread (so it must not block), with that GPU's lock held. */
typedef void diag_live_sink_fn(void *ctx, const struct gpu_identity *id,
			       const struct diag_window *w);

/* The diagnosis's settings (diagnose.h; the daemon's config `diagnosis:`
 * section). Copied. Set before collection starts; until then, the
 * defaults. 0 or GPULSE_EINVAL (diag_options_check), which keeps the
 * settings in use. */
int diag_live_set_options(struct diag_live *dl, const struct diag_options *o);

/* Hand every judged window to `fn` as well (the store's history.h). Set
 * before collection starts; NULL: none. */
void diag_live_set_sink(struct diag_live *dl, diag_live_sink_fn *fn, void *ctx);

/* What traced processes did on GPU `gpu` over [a_s, b_s), summed
 * (src/profile). Returns false when nothing was traced there. Called on
 * the bus's publishing thread: must not block. */
typedef bool diag_live_trace_fn(void *ctx, int gpu, double a_s, double b_s,
				struct diag_trace *out);

/* Refine each judged window by kernel traces from `fn`. Set before
 * collection starts; NULL: none. */
void diag_live_set_trace_source(struct diag_live *dl, diag_live_trace_fn *fn, void *ctx);

/* Classify the held history of GPU `slot` from `since_s` (Unix seconds;
 * older than the history: from its start) with windows of `window_s`
 * (0: the live window). *out (NULL when no window) is the caller's, freed
 * with free(); `peaks` receives the yardsticks used. 0, GPULSE_ENOENT (no
 * such GPU or no history yet), GPULSE_EINVAL, GPULSE_ENOMEM. */
int diag_live_windows(struct diag_live *dl, int slot, double since_s, double window_s,
		      struct diag_window **out, size_t *n, struct gpu_peaks *peaks);

/* The peaks GPU `slot` is measured against (its identity and last
 * sample). 0 or GPULSE_ENOENT (no such GPU yet). */
int diag_live_peaks(struct diag_live *dl, int slot, struct gpu_peaks *peaks);

/* The seconds of history held per GPU and the live window length. */
double diag_live_history_s(const struct diag_live *dl);
double diag_live_window_s(const struct diag_live *dl);

#endif
