/* What collectors produce and the bus keeps: a GPU's identity, one tier's
 * reading (an update), and the merged latest state (a snapshot). Every
 * value carries a validity bit: an unreadable value is absent, never a
 * zero or a repeat (DESIGN.md, decision 2). */
#ifndef GPULSE_SAMPLE_H
#define GPULSE_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "collect/fields.h"
#include "attrib/owner.h"

#define GPU_MAX 64          /* GPUs one daemon watches */
#define GPU_PROC_MAX 64     /* processes kept per GPU; the rest are counted */
#define GPU_XID_MAX 32      /* distinct XID codes kept per GPU; the rest count as "other" */
#define GPU_COMM_LEN 16     /* like the kernel's TASK_COMM_LEN */
#define GPU_MIG_MAX 7       /* MIG instances per GPU (an A100/H100/H200 has at most 7) */

/* How this GPU reaches another one (read at discovery and re-discovery):
 * their closest common ancestor on the PCIe tree, NVML's level
 * (NVML_ABI_TOPOLOGY_*: 0 internal, 10 single switch, 20 multiple
 * switches, 30 host bridge, 40 NUMA node, 50 across the system; -1
 * unknown), and the NVLinks that go straight from this GPU to the peer
 * (-1 unknown: NVML named no remote end). */
struct gpu_peer {
	int index;                 /* the peer's NVML index: the peer_gpu label */
	int level;
	int nvlinks;
};

/* Facts about a GPU that do not change while it is attached. Strings are
 * empty when unreadable; numbers are 0 when unreadable. */
struct gpu_identity {
	int index;                 /* NVML index; the `gpu` label */
	char uuid[96];
	char name[96];             /* the `model` label */
	char pci_bus_id[32];
	char serial[32];
	char driver_version[32];
	char cuda_version[16];     /* "13.0" */
	char nvml_version[32];
	char architecture[16];     /* "hopper" */
	int cc_major, cc_minor;    /* CUDA compute capability */
	int mig_mode;              /* 1 enabled, 0 disabled, -1 unknown */
	int minor_number;          /* N of /dev/nvidiaN (cgroup device rules), -1 unknown */
	double max_sm_clock_hz;
	double max_mem_clock_hz;
	unsigned pcie_max_gen;
	unsigned pcie_max_width;
	unsigned memory_bus_width_bits;
	unsigned cuda_cores;
	bool gpm_supported;
	bool nvlink_count_valid;   /* NVML said how many NVLinks there are: */
	int nvlink_count;          /* that many (0: none) */
	int npeers;                /* the other GPUs of the host, when NVML told */
	struct gpu_peer peers[GPU_MAX - 1];
	char source[16];           /* "nvml" or "replay" */
};

struct gpu_process {
	uint32_t pid;
	char comm[GPU_COMM_LEN];
	bool mem_valid;
	bool util_valid;
	bool uid_valid;
	uint32_t uid;              /* owner (of /proc/PID), for the user column of `gpulse top` */
	uint64_t used_bytes;
	double sm_ratio;           /* per-process SM utilization, 0-1 */
	double mem_ratio;          /* per-process memory-controller utilization, 0-1 */
	bool in_mig;               /* runs in a MIG instance: */
	unsigned gpu_instance;     /* its GI id */
	struct proc_owner owner;   /* cgroup, container, pod, job, user (src/attrib) */
};

/* The GPM metrics read per MIG instance (nvmlGpmMigSampleGet). */
enum mig_gpm { MIG_GPM_SM_ACTIVE, MIG_GPM_SM_OCCUPANCY, MIG_GPM_TENSOR, MIG_GPM_DRAM, MIG_GPM_COUNT };

/* One MIG instance of a GPU in MIG mode: identity, memory, GPM (where the
 * driver offers GPM per instance). Values are valid only with their bit. */
struct gpu_mig {
	char uuid[96];             /* "MIG-..." as CUDA_VISIBLE_DEVICES names it */
	char profile[32];          /* "1g.18gb", from the instance's name */
	unsigned gpu_instance;     /* GI id */
	unsigned compute_instance; /* CI id */
	bool mem_valid;
	uint64_t mem_used_bytes, mem_total_bytes;
	uint32_t gpm_valid;        /* bit per enum mig_gpm */
	double gpm[MIG_GPM_COUNT]; /* 0-1 */
};

/* One tier's reading of one GPU, handed to the bus. `mask` says which
 * fields this update speaks for; of those, `valid` says which were read.
 * A field in mask but not in valid becomes absent in the snapshot. */
struct gpu_update {
	int gpu;                   /* bus slot */
	enum tier tier;
	int64_t wall_ns;           /* sample time, Unix epoch */
	uint64_t mask;
	uint64_t valid;
	double v[FIELD_COUNT];
	bool has_procs;            /* the process list below is part of this update */
	int nprocs;
	uint32_t procs_dropped;    /* processes beyond GPU_PROC_MAX */
	struct gpu_process procs[GPU_PROC_MAX];
	bool has_mig;              /* the MIG list below is part of this update */
	int nmig;
	struct gpu_mig mig[GPU_MIG_MAX];
};

enum gpu_health {
	GPU_HEALTH_UP,             /* answering */
	GPU_HEALTH_STALE,          /* a call is stuck past its deadline */
	GPU_HEALTH_LOST,           /* NVML says GPU_IS_LOST, or it vanished */
};

struct gpu_xid_count {
	uint32_t code;
	uint64_t count;
};

/* The health score of a GPU (src/diagnose/health.h computes it, from
 * the card's own error history; docs/internals/health.md): 100 healthy,
 * 0 worst; the points each reason took off and the evidence behind them.
 * Reasons are indices of health.h's table; this layer only holds them. */
#define GPU_HEALTH_REASON_MAX 16
#define GPU_HEALTH_EVIDENCE_LEN 120
struct gpu_health_score {
	bool valid;                        /* computed at least once */
	double score;                      /* 0-100 */
	bool drain;                        /* take the GPU out of service */
	int top_reason;                    /* reason that cost most (drain first), -1 none */
	double window_s;                   /* history the verdict rests on */
	double penalty[GPU_HEALTH_REASON_MAX];
	bool drains[GPU_HEALTH_REASON_MAX];
	char evidence[GPU_HEALTH_REASON_MAX][GPU_HEALTH_EVIDENCE_LEN]; /* "" none */
};

/* The merged latest state of one GPU, as readers see it. */
struct gpu_snapshot {
	struct gpu_identity id;
	enum gpu_health health;
	char health_reason[96];
	int64_t health_since_wall_ns;
	uint64_t valid;                    /* after staleness is applied */
	uint64_t stale;                    /* fields dropped because their tier is late */
	double v[FIELD_COUNT];
	int64_t tier_wall_ns[TIER_COUNT];  /* last update of each tier; 0 never */
	uint64_t samples[TIER_COUNT];      /* updates received per tier */
	bool procs_valid;
	int nprocs;
	uint32_t procs_dropped;
	struct gpu_process procs[GPU_PROC_MAX];
	bool mig_valid;                    /* a MIG list was read (MIG mode on) */
	int nmig;
	struct gpu_mig mig[GPU_MIG_MAX];
	int nxid;
	struct gpu_xid_count xid[GPU_XID_MAX];
	uint64_t xid_other;                /* XIDs whose code did not fit */
	int64_t last_xid_wall_ns;
	uint32_t last_xid;
	uint64_t ecc_events[2];            /* [0] single-bit, [1] double-bit events */
	uint64_t lost_total;               /* times the GPU was lost */
	/* The verdict of the live diagnosis on the last complete window
	 * (src/diagnose/live.h): a class index of diagnose.h, -1 while
	 * there is none. */
	int diag_class;
	unsigned diag_findings;
	double diag_window_end_s;
	struct gpu_health_score health_score; /* bus_set_health_score */
};

/* Whether a snapshot's values are late or stuck (gpulse_gpu_stale). */
/* The `source` label every series of this GPU carries, or NULL for none:
 * a replayed GPU's series say so (source="replay") wherever they go,
 * /metrics and the store alike, so that no dashboard, query or alert
 * takes a recording for hardware; a real GPU's series keep the label set
 * they always had (only gpulse_gpu_info says source="nvml"). */
static inline const char *gpu_source_label(const struct gpu_identity *id)
{
	return strcmp(id->source, "replay") == 0 ? "replay" : NULL;
}

static inline bool gpu_snapshot_is_stale(const struct gpu_snapshot *s)
{
	return s->health == GPU_HEALTH_STALE || (s->health == GPU_HEALTH_UP && s->stale != 0);
}

#endif
