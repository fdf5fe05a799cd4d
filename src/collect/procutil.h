/* Per-process SM and memory shares over one window, from the sample buffer
 * of nvmlDeviceGetProcessUtilization.
 *
 * What NVML hands back (its documentation, and what DCGM, nvtop and
 * others found): every sample since `lastSeenTimeStamp` (wall clock, µs)
 * from the driver's buffer; each sample is one process's utilization
 * over one of the driver's sample periods (1/6 s to 1 s), stamped when it
 * was taken; a process that did nothing in a period has no sample for it;
 * `lastSeenTimeStamp` 0 means the whole buffer, an average reaching back
 * to before the process (or gpulsed) started. Some drivers answer one
 * sample per process instead. Taking the newest sample of a pid reads one
 * short period as if it were the whole window; passing 0 reads history.
 *
 * So a window is (since, end] on the wall clock, `since` the end of the
 * previous window (never 0), and a pid's share is the time-weighted mean
 * of its samples over the window: each sample stands for one driver
 * period, and periods with no sample count as idle. The driver's period
 * is the median spacing of the distinct sample times in the buffer (kept
 * between windows). A driver that gives one sample per pid (no pid ever
 * had two in a window) is taken at its word: that sample is its figure.
 * Values over 100 (a known driver fault) are dropped. */
#ifndef GPULSE_PROCUTIL_H
#define GPULSE_PROCUTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "nvml/nvml_abi.h"

/* 1/6 s: the shortest driver period nvidia-smi documents, assumed until
 * a buffer shows the real one. */
#define PROCUTIL_DEFAULT_PERIOD_US 166667ULL

/* What one GPU's reads learn about its driver; zero it to start. */
struct procutil_state {
	unsigned long long period_us;  /* driver sample period; 0: not known yet */
	bool buffered;                 /* some pid had 2+ samples in one window */
};

/* Shares over (since_us, end_us] of each pids[i], 0-1, into sm[i] and
 * mem[i]: 0 for a pid without samples (idle). `s` holds the ns samples
 * NVML returned; samples of other pids count only as driver sample times.
 * GPULSE_EINVAL when end_us <= since_us (the wall clock stepped back):
 * nothing is written. */
int procutil_shares(struct procutil_state *st, const struct nvml_process_utilization_sample *s,
		    unsigned ns, const uint32_t *pids, unsigned npids,
		    unsigned long long since_us, unsigned long long end_us, double *sm, double *mem);

#endif
