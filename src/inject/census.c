/* The launch census of continuous mode; see census.h. */
#include "census.h"

#include <math.h>
#include <string.h>

#include "str.h"

#define OTHER_NAME AGG_OTHER_NAME

void census_clear(struct census *c)
{
	memset(c, 0, sizeof *c);
}

static uint64_t hash_key(const char *key, uint32_t context)
{
	uint64_t h = ((uint64_t)(uintptr_t)key >> 3) ^ ((uint64_t)context << 48);
	return h * 0x9e3779b97f4a7c15ull;
}

/* The slot of (context, name), made when new; the context's "other" slot
 * once CENSUS_KERNELS distinct kernels are in (it ignores the cap, and at
 * most CENSUS_CONTEXTS of them fit beside it). */
static int kernel_slot(struct census *c, const char *key, uint32_t context, uint32_t device,
		       int is_other)
{
	uint64_t h = is_other ? 0x0f0f0f0full + context : hash_key(key, context);
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
			k->device = device;
			if (!is_other)
				c->nkernels++;
			return (int)i;
		}
		if (k->hash == h && k->context == context && k->is_other == is_other &&
		    k->key == (is_other ? NULL : key))
			return (int)i;
	}
	return -1;
}

int census_launch(struct census *c, const char *name, uint32_t context, uint32_t device,
		  const uint32_t grid[3], const uint32_t block[3], uint32_t shared_bytes)
{
	if (!name)
		name = "(unnamed)";
	int i = kernel_slot(c, name, context, device, 0);
	if (i < 0) {
		i = kernel_slot(c, NULL, context, device, 1);
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
static int mean_index(const struct census_means *m, const char *key, uint32_t context)
{
	uint64_t h = hash_key(key, context);
	unsigned mask = CENSUS_SLOTS - 1, i = (unsigned)(h >> 40) & mask;
	for (unsigned probe = 0; probe < CENSUS_SLOTS; probe++, i = (i + 1) & mask) {
		const struct census_mean *e = &m->m[i];
		if (!e->used)
			return m->count < CENSUS_SLOTS / 4 * 3 ? (int)i : -1; /* three quarters full at most */
		if (e->hash == h && e->key == key && e->context == context)
			return (int)i;
	}
	return -1;
}

void census_means_add(struct census_means *m, const char *key, uint32_t context, uint64_t dur_ns)
{
	if (!m || !key)
		return;
	int i = mean_index(m, key, context);
	if (i < 0)
		return;
	struct census_mean *e = &m->m[i];
	if (!e->used) {
		memset(e, 0, sizeof *e);
		e->used = 1, e->hash = hash_key(key, context), e->key = key, e->context = context;
		m->count++;
	}
	if (e->ns <= UINT64_MAX - dur_ns)
		e->n++, e->ns += dur_ns;
}

int census_means_get(const struct census_means *m, const char *key, uint32_t context,
		     double *mean_ns)
{
	if (!m || !key)
		return 0;
	int i = mean_index(m, key, context);
	if (i < 0 || !m->m[i].used || !m->m[i].n)
		return 0;
	*mean_ns = (double)m->m[i].ns / (double)m->m[i].n;
	return 1;
}

void census_take(struct census *c, struct census *out)
{
	memcpy(out, c, sizeof *out);
	census_clear(c);
}

static uint64_t scaled(uint64_t v, double by)
{
	double x = (double)v * by;
	return x >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(x);
}

void census_estimate(const struct census *c, double observed, const struct census_means *means,
		     struct agg *a, census_name_fn *demangle, void *user, uint64_t *untimed_launches)
{
	if (!(observed > 0))
		return;
	if (observed > 1)
		observed = 1;
	double by = 1.0 / observed;
	for (unsigned i = 0; i < CENSUS_SLOTS; i++) {
		const struct census_kernel *k = &c->k[i];
		if (!k->used || k->launches == 0)
			continue;
		struct wire_kernel w;
		memset(&w, 0, sizeof w);
		const char *name = k->is_other ? OTHER_NAME : demangle ? demangle(k->key, user) : k->key;
		str_copy(w.name, sizeof w.name, name && *name ? name : "(unnamed)");
		w.launches = scaled(k->launches, by);
		if (w.launches == 0)
			w.launches = 1;
		double mean = 0;
		if (k->sampled) {
			mean = (double)k->sampled_ns / (double)k->sampled;
			w.min_ns = k->min_ns;
			w.max_ns = k->max_ns;
			memcpy(w.hist, k->hist, sizeof w.hist);
		} else if (!k->is_other && census_means_get(means, k->key, k->context, &mean)) {
			w.min_ns = w.max_ns = (uint64_t)llround(mean); /* no sample of its own here */
		} else if (untimed_launches) {
			*untimed_launches += w.launches;
		}
		if (mean > 0) {
			double t = mean * (double)w.launches;
			w.total_ns = t >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(t);
		}
		memcpy(w.grid, k->grid, sizeof w.grid);
		memcpy(w.block, k->block, sizeof w.block);
		w.shared_bytes = k->shared_bytes;
		agg_add_kernel_stats(a, k->device, k->context, &w);
	}
	for (unsigned i = 0; i < c->ncontexts; i++) {
		const struct census_copies *cp = &c->copies[i];
		for (unsigned kind = 0; kind < WIRE_COPY_KIND_COUNT; kind++)
			if (cp->count[kind])
				agg_add_copy_stats(a, cp->device, cp->context, (uint8_t)kind, 1,
						   scaled(cp->count[kind], by),
						   scaled(cp->bytes[kind], by));
	}
}
