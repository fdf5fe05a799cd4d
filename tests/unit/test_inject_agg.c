/* Tests for the injection library's aggregation (src/inject/agg.c) from
 * synthetic activity-like records: exact counts, bytes and durations,
 * histogram percentiles, per-stream busy/gap/sync, NVTX ranges, the
 * bounds (kernel table folding into "other", top-K at encode, scopes,
 * ranges), interval hand-over and merging, frames that decode with
 * wire_decode, and the JSON dump. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "inject/agg.h"
#include "common/status.h"
#include "wire/wire.h"

static struct agg_kernel_rec kern(const char *name, uint32_t stream, uint64_t start, uint64_t dur)
{
	struct agg_kernel_rec r = {
		.name = name, .device = 0, .context = 1, .stream = stream, .start_ns = start,
		.end_ns = start + dur, .grid = { 64, 2, 1 }, .block = { 256, 1, 1 },
		.registers = 32, .shared_bytes = 4096,
	};
	return r;
}

static void test_kernels_exact(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	assert_non_null(a);
	/* 100 launches of k_add at 1000..1099 ns, 10 of k_big at 1 ms. */
	uint64_t t = 1000000;
	uint64_t want_total = 0;
	for (int i = 0; i < 100; i++) {
		struct agg_kernel_rec r = kern("k_add(float*, int)", 7, t, 1000 + i);
		assert_int_equal(agg_add_kernel(a, &r), 0);
		want_total += 1000 + i;
		t += 5000;
	}
	for (int i = 0; i < 10; i++) {
		struct agg_kernel_rec r = kern("k_big", 7, t, 1000000);
		assert_int_equal(agg_add_kernel(a, &r), 0);
		t += 2000000;
	}
	const struct wire_kernel *k = agg_find_kernel(a, 0, 1, "k_add(float*, int)");
	assert_non_null(k);
	assert_int_equal(k->launches, 100);
	assert_int_equal(k->total_ns, want_total);
	assert_int_equal(k->min_ns, 1000);
	assert_int_equal(k->max_ns, 1099);
	assert_int_equal(k->grid[0], 64);
	assert_int_equal(k->block[0], 256);
	assert_int_equal(k->registers, 32);
	assert_int_equal(k->shared_bytes, 4096);
	/* All in [512, 1024) or [1024, 2048): buckets 9 and 10. */
	assert_int_equal(k->hist[9] + k->hist[10], 100);
	assert_int_equal(k->hist[9], 24); /* 1000..1023 */
	const struct wire_kernel *b = agg_find_kernel(a, 0, 1, "k_big");
	assert_int_equal(b->launches, 10);
	assert_int_equal(b->hist[agg_hist_bucket(1000000)], 10);
	assert_int_equal(a->records, 110);
	assert_int_equal(agg_kernel_count(a), 2);
	/* Same name on another context is another entry. */
	struct agg_kernel_rec other_ctx = kern("k_big", 1, 0, 5);
	other_ctx.context = 2;
	agg_add_kernel(a, &other_ctx);
	assert_int_equal(agg_kernel_count(a), 3);
	assert_int_equal(agg_find_kernel(a, 0, 2, "k_big")->launches, 1);
	assert_int_equal(agg_find_kernel(a, 0, 1, "k_big")->launches, 10);
	agg_destroy(a);
}

static void test_hist_quantiles(void **state)
{
	(void)state;
	uint32_t h[WIRE_HIST_BUCKETS] = { 0 };
	assert_int_equal(agg_hist_quantile(h, 0, 0, 0.5), 0);
	assert_int_equal(agg_hist_bucket(0), 0);
	assert_int_equal(agg_hist_bucket(1), 0);
	assert_int_equal(agg_hist_bucket(2), 1);
	assert_int_equal(agg_hist_bucket(1023), 9);
	assert_int_equal(agg_hist_bucket(1024), 10);
	assert_int_equal(agg_hist_bucket(UINT64_MAX), WIRE_HIST_BUCKETS - 1);
	/* All equal durations: min = max clamps every quantile exactly. */
	h[agg_hist_bucket(3000)] = 50;
	assert_int_equal(agg_hist_quantile(h, 3000, 3000, 0.5), 3000);
	assert_int_equal(agg_hist_quantile(h, 3000, 3000, 0.99), 3000);
	/* 98 fast (~1 µs) and 2 slow (~1 ms): p50 is in the fast bucket, p99
	 * in the slow one, each within its bucket's bounds. */
	memset(h, 0, sizeof h);
	h[agg_hist_bucket(1000)] = 98;
	h[agg_hist_bucket(1000000)] = 2;
	uint64_t p50 = agg_hist_quantile(h, 900, 1100000, 0.5);
	uint64_t p99 = agg_hist_quantile(h, 900, 1100000, 0.99);
	assert_true(p50 >= 512 && p50 < 1024);
	assert_true(p99 >= 524288 && p99 <= 1048576);
	/* Interpolation: rank 50 of 98 in [512, 1024) lands just past its
	 * middle, and the minimum clamps it up. */
	assert_int_equal(agg_hist_quantile(h, 0, 1100000, 0.5), 512 + 512 * 50 / 98);
	assert_int_equal(p50, 900);
	assert_true(agg_hist_quantile(h, 900, 1100000, 1.0) <= 1100000);
}

static void test_kernel_table_full_folds_into_other(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	char name[64];
	for (int i = 0; i < AGG_KERNELS_MAX + 50; i++) {
		snprintf(name, sizeof name, "kernel_%d", i);
		struct agg_kernel_rec r = kern(name, 1, (uint64_t)i * 100, 10);
		assert_int_equal(agg_add_kernel(a, &r), 0);
	}
	assert_int_equal(a->kernels_other, 50);
	const struct wire_kernel *o = agg_find_kernel(a, 0, 1, AGG_OTHER_NAME);
	assert_non_null(o);
	assert_int_equal(o->launches, 50);
	assert_int_equal(o->total_ns, 500);
	assert_int_equal(agg_kernel_count(a), AGG_KERNELS_MAX + 1);
	/* A name already in the table keeps counting on its own. */
	struct agg_kernel_rec again = kern("kernel_3", 1, 999999, 10);
	agg_add_kernel(a, &again);
	assert_int_equal(agg_find_kernel(a, 0, 1, "kernel_3")->launches, 2);
	assert_int_equal(a->kernels_other, 50);
	agg_destroy(a);
}

static void test_long_name_cut(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	/* Two names that share their first 300 bytes (template
	 * instantiations) are two kernels. */
	static char n1[400], n2[400];
	memset(n1, 'x', 300);
	memcpy(n2, n1, 300);
	snprintf(n1 + 300, sizeof n1 - 300, "<1>(float*)");
	snprintf(n2 + 300, sizeof n2 - 300, "<2>(float*)");
	struct agg_kernel_rec r1 = kern(n1, 1, 0, 10), r2 = kern(n2, 1, 0, 10);
	agg_add_kernel(a, &r1);
	agg_add_kernel(a, &r2);
	agg_add_kernel(a, &r2);
	assert_int_equal(agg_kernel_count(a), 2);
	assert_int_equal(agg_find_kernel(a, 0, 1, n1)->launches, 1);
	assert_int_equal(agg_find_kernel(a, 0, 1, n2)->launches, 2);
	/* 10 KB names that differ only in their last byte: two kernels,
	 * each kept as its fitted name (a cut and the whole name's hash). */
	static char l1[10240], l2[10240], f1[WIRE_KERNEL_NAME_MAX + 1], f2[WIRE_KERNEL_NAME_MAX + 1];
	memset(l1, 'y', sizeof l1 - 1);
	memcpy(l2, l1, sizeof l2);
	l2[sizeof l2 - 2] = 'z';
	struct agg_kernel_rec q1 = kern(l1, 1, 0, 10), q2 = kern(l2, 1, 0, 10);
	agg_add_kernel(a, &q1);
	agg_add_kernel(a, &q2);
	agg_add_kernel(a, &q2);
	assert_int_equal(agg_kernel_count(a), 4);
	wire_kernel_name_fit(f1, l1);
	wire_kernel_name_fit(f2, l2);
	assert_non_null(agg_find_kernel(a, 0, 1, f1));
	assert_int_equal(agg_find_kernel(a, 0, 1, f1)->launches, 1);
	assert_int_equal(agg_find_kernel(a, 0, 1, f2)->launches, 2);
	assert_true(strlen(f1) <= WIRE_KERNEL_NAME_MAX);
	agg_destroy(a);
}

static void test_copies_by_kind(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	struct agg_copy_rec c = { .kind = WIRE_COPY_H2D, .pinned = 1, .device = 0, .context = 1,
				  .stream = 7 };
	for (int i = 0; i < 10; i++) {
		c.start_ns = 1000000 + (uint64_t)i * 100000;
		c.end_ns = c.start_ns + 20000;
		c.bytes = 1 << 20;
		assert_int_equal(agg_add_copy(a, &c), 0);
	}
	c.pinned = 0;
	for (int i = 0; i < 5; i++) {
		c.start_ns = 5000000 + (uint64_t)i * 400000;
		c.end_ns = c.start_ns + 250000;
		c.bytes = 3 << 20;
		agg_add_copy(a, &c);
	}
	struct agg_copy_rec ms = { .kind = WIRE_COPY_MEMSET, .pinned = 1, .context = 1, .stream = 7,
				   .start_ns = 9000000, .end_ns = 9001000, .bytes = 4 << 20 };
	agg_add_copy(a, &ms);
	const struct wire_copy *p = agg_find_copy(a, 0, 1, WIRE_COPY_H2D, 1);
	assert_int_equal(p->count, 10);
	assert_int_equal(p->bytes, 10u << 20);
	assert_int_equal(p->total_ns, 200000);
	const struct wire_copy *q = agg_find_copy(a, 0, 1, WIRE_COPY_H2D, 0);
	assert_int_equal(q->count, 5);
	assert_int_equal(q->bytes, 15u << 20);
	assert_int_equal(q->total_ns, 1250000);
	assert_int_equal(agg_find_copy(a, 0, 1, WIRE_COPY_MEMSET, 1)->bytes, 4u << 20);
	assert_null(agg_find_copy(a, 0, 1, WIRE_COPY_D2H, 1));
	struct agg_copy_rec bad = c;
	bad.kind = WIRE_COPY_KIND_COUNT;
	assert_int_equal(agg_add_copy(a, &bad), GPULSE_ELIMIT);
	assert_int_equal(a->dropped, 1);
	agg_destroy(a);
}

static void test_streams_busy_gap_sync(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	/* Stream 3: [100,200) [250,300) [280,400) overlapping, [1000,1100). */
	struct agg_kernel_rec r = kern("k", 3, 100, 100);
	agg_add_kernel(a, &r);
	r = kern("k", 3, 250, 50);
	agg_add_kernel(a, &r);
	r = kern("k", 3, 280, 120);
	agg_add_kernel(a, &r);
	struct agg_copy_rec c = { .kind = WIRE_COPY_D2H, .pinned = 1, .context = 1, .stream = 3,
				  .start_ns = 1000, .end_ns = 1100, .bytes = 10 };
	agg_add_copy(a, &c);
	const struct wire_stream *s = agg_find_stream(a, 0, 1, 3);
	assert_non_null(s);
	assert_int_equal(s->busy_ns, 100 + 50 + 100 + 100); /* union: 100..200, 250..400, 1000..1100 */
	assert_int_equal(s->gap_ns, 50 + 600);
	struct agg_sync_rec sy = { .device = 0, .context = 1, .stream = 3, .start_ns = 10,
				   .end_ns = 510 };
	agg_add_sync(a, &sy);
	sy.stream = AGG_STREAM_NONE;
	agg_add_sync(a, &sy);
	assert_int_equal(s->sync_wait_ns, 500);
	assert_int_equal(s->syncs, 1);
	assert_int_equal(agg_find_stream(a, 0, 1, AGG_STREAM_NONE)->syncs, 1);
	/* A new window forgets the last end: time untraced is no gap. */
	agg_window_begin(a);
	r = kern("k", 3, 5000, 100);
	agg_add_kernel(a, &r);
	assert_int_equal(s->gap_ns, 650);
	assert_int_equal(s->busy_ns, 450);
	/* Across agg_take, continuity stays: the next gap is measured. */
	struct agg *snap = agg_create();
	agg_take(a, snap);
	assert_int_equal(agg_find_stream(snap, 0, 1, 3)->busy_ns, 450);
	r = kern("k", 3, 5300, 100);
	agg_add_kernel(a, &r);
	s = agg_find_stream(a, 0, 1, 3);
	assert_int_equal(s->gap_ns, 200);
	assert_int_equal(s->busy_ns, 100);
	assert_null(agg_find_kernel(a, 0, 1, "missing"));
	assert_int_equal(agg_find_kernel(a, 0, 1, "k")->launches, 1);
	agg_destroy(snap);
	agg_destroy(a);
}

static void test_ranges_and_uvm(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	for (int i = 0; i < 3; i++)
		agg_add_range(a, "phase_a", 1000 * (uint64_t)(i + 1));
	for (int i = 0; i < 6; i++)
		agg_add_range(a, "inner", 10);
	const struct wire_range *r = agg_find_range(a, "phase_a");
	assert_int_equal(r->count, 3);
	assert_int_equal(r->total_ns, 6000);
	assert_int_equal(r->max_ns, 3000);
	assert_int_equal(agg_find_range(a, "inner")->count, 6);
	char name[32];
	int dropped = 0;
	for (int i = 0; i < AGG_RANGES_MAX + 10; i++) {
		snprintf(name, sizeof name, "r%d", i);
		if (agg_add_range(a, name, 1) == GPULSE_ELIMIT)
			dropped++;
	}
	assert_int_equal(dropped, 12); /* two slots were phase_a and inner */
	assert_int_equal(a->dropped, 12);
	agg_add_uvm(a, 0, AGG_UVM_BYTES_H2D, 1 << 20);
	agg_add_uvm(a, 0, AGG_UVM_BYTES_H2D, 1 << 20);
	agg_add_uvm(a, 0, AGG_UVM_GPU_FAULTS, 12);
	agg_add_uvm(a, 1, AGG_UVM_CPU_FAULTS, 1);
	assert_int_equal(agg_uvm_total(a, 0, AGG_UVM_BYTES_H2D), 2 << 20);
	assert_int_equal(agg_uvm_total(a, 0, AGG_UVM_GPU_FAULTS), 12);
	assert_int_equal(agg_uvm_total(a, 1, AGG_UVM_CPU_FAULTS), 1);
	assert_int_equal(agg_uvm_total(a, 1, AGG_UVM_BYTES_H2D), 0);
	agg_destroy(a);
}

static void test_scope_bound(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	for (uint32_t ctx = 1; ctx <= AGG_SCOPES + 3; ctx++) {
		struct agg_kernel_rec r = kern("k", 1, 0, 10);
		r.context = ctx;
		int rc = agg_add_kernel(a, &r);
		assert_int_equal(rc, ctx <= AGG_SCOPES ? 0 : GPULSE_ELIMIT);
	}
	assert_int_equal(a->dropped, 3);
	assert_int_equal(a->records, AGG_SCOPES);
	agg_destroy(a);
}

static void test_merge_totals(void **state)
{
	(void)state;
	struct agg *cur = agg_create(), *snap = agg_create(), *total = agg_create();
	for (int interval = 0; interval < 3; interval++) {
		for (int i = 0; i < 10; i++) {
			struct agg_kernel_rec r = kern("k", 1, (uint64_t)interval * 100000 + (uint64_t)i * 1000,
						       100 + (uint64_t)interval);
			agg_add_kernel(cur, &r);
		}
		struct agg_copy_rec c = { .kind = WIRE_COPY_D2D, .pinned = 1, .context = 1, .stream = 2,
					  .start_ns = 1, .end_ns = 11, .bytes = 100 };
		agg_add_copy(cur, &c);
		agg_add_range(cur, "step", 5);
		agg_add_uvm(cur, 0, AGG_UVM_BYTES_D2H, 7);
		agg_take(cur, snap);
		agg_merge(total, snap);
	}
	assert_null(agg_find_kernel(cur, 0, 1, "k"));
	const struct wire_kernel *k = agg_find_kernel(total, 0, 1, "k");
	assert_int_equal(k->launches, 30);
	assert_int_equal(k->total_ns, 10 * (100 + 101 + 102));
	assert_int_equal(k->min_ns, 100);
	assert_int_equal(k->max_ns, 102);
	assert_int_equal(agg_find_copy(total, 0, 1, WIRE_COPY_D2D, 1)->bytes, 300);
	assert_int_equal(agg_find_range(total, "step")->count, 3);
	assert_int_equal(agg_uvm_total(total, 0, AGG_UVM_BYTES_D2H), 21);
	assert_int_equal(total->records, 30 + 3 + 3 + 3);
	agg_destroy(cur);
	agg_destroy(snap);
	agg_destroy(total);
}

struct frames {
	int n;
	int kernels_frames, copies, uvm, streams, ranges;
	uint64_t launches;
	int saw_other;
	unsigned kernel_entries;
};

static int collect(const uint8_t *frame, size_t len, void *user)
{
	struct frames *f = user;
	unsigned type;
	uint32_t plen;
	assert_int_equal(wire_header_parse(frame, &type, &plen), 0);
	assert_int_equal(plen + WIRE_HEADER_BYTES, len);
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	char err[256];
	int rc = wire_decode(&m, type, frame + WIRE_HEADER_BYTES, plen, err, sizeof err);
	if (rc)
		fail_msg("frame %s does not decode: %s", wire_type_name(type), err);
	f->n++;
	switch (type) {
	case WIRE_KERNELS:
		f->kernels_frames++;
		f->kernel_entries += m.u.kernels.count;
		for (uint32_t i = 0; i < m.u.kernels.count; i++) {
			f->launches += m.u.kernels.kernels[i].launches;
			if (strcmp(m.u.kernels.kernels[i].name, AGG_OTHER_NAME) == 0)
				f->saw_other = 1;
		}
		assert_int_equal(m.u.kernels.scope.traced_ns, 777);
		break;
	case WIRE_COPIES: f->copies++; break;
	case WIRE_UVM:
		f->uvm++;
		assert_int_equal(m.u.uvm.bytes_h2d, 4096);
		break;
	case WIRE_STREAMS: f->streams++; break;
	case WIRE_RANGES: f->ranges++; break;
	default: fail_msg("unexpected frame type %u", type);
	}
	wire_msg_free(&m);
	return 0;
}

static void test_encode_topk_frames(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	struct agg_encoder *e = agg_encoder_create();
	assert_non_null(e);
	char name[32];
	/* 100 kernels; kernel_i takes i+1 launches of 1000 ns. */
	uint64_t total = 0;
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof name, "kernel_%d", i);
		for (int j = 0; j <= i; j++) {
			struct agg_kernel_rec r = kern(name, 1, (uint64_t)(i * 1000 + j) * 2000, 1000);
			agg_add_kernel(a, &r);
			total++;
		}
	}
	struct agg_copy_rec c = { .kind = WIRE_COPY_H2D, .pinned = 0, .context = 1, .stream = 1,
				  .start_ns = 1, .end_ns = 2, .bytes = 3 };
	agg_add_copy(a, &c);
	agg_add_uvm(a, 0, AGG_UVM_BYTES_H2D, 4096);
	agg_add_range(a, "r", 1);
	struct agg_interval iv = { .start_ns = 1, .end_ns = 2, .traced_ns = 777, .topk = 10 };
	struct frames f = { 0 };
	uint64_t folded = 0;
	assert_int_equal(agg_encode(e, a, &iv, collect, &f, &folded), 0);
	assert_int_equal(f.kernels_frames, 1);
	assert_int_equal(f.kernel_entries, 11); /* top 10 + other */
	assert_true(f.saw_other);
	assert_int_equal(f.launches, total); /* folding loses no launch */
	/* The top 10 are kernel_90..99: 91+..+100 = 955 launches. */
	assert_int_equal(folded, total - 955);
	assert_int_equal(f.copies, 1);
	assert_int_equal(f.uvm, 1); /* uvm scope is (device 0, context 0) */
	assert_int_equal(f.streams, 1);
	assert_int_equal(f.ranges, 1);
	agg_encoder_destroy(e);
	agg_destroy(a);
}

/* Long names: the default top 64 at WIRE_KERNEL_NAME_MAX go whole in one
 * frame; a top K that would not fit WIRE_MAX_PAYLOAD folds the rest into
 * "other" by encoded size, losing no launch. */
static void test_encode_long_names(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	struct agg_encoder *e = agg_encoder_create();
	static char name[WIRE_KERNEL_NAME_MAX + 1];
	uint64_t total = 0;
	for (int i = 0; i < 300; i++) {
		memset(name, 'n', WIRE_KERNEL_NAME_MAX);
		snprintf(name + WIRE_KERNEL_NAME_MAX - 8, 9, "%08d", i);
		for (int j = 0; j <= i % 7; j++) {
			struct agg_kernel_rec r = kern(name, 1, (uint64_t)(i * 10 + j) * 2000, 1000);
			agg_add_kernel(a, &r);
			total++;
		}
	}
	struct agg_interval iv = { .start_ns = 1, .end_ns = 2, .traced_ns = 777, .topk = 64 };
	struct frames f = { 0 };
	uint64_t folded = 0;
	assert_int_equal(agg_encode(e, a, &iv, collect, &f, &folded), 0);
	assert_int_equal(f.kernels_frames, 1);
	assert_int_equal(f.kernel_entries, 65);
	assert_int_equal(f.launches, total);
	memset(&f, 0, sizeof f);
	iv.topk = 300;
	folded = 0;
	assert_int_equal(agg_encode(e, a, &iv, collect, &f, &folded), 0);
	assert_int_equal(f.kernels_frames, 1);
	size_t fit = (WIRE_MAX_PAYLOAD - 64) / wire_entry_bytes(WIRE_KERNELS);
	assert_true(f.kernel_entries >= fit - 1 && f.kernel_entries < 300);
	assert_true(f.saw_other && folded > 0);
	assert_int_equal(f.launches, total);
	agg_encoder_destroy(e);
	agg_destroy(a);
}

static int refuse(const uint8_t *frame, size_t len, void *user)
{
	(void)frame;
	(void)len;
	(*(int *)user)++;
	return GPULSE_ELIMIT;
}

static void test_encode_stops_on_refusal(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	struct agg_encoder *e = agg_encoder_create();
	struct agg_kernel_rec r = kern("k", 1, 0, 10);
	agg_add_kernel(a, &r);
	agg_add_range(a, "x", 1);
	struct agg_interval iv = { .topk = 5 };
	int calls = 0;
	assert_int_equal(agg_encode(e, a, &iv, refuse, &calls, NULL), GPULSE_ELIMIT);
	assert_int_equal(calls, 1);
	agg_encoder_destroy(e);
	agg_destroy(a);
}

static void test_dump_json(void **state)
{
	(void)state;
	struct agg *a = agg_create();
	for (int i = 0; i < 4; i++) {
		struct agg_kernel_rec r = kern("k \"quoted\"", 1, (uint64_t)i * 10000, 2000);
		agg_add_kernel(a, &r);
	}
	struct agg_copy_rec c = { .kind = WIRE_COPY_D2H, .pinned = 1, .context = 1, .stream = 1,
				  .start_ns = 0, .end_ns = 1000, .bytes = 5000 };
	agg_add_copy(a, &c);
	agg_add_range(a, "phase", 9);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(agg_dump_json(a, f, "\"pid\": 42"), 0);
	fclose(f);
	json_error_t err;
	json_t *j = json_loads(buf, 0, &err);
	if (!j)
		fail_msg("dump is not JSON: %s (line %d)\n%s", err.text, err.line, buf);
	json_t *k = json_array_get(json_object_get(j, "kernels"), 0);
	assert_string_equal(json_string_value(json_object_get(k, "name")), "k \"quoted\"");
	assert_int_equal(json_integer_value(json_object_get(k, "launches")), 4);
	assert_int_equal(json_integer_value(json_object_get(k, "p50_ns")), 2000);
	json_t *cp = json_array_get(json_object_get(j, "copies"), 0);
	assert_string_equal(json_string_value(json_object_get(cp, "kind")), "D2H");
	assert_true(json_is_true(json_object_get(cp, "pinned")));
	assert_int_equal(json_integer_value(json_object_get(cp, "bytes")), 5000);
	assert_true(json_real_value(json_object_get(cp, "bandwidth_gbps")) == 5.0);
	assert_int_equal(json_integer_value(json_object_get(j, "pid")), 42);
	assert_int_equal(json_array_size(json_object_get(j, "ranges")), 1);
	json_decref(j);
	free(buf);
	agg_destroy(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernels_exact),
		cmocka_unit_test(test_hist_quantiles),
		cmocka_unit_test(test_kernel_table_full_folds_into_other),
		cmocka_unit_test(test_long_name_cut),
		cmocka_unit_test(test_copies_by_kind),
		cmocka_unit_test(test_streams_busy_gap_sync),
		cmocka_unit_test(test_ranges_and_uvm),
		cmocka_unit_test(test_scope_bound),
		cmocka_unit_test(test_merge_totals),
		cmocka_unit_test(test_encode_topk_frames),
		cmocka_unit_test(test_encode_long_names),
		cmocka_unit_test(test_encode_stops_on_refusal),
		cmocka_unit_test(test_dump_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
