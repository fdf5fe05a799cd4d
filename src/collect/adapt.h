/* Adaptive sampling: which dear reads a tier sweep makes, and when.
 *
 * Each tier's period (sampling.fast, .normal, .slow) is the ceiling: the
 * lane still wakes at it, and the cheap reads (utilization, power, clocks,
 * temperatures, throttle reasons, the process list: a few µs each right
 * after another call) ride along at it. A dear read is an adaptive group
 * (memory, GPM samples): it is made at its floor while the GPU is steady
 * and at the ceiling while it moves. A GPU moves while any watched field
 * changed past its threshold, a process started or ended, a throttle
 * reason appeared or an XID came, within the last `quiet_ns`; a raise
 * (a firing alert, an anomaly) holds every group at its ceiling until
 * the time it names. The rule per field, with what each read costs, is in
 * docs/internals/collection.md.
 *
 * Pure: it reads no clock and calls no NVML; the collector passes the
 * monotonic time, a test passes its own. One state per GPU, used by the
 * lane that reads that GPU; adapt_raise may be called from any thread. */
#ifndef GPULSE_ADAPT_H
#define GPULSE_ADAPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "collect/sample.h"

/* X(ID, key, tier, fields): the adaptive groups. */
#define ADAPT_GROUPS(X)                                                                          \
	X(MEMORY, "memory", TIER_FAST,                                                           \
	  FIELD_BIT(F_MEM_USED) | FIELD_BIT(F_MEM_FREE) | FIELD_BIT(F_MEM_TOTAL) |               \
		  FIELD_BIT(F_MEM_RESERVED))                                                     \
	X(GPM, "gpm", TIER_NORMAL,                                                               \
	  FIELD_BIT(F_GPM_SM) | FIELD_BIT(F_GPM_OCCUPANCY) | FIELD_BIT(F_GPM_INTEGER) |          \
		  FIELD_BIT(F_GPM_TENSOR) | FIELD_BIT(F_GPM_DFMA) | FIELD_BIT(F_GPM_HMMA) |       \
		  FIELD_BIT(F_GPM_IMMA) | FIELD_BIT(F_GPM_DRAM) | FIELD_BIT(F_GPM_FP64) |         \
		  FIELD_BIT(F_GPM_FP32) | FIELD_BIT(F_GPM_FP16) | FIELD_BIT(F_GPM_PCIE_TX) |      \
		  FIELD_BIT(F_GPM_PCIE_RX) | FIELD_BIT(F_GPM_NVLINK_TX) | FIELD_BIT(F_GPM_NVLINK_RX))

enum adapt_group {
#define ADAPT_ENUM(id, key, tier, fields) AG_##id,
	ADAPT_GROUPS(ADAPT_ENUM)
#undef ADAPT_ENUM
	AG_COUNT
};

/* What makes a GPU move. */
enum adapt_cause {
	AC_CHANGE,      /* a watched field changed past its threshold */
	AC_PROCESS,     /* a process started or ended */
	AC_REASON,      /* a throttle reason appeared */
	AC_XID,         /* an XID event */
	AC_RAISE,       /* a raise from outside (alert, anomaly, request) */
	AC_COUNT
};

struct adapt_config {
	bool enabled;                     /* false: every group at its ceiling */
	int64_t floor_ns[TIER_COUNT];     /* a group's period while steady; a floor
					   * at or below the ceiling disables it */
	int64_t quiet_ns;                 /* steady again this long after the last move */
};

/* enabled; floors 1 s (fast), 2 s (normal), 30 s (slow); quiet 10 s. */
void adapt_config_defaults(struct adapt_config *cfg);

struct adapt_state {
	int64_t last_read_ns[AG_COUNT];   /* 0: never read */
	int64_t moving_until_ns;          /* monotonic; set by the lane */
	_Atomic int64_t raised_until_ns;  /* monotonic; set by any thread */
	_Atomic uint32_t events;          /* XIDs seen by the event thread, not yet taken */
	bool have_ref;
	double ref[FIELD_COUNT];          /* the value each watched field moved from */
	uint64_t ref_valid;
	uint64_t reasons;                 /* the last throttle reasons read */
	bool reasons_valid;
	uint32_t pids[GPU_PROC_MAX];      /* the last process list, sorted */
	int npids;
	bool procs_valid;
	/* Counters for /metrics and tests (read racily: monotonic). */
	_Atomic uint64_t reads[AG_COUNT], skips[AG_COUNT], moves[AC_COUNT];
};

void adapt_init(struct adapt_state *s);

/* The fields a sweep of `tier` at `now` leaves unread: the groups of the
 * tier that are neither due at their floor nor moving. The groups it
 * returns as read are counted and their time taken. `ceiling_ns` is the
 * tier's period (a read is due once its floor less half a ceiling has
 * passed, so a grid that lands a hair early does not skip a floor). */
uint64_t adapt_plan(struct adapt_state *s, const struct adapt_config *cfg, enum tier tier,
		    int64_t ceiling_ns, int64_t now);

/* The read of group `g` this sweep gave no value (the first GPM sample
 * only primes the next): it is due again at the next sweep, not at the
 * floor, so values come as soon as they would without adaptation. */
void adapt_unread(struct adapt_state *s, enum adapt_group g);

/* Compare a sweep's readings with the references and move the GPU when a
 * watched field changed past its threshold, the process list changed or
 * a throttle reason appeared (and take an XID the event thread noted).
 * `u` is the update as published: u->valid says which values it holds. */
void adapt_observe(struct adapt_state *s, const struct adapt_config *cfg,
		   const struct gpu_update *u, int64_t now);

/* Hold every group of the GPU at its ceiling until `until_ns` (monotonic;
 * an earlier time than one already set changes nothing). Any thread. */
void adapt_raise(struct adapt_state *s, int64_t until_ns);
/* Note an XID: the lane moves the GPU at its next sweep. Any thread. */
void adapt_note_xid(struct adapt_state *s);

/* True while the GPU moves or is raised at `now`. */
bool adapt_is_moving(const struct adapt_state *s, int64_t now);

const char *adapt_group_key(enum adapt_group g);
const char *adapt_cause_key(enum adapt_cause c);
enum tier adapt_group_tier(enum adapt_group g);
uint64_t adapt_group_fields(enum adapt_group g);

#endif
