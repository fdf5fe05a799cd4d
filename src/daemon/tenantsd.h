/* gpulsed's feed of per-process activity (src/attrib/tenants.h): on each
 * normal-tier update of a GPU (GPM and the process list, once a second)
 * it splits the previous interval, one interval late so that the
 * injection libraries' frames for it (sent at the end of each of their
 * intervals) have arrived: kernel time by kind from the profiling
 * timeline, NVML's per-process shares from the snapshot, the GPU's or
 * each MIG instance's GPM figures. */
#ifndef GPULSE_TENANTSD_H
#define GPULSE_TENANTSD_H

#include "common/buf.h"
#include "collect/bus.h"
#include "daemon/profiling.h"
#include "attrib/attrib.h"
#include "attrib/tenants.h"

struct tenantsd;

/* Subscribe to `bus` (before any source publishes). `prof` may be NULL
 * (NVML's samples only). 0, GPULSE_ENOMEM, or GPULSE_ELIMIT (the bus has
 * no room for another subscriber). */
int tenantsd_start(struct tenantsd **out, struct bus *bus, struct profiling *prof);
/* Allocated but idle (tenants_hold): the allocations come from `a`
 * (NULL: a workload holds a GPU only through its processes); a workload
 * is idle once its SM part stays under idle_sm_ratio for idle_window_ns
 * (zero: the defaults). Call before the sources publish. 0 or
 * GPULSE_ENOMEM. */
int tenantsd_set_attrib(struct tenantsd *d, struct attrib *a, double idle_sm_ratio,
			int64_t idle_window_ns);
/* The rows, for the exporter and the API. */
struct tenants *tenantsd_tenants(struct tenantsd *d);
/* Append one diagnosis window's tenants as a JSON object to b: {"gpu",
 * "start_s", "end_s", "processes": [{pid, comm, owner (summary), source,
 * busy, sm_active, tensor_active, dram_bandwidth (means over the window,
 * parts of the GPU's), bound, bound_detail}] busiest first (at most 16),
 * "device_bound": the window's class, "workloads": [{owner (summary),
 * processes, busy, the three parts, bound, bound_detail,
 * bottleneck_share}] (the processes summed per owner, each classed on its
 * sums; bottleneck_share: its part of the activity that bounds the GPU, or
 * null when the window is idle),
 * "bottleneck_owner": {pid, comm, activity, share} or null}: who holds
 * most of the activity that bounds the GPU in that window (tensor for
 * compute_bound, DRAM for memory_bound, GPU time otherwise). `bottleneck`
 * is the window's class (enum diag_class). d may be NULL (no processes). */
int tenantsd_window_json(struct tenantsd *d, struct buf *b, int gpu, double start_s,
			 double end_s, int bottleneck);
/* After the sources stopped publishing. Accepts NULL. */
void tenantsd_stop(struct tenantsd *d);

#endif
