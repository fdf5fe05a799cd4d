/* The wire codec (src/wire/wire.c): every frame type round-trips field by
 * field; every count and string bound is accepted exactly at the bound
 * and refused one over (the encoder returns 0 or truncates at a UTF-8
 * boundary, the decoder names the field and byte offset); every error
 * path of the header and the payload (short, trailing, bad enum, NUL in
 * a string, non-finite rate, unknown type, counts that cannot fit).
 *
 * `test_wire --write-corpus DIR` writes one real frame of every type into
 * DIR as TYPE.bin, and as typed-TYPE.bin the same payload after one byte,
 * the type's index in fuzz_wire.c's types[] (all_types' order): that is
 * how fuzz/corpus/fuzz_wire/ was made. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/status.h"
#include "wire/wire.h"

#define FRAME_CAP (WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD)

static const unsigned all_types[] = {
	WIRE_HELLO, WIRE_STATUS, WIRE_KERNELS, WIRE_COPIES, WIRE_UVM, WIRE_STREAMS,
	WIRE_RANGES, WIRE_TRACE_EVENTS, WIRE_TRACE_END, WIRE_CAPTURE, WIRE_CONFIG,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

static struct wire_kernel s_kernels[3];
static struct wire_copy s_copies[WIRE_COPY_KIND_COUNT];
static struct wire_stream s_streams[2];
static struct wire_range s_ranges[2];
static struct wire_event s_events[WIRE_EV_KIND_COUNT];
static char s_event_names[WIRE_EV_KIND_COUNT][WIRE_KERNEL_NAME_MAX + 1];

static const struct wire_scope s_scope = {
	.device = 3, .context = 7, .interval_start_ns = 1764441600000000000ull,
	.interval_end_ns = 1764441601000000000ull, .traced_ns = 5000000,
};

/* A message of `type` with a distinct value in every field. */
static void sample(unsigned type, struct wire_msg *m)
{
	memset(m, 0, sizeof *m);
	m->type = type;
	switch (type) {
	case WIRE_HELLO: {
		struct wire_hello *h = &m->u.hello;
		h->pid = 4242; h->ppid = 1; h->uid = 1000; h->cupti_version = 24;
		h->cuda_driver_version = 12080; h->mode = WIRE_MODE_FOCUSED_NVTX;
		h->budget_ppm = 5000; h->start_wall_ns = 1764441599123456789ull;
		strcpy(h->cmdline, "python3 serve.py --port 8000 \"quoted\" \xc3\xa9t\xc3\xa9");
		strcpy(h->lib_version, "0.1.0");
		break;
	}
	case WIRE_STATUS: {
		struct wire_status *s = &m->u.status;
		s->t_wall_ns = 1764441601000000001ull; s->mode = WIRE_MODE_CONTINUOUS;
		s->active = 1; s->stepped_aside = 0; strcpy(s->reason, "");
		s->budget_ppm = 5000; s->overhead_est_ppm = 3100; s->duty_ppm = 125000;
		s->window_ns = 50000000; s->launch_rate_hz = 18234.5;
		s->records_total = 987654321; s->records_dropped_total = 17;
		s->frames_dropped_total = 3; s->kernels_other_total = 99;
		s->source = WIRE_SOURCE_CENSUS; s->lasting_cost_ppm = 150001;
		break;
	}
	case WIRE_KERNELS: {
		for (unsigned i = 0; i < 3; i++) {
			struct wire_kernel *k = &s_kernels[i];
			memset(k, 0, sizeof *k);
			snprintf(k->name, sizeof k->name, "void gemm<%u>(float const*, float*)", i);
			k->launches = 1000 + i; k->total_ns = 9000000 + i; k->min_ns = 4000 + i;
			k->max_ns = 20000 + i;
			for (unsigned b = 0; b < WIRE_HIST_BUCKETS; b++)
				k->hist[b] = b * 3 + i;
			k->grid[0] = 128; k->grid[1] = 2; k->grid[2] = 1 + i;
			k->block[0] = 256; k->block[1] = 1; k->block[2] = 1;
			k->registers = 64 + i; k->shared_bytes = 49152 + i;
		}
		strcpy(s_kernels[2].name, "other");
		m->u.kernels.scope = s_scope; m->u.kernels.count = 3;
		m->u.kernels.kernels = s_kernels;
		break;
	}
	case WIRE_COPIES:
		for (unsigned i = 0; i < WIRE_COPY_KIND_COUNT; i++) {
			s_copies[i] = (struct wire_copy){.kind = (uint8_t)i, .pinned = i & 1,
							 .count = 10 + i, .bytes = (1ull << 33) + i,
							 .total_ns = 777000 + i};
		}
		m->u.copies.scope = s_scope; m->u.copies.count = WIRE_COPY_KIND_COUNT;
		m->u.copies.copies = s_copies;
		break;
	case WIRE_UVM:
		m->u.uvm = (struct wire_uvm){.scope = s_scope, .cpu_page_faults = 11,
					     .gpu_page_faults = 22, .bytes_h2d = 33 << 20,
					     .bytes_d2h = 44 << 20, .thrashing = 5, .throttling = 6};
		break;
	case WIRE_STREAMS:
		for (unsigned i = 0; i < 2; i++)
			s_streams[i] = (struct wire_stream){.stream = 7 + i, .busy_ns = 800000 + i,
							    .gap_ns = 150000 + i,
							    .sync_wait_ns = 40000 + i, .syncs = 9 + i};
		m->u.streams.scope = s_scope; m->u.streams.count = 2;
		m->u.streams.streams = s_streams;
		break;
	case WIRE_RANGES:
		for (unsigned i = 0; i < 2; i++) {
			memset(&s_ranges[i], 0, sizeof s_ranges[i]);
			snprintf(s_ranges[i].name, sizeof s_ranges[i].name, "forward/layer%u", i);
			s_ranges[i].count = 12 + i; s_ranges[i].total_ns = 3000000 + i;
			s_ranges[i].max_ns = 400000 + i;
		}
		m->u.ranges.scope = s_scope; m->u.ranges.count = 2; m->u.ranges.ranges = s_ranges;
		break;
	case WIRE_TRACE_EVENTS:
		for (unsigned i = 0; i < WIRE_EV_KIND_COUNT; i++) {
			struct wire_event *e = &s_events[i];
			memset(e, 0, sizeof *e);
			e->kind = (uint8_t)i; e->copy_kind = i == WIRE_EV_COPY ? WIRE_COPY_D2H : 0;
			e->device = 1; e->stream = 13 + i;
			e->start_ns = 1764441600000100000ull + i * 1000;
			e->end_ns = e->start_ns + 500 + i; e->bytes = i == WIRE_EV_COPY ? 1 << 20 : 0;
			snprintf(s_event_names[i], sizeof s_event_names[i], "event \"%u\"\t\\", i);
			e->name = s_event_names[i];
		}
		m->u.trace_events.capture_id = 0xabcdef0123ull;
		m->u.trace_events.count = WIRE_EV_KIND_COUNT;
		m->u.trace_events.events = s_events;
		break;
	case WIRE_TRACE_END:
		m->u.trace_end = (struct wire_trace_end){.capture_id = 0xabcdef0123ull,
							 .events_total = 123456, .events_dropped = 78};
		break;
	case WIRE_CAPTURE:
		m->u.capture = (struct wire_capture){.capture_id = 99, .seconds = 5,
						     .max_events = 200000};
		break;
	case WIRE_CONFIG:
		m->u.config.mode = WIRE_MODE_FOCUSED_NVTX; m->u.config.budget_ppm = 2500;
		strcpy(m->u.config.nvtx_range, "train_step");
		break;
	default:
		fail_msg("no sample for type %u", type);
	}
}

static void assert_scope(const struct wire_scope *a, const struct wire_scope *b)
{
	assert_int_equal(a->device, b->device);
	assert_int_equal(a->context, b->context);
	assert_true(a->interval_start_ns == b->interval_start_ns);
	assert_true(a->interval_end_ns == b->interval_end_ns);
	assert_true(a->traced_ns == b->traced_ns);
}

/* Field-by-field equality of two messages of the same type. */
static void assert_msg_equal(const struct wire_msg *a, const struct wire_msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case WIRE_HELLO:
		assert_int_equal(a->u.hello.pid, b->u.hello.pid);
		assert_int_equal(a->u.hello.ppid, b->u.hello.ppid);
		assert_int_equal(a->u.hello.uid, b->u.hello.uid);
		assert_int_equal(a->u.hello.cupti_version, b->u.hello.cupti_version);
		assert_int_equal(a->u.hello.cuda_driver_version, b->u.hello.cuda_driver_version);
		assert_int_equal(a->u.hello.mode, b->u.hello.mode);
		assert_int_equal(a->u.hello.budget_ppm, b->u.hello.budget_ppm);
		assert_true(a->u.hello.start_wall_ns == b->u.hello.start_wall_ns);
		assert_string_equal(a->u.hello.cmdline, b->u.hello.cmdline);
		assert_string_equal(a->u.hello.lib_version, b->u.hello.lib_version);
		break;
	case WIRE_STATUS: {
		const struct wire_status *x = &a->u.status, *y = &b->u.status;
		assert_true(x->t_wall_ns == y->t_wall_ns);
		assert_int_equal(x->mode, y->mode);
		assert_int_equal(x->active, y->active);
		assert_int_equal(x->stepped_aside, y->stepped_aside);
		assert_string_equal(x->reason, y->reason);
		assert_int_equal(x->budget_ppm, y->budget_ppm);
		assert_int_equal(x->overhead_est_ppm, y->overhead_est_ppm);
		assert_int_equal(x->duty_ppm, y->duty_ppm);
		assert_true(x->window_ns == y->window_ns);
		assert_true(x->launch_rate_hz == y->launch_rate_hz);
		assert_true(x->records_total == y->records_total);
		assert_true(x->records_dropped_total == y->records_dropped_total);
		assert_true(x->frames_dropped_total == y->frames_dropped_total);
		assert_true(x->kernels_other_total == y->kernels_other_total);
		assert_int_equal(x->source, y->source);
		assert_int_equal(x->lasting_cost_ppm, y->lasting_cost_ppm);
		break;
	}
	case WIRE_KERNELS:
		assert_scope(&a->u.kernels.scope, &b->u.kernels.scope);
		assert_int_equal(a->u.kernels.count, b->u.kernels.count);
		for (uint32_t i = 0; i < a->u.kernels.count; i++) {
			const struct wire_kernel *x = &a->u.kernels.kernels[i];
			const struct wire_kernel *y = &b->u.kernels.kernels[i];
			assert_string_equal(x->name, y->name);
			assert_true(x->launches == y->launches && x->total_ns == y->total_ns);
			assert_true(x->min_ns == y->min_ns && x->max_ns == y->max_ns);
			assert_memory_equal(x->hist, y->hist, sizeof x->hist);
			assert_memory_equal(x->grid, y->grid, sizeof x->grid);
			assert_memory_equal(x->block, y->block, sizeof x->block);
			assert_int_equal(x->registers, y->registers);
			assert_int_equal(x->shared_bytes, y->shared_bytes);
		}
		break;
	case WIRE_COPIES:
		assert_scope(&a->u.copies.scope, &b->u.copies.scope);
		assert_int_equal(a->u.copies.count, b->u.copies.count);
		for (uint32_t i = 0; i < a->u.copies.count; i++) {
			const struct wire_copy *x = &a->u.copies.copies[i];
			const struct wire_copy *y = &b->u.copies.copies[i];
			assert_int_equal(x->kind, y->kind);
			assert_int_equal(x->pinned, y->pinned);
			assert_true(x->count == y->count && x->bytes == y->bytes);
			assert_true(x->total_ns == y->total_ns);
		}
		break;
	case WIRE_UVM:
		assert_scope(&a->u.uvm.scope, &b->u.uvm.scope);
		assert_true(a->u.uvm.cpu_page_faults == b->u.uvm.cpu_page_faults);
		assert_true(a->u.uvm.gpu_page_faults == b->u.uvm.gpu_page_faults);
		assert_true(a->u.uvm.bytes_h2d == b->u.uvm.bytes_h2d);
		assert_true(a->u.uvm.bytes_d2h == b->u.uvm.bytes_d2h);
		assert_true(a->u.uvm.thrashing == b->u.uvm.thrashing);
		assert_true(a->u.uvm.throttling == b->u.uvm.throttling);
		break;
	case WIRE_STREAMS:
		assert_scope(&a->u.streams.scope, &b->u.streams.scope);
		assert_int_equal(a->u.streams.count, b->u.streams.count);
		for (uint32_t i = 0; i < a->u.streams.count; i++) {
			const struct wire_stream *x = &a->u.streams.streams[i];
			const struct wire_stream *y = &b->u.streams.streams[i];
			assert_int_equal(x->stream, y->stream);
			assert_true(x->busy_ns == y->busy_ns && x->gap_ns == y->gap_ns);
			assert_true(x->sync_wait_ns == y->sync_wait_ns && x->syncs == y->syncs);
		}
		break;
	case WIRE_RANGES:
		assert_scope(&a->u.ranges.scope, &b->u.ranges.scope);
		assert_int_equal(a->u.ranges.count, b->u.ranges.count);
		for (uint32_t i = 0; i < a->u.ranges.count; i++) {
			const struct wire_range *x = &a->u.ranges.ranges[i];
			const struct wire_range *y = &b->u.ranges.ranges[i];
			assert_string_equal(x->name, y->name);
			assert_true(x->count == y->count && x->total_ns == y->total_ns);
			assert_true(x->max_ns == y->max_ns);
		}
		break;
	case WIRE_TRACE_EVENTS:
		assert_true(a->u.trace_events.capture_id == b->u.trace_events.capture_id);
		assert_int_equal(a->u.trace_events.count, b->u.trace_events.count);
		for (uint32_t i = 0; i < a->u.trace_events.count; i++) {
			const struct wire_event *x = &a->u.trace_events.events[i];
			const struct wire_event *y = &b->u.trace_events.events[i];
			assert_int_equal(x->kind, y->kind);
			assert_int_equal(x->copy_kind, y->copy_kind);
			assert_int_equal(x->device, y->device);
			assert_int_equal(x->stream, y->stream);
			assert_true(x->start_ns == y->start_ns && x->end_ns == y->end_ns);
			assert_true(x->bytes == y->bytes);
			assert_string_equal(x->name, y->name);
		}
		break;
	case WIRE_TRACE_END:
		assert_true(a->u.trace_end.capture_id == b->u.trace_end.capture_id);
		assert_true(a->u.trace_end.events_total == b->u.trace_end.events_total);
		assert_true(a->u.trace_end.events_dropped == b->u.trace_end.events_dropped);
		break;
	case WIRE_CAPTURE:
		assert_true(a->u.capture.capture_id == b->u.capture.capture_id);
		assert_int_equal(a->u.capture.seconds, b->u.capture.seconds);
		assert_int_equal(a->u.capture.max_events, b->u.capture.max_events);
		break;
	case WIRE_CONFIG:
		assert_int_equal(a->u.config.mode, b->u.config.mode);
		assert_int_equal(a->u.config.budget_ppm, b->u.config.budget_ppm);
		assert_string_equal(a->u.config.nvtx_range, b->u.config.nvtx_range);
		break;
	default:
		fail_msg("type %u", a->type);
	}
}

static uint8_t frame[FRAME_CAP];

/* Encode m, parse its header, decode its payload into d. */
static size_t encode_decode(const struct wire_msg *m, struct wire_msg *d)
{
	size_t n = wire_encode(m, frame, sizeof frame);
	assert_true(n >= WIRE_HEADER_BYTES);
	unsigned type = 0;
	uint32_t len = 0;
	assert_int_equal(wire_header_parse(frame, &type, &len), 0);
	assert_int_equal(type, m->type);
	assert_int_equal(len, n - WIRE_HEADER_BYTES);
	char err[256];
	int rc = wire_decode(d, type, frame + WIRE_HEADER_BYTES, len, err, sizeof err);
	if (rc)
		fail_msg("decode: %s", err);
	return n;
}

/* Decode frame[] (a payload of `type`, `len` bytes) expecting failure
 * `want_rc`, with an error naming `field` (and "byte" when want_rc is
 * EPARSE). */
static void expect_refused(unsigned type, const uint8_t *payload, size_t len, int want_rc,
			   const char *field)
{
	struct wire_msg d = {0};
	char err[256];
	int rc = wire_decode(&d, type, payload, len, err, sizeof err);
	if (rc != want_rc)
		fail_msg("type %s len %zu: rc %d want %d (%s)", wire_type_name(type), len, rc,
			 want_rc, err);
	if (field && !strstr(err, field))
		fail_msg("error \"%s\" does not name %s", err, field);
	if (want_rc == GPULSE_EPARSE && !strstr(err, "byte"))
		fail_msg("error \"%s\" gives no byte offset", err);
	wire_msg_free(&d);
}

static void test_round_trip_every_type(void **state)
{
	(void)state;
	struct wire_msg d = {0};
	for (size_t i = 0; i < N_TYPES; i++) {
		struct wire_msg m;
		sample(all_types[i], &m);
		encode_decode(&m, &d);
		assert_msg_equal(&m, &d);
	}
	/* Empty arrays round-trip with a NULL entry pointer. */
	struct wire_msg m = {.type = WIRE_KERNELS};
	m.u.kernels.scope = s_scope;
	encode_decode(&m, &d);
	assert_int_equal(d.u.kernels.count, 0);
	assert_null(d.u.kernels.kernels);
	wire_msg_free(&d);
	wire_msg_free(&d);  /* twice is fine */
	wire_msg_free(NULL);
}

static void test_type_names(void **state)
{
	(void)state;
	assert_string_equal(wire_type_name(WIRE_HELLO), "HELLO");
	assert_string_equal(wire_type_name(WIRE_KERNELS), "KERNELS");
	assert_string_equal(wire_type_name(WIRE_TRACE_END), "TRACE_END");
	assert_string_equal(wire_type_name(WIRE_CAPTURE), "CAPTURE");
	assert_string_equal(wire_type_name(WIRE_CONFIG), "CONFIG");
	assert_string_equal(wire_type_name(0), "unknown");
	assert_string_equal(wire_type_name(10), "unknown");
	assert_string_equal(wire_type_name(66), "unknown");
	for (size_t i = 0; i < N_TYPES; i++)
		assert_string_not_equal(wire_type_name(all_types[i]), "unknown");
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void test_header(void **state)
{
	(void)state;
	struct wire_msg m;
	sample(WIRE_CAPTURE, &m);
	size_t n = wire_encode(&m, frame, sizeof frame);
	assert_int_equal(n, WIRE_HEADER_BYTES + 16);
	unsigned type;
	uint32_t len;
	uint8_t h[WIRE_HEADER_BYTES];
	memcpy(h, frame, sizeof h);
	assert_int_equal(wire_header_parse(h, &type, &len), 0);
	assert_int_equal(type, WIRE_CAPTURE);
	assert_int_equal(len, 16);
	/* "GPLW" on the wire, little-endian. */
	assert_memory_equal(h, "GPLW", 4);

	h[0] ^= 1;
	assert_int_equal(wire_header_parse(h, &type, &len), GPULSE_EPARSE);
	h[0] ^= 1;
	h[4] = WIRE_VERSION + 1;
	assert_int_equal(wire_header_parse(h, &type, &len), GPULSE_EPARSE);
	/* Version 1's STATUS had no source or lasting_cost_ppm: a library
	 * of that layout is refused at its first header. */
	h[4] = 1;
	assert_int_equal(wire_header_parse(h, &type, &len), GPULSE_EPARSE);
	h[4] = WIRE_VERSION;
	put32(h + 8, WIRE_MAX_PAYLOAD);
	assert_int_equal(wire_header_parse(h, &type, &len), 0);
	assert_int_equal(len, WIRE_MAX_PAYLOAD);
	put32(h + 8, WIRE_MAX_PAYLOAD + 1);
	assert_int_equal(wire_header_parse(h, &type, &len), GPULSE_ELIMIT);
	put32(h + 8, 0xffffffffu);
	assert_int_equal(wire_header_parse(h, &type, &len), GPULSE_ELIMIT);
	/* An unknown type parses: the payload is skipped by the receiver. */
	put32(h + 8, 0);
	h[6] = 200;
	assert_int_equal(wire_header_parse(h, &type, &len), 0);
	assert_int_equal(type, 200);
}

/* Every prefix of a valid payload is refused as short, and one byte more
 * is refused as trailing; nothing reads out of bounds (ASan run). */
static void test_short_and_trailing(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_TYPES; i++) {
		struct wire_msg m;
		sample(all_types[i], &m);
		size_t n = wire_encode(&m, frame, sizeof frame);
		size_t len = n - WIRE_HEADER_BYTES;
		for (size_t cut = 0; cut < len; cut++) {
			uint8_t *copy = malloc(cut ? cut : 1);
			memcpy(copy, frame + WIRE_HEADER_BYTES, cut);
			expect_refused(all_types[i], copy, cut, GPULSE_EPARSE, "field");
			free(copy);
		}
		uint8_t *longer = malloc(len + 1);
		memcpy(longer, frame + WIRE_HEADER_BYTES, len);
		longer[len] = 0;
		expect_refused(all_types[i], longer, len + 1, GPULSE_EPARSE, "trailing");
		free(longer);
	}
}

static void test_unknown_type(void **state)
{
	(void)state;
	uint8_t p[4] = {0};
	expect_refused(0, p, sizeof p, GPULSE_ENOTSUP, "unknown");
	expect_refused(10, p, sizeof p, GPULSE_ENOTSUP, "10");
	expect_refused(63, p, 0, GPULSE_ENOTSUP, NULL);
	/* An encoder asked for an unknown type writes nothing. */
	struct wire_msg m = {.type = 63};
	assert_int_equal(wire_encode(&m, frame, sizeof frame), 0);
}

/* Flip one byte of a sample's payload at `off` to `val` and expect the
 * decoder to refuse it naming `field` at that byte. */
static void expect_bad_byte(unsigned type, size_t off, uint8_t val, const char *field)
{
	struct wire_msg m;
	sample(type, &m);
	size_t n = wire_encode(&m, frame, sizeof frame);
	uint8_t *p = frame + WIRE_HEADER_BYTES;
	assert_true(off < n - WIRE_HEADER_BYTES);
	p[off] = val;
	struct wire_msg d = {0};
	char err[256], at[32];
	assert_int_equal(wire_decode(&d, type, p, n - WIRE_HEADER_BYTES, err, sizeof err),
			 GPULSE_EPARSE);
	snprintf(at, sizeof at, "at byte %zu", off);
	if (!strstr(err, field) || !strstr(err, at))
		fail_msg("error \"%s\" should name %s %s", err, field, at);
	wire_msg_free(&d);
}

static void test_bad_enums(void **state)
{
	(void)state;
	/* HELLO: five u32 then the mode byte. */
	expect_bad_byte(WIRE_HELLO, 20, WIRE_MODE_OFF + 1, "mode");
	expect_bad_byte(WIRE_HELLO, 20, 255, "mode");
	/* STATUS: u64 then mode, active, stepped_aside. */
	expect_bad_byte(WIRE_STATUS, 8, WIRE_MODE_OFF + 1, "mode");
	expect_bad_byte(WIRE_STATUS, 9, 2, "active");
	expect_bad_byte(WIRE_STATUS, 10, 2, "stepped_aside");
	/* ... and source after the fixed fields (13 + 3 u32 + 2 u64 + 4 u64 = 73,
	 * the empty reason included). */
	expect_bad_byte(WIRE_STATUS, 73, WIRE_SOURCE_CENSUS + 1, "source");
	expect_bad_byte(WIRE_STATUS, 73, 255, "source");
	/* COPIES: scope (32) + count (4), then kind, pinned of entry 0; entry 1
	 * starts 26 bytes later. */
	expect_bad_byte(WIRE_COPIES, 36, WIRE_COPY_KIND_COUNT, "copies[0].kind");
	expect_bad_byte(WIRE_COPIES, 37, 2, "copies[0].pinned");
	expect_bad_byte(WIRE_COPIES, 36 + 26, 9, "copies[1].kind");
	/* TRACE_EVENTS: capture id (8) + count (4), then kind, copy_kind. */
	expect_bad_byte(WIRE_TRACE_EVENTS, 12, WIRE_EV_KIND_COUNT, "events[0].kind");
	expect_bad_byte(WIRE_TRACE_EVENTS, 13, WIRE_COPY_KIND_COUNT, "events[0].copy_kind");
	/* CONFIG: mode first. */
	expect_bad_byte(WIRE_CONFIG, 0, WIRE_MODE_OFF + 1, "mode");

	/* The encoder refuses what the decoder would refuse. */
	struct wire_msg m;
	sample(WIRE_STATUS, &m);
	m.u.status.active = 2;
	assert_int_equal(wire_encode(&m, frame, sizeof frame), 0);
	sample(WIRE_STATUS, &m);
	m.u.status.source = WIRE_SOURCE_CENSUS + 1;
	assert_int_equal(wire_encode(&m, frame, sizeof frame), 0);
	sample(WIRE_COPIES, &m);
	s_copies[1].kind = WIRE_COPY_KIND_COUNT;
	assert_int_equal(wire_encode(&m, frame, sizeof frame), 0);
	sample(WIRE_HELLO, &m);
	m.u.hello.mode = 9;
	assert_int_equal(wire_encode(&m, frame, sizeof frame), 0);
}

static void test_rate(void **state)
{
	(void)state;
	const double bad[] = {NAN, INFINITY, -INFINITY, -1.0};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct wire_msg m;
		sample(WIRE_STATUS, &m);
		m.u.status.launch_rate_hz = bad[i];
		assert_int_equal(wire_encode(&m, frame, sizeof frame), 0);
		/* Put the bits there by hand: the decoder refuses them too. */
		sample(WIRE_STATUS, &m);
		size_t n = wire_encode(&m, frame, sizeof frame);
		/* t_wall 8 + 3 flags + reason (2 + 0) + 3 u32 + window 8 = 33 */
		size_t off = WIRE_HEADER_BYTES + 8 + 3 + 2 + 12 + 8;
		memcpy(frame + off, &bad[i], 8);
		struct wire_msg d = {0};
		char err[256];
		assert_int_equal(wire_decode(&d, WIRE_STATUS, frame + WIRE_HEADER_BYTES,
					     n - WIRE_HEADER_BYTES, err, sizeof err),
				 GPULSE_EPARSE);
		assert_non_null(strstr(err, "launch_rate_hz"));
		assert_non_null(strstr(err, "at byte 33"));
	}
	/* Zero is a rate. */
	struct wire_msg m, d = {0};
	sample(WIRE_STATUS, &m);
	m.u.status.launch_rate_hz = 0;
	encode_decode(&m, &d);
	assert_true(d.u.status.launch_rate_hz == 0);
}

/* A one-kernel frame whose name has `n` bytes of filler then `tail`. */
static size_t kernel_with_name(struct wire_msg *m, size_t n, const char *tail)
{
	sample(WIRE_KERNELS, m);
	m->u.kernels.count = 1;
	memset(s_kernels[0].name, 'k', n);
	/* The name array has WIRE_KERNEL_NAME_MAX + 1 bytes. */
	snprintf(s_kernels[0].name + n, sizeof s_kernels[0].name - n, "%s", tail);
	return wire_encode(m, frame, sizeof frame);
}

static void test_string_bounds(void **state)
{
	(void)state;
	struct wire_msg m, d = {0};
	/* Exactly at the bound: kept whole. */
	kernel_with_name(&m, WIRE_KERNEL_NAME_MAX, "");
	encode_decode(&m, &d);
	assert_int_equal(strlen(d.u.kernels.kernels[0].name), WIRE_KERNEL_NAME_MAX);

	/* Over the bound (no NUL in the array): cut to the bound. */
	memset(s_kernels[0].name, 'x', sizeof s_kernels[0].name);
	encode_decode(&m, &d);
	assert_int_equal(strlen(d.u.kernels.kernels[0].name), WIRE_KERNEL_NAME_MAX);

	/* A two-byte character across the bound is dropped whole. */
	memset(s_kernels[0].name, 'k', sizeof s_kernels[0].name);
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX - 1] = (char)0xc3;
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX] = (char)0xa9;
	encode_decode(&m, &d);
	assert_int_equal(strlen(d.u.kernels.kernels[0].name), WIRE_KERNEL_NAME_MAX - 1);
	/* A three-byte character ending exactly at the bound is kept. */
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX - 3] = (char)0xe2;
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX - 2] = (char)0x82;
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX - 1] = (char)0xac;
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX] = 'z';
	encode_decode(&m, &d);
	assert_int_equal(strlen(d.u.kernels.kernels[0].name), WIRE_KERNEL_NAME_MAX);
	assert_memory_equal(d.u.kernels.kernels[0].name + WIRE_KERNEL_NAME_MAX - 3, "\xe2\x82\xac", 3);
	/* ... and cut whole when it straddles it. */
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX - 2] = (char)0xe2;
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX - 1] = (char)0x82;
	s_kernels[0].name[WIRE_KERNEL_NAME_MAX] = (char)0xac;
	encode_decode(&m, &d);
	assert_int_equal(strlen(d.u.kernels.kernels[0].name), WIRE_KERNEL_NAME_MAX - 2);

	/* Command line and lib_version at and over their bounds. */
	sample(WIRE_HELLO, &m);
	memset(m.u.hello.cmdline, 'c', WIRE_CMD_MAX);
	m.u.hello.cmdline[WIRE_CMD_MAX] = '\0';
	memset(m.u.hello.lib_version, 'v', sizeof m.u.hello.lib_version);
	encode_decode(&m, &d);
	assert_int_equal(strlen(d.u.hello.cmdline), WIRE_CMD_MAX);
	assert_int_equal(strlen(d.u.hello.lib_version), 32);
	sample(WIRE_STATUS, &m);
	memset(m.u.status.reason, 'r', sizeof m.u.status.reason);
	encode_decode(&m, &d);
	assert_int_equal(strlen(d.u.status.reason), WIRE_REASON_MAX);

	/* The decoder refuses one byte over, naming field and offset: write
	 * a HELLO by hand with a 513-byte command line. */
	sample(WIRE_HELLO, &m);
	m.u.hello.cmdline[0] = '\0';
	size_t n = wire_encode(&m, frame, sizeof frame);
	size_t len = n - WIRE_HEADER_BYTES;
	static uint8_t p[2048];
	size_t at = 4 * 5 + 1 + 4 + 8; /* the cmdline length */
	memcpy(p, frame + WIRE_HEADER_BYTES, at);
	p[at] = (uint8_t)((WIRE_CMD_MAX + 1) & 0xff);
	p[at + 1] = (uint8_t)((WIRE_CMD_MAX + 1) >> 8);
	memset(p + at + 2, 'c', WIRE_CMD_MAX + 1);
	memcpy(p + at + 2 + WIRE_CMD_MAX + 1, frame + WIRE_HEADER_BYTES + at + 2, len - at - 2);
	char err[256];
	assert_int_equal(wire_decode(&d, WIRE_HELLO, p, len + WIRE_CMD_MAX + 1, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "cmdline"));
	assert_non_null(strstr(err, "at byte 33"));
	assert_non_null(strstr(err, "513"));
	/* ... and exactly at the bound is fine. */
	p[at] = (uint8_t)(WIRE_CMD_MAX & 0xff);
	p[at + 1] = (uint8_t)(WIRE_CMD_MAX >> 8);
	memmove(p + at + 2 + WIRE_CMD_MAX, p + at + 2 + WIRE_CMD_MAX + 1, len - at - 2);
	assert_int_equal(wire_decode(&d, WIRE_HELLO, p, len + WIRE_CMD_MAX, err, sizeof err), 0);
	assert_int_equal(strlen(d.u.hello.cmdline), WIRE_CMD_MAX);

	/* A string with a NUL byte inside is refused at that byte. */
	sample(WIRE_CONFIG, &m);
	n = wire_encode(&m, frame, sizeof frame);
	frame[WIRE_HEADER_BYTES + 5 + 2 + 3] = 0; /* "tra\0n_step" */
	assert_int_equal(wire_decode(&d, WIRE_CONFIG, frame + WIRE_HEADER_BYTES,
				     n - WIRE_HEADER_BYTES, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "nvtx_range"));
	assert_non_null(strstr(err, "NUL"));
	assert_non_null(strstr(err, "at byte 10"));
	/* A string length within its bound but past the end of the payload. */
	frame[WIRE_HEADER_BYTES + 5] = 0xff;
	assert_int_equal(wire_decode(&d, WIRE_CONFIG, frame + WIRE_HEADER_BYTES,
				     n - WIRE_HEADER_BYTES, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "nvtx_range"));
	assert_non_null(strstr(err, "needs 255 bytes, 10 left"));
	/* A string length over its bound (0x1ff = 511). */
	frame[WIRE_HEADER_BYTES + 6] = 0x01;
	assert_int_equal(wire_decode(&d, WIRE_CONFIG, frame + WIRE_HEADER_BYTES,
				     n - WIRE_HEADER_BYTES, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "length 511 over its bound 256"));
	assert_non_null(strstr(err, "at byte 5"));
	wire_msg_free(&d);
}

/* Arrays of `count` entries, encoded through wire_encode: `count` at the
 * bound goes through, one more is refused by both sides. */
static void check_count_bound(unsigned type, uint32_t max, const char *field)
{
	struct wire_msg m = {.type = type}, d = {0};
	size_t esz = 0;
	void *entries = NULL;
	switch (type) {
	case WIRE_KERNELS: esz = sizeof(struct wire_kernel); break;
	case WIRE_COPIES: esz = sizeof(struct wire_copy); break;
	case WIRE_STREAMS: esz = sizeof(struct wire_stream); break;
	case WIRE_RANGES: esz = sizeof(struct wire_range); break;
	case WIRE_TRACE_EVENTS: esz = sizeof(struct wire_event); break;
	}
	entries = calloc(max + 1, esz);
	assert_non_null(entries);
	uint32_t *count = NULL;
	switch (type) {
	case WIRE_KERNELS:
		m.u.kernels.kernels = entries; count = &m.u.kernels.count;
		for (uint32_t i = 0; i <= max; i++)
			snprintf(m.u.kernels.kernels[i].name, 32, "k%u", i);
		break;
	case WIRE_COPIES: m.u.copies.copies = entries; count = &m.u.copies.count; break;
	case WIRE_STREAMS: m.u.streams.streams = entries; count = &m.u.streams.count; break;
	case WIRE_RANGES: m.u.ranges.ranges = entries; count = &m.u.ranges.count; break;
	case WIRE_TRACE_EVENTS:
		m.u.trace_events.events = entries; count = &m.u.trace_events.count;
		for (uint32_t i = 0; i <= max; i++)
			m.u.trace_events.events[i].start_ns = i;
		break;
	}
	*count = max;
	size_t n = encode_decode(&m, &d);
	assert_true(n > WIRE_HEADER_BYTES);
	switch (type) {
	case WIRE_KERNELS:
		assert_int_equal(d.u.kernels.count, max);
		assert_string_equal(d.u.kernels.kernels[max - 1].name, "k511");
		break;
	case WIRE_TRACE_EVENTS:
		assert_int_equal(d.u.trace_events.count, max);
		assert_true(d.u.trace_events.events[max - 1].start_ns == max - 1);
		break;
	}
	*count = max + 1;
	assert_int_equal(wire_encode(&m, frame, sizeof frame), 0);

	/* Patch the count in the frame at the bound to max + 1 and add one
	 * entry's worth of bytes: the decoder refuses the count itself. */
	*count = max;
	n = wire_encode(&m, frame, sizeof frame);
	size_t count_off = type == WIRE_TRACE_EVENTS ? 8 : 32;
	put32(frame + WIRE_HEADER_BYTES + count_off, max + 1);
	char err[256];
	size_t plen = n - WIRE_HEADER_BYTES;
	assert_int_equal(wire_decode(&d, type, frame + WIRE_HEADER_BYTES, plen, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, field));
	char want[64];
	snprintf(want, sizeof want, "count %u over its bound %u", max + 1, max);
	if (!strstr(err, want))
		fail_msg("\"%s\" lacks \"%s\"", err, want);
	snprintf(want, sizeof want, "at byte %zu", count_off);
	assert_non_null(strstr(err, want));
	wire_msg_free(&d);
	free(entries);
}

/* Kernel names past WIRE_KERNEL_NAME_MAX: cut on a UTF-8 boundary, with
 * the whole name's hash, so two long names that differ only past the cut
 * stay two; at the bound or under it, untouched. */
static void test_kernel_name_fit(void **state)
{
	(void)state;
	/* FNV-1a 64's published test vectors. */
	assert_true(wire_name_hash("") == 0xcbf29ce484222325ull);
	assert_true(wire_name_hash("a") == 0xaf63dc4c8601ec8cull);
	static char a[10240], b[10240], out[WIRE_KERNEL_NAME_MAX + 1], out2[WIRE_KERNEL_NAME_MAX + 1];
	memset(a, 'x', WIRE_KERNEL_NAME_MAX);
	a[WIRE_KERNEL_NAME_MAX] = '\0';
	wire_kernel_name_fit(out, a);
	assert_string_equal(out, a);
	/* 10 KB, the last byte differing. */
	memset(a, 'x', sizeof a - 1);
	a[sizeof a - 1] = '\0';
	memcpy(b, a, sizeof b);
	b[sizeof b - 2] = 'y';
	/* A two-byte character across where the cut falls. */
	size_t cut = WIRE_KERNEL_NAME_MAX - strlen(WIRE_KERNEL_HASH_SUFFIX) - 16;
	a[cut - 1] = b[cut - 1] = (char)0xc3;
	a[cut] = b[cut] = (char)0xa9;
	wire_kernel_name_fit(out, a);
	wire_kernel_name_fit(out2, b);
	assert_true(strlen(out) <= WIRE_KERNEL_NAME_MAX);
	assert_string_not_equal(out, out2);
	assert_int_equal(memcmp(out, a, cut - 1), 0);
	char want[64];
	snprintf(want, sizeof want, WIRE_KERNEL_HASH_SUFFIX "%016llx",
		 (unsigned long long)wire_name_hash(a));
	assert_string_equal(out + cut - 1, want); /* the split character dropped whole */
	/* A smaller bound (gpulsed's labels). */
	char small[1025];
	wire_name_fit(small, 1024, a);
	assert_true(strlen(small) <= 1024 && strlen(small) >= 1000);
	assert_non_null(strstr(small, want));
	/* A fitted name survives the wire whole. */
	struct wire_msg m, d = {0};
	sample(WIRE_KERNELS, &m);
	m.u.kernels.count = 1;
	memcpy(s_kernels[0].name, out, sizeof out);
	encode_decode(&m, &d);
	assert_string_equal(d.u.kernels.kernels[0].name, out);
	wire_msg_free(&d);
}

static void test_count_bounds(void **state)
{
	(void)state;
	check_count_bound(WIRE_KERNELS, WIRE_MAX_KERNELS, "count");
	check_count_bound(WIRE_COPIES, WIRE_MAX_COPIES, "count");
	check_count_bound(WIRE_STREAMS, WIRE_MAX_STREAMS, "count");
	check_count_bound(WIRE_RANGES, WIRE_MAX_RANGES, "count");
	check_count_bound(WIRE_TRACE_EVENTS, WIRE_MAX_EVENTS, "count");

	/* A count within its bound that needs more bytes than are left is
	 * refused before any allocation. */
	struct wire_msg m, d = {0};
	sample(WIRE_STREAMS, &m);
	m.u.streams.count = 0;
	size_t n = wire_encode(&m, frame, sizeof frame);
	put32(frame + WIRE_HEADER_BYTES + 32, 200);
	char err[256];
	assert_int_equal(wire_decode(&d, WIRE_STREAMS, frame + WIRE_HEADER_BYTES,
				     n - WIRE_HEADER_BYTES, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "count 200 needs at least 7200 bytes, 0 left"));
	assert_null(d.storage);
}

/* wire_entry_bytes is exact for entries whose strings are at the bound,
 * and the largest frames fit WIRE_MAX_PAYLOAD as documented. */
static void test_entry_bytes(void **state)
{
	(void)state;
	struct wire_msg m0;
	const unsigned arr[] = {WIRE_KERNELS, WIRE_COPIES, WIRE_STREAMS, WIRE_RANGES,
				WIRE_TRACE_EVENTS};
	for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++) {
		struct wire_msg m;
		sample(arr[i], &m);
		memset(s_kernels[0].name, 'n', WIRE_KERNEL_NAME_MAX);
		s_kernels[0].name[WIRE_KERNEL_NAME_MAX] = '\0';
		memset(s_ranges[0].name, 'n', WIRE_NAME_MAX);
		s_ranges[0].name[WIRE_NAME_MAX] = '\0';
		memset(s_event_names[0], 'n', WIRE_KERNEL_NAME_MAX);
		s_event_names[0][WIRE_KERNEL_NAME_MAX] = '\0';
		uint32_t *count = arr[i] == WIRE_KERNELS ? &m.u.kernels.count
				: arr[i] == WIRE_COPIES ? &m.u.copies.count
				: arr[i] == WIRE_STREAMS ? &m.u.streams.count
				: arr[i] == WIRE_RANGES ? &m.u.ranges.count
				: &m.u.trace_events.count;
		*count = 0;
		size_t n0 = wire_encode(&m, frame, sizeof frame);
		*count = 1;
		size_t n1 = wire_encode(&m, frame, sizeof frame);
		assert_int_equal(n1 - n0, wire_entry_bytes(arr[i]));
	}
	assert_int_equal(wire_entry_bytes(WIRE_HELLO), 0);
	assert_int_equal(wire_entry_bytes(WIRE_CONFIG), 0);
	assert_int_equal(wire_entry_bytes(1000), 0);
	/* The default top 64 kernels and "other" fit one frame with every
	 * name at its bound (the library folds by encoded size past that). */
	assert_true(65 * wire_entry_bytes(WIRE_KERNELS) + 36 <= WIRE_MAX_PAYLOAD);
	/* wire_kernel_bytes is the entry's size with its name as it is. */
	sample(WIRE_KERNELS, &m0);
	m0.u.kernels.count = 0;
	size_t z = wire_encode(&m0, frame, sizeof frame);
	m0.u.kernels.count = 1;
	snprintf(s_kernels[0].name, sizeof s_kernels[0].name, "k_short");
	assert_int_equal(wire_encode(&m0, frame, sizeof frame) - z, wire_kernel_bytes(&s_kernels[0]));
}

/* wire_encode returns 0 when the frame does not fit, and never writes
 * past cap. */
static void test_encode_capacity(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_TYPES; i++) {
		struct wire_msg m;
		sample(all_types[i], &m);
		size_t n = wire_encode(&m, frame, sizeof frame);
		uint8_t *exact = malloc(n);
		assert_int_equal(wire_encode(&m, exact, n), n);
		assert_memory_equal(exact, frame, n);
		free(exact);
		uint8_t *small = malloc(n - 1);
		assert_int_equal(wire_encode(&m, small, n - 1), 0);
		free(small);
	}
	struct wire_msg m;
	sample(WIRE_HELLO, &m);
	assert_int_equal(wire_encode(&m, frame, WIRE_HEADER_BYTES - 1), 0);
	assert_int_equal(wire_encode(NULL, frame, sizeof frame), 0);
	/* A count with no entries is refused. */
	sample(WIRE_KERNELS, &m);
	m.u.kernels.kernels = NULL;
	assert_int_equal(wire_encode(&m, frame, sizeof frame), 0);
	/* A frame over WIRE_MAX_PAYLOAD is refused even with room for it:
	 * 1024 events with full names are 4.1 MiB. */
	struct wire_event *ev = calloc(WIRE_MAX_EVENTS, sizeof *ev);
	static char long_name[WIRE_KERNEL_NAME_MAX + 1];
	memset(long_name, 'e', WIRE_KERNEL_NAME_MAX);
	for (unsigned i = 0; i < WIRE_MAX_EVENTS; i++)
		ev[i].name = long_name;
	m = (struct wire_msg){.type = WIRE_TRACE_EVENTS};
	m.u.trace_events.events = ev;
	m.u.trace_events.count = WIRE_MAX_EVENTS;
	size_t big_cap = WIRE_HEADER_BYTES + (size_t)WIRE_MAX_EVENTS * wire_entry_bytes(WIRE_TRACE_EVENTS) + 64;
	uint8_t *big = malloc(big_cap);
	assert_non_null(big);
	assert_int_equal(wire_encode(&m, big, big_cap), 0);
	m.u.trace_events.count = (WIRE_MAX_PAYLOAD - 12) / wire_entry_bytes(WIRE_TRACE_EVENTS);
	assert_true(wire_encode(&m, big, big_cap) > 0);
	free(ev);
	/* The decoder refuses a payload over the maximum outright. */
	struct wire_msg d = {0};
	char err[128];
	assert_int_equal(wire_decode(&d, WIRE_HELLO, big, WIRE_MAX_PAYLOAD + 1, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "payload_len"));
	free(big);
}

/* Decoding into the same message reuses and grows its storage. */
static void test_reuse(void **state)
{
	(void)state;
	struct wire_msg m, d = {0};
	sample(WIRE_COPIES, &m);
	encode_decode(&m, &d);
	size_t first = d.storage_bytes;
	sample(WIRE_KERNELS, &m);
	encode_decode(&m, &d);
	assert_true(d.storage_bytes >= first);
	assert_msg_equal(&m, &d);
	sample(WIRE_COPIES, &m);
	encode_decode(&m, &d);
	assert_msg_equal(&m, &d);
	/* The error text is optional. */
	assert_int_equal(wire_decode(&d, WIRE_UVM, frame, 3, NULL, 0), GPULSE_EPARSE);
	wire_msg_free(&d);
}

static int write_file(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		return 1;
	}
	return 0;
}

/* Long kernel names: two that share their first 300 bytes and one fitted
 * from 10 KB (a cut and its hash), in KERNELS and TRACE_EVENTS frames. */
static int write_long_names(const char *dir)
{
	static char full[10240];
	memset(full, 'n', sizeof full - 1);
	struct wire_msg m;
	sample(WIRE_KERNELS, &m);
	m.u.kernels.count = 3;
	memset(s_kernels[0].name, 'k', 300);
	memcpy(s_kernels[1].name, s_kernels[0].name, 300);
	snprintf(s_kernels[0].name + 300, 64, "<1>(float*)");
	snprintf(s_kernels[1].name + 300, 64, "<2>(float*)");
	wire_kernel_name_fit(s_kernels[2].name, full);
	char path[4096];
	snprintf(path, sizeof path, "%s/KERNELS-long-names.bin", dir);
	size_t n = wire_encode(&m, frame, sizeof frame);
	if (!n || write_file(path, frame, n))
		return 1;
	sample(WIRE_TRACE_EVENTS, &m);
	wire_kernel_name_fit(s_event_names[0], full);
	memcpy(s_event_names[1], s_kernels[0].name, sizeof s_event_names[1]);
	snprintf(path, sizeof path, "%s/TRACE_EVENTS-long-names.bin", dir);
	n = wire_encode(&m, frame, sizeof frame);
	return !n || write_file(path, frame, n);
}

static int write_corpus(const char *dir)
{
	if (write_long_names(dir))
		return 1;
	for (size_t i = 0; i < N_TYPES; i++) {
		struct wire_msg m;
		sample(all_types[i], &m);
		size_t n = wire_encode(&m, frame, sizeof frame);
		char path[4096];
		snprintf(path, sizeof path, "%s/%s.bin", dir, wire_type_name(all_types[i]));
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(frame, 1, n, f) != n || fclose(f) != 0) {
			perror(path);
			return 1;
		}
		/* fuzz_wire's second reading: a type index, then a payload. */
		snprintf(path, sizeof path, "%s/typed-%s.bin", dir, wire_type_name(all_types[i]));
		uint8_t index = (uint8_t)i;
		f = fopen(path, "wb");
		if (!f || fwrite(&index, 1, 1, f) != 1 ||
		    fwrite(frame + WIRE_HEADER_BYTES, 1, n - WIRE_HEADER_BYTES, f) !=
			    n - WIRE_HEADER_BYTES ||
		    fclose(f) != 0) {
			perror(path);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
		return write_corpus(argv[2]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_every_type),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_short_and_trailing),
		cmocka_unit_test(test_unknown_type),
		cmocka_unit_test(test_bad_enums),
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_string_bounds),
		cmocka_unit_test(test_kernel_name_fit),
		cmocka_unit_test(test_count_bounds),
		cmocka_unit_test(test_entry_bytes),
		cmocka_unit_test(test_encode_capacity),
		cmocka_unit_test(test_reuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
