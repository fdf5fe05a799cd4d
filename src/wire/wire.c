/* The wire codec between libgpulse-inject.so and gpulsed (wire.h).
 *
 * Each frame type is described once, by a walk function that visits its
 * fields in wire order; the same walk encodes (struct → bytes) and decodes
 * (bytes → struct, with validation), so the two directions cannot drift.
 * Hand-written rather than protobuf-c: the injection library must encode
 * without allocating, from its own threads, with no dependency beyond libc,
 * and the daemon must bound every count and string before it allocates.
 *
 * Decoding is strict: every length is checked against the bytes left,
 * every count and string against its WIRE_MAX_* / *_MAX bound, every enum
 * and flag against its range, strings may not contain NUL bytes, doubles
 * must be finite and not negative, and no byte may be left over. The
 * consequence the fuzzer checks: whatever wire_decode accepts, wire_encode
 * writes back byte for byte. */
#include "wire/wire.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/status.h"

const char *wire_type_name(unsigned type)
{
	switch (type) {
#define WIRE_TYPE_CASE(name, val) \
	case val:                 \
		return #name;
		WIRE_TYPE_TABLE(WIRE_TYPE_CASE)
#undef WIRE_TYPE_CASE
	default:
		return "unknown";
	}
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int wire_header_parse(const uint8_t *hdr, unsigned *type, uint32_t *payload_len)
{
	if (get_le(hdr, 4) != WIRE_MAGIC || get_le(hdr + 4, 2) != WIRE_VERSION)
		return GPULSE_EPARSE;
	uint32_t len = (uint32_t)get_le(hdr + 8, 4);
	if (len > WIRE_MAX_PAYLOAD)
		return GPULSE_ELIMIT;
	*type = (unsigned)get_le(hdr + 6, 2);
	*payload_len = len;
	return 0;
}

/* Encoded size of one array entry (the string at its bound). */
#define SCOPE_BYTES   32u
#define KERNEL_BYTES  (2u + WIRE_KERNEL_NAME_MAX + 4 * 8 + WIRE_HIST_BUCKETS * 4 + 6 * 4 + 2 * 4)
#define COPY_BYTES    (2u + 3 * 8)
#define STREAM_BYTES  (4u + 4 * 8)
#define RANGE_BYTES   (2u + WIRE_NAME_MAX + 3 * 8)
#define EVENT_BYTES   (2u + 2 * 4 + 3 * 8 + 2 + WIRE_KERNEL_NAME_MAX)
/* The smallest encoding of each entry (empty strings): a count that needs
 * more bytes than are left is refused before anything is allocated. */
#define KERNEL_MIN    (KERNEL_BYTES - WIRE_KERNEL_NAME_MAX)
#define RANGE_MIN     (RANGE_BYTES - WIRE_NAME_MAX)
#define EVENT_MIN     (EVENT_BYTES - WIRE_KERNEL_NAME_MAX)

size_t wire_entry_bytes(unsigned type)
{
	switch (type) {
	case WIRE_KERNELS:
		return KERNEL_BYTES;
	case WIRE_COPIES:
		return COPY_BYTES;
	case WIRE_STREAMS:
		return STREAM_BYTES;
	case WIRE_RANGES:
		return RANGE_BYTES;
	case WIRE_TRACE_EVENTS:
		return EVENT_BYTES;
	default:
		return 0;
	}
}

static size_t utf8_cut(const char *s, size_t bound);

size_t wire_kernel_bytes(const struct wire_kernel *k)
{
	return KERNEL_MIN + utf8_cut(k->name, WIRE_KERNEL_NAME_MAX);
}

size_t wire_event_bytes(const struct wire_event *e)
{
	return EVENT_MIN + (e->name ? utf8_cut(e->name, WIRE_KERNEL_NAME_MAX) : 0);
}

uint64_t wire_name_hash(const char *s)
{
	return fnv1a64_str(s);
}

void wire_kernel_name_fit(char *out, const char *full)
{
	wire_name_fit(out, WIRE_KERNEL_NAME_MAX, full);
}

void wire_name_fit(char *out, size_t bound, const char *full)
{
	size_t n = strnlen(full, bound + 1);
	if (n <= bound) {
		memcpy(out, full, n);
		out[n] = '\0';
		return;
	}
	char tail[sizeof WIRE_KERNEL_HASH_SUFFIX + 16];
	int tn = snprintf(tail, sizeof tail, WIRE_KERNEL_HASH_SUFFIX "%016llx",
			  (unsigned long long)wire_name_hash(full));
	size_t keep = bound > (size_t)tn ? utf8_cut(full, bound - (size_t)tn) : 0;
	memcpy(out, full, keep);
	memcpy(out + keep, tail, (size_t)tn + 1);
}

/* One pass over a frame's fields, in one direction. */
struct cx {
	int enc;                /* 1: struct → out, 0: in → struct */
	uint8_t *out;           /* encode: the payload area */
	size_t cap;
	const uint8_t *in;      /* decode: the payload */
	size_t len;
	size_t off;             /* bytes consumed or produced */
	int rc;                 /* first failure; once set every step is a no-op */
	struct wire_msg *m;     /* decode: owner of the entry storage */
	unsigned type;
	char *err;
	size_t errlen;
	const char *arr;        /* inside an array: its name and index */
	uint32_t idx;
	char *arena;            /* decode: room for f_strp's strings, after the entries */
	size_t arena_left;
};

static void fail(struct cx *c, int rc, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void fail(struct cx *c, int rc, const char *field, const char *fmt, ...)
{
	if (c->rc)
		return;
	c->rc = rc;
	if (!c->err || !c->errlen)
		return;
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (c->arr)
		snprintf(c->err, c->errlen, "%s frame: field %s[%u].%s at byte %zu: %s",
			 wire_type_name(c->type), c->arr, (unsigned)c->idx, field, c->off,
			 what);
	else
		snprintf(c->err, c->errlen, "%s frame: field %s at byte %zu: %s",
			 wire_type_name(c->type), field, c->off, what);
}

/* Room for n more bytes, in either direction. */
static int room(struct cx *c, const char *field, size_t n)
{
	if (c->rc)
		return 0;
	if (c->enc) {
		if (n > c->cap - c->off) {
			c->rc = GPULSE_ELIMIT; /* does not fit: no message, the caller splits */
			return 0;
		}
		return 1;
	}
	if (n > c->len - c->off) {
		fail(c, GPULSE_EPARSE, field, "needs %zu bytes, %zu left", n, c->len - c->off);
		return 0;
	}
	return 1;
}

static void f_int(struct cx *c, const char *field, void *v, unsigned n)
{
	if (!room(c, field, n))
		return;
	if (c->enc) {
		uint64_t x = n == 1 ? *(uint8_t *)v : n == 4 ? *(uint32_t *)v : *(uint64_t *)v;
		put_le(c->out + c->off, x, n);
	} else {
		uint64_t x = get_le(c->in + c->off, n);
		if (n == 1)
			*(uint8_t *)v = (uint8_t)x;
		else if (n == 4)
			*(uint32_t *)v = (uint32_t)x;
		else
			*(uint64_t *)v = x;
	}
	c->off += n;
}

static void f_u32(struct cx *c, const char *field, uint32_t *v) { f_int(c, field, v, 4); }
static void f_u64(struct cx *c, const char *field, uint64_t *v) { f_int(c, field, v, 8); }

/* A byte holding an enum or a flag: values above max are refused both
 * ways, so the encoder never writes what the decoder would reject. */
static void f_enum(struct cx *c, const char *field, uint8_t *v, unsigned max)
{
	if (c->rc)
		return;
	if (c->enc && *v > max) {
		fail(c, GPULSE_EINVAL, field, "value %u out of range 0..%u", *v, max);
		return;
	}
	size_t at = c->off;
	f_int(c, field, v, 1);
	if (!c->rc && *v > max) {
		c->off = at;
		fail(c, GPULSE_EPARSE, field, "value %u out of range 0..%u", *v, max);
	}
}

/* A rate: IEEE-754 bits on the wire; finite and not negative. */
static void f_rate(struct cx *c, const char *field, double *v)
{
	if (c->rc)
		return;
	if (c->enc && !(isfinite(*v) && *v >= 0)) {
		fail(c, GPULSE_EINVAL, field, "not a finite non-negative number");
		return;
	}
	uint64_t bits = 0;
	size_t at = c->off;
	if (c->enc)
		memcpy(&bits, v, sizeof bits);
	f_u64(c, field, &bits);
	if (c->enc || c->rc)
		return;
	memcpy(v, &bits, sizeof bits);
	if (!(isfinite(*v) && *v >= 0)) {
		c->off = at;
		fail(c, GPULSE_EPARSE, field, "not a finite non-negative number");
	}
}

/* The length of s[0..bound] cut to at most bound bytes, backing off to
 * the start of a UTF-8 sequence so no character is split. */
static size_t utf8_cut(const char *s, size_t bound)
{
	size_t n = strnlen(s, bound + 1);
	if (n <= bound)
		return n;
	n = bound;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

/* Encode a string: u16 length + bytes, cut at bound on a UTF-8 boundary. */
static void put_str(struct cx *c, const char *field, const char *s, size_t bound)
{
	uint16_t n = (uint16_t)utf8_cut(s, bound);
	if (!room(c, field, 2u + n))
		return;
	put_le(c->out + c->off, n, 2);
	memcpy(c->out + c->off + 2, s, n);
	c->off += 2u + n;
}

/* A string field: u16 length + bytes; s has room for bound + 1. */
static void f_str(struct cx *c, const char *field, char *s, size_t bound)
{
	if (c->rc)
		return;
	if (c->enc) {
		put_str(c, field, s, bound);
		return;
	}
	if (!room(c, field, 2))
		return;
	size_t n = (size_t)get_le(c->in + c->off, 2);
	if (n > bound) {
		fail(c, GPULSE_EPARSE, field, "length %zu over its bound %zu", n, bound);
		return;
	}
	c->off += 2;
	if (!room(c, field, n))
		return;
	const void *nul = memchr(c->in + c->off, '\0', n);
	if (nul) {
		c->off = (size_t)((const uint8_t *)nul - c->in);
		fail(c, GPULSE_EPARSE, field, "contains a NUL byte");
		return;
	}
	memcpy(s, c->in + c->off, n);
	s[n] = '\0';
	c->off += n;
}

/* A string field held by pointer (wire_event.name): encoded as f_str
 * (NULL as ""); decoded into c->arena, which f_entries sized for every
 * byte left in the payload. */
static void f_strp(struct cx *c, const char *field, const char **s, size_t bound)
{
	if (c->rc)
		return;
	if (c->enc) {
		put_str(c, field, *s ? *s : "", bound);
		return;
	}
	/* Each string takes its n bytes + 2 of the payload and n + 1 of the
	 * arena, which started with every payload byte left + 1 per entry:
	 * a string f_str accepts always fits. */
	size_t before = c->off;
	f_str(c, field, c->arena, bound);
	if (c->rc)
		return;
	size_t n = c->off - before - 2;
	*s = c->arena;
	c->arena += n + 1;
	c->arena_left -= n + 1;
}

/* An entry count, then (decoding) storage for that many entries, and
 * `extra` bytes after them (c->arena). Returns the entries' address, or
 * NULL with c->rc set (or when *n is 0). */
static void *f_entries_x(struct cx *c, const char *field, uint32_t *n, uint32_t max,
			 size_t min_bytes, size_t entry_size, void *entries, int strings);

static void *f_entries(struct cx *c, const char *field, uint32_t *n, uint32_t max,
		       size_t min_bytes, size_t entry_size, void *entries)
{
	return f_entries_x(c, field, n, max, min_bytes, entry_size, entries, 0);
}

static void *f_entries_x(struct cx *c, const char *field, uint32_t *n, uint32_t max,
			 size_t min_bytes, size_t entry_size, void *entries, int strings)
{
	if (c->rc)
		return NULL;
	if (c->enc && *n > max) {
		fail(c, GPULSE_EINVAL, field, "count %u over its bound %u", *n, max);
		return NULL;
	}
	if (c->enc && *n > 0 && !entries) {
		fail(c, GPULSE_EINVAL, field, "count %u with no entries", *n);
		return NULL;
	}
	size_t at = c->off;
	f_u32(c, field, n);
	if (c->rc)
		return NULL;
	if (c->enc)
		return entries;
	if (*n > max) {
		c->off = at;
		fail(c, GPULSE_EPARSE, field, "count %u over its bound %u", *n, max);
		return NULL;
	}
	if ((size_t)*n * min_bytes > c->len - c->off) {
		c->off = at;
		fail(c, GPULSE_EPARSE, field, "count %u needs at least %zu bytes, %zu left",
		     *n, (size_t)*n * min_bytes, c->len - c->off - 4);
		return NULL;
	}
	if (*n == 0)
		return NULL;
	/* Strings by pointer: at most every byte left, and a NUL each. */
	size_t extra = strings ? (c->len - c->off) + *n : 0;
	size_t need = (size_t)*n * entry_size + extra;
	struct wire_msg *m = c->m;
	if (m->storage_bytes < need) {
		void *p = realloc(m->storage, need);
		if (!p) {
			c->rc = GPULSE_ENOMEM;
			if (c->err && c->errlen)
				snprintf(c->err, c->errlen, "%s frame: out of memory for %u entries",
					 wire_type_name(c->type), *n);
			return NULL;
		}
		m->storage = p;
		m->storage_bytes = need;
	}
	memset(m->storage, 0, need);
	c->arena = (char *)m->storage + (size_t)*n * entry_size;
	c->arena_left = extra;
	return m->storage;
}

static void w_scope(struct cx *c, struct wire_scope *s)
{
	f_u32(c, "scope.device", &s->device);
	f_u32(c, "scope.context", &s->context);
	f_u64(c, "scope.interval_start_ns", &s->interval_start_ns);
	f_u64(c, "scope.interval_end_ns", &s->interval_end_ns);
	f_u64(c, "scope.traced_ns", &s->traced_ns);
}

static void w_hello(struct cx *c, struct wire_hello *h)
{
	f_u32(c, "pid", &h->pid);
	f_u32(c, "ppid", &h->ppid);
	f_u32(c, "uid", &h->uid);
	f_u32(c, "cupti_version", &h->cupti_version);
	f_u32(c, "cuda_driver_version", &h->cuda_driver_version);
	f_enum(c, "mode", &h->mode, WIRE_MODE_OFF);
	f_u32(c, "budget_ppm", &h->budget_ppm);
	f_u64(c, "start_wall_ns", &h->start_wall_ns);
	f_str(c, "cmdline", h->cmdline, WIRE_CMD_MAX);
	f_str(c, "lib_version", h->lib_version, sizeof h->lib_version - 1);
}

static void w_status(struct cx *c, struct wire_status *s)
{
	f_u64(c, "t_wall_ns", &s->t_wall_ns);
	f_enum(c, "mode", &s->mode, WIRE_MODE_OFF);
	f_enum(c, "active", &s->active, 1);
	f_enum(c, "stepped_aside", &s->stepped_aside, 1);
	f_str(c, "reason", s->reason, WIRE_REASON_MAX);
	f_u32(c, "budget_ppm", &s->budget_ppm);
	f_u32(c, "overhead_est_ppm", &s->overhead_est_ppm);
	f_u32(c, "duty_ppm", &s->duty_ppm);
	f_u64(c, "window_ns", &s->window_ns);
	f_rate(c, "launch_rate_hz", &s->launch_rate_hz);
	f_u64(c, "records_total", &s->records_total);
	f_u64(c, "records_dropped_total", &s->records_dropped_total);
	f_u64(c, "frames_dropped_total", &s->frames_dropped_total);
	f_u64(c, "kernels_other_total", &s->kernels_other_total);
	f_enum(c, "source", &s->source, WIRE_SOURCE_CENSUS);
	f_u32(c, "lasting_cost_ppm", &s->lasting_cost_ppm);
}

static void w_kernels(struct cx *c, struct wire_kernels *k)
{
	w_scope(c, &k->scope);
	struct wire_kernel *e = f_entries(c, "count", &k->count, WIRE_MAX_KERNELS, KERNEL_MIN,
					  sizeof *e, k->kernels);
	if (!c->enc)
		k->kernels = e;
	c->arr = "kernels";
	for (c->idx = 0; e && c->idx < k->count && !c->rc; c->idx++) {
		struct wire_kernel *x = &e[c->idx];
		f_str(c, "name", x->name, WIRE_KERNEL_NAME_MAX);
		f_u64(c, "launches", &x->launches);
		f_u64(c, "total_ns", &x->total_ns);
		f_u64(c, "min_ns", &x->min_ns);
		f_u64(c, "max_ns", &x->max_ns);
		for (unsigned b = 0; b < WIRE_HIST_BUCKETS; b++)
			f_u32(c, "hist", &x->hist[b]);
		for (unsigned d = 0; d < 3; d++)
			f_u32(c, "grid", &x->grid[d]);
		for (unsigned d = 0; d < 3; d++)
			f_u32(c, "block", &x->block[d]);
		f_u32(c, "registers", &x->registers);
		f_u32(c, "shared_bytes", &x->shared_bytes);
	}
	c->arr = NULL;
}

static void w_copies(struct cx *c, struct wire_copies *k)
{
	w_scope(c, &k->scope);
	struct wire_copy *e = f_entries(c, "count", &k->count, WIRE_MAX_COPIES, COPY_BYTES,
					sizeof *e, k->copies);
	if (!c->enc)
		k->copies = e;
	c->arr = "copies";
	for (c->idx = 0; e && c->idx < k->count && !c->rc; c->idx++) {
		struct wire_copy *x = &e[c->idx];
		f_enum(c, "kind", &x->kind, WIRE_COPY_KIND_COUNT - 1);
		f_enum(c, "pinned", &x->pinned, 1);
		f_u64(c, "count", &x->count);
		f_u64(c, "bytes", &x->bytes);
		f_u64(c, "total_ns", &x->total_ns);
	}
	c->arr = NULL;
}

static void w_uvm(struct cx *c, struct wire_uvm *u)
{
	w_scope(c, &u->scope);
	f_u64(c, "cpu_page_faults", &u->cpu_page_faults);
	f_u64(c, "gpu_page_faults", &u->gpu_page_faults);
	f_u64(c, "bytes_h2d", &u->bytes_h2d);
	f_u64(c, "bytes_d2h", &u->bytes_d2h);
	f_u64(c, "thrashing", &u->thrashing);
	f_u64(c, "throttling", &u->throttling);
}

static void w_streams(struct cx *c, struct wire_streams *k)
{
	w_scope(c, &k->scope);
	struct wire_stream *e = f_entries(c, "count", &k->count, WIRE_MAX_STREAMS, STREAM_BYTES,
					  sizeof *e, k->streams);
	if (!c->enc)
		k->streams = e;
	c->arr = "streams";
	for (c->idx = 0; e && c->idx < k->count && !c->rc; c->idx++) {
		struct wire_stream *x = &e[c->idx];
		f_u32(c, "stream", &x->stream);
		f_u64(c, "busy_ns", &x->busy_ns);
		f_u64(c, "gap_ns", &x->gap_ns);
		f_u64(c, "sync_wait_ns", &x->sync_wait_ns);
		f_u64(c, "syncs", &x->syncs);
	}
	c->arr = NULL;
}

static void w_ranges(struct cx *c, struct wire_ranges *k)
{
	w_scope(c, &k->scope);
	struct wire_range *e = f_entries(c, "count", &k->count, WIRE_MAX_RANGES, RANGE_MIN,
					 sizeof *e, k->ranges);
	if (!c->enc)
		k->ranges = e;
	c->arr = "ranges";
	for (c->idx = 0; e && c->idx < k->count && !c->rc; c->idx++) {
		struct wire_range *x = &e[c->idx];
		f_str(c, "name", x->name, WIRE_NAME_MAX);
		f_u64(c, "count", &x->count);
		f_u64(c, "total_ns", &x->total_ns);
		f_u64(c, "max_ns", &x->max_ns);
	}
	c->arr = NULL;
}

static void w_trace_events(struct cx *c, struct wire_trace_events *t)
{
	f_u64(c, "capture_id", &t->capture_id);
	struct wire_event *e = f_entries_x(c, "count", &t->count, WIRE_MAX_EVENTS, EVENT_MIN,
					   sizeof *e, t->events, 1);
	if (!c->enc)
		t->events = e;
	c->arr = "events";
	for (c->idx = 0; e && c->idx < t->count && !c->rc; c->idx++) {
		struct wire_event *x = &e[c->idx];
		f_enum(c, "kind", &x->kind, WIRE_EV_KIND_COUNT - 1);
		f_enum(c, "copy_kind", &x->copy_kind, WIRE_COPY_KIND_COUNT - 1);
		f_u32(c, "device", &x->device);
		f_u32(c, "stream", &x->stream);
		f_u64(c, "start_ns", &x->start_ns);
		f_u64(c, "end_ns", &x->end_ns);
		f_u64(c, "bytes", &x->bytes);
		f_strp(c, "name", &x->name, WIRE_KERNEL_NAME_MAX);
	}
	c->arr = NULL;
}

static void w_trace_end(struct cx *c, struct wire_trace_end *t)
{
	f_u64(c, "capture_id", &t->capture_id);
	f_u64(c, "events_total", &t->events_total);
	f_u64(c, "events_dropped", &t->events_dropped);
}

static void w_capture(struct cx *c, struct wire_capture *t)
{
	f_u64(c, "capture_id", &t->capture_id);
	f_u32(c, "seconds", &t->seconds);
	f_u32(c, "max_events", &t->max_events);
}

static void w_config(struct cx *c, struct wire_config *t)
{
	f_enum(c, "mode", &t->mode, WIRE_MODE_OFF);
	f_u32(c, "budget_ppm", &t->budget_ppm);
	f_str(c, "nvtx_range", t->nvtx_range, WIRE_NAME_MAX);
}

/* Walk m's payload; GPULSE_ENOTSUP for a type with no layout. */
static int walk(struct cx *c, struct wire_msg *m)
{
	switch (m->type) {
	case WIRE_HELLO: w_hello(c, &m->u.hello); break;
	case WIRE_STATUS: w_status(c, &m->u.status); break;
	case WIRE_KERNELS: w_kernels(c, &m->u.kernels); break;
	case WIRE_COPIES: w_copies(c, &m->u.copies); break;
	case WIRE_UVM: w_uvm(c, &m->u.uvm); break;
	case WIRE_STREAMS: w_streams(c, &m->u.streams); break;
	case WIRE_RANGES: w_ranges(c, &m->u.ranges); break;
	case WIRE_TRACE_EVENTS: w_trace_events(c, &m->u.trace_events); break;
	case WIRE_TRACE_END: w_trace_end(c, &m->u.trace_end); break;
	case WIRE_CAPTURE: w_capture(c, &m->u.capture); break;
	case WIRE_CONFIG: w_config(c, &m->u.config); break;
	default: return GPULSE_ENOTSUP;
	}
	return c->rc;
}

int wire_decode(struct wire_msg *m, unsigned type, const uint8_t *payload, size_t len,
		char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	m->type = type;
	memset(&m->u, 0, sizeof m->u);
	struct cx c = {.enc = 0, .in = payload, .len = len, .m = m, .type = type,
		       .err = err, .errlen = errlen};
	if (len > WIRE_MAX_PAYLOAD) {
		fail(&c, GPULSE_EPARSE, "payload_len", "%zu bytes over the maximum %u", len,
		     (unsigned)WIRE_MAX_PAYLOAD);
		return c.rc;
	}
	int rc = walk(&c, m);
	if (rc == GPULSE_ENOTSUP) {
		if (err && errlen)
			snprintf(err, errlen, "frame type %u is unknown", type);
		return rc;
	}
	if (rc)
		return rc;
	if (c.off != len) {
		if (err && errlen)
			snprintf(err, errlen, "%s frame: %zu trailing bytes at byte %zu",
				 wire_type_name(type), len - c.off, c.off);
		return GPULSE_EPARSE;
	}
	return 0;
}

void wire_msg_free(struct wire_msg *m)
{
	if (!m)
		return;
	free(m->storage);
	m->storage = NULL;
	m->storage_bytes = 0;
}

size_t wire_encode(const struct wire_msg *m, uint8_t *out, size_t cap)
{
	if (!m || !out || cap < WIRE_HEADER_BYTES)
		return 0;
	/* The walk takes mutable fields (it is shared with the decoder); it
	 * only reads them here, from a copy. */
	struct wire_msg copy = *m;
	size_t room_bytes = cap - WIRE_HEADER_BYTES;
	if (room_bytes > WIRE_MAX_PAYLOAD)
		room_bytes = WIRE_MAX_PAYLOAD;
	struct cx c = {.enc = 1, .out = out + WIRE_HEADER_BYTES, .cap = room_bytes,
		       .type = m->type};
	if (walk(&c, &copy))
		return 0;
	put_le(out, WIRE_MAGIC, 4);
	put_le(out + 4, WIRE_VERSION, 2);
	put_le(out + 6, m->type, 2);
	put_le(out + 8, c.off, 4);
	return WIRE_HEADER_BYTES + c.off;
}
