/* The Chrome trace-event writer; see perfetto.h. Written by hand on the
 * bounded buffer rather than through jansson: a capture holds up to tens
 * of thousands of events, and building a tree of them first would double
 * the daemon's memory for no gain; the unit tests parse the output back
 * with jansson. */
#include "profile/perfetto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile_agg.h"
#include "common/status.h"
#include "common/utf8.h"

#ifndef GPULSE_VERSION
#define GPULSE_VERSION "unknown"
#endif

/* Room kept for the document's tail when the byte bound nears. */
#define TAIL_RESERVE 4096

static int ev_cmp(const void *x, const void *y)
{
	const struct wire_event *a = x, *b = y;
	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns ? -1 : 1;
	if (a->end_ns != b->end_ns)
		return a->end_ns > b->end_ns ? -1 : 1;   /* the enclosing one first */
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return (int)a->kind - (int)b->kind;
}

static uint32_t tid_of(const struct wire_event *e)
{
	return e->kind == WIRE_EV_RANGE ? PERFETTO_RANGE_TID + (e->stream % PERFETTO_RANGE_TID)
					: e->stream % PERFETTO_RANGE_TID;
}

/* ns as microseconds with three decimals, exactly. */
static void put_us(struct buf *b, uint64_t ns)
{
	buf_printf(b, "%llu.%03u", (unsigned long long)(ns / 1000), (unsigned)(ns % 1000));
}

static void put_name(struct buf *b, const char *s)
{
	char clean[WIRE_KERNEL_NAME_MAX + 1];
	utf8_clean(clean, sizeof clean, s);
	buf_put_json_string(b, clean);
}

static const char *default_name(const struct wire_event *e)
{
	switch (e->kind) {
	case WIRE_EV_KERNEL: return "kernel";
	case WIRE_EV_MEMSET: return "memset";
	case WIRE_EV_RANGE: return "range";
	default: break;
	}
	switch (e->copy_kind) {
	case WIRE_COPY_H2D: return "memcpy HtoD";
	case WIRE_COPY_D2H: return "memcpy DtoH";
	case WIRE_COPY_D2D: return "memcpy DtoD";
	case WIRE_COPY_PEER: return "memcpy PtoP";
	default: return "memcpy";
	}
}

static const char *const cat_names[] = {"kernel", "copy", "memset", "nvtx"};

/* A track's metadata line, once per distinct tid. */
struct track {
	uint32_t tid;
	uint32_t device, stream;
	bool range;
};

static int track_cmp(const void *x, const void *y)
{
	const struct track *a = x, *b = y;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

int perfetto_write(struct buf *out, struct wire_event *ev, size_t n, const struct perfetto_meta *m)
{
	if (n > 1)
		qsort(ev, n, sizeof *ev, ev_cmp);
	size_t cap = m->max_events && m->max_events < n ? m->max_events : n;
	uint64_t t0 = n ? ev[0].start_ns : 0;
	char pname[PROFILE_COMM_MAX + 32];
	char comm[PROFILE_COMM_MAX];
	utf8_clean(comm, sizeof comm, m->process_name ? m->process_name : "");
	if (comm[0])
		snprintf(pname, sizeof pname, "%s (pid %u)", comm, (unsigned)m->pid);
	else
		snprintf(pname, sizeof pname, "pid %u", (unsigned)m->pid);

	buf_puts(out, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
	buf_printf(out, "{\"ph\":\"M\",\"pid\":%u,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":",
		   (unsigned)m->pid);
	buf_put_json_string(out, pname);
	buf_puts(out, "}}");

	/* Tracks: distinct tids of the events that will be written. */
	struct track *tracks = calloc(cap ? cap : 1, sizeof *tracks);
	if (!tracks)
		return GPULSE_ENOMEM;
	size_t nt = 0;
	for (size_t i = 0; i < cap; i++)
		tracks[nt++] = (struct track){tid_of(&ev[i]), ev[i].device, ev[i].stream,
					      ev[i].kind == WIRE_EV_RANGE};
	qsort(tracks, nt, sizeof *tracks, track_cmp);
	size_t w = 0;
	for (size_t i = 0; i < nt; i++)
		if (w == 0 || tracks[w - 1].tid != tracks[i].tid)
			tracks[w++] = tracks[i];
	nt = w;
	for (size_t i = 0; i < nt; i++) {
		char tname[64];
		if (tracks[i].range)
			snprintf(tname, sizeof tname, "NVTX (thread %u)", (unsigned)tracks[i].stream);
		else
			snprintf(tname, sizeof tname, "stream %u, gpu %u", (unsigned)tracks[i].stream,
				 (unsigned)tracks[i].device);
		buf_printf(out, ",\n{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\","
			   "\"args\":{\"name\":\"%s\"}}", (unsigned)m->pid, (unsigned)tracks[i].tid, tname);
		buf_printf(out, ",\n{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_sort_index\","
			   "\"args\":{\"sort_index\":%zu}}", (unsigned)m->pid, (unsigned)tracks[i].tid, i);
	}
	free(tracks);

	size_t written = 0;
	bool bytes_hit = false;
	for (size_t i = 0; i < cap && !out->failed; i++) {
		const struct wire_event *e = &ev[i];
		const char *name = e->name ? e->name : "";
		size_t need = 400 + 6 * strnlen(name, WIRE_KERNEL_NAME_MAX);
		if (out->len + need + TAIL_RESERVE > out->max) {
			bytes_hit = true;
			break;
		}
		uint64_t dur = e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0;
		buf_printf(out, ",\n{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":", (unsigned)m->pid,
			   (unsigned)tid_of(e));
		put_us(out, e->start_ns - t0);
		buf_puts(out, ",\"dur\":");
		put_us(out, dur);
		buf_printf(out, ",\"cat\":\"%s\",\"name\":", cat_names[e->kind % WIRE_EV_KIND_COUNT]);
		put_name(out, name[0] ? name : default_name(e));
		buf_printf(out, ",\"args\":{\"gpu\":%u,\"stream\":%u", (unsigned)e->device,
			   (unsigned)e->stream);
		if (e->kind == WIRE_EV_COPY || e->kind == WIRE_EV_MEMSET) {
			buf_printf(out, ",\"bytes\":%llu", (unsigned long long)e->bytes);
			if (e->kind == WIRE_EV_COPY)
				buf_printf(out, ",\"kind\":\"%s\"", profile_copy_kind_name(e->copy_kind));
			if (dur) {
				/* bytes per ns is GB/s */
				buf_puts(out, ",\"bandwidth_gbps\":");
				buf_put_double(out, (double)e->bytes / (double)dur);
			}
		}
		buf_puts(out, "}}");
		written++;
	}
	bool cap_hit = written < n || m->events_dropped_daemon > 0;
	buf_printf(out, "\n],\"otherData\":{\"generator\":\"gpulse %s\",\"pid\":%u,\"process\":",
		   GPULSE_VERSION, (unsigned)m->pid);
	buf_put_json_string(out, pname);
	buf_printf(out, ",\"capture_id\":%llu,\"seconds\":%u,\"start_unix_ns\":%llu,"
		   "\"events\":%zu,\"events_received\":%llu,\"events_cap\":%zu,\"cap_hit\":%s,"
		   "\"cap_hit_by_bytes\":%s,\"events_dropped_by_gpulsed\":%llu,"
		   "\"events_dropped_by_library\":%llu,\"complete\":%s",
		   (unsigned long long)m->capture_id, (unsigned)m->seconds, (unsigned long long)t0,
		   written, (unsigned long long)(m->events_received > n ? m->events_received : n),
		   m->max_events, cap_hit ? "true" : "false", bytes_hit ? "true" : "false",
		   (unsigned long long)(m->events_dropped_daemon + (n - written)),
		   (unsigned long long)m->events_dropped_library, m->complete ? "true" : "false");
	if (m->lasting_cost) {
		buf_puts(out, ",\"gpulse_lasting_cost\":");
		buf_put_json_string(out, m->lasting_cost);
	}
	buf_puts(out, "}}\n");
	return out->failed ? GPULSE_ELIMIT : 0;
}
