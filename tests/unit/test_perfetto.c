/* The Chrome trace-event writer (src/profile/perfetto.c): the output
 * parses back with jansson, events come out sorted by start (enclosing
 * ranges first), names are escaped and cleaned to UTF-8, each stream and
 * NVTX thread gets one named track, times are exact microseconds from
 * the first event, copies carry bytes and bandwidth, and the event cap
 * and the byte bound are reported in otherData. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/perfetto.h"
#include "wire/wire.h"

#define T0 1764400000000000000ull

static json_t *write_parse(struct wire_event *ev, size_t n, const struct perfetto_meta *m,
			   size_t max_bytes, struct buf *b)
{
	buf_init(b, max_bytes);
	assert_int_equal(perfetto_write(b, ev, n, m), 0);
	json_error_t je;
	json_t *doc = json_loadb(b->data, b->len, 0, &je);
	if (!doc)
		fail_msg("not JSON (%s at %d): %.300s", je.text, je.position, b->data);
	return doc;
}

static struct wire_event ev_of(uint8_t kind, uint32_t stream, uint64_t start, uint64_t dur,
			       const char *name)
{
	struct wire_event e = {.kind = kind, .device = 0, .stream = stream, .start_ns = T0 + start,
			       .end_ns = T0 + start + dur};
	e.name = name;
	return e;
}

/* The "X" events of a document, in order. */
static size_t xs(json_t *doc, json_t **out, size_t max)
{
	size_t n = 0, i;
	json_t *e;
	json_array_foreach(json_object_get(doc, "traceEvents"), i, e) {
		if (strcmp(json_string_value(json_object_get(e, "ph")), "X") == 0 && n < max)
			out[n++] = e;
	}
	return n;
}

static void test_document(void **state)
{
	(void)state;
	struct wire_event ev[6];
	/* Given out of order on purpose. */
	ev[0] = ev_of(WIRE_EV_KERNEL, 7, 30000, 2500, "softmax<float, \"fast\"> \\ \t\x01");
	ev[1] = ev_of(WIRE_EV_KERNEL, 7, 1234, 20000, "gemm");
	ev[2] = ev_of(WIRE_EV_COPY, 8, 40000, 100000, "");
	ev[2].copy_kind = WIRE_COPY_D2H;
	ev[2].bytes = 1 << 20;
	ev[3] = ev_of(WIRE_EV_MEMSET, 8, 150000, 1000, "");
	ev[3].bytes = 4096;
	ev[4] = ev_of(WIRE_EV_RANGE, 3, 0, 1000000, "outer");
	ev[5] = ev_of(WIRE_EV_RANGE, 3, 0, 500000, "inner \xff bad");
	struct perfetto_meta m = {.pid = 77, .process_name = "python3", .capture_id = 5,
				  .seconds = 2, .events_received = 6, .complete = true,
				  .lasting_cost = "launches stay \"15%\" dearer"};
	struct buf b;
	json_t *doc = write_parse(ev, 6, &m, 1 << 20, &b);

	json_t *x[8];
	size_t n = xs(doc, x, 8);
	assert_int_equal(n, 6);
	/* Sorted by start; of the two ranges starting at 0, the longer first. */
	assert_string_equal(json_string_value(json_object_get(x[0], "name")), "outer");
	assert_string_equal(json_string_value(json_object_get(x[1], "name")), "inner ? bad");
	assert_string_equal(json_string_value(json_object_get(x[2], "name")), "gemm");
	assert_string_equal(json_string_value(json_object_get(x[3], "name")),
			    "softmax<float, \"fast\"> \\ \t\x01");
	/* Exact microseconds from the first event. */
	assert_true(json_real_value(json_object_get(x[2], "ts")) == 1.234);
	assert_true(json_real_value(json_object_get(x[2], "dur")) == 20.0);
	assert_true(json_real_value(json_object_get(x[0], "dur")) == 1000.0);
	/* Tracks: streams by their id, NVTX threads apart. */
	assert_int_equal(json_integer_value(json_object_get(x[2], "tid")), 7);
	assert_int_equal(json_integer_value(json_object_get(x[0], "tid")), PERFETTO_RANGE_TID + 3);
	assert_int_equal(json_integer_value(json_object_get(x[0], "pid")), 77);
	assert_string_equal(json_string_value(json_object_get(x[0], "cat")), "nvtx");
	/* The copy: its default name, kind, bytes and GB/s. */
	json_t *c = x[4];
	assert_string_equal(json_string_value(json_object_get(c, "name")), "memcpy DtoH");
	json_t *args = json_object_get(c, "args");
	assert_int_equal(json_integer_value(json_object_get(args, "bytes")), 1 << 20);
	assert_string_equal(json_string_value(json_object_get(args, "kind")), "d2h");
	assert_true(json_real_value(json_object_get(args, "bandwidth_gbps")) == 10.48576);
	assert_string_equal(json_string_value(json_object_get(x[5], "name")), "memset");

	/* One thread_name per track, and the process's name. */
	size_t i, names = 0;
	json_t *e;
	json_array_foreach(json_object_get(doc, "traceEvents"), i, e) {
		const char *nm = json_string_value(json_object_get(e, "name"));
		if (strcmp(json_string_value(json_object_get(e, "ph")), "M") != 0)
			continue;
		const char *v = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
		if (strcmp(nm, "process_name") == 0)
			assert_string_equal(v, "python3 (pid 77)");
		if (strcmp(nm, "thread_name") == 0) {
			names++;
			json_int_t tid = json_integer_value(json_object_get(e, "tid"));
			if (tid == 7)
				assert_string_equal(v, "stream 7, gpu 0");
			else if (tid == 8)
				assert_string_equal(v, "stream 8, gpu 0");
			else
				assert_string_equal(v, "NVTX (thread 3)");
		}
	}
	assert_int_equal(names, 3);
	json_t *meta = json_object_get(doc, "otherData");
	assert_int_equal(json_integer_value(json_object_get(meta, "events")), 6);
	assert_true(json_is_false(json_object_get(meta, "cap_hit")));
	assert_true(json_is_true(json_object_get(meta, "complete")));
	assert_int_equal(json_integer_value(json_object_get(meta, "start_unix_ns")), (json_int_t)T0);
	/* The sentence on what the capture costs the process, escaped. */
	assert_string_equal(json_string_value(json_object_get(meta, "gpulse_lasting_cost")),
			    "launches stay \"15%\" dearer");
	json_decref(doc);
	buf_free(&b);
}

static void test_caps(void **state)
{
	(void)state;
	enum { N = 2000 };
	struct wire_event *ev = calloc(N, sizeof *ev);
	static char k200[201];
	memset(k200, 'k', 200);
	for (int i = 0; i < N; i++)
		ev[i] = ev_of(WIRE_EV_KERNEL, (uint32_t)(i % 4), (uint64_t)i * 10, 5, k200);
	/* The event cap. */
	struct perfetto_meta m = {.pid = 1, .max_events = 100, .events_received = N + 50,
				  .events_dropped_daemon = 50, .events_dropped_library = 3};
	struct buf b;
	json_t *doc = write_parse(ev, N, &m, 16 << 20, &b);
	json_t *x[N];
	assert_int_equal(xs(doc, x, N), 100);
	json_t *meta = json_object_get(doc, "otherData");
	assert_true(json_is_true(json_object_get(meta, "cap_hit")));
	assert_true(json_is_false(json_object_get(meta, "cap_hit_by_bytes")));
	assert_int_equal(json_integer_value(json_object_get(meta, "events_received")), N + 50);
	assert_int_equal(json_integer_value(json_object_get(meta, "events_dropped_by_gpulsed")),
			 50 + N - 100);
	assert_int_equal(json_integer_value(json_object_get(meta, "events_dropped_by_library")), 3);
	assert_true(json_is_false(json_object_get(meta, "complete")));
	assert_null(json_object_get(meta, "gpulse_lasting_cost")); /* none given */
	/* The first 100 by time were kept. */
	assert_true(json_real_value(json_object_get(x[99], "ts")) == 0.99);
	json_decref(doc);
	buf_free(&b);

	/* The byte bound: the document stays whole and says why it stopped. */
	m = (struct perfetto_meta){.pid = 1};
	doc = write_parse(ev, N, &m, 64 * 1024, &b);
	assert_true(b.len <= 64 * 1024);
	size_t kept = xs(doc, x, N);
	assert_true(kept > 10 && kept < N);
	meta = json_object_get(doc, "otherData");
	assert_true(json_is_true(json_object_get(meta, "cap_hit")));
	assert_true(json_is_true(json_object_get(meta, "cap_hit_by_bytes")));
	assert_int_equal(json_integer_value(json_object_get(meta, "events")), (json_int_t)kept);
	json_decref(doc);
	buf_free(&b);
	free(ev);

	/* No events: still a document Perfetto opens. */
	m = (struct perfetto_meta){.pid = 9, .process_name = NULL};
	doc = write_parse(NULL, 0, &m, 4096 * 4, &b);
	assert_int_equal(xs(doc, x, 1), 0);
	assert_int_equal(json_array_size(json_object_get(doc, "traceEvents")), 1);
	json_decref(doc);
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_document),
		cmocka_unit_test(test_caps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
