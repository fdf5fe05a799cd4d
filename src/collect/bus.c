/* The sample bus; see bus.h. */
#include "collect/bus.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/status.h"

#define BUS_MAX_SUBSCRIBERS 8

struct bus_slot {
	pthread_mutex_t lock;
	struct gpu_snapshot s;
	int64_t tier_mono_ns[TIER_COUNT];
	/* F_POWER_ENERGY: the last power reading and the integral so far. */
	bool have_power;
	double last_power_w;
	int64_t last_power_ns;
	double energy_j;
};

struct bus {
	pthread_mutex_t attach_lock;
	atomic_int count;
	atomic_uint_fast64_t generation;
	_Atomic int64_t stale_after_ns[TIER_COUNT]; /* set on reload, read by readers */
	int nsubs;
	bus_subscriber_fn *sub_fn[BUS_MAX_SUBSCRIBERS];
	void *sub_ctx[BUS_MAX_SUBSCRIBERS];
	struct bus_slot slot[GPU_MAX];
};

int bus_create(struct bus **out)
{
	struct bus *b = calloc(1, sizeof *b);
	if (!b)
		return GPULSE_ENOMEM;
	pthread_mutex_init(&b->attach_lock, NULL);
	for (int i = 0; i < GPU_MAX; i++) {
		pthread_mutex_init(&b->slot[i].lock, NULL);
		b->slot[i].s.diag_class = -1;
	}
	*out = b;
	return GPULSE_OK;
}

void bus_destroy(struct bus *b)
{
	if (!b)
		return;
	for (int i = 0; i < GPU_MAX; i++)
		pthread_mutex_destroy(&b->slot[i].lock);
	pthread_mutex_destroy(&b->attach_lock);
	free(b);
}

void bus_set_stale_after(struct bus *b, enum tier tier, int64_t ns)
{
	atomic_store(&b->stale_after_ns[tier], ns);
}

static void bump(struct bus *b)
{
	atomic_fetch_add_explicit(&b->generation, 1, memory_order_release);
}

int bus_find_uuid(struct bus *b, const char *uuid)
{
	int n = atomic_load(&b->count);
	for (int i = 0; i < n; i++) {
		struct bus_slot *sl = &b->slot[i];
		pthread_mutex_lock(&sl->lock);
		int same = uuid[0] && strcmp(sl->s.id.uuid, uuid) == 0;
		pthread_mutex_unlock(&sl->lock);
		if (same)
			return i;
	}
	return -1;
}

int bus_attach_gpu(struct bus *b, const struct gpu_identity *id, int *slot)
{
	int rc = GPULSE_OK;
	pthread_mutex_lock(&b->attach_lock);
	int i = bus_find_uuid(b, id->uuid);
	if (i < 0) {
		i = atomic_load(&b->count);
		if (i >= GPU_MAX) {
			rc = GPULSE_ELIMIT;
			goto out;
		}
		atomic_store(&b->count, i + 1);
	}
	struct bus_slot *sl = &b->slot[i];
	pthread_mutex_lock(&sl->lock);
	sl->s.id = *id;
	sl->s.health = GPU_HEALTH_UP;
	sl->s.health_reason[0] = '\0';
	sl->s.health_since_wall_ns = clock_wall_ns();
	pthread_mutex_unlock(&sl->lock);
	*slot = i;
	bump(b);
out:
	pthread_mutex_unlock(&b->attach_lock);
	return rc;
}

void bus_set_peers(struct bus *b, int slot, const struct gpu_peer *peers, int npeers)
{
	if (slot < 0 || slot >= atomic_load(&b->count) || npeers < 0 || npeers > GPU_MAX - 1)
		return;
	struct bus_slot *sl = &b->slot[slot];
	pthread_mutex_lock(&sl->lock);
	memcpy(sl->s.id.peers, peers, (size_t)npeers * sizeof peers[0]);
	sl->s.id.npeers = npeers;
	pthread_mutex_unlock(&sl->lock);
	bump(b);
}

int bus_gpu_count(struct bus *b)
{
	return atomic_load(&b->count);
}

/* Add to the integral the interval since the previous power reading:
 * the trapezoid of the two readings. An interval longer than
 * BUS_ENERGY_MAX_GAP_NS (a GPU that did not answer, a stopped replay) is
 * not guessed across: the counter holds. A reading older than the last
 * restarts nothing. Called with the slot's lock. */
static void integrate_power(struct bus_slot *sl, double w, int64_t t_ns)
{
	if (sl->have_power && t_ns > sl->last_power_ns) {
		int64_t dt = t_ns - sl->last_power_ns;
		if (dt <= BUS_ENERGY_MAX_GAP_NS && isfinite(w) && isfinite(sl->last_power_w))
			sl->energy_j += 0.5 * (w + sl->last_power_w) * (double)dt / 1e9;
	}
	if (!sl->have_power || t_ns > sl->last_power_ns) {
		sl->have_power = true;
		sl->last_power_w = w;
		sl->last_power_ns = t_ns;
	}
}

void bus_publish(struct bus *b, const struct gpu_update *u0)
{
	if (u0->gpu < 0 || u0->gpu >= atomic_load(&b->count))
		return;
	struct bus_slot *sl = &b->slot[u0->gpu];
	const struct gpu_update *u = u0;
	struct gpu_update *derived = NULL;
	uint64_t pbit = FIELD_BIT(F_POWER), ebit = FIELD_BIT(F_POWER_ENERGY);
	if (u0->mask & u0->valid & pbit) {
		/* The update gains the derived counter: subscribers (the store)
		 * see it as they see the fields the source read. One copy per
		 * fast sample, off the hot path of nothing else. */
		derived = malloc(sizeof *derived);
		if (derived) {
			memcpy(derived, u0, sizeof *derived);
			u = derived;
		}
	}
	pthread_mutex_lock(&sl->lock);
	if (derived) {
		integrate_power(sl, u0->v[F_POWER], u0->wall_ns);
		derived->v[F_POWER_ENERGY] = sl->energy_j;
		derived->mask |= ebit;
		derived->valid |= ebit;
	}
	struct gpu_snapshot *s = &sl->s;
	uint64_t read = u->mask & u->valid;
	for (int f = 0; f < FIELD_COUNT; f++)
		if (read & FIELD_BIT(f))
			s->v[f] = u->v[f];
	s->valid = (s->valid & ~u->mask) | read;
	s->tier_wall_ns[u->tier] = u->wall_ns;
	sl->tier_mono_ns[u->tier] = clock_mono_ns();
	s->samples[u->tier]++;
	if (u->has_procs) {
		int n = u->nprocs < GPU_PROC_MAX ? u->nprocs : GPU_PROC_MAX;
		memcpy(s->procs, u->procs, (size_t)n * sizeof u->procs[0]);
		s->nprocs = n;
		s->procs_dropped = u->procs_dropped;
		s->procs_valid = true;
	}
	if (u->has_mig) {
		int n = u->nmig < GPU_MIG_MAX ? u->nmig : GPU_MIG_MAX;
		memcpy(s->mig, u->mig, (size_t)n * sizeof u->mig[0]);
		s->nmig = n;
		s->mig_valid = true;
	}
	pthread_mutex_unlock(&sl->lock);
	bump(b);
	for (int i = 0; i < b->nsubs; i++)
		b->sub_fn[i](b->sub_ctx[i], u);
	free(derived);
}

void bus_set_health(struct bus *b, int slot, enum gpu_health h, const char *reason)
{
	if (slot < 0 || slot >= atomic_load(&b->count))
		return;
	struct bus_slot *sl = &b->slot[slot];
	pthread_mutex_lock(&sl->lock);
	if (sl->s.health != h) {
		if (h == GPU_HEALTH_LOST)
			sl->s.lost_total++;
		sl->s.health = h;
		sl->s.health_since_wall_ns = clock_wall_ns();
	}
	snprintf(sl->s.health_reason, sizeof sl->s.health_reason, "%s", reason ? reason : "");
	pthread_mutex_unlock(&sl->lock);
	bump(b);
}

void bus_note_xid(struct bus *b, int slot, uint32_t xid, int64_t wall_ns)
{
	if (slot < 0 || slot >= atomic_load(&b->count))
		return;
	struct bus_slot *sl = &b->slot[slot];
	pthread_mutex_lock(&sl->lock);
	struct gpu_snapshot *s = &sl->s;
	int i;
	for (i = 0; i < s->nxid; i++)
		if (s->xid[i].code == xid)
			break;
	if (i < s->nxid) {
		s->xid[i].count++;
	} else if (s->nxid < GPU_XID_MAX) {
		s->xid[s->nxid].code = xid;
		s->xid[s->nxid].count = 1;
		s->nxid++;
	} else {
		s->xid_other++;
	}
	s->last_xid = xid;
	s->last_xid_wall_ns = wall_ns;
	pthread_mutex_unlock(&sl->lock);
	bump(b);
}

void bus_note_ecc_event(struct bus *b, int slot, bool double_bit)
{
	if (slot < 0 || slot >= atomic_load(&b->count))
		return;
	struct bus_slot *sl = &b->slot[slot];
	pthread_mutex_lock(&sl->lock);
	sl->s.ecc_events[double_bit ? 1 : 0]++;
	pthread_mutex_unlock(&sl->lock);
	bump(b);
}

void bus_set_diagnosis(struct bus *b, int slot, int diag_class, unsigned findings,
		       double window_end_s)
{
	if (slot < 0 || slot >= atomic_load(&b->count))
		return;
	struct bus_slot *sl = &b->slot[slot];
	pthread_mutex_lock(&sl->lock);
	sl->s.diag_class = diag_class;
	sl->s.diag_findings = findings;
	sl->s.diag_window_end_s = window_end_s;
	pthread_mutex_unlock(&sl->lock);
	bump(b);
}

void bus_set_health_score(struct bus *b, int slot, const struct gpu_health_score *h)
{
	if (slot < 0 || slot >= atomic_load(&b->count))
		return;
	struct bus_slot *sl = &b->slot[slot];
	pthread_mutex_lock(&sl->lock);
	sl->s.health_score = *h;
	pthread_mutex_unlock(&sl->lock);
	bump(b);
}

int bus_read(struct bus *b, int slot, struct gpu_snapshot *out)
{
	if (slot < 0 || slot >= atomic_load(&b->count))
		return GPULSE_ENOENT;
	struct bus_slot *sl = &b->slot[slot];
	int64_t now = clock_mono_ns();
	pthread_mutex_lock(&sl->lock);
	*out = sl->s;
	int64_t seen[TIER_COUNT];
	memcpy(seen, sl->tier_mono_ns, sizeof seen);
	pthread_mutex_unlock(&sl->lock);
	out->stale = 0;
	for (int t = 0; t < TIER_COUNT; t++) {
		int64_t limit = atomic_load(&b->stale_after_ns[t]);
		if (limit > 0 && seen[t] > 0 && now - seen[t] > limit)
			out->stale |= fields_of_tier((enum tier)t) & out->valid;
	}
	/* A lost GPU reports nothing but its identity and health. */
	if (out->health == GPU_HEALTH_LOST)
		out->stale |= out->valid;
	out->valid &= ~out->stale;
	if (out->health == GPU_HEALTH_LOST)
		out->procs_valid = out->mig_valid = false;
	/* A verdict holds only while the GPU answers. */
	if (out->health != GPU_HEALTH_UP)
		out->diag_class = -1;
	return GPULSE_OK;
}

uint64_t bus_generation(struct bus *b)
{
	return atomic_load_explicit(&b->generation, memory_order_acquire);
}

int bus_subscribe(struct bus *b, bus_subscriber_fn *fn, void *ctx)
{
	if (b->nsubs >= BUS_MAX_SUBSCRIBERS)
		return GPULSE_ELIMIT;
	b->sub_fn[b->nsubs] = fn;
	b->sub_ctx[b->nsubs] = ctx;
	b->nsubs++;
	return GPULSE_OK;
}
