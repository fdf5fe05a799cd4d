/* Parsing of /proc/PID/cgroup: which hierarchy to read, and what its path
 * says about the process: the container runtime and container ID, the
 * Kubernetes pod UID and QoS class, the Slurm job, step and UID. Pure
 * functions over strings, no I/O: the fuzz target fuzz_cgroup.c and the
 * unit tests call them directly.
 *
 * Layouts recognised (one path component each, anywhere in the path):
 *   kubepods-burstable-pod<uid with _>.slice   systemd driver (v1 or v2)
 *   pod<uid>                                   cgroupfs driver
 *   cri-containerd-<64hex>.scope               containerd (systemd driver)
 *   crio-<64hex>.scope, crio-conmon-<64hex>.scope   CRI-O
 *   docker-<64hex>.scope, /docker/<64hex>      Docker
 *   libpod-<64hex>.scope                       Podman
 *   <64hex> under a pod component              containerd/CRI-O, cgroupfs driver
 *   job_<id>, step_<n>, uid_<uid>              Slurm (v1 /slurm/uid_U/job_J/step_S,
 *                                              v2 /system.slice/slurmstepd.scope/job_J/step_S)
 */
#ifndef GPULSE_ATTRIB_CGROUP_H
#define GPULSE_ATTRIB_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attrib/owner.h"

struct cgroup_facts {
	char runtime[OWNER_SHORT_LEN];     /* "containerd", "cri-o", "docker", "podman"; "" none */
	char container_id[OWNER_ID_LEN];
	char pod_uid[OWNER_SHORT_LEN];     /* dashes restored */
	char qos[16];                      /* "guaranteed", "burstable", "besteffort"; "" none */
	char job[OWNER_SHORT_LEN];         /* Slurm job ID (digits, maybe _array) */
	char step[OWNER_SHORT_LEN];        /* "0", "batch", "extern", "interactive" */
	bool slurm_uid_valid;
	uint32_t slurm_uid;                /* from uid_<uid> (v1) */
};

/* From the text of /proc/PID/cgroup (`len` bytes, need not be
 * NUL-terminated), copy the path of the hierarchy that names the process's
 * container into path[pathlen]: the cgroup v2 line "0::PATH" when present
 * and not "/", else the v1 line of the memory, then cpu/cpuacct, then pids
 * controller, else the first v1 line with a path other than "/". A path
 * longer than pathlen - 1 is cut. Returns 0, GPULSE_ENOENT when no line
 * names a cgroup, GPULSE_EPARSE when a line is not "ID:CONTROLLERS:PATH"
 * (`where`, if not NULL, gets its 1-based line number). */
int cgroup_pick_path(const char *text, size_t len, char *path, size_t pathlen, int *where);

/* Fill `out` from a cgroup path (NUL-terminated). Unrecognised components
 * are skipped; a path naming nothing leaves every field empty. Always
 * returns 0 (any input is safe). */
int cgroup_parse_path(const char *path, struct cgroup_facts *out);

/* Copy `src` (n bytes) into dst[dstlen] as a label value: invalid UTF-8
 * and control characters become '?', the copy is cut at a character
 * boundary to fit, and it is always NUL-terminated. */
void owner_copy_label(char *dst, size_t dstlen, const char *src, size_t n);

#endif
