/* The health score in gpulsed: a bus subscriber keeps each GPU's
 * slow-tier error history (a point per slow reading: ECC, remapped rows,
 * retired pages, PCIe replays and width, violation time, the hardware
 * slowdown bit) and the XIDs it saw, judges it with health_eval
 * (health.h) and puts the verdict on the bus (bus_set_health_score),
 * where /metrics, the status document and `gpulse status` read it.
 *
 * When: at every slow-tier update, and at any other update at most once
 * a second (so an XID is scored within a second while the GPU reports).
 * A GPU that stops reporting (lost) keeps its last verdict. */
#ifndef GPULSE_HEALTH_LIVE_H
#define GPULSE_HEALTH_LIVE_H

#include <stdbool.h>

#include "collect/bus.h"
#include "diagnose/health.h"

struct health_live;

#define HEALTH_LIVE_DEFAULT_WINDOW_S (24 * 3600.0)
#define HEALTH_LIVE_POINTS_MAX 4096   /* per GPU: 24 h at the default 30 s slow tier */
#define HEALTH_LIVE_XIDS_MAX 256      /* per GPU; the oldest go first */

/* Subscribe to `bus` with a window of `window_s` seconds (0: the
 * default). Memory: about 140 bytes a point, allocated when a GPU first
 * reports. Call before collection starts. 0, GPULSE_EINVAL, GPULSE_ENOMEM
 * or GPULSE_ELIMIT (no subscriber slot). */
int health_live_create(struct health_live **out, struct bus *bus, double window_s);
/* Accepts NULL. The bus's publishers must have stopped. */
void health_live_destroy(struct health_live *hl);

/* What gpulse measured on GPU `uuid`: a benchmark regression or a
 * screening mismatch (`set` true, `text` the evidence, copied) or its
 * end (`set` false: a later run passed). Scored from the next update.
 * 0 or GPULSE_ENOENT (no such GPU). Thread-safe. */
enum health_measure { HEALTH_MEASURE_BENCH, HEALTH_MEASURE_CORRUPTION };
int health_live_note(struct health_live *hl, const char *uuid, enum health_measure what, bool set,
		     const char *text);

#endif
