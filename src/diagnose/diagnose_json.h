/* Diagnosis results as JSON, in the shape of DESIGN.md's contract for
 * `gpulse diagnose --json` ({"windows": [{"start_s", "end_s", "gpu",
 * "bottleneck", "findings", "evidence", "advice", ...}]}), so the CLI
 * now and the daemon's HTTP API later write the same document. Numbers
 * that are unknown are written as null. */
#ifndef GPULSE_DIAGNOSE_JSON_H
#define GPULSE_DIAGNOSE_JSON_H

#include "common/buf.h"
#include "diagnose/diagnose.h"
#include "diagnose/peaks.h"

/* Append one window object. 0, or GPULSE_ELIMIT when the buffer could
 * not take it (its maximum reached or memory exhausted: buf's sticky
 * failure). */
int diag_json_window(struct buf *b, const struct diag_window *w);
/* Append one GPU's summary object. */
int diag_json_summary(struct buf *b, const struct diag_summary *s);
/* Append the peaks GPU `gpu` was measured against. */
int diag_json_peaks(struct buf *b, int gpu, const struct gpu_peaks *p);

#endif
