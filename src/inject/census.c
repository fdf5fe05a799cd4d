/* The launch census of continuous mode; see census.h. */
#include "inject/census.h"

#include <math.h>
#include <string.h>

#include "inject/calib.h"
#include "common/str.h"

#define OTHER_NAME AGG_OTHER_NAME

void census_clear(struct census *c)
{
	memset(c, 0, sizeof *c);
}

uint8_t census_class(const uint32_t grid[3], const uint32_t block[3])
{
	if (!grid || !block)
		return 0;
	uint64_t n = 1;
	for (int i = 0; i < 3; i++)
		if (__builtin_mul_overflow(n, (uint64_t)(grid[i] ? grid[i] : 1), &n) ||
		    __builtin_mul_overflow(n, (uint64_t)(block[i] ? block[i] : 1), &n))
			return 64;
	uint8_t bits = 0;
	for (; n; n >>= 1)
		bits++;
	return bits;
}

static uint64_t hash_key(const char *key, uint32_t context, uint8_t cls)
{
	uint64_t h = ((uint64_t)(uintptr_t)key >> 3) ^ ((uint64_t)context << 48) ^ ((uint64_t)cls << 40);
	return h * 0x9e3779b97f4a7c15ull;
}

/* The slot of (context, name), made when new; the context's "other" slot
 * once CENSUS_KERNELS distinct kernels are in (it ignores the cap, and at
 * most CENSUS_CONTEXTS of them fit beside it). */
static int kernel_slot(struct census *c, const char *key, uint32_t context, uint8_t cls,
		       uint32_t device, int is_other)
{
	if (is_other)
		cls = 0;
	uint64_t h = is_other ? 0x0f0f0f0full + context : hash_key(key, context, cls);
	unsigned mask = CENSUS_SLOTS - 1, i = (unsigned)(h >> 40) & mask;
	for (unsigned probe = 0; probe < CENSUS_SLOTS; probe++, i = (i + 1) & mask) {
		struct census_kernel *k = &c->k[i];
		if (!k->used) {
			if (!is_other && c->nkernels >= CENSUS_KERNELS)
				return -1;
			memset(k, 0, sizeof *k);
			k->used = 1;
			k->is_other = (uint8_t)is_other;
			k->hash = h;
			k->key = is_other ? NULL : key;
			k->context = context;
			k->cls = cls;
			k->device = device;
			if (!is_other)
				c->nkernels++;
			return (int)i;
		}
		if (k->hash == h && k->context == context && k->is_other == is_other &&
		    k->cls == cls && k->key == (is_other ? NULL : key))
			return (int)i;
	}
	return -1;
}

int census_launch(struct census *c, const char *name, uint32_t context, uint32_t device,
		  const uint32_t grid[3], const uint32_t block[3], uint32_t shared_bytes)
{
	if (!name)
		name = "(unnamed)";
	uint8_t cls = census_class(grid, block);
	int i = kernel_slot(c, name, context, cls, device, 0);
	if (i < 0) {
		i = kernel_slot(c, NULL, context, 0, device, 1);
		c->folded++;
	}
	struct census_kernel *k = &c->k[i];
	k->launches++;
	if (grid)
		memcpy(k->grid, grid, sizeof k->grid);
	if (block)
		memcpy(k->block, block, sizeof k->block);
	k->shared_bytes = shared_bytes;
	c->launches++;
	return i;
}

void census_sample(struct census *c, int slot, const char *name, uint64_t dur_ns)
{
	if (slot < 0 || slot >= CENSUS_SLOTS)
		return;
	struct census_kernel *k = &c->k[slot];
	if (!k->used || (!k->is_other && k->key != name))
		return;
	if (k->sampled == 0 || dur_ns < k->min_ns)
		k->min_ns = dur_ns;
	if (dur_ns > k->max_ns)
		k->max_ns = dur_ns;
	k->sampled++;
	k->sampled_ns += dur_ns;
	unsigned b = agg_hist_bucket(dur_ns);
	if (k->hist[b] < UINT32_MAX)
		k->hist[b]++;
	c->samples++;
}

void census_copy(struct census *c, uint32_t context, uint32_t device, uint8_t kind,
		 uint64_t bytes)
{
	if (kind >= WIRE_COPY_KIND_COUNT)
		kind = WIRE_COPY_OTHER;
	struct census_copies *cp = NULL;
	for (unsigned i = 0; i < c->ncontexts && !cp; i++)
		if (c->copies[i].context == context)
			cp = &c->copies[i];
	if (!cp) {
		if (c->ncontexts >= CENSUS_CONTEXTS) {
			c->dropped++;
			return;
		}
		cp = &c->copies[c->ncontexts++];
		cp->context = context;
		cp->device = device;
	}
	cp->count[kind]++;
	cp->bytes[kind] += bytes;
	c->copies_seen++;
}

/* The slot of (key, context) in the means' table, or of the free one where
 * it would go; -1 when neither (the table is at its bound). */
static int mean_index(const struct census_means *m, const char *key, uint32_t context, uint8_t cls)
{
	uint64_t h = hash_key(key, context, cls);
	unsigned mask = CENSUS_SLOTS - 1, i = (unsigned)(h >> 40) & mask;
	for (unsigned probe = 0; probe < CENSUS_SLOTS; probe++, i = (i + 1) & mask) {
		const struct census_mean *e = &m->m[i];
		if (!e->used)
			return m->count < CENSUS_SLOTS / 4 * 3 ? (int)i : -1; /* three quarters full at most */
		if (e->hash == h && e->key == key && e->context == context && e->cls == cls)
			return (int)i;
	}
	return -1;
}

uint64_t census_sample_stride(uint64_t drawn, unsigned every)
{
	if (every == 0)
		every = 1;
	if (drawn >= SAMPLES_ENOUGH)
		return (uint64_t)every * SAMPLE_SPARSE;
	if (drawn >= SAMPLES_FIRST)
		return (every + SAMPLES_EARLY_DIV - 1) / SAMPLES_EARLY_DIV;
	return 1;
}

/* The entry of (key, context, cls), made when new; NULL when no room. */
static struct census_mean *mean_entry(struct census_means *m, const char *key, uint32_t context,
				      uint8_t cls)
{
	int i = mean_index(m, key, context, cls);
	if (i < 0)
		return NULL;
	struct census_mean *e = &m->m[i];
	if (!e->used) {
		memset(e, 0, sizeof *e);
		e->used = 1, e->hash = hash_key(key, context, cls), e->key = key, e->context = context;
		e->cls = cls;
		m->count++;
	}
	return e;
}

void census_means_add(struct census_means *m, const char *key, uint32_t context, uint8_t cls,
		      uint64_t dur_ns)
{
	if (!m || !key)
		return;
	struct census_mean *e = mean_entry(m, key, context, cls);
	if (e && e->ns <= UINT64_MAX - dur_ns)
		e->n++, e->ns += dur_ns;
}

void census_means_draw(struct census_means *m, const char *key, uint32_t context, uint8_t cls)
{
	if (!m || !key)
		return;
	struct census_mean *e = mean_entry(m, key, context, cls);
	if (e)
		e->drawn++;
}

uint64_t census_means_drawn(const struct census_means *m, const char *key, uint32_t context,
			    uint8_t cls)
{
	if (!m || !key)
		return 0;
	int i = mean_index(m, key, context, cls);
	if (i < 0 || !m->m[i].used)
		return 0;
	const struct census_mean *e = &m->m[i];
	return e->drawn >= SAMPLES_DRAWN_MAX ? e->drawn : e->drawn - e->discarded;
}

void census_means_discard(struct census_means *m, const char *key, uint32_t context, uint8_t cls)
{
	if (!m || !key)
		return;
	struct census_mean *e = mean_entry(m, key, context, cls);
	if (e && e->discarded < e->drawn)
		e->discarded++;
}

void census_means_unclear(struct census_means *m, const char *key, uint32_t context, uint8_t cls)
{
	if (!m || !key)
		return;
	struct census_mean *e = mean_entry(m, key, context, cls);
	if (!e)
		return;
	if (e->unclear < UINT32_MAX)
		e->unclear++;
	if (e->unclear >= CENSUS_HOLD_BUSY_AFTER && e->unclear > e->n)
		e->hold_busy = 1;
}

int census_means_hold_busy(const struct census_means *m, const char *key, uint32_t context,
			   uint8_t cls)
{
	if (!m || !key)
		return 0;
	int i = mean_index(m, key, context, cls);
	return i >= 0 && m->m[i].used && m->m[i].hold_busy;
}

int census_means_get(const struct census_means *m, const char *key, uint32_t context, uint8_t cls,
		     double *mean_ns)
{
	if (!m || !key)
		return 0;
	int i = mean_index(m, key, context, cls);
	if (i < 0 || !m->m[i].used || !m->m[i].n)
		return 0;
	*mean_ns = (double)m->m[i].ns / (double)m->m[i].n;
	return 1;
}

uint64_t census_means_count(const struct census_means *m, const char *key, uint32_t context,
			    uint8_t cls)
{
	if (!m || !key)
		return 0;
	int i = mean_index(m, key, context, cls);
	return i < 0 || !m->m[i].used ? 0 : m->m[i].n;
}

int census_floor_met(uint64_t floor_ns, uint64_t sum, uint64_t n)
{
	return n < 8 || (double)floor_ns * 2 * (double)n <= 3 * (double)sum;
}

double census_offset_floors(double configured, const struct calib_result *cal, double kept, const char **source)
{
	const char *src = "model";
	double f = 2.0;
	if (configured >= 0)
		f = configured, src = "configured";
	else if (cal && cal->ok)
		f = cal->floors, src = "calibrated";
	else if (kept > 0)
		f = kept, src = "kept";
	if (source)
		*source = src;
	return f;
}

void census_take(struct census *c, struct census *out)
{
	memcpy(out, c, sizeof *out);
	census_clear(c);
}

static uint64_t to_u64(double x)
{
	return x >= 1.8e19 ? UINT64_MAX : x <= 0 ? 0 : (uint64_t)llround(x);
}

/* The pool's slot of (key, context) or of "other" in `context`, or the
 * free one where it would go; -1 when neither. */
static int pool_index(const struct census_pool *p, const char *key, uint32_t context, uint8_t cls,
		      int is_other)
{
	uint64_t h = is_other ? 0x0f0f0f0full + context : hash_key(key, context, cls);
	unsigned mask = CENSUS_SLOTS - 1, i = (unsigned)(h >> 40) & mask;
	for (unsigned probe = 0; probe < CENSUS_SLOTS; probe++, i = (i + 1) & mask) {
		const struct census_pooled *e = &p->k[i];
		if (!e->used)
			return (int)i;
		if (e->hash == h && e->context == context && e->is_other == is_other && e->cls == cls &&
		    e->key == (is_other ? NULL : key))
			return (int)i;
	}
	return -1;
}

/* Rebuild the table without the kernels whose pooled count has decayed
 * below CENSUS_POOL_FORGET (open addressing: removal is a rebuild). */
static void pool_forget(struct census_pool *p)
{
	struct census_pooled *keep = p->scratch;
	unsigned n = 0;
	for (unsigned i = 0; i < CENSUS_SLOTS; i++)
		if (p->k[i].used && p->k[i].launches >= CENSUS_POOL_FORGET)
			keep[n++] = p->k[i];
	memset(p->k, 0, sizeof p->k);
	p->count = 0;
	for (unsigned j = 0; j < n; j++) {
		int i = pool_index(p, keep[j].key, keep[j].context, keep[j].cls, keep[j].is_other);
		p->k[i] = keep[j];
		p->count++;
	}
}

void census_pool_add(struct census_pool *p, const struct census *c, uint64_t observed_ns,
		     uint64_t interval_ns)
{
	double d = exp2(-(double)interval_ns / (double)CENSUS_POOL_HALF_LIFE_NS);
	p->observed_ns = p->observed_ns * d + (double)observed_ns;
	for (unsigned i = 0; i < CENSUS_SLOTS; i++)
		if (p->k[i].used)
			p->k[i].launches *= d;
	for (unsigned i = 0; i < p->ncontexts; i++)
		for (unsigned kind = 0; kind < WIRE_COPY_KIND_COUNT; kind++) {
			p->copies[i].count[kind] *= d;
			p->copies[i].bytes[kind] *= d;
		}
	if (p->count + c->nkernels + CENSUS_CONTEXTS > CENSUS_SLOTS / 4 * 3)
		pool_forget(p);
	for (unsigned i = 0; i < CENSUS_SLOTS; i++) {
		const struct census_kernel *k = &c->k[i];
		if (!k->used || k->launches == 0)
			continue;
		int j = pool_index(p, k->key, k->context, k->cls, k->is_other);
		/* Three quarters full at most; "other" always finds room. */
		if (j < 0 || (!p->k[j].used && !k->is_other && p->count >= CENSUS_SLOTS / 4 * 3)) {
			p->unpooled++;
			continue;
		}
		struct census_pooled *e = &p->k[j];
		if (!e->used) {
			memset(e, 0, sizeof *e);
			e->used = 1, e->is_other = k->is_other, e->hash = k->hash, e->key = k->key;
			e->context = k->context, e->cls = k->cls;
			p->count++;
		}
		e->device = k->device;
		e->launches += (double)k->launches;
		memcpy(e->grid, k->grid, sizeof e->grid);
		memcpy(e->block, k->block, sizeof e->block);
		e->shared_bytes = k->shared_bytes;
	}
	for (unsigned i = 0; i < c->ncontexts; i++) {
		const struct census_copies *cp = &c->copies[i];
		struct census_pooled_copies *e = NULL;
		for (unsigned j = 0; j < p->ncontexts && !e; j++)
			if (p->copies[j].context == cp->context)
				e = &p->copies[j];
		if (!e) {
			if (p->ncontexts >= CENSUS_CONTEXTS)
				continue; /* the census's own bound is the same: never here */
			e = &p->copies[p->ncontexts++];
			memset(e, 0, sizeof *e);
			e->context = cp->context;
		}
		e->device = cp->device;
		for (unsigned kind = 0; kind < WIRE_COPY_KIND_COUNT; kind++) {
			e->count[kind] += (double)cp->count[kind];
			e->bytes[kind] += (double)cp->bytes[kind];
		}
	}
}

/* The pooled rate of `v` times `unobserved_ns`, with *carry's remainder:
 * the whole part is returned, the rest carried. */
static uint64_t pooled_part(const struct census_pool *p, double v, uint64_t unobserved_ns,
			    double *carry)
{
	if (!p || !(p->observed_ns > 0) || unobserved_ns == 0)
		return 0;
	double x = v / p->observed_ns * (double)unobserved_ns + *carry;
	double whole = floor(x);
	*carry = x - whole;
	return to_u64(whole);
}

/* One estimated kernel into `a`: `launches`, its GPU time from the
 * interval's samples in `k` (may be NULL), else its kept mean. */
static void add_kernel(struct agg *a, const struct census_kernel *k, const struct census_pooled *e,
		       uint64_t launches, const struct census_means *means,
		       census_name_fn *demangle, void *user, uint64_t *untimed_launches)
{
	struct wire_kernel w;
	memset(&w, 0, sizeof w);
	int is_other = k ? k->is_other : e->is_other;
	const char *key = k ? k->key : e->key;
	uint32_t context = k ? k->context : e->context, device = k ? k->device : e->device;
	uint8_t cls = k ? k->cls : e->cls;
	const char *name = is_other ? OTHER_NAME : demangle ? demangle(key, user) : key;
	str_copy(w.name, sizeof w.name, name && *name ? name : "(unnamed)");
	w.launches = launches;
	double mean = 0;
	if (k && k->sampled) {
		mean = (double)k->sampled_ns / (double)k->sampled;
		w.min_ns = k->min_ns;
		w.max_ns = k->max_ns;
		memcpy(w.hist, k->hist, sizeof w.hist);
	} else if (!is_other && census_means_get(means, key, context, cls, &mean)) {
		w.min_ns = w.max_ns = (uint64_t)llround(mean); /* no sample of its own here */
	} else if (untimed_launches) {
		*untimed_launches += w.launches;
	}
	if (mean > 0)
		w.total_ns = to_u64(mean * (double)w.launches);
	memcpy(w.grid, k ? k->grid : e->grid, sizeof w.grid);
	memcpy(w.block, k ? k->block : e->block, sizeof w.block);
	w.shared_bytes = k ? k->shared_bytes : e->shared_bytes;
	agg_add_kernel_stats(a, device, context, &w);
}

/* The census's slot of (key, context, class), or -1. */
static int census_find(const struct census *c, const char *key, uint32_t context, uint8_t cls,
		       int is_other)
{
	uint64_t h = is_other ? 0x0f0f0f0full + context : hash_key(key, context, cls);
	unsigned mask = CENSUS_SLOTS - 1, i = (unsigned)(h >> 40) & mask;
	for (unsigned probe = 0; probe < CENSUS_SLOTS; probe++, i = (i + 1) & mask) {
		const struct census_kernel *k = &c->k[i];
		if (!k->used)
			return -1;
		if (k->hash == h && k->context == context && k->is_other == is_other && k->cls == cls &&
		    k->key == (is_other ? NULL : key))
			return (int)i;
	}
	return -1;
}

uint64_t census_estimate(const struct census *c, struct census_pool *p, uint64_t unobserved_ns,
			 const struct census_means *means, struct agg *a, census_name_fn *demangle,
			 void *user, uint64_t *untimed_launches)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < CENSUS_SLOTS; i++) {
		const struct census_kernel *k = &c->k[i];
		if (!k->used || k->launches == 0)
			continue;
		int j = p ? pool_index(p, k->key, k->context, k->cls, k->is_other) : -1;
		struct census_pooled *e = j >= 0 && p->k[j].used ? &p->k[j] : NULL;
		uint64_t n = k->launches;
		if (e)
			n += pooled_part(p, e->launches, unobserved_ns, &e->carry);
		add_kernel(a, k, e, n, means, demangle, user, untimed_launches);
		total += n;
	}
	for (unsigned j = 0; p && j < CENSUS_SLOTS; j++) {
		struct census_pooled *e = &p->k[j];
		if (!e->used || census_find(c, e->key, e->context, e->cls, e->is_other) >= 0)
			continue;
		uint64_t n = pooled_part(p, e->launches, unobserved_ns, &e->carry);
		if (n == 0)
			continue;
		add_kernel(a, NULL, e, n, means, demangle, user, untimed_launches);
		total += n;
	}
	/* Copies: the interval's observed ones, then each context's pooled
	 * rates for the unobserved time. */
	for (unsigned i = 0; i < c->ncontexts; i++) {
		const struct census_copies *cp = &c->copies[i];
		for (unsigned kind = 0; kind < WIRE_COPY_KIND_COUNT; kind++)
			if (cp->count[kind])
				agg_add_copy_stats(a, cp->device, cp->context, (uint8_t)kind, 1,
						   cp->count[kind], cp->bytes[kind]);
	}
	for (unsigned j = 0; p && j < p->ncontexts; j++) {
		struct census_pooled_copies *e = &p->copies[j];
		for (unsigned kind = 0; kind < WIRE_COPY_KIND_COUNT; kind++) {
			uint64_t n = pooled_part(p, e->count[kind], unobserved_ns, &e->carry[kind]);
			uint64_t b = pooled_part(p, e->bytes[kind], unobserved_ns, &e->carry_bytes[kind]);
			if (n)
				agg_add_copy_stats(a, e->device, e->context, (uint8_t)kind, 1, n, b);
		}
	}
	return total;
}
