/* A capture as a Chrome trace-event JSON document (the "JSON object
 * format" that chrome://tracing, ui.perfetto.dev and Speedscope open):
 * one complete event (ph "X") per kernel, copy, memset and NVTX range,
 * pid = the traced process, one track (tid) per CUDA stream named by a
 * thread_name metadata event ("stream 7, gpu 0"), NVTX ranges on tracks
 * of their own, times in microseconds from the first event with
 * nanosecond digits, copy bytes and bandwidth in args. The number of
 * events written is capped (and the body's byte bound respected); what
 * the cap left out is reported in "otherData". */
#ifndef GPULSE_PERFETTO_H
#define GPULSE_PERFETTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "wire/wire.h"

/* NVTX range tracks: tid = PERFETTO_RANGE_TID + the event's stream field
 * (the library puts its thread there), so they never share a stream's. */
#define PERFETTO_RANGE_TID 1000000000u

struct perfetto_meta {
	uint32_t pid;
	const char *process_name;        /* comm; NULL: "pid N" */
	uint64_t capture_id;
	uint32_t seconds;                /* asked for */
	size_t max_events;               /* events written at most; 0: no cap */
	uint64_t events_received;        /* what gpulsed received (>= n) */
	uint64_t events_dropped_daemon;  /* received over gpulsed's own cap */
	uint64_t events_dropped_library; /* TRACE_END's count */
	bool complete;                   /* TRACE_END arrived */
	const char *lasting_cost;        /* a sentence for otherData's
					    "gpulse_lasting_cost"; NULL: none */
};

/* Append the document for ev[0..n) to out. The events are sorted in place
 * (by start time, longer first on ties, so enclosing ranges come before
 * what they enclose). Names are cleaned to UTF-8 and escaped. Returns 0,
 * or the buf's error when even the envelope does not fit. */
int perfetto_write(struct buf *out, struct wire_event *ev, size_t n,
		   const struct perfetto_meta *m);

#endif
