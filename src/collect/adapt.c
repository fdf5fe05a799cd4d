/* Adaptive sampling; see adapt.h for the model and
 * docs/internals/collection.md for the rule per field and its costs. */
#include "collect/adapt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

static const struct {
	const char *key;
	enum tier tier;
	uint64_t fields;
} group_table[AG_COUNT] = {
#define ADAPT_ROW(id, k, t, f) [AG_##id] = {.key = k, .tier = t, .fields = (f)},
	ADAPT_GROUPS(ADAPT_ROW)
#undef ADAPT_ROW
};

/* How a watched field's change is measured against its threshold. */
enum watch_kind {
	W_ABS,       /* |v - ref| >= threshold, in base units */
	W_REL,       /* |v - ref| >= threshold * max(|ref|, floor) */
	W_OF_TOTAL,  /* |v - ref| >= threshold * the update's memory total */
};

/* The watched fields. The thresholds were chosen on the two labelled H200
 * recordings (h200-phases-10hz.csv, h200-mixed-10hz.csv in
 * data/recordings) so that, with memory at a 1 s floor and a 10 s quiet
 * period, no change of memory use over 5% of the
 * card goes unseen for more than one 100 ms ceiling period
 * (tests/unit/test_adapt.c replays both): memory's jumps there come with
 * no change of utilization and power moves of 0.2-50 W, so power (5% of
 * its reading) and utilization (10 points) keep a busy GPU moving, and
 * memory's own 1% of the card catches a jump at the next floor read. */
static const struct {
	enum field_id f;
	enum watch_kind kind;
	double threshold;
	double floor;     /* W_REL: the smallest reference the ratio is taken of */
} watch_table[] = {
	{F_GPU_UTIL, W_ABS, 0.10, 0},
	{F_POWER, W_REL, 0.05, 20.0},
	{F_SM_CLOCK, W_REL, 0.10, 1e8},
	{F_MEM_USED, W_OF_TOTAL, 0.01, 0},
	{F_PROC_COUNT, W_ABS, 0.5, 0},
	{F_GPM_SM, W_ABS, 0.05, 0},
	{F_GPM_TENSOR, W_ABS, 0.05, 0},
	{F_GPM_DRAM, W_ABS, 0.05, 0},
};
#define NWATCH ((int)(sizeof watch_table / sizeof watch_table[0]))

/* The idle bit appears when work stops, which utilization already tells;
 * every other reason is a limiter coming on. */
#define REASON_IDLE 0x1ULL

void adapt_config_defaults(struct adapt_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->enabled = true;
	cfg->floor_ns[TIER_FAST] = 1 * NS_PER_SEC;
	cfg->floor_ns[TIER_NORMAL] = 2 * NS_PER_SEC;
	cfg->floor_ns[TIER_SLOW] = 30 * NS_PER_SEC;
	cfg->quiet_ns = 10 * NS_PER_SEC;
}

void adapt_init(struct adapt_state *s)
{
	memset(s, 0, sizeof *s);
	atomic_init(&s->raised_until_ns, 0);
	atomic_init(&s->events, 0);
	for (int g = 0; g < AG_COUNT; g++) {
		atomic_init(&s->reads[g], 0);
		atomic_init(&s->skips[g], 0);
	}
	for (int c = 0; c < AC_COUNT; c++)
		atomic_init(&s->moves[c], 0);
}

bool adapt_is_moving(const struct adapt_state *s, int64_t now)
{
	return now < s->moving_until_ns || now < atomic_load(&s->raised_until_ns);
}

uint64_t adapt_plan(struct adapt_state *s, const struct adapt_config *cfg, enum tier tier,
		    int64_t ceiling_ns, int64_t now)
{
	uint64_t skip = 0;
	bool moving = !cfg->enabled || adapt_is_moving(s, now);
	for (int g = 0; g < AG_COUNT; g++) {
		if (group_table[g].tier != tier)
			continue;
		int64_t floor = cfg->floor_ns[tier];
		bool due = moving || floor <= ceiling_ns || s->last_read_ns[g] == 0 ||
			   now - s->last_read_ns[g] >= floor - ceiling_ns / 2;
		if (due) {
			s->last_read_ns[g] = now ? now : 1;
			atomic_fetch_add_explicit(&s->reads[g], 1, memory_order_relaxed);
		} else {
			skip |= group_table[g].fields;
			atomic_fetch_add_explicit(&s->skips[g], 1, memory_order_relaxed);
		}
	}
	return skip;
}

void adapt_unread(struct adapt_state *s, enum adapt_group g)
{
	if ((unsigned)g < AG_COUNT)
		s->last_read_ns[g] = 0;
}

static void move(struct adapt_state *s, const struct adapt_config *cfg, enum adapt_cause c,
		 int64_t now)
{
	if (now + cfg->quiet_ns > s->moving_until_ns)
		s->moving_until_ns = now + cfg->quiet_ns;
	atomic_fetch_add_explicit(&s->moves[c], 1, memory_order_relaxed);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

void adapt_observe(struct adapt_state *s, const struct adapt_config *cfg,
		   const struct gpu_update *u, int64_t now)
{
	bool moved = false;
	for (int i = 0; i < NWATCH; i++) {
		enum field_id f = watch_table[i].f;
		if (!(u->valid & FIELD_BIT(f)))
			continue;
		double v = u->v[f];
		if (!(s->ref_valid & FIELD_BIT(f))) {
			s->ref[f] = v;
			s->ref_valid |= FIELD_BIT(f);
			continue;
		}
		double d = fabs(v - s->ref[f]), limit;
		switch (watch_table[i].kind) {
		case W_REL:
			limit = watch_table[i].threshold * fmax(fabs(s->ref[f]), watch_table[i].floor);
			break;
		case W_OF_TOTAL:
			if (!(u->valid & FIELD_BIT(F_MEM_TOTAL)) || u->v[F_MEM_TOTAL] <= 0)
				continue;
			limit = watch_table[i].threshold * u->v[F_MEM_TOTAL];
			break;
		default:
			limit = watch_table[i].threshold;
			break;
		}
		/* The reference moves only when crossed, so a slow drift is
		 * seen once it adds up, not lost step by step. */
		if (d >= limit) {
			s->ref[f] = v;
			moved = true;
		}
	}
	if (moved)
		move(s, cfg, AC_CHANGE, now);

	if (u->valid & FIELD_BIT(F_CLOCK_REASONS)) {
		uint64_t bits = (uint64_t)u->v[F_CLOCK_REASONS];
		if (s->reasons_valid && (bits & ~s->reasons & ~REASON_IDLE))
			move(s, cfg, AC_REASON, now);
		s->reasons = bits;
		s->reasons_valid = true;
	}

	if (u->has_procs) {
		uint32_t pids[GPU_PROC_MAX];
		int n = u->nprocs < GPU_PROC_MAX ? u->nprocs : GPU_PROC_MAX;
		for (int i = 0; i < n; i++)
			pids[i] = u->procs[i].pid;
		qsort(pids, (size_t)n, sizeof pids[0], cmp_u32);
		if (s->procs_valid &&
		    (n != s->npids || memcmp(pids, s->pids, (size_t)n * sizeof pids[0]) != 0))
			move(s, cfg, AC_PROCESS, now);
		memcpy(s->pids, pids, (size_t)n * sizeof pids[0]);
		s->npids = n;
		s->procs_valid = true;
	}

	if (atomic_exchange(&s->events, 0) != 0)
		move(s, cfg, AC_XID, now);
}

void adapt_raise(struct adapt_state *s, int64_t until_ns)
{
	int64_t cur = atomic_load(&s->raised_until_ns);
	while (until_ns > cur && !atomic_compare_exchange_weak(&s->raised_until_ns, &cur, until_ns))
		;
	atomic_fetch_add_explicit(&s->moves[AC_RAISE], 1, memory_order_relaxed);
}

void adapt_note_xid(struct adapt_state *s)
{
	atomic_fetch_add(&s->events, 1);
}

const char *adapt_group_key(enum adapt_group g)
{
	return (unsigned)g < AG_COUNT ? group_table[g].key : "unknown";
}

const char *adapt_cause_key(enum adapt_cause c)
{
	static const char *const keys[AC_COUNT] = {"change", "process", "throttle_reason", "xid",
						   "raise"};
	return (unsigned)c < AC_COUNT ? keys[c] : "unknown";
}

enum tier adapt_group_tier(enum adapt_group g)
{
	return group_table[g].tier;
}

uint64_t adapt_group_fields(enum adapt_group g)
{
	return group_table[g].fields;
}
