/* Capture mode of the injection library: on a CAPTURE frame from gpulsed
 * every kernel, copy, memset and NVTX range is kept as a timeline event
 * for S seconds, and the events are streamed to the daemon as
 * TRACE_EVENTS frames followed by one TRACE_END (the daemon writes the
 * Perfetto JSON). Events are stored compactly (names interned in a
 * bounded table), at most CAPTURE_EVENTS_MAX of them per capture; the
 * rest are dropped and counted in TRACE_END. CUPTI-free; not
 * thread-safe (the caller holds its lock around every call). */
#ifndef GPULSE_INJECT_CAPTURE_H
#define GPULSE_INJECT_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "inject/agg.h"
#include "wire/wire.h"

#define CAPTURE_EVENTS_MAX  262144  /* 48 bytes each: 12 MiB at most */
#define CAPTURE_NAMES_MAX   1024    /* distinct names per capture */
#define CAPTURE_SECONDS_MAX 600

struct capture;

/* NULL when out of memory. Free with capture_destroy (accepts NULL). */
struct capture *capture_create(void);
void capture_destroy(struct capture *c);

/* Begin capture `id` of what happens from the monotonic time start_ns to
 * end_ns, keeping at most max_events (0 or over the cap:
 * CAPTURE_EVENTS_MAX). A capture still running or not yet drained is
 * abandoned (the daemon times it out). 0, or GPULSE_ENOMEM (the capture
 * ends at once with every event counted as dropped). */
int capture_start(struct capture *c, uint64_t id, uint32_t max_events, int64_t start_ns,
		  int64_t end_ns);

/* Whether an event at monotonic time t_ns belongs to the capture: it is
 * still open (not yet ended by a drain) and t_ns lies in its window.
 * Activity records arrive up to a flush after they happen, so they are
 * judged by their own start time, not by when they are processed. */
int capture_active(const struct capture *c, int64_t t_ns);

/* Keep one event (wall-clock times). Counted as dropped past the cap. */
void capture_add(struct capture *c, uint8_t kind, uint8_t copy_kind, uint32_t device,
		 uint32_t stream, uint64_t start_ns, uint64_t end_ns, uint64_t bytes,
		 const char *name);

/* Encode the events kept since the last drain as TRACE_EVENTS frames,
 * and TRACE_END once the capture's time is over at now_ns (or `force`).
 * Events in a frame that emit refuses are dropped and counted in
 * TRACE_END; a refused TRACE_END is tried again by the next drain, whose
 * result (0 or emit's) is returned. */
int capture_drain(struct capture *c, int64_t now_ns, int force, agg_emit_fn *emit, void *user);

/* Whether a capture is running or has frames left to send. */
int capture_pending(const struct capture *c);

#endif
