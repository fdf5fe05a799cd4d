/* Settings of libgpulse-inject.so from its environment (the only input it
 * has before gpulsed answers): GPULSE_MODE, GPULSE_BUDGET, GPULSE_SOCKET,
 * GPULSE_TOPK, GPULSE_COST_NS, GPULSE_TAIL_NS, GPULSE_SAMPLE_EVERY, GPULSE_SAMPLE_OFFSET,
 * GPULSE_INJECT_DUMP,
 * GPULSE_CUPTI_PATH, GPULSE_INJECT_SKIP.
 * CUPTI-free and tested in CI. A bad value is reported (one line) and the
 * default kept: the library never refuses to let the application run. */
#ifndef GPULSE_INJECT_CONFIG_H
#define GPULSE_INJECT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "inject/inject_client.h"
#include "wire/wire.h"

#define INJECT_PATH_MAX 512
#define INJECT_SAMPLE_EVERY 32 /* GPULSE_SAMPLE_EVERY's default */

struct inject_config {
	uint8_t mode;                 /* enum wire_mode */
	int mode_set, budget_set;     /* given (validly) in the environment: they
				       * take precedence over gpulsed's CONFIG */
	char nvtx_range[WIRE_NAME_MAX + 1]; /* for WIRE_MODE_FOCUSED_NVTX */
	uint32_t budget_ppm;          /* default 5000 (0.5%) */
	unsigned topk;                /* kernels per scope and interval (default 64) */
	double cost_ns;               /* prior cost per traced record (default 2000) */
	uint64_t tail_ns;             /* a window's tail in traced time (default 2e9; governor.h) */
	unsigned sample_every;        /* continuous: one launch in this many is timed at most (32) */
	double offset_floors;         /* GPULSE_SAMPLE_OFFSET: floors off a held sample; < 0 by architecture */
	int detach;                   /* GPULSE_DETACH=1: cuptiFinalize after a capture (off) */
	int cost_ns_set, tail_ns_set; /* given in the environment (continuous mode's
	                               * census has defaults of its own) */
	char socket_paths[CLIENT_PATHS_MAX][INJECT_PATH_MAX]; /* tried in order; "" ends */
	char dump_path[INJECT_PATH_MAX]; /* GPULSE_INJECT_DUMP: JSON totals at exit */
	char cupti_path[INJECT_PATH_MAX];
	unsigned skip;                /* INJECT_SKIP_*: GPULSE_INJECT_SKIP=uvm,nvtx,... */
};

/* Parts that GPULSE_INJECT_SKIP turns off (troubleshooting, overhead
 * comparisons): unified-memory counters, NVTX ranges, the once-a-second
 * check for another profiler, the SYNCHRONIZATION kind, the copy and
 * memset kinds, CUPTI's per-thread activity buffers (one shared buffer
 * instead). */
#define INJECT_SKIP_UVM    1u
#define INJECT_SKIP_NVTX   2u
#define INJECT_SKIP_PROBE  4u
#define INJECT_SKIP_SYNC   8u
#define INJECT_SKIP_COPIES 16u
#define INJECT_SKIP_PERTHREAD 32u
#define INJECT_SKIP_HOLD   64u  /* time idle streams' samples unheld */
#define INJECT_SKIP_SAMPLES 128u /* no event-timed samples: counts only */
#define INJECT_SKIP_INTERPOSE 256u /* leave other objects' cuptiSubscribe calls alone */
#define INJECT_SKIP_CALIBRATE 512u /* no calibration launches: held samples lose the model's 2 floors */

/* Parse "continuous", "profiler-api", "nvtx:NAME", "full", "off". 0 or
 * GPULSE_EINVAL. */
int inject_parse_mode(const char *s, uint8_t *mode, char *nvtx, size_t nvtxlen);
/* Parse a budget: "0.5%", "5000ppm", or a plain fraction "0.005".
 * 0 < budget <= 100%. 0 or GPULSE_EINVAL. */
int inject_parse_budget(const char *s, uint32_t *ppm);
/* Name of a mode for logs and dumps ("continuous", ...). */
const char *inject_mode_name(unsigned mode);

/* Fill *c from getenv-like `get` (getenv in the library, a table in
 * tests). Problems are written, one sentence each, to err[errlen]
 * (joined with "; "), and the default is kept for that setting. uid picks
 * the /tmp fallback socket path. */
void inject_config_load(struct inject_config *c, const char *(*get)(const char *name),
			unsigned uid, char *err, size_t errlen);

#endif
