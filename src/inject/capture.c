/* Timeline capture; see capture.h. */
#include "inject/capture.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "common/str.h"

struct cap_event {
	uint64_t start_ns, end_ns, bytes;
	uint32_t device, stream;
	uint16_t name_id;
	uint8_t kind, copy_kind;
};

struct capture {
	int state;                 /* 0 idle, 1 recording, 2 recording over, END not sent */
	uint64_t id;
	int64_t start_ns, end_ns;  /* the window, monotonic */
	uint32_t max_events;
	struct cap_event *events;  /* max_events */
	uint32_t nevents, sent;    /* kept; already emitted */
	uint64_t dropped;          /* never kept: over the cap, or no memory */
	uint64_t lost;             /* kept, but their frame was refused */
	char **names;              /* CAPTURE_NAMES_MAX, each malloc'd (a kernel's is
				      up to WIRE_KERNEL_NAME_MAX bytes) */
	uint64_t *hashes;          /* CAPTURE_NAMES_MAX: wire_name_hash of each name */
	unsigned nnames;
	struct wire_event *out;    /* one frame's worth: WIRE_MAX_EVENTS */
	uint8_t *frame;
};

struct capture *capture_create(void)
{
	struct capture *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->out = calloc(WIRE_MAX_EVENTS, sizeof *c->out);
	c->frame = malloc(WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD);
	if (!c->out || !c->frame) {
		capture_destroy(c);
		return NULL;
	}
	return c;
}

static void release(struct capture *c)
{
	free(c->events);
	for (unsigned i = 0; c->names && i < CAPTURE_NAMES_MAX; i++)
		free(c->names[i]);
	free(c->names);
	free(c->hashes);
	c->events = NULL;
	c->names = NULL;
	c->hashes = NULL;
	c->nnames = 0;
	c->nevents = c->sent = 0;
}

void capture_destroy(struct capture *c)
{
	if (!c)
		return;
	release(c);
	free(c->out);
	free(c->frame);
	free(c);
}

int capture_start(struct capture *c, uint64_t id, uint32_t max_events, int64_t start_ns,
		  int64_t end_ns)
{
	if (c->state == 1)
		c->state = 2;
	if (c->state == 2) {
		/* The previous capture's events and END were not drained:
		 * they are lost, and counted as dropped in nothing anyone
		 * will read, so drop it cleanly instead. */
		release(c);
	}
	c->id = id;
	c->start_ns = start_ns;
	c->end_ns = end_ns;
	c->dropped = 0;
	c->lost = 0;
	c->max_events = max_events && max_events < CAPTURE_EVENTS_MAX ? max_events : CAPTURE_EVENTS_MAX;
	c->events = malloc((size_t)c->max_events * sizeof *c->events);
	c->names = calloc(CAPTURE_NAMES_MAX, sizeof *c->names);
	c->hashes = calloc(CAPTURE_NAMES_MAX, sizeof *c->hashes);
	c->state = 1;
	if (!c->events || !c->names || !c->hashes) {
		release(c);
		c->max_events = 0; /* every event is counted as dropped */
		return GPULSE_ENOMEM;
	}
	return GPULSE_OK;
}

int capture_active(const struct capture *c, int64_t t_ns)
{
	return c->state == 1 && t_ns >= c->start_ns && t_ns < c->end_ns;
}

int capture_pending(const struct capture *c)
{
	return c->state != 0;
}

static uint16_t intern(struct capture *c, const char *name)
{
	if (!name || !*name)
		name = "";
	/* Whole names: two kernels that share a long prefix are two (the
	 * library's names are already fitted to WIRE_KERNEL_NAME_MAX); the
	 * hash first, so names of a long common prefix are compared once. */
	uint64_t h = wire_name_hash(name);
	for (unsigned i = 0; i < c->nnames; i++)
		if (c->hashes[i] == h && strcmp(c->names[i], name) == 0)
			return (uint16_t)i;
	if (c->nnames < CAPTURE_NAMES_MAX - 1) {
		char *copy = strndup(name, WIRE_KERNEL_NAME_MAX);
		if (copy) {
			c->names[c->nnames] = copy;
			c->hashes[c->nnames] = h;
			return (uint16_t)c->nnames++;
		}
	}
	/* Past the table, or out of memory: the shared "other", the last slot. */
	if (!c->names[CAPTURE_NAMES_MAX - 1])
		c->names[CAPTURE_NAMES_MAX - 1] = strdup(AGG_OTHER_NAME);
	return CAPTURE_NAMES_MAX - 1;
}

void capture_add(struct capture *c, uint8_t kind, uint8_t copy_kind, uint32_t device,
		 uint32_t stream, uint64_t start_ns, uint64_t end_ns, uint64_t bytes,
		 const char *name)
{
	if (c->state != 1)
		return;
	if (!c->events || c->nevents >= c->max_events) {
		c->dropped++;
		return;
	}
	struct cap_event *e = &c->events[c->nevents++];
	e->kind = kind;
	e->copy_kind = copy_kind;
	e->device = device;
	e->stream = stream;
	e->start_ns = start_ns;
	e->end_ns = end_ns < start_ns ? start_ns : end_ns;
	e->bytes = bytes;
	e->name_id = intern(c, name);
}

int capture_drain(struct capture *c, int64_t now_ns, int force, agg_emit_fn *emit, void *user)
{
	if (c->state == 0)
		return 0;
	if (c->state == 1 && (force || now_ns >= c->end_ns))
		c->state = 2;
	while (c->sent < c->nevents) {
		/* As many events as fit a frame by their encoded sizes (names
		 * run to WIRE_KERNEL_NAME_MAX), at most WIRE_MAX_EVENTS. */
		unsigned n = 0;
		size_t room = WIRE_MAX_PAYLOAD - 64;
		while (c->sent + n < c->nevents && n < WIRE_MAX_EVENTS) {
			const struct cap_event *e = &c->events[c->sent + n];
			struct wire_event *w = &c->out[n];
			w->kind = e->kind;
			w->copy_kind = e->copy_kind;
			w->device = e->device;
			w->stream = e->stream;
			w->start_ns = e->start_ns;
			w->end_ns = e->end_ns;
			w->bytes = e->bytes;
			w->name = c->names[e->name_id] ? c->names[e->name_id] : "";
			size_t eb = wire_event_bytes(w);
			if (eb > room)
				break;
			room -= eb;
			n++;
		}
		struct wire_msg m;
		memset(&m, 0, sizeof m);
		m.type = WIRE_TRACE_EVENTS;
		m.u.trace_events.capture_id = c->id;
		m.u.trace_events.count = n;
		m.u.trace_events.events = c->out;
		size_t len = wire_encode(&m, c->frame, WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD);
		/* A frame that cannot be encoded (not with events counted by
		 * their sizes) or is refused loses its events, counted. */
		if (len == 0 || emit(c->frame, len, user) != 0)
			c->lost += n;
		c->sent += n;
	}
	if (c->state == 2) {
		struct wire_msg m;
		memset(&m, 0, sizeof m);
		m.type = WIRE_TRACE_END;
		m.u.trace_end.capture_id = c->id;
		m.u.trace_end.events_total = (uint64_t)c->nevents + c->dropped;
		m.u.trace_end.events_dropped = c->dropped + c->lost;
		size_t len = wire_encode(&m, c->frame, WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD);
		int rc = len ? emit(c->frame, len, user) : GPULSE_ELIMIT;
		if (rc)
			return rc; /* try the END again on the next drain */
		release(c);
		c->state = 0;
	}
	return 0;
}
