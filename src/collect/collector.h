/* The NVML collector: discovers every GPU, reads each in the tiers of
 * DESIGN.md (fast, normal, slow) on collector lanes with deadlines, waits
 * for XID and ECC events on its own thread, and publishes to the bus.
 *
 * Lanes: one thread starts serving all GPUs, so one wake-up serves them
 * all. A call that runs past half a fast period (a timer armed over each
 * sweep wakes the watchdog) leaves its thread alone with that GPU and a
 * new lane takes the other GPUs, so their samples keep their period; if
 * the call returns before the deadline the GPU rejoins them and the
 * lone lane ends. A call stuck past the deadline marks the GPU stale and
 * its lane stays alone with it. A GPU that reports GPU_IS_LOST is marked lost and found
 * again by UUID when it returns. */
#ifndef GPULSE_COLLECTOR_H
#define GPULSE_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attrib/attrib.h"
#include "collect/bus.h"
#include "nvml/nvml_shim.h"
#include "collect/adapt.h"

struct collector_config {
	const char *nvml_path;            /* NULL: libnvidia-ml.so.1 */
	int64_t period_ns[TIER_COUNT];    /* fast, normal, slow */
	int64_t call_deadline_ns;         /* a call longer than this marks the GPU stale */
	int64_t rediscover_ns;            /* how often to look for lost or new GPUs */
	bool per_process_util;            /* nvmlDeviceGetProcessUtilization (~2 ms a call) */
	bool gpm;                         /* GPM metrics where supported */
	bool events;                      /* XID and ECC event thread */
	struct attrib *attrib;            /* who owns each process; NULL: not attributed.
					   * Borrowed: outlives the collector. */
	struct adapt_config adapt;        /* floors and quiet period of the dear reads;
					   * period_ns above are the ceilings */
};

/* Defaults: 100 ms, 1 s, 30 s; deadline 2 s; rediscover 10 s; all on;
 * adapt_config_defaults. */
void collector_config_defaults(struct collector_config *cfg);

struct collector;

struct collector_stats {
	uint64_t lanes_started;     /* lanes ever started (1 + one per stall) */
	uint64_t stalls;            /* calls seen past the deadline */
	uint64_t handoffs;          /* calls past half a fast period that moved the
				     * other GPUs to a new lane */
	uint64_t events;            /* XID and ECC events received */
	uint64_t event_errors;      /* event waits that failed */
	uint64_t rediscoveries;     /* GPUs found again after being lost */
	uint64_t sweeps[TIER_COUNT];/* tier sweeps completed */
	int lanes_alive;
	/* Adaptive sampling, summed over the GPUs (adapt.h): reads of each
	 * group made and left out, moves by cause, GPUs moving now. */
	uint64_t adaptive_reads[AG_COUNT], adaptive_skips[AG_COUNT];
	uint64_t moves[AC_COUNT];
	int gpus_moving;
};

/* Open NVML, discover GPUs, attach them to `bus` and start sampling.
 * GPULSE_ENOLIB or GPULSE_ENODRIVER when there is no usable NVML: `err`
 * then holds one sentence for the user, and nothing was started. */
int collector_start(struct collector **out, struct bus *bus,
		    const struct collector_config *cfg, char *err, size_t errlen);
/* Stop all threads (a lane stuck in NVML is detached, not joined) and
 * close NVML. Accepts NULL. */
void collector_stop(struct collector *c);
/* The NVML table in use, for call statistics. Never NULL after start. */
struct nvml_lib *collector_nvml(struct collector *c);
void collector_get_stats(struct collector *c, struct collector_stats *out);
/* Change tier periods while running (SIGHUP reload). */
void collector_set_periods(struct collector *c, const int64_t period_ns[TIER_COUNT]);

/* Change the adaptive sampling's floors and quiet period (SIGHUP). */
void collector_set_adapt(struct collector *c, const struct adapt_config *ac);
/* Hold every read of the GPU in bus slot `slot` at its ceiling for
 * `duration_ns` from now (a firing alert, an anomaly, a request); a
 * raise already longer stays. 0 or GPULSE_ENOENT. Any thread. */
int collector_raise(struct collector *c, int slot, int64_t duration_ns);

/* Read the identity of one device; used by discovery and `gpulse record`. */
void collector_read_identity(struct nvml_lib *nv, nvml_device_t dev, int index,
			     struct gpu_identity *id);

/* Whether allocation `al` (a pod-resources device ID, or a Slurm job's
 * cgroup rule /dev/nvidiaN by minor number) names GPU s or one of its MIG
 * instances (nvidia.com/mig-* resources list MIG UUIDs). */
bool gpu_snapshot_holds(const struct gpu_snapshot *s, const struct attrib_allocation *al);

#endif
