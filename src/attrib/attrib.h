/* Attribution: who each GPU process belongs to. From /proc/PID (cgroup,
 * status, environ) it finds the cgroup, container, pod UID, Slurm job and
 * Unix user; the kubelet's pod-resources API (podres.h), refreshed on a
 * thread of its own, gives pod, namespace and container names and which
 * pod holds which GPU. Each process is read once: a bounded cache keyed by
 * PID and start time (so a reused PID is read again) serves every later
 * lookup. Nothing here calls the daemon or the exporters.
 *
 * Thread-safe: collector lanes resolve concurrently; the exporters read
 * allocations while the pod-resources thread replaces them. */
#ifndef GPULSE_ATTRIB_H
#define GPULSE_ATTRIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attrib/owner.h"

#define ATTRIB_CACHE_MAX 1024     /* processes remembered */
#define ATTRIB_USER_CACHE_MAX 256 /* UID -> name entries */
#define ATTRIB_ALLOC_MAX 1024     /* (pod, container, device) allocations kept */
#define ATTRIB_ENVIRON_MAX 65536  /* bytes of /proc/PID/environ read */
#define ATTRIB_ENV_QUEUE 256      /* environ reads waiting for the thread */

struct attrib_config {
	const char *proc_root;              /* NULL: "/proc" */
	const char *cgroup_root;            /* NULL or "": Slurm job devices not read */
	const char *pod_resources_socket;   /* NULL or "": pod-resources not used */
	int64_t pod_resources_refresh_ns;   /* 0: 10 s */
	int64_t pod_resources_timeout_ns;   /* one List call; 0: 2 s */
	uint16_t labels;                    /* OWNER_* bits shown as labels (attribution.labels) */
};

/* One device a pod's container holds, as the pod-resources API lists it,
 * or a GPU a Slurm job's cgroup allows (job set, pod empty, minor >= 0). */
struct attrib_allocation {
	char job[OWNER_SHORT_LEN];          /* Slurm: the job ID */
	char job_user[OWNER_SHORT_LEN];     /* Slurm: its owner, from uid_U */
	int minor;                          /* Slurm: N of /dev/nvidiaN; -1 for pods */
	char pod[OWNER_NAME_LEN];
	char namespace_[OWNER_NAME_LEN];
	char container[OWNER_NAME_LEN];
	char resource[OWNER_NAME_LEN];      /* "nvidia.com/gpu", "nvidia.com/mig-1g.18gb" */
	char device_id[96];                 /* a GPU or MIG UUID, maybe "::N" for a time-slice replica */
};

struct attrib_stats {
	uint64_t resolved_total;            /* processes read from /proc */
	uint64_t cache_hits_total;
	uint64_t cache_evictions_total;     /* entries pushed out by the bound */
	uint64_t proc_errors_total;         /* /proc/PID unreadable (gone, or no permission) */
	uint64_t cgroup_errors_total;       /* /proc/PID/cgroup malformed */
	uint64_t environ_truncated_total;   /* environ longer than ATTRIB_ENVIRON_MAX */
	uint64_t environ_skipped_total;     /* environ reads dropped: the queue was full */
	uint64_t labels_truncated_total;    /* values cut to their bound */
	bool podres_configured;
	bool podres_available;              /* the last List answered */
	uint64_t podres_refreshes_total;    /* successful List calls */
	uint64_t podres_failures_total;     /* failed ones (socket absent counts here) */
	uint64_t podres_allocations_dropped_total; /* beyond ATTRIB_ALLOC_MAX */
	size_t podres_allocations;
	char podres_last_error[160];        /* "" when the last call worked */
	bool slurm_configured;              /* cgroup_root set */
	uint64_t slurm_jobs;                /* Slurm jobs with GPU device rules, last scan */
	uint64_t slurm_scan_errors_total;   /* devices.list files that could not be read */
};

struct attrib;

/* Start attribution (and the pod-resources thread when a socket is
 * configured; a socket that is absent is retried at each refresh, counted,
 * never an error here). *out is freed with attrib_close. 0 or
 * GPULSE_ENOMEM. */
int attrib_open(struct attrib **out, const struct attrib_config *cfg);
/* Stop the thread and free everything. Accepts NULL. */
void attrib_close(struct attrib *a);

/* Fill `out` for process `pid` from /proc (cached by PID and start time).
 * A process that cannot be read gets out->resolved false and empty
 * fields. Pod names are not filled here: see attrib_name_pod.
 *
 * /proc/PID/environ (Slurm's job ID and user, a pod's HOSTNAME) is read
 * on attribution's own thread when it runs (a socket or cgroup_root is
 * configured): reading another process's memory takes its mmap lock,
 * which a process stuck in the driver may hold for ever, and a collector
 * lane must not wait on that. out->env_pending then says that those
 * fields are still to come: attrib_update_owner fills them. Without the
 * thread environ is read here. */
void attrib_resolve(struct attrib *a, uint32_t pid, struct proc_owner *out);

/* If out->env_pending and the thread has read the process's environment
 * since, copy the fields it gave into out and clear env_pending. No I/O. */
void attrib_update_owner(struct attrib *a, uint32_t pid, struct proc_owner *out);

/* Fill out->pod, namespace_ and container from the pod-resources
 * allocations of the GPU with these device IDs (its UUID, and the UUID of
 * the MIG instance the process runs on, or NULL) when out->pod_uid is set
 * and the allocations name exactly one pod for it (a time-sliced GPU held
 * by several pods is told apart by the process's HOSTNAME, which is its
 * pod's name). Clears them otherwise. Also sets out->labels to the
 * current attribution.labels, so a reload reaches processes already
 * seen. Cheap: no I/O. */
void attrib_name_pod(struct attrib *a, const char *gpu_uuid, const char *mig_uuid,
		     struct proc_owner *out);

/* Replace the allocations with n entries of `in` (n <= ATTRIB_ALLOC_MAX;
 * more are cut and counted): what each successful List does, and how
 * tests give a table without a kubelet. */
void attrib_set_allocations(struct attrib *a, const struct attrib_allocation *in, size_t n);

/* Copy up to `max` current allocations into out; returns how many. */
size_t attrib_allocations(struct attrib *a, struct attrib_allocation *out, size_t max);

/* From a cgroup v1 devices.list (`len` bytes), the GPUs it allows: bit N
 * of *minors for each "c 195:N" rule with N < 64 (/dev/nvidiaN; 254 and
 * 255 are nvidia-modeset and nvidiactl, not GPUs). False when the list
 * allows every device ("a *:*"), which names no GPU in particular. */
bool attrib_parse_devices_list(const char *text, size_t len, uint64_t *minors);

/* Every Slurm job under cgroup_root's v1 devices hierarchy
 * (devices/slurm/uid_U/job_J/devices.list) that is allowed some GPU:
 * one allocation per (job, GPU) into out[0..max); *n of them. Jobs past
 * max are counted in *dropped. Returns how many files could not be read. */
unsigned attrib_scan_slurm(const char *cgroup_root, struct attrib_allocation *out, size_t max,
			   size_t *n, size_t *dropped);

/* True when a pod-resources device ID names the device with this UUID:
 * equal, or the UUID followed by "::" and a replica number (the NVIDIA
 * device plugin's time-slicing IDs). */
bool attrib_device_matches(const char *device_id, const char *uuid);

void attrib_get_stats(struct attrib *a, struct attrib_stats *out);

/* The /proc in use ("/proc" for NULL), for the collector's comm reads. */
const char *attrib_proc_root(const struct attrib *a);

/* Change which fields later lookups mark as labels (a reload). */
void attrib_set_labels(struct attrib *a, uint16_t labels);

/* Parse the text of /proc/PID/status for the real UID ("Uid:\tR\tE\tS\tF").
 * 0, or GPULSE_EPARSE when there is no well-formed Uid line. */
int attrib_parse_status_uid(const char *text, size_t len, uint32_t *uid);

/* Find VAR's value in an environ block (NUL-separated "K=V" entries, `len`
 * bytes) and copy it into out[outlen] as a label value. True when found. */
bool attrib_environ_get(const char *env, size_t len, const char *var, char *out,
			size_t outlen);

#endif
