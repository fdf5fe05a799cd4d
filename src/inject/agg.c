/* Aggregation of activity records into bounded tables; see agg.h. */
#include "inject/agg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/status.h"
#include "common/str.h"

struct agg *agg_create(void)
{
	return calloc(1, sizeof(struct agg));
}

void agg_destroy(struct agg *a)
{
	free(a);
}

void agg_clear(struct agg *a)
{
	memset(a, 0, sizeof *a);
}

/* FNV-1a over the name, mixed with the scope so one kernel on two
 * contexts takes two slots. */
static uint64_t name_hash(const char *s, size_t n, unsigned scope)
{
	uint64_t h = fnv1a64_add(FNV1A64_OFFSET ^ ((uint64_t)scope * 0x9e3779b97f4a7c15ull), s, n);
	return h ? h : 1;
}

static uint64_t sat_add64(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint32_t sat_add32(uint32_t a, uint32_t b)
{
	return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

/* Index of the (device, context) scope, adding it if there is room; -1
 * when the scope table is full. */
static int scope_index(struct agg *a, uint32_t device, uint32_t context)
{
	for (unsigned i = 0; i < a->nscopes; i++)
		if (a->scopes[i].device == device && a->scopes[i].context == context)
			return (int)i;
	if (a->nscopes >= AGG_SCOPES)
		return -1;
	a->scopes[a->nscopes].device = device;
	a->scopes[a->nscopes].context = context;
	return (int)a->nscopes++;
}

static int scope_find(const struct agg *a, uint32_t device, uint32_t context)
{
	for (unsigned i = 0; i < a->nscopes; i++)
		if (a->scopes[i].device == device && a->scopes[i].context == context)
			return (int)i;
	return -1;
}

unsigned agg_hist_bucket(uint64_t ns)
{
	if (ns < 2)
		return 0;
	unsigned b = 63u - (unsigned)__builtin_clzll(ns);
	return b >= WIRE_HIST_BUCKETS ? WIRE_HIST_BUCKETS - 1 : b;
}

uint64_t agg_hist_quantile(const uint32_t hist[WIRE_HIST_BUCKETS], uint64_t min_ns,
			   uint64_t max_ns, double q)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < WIRE_HIST_BUCKETS; i++)
		total += hist[i];
	if (total == 0)
		return 0;
	if (!(q > 0))
		q = 1e-9;
	if (q > 1)
		q = 1;
	uint64_t rank = (uint64_t)ceil(q * (double)total);
	if (rank < 1)
		rank = 1;
	uint64_t cum = 0;
	unsigned b = 0;
	for (b = 0; b < WIRE_HIST_BUCKETS; b++) {
		if (cum + hist[b] >= rank)
			break;
		cum += hist[b];
	}
	if (b >= WIRE_HIST_BUCKETS)
		b = WIRE_HIST_BUCKETS - 1;
	double lo = b == 0 ? 0.0 : ldexp(1.0, (int)b);
	double hi = ldexp(1.0, (int)b + 1);
	double frac = hist[b] ? (double)(rank - cum) / (double)hist[b] : 1.0;
	double est = lo + (hi - lo) * frac;
	uint64_t v = est >= 1.8e19 ? UINT64_MAX : (uint64_t)est;
	if (v < min_ns)
		v = min_ns;
	if (max_ns && v > max_ns)
		v = max_ns;
	return v;
}

/* Fold one launch's duration and shape into k. */
static void kernel_account(struct wire_kernel *k, uint64_t dur, uint64_t launches)
{
	if (k->launches == 0 || dur < k->min_ns)
		k->min_ns = dur;
	if (dur > k->max_ns)
		k->max_ns = dur;
	k->launches = sat_add64(k->launches, launches);
	k->total_ns = sat_add64(k->total_ns, dur);
	unsigned b = agg_hist_bucket(dur);
	k->hist[b] = sat_add32(k->hist[b], 1);
}

/* Merge statistics of src into dst (same kernel or a fold). */
static void kernel_merge(struct wire_kernel *dst, const struct wire_kernel *src)
{
	if (src->launches == 0)
		return;
	if (dst->launches == 0 || src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	dst->launches = sat_add64(dst->launches, src->launches);
	dst->total_ns = sat_add64(dst->total_ns, src->total_ns);
	for (unsigned i = 0; i < WIRE_HIST_BUCKETS; i++)
		dst->hist[i] = sat_add32(dst->hist[i], src->hist[i]);
}

/* The slot for (scope, name), created if the table has room; the "other"
 * slot of the scope when it has not. Never fails: the other slot of a
 * scope is always found or made, since creating it ignores the cap (at
 * most AGG_SCOPES of them, and AGG_KERNELS_MAX + AGG_SCOPES < slots). */
static struct agg_kernel_slot *kernel_slot(struct agg *a, unsigned scope, const char *name,
					   size_t n, int is_other, int *folded)
{
	uint64_t h = is_other ? (0x0f0f0f0full + scope) : name_hash(name, n, scope);
	unsigned mask = AGG_KERNEL_SLOTS - 1;
	unsigned i = (unsigned)h & mask;
	for (unsigned probe = 0; probe < AGG_KERNEL_SLOTS; probe++, i = (i + 1) & mask) {
		struct agg_kernel_slot *s = &a->kernels[i];
		if (!s->used) {
			if (!is_other && a->nkernels >= AGG_KERNELS_MAX) {
				*folded = 1;
				return kernel_slot(a, scope, AGG_OTHER_NAME, strlen(AGG_OTHER_NAME), 1,
						   folded);
			}
			memset(s, 0, sizeof *s);
			s->used = 1;
			s->hash = h;
			s->scope = (uint16_t)scope;
			s->is_other = (uint8_t)is_other;
			memcpy(s->k.name, name, n);
			s->k.name[n] = '\0';
			if (!is_other)
				a->nkernels++;
			return s;
		}
		if (s->hash == h && s->scope == scope && s->is_other == is_other &&
		    (is_other || (strncmp(s->k.name, name, n) == 0 && s->k.name[n] == '\0')))
			return s;
	}
	return NULL; /* unreachable: the cap keeps free slots */
}

/* Length of an NVTX range's name cut at WIRE_NAME_MAX on a UTF-8 boundary. */
static size_t name_len(const char *name)
{
	size_t n = strnlen(name, WIRE_NAME_MAX + 1);
	if (n <= WIRE_NAME_MAX)
		return n;
	n = WIRE_NAME_MAX;
	while (n > 0 && ((unsigned char)name[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/* A kernel's name as it is kept: itself, or past WIRE_KERNEL_NAME_MAX
 * its fitted form in `scratch` (a cut with the whole name's hash), so
 * two long names never share a slot. */
static const char *kernel_key(const char *name, char scratch[WIRE_KERNEL_NAME_MAX + 1],
			      size_t *len)
{
	size_t n = strnlen(name, WIRE_KERNEL_NAME_MAX + 1);
	if (n > WIRE_KERNEL_NAME_MAX) {
		wire_kernel_name_fit(scratch, name);
		name = scratch;
		n = strlen(scratch);
	}
	*len = n;
	return name;
}

/* Count an operation on its stream for busy and gap time. Records of one
 * stream arrive nearly in order; an operation that starts before the
 * previous one ended adds only the part past that end, so busy time is
 * the union of the operations. */
static int stream_op(struct agg *a, unsigned scope, uint32_t stream, uint64_t start,
		     uint64_t end, int is_sync);

int agg_add_kernel(struct agg *a, const struct agg_kernel_rec *r)
{
	int sc = scope_index(a, r->device, r->context);
	if (sc < 0) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	char scratch[WIRE_KERNEL_NAME_MAX + 1];
	size_t n;
	const char *name = kernel_key(r->name && *r->name ? r->name : "(unnamed)", scratch, &n);
	int folded = 0;
	struct agg_kernel_slot *s = kernel_slot(a, (unsigned)sc, name, n, 0, &folded);
	if (!s) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	uint64_t dur = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
	kernel_account(&s->k, dur, 1);
	if (folded)
		a->kernels_other++;
	memcpy(s->k.grid, r->grid, sizeof s->k.grid);
	memcpy(s->k.block, r->block, sizeof s->k.block);
	s->k.registers = r->registers;
	s->k.shared_bytes = r->shared_bytes;
	a->records++;
	stream_op(a, (unsigned)sc, r->stream, r->start_ns, r->end_ns, 0);
	return GPULSE_OK;
}

int agg_add_kernel_stats(struct agg *a, uint32_t device, uint32_t context,
			 const struct wire_kernel *k)
{
	int sc = scope_index(a, device, context);
	if (sc < 0) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	const char *name = k->name[0] ? k->name : "(unnamed)";
	int is_other = strcmp(name, AGG_OTHER_NAME) == 0; /* the census's own fold */
	int folded = is_other;
	size_t n = strnlen(name, WIRE_KERNEL_NAME_MAX); /* a wire_kernel's name is fitted */
	struct agg_kernel_slot *s = kernel_slot(a, (unsigned)sc, name, n, is_other, &folded);
	if (!s) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	kernel_merge(&s->k, k);
	if (folded)
		a->kernels_other = sat_add64(a->kernels_other, k->launches);
	else {
		memcpy(s->k.grid, k->grid, sizeof s->k.grid);
		memcpy(s->k.block, k->block, sizeof s->k.block);
		s->k.registers = k->registers;
		s->k.shared_bytes = k->shared_bytes;
	}
	a->records++;
	return GPULSE_OK;
}

static struct agg_copy_slot *copy_slot(struct agg *a, unsigned scope, uint8_t kind, uint8_t pinned)
{
	unsigned i = (scope * WIRE_COPY_KIND_COUNT + kind) * 2 + (pinned ? 1 : 0);
	struct agg_copy_slot *s = &a->copies[i];
	if (!s->used) {
		memset(s, 0, sizeof *s);
		s->used = 1;
		s->scope = (uint16_t)scope;
		s->c.kind = kind;
		s->c.pinned = pinned ? 1 : 0;
	}
	return s;
}

int agg_add_copy(struct agg *a, const struct agg_copy_rec *r)
{
	int sc = scope_index(a, r->device, r->context);
	if (sc < 0 || r->kind >= WIRE_COPY_KIND_COUNT) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	struct agg_copy_slot *s = copy_slot(a, (unsigned)sc, r->kind, r->pinned);
	s->c.count = sat_add64(s->c.count, 1);
	s->c.bytes = sat_add64(s->c.bytes, r->bytes);
	s->c.total_ns = sat_add64(s->c.total_ns, r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0);
	a->records++;
	stream_op(a, (unsigned)sc, r->stream, r->start_ns, r->end_ns, 0);
	return GPULSE_OK;
}

int agg_add_copy_stats(struct agg *a, uint32_t device, uint32_t context, uint8_t kind,
		       uint8_t pinned, uint64_t count, uint64_t bytes)
{
	int sc = scope_index(a, device, context);
	if (sc < 0 || kind >= WIRE_COPY_KIND_COUNT) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	struct agg_copy_slot *s = copy_slot(a, (unsigned)sc, kind, pinned);
	s->c.count = sat_add64(s->c.count, count);
	s->c.bytes = sat_add64(s->c.bytes, bytes);
	a->records++;
	return GPULSE_OK;
}

int agg_add_uvm(struct agg *a, uint32_t device, enum agg_uvm_counter c, uint64_t value)
{
	int sc = scope_index(a, device, 0);
	if (sc < 0 || (unsigned)c >= AGG_UVM_COUNTER_COUNT) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	a->uvm[sc][c] = sat_add64(a->uvm[sc][c], value);
	a->uvm_seen[sc] = 1;
	a->records++;
	return GPULSE_OK;
}

static struct agg_stream_slot *stream_slot(struct agg *a, unsigned scope, uint32_t stream,
					   int create)
{
	uint64_t h = ((uint64_t)scope << 32 | stream) * 0x9e3779b97f4a7c15ull;
	unsigned mask = AGG_STREAM_SLOTS - 1;
	unsigned i = (unsigned)(h >> 32) & mask;
	for (unsigned probe = 0; probe < AGG_STREAM_SLOTS; probe++, i = (i + 1) & mask) {
		struct agg_stream_slot *s = &a->streams[i];
		if (!s->used) {
			if (!create || a->nstreams >= AGG_STREAMS_MAX)
				return NULL;
			memset(s, 0, sizeof *s);
			s->used = 1;
			s->scope = (uint16_t)scope;
			s->s.stream = stream;
			a->nstreams++;
			return s;
		}
		if (s->scope == scope && s->s.stream == stream)
			return s;
	}
	return NULL;
}

static int stream_op(struct agg *a, unsigned scope, uint32_t stream, uint64_t start,
		     uint64_t end, int is_sync)
{
	struct agg_stream_slot *s = stream_slot(a, scope, stream, 1);
	if (!s) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	s->active = 1;
	if (end < start)
		end = start;
	if (is_sync) {
		s->s.sync_wait_ns = sat_add64(s->s.sync_wait_ns, end - start);
		s->s.syncs = sat_add64(s->s.syncs, 1);
		return GPULSE_OK;
	}
	if (s->last_end_ns == 0) {
		s->s.busy_ns = sat_add64(s->s.busy_ns, end - start);
		s->last_end_ns = end;
	} else if (start >= s->last_end_ns) {
		s->s.gap_ns = sat_add64(s->s.gap_ns, start - s->last_end_ns);
		s->s.busy_ns = sat_add64(s->s.busy_ns, end - start);
		s->last_end_ns = end;
	} else if (end > s->last_end_ns) {
		s->s.busy_ns = sat_add64(s->s.busy_ns, end - s->last_end_ns);
		s->last_end_ns = end;
	}
	return GPULSE_OK;
}

int agg_add_sync(struct agg *a, const struct agg_sync_rec *r)
{
	int sc = scope_index(a, r->device, r->context);
	if (sc < 0) {
		a->dropped++;
		return GPULSE_ELIMIT;
	}
	int rc = stream_op(a, (unsigned)sc, r->stream, r->start_ns, r->end_ns, 1);
	if (rc == GPULSE_OK)
		a->records++;
	return rc;
}

int agg_add_range(struct agg *a, const char *name, uint64_t duration_ns)
{
	if (!name || !*name)
		name = "(unnamed)";
	size_t n = name_len(name);
	uint64_t h = name_hash(name, n, 0);
	unsigned mask = AGG_RANGE_SLOTS - 1;
	unsigned i = (unsigned)h & mask;
	for (unsigned probe = 0; probe < AGG_RANGE_SLOTS; probe++, i = (i + 1) & mask) {
		struct agg_range_slot *s = &a->ranges[i];
		if (!s->used) {
			if (a->nranges >= AGG_RANGES_MAX)
				break;
			memset(s, 0, sizeof *s);
			s->used = 1;
			s->hash = h;
			memcpy(s->r.name, name, n);
			s->r.name[n] = '\0';
			a->nranges++;
		} else if (s->hash != h || strncmp(s->r.name, name, n) != 0 || s->r.name[n] != '\0') {
			continue;
		}
		s->r.count = sat_add64(s->r.count, 1);
		s->r.total_ns = sat_add64(s->r.total_ns, duration_ns);
		if (duration_ns > s->r.max_ns)
			s->r.max_ns = duration_ns;
		a->records++;
		return GPULSE_OK;
	}
	a->dropped++;
	return GPULSE_ELIMIT;
}

void agg_window_begin(struct agg *a)
{
	for (unsigned i = 0; i < AGG_STREAM_SLOTS; i++)
		a->streams[i].last_end_ns = 0;
}

void agg_take(struct agg *a, struct agg *out)
{
	memcpy(out, a, sizeof *a);
	/* Keep scopes (indices stay valid for the stream slots) and the
	 * streams' continuity; clear every statistic. Streams idle for a
	 * whole interval are evicted when the table is filling up. */
	int evict = a->nstreams > AGG_STREAMS_MAX / 2;
	memset(a->kernels, 0, sizeof a->kernels);
	memset(a->copies, 0, sizeof a->copies);
	memset(a->ranges, 0, sizeof a->ranges);
	memset(a->uvm, 0, sizeof a->uvm);
	memset(a->uvm_seen, 0, sizeof a->uvm_seen);
	a->nkernels = a->nranges = 0;
	a->records = a->dropped = a->kernels_other = 0;
	if (evict) {
		/* Rebuild the table from the streams still in use: removing
		 * entries from a linear-probing table in place would break
		 * the probe chains of the others. */
		struct agg_stream_slot *keep = malloc(sizeof a->streams);
		unsigned nkeep = 0;
		for (unsigned i = 0; keep && i < AGG_STREAM_SLOTS; i++)
			if (a->streams[i].used && a->streams[i].active)
				keep[nkeep++] = a->streams[i];
		if (keep) {
		memset(a->streams, 0, sizeof a->streams);
		a->nstreams = 0;
		for (unsigned i = 0; i < nkeep; i++) {
			struct agg_stream_slot *s = stream_slot(a, keep[i].scope, keep[i].s.stream, 1);
			if (s)
				s->last_end_ns = keep[i].last_end_ns;
		}
		}
		free(keep);
	}
	for (unsigned i = 0; i < AGG_STREAM_SLOTS; i++) {
		struct agg_stream_slot *s = &a->streams[i];
		if (!s->used)
			continue;
		uint32_t id = s->s.stream;
		memset(&s->s, 0, sizeof s->s);
		s->s.stream = id;
		s->active = 0;
	}
}

void agg_merge(struct agg *dst, const struct agg *src)
{
	for (unsigned i = 0; i < AGG_KERNEL_SLOTS; i++) {
		const struct agg_kernel_slot *s = &src->kernels[i];
		if (!s->used)
			continue;
		const struct agg_scope *sc = &src->scopes[s->scope];
		int d = scope_index(dst, sc->device, sc->context);
		if (d < 0) {
			dst->dropped += s->k.launches;
			continue;
		}
		int folded = 0;
		struct agg_kernel_slot *t = kernel_slot(dst, (unsigned)d, s->k.name,
							strlen(s->k.name), s->is_other, &folded);
		if (!t) {
			dst->dropped += s->k.launches;
			continue;
		}
		kernel_merge(&t->k, &s->k);
		if (folded && !s->is_other)
			dst->kernels_other += s->k.launches;
		if (!folded && !s->is_other) {
			memcpy(t->k.grid, s->k.grid, sizeof t->k.grid);
			memcpy(t->k.block, s->k.block, sizeof t->k.block);
			t->k.registers = s->k.registers;
			t->k.shared_bytes = s->k.shared_bytes;
		}
	}
	for (unsigned i = 0; i < AGG_COPY_SLOTS; i++) {
		const struct agg_copy_slot *s = &src->copies[i];
		if (!s->used)
			continue;
		const struct agg_scope *sc = &src->scopes[s->scope];
		int d = scope_index(dst, sc->device, sc->context);
		if (d < 0) {
			dst->dropped += s->c.count;
			continue;
		}
		struct agg_copy_slot *t = copy_slot(dst, (unsigned)d, s->c.kind, s->c.pinned);
		t->c.count = sat_add64(t->c.count, s->c.count);
		t->c.bytes = sat_add64(t->c.bytes, s->c.bytes);
		t->c.total_ns = sat_add64(t->c.total_ns, s->c.total_ns);
	}
	for (unsigned i = 0; i < AGG_STREAM_SLOTS; i++) {
		const struct agg_stream_slot *s = &src->streams[i];
		if (!s->used || !s->active)
			continue;
		const struct agg_scope *sc = &src->scopes[s->scope];
		int d = scope_index(dst, sc->device, sc->context);
		struct agg_stream_slot *t = d < 0 ? NULL : stream_slot(dst, (unsigned)d, s->s.stream, 1);
		if (!t) {
			dst->dropped++;
			continue;
		}
		t->active = 1;
		t->s.busy_ns = sat_add64(t->s.busy_ns, s->s.busy_ns);
		t->s.gap_ns = sat_add64(t->s.gap_ns, s->s.gap_ns);
		t->s.sync_wait_ns = sat_add64(t->s.sync_wait_ns, s->s.sync_wait_ns);
		t->s.syncs = sat_add64(t->s.syncs, s->s.syncs);
	}
	for (unsigned i = 0; i < AGG_RANGE_SLOTS; i++) {
		const struct agg_range_slot *s = &src->ranges[i];
		if (!s->used)
			continue;
		/* Merge through the adder's lookup, then fix the totals. */
		size_t n = strlen(s->r.name);
		uint64_t h = name_hash(s->r.name, n, 0);
		unsigned mask = AGG_RANGE_SLOTS - 1, j = (unsigned)h & mask;
		struct agg_range_slot *t = NULL;
		for (unsigned probe = 0; probe < AGG_RANGE_SLOTS; probe++, j = (j + 1) & mask) {
			struct agg_range_slot *c = &dst->ranges[j];
			if (!c->used) {
				if (dst->nranges >= AGG_RANGES_MAX)
					break;
				memset(c, 0, sizeof *c);
				c->used = 1;
				c->hash = h;
				memcpy(c->r.name, s->r.name, n + 1);
				dst->nranges++;
				t = c;
				break;
			}
			if (c->hash == h && strcmp(c->r.name, s->r.name) == 0) {
				t = c;
				break;
			}
		}
		if (!t) {
			dst->dropped += s->r.count;
			continue;
		}
		t->r.count = sat_add64(t->r.count, s->r.count);
		t->r.total_ns = sat_add64(t->r.total_ns, s->r.total_ns);
		if (s->r.max_ns > t->r.max_ns)
			t->r.max_ns = s->r.max_ns;
	}
	for (unsigned sc = 0; sc < src->nscopes; sc++) {
		if (!src->uvm_seen[sc])
			continue;
		int d = scope_index(dst, src->scopes[sc].device, src->scopes[sc].context);
		if (d < 0) {
			dst->dropped++;
			continue;
		}
		for (unsigned c = 0; c < AGG_UVM_COUNTER_COUNT; c++)
			dst->uvm[d][c] = sat_add64(dst->uvm[d][c], src->uvm[sc][c]);
		dst->uvm_seen[d] = 1;
	}
	dst->records = sat_add64(dst->records, src->records);
	dst->dropped = sat_add64(dst->dropped, src->dropped);
	dst->kernels_other = sat_add64(dst->kernels_other, src->kernels_other);
}

unsigned agg_kernel_count(const struct agg *a)
{
	unsigned n = 0;
	for (unsigned i = 0; i < AGG_KERNEL_SLOTS; i++)
		n += a->kernels[i].used;
	return n;
}

const struct wire_kernel *agg_find_kernel(const struct agg *a, uint32_t device,
					  uint32_t context, const char *name)
{
	int sc = scope_find(a, device, context);
	if (sc < 0)
		return NULL;
	int other = strcmp(name, AGG_OTHER_NAME) == 0;
	for (unsigned i = 0; i < AGG_KERNEL_SLOTS; i++) {
		const struct agg_kernel_slot *s = &a->kernels[i];
		if (s->used && s->scope == sc && s->is_other == other && strcmp(s->k.name, name) == 0)
			return &s->k;
	}
	return NULL;
}

const struct wire_copy *agg_find_copy(const struct agg *a, uint32_t device, uint32_t context,
				      uint8_t kind, uint8_t pinned)
{
	int sc = scope_find(a, device, context);
	if (sc < 0 || kind >= WIRE_COPY_KIND_COUNT)
		return NULL;
	const struct agg_copy_slot *s =
		&a->copies[((unsigned)sc * WIRE_COPY_KIND_COUNT + kind) * 2 + (pinned ? 1 : 0)];
	return s->used ? &s->c : NULL;
}

const struct wire_stream *agg_find_stream(const struct agg *a, uint32_t device,
					  uint32_t context, uint32_t stream)
{
	int sc = scope_find(a, device, context);
	if (sc < 0)
		return NULL;
	for (unsigned i = 0; i < AGG_STREAM_SLOTS; i++) {
		const struct agg_stream_slot *s = &a->streams[i];
		if (s->used && s->scope == sc && s->s.stream == stream)
			return &s->s;
	}
	return NULL;
}

const struct wire_range *agg_find_range(const struct agg *a, const char *name)
{
	for (unsigned i = 0; i < AGG_RANGE_SLOTS; i++)
		if (a->ranges[i].used && strcmp(a->ranges[i].r.name, name) == 0)
			return &a->ranges[i].r;
	return NULL;
}

uint64_t agg_uvm_total(const struct agg *a, uint32_t device, enum agg_uvm_counter c)
{
	uint64_t v = 0;
	for (unsigned sc = 0; sc < a->nscopes; sc++)
		if (a->scopes[sc].device == device && (unsigned)c < AGG_UVM_COUNTER_COUNT)
			v += a->uvm[sc][c];
	return v;
}

const char *agg_copy_kind_name(unsigned kind)
{
	static const char *const names[] = { "H2D", "D2H", "D2D", "peer", "other", "memset" };
	return kind < WIRE_COPY_KIND_COUNT ? names[kind] : "unknown";
}

/* ---- encoding ---- */

struct agg_encoder {
	struct wire_kernel *kernels;   /* WIRE_MAX_KERNELS */
	struct wire_kernel other;      /* the fold being built */
	struct wire_copy *copies;      /* WIRE_MAX_COPIES */
	struct wire_stream *streams;   /* WIRE_MAX_STREAMS */
	struct wire_range *ranges;     /* WIRE_MAX_RANGES */
	unsigned *order;               /* AGG_KERNEL_SLOTS indices */
	uint8_t *frame;                /* WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD */
};

struct agg_encoder *agg_encoder_create(void)
{
	struct agg_encoder *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->kernels = calloc(WIRE_MAX_KERNELS, sizeof *e->kernels);
	e->copies = calloc(WIRE_MAX_COPIES, sizeof *e->copies);
	e->streams = calloc(WIRE_MAX_STREAMS, sizeof *e->streams);
	e->ranges = calloc(WIRE_MAX_RANGES, sizeof *e->ranges);
	e->order = calloc(AGG_KERNEL_SLOTS, sizeof *e->order);
	e->frame = malloc(WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD);
	if (!e->kernels || !e->copies || !e->streams || !e->ranges || !e->order || !e->frame) {
		agg_encoder_destroy(e);
		return NULL;
	}
	return e;
}

void agg_encoder_destroy(struct agg_encoder *e)
{
	if (!e)
		return;
	free(e->kernels);
	free(e->copies);
	free(e->streams);
	free(e->ranges);
	free(e->order);
	free(e->frame);
	free(e);
}

/* How many entries of `type` fit one frame, at most `cap`. */
static unsigned per_frame(unsigned type, unsigned cap)
{
	size_t eb = wire_entry_bytes(type);
	size_t fixed = 64; /* scope and count, generously */
	size_t n = eb ? (WIRE_MAX_PAYLOAD - fixed) / eb : cap;
	return n < cap ? (unsigned)n : cap;
}

static int emit_msg(struct agg_encoder *e, const struct wire_msg *m, agg_emit_fn *emit, void *user)
{
	size_t len = wire_encode(m, e->frame, WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD);
	if (len == 0)
		return GPULSE_ELIMIT;
	return emit(e->frame, len, user);
}

static int by_total_desc(const void *pa, const void *pb, void *arg)
{
	const struct agg *sort_agg = arg;
	const struct wire_kernel *ka = &sort_agg->kernels[*(const unsigned *)pa].k;
	const struct wire_kernel *kb = &sort_agg->kernels[*(const unsigned *)pb].k;
	if (ka->total_ns != kb->total_ns)
		return ka->total_ns > kb->total_ns ? -1 : 1;
	if (ka->launches != kb->launches)
		return ka->launches > kb->launches ? -1 : 1;
	return strcmp(ka->name, kb->name);
}

static void fill_scope(struct wire_scope *s, const struct agg *a, unsigned sc,
		       const struct agg_interval *iv)
{
	s->device = a->scopes[sc].device;
	s->context = a->scopes[sc].context;
	s->interval_start_ns = iv->start_ns;
	s->interval_end_ns = iv->end_ns;
	s->traced_ns = iv->traced_ns;
}

static int encode_kernels(struct agg_encoder *e, const struct agg *a, unsigned sc,
			  const struct agg_interval *iv, agg_emit_fn *emit, void *user,
			  uint64_t *folded)
{
	unsigned n = 0;
	int other_idx = -1;
	for (unsigned i = 0; i < AGG_KERNEL_SLOTS; i++) {
		const struct agg_kernel_slot *s = &a->kernels[i];
		if (!s->used || s->scope != sc)
			continue;
		if (s->is_other)
			other_idx = (int)i;
		else
			e->order[n++] = i;
	}
	if (n == 0 && other_idx < 0)
		return 0;
	qsort_r(e->order, n, sizeof *e->order, by_total_desc, (void *)(uintptr_t)a);
	unsigned topk = iv->topk ? iv->topk : AGG_TOPK_DEFAULT;
	if (topk > WIRE_MAX_KERNELS - 1)
		topk = WIRE_MAX_KERNELS - 1; /* keep room for "other" in the one frame */
	struct wire_kernel *other = &e->other;
	memset(other, 0, sizeof *other);
	str_copy(other->name, sizeof other->name, AGG_OTHER_NAME);
	if (other_idx >= 0)
		kernel_merge(other, &a->kernels[other_idx].k);
	/* The top K and "other" go in one frame: by their encoded sizes, so
	 * long names (WIRE_KERNEL_NAME_MAX) fold into "other" only when K
	 * of them would not fit WIRE_MAX_PAYLOAD (64 always do). */
	size_t room = WIRE_MAX_PAYLOAD - 64 - wire_kernel_bytes(other);
	unsigned out = 0;
	for (unsigned i = 0; i < n; i++) {
		const struct wire_kernel *k = &a->kernels[e->order[i]].k;
		size_t kb = wire_kernel_bytes(k);
		if (out < topk && kb <= room) {
			e->kernels[out++] = *k;
			room -= kb;
		} else {
			kernel_merge(other, k);
			if (folded)
				*folded += k->launches;
		}
	}
	if (other->launches)
		e->kernels[out++] = *other;
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_KERNELS;
	fill_scope(&m.u.kernels.scope, a, sc, iv);
	m.u.kernels.count = out;
	m.u.kernels.kernels = e->kernels;
	return emit_msg(e, &m, emit, user);
}

static int encode_copies(struct agg_encoder *e, const struct agg *a, unsigned sc,
			 const struct agg_interval *iv, agg_emit_fn *emit, void *user)
{
	unsigned n = 0;
	for (unsigned i = 0; i < AGG_COPY_SLOTS && n < WIRE_MAX_COPIES; i++)
		if (a->copies[i].used && a->copies[i].scope == sc)
			e->copies[n++] = a->copies[i].c;
	if (n == 0)
		return 0;
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_COPIES;
	fill_scope(&m.u.copies.scope, a, sc, iv);
	m.u.copies.count = n;
	m.u.copies.copies = e->copies;
	return emit_msg(e, &m, emit, user);
}

static int encode_streams(struct agg_encoder *e, const struct agg *a, unsigned sc,
			  const struct agg_interval *iv, agg_emit_fn *emit, void *user)
{
	unsigned cap = per_frame(WIRE_STREAMS, WIRE_MAX_STREAMS);
	unsigned n = 0;
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_STREAMS;
	fill_scope(&m.u.streams.scope, a, sc, iv);
	m.u.streams.streams = e->streams;
	for (unsigned i = 0; i < AGG_STREAM_SLOTS; i++) {
		const struct agg_stream_slot *s = &a->streams[i];
		if (!s->used || !s->active || s->scope != sc)
			continue;
		e->streams[n++] = s->s;
		if (n == cap) {
			m.u.streams.count = n;
			int rc = emit_msg(e, &m, emit, user);
			if (rc)
				return rc;
			n = 0;
		}
	}
	if (n == 0)
		return 0;
	m.u.streams.count = n;
	return emit_msg(e, &m, emit, user);
}

static int encode_ranges(struct agg_encoder *e, const struct agg *a,
			 const struct agg_interval *iv, agg_emit_fn *emit, void *user)
{
	unsigned cap = per_frame(WIRE_RANGES, WIRE_MAX_RANGES);
	unsigned n = 0;
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_RANGES;
	/* Ranges are host-side: scope device 0, context 0. */
	m.u.ranges.scope.interval_start_ns = iv->start_ns;
	m.u.ranges.scope.interval_end_ns = iv->end_ns;
	m.u.ranges.scope.traced_ns = iv->traced_ns;
	m.u.ranges.ranges = e->ranges;
	for (unsigned i = 0; i < AGG_RANGE_SLOTS; i++) {
		if (!a->ranges[i].used)
			continue;
		e->ranges[n++] = a->ranges[i].r;
		if (n == cap) {
			m.u.ranges.count = n;
			int rc = emit_msg(e, &m, emit, user);
			if (rc)
				return rc;
			n = 0;
		}
	}
	if (n == 0)
		return 0;
	m.u.ranges.count = n;
	return emit_msg(e, &m, emit, user);
}

int agg_encode(struct agg_encoder *e, const struct agg *a, const struct agg_interval *iv,
	       agg_emit_fn *emit, void *user, uint64_t *folded_launches)
{
	int rc = 0;
	for (unsigned sc = 0; sc < a->nscopes && rc == 0; sc++) {
		rc = encode_kernels(e, a, sc, iv, emit, user, folded_launches);
		if (rc == 0)
			rc = encode_copies(e, a, sc, iv, emit, user);
		if (rc == 0)
			rc = encode_streams(e, a, sc, iv, emit, user);
		if (rc == 0 && a->uvm_seen[sc]) {
			struct wire_msg m;
			memset(&m, 0, sizeof m);
			m.type = WIRE_UVM;
			fill_scope(&m.u.uvm.scope, a, sc, iv);
			m.u.uvm.bytes_h2d = a->uvm[sc][AGG_UVM_BYTES_H2D];
			m.u.uvm.bytes_d2h = a->uvm[sc][AGG_UVM_BYTES_D2H];
			m.u.uvm.cpu_page_faults = a->uvm[sc][AGG_UVM_CPU_FAULTS];
			m.u.uvm.gpu_page_faults = a->uvm[sc][AGG_UVM_GPU_FAULTS];
			m.u.uvm.thrashing = a->uvm[sc][AGG_UVM_THRASHING];
			m.u.uvm.throttling = a->uvm[sc][AGG_UVM_THROTTLING];
			rc = emit_msg(e, &m, emit, user);
		}
	}
	if (rc == 0)
		rc = encode_ranges(e, a, iv, emit, user);
	return rc;
}

/* ---- JSON dump ---- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

int agg_dump_json(const struct agg *a, FILE *f, const char *extra)
{
	fprintf(f, "{\n  \"kernels\": [");
	int first = 1;
	for (unsigned i = 0; i < AGG_KERNEL_SLOTS; i++) {
		const struct agg_kernel_slot *s = &a->kernels[i];
		if (!s->used)
			continue;
		const struct wire_kernel *k = &s->k;
		fprintf(f, "%s\n    {\"name\": ", first ? "" : ",");
		json_str(f, k->name);
		fprintf(f,
			", \"device\": %u, \"context\": %u, \"launches\": %llu, \"total_ns\": %llu, "
			"\"min_ns\": %llu, \"max_ns\": %llu, \"mean_ns\": %llu, \"p50_ns\": %llu, "
			"\"p99_ns\": %llu, \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], "
			"\"registers\": %u, \"shared_bytes\": %u}",
			a->scopes[s->scope].device, a->scopes[s->scope].context,
			(unsigned long long)k->launches, (unsigned long long)k->total_ns,
			(unsigned long long)k->min_ns, (unsigned long long)k->max_ns,
			(unsigned long long)(k->launches ? k->total_ns / k->launches : 0),
			(unsigned long long)agg_hist_quantile(k->hist, k->min_ns, k->max_ns, 0.5),
			(unsigned long long)agg_hist_quantile(k->hist, k->min_ns, k->max_ns, 0.99),
			k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
			k->registers, k->shared_bytes);
		first = 0;
	}
	fprintf(f, "\n  ],\n  \"copies\": [");
	first = 1;
	for (unsigned i = 0; i < AGG_COPY_SLOTS; i++) {
		const struct agg_copy_slot *s = &a->copies[i];
		if (!s->used)
			continue;
		double gbps = s->c.total_ns ? (double)s->c.bytes / (double)s->c.total_ns : 0;
		fprintf(f,
			"%s\n    {\"kind\": \"%s\", \"pinned\": %s, \"device\": %u, \"context\": %u, "
			"\"count\": %llu, \"bytes\": %llu, \"total_ns\": %llu, \"bandwidth_gbps\": %.3f}",
			first ? "" : ",", agg_copy_kind_name(s->c.kind), s->c.pinned ? "true" : "false",
			a->scopes[s->scope].device, a->scopes[s->scope].context,
			(unsigned long long)s->c.count, (unsigned long long)s->c.bytes,
			(unsigned long long)s->c.total_ns, gbps);
		first = 0;
	}
	fprintf(f, "\n  ],\n  \"uvm\": [");
	first = 1;
	for (unsigned sc = 0; sc < a->nscopes; sc++) {
		if (!a->uvm_seen[sc])
			continue;
		const uint64_t *u = a->uvm[sc];
		fprintf(f,
			"%s\n    {\"device\": %u, \"bytes_h2d\": %llu, \"bytes_d2h\": %llu, "
			"\"cpu_page_faults\": %llu, \"gpu_page_faults\": %llu, \"thrashing\": %llu, "
			"\"throttling\": %llu}",
			first ? "" : ",", a->scopes[sc].device,
			(unsigned long long)u[AGG_UVM_BYTES_H2D], (unsigned long long)u[AGG_UVM_BYTES_D2H],
			(unsigned long long)u[AGG_UVM_CPU_FAULTS], (unsigned long long)u[AGG_UVM_GPU_FAULTS],
			(unsigned long long)u[AGG_UVM_THRASHING], (unsigned long long)u[AGG_UVM_THROTTLING]);
		first = 0;
	}
	fprintf(f, "\n  ],\n  \"streams\": [");
	first = 1;
	for (unsigned i = 0; i < AGG_STREAM_SLOTS; i++) {
		const struct agg_stream_slot *s = &a->streams[i];
		if (!s->used || !s->active)
			continue;
		fprintf(f,
			"%s\n    {\"device\": %u, \"context\": %u, \"stream\": %lld, \"busy_ns\": %llu, "
			"\"gap_ns\": %llu, \"sync_wait_ns\": %llu, \"syncs\": %llu}",
			first ? "" : ",", a->scopes[s->scope].device, a->scopes[s->scope].context,
			s->s.stream == AGG_STREAM_NONE ? -1LL : (long long)s->s.stream,
			(unsigned long long)s->s.busy_ns, (unsigned long long)s->s.gap_ns,
			(unsigned long long)s->s.sync_wait_ns, (unsigned long long)s->s.syncs);
		first = 0;
	}
	fprintf(f, "\n  ],\n  \"ranges\": [");
	first = 1;
	for (unsigned i = 0; i < AGG_RANGE_SLOTS; i++) {
		const struct agg_range_slot *s = &a->ranges[i];
		if (!s->used)
			continue;
		fprintf(f, "%s\n    {\"name\": ", first ? "" : ",");
		json_str(f, s->r.name);
		fprintf(f, ", \"count\": %llu, \"total_ns\": %llu, \"max_ns\": %llu}",
			(unsigned long long)s->r.count, (unsigned long long)s->r.total_ns,
			(unsigned long long)s->r.max_ns);
		first = 0;
	}
	fprintf(f, "\n  ],\n  \"records\": %llu, \"dropped\": %llu, \"kernels_other\": %llu%s%s\n}\n",
		(unsigned long long)a->records, (unsigned long long)a->dropped,
		(unsigned long long)a->kernels_other, extra && *extra ? ",\n  " : "",
		extra ? extra : "");
	return ferror(f) ? GPULSE_EIO : GPULSE_OK;
}
