/* Who a GPU process belongs to: its cgroup, container, Kubernetes pod,
 * Slurm job and Unix user, as the attribution module resolves them
 * (attrib.h). Plain fixed-size strings so that the struct can travel in
 * the sample bus by copy; each is empty when unknown, NUL-terminated,
 * valid UTF-8 and at most its size - 1 bytes (longer values are cut at a
 * character boundary). */
#ifndef GPULSE_OWNER_H
#define GPULSE_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OWNER_CGROUP_LEN 256   /* a Kubernetes systemd-driver path is ~190 bytes */
#define OWNER_NAME_LEN 64      /* pod, namespace, container: label values, 63 bytes */
#define OWNER_ID_LEN 65        /* container ID: 64 hex digits */
#define OWNER_SHORT_LEN 40     /* runtime, pod UID, job ID, step, user names */

/* The fields, in the order labels and the info series show them. */
enum owner_field {
	OWNER_CGROUP,
	OWNER_RUNTIME,
	OWNER_CONTAINER_ID,
	OWNER_POD_UID,
	OWNER_POD,
	OWNER_NAMESPACE,
	OWNER_CONTAINER,
	OWNER_JOB,
	OWNER_JOB_USER,
	OWNER_USER,
	OWNER_FIELD_COUNT
};

/* attribution.labels' default: bounded by the workloads, not the
 * processes (no cgroup path, container or pod UID, which change with every
 * restart). */
#define OWNER_DEFAULT_LABELS                                                              \
	(1u << OWNER_CONTAINER | 1u << OWNER_POD | 1u << OWNER_NAMESPACE | 1u << OWNER_JOB |   \
	 1u << OWNER_USER)

struct proc_owner {
	bool resolved;                         /* /proc was read for this process */
	uint16_t labels;                       /* the OWNER_* fields shown as labels */
	char cgroup[OWNER_CGROUP_LEN];         /* the unified (or memory) hierarchy path */
	char runtime[OWNER_SHORT_LEN];         /* containerd, cri-o, docker, podman */
	char container_id[OWNER_ID_LEN];
	char pod_uid[OWNER_SHORT_LEN];         /* with dashes, as Kubernetes writes it */
	char pod[OWNER_NAME_LEN];              /* names from the kubelet's pod-resources API */
	char namespace_[OWNER_NAME_LEN];
	char container[OWNER_NAME_LEN];
	char job[OWNER_SHORT_LEN];             /* Slurm job ID */
	char job_user[OWNER_SHORT_LEN];        /* Slurm job user (SLURM_JOB_USER) */
	char user[OWNER_SHORT_LEN];            /* Unix user of the process (real UID) */
	bool env_pending;                      /* environ not read yet (attrib_update_owner) */
	uint64_t start_ticks;                  /* the process's start time, for the cache */
	char hostname[OWNER_NAME_LEN];         /* HOSTNAME of its environment: in a pod,
						* the pod's name; used to tell pods
						* apart, not exported */
};

/* The label name of field f ("cgroup", "runtime", "container_id",
 * "pod_uid", "pod", "namespace", "container", "job", "job_user", "user"). */
const char *owner_field_name(enum owner_field f);
/* Field f of o (never NULL; "" when unknown). */
const char *owner_field_value(const struct proc_owner *o, enum owner_field f);
/* The field with this label name, or -1. */
int owner_field_by_name(const char *name);

/* "pod/container" or "namespace/pod", a job, a container ID, a user: the
 * shortest name that says whose the process is, for one column of
 * `gpulse status` and `gpulse top`. Writes "" when nothing is known. */
void owner_summary(const struct proc_owner *o, char *out, size_t outlen);

#endif
