/* The NVML collector; see collector.h for the model (lanes, watchdog,
 * discovery, events). This file owns every NVML read of a running GPU.
 *
 * Cost shapes the code: one lane thread wakes once per fast period and
 * reads every GPU it owns back to back (spaced calls cost far more than
 * back-to-back ones on the H200), reads that a GPU does not support are
 * remembered and skipped, and the expensive calls (per-process
 * utilization, energy) run only as often as their own period allows.
 *
 * Why one file: it owns every NVML read of a running GPU; the lanes, the
 * watchdog, discovery and events all act on the private struct collector
 * under its one lock, and moving a GPU between lanes touches all of them.
 * adapt.c (the adaptive tiers) already stands apart. */
#include "collect/collector.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/mono_cond.h"
#include "collect/procutil.h"
#include "common/status.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "collect/adapt.h"

/* Reads a GPU may not support; a NOT_SUPPORTED answer parks the read
 * until the next re-probe, so unsupported fields cost nothing. */
enum read_kind {
	R_UTIL, R_MEMORY, R_POWER, R_SM_CLOCK, R_MEM_CLOCK,
	R_TEMP, R_MEM_TEMP, R_PSTATE, R_REASONS, R_ENERGY, R_PROCS, R_PROC_UTIL, R_GPM,
	R_GPM_GRAPHICS, R_MIG, R_MIG_GPM,
	R_POWER_LIMIT, R_ECC_MODE, R_ECC, R_REMAP, R_REPLAY, R_LINK_GEN, R_LINK_WIDTH,
	R_ENC, R_DEC, R_VIOLATION, R_NVLINK, R_RETIRED, R_RETIRED_PENDING,
	R_COUNT
};

#define REPROBE_NS (600LL * NS_PER_SEC)      /* retry unsupported reads every 10 min */
#define PROC_UTIL_PERIOD_NS (10LL * NS_PER_SEC) /* 2.4 ms of CPU a call: every 10 s */
/* The per-process sample buffer: 10 s of 1/6 s driver periods for 16
 * busy processes; grown on INSUFFICIENT_SIZE up to the maximum. */
#define PROC_SAMPLES_INITIAL 1024U
#define PROC_SAMPLES_MAX 16384U
#define EVENT_WAIT_MS 1000
/* Each wake-up of an idle thread costs ~40 µs of CPU on the H200 host, as
 * much as a whole fast-tier read, so helper threads wake rarely: the
 * watchdog four times per deadline (a hang is seen within 1.25 deadlines),
 * discovery once per rediscover period, events once a second. */
#define COMM_CACHE 64

struct gpm_req {
	unsigned metric_id;
	enum field_id field;
};

/* GPM metrics the normal tier asks for; each maps to a field in percent
 * or MiB/s. Each costs under 1 µs on the H200 except GRAPHICS_UTIL,
 * 1.5 ms: that one is read by the slow tier (read_gpm_graphics). */
static const struct gpm_req gpm_metrics[] = {
	{NVML_ABI_GPM_METRIC_SM_UTIL, F_GPM_SM},
	{NVML_ABI_GPM_METRIC_SM_OCCUPANCY, F_GPM_OCCUPANCY},
	{NVML_ABI_GPM_METRIC_INTEGER_UTIL, F_GPM_INTEGER},
	{NVML_ABI_GPM_METRIC_ANY_TENSOR_UTIL, F_GPM_TENSOR},
	{NVML_ABI_GPM_METRIC_DFMA_TENSOR_UTIL, F_GPM_DFMA},
	{NVML_ABI_GPM_METRIC_HMMA_TENSOR_UTIL, F_GPM_HMMA},
	{NVML_ABI_GPM_METRIC_IMMA_TENSOR_UTIL, F_GPM_IMMA},
	{NVML_ABI_GPM_METRIC_DRAM_BW_UTIL, F_GPM_DRAM},
	{NVML_ABI_GPM_METRIC_FP64_UTIL, F_GPM_FP64},
	{NVML_ABI_GPM_METRIC_FP32_UTIL, F_GPM_FP32},
	{NVML_ABI_GPM_METRIC_FP16_UTIL, F_GPM_FP16},
	{NVML_ABI_GPM_METRIC_PCIE_TX_PER_SEC, F_GPM_PCIE_TX},
	{NVML_ABI_GPM_METRIC_PCIE_RX_PER_SEC, F_GPM_PCIE_RX},
	{NVML_ABI_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, F_GPM_NVLINK_TX},
	{NVML_ABI_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, F_GPM_NVLINK_RX},
};
#define GPM_NREQ ((int)(sizeof gpm_metrics / sizeof gpm_metrics[0]))

struct comm_entry {
	uint32_t pid;
	char comm[GPU_COMM_LEN];
	bool uid_valid;
	uint32_t uid;
	struct proc_owner owner;
};

struct gpu_ctx {
	int slot;                      /* bus slot */
	int index;                     /* NVML index */
	nvml_device_t dev;
	struct gpu_identity id;
	int lane;                      /* owning lane id; under collector.lock */
	atomic_bool lost;
	atomic_bool stalled;           /* marked stale by the watchdog */
	int64_t parked_until[R_COUNT]; /* monotonic; 0 = read allowed */
	int64_t next_due[TIER_COUNT];
	int64_t next_proc_util;
	/* Per-process utilization: the end of the last window (wall clock,
	 * µs; 0 before the first), what the driver's buffer taught, the
	 * buffer, and each kept process's last shares (-1: none). */
	unsigned long long proc_util_since_us;
	struct procutil_state proc_util;
	struct nvml_process_utilization_sample *proc_samples;
	unsigned proc_samples_cap;
	uint32_t proc_util_pid[GPU_PROC_MAX];
	unsigned proc_util_n;
	double proc_sm[GPU_PROC_MAX], proc_mem[GPU_PROC_MAX];
	bool gpm;
	bool gpm_primed;
	int gpm_samples;               /* taken since the last prime; 2+: both hold data */
	nvml_gpm_sample_t gpm_prev, gpm_cur;
	bool gpm_skip[GPM_NREQ];
	struct comm_entry comm_cache[COMM_CACHE];
	int ncomm;
	/* Adaptive sampling (adapt.h): the lane's alone, but for raises
	 * and XIDs, which are atomic. `skip` is the current sweep's plan. */
	struct adapt_state adapt;
	uint64_t skip;
	/* Per MIG instance GPM: two samples each, by position in the list,
	 * primed while the same GI holds that position. */
	nvml_gpm_sample_t mig_prev[GPU_MIG_MAX], mig_cur[GPU_MIG_MAX];
	bool mig_primed[GPU_MIG_MAX];
	unsigned mig_gi[GPU_MIG_MAX];
	bool mig_gpm_off;              /* no per-instance GPM: not asked again */
	/* The MIG instances of the last read, for naming the pods of
	 * processes by the instance they run in. */
	int nmig_seen;
	unsigned mig_seen_gi[GPU_MIG_MAX];
	char mig_seen_uuid[GPU_MIG_MAX][96];
	struct complaint complaint;
};

struct lane {
	struct collector *c;
	int id;
	pthread_t thread;
	struct nvml_call_watch watch;
	atomic_int current_gpu;        /* gpu index in c->gpu, -1 between reads */
	atomic_bool orphan;            /* left alone with a slow or stuck GPU */
	atomic_bool marked_stale;      /* its GPU's call ran past the deadline */
	atomic_bool done;
	int timer_fd;                  /* armed over each sweep: the watchdog's
					* cue that a call may be holding up the
					* other GPUs (timerfd; -1 when none) */
};

#define LANES_MAX (GPU_MAX + 1)

struct collector {
	struct collector_config cfg;
	struct bus *bus;
	struct nvml_lib *nv;
	pthread_mutex_t lock;          /* GPU ownership, lane list, gpu list */
	struct mono_cond wake;         /* stop and period changes */
	atomic_bool stopping;
	int ngpu;
	struct gpu_ctx *gpu[GPU_MAX];
	int nlanes;
	struct lane *lanes[LANES_MAX];
	pthread_t watchdog, discovery, events;
	bool have_discovery, have_events;
	struct nvml_call_watch discovery_watch;
	nvml_event_set_t event_set;
	atomic_uint_fast64_t stalls, events_seen, event_errors, rediscoveries;
	atomic_uint_fast64_t sweeps[TIER_COUNT];
	atomic_uint_fast64_t lanes_started, handoffs;
	int64_t period_ns[TIER_COUNT];
	struct adapt_config adapt;     /* under lock; lanes copy it per sweep */
	int64_t handoff_ns;            /* a call this long hands the other GPUs on */
	int stop_fd;                   /* eventfd: wakes the watchdog's poll at stop */
};

void collector_config_defaults(struct collector_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->period_ns[TIER_FAST] = 100 * NS_PER_MS;
	cfg->period_ns[TIER_NORMAL] = 1 * NS_PER_SEC;
	cfg->period_ns[TIER_SLOW] = 30 * NS_PER_SEC;
	cfg->call_deadline_ns = 2 * NS_PER_SEC;
	cfg->rediscover_ns = 10 * NS_PER_SEC;
	cfg->per_process_util = true;
	cfg->gpm = true;
	cfg->events = true;
	adapt_config_defaults(&cfg->adapt);
}

/* ---- one read's outcome --------------------------------------------- */

static bool allowed(struct gpu_ctx *g, enum read_kind k, int64_t now)
{
	return g->parked_until[k] == 0 || now >= g->parked_until[k];
}

/* Judge an NVML return for read `k`: true when the value may be used. */
static bool judge(struct collector *c, struct gpu_ctx *g, enum read_kind k,
		  enum nvml_fn fn, nvml_return_t r)
{
	switch (r) {
	case NVML_ABI_SUCCESS:
		g->parked_until[k] = 0;
		return true;
	case NVML_ABI_ERROR_NOT_SUPPORTED:
	case NVML_ABI_ERROR_FUNCTION_NOT_FOUND:
		g->parked_until[k] = clock_mono_ns() + REPROBE_NS;
		return false;
	case NVML_ABI_ERROR_GPU_IS_LOST:
		atomic_store(&g->lost, true);
		return false;
	default:
		complain(&g->complaint, "GPU %d: %s failed: %s", g->index, nvml_fn_name(fn),
			 nvml_lib_strerror(c->nv, r));
		return false;
	}
}

static void put(struct gpu_update *u, enum field_id f, double v)
{
	u->v[f] = v;
	u->valid |= FIELD_BIT(f);
}

/* A field value as a number, whatever type NVML answered it in. */
static double fv_number(const struct nvml_field_value *fv)
{
	switch (fv->value_type) {
	case NVML_ABI_VALUE_TYPE_DOUBLE: return fv->value.d;
	case NVML_ABI_VALUE_TYPE_UNSIGNED_INT: return fv->value.ui;
	case NVML_ABI_VALUE_TYPE_UNSIGNED_LONG: return (double)fv->value.ul;
	case NVML_ABI_VALUE_TYPE_SIGNED_LONG_LONG: return (double)fv->value.sll;
	case NVML_ABI_VALUE_TYPE_SIGNED_INT: return fv->value.si;
	case NVML_ABI_VALUE_TYPE_UNSIGNED_SHORT: return fv->value.us;
	default: return (double)fv->value.ull;
	}
}

static void fv_ask(struct nvml_field_value *fv, unsigned field_id, unsigned scope_id)
{
	memset(fv, 0, sizeof *fv);
	fv->field_id = field_id;
	fv->scope_id = scope_id;
}

/* One nvmlDeviceGetFieldValues call of a batch: 1 when it answered (each
 * field's own return still to be judged), 0 when it failed as a whole
 * (the caller falls back to its per-item calls), -1 when the GPU is lost
 * (marked). */
static int fv_read(struct collector *c, struct gpu_ctx *g, struct nvml_field_value *fv, int n)
{
	nvml_return_t r = NVML_CALL(c->nv, device_get_field_values, g->dev, n, fv);
	if (r == NVML_ABI_ERROR_GPU_IS_LOST) {
		atomic_store(&g->lost, true);
		return -1;
	}
	return r == NVML_ABI_SUCCESS;
}

/* ---- tiers ----------------------------------------------------------- */

static void read_fast(struct collector *c, struct gpu_ctx *g, struct gpu_update *u, int64_t now)
{
	struct nvml_lib *nv = c->nv;
	nvml_device_t d = g->dev;
	nvml_return_t r;

	if (nv->device_get_utilization_rates && allowed(g, R_UTIL, now)) {
		struct nvml_utilization ut;
		r = NVML_CALL(nv, device_get_utilization_rates, d, &ut);
		if (judge(c, g, R_UTIL, NVML_FN_device_get_utilization_rates, r)) {
			put(u, F_GPU_UTIL, ut.gpu / 100.0);
			put(u, F_MEM_UTIL, ut.memory / 100.0);
		}
	}
	if (atomic_load(&g->lost))
		return;
	if (!(g->skip & FIELD_BIT(F_MEM_USED)) && allowed(g, R_MEMORY, now)) {
		if (nv->device_get_memory_info_v2) {
			struct nvml_memory_v2 m = {.version = NVML_ABI_MEMORY_V2_VERSION};
			r = NVML_CALL(nv, device_get_memory_info_v2, d, &m);
			if (judge(c, g, R_MEMORY, NVML_FN_device_get_memory_info_v2, r)) {
				/* v2's "used" leaves out what the driver reserves;
				 * v1, nvidia-smi and the recording format count it
				 * as used, and so do we. */
				put(u, F_MEM_TOTAL, (double)m.total);
				put(u, F_MEM_USED, (double)(m.used + m.reserved));
				put(u, F_MEM_FREE, (double)m.free);
				put(u, F_MEM_RESERVED, (double)m.reserved);
			}
		} else if (nv->device_get_memory_info) {
			struct nvml_memory_v1 m;
			r = NVML_CALL(nv, device_get_memory_info, d, &m);
			if (judge(c, g, R_MEMORY, NVML_FN_device_get_memory_info, r)) {
				put(u, F_MEM_TOTAL, (double)m.total);
				put(u, F_MEM_USED, (double)m.used);
				put(u, F_MEM_FREE, (double)m.free);
			}
		}
	}
	if (nv->device_get_power_usage && allowed(g, R_POWER, now)) {
		unsigned mw;
		r = NVML_CALL(nv, device_get_power_usage, d, &mw);
		if (judge(c, g, R_POWER, NVML_FN_device_get_power_usage, r))
			put(u, F_POWER, mw / 1000.0);
	}
	if (nv->device_get_clock_info) {
		unsigned mhz;
		if (allowed(g, R_SM_CLOCK, now)) {
			r = NVML_CALL(nv, device_get_clock_info, d, NVML_ABI_CLOCK_SM, &mhz);
			if (judge(c, g, R_SM_CLOCK, NVML_FN_device_get_clock_info, r))
				put(u, F_SM_CLOCK, mhz * 1e6);
		}
		if (allowed(g, R_MEM_CLOCK, now)) {
			r = NVML_CALL(nv, device_get_clock_info, d, NVML_ABI_CLOCK_MEM, &mhz);
			if (judge(c, g, R_MEM_CLOCK, NVML_FN_device_get_clock_info, r))
				put(u, F_MEM_CLOCK, mhz * 1e6);
		}
	}
}

/* A process's comm and owner, read once while it stays on the GPU. The
 * owner is that of its /proc/PID/comm, from the open file (no second
 * path lookup); its attribution (cgroup, container, job, user) comes from
 * the attribution module, which caches it across GPUs. */
static struct comm_entry *comm_of(struct collector *c, struct gpu_ctx *g, uint32_t pid,
					struct comm_entry *fresh, int *nfresh)
{
	for (int i = 0; i < g->ncomm; i++) {
		if (g->comm_cache[i].pid == pid) {
			struct comm_entry *e = &fresh[(*nfresh)++];
			*e = g->comm_cache[i];
			/* Unreadable before (a race with its start, hidepid):
			 * asked again, the attribution cache does not keep it. */
			if (c->cfg.attrib && !e->owner.resolved)
				attrib_resolve(c->cfg.attrib, pid, &e->owner);
			return e;
		}
	}
	struct comm_entry *e = &fresh[(*nfresh)++];
	e->pid = pid;
	e->uid_valid = false;
	memset(&e->owner, 0, sizeof e->owner);
	if (c->cfg.attrib)
		attrib_resolve(c->cfg.attrib, pid, &e->owner);
	snprintf(e->comm, sizeof e->comm, "unknown");
	char path[320];
	snprintf(path, sizeof path, "%s/%" PRIu32 "/comm", attrib_proc_root(c->cfg.attrib), pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		struct stat sb;
		if (fstat(fd, &sb) == 0) {
			e->uid_valid = true;
			e->uid = (uint32_t)sb.st_uid;
		}
		ssize_t n = read(fd, e->comm, sizeof e->comm - 1);
		close(fd);
		if (n > 0) {
			e->comm[n] = '\0';
			char *nl = strchr(e->comm, '\n');
			if (nl)
				*nl = '\0';
		} else {
			snprintf(e->comm, sizeof e->comm, "unknown");
		}
	}
	return e;
}

static void read_proc_util(struct collector *c, struct gpu_ctx *g, struct gpu_update *u,
			   int64_t now);

static void read_processes(struct collector *c, struct gpu_ctx *g, struct gpu_update *u, int64_t now)
{
	struct nvml_lib *nv = c->nv;
	if (!nv->device_get_compute_running_processes || !allowed(g, R_PROCS, now))
		return;
	struct nvml_process_info info[GPU_PROC_MAX];
	unsigned n = GPU_PROC_MAX;
	nvml_return_t r = NVML_CALL(nv, device_get_compute_running_processes, g->dev, &n, info);
	uint32_t dropped = 0;
	if (r == NVML_ABI_ERROR_INSUFFICIENT_SIZE) {
		/* More processes than we keep: count the rest, keep none of a
		 * partial list (NVML fills nothing on this error). */
		dropped = n > GPU_PROC_MAX ? n - GPU_PROC_MAX : 0;
		n = 0;
		r = NVML_ABI_SUCCESS;
	}
	if (!judge(c, g, R_PROCS, NVML_FN_device_get_compute_running_processes, r))
		return;
	u->has_procs = true;
	u->nprocs = (int)n;
	u->procs_dropped = dropped;
	put(u, F_PROC_COUNT, (double)(n + dropped));

	struct comm_entry fresh[GPU_PROC_MAX];
	int nfresh = 0;
	for (unsigned i = 0; i < n; i++) {
		struct gpu_process *p = &u->procs[i];
		memset(p, 0, sizeof *p);
		p->pid = info[i].pid;
		struct comm_entry *ce = comm_of(c, g, p->pid, fresh, &nfresh);
		snprintf(p->comm, sizeof p->comm, "%s", ce->comm);
		p->uid_valid = ce->uid_valid;
		p->uid = ce->uid;
		if (ce->owner.env_pending) {
			/* Its environment is read on attribution's thread. */
			attrib_update_owner(c->cfg.attrib, p->pid, &ce->owner);
		}
		p->owner = ce->owner;
		const char *mig_uuid = NULL;
		if (info[i].gpu_instance_id != 0xFFFFFFFFU && g->id.mig_mode == 1) {
			p->in_mig = true;
			p->gpu_instance = info[i].gpu_instance_id;
			for (int k = 0; k < g->nmig_seen; k++)
				if (g->mig_seen_gi[k] == info[i].gpu_instance_id)
					mig_uuid = g->mig_seen_uuid[k];
		}
		/* Pod names change only with the pod-resources table: joined on
		 * every read, from memory; on a MIG GPU, by the instance too. */
		attrib_name_pod(c->cfg.attrib, g->id.uuid, mig_uuid, &p->owner);
		if (info[i].used_gpu_memory != NVML_ABI_VALUE_NOT_AVAILABLE_ULL) {
			p->used_bytes = info[i].used_gpu_memory;
			p->mem_valid = true;
		}
	}
	memcpy(g->comm_cache, fresh, (size_t)nfresh * sizeof fresh[0]);
	g->ncomm = nfresh;

	read_proc_util(c, g, u, now);
}

/* The shares of the processes of `u` over the window since the last read
 * (procutil.h): at most every PROC_UTIL_PERIOD_NS, only while processes
 * run, since that call costs 2.4 ms of CPU on the H200. Between reads a
 * process keeps its last shares; a process that was not there at the
 * last read has none until the next. */
static void read_proc_util(struct collector *c, struct gpu_ctx *g, struct gpu_update *u,
			   int64_t now)
{
	struct nvml_lib *nv = c->nv;
	unsigned n = (unsigned)u->nprocs;
	if (!c->cfg.per_process_util)
		return;
	if (n == 0 || !nv->device_get_process_utilization || !allowed(g, R_PROC_UTIL, now) ||
	    now < g->next_proc_util)
		goto carry;
	g->next_proc_util = now + PROC_UTIL_PERIOD_NS;
	if (!g->proc_samples) {
		g->proc_samples_cap = PROC_SAMPLES_INITIAL;
		g->proc_samples = xcalloc(g->proc_samples_cap, sizeof g->proc_samples[0]);
	}
	/* The first window is one period long, never the driver's whole
	 * buffer (lastSeenTimeStamp 0): that reaches back before the process. */
	unsigned long long since = g->proc_util_since_us;
	unsigned long long wall_us = (unsigned long long)(clock_wall_ns() / 1000);
	if (since == 0 || since >= wall_us)
		since = wall_us - (unsigned long long)(PROC_UTIL_PERIOD_NS / 1000);
	unsigned ns = g->proc_samples_cap;
	nvml_return_t r = NVML_CALL(nv, device_get_process_utilization, g->dev, g->proc_samples, &ns,
				    since);
	if (r == NVML_ABI_ERROR_INSUFFICIENT_SIZE && ns > g->proc_samples_cap &&
	    g->proc_samples_cap < PROC_SAMPLES_MAX) {
		g->proc_samples_cap = ns < PROC_SAMPLES_MAX ? ns + ns / 4 : PROC_SAMPLES_MAX;
		if (g->proc_samples_cap > PROC_SAMPLES_MAX)
			g->proc_samples_cap = PROC_SAMPLES_MAX;
		g->proc_samples = xrealloc(g->proc_samples,
					   g->proc_samples_cap * sizeof g->proc_samples[0]);
		ns = g->proc_samples_cap;
		r = NVML_CALL(nv, device_get_process_utilization, g->dev, g->proc_samples, &ns, since);
	}
	unsigned long long end = (unsigned long long)(clock_wall_ns() / 1000);
	if (r == NVML_ABI_ERROR_NOT_FOUND) {
		ns = 0;      /* no samples in the window: every process was idle */
	} else if (r == NVML_ABI_ERROR_INSUFFICIENT_SIZE) {
		complain(&g->complaint, "GPU %d: more than %u per-process utilization samples "
			 "in %lld s; per-process shares left out", g->index, PROC_SAMPLES_MAX,
			 (long long)(PROC_UTIL_PERIOD_NS / NS_PER_SEC));
		ns = 0;
		goto unknown;
	} else if (!judge(c, g, R_PROC_UTIL, NVML_FN_device_get_process_utilization, r)) {
		goto unknown;
	}
	uint32_t pids[GPU_PROC_MAX];
	for (unsigned i = 0; i < n; i++)
		pids[i] = u->procs[i].pid;
	if (procutil_shares(&g->proc_util, g->proc_samples, ns, pids, n, since, end, g->proc_sm,
			    g->proc_mem) != GPULSE_OK)
		goto unknown;   /* the wall clock stepped back: the next window starts now */
	memcpy(g->proc_util_pid, pids, n * sizeof pids[0]);
	g->proc_util_n = n;
	g->proc_util_since_us = end;
	goto carry;
unknown:
	g->proc_util_since_us = end;
	g->proc_util_n = 0;
carry:
	for (unsigned i = 0; i < n; i++) {
		for (unsigned j = 0; j < g->proc_util_n; j++) {
			if (g->proc_util_pid[j] != u->procs[i].pid)
				continue;
			u->procs[i].util_valid = true;
			u->procs[i].sm_ratio = g->proc_sm[j];
			u->procs[i].mem_ratio = g->proc_mem[j];
			break;
		}
	}
}

static void read_gpm(struct collector *c, struct gpu_ctx *g, struct gpu_update *u, int64_t now)
{
	struct nvml_lib *nv = c->nv;
	if (!g->gpm || !allowed(g, R_GPM, now))
		return;
	nvml_return_t r = NVML_CALL(nv, gpm_sample_get, g->dev, g->gpm_cur);
	if (!judge(c, g, R_GPM, NVML_FN_gpm_sample_get, r)) {
		g->gpm_primed = false;
		return;
	}
	if (g->gpm_primed) {
		/* On the stack (~3 KiB): lanes run in parallel, so no static.
		 * Only the header and the entries used are cleared. */
		struct nvml_gpm_metrics_get mg;
		memset(&mg, 0, offsetof(struct nvml_gpm_metrics_get, metrics));
		mg.version = NVML_ABI_GPM_METRICS_GET_VERSION;
		mg.sample1 = g->gpm_prev;
		mg.sample2 = g->gpm_cur;
		int map[GPM_NREQ];
		unsigned k = 0;
		for (int i = 0; i < GPM_NREQ; i++) {
			if (g->gpm_skip[i])
				continue;
			memset(&mg.metrics[k], 0, sizeof mg.metrics[k]);
			mg.metrics[k].metric_id = gpm_metrics[i].metric_id;
			map[k++] = i;
		}
		mg.num_metrics = k;
		r = NVML_CALL(nv, gpm_metrics_get, &mg);
		if (judge(c, g, R_GPM, NVML_FN_gpm_metrics_get, r)) {
			for (unsigned j = 0; j < k; j++) {
				const struct gpm_req *q = &gpm_metrics[map[j]];
				if (mg.metrics[j].nvml_return == NVML_ABI_SUCCESS)
					put(u, q->field, field_to_base(q->field, mg.metrics[j].value));
				else if (mg.metrics[j].nvml_return == NVML_ABI_ERROR_NOT_SUPPORTED)
					g->gpm_skip[map[j]] = true;
			}
		}
	}
	nvml_gpm_sample_t t = g->gpm_prev;
	g->gpm_prev = g->gpm_cur;
	g->gpm_cur = t;
	g->gpm_primed = true;
	g->gpm_samples++;
}

/* GRAPHICS_UTIL over the last normal-tier interval, from the two samples
 * the normal tier keeps (gpm_prev newest, gpm_cur the one before). */
static void read_gpm_graphics(struct collector *c, struct gpu_ctx *g, struct gpu_update *u,
			      int64_t now)
{
	if (!g->gpm || !g->gpm_primed || g->gpm_samples < 2 || !allowed(g, R_GPM_GRAPHICS, now))
		return;
	struct nvml_gpm_metrics_get mg;
	memset(&mg, 0, offsetof(struct nvml_gpm_metrics_get, metrics) + sizeof mg.metrics[0]);
	mg.version = NVML_ABI_GPM_METRICS_GET_VERSION;
	mg.num_metrics = 1;
	mg.sample1 = g->gpm_cur;
	mg.sample2 = g->gpm_prev;
	mg.metrics[0].metric_id = NVML_ABI_GPM_METRIC_GRAPHICS_UTIL;
	nvml_return_t r = NVML_CALL(c->nv, gpm_metrics_get, &mg);
	if (r == NVML_ABI_SUCCESS)
		r = mg.metrics[0].nvml_return;
	if (judge(c, g, R_GPM_GRAPHICS, NVML_FN_gpm_metrics_get, r))
		put(u, F_GPM_GRAPHICS, field_to_base(F_GPM_GRAPHICS, mg.metrics[0].value));
}

/* Video encoder and decoder utilization: a few µs each (they read a
 * counter the driver keeps), so they join the normal tier. NVML gives a
 * percentage over its own sampling period, which is not ours to choose. */
static void read_codecs(struct collector *c, struct gpu_ctx *g, struct gpu_update *u, int64_t now)
{
	struct nvml_lib *nv = c->nv;
	nvml_return_t r;
	unsigned pct, period_us;

	if (nv->device_get_encoder_utilization && allowed(g, R_ENC, now)) {
		r = NVML_CALL(nv, device_get_encoder_utilization, g->dev, &pct, &period_us);
		if (judge(c, g, R_ENC, NVML_FN_device_get_encoder_utilization, r) && pct <= 100)
			put(u, F_ENC_UTIL, pct / 100.0);
	}
	if (atomic_load(&g->lost))
		return;
	if (nv->device_get_decoder_utilization && allowed(g, R_DEC, now)) {
		r = NVML_CALL(nv, device_get_decoder_utilization, g->dev, &pct, &period_us);
		if (judge(c, g, R_DEC, NVML_FN_device_get_decoder_utilization, r) && pct <= 100)
			put(u, F_DEC_UTIL, pct / 100.0);
	}
}

/* "NVIDIA H200 MIG 1g.18gb" -> "1g.18gb": the profile is the last word
 * of a MIG device's name. */
static void mig_profile(const char *name, char *out, size_t len)
{
	const char *m = strstr(name, "MIG ");
	const char *p = m ? m + 4 : strrchr(name, ' ');
	p = p ? (*p == ' ' ? p + 1 : p) : name;
	utf8_clean(out, len, p);
}

/* The GPM metrics of MIG instance k (GI gi) between its last two samples. */
static void read_mig_gpm(struct collector *c, struct gpu_ctx *g, int k, unsigned gi,
			 struct gpu_mig *m, int64_t now)
{
	static const unsigned ids[MIG_GPM_COUNT] = {
		[MIG_GPM_SM_ACTIVE] = NVML_ABI_GPM_METRIC_SM_UTIL,
		[MIG_GPM_SM_OCCUPANCY] = NVML_ABI_GPM_METRIC_SM_OCCUPANCY,
		[MIG_GPM_TENSOR] = NVML_ABI_GPM_METRIC_ANY_TENSOR_UTIL,
		[MIG_GPM_DRAM] = NVML_ABI_GPM_METRIC_DRAM_BW_UTIL,
	};
	struct nvml_lib *nv = c->nv;
	if (g->mig_gpm_off || !nv->gpm_mig_sample_get || !nv->gpm_metrics_get ||
	    !nv->gpm_sample_alloc || !allowed(g, R_MIG_GPM, now))
		return;
	if (!g->mig_prev[k] && (NVML_CALL(nv, gpm_sample_alloc, &g->mig_prev[k]) != NVML_ABI_SUCCESS ||
				NVML_CALL(nv, gpm_sample_alloc, &g->mig_cur[k]) != NVML_ABI_SUCCESS)) {
		g->mig_gpm_off = true;
		return;
	}
	if (g->mig_gi[k] != gi)
		g->mig_primed[k] = false;
	g->mig_gi[k] = gi;
	nvml_return_t r = NVML_CALL(nv, gpm_mig_sample_get, g->dev, gi, g->mig_cur[k]);
	if (!judge(c, g, R_MIG_GPM, NVML_FN_gpm_mig_sample_get, r)) {
		g->mig_primed[k] = false;
		return;
	}
	if (g->mig_primed[k]) {
		struct nvml_gpm_metrics_get mg;
		memset(&mg, 0, offsetof(struct nvml_gpm_metrics_get, metrics) +
				       MIG_GPM_COUNT * sizeof mg.metrics[0]);
		mg.version = NVML_ABI_GPM_METRICS_GET_VERSION;
		mg.sample1 = g->mig_prev[k];
		mg.sample2 = g->mig_cur[k];
		mg.num_metrics = MIG_GPM_COUNT;
		for (int i = 0; i < MIG_GPM_COUNT; i++)
			mg.metrics[i].metric_id = ids[i];
		r = NVML_CALL(nv, gpm_metrics_get, &mg);
		if (judge(c, g, R_MIG_GPM, NVML_FN_gpm_metrics_get, r)) {
			for (int i = 0; i < MIG_GPM_COUNT; i++) {
				if (mg.metrics[i].nvml_return != NVML_ABI_SUCCESS)
					continue;
				m->gpm[i] = mg.metrics[i].value / 100.0;   /* NVML gives percent */
				m->gpm_valid |= 1u << i;
			}
		}
	}
	nvml_gpm_sample_t t = g->mig_prev[k];
	g->mig_prev[k] = g->mig_cur[k];
	g->mig_cur[k] = t;
	g->mig_primed[k] = true;
}

/* Every MIG instance of a GPU in MIG mode: identity, memory and GPM. MIG
 * layouts change only by an administrator's hand, but reading the
 * identity each second costs a few µs per instance, less than caching it
 * would cost in correctness. */
static void read_mig(struct collector *c, struct gpu_ctx *g, struct gpu_update *u, int64_t now)
{
	struct nvml_lib *nv = c->nv;
	if (g->id.mig_mode != 1 || !nv->device_get_max_mig_device_count ||
	    !nv->device_get_mig_device_handle_by_index || !allowed(g, R_MIG, now))
		return;
	unsigned max = 0;
	nvml_return_t r = NVML_CALL(nv, device_get_max_mig_device_count, g->dev, &max);
	if (!judge(c, g, R_MIG, NVML_FN_device_get_max_mig_device_count, r))
		return;
	if (max > GPU_MIG_MAX)
		max = GPU_MIG_MAX;
	u->has_mig = true;
	u->nmig = 0;
	g->nmig_seen = 0;
	for (unsigned i = 0; i < max; i++) {
		nvml_device_t md;
		r = NVML_CALL(nv, device_get_mig_device_handle_by_index, g->dev, i, &md);
		if (r == NVML_ABI_ERROR_NOT_FOUND || r == NVML_ABI_ERROR_INVALID_ARGUMENT)
			continue;   /* an empty slot */
		if (!judge(c, g, R_MIG, NVML_FN_device_get_mig_device_handle_by_index, r))
			break;
		int k = u->nmig;
		struct gpu_mig *m = &u->mig[k];
		memset(m, 0, sizeof *m);
		if (nv->device_get_uuid)
			NVML_CALL(nv, device_get_uuid, md, m->uuid, sizeof m->uuid);
		char name[96] = "";
		if (nv->device_get_name &&
		    NVML_CALL(nv, device_get_name, md, name, sizeof name) == NVML_ABI_SUCCESS)
			mig_profile(name, m->profile, sizeof m->profile);
		if (nv->device_get_gpu_instance_id)
			NVML_CALL(nv, device_get_gpu_instance_id, md, &m->gpu_instance);
		if (nv->device_get_compute_instance_id)
			NVML_CALL(nv, device_get_compute_instance_id, md, &m->compute_instance);
		if (nv->device_get_memory_info_v2) {
			struct nvml_memory_v2 mem = {.version = NVML_ABI_MEMORY_V2_VERSION};
			if (NVML_CALL(nv, device_get_memory_info_v2, md, &mem) == NVML_ABI_SUCCESS) {
				m->mem_valid = true;
				m->mem_used_bytes = mem.used;
				m->mem_total_bytes = mem.total;
			}
		}
		if (!m->mem_valid && nv->device_get_memory_info) {
			struct nvml_memory_v1 mem;
			if (NVML_CALL(nv, device_get_memory_info, md, &mem) == NVML_ABI_SUCCESS) {
				m->mem_valid = true;
				m->mem_used_bytes = mem.used;
				m->mem_total_bytes = mem.total;
			}
		}
		read_mig_gpm(c, g, k, m->gpu_instance, m, now);
		g->mig_seen_gi[k] = m->gpu_instance;
		snprintf(g->mig_seen_uuid[k], sizeof g->mig_seen_uuid[k], "%s", m->uuid);
		u->nmig++;
		g->nmig_seen = u->nmig;
		if (atomic_load(&g->lost))
			return;
	}
}

static void read_normal(struct collector *c, struct gpu_ctx *g, struct gpu_update *u, int64_t now)
{
	struct nvml_lib *nv = c->nv;
	nvml_device_t d = g->dev;
	nvml_return_t r;

	if (nv->device_get_temperature && allowed(g, R_TEMP, now)) {
		unsigned t;
		r = NVML_CALL(nv, device_get_temperature, d, NVML_ABI_TEMPERATURE_GPU, &t);
		if (judge(c, g, R_TEMP, NVML_FN_device_get_temperature, r))
			put(u, F_TEMP, t);
	}
	if (atomic_load(&g->lost))
		return;
	/* HBM temperature exists only as a field value. */
	if (nv->device_get_field_values && allowed(g, R_MEM_TEMP, now)) {
		struct nvml_field_value fv;
		memset(&fv, 0, sizeof fv);
		fv.field_id = NVML_ABI_FI_DEV_MEMORY_TEMP;
		r = NVML_CALL(nv, device_get_field_values, d, 1, &fv);
		if (r == NVML_ABI_SUCCESS)
			r = fv.nvml_return;
		if (judge(c, g, R_MEM_TEMP, NVML_FN_device_get_field_values, r))
			put(u, F_MEM_TEMP, fv.value_type == NVML_ABI_VALUE_TYPE_DOUBLE ? fv.value.d
										: (double)fv.value.ui);
	}
	if (nv->device_get_performance_state && allowed(g, R_PSTATE, now)) {
		int ps;
		r = NVML_CALL(nv, device_get_performance_state, d, &ps);
		if (judge(c, g, R_PSTATE, NVML_FN_device_get_performance_state, r) && ps >= 0 && ps <= 15)
			put(u, F_PSTATE, ps);
	}
	if (nv->device_get_current_clocks_event_reasons && allowed(g, R_REASONS, now)) {
		unsigned long long bits;
		r = NVML_CALL(nv, device_get_current_clocks_event_reasons, d, &bits);
		if (judge(c, g, R_REASONS, NVML_FN_device_get_current_clocks_event_reasons, r))
			put(u, F_CLOCK_REASONS, (double)bits);
	}
	if (atomic_load(&g->lost))
		return;
	read_codecs(c, g, u, now);
	if (atomic_load(&g->lost))
		return;
	read_processes(c, g, u, now);
	if (atomic_load(&g->lost))
		return;
	if (!(g->skip & FIELD_BIT(F_GPM_SM))) {
		read_gpm(c, g, u, now);
		if (!(u->valid & adapt_group_fields(AG_GPM)))
			adapt_unread(&g->adapt, AG_GPM);
	}
	if (atomic_load(&g->lost))
		return;
	read_mig(c, g, u, now);
}

/* The violation time of each policy: one nvmlDeviceGetViolationStatus
 * call each, or together one field value each (NVML_FI_DEV_PERF_POLICY_*,
 * the same ns). */
static const struct { int policy; unsigned field_id; enum field_id f; } violation_policies[] = {
	{NVML_ABI_PERF_POLICY_POWER, NVML_ABI_FI_DEV_PERF_POLICY_POWER, F_VIOL_POWER},
	{NVML_ABI_PERF_POLICY_THERMAL, NVML_ABI_FI_DEV_PERF_POLICY_THERMAL, F_VIOL_THERMAL},
	{NVML_ABI_PERF_POLICY_SYNC_BOOST, NVML_ABI_FI_DEV_PERF_POLICY_SYNC_BOOST, F_VIOL_SYNC_BOOST},
	{NVML_ABI_PERF_POLICY_BOARD_LIMIT, NVML_ABI_FI_DEV_PERF_POLICY_BOARD_LIMIT, F_VIOL_BOARD_LIMIT},
	{NVML_ABI_PERF_POLICY_LOW_UTILIZATION, NVML_ABI_FI_DEV_PERF_POLICY_LOW_UTILIZATION, F_VIOL_LOW_UTIL},
	{NVML_ABI_PERF_POLICY_RELIABILITY, NVML_ABI_FI_DEV_PERF_POLICY_RELIABILITY, F_VIOL_RELIABILITY},
	{NVML_ABI_PERF_POLICY_TOTAL_APP_CLOCKS, NVML_ABI_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS, F_VIOL_APP_CLOCKS},
	{NVML_ABI_PERF_POLICY_TOTAL_BASE_CLOCKS, NVML_ABI_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS,
	 F_VIOL_BASE_CLOCKS},
};
#define NPOLICIES ((int)(sizeof violation_policies / sizeof violation_policies[0]))

/* All policies in one nvmlDeviceGetFieldValues call (on the H200 one
 * violation-status call costs ~0.8 ms of CPU, eight of them 6 ms). A
 * field NOT_SUPPORTED (or failing alone) is left out, the others kept.
 * Returns true when the call answered and at least one policy with it;
 * false sends the caller to the per-policy calls, which decide parking. */
static bool read_violations_batched(struct collector *c, struct gpu_ctx *g, struct gpu_update *u)
{
	struct nvml_lib *nv = c->nv;
	if (!nv->device_get_field_values)
		return false;
	struct nvml_field_value fv[NPOLICIES];
	for (int i = 0; i < NPOLICIES; i++)
		fv_ask(&fv[i], violation_policies[i].field_id, 0);
	int got = fv_read(c, g, fv, NPOLICIES);
	if (got <= 0)
		return got < 0; /* lost: nothing more to read; failed: the calls */
	bool any = false;
	for (int i = 0; i < NPOLICIES; i++) {
		if (fv[i].nvml_return != NVML_ABI_SUCCESS)
			continue;
		put(u, violation_policies[i].f, fv_number(&fv[i]) * 1e-9);
		any = true;
	}
	if (any)
		g->parked_until[R_VIOLATION] = 0;
	return any;
}

/* Clock violation times: batched where the driver answers them as field
 * values, else one call per policy. A policy the card does not report
 * answers NOT_SUPPORTED and is left out; the read is parked only when no
 * policy answers, so one missing policy costs the others nothing. */
static void read_violations(struct collector *c, struct gpu_ctx *g, struct gpu_update *u,
			    int64_t now)
{
	struct nvml_lib *nv = c->nv;
	if (!allowed(g, R_VIOLATION, now))
		return;
	if (read_violations_batched(c, g, u) || atomic_load(&g->lost))
		return;
	if (!nv->device_get_violation_status)
		return;
	nvml_return_t err = NVML_ABI_SUCCESS;
	bool any = false;
	for (int i = 0; i < NPOLICIES; i++) {
		struct nvml_violation_time vt = {0};
		nvml_return_t r = NVML_CALL(nv, device_get_violation_status, g->dev,
					    violation_policies[i].policy, &vt);
		if (r == NVML_ABI_SUCCESS) {
			put(u, violation_policies[i].f, (double)vt.violation_time * 1e-9);
			any = true;
		} else if (r != NVML_ABI_ERROR_NOT_SUPPORTED) {
			err = r;
			break;
		}
	}
	if (err != NVML_ABI_SUCCESS)
		judge(c, g, R_VIOLATION, NVML_FN_device_get_violation_status, err);
	else
		judge(c, g, R_VIOLATION, NVML_FN_device_get_violation_status,
		      any ? NVML_ABI_SUCCESS : NVML_ABI_ERROR_NOT_SUPPORTED);
}

/* The NVLink data-link error kinds: the per-link counter and the field
 * that sums it over the GPU's links. */
static const struct { int counter; unsigned total_field; enum field_id f; } nvlink_counters[] = {
	{NVML_ABI_NVLINK_ERROR_DL_REPLAY, NVML_ABI_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, F_NVLINK_REPLAY},
	{NVML_ABI_NVLINK_ERROR_DL_RECOVERY, NVML_ABI_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
	 F_NVLINK_RECOVERY},
	{NVML_ABI_NVLINK_ERROR_DL_CRC_FLIT, NVML_ABI_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
	 F_NVLINK_CRC_FLIT},
	{NVML_ABI_NVLINK_ERROR_DL_CRC_DATA, NVML_ABI_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
	 F_NVLINK_CRC_DATA},
};
#define NCOUNTERS ((int)(sizeof nvlink_counters / sizeof nvlink_counters[0]))

/* Every link's state and the four error totals in one field-value call,
 * for a GPU whose link count discovery read. The states say how many
 * links are active; with none, no error counter is exported (no link, no
 * counter), as the per-link path does. A field that fails alone is left
 * out. Returns true when this read stands; false sends the caller to the
 * per-link calls: the call failed as a whole, or no link's state or no
 * total answered (a driver without these fields). */
static bool read_nvlink_batched(struct collector *c, struct gpu_ctx *g, struct gpu_update *u)
{
	struct nvml_lib *nv = c->nv;
	int nlinks = g->id.nvlink_count;
	if (!nv->device_get_field_values || !g->id.nvlink_count_valid || nlinks <= 0)
		return false;
	if (nlinks > NVML_ABI_NVLINK_MAX_LINKS)
		nlinks = NVML_ABI_NVLINK_MAX_LINKS;
	struct nvml_field_value fv[NCOUNTERS + NVML_ABI_NVLINK_MAX_LINKS];
	int n = 0;
	for (int k = 0; k < NCOUNTERS; k++)
		fv_ask(&fv[n++], nvlink_counters[k].total_field, 0);
	for (int l = 0; l < nlinks; l++)
		fv_ask(&fv[n++], NVML_ABI_FI_DEV_NVLINK_GET_STATE, (unsigned)l);
	int got = fv_read(c, g, fv, n);
	if (got <= 0)
		return got < 0; /* lost: nothing more to read; failed: the calls */
	int known = 0, active = 0, totals = 0;
	for (int l = 0; l < nlinks; l++) {
		const struct nvml_field_value *s = &fv[NCOUNTERS + l];
		if (s->nvml_return != NVML_ABI_SUCCESS)
			continue;
		known++;
		active += fv_number(s) == NVML_ABI_NVLINK_STATE_ACTIVE;
	}
	for (int k = 0; k < NCOUNTERS; k++)
		totals += fv[k].nvml_return == NVML_ABI_SUCCESS;
	if (known == 0 || totals == 0)
		return false;
	g->parked_until[R_NVLINK] = 0;
	put(u, F_NVLINK_ACTIVE, active);
	if (active == 0)
		return true;
	for (int k = 0; k < NCOUNTERS; k++)
		if (fv[k].nvml_return == NVML_ABI_SUCCESS)
			put(u, nvlink_counters[k].f, fv_number(&fv[k]));
	return true;
}

/* NVLink: how many links are active and the error counters summed over
 * them, batched where the driver answers field values, else one state
 * call per link and one counter call per active link and kind. A card
 * without NVLink answers NOT_SUPPORTED for link 0's state and the read is
 * parked; with every link down no counter is exported (no link, no
 * counter). */
static void read_nvlink_errors(struct collector *c, struct gpu_ctx *g, struct gpu_update *u,
			       int64_t now)
{
	struct nvml_lib *nv = c->nv;
	if (!allowed(g, R_NVLINK, now))
		return;
	if (read_nvlink_batched(c, g, u) || atomic_load(&g->lost))
		return;
	if (!nv->device_get_nvlink_state || !nv->device_get_nvlink_error_counter)
		return;
	enum { NC = NCOUNTERS };
	double sum[NC] = {0};
	bool have[NC] = {false};
	int active = 0;
	for (unsigned link = 0; link < NVML_ABI_NVLINK_MAX_LINKS; link++) {
		int state = NVML_ABI_FEATURE_DISABLED;
		nvml_return_t r = NVML_CALL(nv, device_get_nvlink_state, g->dev, link, &state);
		if (r == NVML_ABI_ERROR_INVALID_ARGUMENT)
			break;  /* past the card's last link */
		if (r != NVML_ABI_SUCCESS) {
			if (link == 0 || r == NVML_ABI_ERROR_GPU_IS_LOST) {
				judge(c, g, R_NVLINK, NVML_FN_device_get_nvlink_state, r);
				return;
			}
			continue;  /* this link only */
		}
		if (state != NVML_ABI_FEATURE_ENABLED)
			continue;
		active++;
		for (int k = 0; k < NC; k++) {
			unsigned long long n;
			r = NVML_CALL(nv, device_get_nvlink_error_counter, g->dev, link,
				      nvlink_counters[k].counter, &n);
			if (r == NVML_ABI_SUCCESS) {
				sum[k] += (double)n;
				have[k] = true;
			} else if (r == NVML_ABI_ERROR_GPU_IS_LOST) {
				atomic_store(&g->lost, true);
				return;
			}
		}
	}
	g->parked_until[R_NVLINK] = 0;
	put(u, F_NVLINK_ACTIVE, active);
	if (active == 0)
		return;
	for (int k = 0; k < NC; k++)
		if (have[k])
			put(u, nvlink_counters[k].f, sum[k]);
}

/* Retired pages (cards before Ampere; Ampere and Hopper remap rows, read
 * with the ECC batch, and answer NOT_SUPPORTED here). The count comes
 * from the size query alone: no address buffer is needed. */
static void read_retired_pages(struct collector *c, struct gpu_ctx *g, struct gpu_update *u,
			       int64_t now)
{
	static const struct { int cause; enum field_id f; } causes[] = {
		{NVML_ABI_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, F_RETIRED_SBE},
		{NVML_ABI_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, F_RETIRED_DBE},
	};
	struct nvml_lib *nv = c->nv;
	nvml_return_t r;
	if (nv->device_get_retired_pages && allowed(g, R_RETIRED, now)) {
		for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++) {
			unsigned count = 0;
			r = NVML_CALL(nv, device_get_retired_pages, g->dev, causes[i].cause, &count, NULL);
			if (r == NVML_ABI_ERROR_INSUFFICIENT_SIZE)
				r = NVML_ABI_SUCCESS;  /* count holds the pages; we asked for no addresses */
			if (!judge(c, g, R_RETIRED, NVML_FN_device_get_retired_pages, r))
				break;
			put(u, causes[i].f, count);
		}
	}
	if (atomic_load(&g->lost))
		return;
	if (nv->device_get_retired_pages_pending_status && allowed(g, R_RETIRED_PENDING, now)) {
		int pending = NVML_ABI_FEATURE_DISABLED;
		r = NVML_CALL(nv, device_get_retired_pages_pending_status, g->dev, &pending);
		if (judge(c, g, R_RETIRED_PENDING, NVML_FN_device_get_retired_pages_pending_status, r))
			put(u, F_RETIRED_PENDING, pending == NVML_ABI_FEATURE_ENABLED);
	}
}

static void read_slow(struct collector *c, struct gpu_ctx *g, struct gpu_update *u, int64_t now)
{
	struct nvml_lib *nv = c->nv;
	nvml_device_t d = g->dev;
	nvml_return_t r;
	unsigned v;

	if (nv->device_get_enforced_power_limit && allowed(g, R_POWER_LIMIT, now)) {
		r = NVML_CALL(nv, device_get_enforced_power_limit, d, &v);
		if (judge(c, g, R_POWER_LIMIT, NVML_FN_device_get_enforced_power_limit, r))
			put(u, F_POWER_LIMIT, v * 1e-3);
	}
	if (atomic_load(&g->lost))
		return;
	/* The energy counter costs ~3 ms of CPU a call on the H200 (the
	 * driver busy-waits), so it lives in the slow tier (DESIGN.md). */
	if (nv->device_get_total_energy_consumption && allowed(g, R_ENERGY, now)) {
		unsigned long long mj;
		r = NVML_CALL(nv, device_get_total_energy_consumption, d, &mj);
		if (judge(c, g, R_ENERGY, NVML_FN_device_get_total_energy_consumption, r))
			put(u, F_ENERGY, (double)mj * 1e-3);
	}
	if (atomic_load(&g->lost))
		return;
	if (nv->device_get_ecc_mode && allowed(g, R_ECC_MODE, now)) {
		int cur, pending;
		r = NVML_CALL(nv, device_get_ecc_mode, d, &cur, &pending);
		if (judge(c, g, R_ECC_MODE, NVML_FN_device_get_ecc_mode, r))
			put(u, F_ECC_MODE, cur == NVML_ABI_FEATURE_ENABLED);
	}
	/* ECC totals, remapped rows and the replay counter in one call. */
	static const struct { unsigned id; enum field_id f; enum read_kind k; } batch[] = {
		{NVML_ABI_FI_DEV_ECC_SBE_VOL_TOTAL, F_ECC_SBE_VOL, R_ECC},
		{NVML_ABI_FI_DEV_ECC_DBE_VOL_TOTAL, F_ECC_DBE_VOL, R_ECC},
		{NVML_ABI_FI_DEV_ECC_SBE_AGG_TOTAL, F_ECC_SBE_AGG, R_ECC},
		{NVML_ABI_FI_DEV_ECC_DBE_AGG_TOTAL, F_ECC_DBE_AGG, R_ECC},
		{NVML_ABI_FI_DEV_REMAPPED_COR, F_REMAP_COR, R_REMAP},
		{NVML_ABI_FI_DEV_REMAPPED_UNC, F_REMAP_UNC, R_REMAP},
		{NVML_ABI_FI_DEV_REMAPPED_PENDING, F_REMAP_PENDING, R_REMAP},
		{NVML_ABI_FI_DEV_REMAPPED_FAILURE, F_REMAP_FAILED, R_REMAP},
		{NVML_ABI_FI_DEV_PCIE_REPLAY_COUNTER, F_PCIE_REPLAY, R_REPLAY},
	};
	enum { NB = sizeof batch / sizeof batch[0] };
	bool batched = false;
	if (nv->device_get_field_values) {
		struct nvml_field_value fv[NB];
		memset(fv, 0, sizeof fv);
		for (int i = 0; i < NB; i++)
			fv[i].field_id = batch[i].id;
		r = NVML_CALL(nv, device_get_field_values, d, NB, fv);
		if (r == NVML_ABI_SUCCESS) {
			batched = true;
			for (int i = 0; i < NB; i++)
				if (fv[i].nvml_return == NVML_ABI_SUCCESS)
					put(u, batch[i].f, fv_number(&fv[i]));
		} else if (r == NVML_ABI_ERROR_GPU_IS_LOST) {
			atomic_store(&g->lost, true);
			return;
		}
	}
	if (!batched) {
		if (nv->device_get_total_ecc_errors && allowed(g, R_ECC, now)) {
			static const struct { int type, counter; enum field_id f; } ecc[] = {
				{NVML_ABI_MEMORY_ERROR_TYPE_CORRECTED, NVML_ABI_VOLATILE_ECC, F_ECC_SBE_VOL},
				{NVML_ABI_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_ABI_VOLATILE_ECC, F_ECC_DBE_VOL},
				{NVML_ABI_MEMORY_ERROR_TYPE_CORRECTED, NVML_ABI_AGGREGATE_ECC, F_ECC_SBE_AGG},
				{NVML_ABI_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_ABI_AGGREGATE_ECC, F_ECC_DBE_AGG},
			};
			for (int i = 0; i < 4; i++) {
				unsigned long long n;
				r = NVML_CALL(nv, device_get_total_ecc_errors, d, ecc[i].type, ecc[i].counter, &n);
				if (!judge(c, g, R_ECC, NVML_FN_device_get_total_ecc_errors, r))
					break;
				put(u, ecc[i].f, (double)n);
			}
		}
		if (nv->device_get_remapped_rows && allowed(g, R_REMAP, now)) {
			unsigned cor, unc, pend, fail;
			r = NVML_CALL(nv, device_get_remapped_rows, d, &cor, &unc, &pend, &fail);
			if (judge(c, g, R_REMAP, NVML_FN_device_get_remapped_rows, r)) {
				put(u, F_REMAP_COR, cor);
				put(u, F_REMAP_UNC, unc);
				put(u, F_REMAP_PENDING, pend);
				put(u, F_REMAP_FAILED, fail);
			}
		}
		if (nv->device_get_pcie_replay_counter && allowed(g, R_REPLAY, now)) {
			r = NVML_CALL(nv, device_get_pcie_replay_counter, d, &v);
			if (judge(c, g, R_REPLAY, NVML_FN_device_get_pcie_replay_counter, r))
				put(u, F_PCIE_REPLAY, v);
		}
	}
	if (atomic_load(&g->lost))
		return;
	read_gpm_graphics(c, g, u, now);
	if (nv->device_get_curr_pcie_link_generation && allowed(g, R_LINK_GEN, now)) {
		r = NVML_CALL(nv, device_get_curr_pcie_link_generation, d, &v);
		if (judge(c, g, R_LINK_GEN, NVML_FN_device_get_curr_pcie_link_generation, r))
			put(u, F_PCIE_GEN, v);
	}
	if (nv->device_get_curr_pcie_link_width && allowed(g, R_LINK_WIDTH, now)) {
		r = NVML_CALL(nv, device_get_curr_pcie_link_width, d, &v);
		if (judge(c, g, R_LINK_WIDTH, NVML_FN_device_get_curr_pcie_link_width, r))
			put(u, F_PCIE_WIDTH, v);
	}
	if (atomic_load(&g->lost))
		return;
	read_violations(c, g, u, now);
	if (atomic_load(&g->lost))
		return;
	read_nvlink_errors(c, g, u, now);
	if (atomic_load(&g->lost))
		return;
	read_retired_pages(c, g, u, now);
}

typedef void read_tier_fn(struct collector *c, struct gpu_ctx *g, struct gpu_update *u, int64_t now);
static read_tier_fn *const tier_reader[TIER_COUNT] = {read_fast, read_normal, read_slow};

/* Read one tier of one GPU and publish it. The adaptive groups that are
 * neither due at their floor nor moving are left unread and out of the
 * update's mask, so the snapshot keeps their last value (their tier's
 * other reads keep it from turning stale) and the store adds no point. */
static void sweep_gpu(struct collector *c, struct gpu_ctx *g, enum tier t, int64_t now,
		      const struct adapt_config *ac, int64_t ceiling_ns, struct gpu_update *u)
{
	g->skip = adapt_plan(&g->adapt, ac, t, ceiling_ns, now);
	u->gpu = g->slot;
	u->tier = t;
	u->wall_ns = clock_wall_ns();
	u->mask = fields_of_tier(t) & ~g->skip;
	u->valid = 0;
	u->has_procs = false;
	u->nprocs = 0;
	u->procs_dropped = 0;
	u->has_mig = false;
	u->nmig = 0;
	tier_reader[t](c, g, u, now);
	if (atomic_load(&g->lost)) {
		bus_set_health(c->bus, g->slot, GPU_HEALTH_LOST,
			       "NVML reports the GPU is lost (GPU_IS_LOST)");
		log_error("GPU %d (%s) is lost; will look for it again every %.0f s", g->index,
			  g->id.uuid, (double)c->cfg.rediscover_ns / NS_PER_SEC);
		g->gpm_primed = false;
		g->gpm_samples = 0;
		return;
	}
	adapt_observe(&g->adapt, ac, u, now);
	bus_publish(c->bus, u);
	if (atomic_exchange(&g->stalled, false)) {
		bus_set_health(c->bus, g->slot, GPU_HEALTH_UP, "");
		log_info("GPU %d answers again", g->index);
	}
}

/* ---- lanes ----------------------------------------------------------- */

/* Arm the lane's timer `ns` from now (0 disarms); true when armed. */
static bool lane_arm(struct lane *l, int64_t ns)
{
	if (l->timer_fd < 0)
		return false;
	struct itimerspec it = {.it_value = {.tv_sec = ns / NS_PER_SEC, .tv_nsec = ns % NS_PER_SEC}};
	return timerfd_settime(l->timer_fd, 0, &it, NULL) == 0 && ns > 0;
}

static void lane_free(struct lane *l)
{
	if (!l)
		return;
	if (l->timer_fd >= 0)
		close(l->timer_fd);
	free(l);
}

/* The newest lane other than `except` that serves GPUs normally (not left
 * with a slow GPU, not ended), or -1. Called with c->lock held. */
static int live_lane(struct collector *c, int except)
{
	for (int i = c->nlanes - 1; i >= 0; i--) {
		struct lane *l = c->lanes[i];
		if (i != except && !atomic_load(&l->orphan) && !atomic_load(&l->done))
			return l->id;
	}
	return -1;
}

/* Not common/periodic: a lane waits for the earliest due tier of the GPUs
 * it owns, which move between lanes and change their periods (adaptive
 * tiers), and its reads are watched by a timer while they run. */
static void *lane_main(void *arg)
{
	struct lane *l = arg;
	struct collector *c = l->c;
	char name[16];
	snprintf(name, sizeof name, "gpulse-lane%d", l->id % 100);
	pthread_setname_np(pthread_self(), name);
	nvml_current_watch = &l->watch;
	struct gpu_update *u = malloc(sizeof *u);
	if (!u) {
		log_error("collector lane %d: out of memory", l->id);
		atomic_store(&l->done, true);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	while (!atomic_load(&c->stopping)) {
		/* Sleep until the earliest due tier of any GPU this lane owns. */
		int64_t now = clock_mono_ns();
		int64_t wake = now + c->period_ns[TIER_FAST];
		int owned = 0;
		for (int i = 0; i < c->ngpu; i++) {
			struct gpu_ctx *g = c->gpu[i];
			if (g->lane != l->id || atomic_load(&g->lost))
				continue;
			owned++;
			for (int t = 0; t < TIER_COUNT; t++)
				if (g->next_due[t] < wake)
					wake = g->next_due[t];
		}
		if (wake > now) {
			mono_cond_wait_until(&c->wake, &c->lock, wake);
			continue;
		}
		/* With other GPUs behind the one being read, a call that takes
		 * longer than handoff_ns must not hold them up: the timer wakes
		 * the watchdog then (two syscalls a sweep, no wake-up when
		 * nothing is slow). */
		bool armed = owned > 1 && lane_arm(l, c->handoff_ns);
		for (int t = 0; t < TIER_COUNT; t++) {
			bool swept = false;
			for (int i = 0; i < c->ngpu && !atomic_load(&c->stopping); i++) {
				struct gpu_ctx *g = c->gpu[i];
				now = clock_mono_ns();
				if (g->lane != l->id || atomic_load(&g->lost) || g->next_due[t] > now)
					continue;
				/* Schedules stay on their grid; a late lane skips
				 * missed slots rather than bursting to catch up. */
				g->next_due[t] += c->period_ns[t];
				if (g->next_due[t] <= now)
					g->next_due[t] = now + c->period_ns[t];
				atomic_store(&l->current_gpu, i);
				struct adapt_config ac = c->adapt;
				int64_t ceiling = c->period_ns[t];
				pthread_mutex_unlock(&c->lock);
				sweep_gpu(c, g, (enum tier)t, now, &ac, ceiling, u);
				pthread_mutex_lock(&c->lock);
				atomic_store(&l->current_gpu, -1);
				swept = true;
			}
			if (swept)
				atomic_fetch_add(&c->sweeps[t], 1);
		}
		if (armed)
			lane_arm(l, 0);
		/* Handed off for a slow call that came back before the
		 * deadline: once its due tiers are read, the GPU rejoins a lane
		 * that serves the others, and this lane ends. A GPU that was
		 * stuck past the deadline keeps a lane of its own. */
		if (atomic_load(&l->orphan) && !atomic_load(&l->marked_stale)) {
			int to = live_lane(c, l->id);
			bool moved = false;
			for (int i = 0; i < c->ngpu && to >= 0; i++) {
				if (c->gpu[i]->lane == l->id) {
					c->gpu[i]->lane = to;
					moved = true;
				}
			}
			if (to >= 0) {
				if (moved)
					mono_cond_broadcast(&c->wake);
				break;
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	free(u);
	atomic_store(&l->done, true);
	return NULL;
}

/* Start a lane owning every GPU whose lane is `from` (or all when -1),
 * except `keep`, in the slot of a lane that has ended or a new one.
 * Called with c->lock held. */
static int lane_spawn(struct collector *c, int from, int keep)
{
	int slot = c->nlanes;
	for (int i = 0; i < c->nlanes; i++) {
		if (atomic_load(&c->lanes[i]->done)) {
			slot = i;
			break;
		}
	}
	if (slot >= LANES_MAX)
		return GPULSE_ELIMIT;
	struct lane *l = calloc(1, sizeof *l);
	if (!l)
		return GPULSE_ENOMEM;
	l->c = c;
	l->id = slot;
	atomic_init(&l->current_gpu, -1);
	l->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	int old[GPU_MAX];
	for (int i = 0; i < c->ngpu; i++) {
		old[i] = c->gpu[i]->lane;
		if ((from < 0 || c->gpu[i]->lane == from) && i != keep)
			c->gpu[i]->lane = l->id;
	}
	if (pthread_create(&l->thread, NULL, lane_main, l) != 0) {
		for (int i = 0; i < c->ngpu; i++)
			c->gpu[i]->lane = old[i];
		lane_free(l);
		return GPULSE_ENOMEM;
	}
	if (slot < c->nlanes) {
		/* The lane that ended there has left its loop (it sets done
		 * after its last unlock): joining is immediate. */
		pthread_join(c->lanes[slot]->thread, NULL);
		lane_free(c->lanes[slot]);
	}
	c->lanes[slot] = l;
	if (slot == c->nlanes)
		c->nlanes++;
	atomic_fetch_add(&c->lanes_started, 1);
	return GPULSE_OK;
}

/* ---- watchdog, discovery, events ------------------------------------- */

/* Sleep on the collector's condition for `ns` or until stop; true when
 * stopping. Called with c->lock held. Not common/periodic: the watchdog,
 * discovery and events threads nap for lengths they pick each time, under
 * the collector's own lock, which their work between naps needs. */
static bool collector_nap(struct collector *c, int64_t ns)
{
	int64_t until = clock_mono_ns() + ns;
	while (!atomic_load(&c->stopping) && clock_mono_ns() < until)
		if (mono_cond_wait_until(&c->wake, &c->lock, until) == ETIMEDOUT)
			break;
	return atomic_load(&c->stopping);
}

/* A lane's timer fired: if its call has run past handoff_ns, leave the
 * lane with that GPU and move the others to a new lane now, long before
 * the deadline marks the GPU stale, so that their samples keep their
 * period; otherwise look again when the call in flight would reach it.
 * Called with c->lock held. */
static void handoff_check(struct collector *c, struct lane *l, int64_t now)
{
	int gi = atomic_load(&l->current_gpu);
	int64_t start = atomic_load(&l->watch.start_ns);
	if (gi < 0 || atomic_load(&l->orphan) || atomic_load(&l->done))
		return;   /* between reads, or already handed off */
	if (!start || now - start < c->handoff_ns) {
		lane_arm(l, start ? start + c->handoff_ns - now : c->handoff_ns);
		return;
	}
	bool others = false;
	for (int k = 0; k < c->ngpu; k++)
		if (k != gi && c->gpu[k]->lane == l->id && !atomic_load(&c->gpu[k]->lost))
			others = true;
	if (!others)
		return;
	atomic_store(&l->orphan, true);
	if (lane_spawn(c, l->id, gi) != GPULSE_OK) {
		atomic_store(&l->orphan, false);
		log_error("cannot start a new collector lane");
		return;
	}
	atomic_fetch_add(&c->handoffs, 1);
	log_debug("GPU %d: %s has run %.0f ms; the other GPUs move to a new lane",
		  c->gpu[gi]->index, nvml_fn_name((enum nvml_fn)atomic_load(&l->watch.fn)),
		  (double)(now - start) / NS_PER_MS);
}

static void *watchdog_main(void *arg)
{
	struct collector *c = arg;
	pthread_setname_np(pthread_self(), "gpulse-watchdog");
	int64_t period = c->cfg.call_deadline_ns / 4;
	if (period < 10 * NS_PER_MS)
		period = 10 * NS_PER_MS;
	pthread_mutex_lock(&c->lock);
	while (!atomic_load(&c->stopping)) {
		/* Sleep until the next deadline check, a lane's timer or stop. */
		struct pollfd pfd[LANES_MAX + 1];
		int lane_of[LANES_MAX + 1];
		nfds_t n = 0;
		if (c->stop_fd >= 0)
			pfd[n++] = (struct pollfd){.fd = c->stop_fd, .events = POLLIN};
		for (int i = 0; i < c->nlanes; i++) {
			struct lane *l = c->lanes[i];
			if (l->timer_fd < 0 || atomic_load(&l->done))
				continue;
			lane_of[n] = i;
			pfd[n++] = (struct pollfd){.fd = l->timer_fd, .events = POLLIN};
		}
		pthread_mutex_unlock(&c->lock);
		int ready = poll(pfd, n, (int)(period / NS_PER_MS));
		pthread_mutex_lock(&c->lock);
		if (atomic_load(&c->stopping))
			break;
		int64_t now = clock_mono_ns();
		for (nfds_t k = 0; ready > 0 && k < n; k++) {
			if (!(pfd[k].revents & POLLIN) || pfd[k].fd == c->stop_fd)
				continue;
			uint64_t expirations;
			if (read(pfd[k].fd, &expirations, sizeof expirations) < 0)
				continue;
			handoff_check(c, c->lanes[lane_of[k]], now);
		}
		for (int i = 0; i < c->nlanes; i++) {
			struct lane *l = c->lanes[i];
			int64_t start = atomic_load(&l->watch.start_ns);
			int gi = atomic_load(&l->current_gpu);
			if (!start || gi < 0 || now - start < c->cfg.call_deadline_ns)
				continue;
			struct gpu_ctx *g = c->gpu[gi];
			if (atomic_load(&g->stalled))
				continue;
			atomic_store(&g->stalled, true);
			atomic_store(&l->marked_stale, true);
			atomic_fetch_add(&c->stalls, 1);
			char why[96];
			snprintf(why, sizeof why, "%s has not returned for %.1f s",
				 nvml_fn_name((enum nvml_fn)atomic_load(&l->watch.fn)),
				 (double)(now - start) / NS_PER_SEC);
			bus_set_health(c->bus, g->slot, GPU_HEALTH_STALE, why);
			log_error("GPU %d: %s; marking it stale, the other GPUs go on", g->index, why);
			/* Leave the stuck lane alone with this GPU; the others
			 * move to a fresh lane (already done when the call ran
			 * past handoff_ns and a lane could be started then). */
			if (!atomic_load(&l->orphan)) {
				bool others = false;
				for (int k = 0; k < c->ngpu; k++)
					if (k != gi && c->gpu[k]->lane == l->id)
						others = true;
				atomic_store(&l->orphan, true);
				if (others && lane_spawn(c, l->id, gi) != GPULSE_OK)
					log_error("cannot start a new collector lane");
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Register one GPU for XID and ECC events. */
static void events_register(struct collector *c, struct gpu_ctx *g)
{
	struct nvml_lib *nv = c->nv;
	if (!c->event_set || !nv->device_register_events)
		return;
	unsigned long long want = NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR |
				  NVML_ABI_EVENT_TYPE_SINGLE_BIT_ECC_ERROR |
				  NVML_ABI_EVENT_TYPE_DOUBLE_BIT_ECC_ERROR;
	unsigned long long supported = want;
	if (nv->device_get_supported_event_types &&
	    NVML_CALL(nv, device_get_supported_event_types, g->dev, &supported) == NVML_ABI_SUCCESS)
		want &= supported;
	if (!want)
		return;
	nvml_return_t r = NVML_CALL(nv, device_register_events, g->dev, want, c->event_set);
	if (r != NVML_ABI_SUCCESS)
		log_warn("GPU %d: cannot register for XID/ECC events: %s", g->index,
			 nvml_lib_strerror(nv, r));
}

static void *events_main(void *arg)
{
	struct collector *c = arg;
	struct nvml_lib *nv = c->nv;
	struct complaint cpl = {0};
	pthread_setname_np(pthread_self(), "gpulse-events");
	while (!atomic_load(&c->stopping)) {
		struct nvml_event_data ev;
		memset(&ev, 0, sizeof ev);
		nvml_return_t r = NVML_CALL(nv, event_set_wait, c->event_set, &ev, EVENT_WAIT_MS);
		if (r == NVML_ABI_ERROR_TIMEOUT)
			continue;
		if (r != NVML_ABI_SUCCESS) {
			atomic_fetch_add(&c->event_errors, 1);
			complain(&cpl, "waiting for NVML events failed: %s", nvml_lib_strerror(nv, r));
			clock_sleep_until(clock_mono_ns() + EVENT_WAIT_MS * NS_PER_MS);
			continue;
		}
		atomic_fetch_add(&c->events_seen, 1);
		int slot = -1, index = -1;
		bool xid = ev.event_type & NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR;
		pthread_mutex_lock(&c->lock);
		for (int i = 0; i < c->ngpu; i++) {
			if (c->gpu[i]->dev == ev.device) {
				slot = c->gpu[i]->slot;
				index = c->gpu[i]->index;
				if (xid)
					adapt_note_xid(&c->gpu[i]->adapt);
			}
		}
		pthread_mutex_unlock(&c->lock);
		if (slot < 0)
			continue;
		if (xid) {
			bus_note_xid(c->bus, slot, (uint32_t)ev.event_data, clock_wall_ns());
			log_warn("GPU %d: XID %llu", index, ev.event_data);
		}
		if (ev.event_type & NVML_ABI_EVENT_TYPE_SINGLE_BIT_ECC_ERROR)
			bus_note_ecc_event(c->bus, slot, false);
		if (ev.event_type & NVML_ABI_EVENT_TYPE_DOUBLE_BIT_ECC_ERROR) {
			bus_note_ecc_event(c->bus, slot, true);
			log_error("GPU %d: uncorrectable (double-bit) ECC error", index);
		}
	}
	return NULL;
}

void collector_read_identity(struct nvml_lib *nv, nvml_device_t dev, int index,
			     struct gpu_identity *id)
{
	memset(id, 0, sizeof *id);
	id->index = index;
	id->mig_mode = -1;
	id->minor_number = -1;
	snprintf(id->source, sizeof id->source, "nvml");
	if (nv->device_get_uuid)
		NVML_CALL(nv, device_get_uuid, dev, id->uuid, sizeof id->uuid);
	if (nv->device_get_name)
		NVML_CALL(nv, device_get_name, dev, id->name, sizeof id->name);
	if (nv->device_get_serial)
		if (NVML_CALL(nv, device_get_serial, dev, id->serial, sizeof id->serial) != NVML_ABI_SUCCESS)
			id->serial[0] = '\0';
	if (nv->device_get_pci_info) {
		struct nvml_pci_info pci;
		memset(&pci, 0, sizeof pci);
		if (NVML_CALL(nv, device_get_pci_info, dev, &pci) == NVML_ABI_SUCCESS)
			snprintf(id->pci_bus_id, sizeof id->pci_bus_id, "%s", pci.bus_id);
	}
	unsigned minor;
	if (nv->device_get_minor_number &&
	    NVML_CALL(nv, device_get_minor_number, dev, &minor) == NVML_ABI_SUCCESS && minor < 256)
		id->minor_number = (int)minor;
	if (nv->system_get_driver_version)
		NVML_CALL(nv, system_get_driver_version, id->driver_version, sizeof id->driver_version);
	if (nv->system_get_nvml_version)
		NVML_CALL(nv, system_get_nvml_version, id->nvml_version, sizeof id->nvml_version);
	int cuda = 0;
	if (nv->system_get_cuda_driver_version &&
	    NVML_CALL(nv, system_get_cuda_driver_version, &cuda) == NVML_ABI_SUCCESS && cuda > 0)
		snprintf(id->cuda_version, sizeof id->cuda_version, "%d.%d", cuda / 1000, (cuda % 1000) / 10);
	unsigned arch;
	static const char *const arch_names[] = {
		[NVML_ABI_DEVICE_ARCH_KEPLER] = "kepler", [NVML_ABI_DEVICE_ARCH_MAXWELL] = "maxwell",
		[NVML_ABI_DEVICE_ARCH_PASCAL] = "pascal", [NVML_ABI_DEVICE_ARCH_VOLTA] = "volta",
		[NVML_ABI_DEVICE_ARCH_TURING] = "turing", [NVML_ABI_DEVICE_ARCH_AMPERE] = "ampere",
		[NVML_ABI_DEVICE_ARCH_ADA] = "ada", [NVML_ABI_DEVICE_ARCH_HOPPER] = "hopper",
		[10] = "blackwell",
	};
	if (nv->device_get_architecture &&
	    NVML_CALL(nv, device_get_architecture, dev, &arch) == NVML_ABI_SUCCESS)
		snprintf(id->architecture, sizeof id->architecture, "%s",
			 arch < sizeof arch_names / sizeof arch_names[0] && arch_names[arch]
				 ? arch_names[arch] : "unknown");
	if (nv->device_get_cuda_compute_capability)
		NVML_CALL(nv, device_get_cuda_compute_capability, dev, &id->cc_major, &id->cc_minor);
	unsigned cur, pend;
	if (nv->device_get_mig_mode &&
	    NVML_CALL(nv, device_get_mig_mode, dev, &cur, &pend) == NVML_ABI_SUCCESS)
		id->mig_mode = cur == NVML_ABI_FEATURE_ENABLED;
	unsigned v;
	if (nv->device_get_max_clock_info) {
		if (NVML_CALL(nv, device_get_max_clock_info, dev, NVML_ABI_CLOCK_SM, &v) == NVML_ABI_SUCCESS)
			id->max_sm_clock_hz = v * 1e6;
		if (NVML_CALL(nv, device_get_max_clock_info, dev, NVML_ABI_CLOCK_MEM, &v) == NVML_ABI_SUCCESS)
			id->max_mem_clock_hz = v * 1e6;
	}
	if (nv->device_get_max_pcie_link_generation &&
	    NVML_CALL(nv, device_get_max_pcie_link_generation, dev, &v) == NVML_ABI_SUCCESS)
		id->pcie_max_gen = v;
	if (nv->device_get_max_pcie_link_width &&
	    NVML_CALL(nv, device_get_max_pcie_link_width, dev, &v) == NVML_ABI_SUCCESS)
		id->pcie_max_width = v;
	if (nv->device_get_memory_bus_width &&
	    NVML_CALL(nv, device_get_memory_bus_width, dev, &v) == NVML_ABI_SUCCESS)
		id->memory_bus_width_bits = v;
	if (nv->device_get_num_gpu_cores &&
	    NVML_CALL(nv, device_get_num_gpu_cores, dev, &v) == NVML_ABI_SUCCESS)
		id->cuda_cores = v;
	if (nv->gpm_query_device_support && nv->gpm_sample_get && nv->gpm_metrics_get &&
	    nv->gpm_sample_alloc && nv->gpm_sample_free) {
		struct nvml_gpm_support s = {.version = NVML_ABI_GPM_SUPPORT_VERSION};
		if (NVML_CALL(nv, gpm_query_device_support, dev, &s) == NVML_ABI_SUCCESS)
			id->gpm_supported = s.is_supported_device != 0;
	}
	/* NVLinks present: NVML's link count, else the links whose state
	 * answers. A card without NVLink answers neither: unknown, not 0. */
	if (nv->device_get_field_values) {
		struct nvml_field_value fv;
		fv_ask(&fv, NVML_ABI_FI_DEV_NVLINK_LINK_COUNT, 0);
		if (NVML_CALL(nv, device_get_field_values, dev, 1, &fv) == NVML_ABI_SUCCESS &&
		    fv.nvml_return == NVML_ABI_SUCCESS && fv_number(&fv) >= 0) {
			id->nvlink_count_valid = true;
			id->nvlink_count = (int)fv_number(&fv);
		}
	}
	if (!id->nvlink_count_valid && nv->device_get_nvlink_state) {
		int links = 0, state;
		while (links < NVML_ABI_NVLINK_MAX_LINKS &&
		       NVML_CALL(nv, device_get_nvlink_state, dev, (unsigned)links, &state) == NVML_ABI_SUCCESS)
			links++;
		if (links > 0) {
			id->nvlink_count_valid = true;
			id->nvlink_count = links;
		}
	}
	if (!id->uuid[0])
		snprintf(id->uuid, sizeof id->uuid, "index-%d", index);
}

/* How every GPU reaches every other one: the closest common ancestor on
 * the PCIe tree (n(n-1)/2 nvmlDeviceGetTopologyCommonAncestor calls) and
 * the NVLinks that go straight to each peer (one remote-PCI call per link
 * of each GPU; a link that ends at an NVSwitch or elsewhere counts for no
 * peer). Topology changes only as GPUs come and go, so this runs at
 * discovery and when re-discovery adds a GPU or gets one back; lost GPUs
 * are left out until they return. Called without c->lock. */
static void topology_refresh(struct collector *c)
{
	struct nvml_lib *nv = c->nv;
	struct member {
		nvml_device_t dev;
		int index, slot, nlinks;
		bool alive;
		char bus_id[32];
	} m[GPU_MAX];
	pthread_mutex_lock(&c->lock);
	int n = c->ngpu;
	for (int i = 0; i < n; i++) {
		const struct gpu_ctx *g = c->gpu[i];
		m[i] = (struct member){.dev = g->dev, .index = g->index, .slot = g->slot,
				       .nlinks = g->id.nvlink_count_valid ? g->id.nvlink_count : 0,
				       .alive = !atomic_load(&g->lost)};
		snprintf(m[i].bus_id, sizeof m[i].bus_id, "%s", g->id.pci_bus_id);
	}
	pthread_mutex_unlock(&c->lock);
	if (n < 2)
		return;   /* one GPU: no pairs */

	int level[GPU_MAX][GPU_MAX], links_to[GPU_MAX][GPU_MAX];   /* 32 KiB of stack */
	bool links_known[GPU_MAX] = {false};
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			level[i][j] = -1, links_to[i][j] = 0;
	for (int i = 0; i < n && !atomic_load(&c->stopping); i++) {
		if (!m[i].alive)
			continue;
		for (int j = i + 1; j < n && nv->device_get_topology_common_ancestor; j++) {
			int lv;
			if (m[j].alive && NVML_CALL(nv, device_get_topology_common_ancestor, m[i].dev,
						   m[j].dev, &lv) == NVML_ABI_SUCCESS && lv >= 0)
				level[i][j] = level[j][i] = lv;
		}
		int nl = m[i].nlinks < NVML_ABI_NVLINK_MAX_LINKS ? m[i].nlinks : NVML_ABI_NVLINK_MAX_LINKS;
		for (int l = 0; l < nl && nv->device_get_nvlink_remote_pci_info; l++) {
			struct nvml_pci_info pci;
			memset(&pci, 0, sizeof pci);
			nvml_return_t r = NVML_CALL(nv, device_get_nvlink_remote_pci_info, m[i].dev,
						    (unsigned)l, &pci);
			if (r != NVML_ABI_SUCCESS)
				continue;   /* an inactive link reaches nothing */
			links_known[i] = true;
			for (int j = 0; j < n; j++)
				if (j != i && m[j].bus_id[0] && strcasecmp(pci.bus_id, m[j].bus_id) == 0)
					links_to[i][j]++;
		}
	}
	for (int i = 0; i < n; i++) {
		if (!m[i].alive)
			continue;
		struct gpu_peer peers[GPU_MAX - 1];
		int np = 0;
		for (int j = 0; j < n; j++) {
			if (j == i || !m[j].alive || (level[i][j] < 0 && !links_known[i]))
				continue;
			peers[np++] = (struct gpu_peer){.index = m[j].index, .level = level[i][j],
							.nvlinks = links_known[i] ? links_to[i][j] : -1};
		}
		pthread_mutex_lock(&c->lock);
		memcpy(c->gpu[i]->id.peers, peers, (size_t)np * sizeof peers[0]);
		c->gpu[i]->id.npeers = np;
		pthread_mutex_unlock(&c->lock);
		bus_set_peers(c->bus, m[i].slot, peers, np);
	}
}

/* Attach a newly found device. Called with c->lock held. */
static struct gpu_ctx *gpu_add(struct collector *c, nvml_device_t dev, int index)
{
	if (c->ngpu >= GPU_MAX) {
		log_warn("GPU %d ignored: gpulse watches at most %d GPUs", index, GPU_MAX);
		return NULL;
	}
	struct gpu_ctx *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->dev = dev;
	g->index = index;
	adapt_init(&g->adapt);
	collector_read_identity(c->nv, dev, index, &g->id);
	if (bus_attach_gpu(c->bus, &g->id, &g->slot) != GPULSE_OK) {
		free(g);
		return NULL;
	}
	if (c->cfg.gpm && g->id.gpm_supported) {
		if (NVML_CALL(c->nv, gpm_sample_alloc, &g->gpm_prev) == NVML_ABI_SUCCESS &&
		    NVML_CALL(c->nv, gpm_sample_alloc, &g->gpm_cur) == NVML_ABI_SUCCESS)
			g->gpm = true;
	}
	int64_t now = clock_mono_ns();
	for (int t = 0; t < TIER_COUNT; t++)
		g->next_due[t] = now;
	g->lane = 0;
	c->gpu[c->ngpu++] = g;
	log_info("GPU %d: %s %s %s%s", index, g->id.name, g->id.uuid, g->id.pci_bus_id,
		 g->gpm ? ", GPM metrics on" : ", no GPM");
	return g;
}

/* Look for lost GPUs coming back and for GPUs that were not there. */
static void rediscover(struct collector *c)
{
	struct nvml_lib *nv = c->nv;
	unsigned count = 0;
	bool changed = false;   /* a GPU came or came back: the topology changed */
	if (NVML_CALL(nv, device_get_count, &count) != NVML_ABI_SUCCESS)
		return;
	for (unsigned i = 0; i < count && !atomic_load(&c->stopping); i++) {
		nvml_device_t dev;
		if (NVML_CALL(nv, device_get_handle_by_index, i, &dev) != NVML_ABI_SUCCESS)
			continue;
		char uuid[96] = "";
		if (!nv->device_get_uuid ||
		    NVML_CALL(nv, device_get_uuid, dev, uuid, sizeof uuid) != NVML_ABI_SUCCESS)
			continue;
		pthread_mutex_lock(&c->lock);
		struct gpu_ctx *known = NULL;
		for (int k = 0; k < c->ngpu; k++)
			if (strcmp(c->gpu[k]->id.uuid, uuid) == 0)
				known = c->gpu[k];
		if (!known) {
			struct gpu_ctx *g = gpu_add(c, dev, (int)i);
			if (g) {
				/* New GPUs join a lane that is not stuck. */
				int to = live_lane(c, -1);
				g->lane = to >= 0 ? to : 0;
				events_register(c, g);
				changed = true;
			}
			mono_cond_broadcast(&c->wake);
			pthread_mutex_unlock(&c->lock);
			continue;
		}
		bool was_lost = atomic_load(&known->lost);
		pthread_mutex_unlock(&c->lock);
		if (!was_lost)
			continue;
		/* A cheap call proves the GPU answers before it rejoins. */
		unsigned mw;
		nvml_return_t r = nv->device_get_power_usage
					  ? NVML_CALL(nv, device_get_power_usage, dev, &mw)
					  : NVML_ABI_SUCCESS;
		if (r == NVML_ABI_ERROR_GPU_IS_LOST)
			continue;
		pthread_mutex_lock(&c->lock);
		known->dev = dev;
		known->index = (int)i;
		known->gpm_primed = false;
		known->gpm_samples = 0;
		int64_t now = clock_mono_ns();
		for (int t = 0; t < TIER_COUNT; t++)
			known->next_due[t] = now;
		atomic_store(&known->lost, false);
		events_register(c, known);
		mono_cond_broadcast(&c->wake);
		pthread_mutex_unlock(&c->lock);
		bus_set_health(c->bus, known->slot, GPU_HEALTH_UP, "");
		atomic_fetch_add(&c->rediscoveries, 1);
		log_info("GPU %d (%s) is back", (int)i, known->id.uuid);
		changed = true;
	}
	if (changed)
		topology_refresh(c);
}

static void *discovery_main(void *arg)
{
	struct collector *c = arg;
	pthread_setname_np(pthread_self(), "gpulse-discover");
	nvml_current_watch = &c->discovery_watch;
	for (;;) {
		pthread_mutex_lock(&c->lock);
		bool stop = collector_nap(c, c->cfg.rediscover_ns);
		pthread_mutex_unlock(&c->lock);
		if (stop)
			break;
		rediscover(c);
	}
	return NULL;
}

/* ---- start and stop -------------------------------------------------- */

int collector_start(struct collector **out, struct bus *bus,
		    const struct collector_config *cfg, char *err, size_t errlen)
{
	*out = NULL;
	struct nvml_lib *nv = NULL;
	int rc = nvml_lib_open(&nv, cfg->nvml_path, err, errlen);
	if (rc)
		return rc;
	struct collector *c = calloc(1, sizeof *c);
	if (!c) {
		nvml_lib_close(nv);
		snprintf(err, errlen, "out of memory");
		return GPULSE_ENOMEM;
	}
	c->cfg = *cfg;
	c->bus = bus;
	c->nv = nv;
	memcpy(c->period_ns, cfg->period_ns, sizeof c->period_ns);
	c->adapt = cfg->adapt;
	/* Half a fast period: the slowest sound call (energy) takes 4 ms on
	 * the H200, so a call this long is holding the other GPUs up. */
	c->handoff_ns = cfg->period_ns[TIER_FAST] / 2;
	if (c->handoff_ns < 10 * NS_PER_MS)
		c->handoff_ns = 10 * NS_PER_MS;
	if (c->handoff_ns > cfg->call_deadline_ns)
		c->handoff_ns = cfg->call_deadline_ns;
	c->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&c->lock, NULL);
	mono_cond_init(&c->wake);
	for (int t = 0; t < TIER_COUNT; t++)
		bus_set_stale_after(bus, (enum tier)t, 3 * cfg->period_ns[t] + cfg->call_deadline_ns);

	unsigned count = 0;
	nvml_return_t r = NVML_CALL(nv, device_get_count, &count);
	if (r != NVML_ABI_SUCCESS) {
		snprintf(err, errlen, "nvmlDeviceGetCount failed: %s", nvml_lib_strerror(nv, r));
		rc = GPULSE_EVENDOR;
		goto fail;
	}
	if (cfg->events && nv->event_set_create && nv->event_set_wait &&
	    NVML_CALL(nv, event_set_create, &c->event_set) != NVML_ABI_SUCCESS)
		c->event_set = NULL;
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < count; i++) {
		nvml_device_t dev;
		r = NVML_CALL(nv, device_get_handle_by_index, i, &dev);
		if (r != NVML_ABI_SUCCESS) {
			log_warn("GPU %u: cannot open: %s; will retry", i, nvml_lib_strerror(nv, r));
			continue;
		}
		struct gpu_ctx *g = gpu_add(c, dev, (int)i);
		if (g)
			events_register(c, g);
	}
	if (count == 0)
		log_warn("NVML found no GPUs; will look again every %.0f s",
			 (double)cfg->rediscover_ns / NS_PER_SEC);
	pthread_mutex_unlock(&c->lock);
	topology_refresh(c);
	pthread_mutex_lock(&c->lock);
	rc = lane_spawn(c, -1, -1);
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		snprintf(err, errlen, "cannot start the collector thread");
		goto fail;
	}
	pthread_create(&c->watchdog, NULL, watchdog_main, c);
	c->have_discovery = pthread_create(&c->discovery, NULL, discovery_main, c) == 0;
	if (c->event_set)
		c->have_events = pthread_create(&c->events, NULL, events_main, c) == 0;
	*out = c;
	return GPULSE_OK;
fail:
	nvml_lib_close(nv);
	if (c->stop_fd >= 0)
		close(c->stop_fd);
	pthread_mutex_destroy(&c->lock);
	mono_cond_destroy(&c->wake);
	free(c);
	return rc;
}

/* Join a thread, but give up after `ms`: a thread stuck inside NVML is
 * left behind rather than hanging shutdown. true when joined. */
static bool join_within(pthread_t t, int ms)
{
	/* On the monotonic clock: a step of the system's time must not
	 * stretch or cut the wait. */
	int64_t until = clock_mono_ns() + (int64_t)ms * NS_PER_MS;
	struct timespec ts = {.tv_sec = until / NS_PER_SEC, .tv_nsec = until % NS_PER_SEC};
	if (pthread_clockjoin_np(t, NULL, CLOCK_MONOTONIC, &ts) == 0)
		return true;
	pthread_detach(t);
	return false;
}

void collector_stop(struct collector *c)
{
	if (!c)
		return;
	atomic_store(&c->stopping, true);
	pthread_mutex_lock(&c->lock);
	mono_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->lock);
	if (c->stop_fd >= 0 && write(c->stop_fd, &(uint64_t){1}, sizeof(uint64_t)) < 0)
		log_warn("cannot wake the collector watchdog: %s", strerror(errno));
	bool clean = true;
	join_within(c->watchdog, 2000);
	if (c->have_discovery)
		clean &= join_within(c->discovery, 3000);
	if (c->have_events)
		clean &= join_within(c->events, 3000);
	for (int i = 0; i < c->nlanes; i++) {
		struct lane *l = c->lanes[i];
		bool joined = join_within(l->thread, 3000);
		clean &= joined;
		if (joined)
			lane_free(l);
	}
	if (!clean) {
		/* A thread is still inside NVML: shutting NVML down or freeing
		 * what it uses would crash it. Leak, and say so. */
		log_warn("an NVML call is still stuck; leaving NVML open at exit");
		return;
	}
	for (int i = 0; i < c->ngpu; i++) {
		struct gpu_ctx *g = c->gpu[i];
		if (g->gpm) {
			NVML_CALL(c->nv, gpm_sample_free, g->gpm_prev);
			NVML_CALL(c->nv, gpm_sample_free, g->gpm_cur);
		}
		for (int k = 0; k < GPU_MIG_MAX && c->nv->gpm_sample_free; k++) {
			if (g->mig_prev[k])
				NVML_CALL(c->nv, gpm_sample_free, g->mig_prev[k]);
			if (g->mig_cur[k])
				NVML_CALL(c->nv, gpm_sample_free, g->mig_cur[k]);
		}
		free(g->proc_samples);
		free(g);
	}
	if (c->event_set && c->nv->event_set_free)
		NVML_CALL(c->nv, event_set_free, c->event_set);
	nvml_lib_close(c->nv);
	if (c->stop_fd >= 0)
		close(c->stop_fd);
	pthread_mutex_destroy(&c->lock);
	mono_cond_destroy(&c->wake);
	free(c);
}

struct nvml_lib *collector_nvml(struct collector *c)
{
	return c->nv;
}

void collector_get_stats(struct collector *c, struct collector_stats *out)
{
	memset(out, 0, sizeof *out);
	out->lanes_started = atomic_load(&c->lanes_started);
	out->stalls = atomic_load(&c->stalls);
	out->handoffs = atomic_load(&c->handoffs);
	out->events = atomic_load(&c->events_seen);
	out->event_errors = atomic_load(&c->event_errors);
	out->rediscoveries = atomic_load(&c->rediscoveries);
	for (int t = 0; t < TIER_COUNT; t++)
		out->sweeps[t] = atomic_load(&c->sweeps[t]);
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < c->nlanes; i++)
		out->lanes_alive += !atomic_load(&c->lanes[i]->done);
	int64_t now = clock_mono_ns();
	for (int i = 0; i < c->ngpu; i++) {
		struct adapt_state *a = &c->gpu[i]->adapt;
		for (int k = 0; k < AG_COUNT; k++) {
			out->adaptive_reads[k] += atomic_load(&a->reads[k]);
			out->adaptive_skips[k] += atomic_load(&a->skips[k]);
		}
		for (int k = 0; k < AC_COUNT; k++)
			out->moves[k] += atomic_load(&a->moves[k]);
		out->gpus_moving += adapt_is_moving(a, now);
	}
	pthread_mutex_unlock(&c->lock);
}

void collector_set_periods(struct collector *c, const int64_t period_ns[TIER_COUNT])
{
	pthread_mutex_lock(&c->lock);
	memcpy(c->period_ns, period_ns, sizeof c->period_ns);
	int64_t now = clock_mono_ns();
	for (int i = 0; i < c->ngpu; i++)
		for (int t = 0; t < TIER_COUNT; t++)
			if (c->gpu[i]->next_due[t] > now + period_ns[t])
				c->gpu[i]->next_due[t] = now + period_ns[t];
	for (int t = 0; t < TIER_COUNT; t++)
		bus_set_stale_after(c->bus, (enum tier)t, 3 * period_ns[t] + c->cfg.call_deadline_ns);
	mono_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->lock);
}

void collector_set_adapt(struct collector *c, const struct adapt_config *ac)
{
	pthread_mutex_lock(&c->lock);
	c->adapt = *ac;
	pthread_mutex_unlock(&c->lock);
}

int collector_raise(struct collector *c, int slot, int64_t duration_ns)
{
	int rc = GPULSE_ENOENT;
	int64_t until = clock_mono_ns() + duration_ns;
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < c->ngpu; i++) {
		if (c->gpu[i]->slot == slot) {
			adapt_raise(&c->gpu[i]->adapt, until);
			rc = GPULSE_OK;
		}
	}
	/* The GPU's tiers are on their ceiling grid already: nothing to
	 * wake, the next sweep reads every group. */
	pthread_mutex_unlock(&c->lock);
	return rc;
}

bool gpu_snapshot_holds(const struct gpu_snapshot *s, const struct attrib_allocation *al)
{
	if (al->job[0])
		return al->minor >= 0 && s->id.minor_number == al->minor;
	if (attrib_device_matches(al->device_id, s->id.uuid))
		return true;
	for (int k = 0; s->mig_valid && k < s->nmig && k < GPU_MIG_MAX; k++)
		if (attrib_device_matches(al->device_id, s->mig[k].uuid))
			return true;
	return false;
}
