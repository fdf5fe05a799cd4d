/* The live health score over the bus; see health_live.h. */
#include "diagnose/health_live.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/status.h"

/* The fields each health input is read from (fields.h). */
#define HEALTH_FIELD_MAP(X)                     \
	X(ECC_SBE, F_ECC_SBE_VOL)                 \
	X(ECC_DBE, F_ECC_DBE_VOL)                 \
	X(REMAP_COR, F_REMAP_COR)                 \
	X(REMAP_UNC, F_REMAP_UNC)                 \
	X(REMAP_PENDING, F_REMAP_PENDING)         \
	X(REMAP_FAILED, F_REMAP_FAILED)           \
	X(RETIRED_SBE, F_RETIRED_SBE)             \
	X(RETIRED_DBE, F_RETIRED_DBE)             \
	X(RETIRED_PENDING, F_RETIRED_PENDING)     \
	X(PCIE_REPLAY, F_PCIE_REPLAY)             \
	X(PCIE_WIDTH, F_PCIE_WIDTH)               \
	X(VIOL_THERMAL, F_VIOL_THERMAL)           \
	X(VIOL_POWER, F_VIOL_POWER)

/* The clock event reasons that are hardware braking the clocks. */
#define HW_SLOWDOWN_BITS (0x8ULL | 0x40ULL | 0x80ULL)

struct hl_gpu {
	pthread_mutex_t lock;
	struct health_point *pts;          /* ring of HEALTH_LIVE_POINTS_MAX */
	size_t head, count;
	struct health_xid xids[HEALTH_LIVE_XIDS_MAX]; /* ring */
	size_t xhead, xcount;
	struct gpu_xid_count xid_seen[GPU_XID_MAX];   /* counts at the last look */
	int nxid_seen;
	uint64_t xid_other_seen;
	double last_eval_s;
	struct health_finding bench, corruption;
	/* Scratch for health_eval: the ring unrolled. */
	struct health_point *flat;
};

struct health_live {
	struct bus *bus;
	double window_s;
	struct hl_gpu gpu[GPU_MAX];
};

static void point_of(const struct gpu_snapshot *s, double t_s, struct health_point *p)
{
	memset(p, 0, sizeof *p);
	p->t_s = t_s;
#define HEALTH_TAKE(in, f)                                  \
	if (s->valid & FIELD_BIT(f)) {                      \
		p->v[HI_##in] = s->v[f];                    \
		p->valid |= 1u << HI_##in;                  \
	}
	HEALTH_FIELD_MAP(HEALTH_TAKE)
#undef HEALTH_TAKE
	if (s->id.pcie_max_width > 0) {
		p->v[HI_PCIE_WIDTH_MAX] = s->id.pcie_max_width;
		p->valid |= 1u << HI_PCIE_WIDTH_MAX;
	}
	if (s->valid & FIELD_BIT(F_CLOCK_REASONS)) {
		p->v[HI_HW_SLOWDOWN] = ((uint64_t)s->v[F_CLOCK_REASONS] & HW_SLOWDOWN_BITS) != 0;
		p->valid |= 1u << HI_HW_SLOWDOWN;
	}
}

static void add_xid(struct hl_gpu *g, double t_s, uint32_t code, uint64_t count)
{
	size_t i = (g->xhead + g->xcount) % HEALTH_LIVE_XIDS_MAX;
	if (g->xcount == HEALTH_LIVE_XIDS_MAX)
		g->xhead = (g->xhead + 1) % HEALTH_LIVE_XIDS_MAX;
	else
		g->xcount++;
	g->xids[i] = (struct health_xid){t_s, code, count > UINT32_MAX ? UINT32_MAX : (uint32_t)count};
}

/* The XIDs counted since the last look, as events at the last XID's time
 * (the bus keeps counts, not times: every new one since shares it). */
static void take_xids(struct hl_gpu *g, const struct gpu_snapshot *s)
{
	double t = s->last_xid_wall_ns > 0 ? (double)s->last_xid_wall_ns / 1e9 : 0;
	for (int k = 0; k < s->nxid && k < GPU_XID_MAX; k++) {
		uint64_t before = 0;
		for (int j = 0; j < g->nxid_seen; j++)
			if (g->xid_seen[j].code == s->xid[k].code)
				before = g->xid_seen[j].count;
		if (s->xid[k].count > before)
			add_xid(g, t, s->xid[k].code, s->xid[k].count - before);
	}
	/* Codes past the bus's table are "other": scored as a code outside
	 * health.h's table (code 0 is no XID NVIDIA defines). */
	if (s->xid_other > g->xid_other_seen)
		add_xid(g, t, 0, s->xid_other - g->xid_other_seen);
	g->nxid_seen = s->nxid < GPU_XID_MAX ? s->nxid : GPU_XID_MAX;
	memcpy(g->xid_seen, s->xid, sizeof g->xid_seen[0] * (size_t)g->nxid_seen);
	g->xid_other_seen = s->xid_other;
}

static void on_update(void *ctx, const struct gpu_update *u)
{
	struct health_live *hl = ctx;
	if (u->gpu < 0 || u->gpu >= GPU_MAX)
		return;
	struct hl_gpu *g = &hl->gpu[u->gpu];
	double now_s = (double)u->wall_ns / 1e9;
	bool slow = u->tier == TIER_SLOW;
	pthread_mutex_lock(&g->lock);
	if (!slow && now_s - g->last_eval_s < 1.0 && now_s >= g->last_eval_s) {
		pthread_mutex_unlock(&g->lock);
		return;
	}
	if (!g->pts) {
		g->pts = calloc(HEALTH_LIVE_POINTS_MAX, sizeof *g->pts);
		g->flat = calloc(HEALTH_LIVE_POINTS_MAX, sizeof *g->flat);
		if (!g->pts || !g->flat) {
			free(g->pts);
			free(g->flat);
			g->pts = g->flat = NULL;
			pthread_mutex_unlock(&g->lock);
			return;
		}
	}
	/* A snapshot is some 50 KB: it is copied only here, once a second
	 * at most plus once per slow reading. */
	static _Thread_local struct gpu_snapshot s;
	if (bus_read(hl->bus, u->gpu, &s) != GPULSE_OK) {
		pthread_mutex_unlock(&g->lock);
		return;
	}
	g->last_eval_s = now_s;
	take_xids(g, &s);
	if (slow) {
		size_t i = (g->head + g->count) % HEALTH_LIVE_POINTS_MAX;
		if (g->count == HEALTH_LIVE_POINTS_MAX)
			g->head = (g->head + 1) % HEALTH_LIVE_POINTS_MAX;
		else
			g->count++;
		point_of(&s, now_s, &g->pts[i]);
	}
	for (size_t k = 0; k < g->count; k++)
		g->flat[k] = g->pts[(g->head + k) % HEALTH_LIVE_POINTS_MAX];
	struct health_xid xs[HEALTH_LIVE_XIDS_MAX];
	for (size_t k = 0; k < g->xcount; k++)
		xs[k] = g->xids[(g->xhead + k) % HEALTH_LIVE_XIDS_MAX];
	struct health_input in = {
		.points = g->flat, .npoints = g->count, .xids = xs, .nxids = g->xcount,
		.now_s = now_s, .window_s = hl->window_s, .bench = g->bench,
		.corruption = g->corruption,
	};
	struct gpu_health_score v;
	health_eval(&in, &v);
	pthread_mutex_unlock(&g->lock);
	bus_set_health_score(hl->bus, u->gpu, &v);
}

int health_live_create(struct health_live **out, struct bus *bus, double window_s)
{
	*out = NULL;
	if (!bus || window_s < 0)
		return GPULSE_EINVAL;
	struct health_live *hl = calloc(1, sizeof *hl);
	if (!hl)
		return GPULSE_ENOMEM;
	hl->bus = bus;
	hl->window_s = window_s > 0 ? window_s : HEALTH_LIVE_DEFAULT_WINDOW_S;
	for (int i = 0; i < GPU_MAX; i++)
		pthread_mutex_init(&hl->gpu[i].lock, NULL);
	int rc = bus_subscribe(bus, on_update, hl);
	if (rc) {
		health_live_destroy(hl);
		return rc;
	}
	*out = hl;
	return GPULSE_OK;
}

void health_live_destroy(struct health_live *hl)
{
	if (!hl)
		return;
	for (int i = 0; i < GPU_MAX; i++) {
		free(hl->gpu[i].pts);
		free(hl->gpu[i].flat);
		pthread_mutex_destroy(&hl->gpu[i].lock);
	}
	free(hl);
}

int health_live_note(struct health_live *hl, const char *uuid, enum health_measure what, bool set,
		     const char *text)
{
	int slot = bus_find_uuid(hl->bus, uuid);
	if (slot < 0 || slot >= GPU_MAX)
		return GPULSE_ENOENT;
	struct hl_gpu *g = &hl->gpu[slot];
	pthread_mutex_lock(&g->lock);
	struct health_finding *f = what == HEALTH_MEASURE_BENCH ? &g->bench : &g->corruption;
	f->set = set;
	str_copy(f->text, sizeof f->text, set && text ? text : "");
	g->last_eval_s = 0; /* scored at the next update of any tier */
	pthread_mutex_unlock(&g->lock);
	return GPULSE_OK;
}
