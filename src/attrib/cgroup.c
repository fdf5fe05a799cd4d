/* /proc/PID/cgroup parsing (cgroup.h). Hand-written: no Debian library
 * reads container identity from cgroup paths; the formats are the
 * kubelet's (systemd and cgroupfs drivers), the runtimes' and Slurm's,
 * documented in docs/internals/attribution.md. */
#include "attrib/cgroup.h"

#include <ctype.h>
#include <string.h>

#include "common/status.h"
#include "common/utf8.h"

void owner_copy_label(char *dst, size_t dstlen, const char *src, size_t n)
{
	if (dstlen == 0)
		return;
	char tmp[512];
	if (n >= sizeof tmp)
		n = sizeof tmp - 1;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)src[i];
		tmp[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	tmp[n] = '\0';
	utf8_clean(dst, dstlen, tmp);
}

/* ---- picking the hierarchy -------------------------------------------- */

static bool has_controller(const char *list, size_t n, const char *name)
{
	size_t nl = strlen(name);
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && list[j] != ',')
			j++;
		if (j - i == nl && memcmp(list + i, name, nl) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

int cgroup_pick_path(const char *text, size_t len, char *path, size_t pathlen, int *where)
{
	if (pathlen == 0)
		return GPULSE_EINVAL;
	path[0] = '\0';
	int best_rank = 99;
	const char *best = NULL;
	size_t best_n = 0;
	int line = 0;
	size_t i = 0;
	while (i < len) {
		size_t end = i;
		while (end < len && text[end] != '\n')
			end++;
		line++;
		if (end > i) {
			const char *l = text + i;
			size_t n = end - i;
			const char *c1 = memchr(l, ':', n);
			const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - l)) : NULL;
			bool id_ok = c1 && c1 > l;
			for (const char *p = l; id_ok && p < c1; p++)
				id_ok = isdigit((unsigned char)*p);
			if (!id_ok || !c2 || c2 + 1 >= l + n || c2[1] != '/') {
				if (where)
					*where = line;
				return GPULSE_EPARSE;
			}
			const char *ctl = c1 + 1;
			size_t nctl = (size_t)(c2 - ctl);
			const char *p = c2 + 1;
			size_t np = (size_t)(l + n - p);
			bool root = np == 1;
			bool v2 = c1 - l == 1 && l[0] == '0' && nctl == 0;
			int rank;
			if (v2)
				rank = root ? 6 : 0;
			else if (root)
				rank = 7;
			else if (has_controller(ctl, nctl, "memory"))
				rank = 1;
			else if (has_controller(ctl, nctl, "cpu") || has_controller(ctl, nctl, "cpuacct"))
				rank = 2;
			else if (has_controller(ctl, nctl, "pids"))
				rank = 3;
			else if (nctl > 5 && memcmp(ctl, "name=", 5) == 0)
				rank = 5;   /* name=systemd: systemd's own view, coarser */
			else
				rank = 4;
			if (rank < best_rank) {
				best_rank = rank;
				best = p;
				best_n = np;
			}
		}
		i = end + 1;
	}
	if (!best)
		return GPULSE_ENOENT;
	if (best_n >= pathlen)
		best_n = pathlen - 1;
	memcpy(path, best, best_n);
	path[best_n] = '\0';
	return 0;
}

/* ---- what a path says ------------------------------------------------- */

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return n > 0;
}

static bool is_container_id(const char *s, size_t n)
{
	return n == 64 && all_hex(s, n);
}

/* A pod UID as the kubelet names its cgroup: 36 characters of hex with
 * '-' (cgroupfs) or '_' (systemd) at 8-4-4-4-12, or a static pod's
 * 32-hex config hash. The dashes are restored in `out`. */
static bool take_pod_uid(const char *s, size_t n, char *out, size_t outlen)
{
	if (n == 32 && all_hex(s, n)) {
		memcpy(out, s, n);
		out[n] = '\0';
		return true;
	}
	if (n != 36 || outlen < 37)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? (s[i] != '-' && s[i] != '_') : !all_hex(s + i, 1))
			return false;
		out[i] = dash ? '-' : s[i];
	}
	out[n] = '\0';
	return true;
}

static bool starts(const char *s, size_t n, const char *pre)
{
	size_t k = strlen(pre);
	return n >= k && memcmp(s, pre, k) == 0;
}

static void set(char *dst, size_t dstlen, const char *s, size_t n)
{
	if (n >= dstlen)
		n = dstlen - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* Slurm job IDs are digits, with "_N" for array tasks on some sites. */
static bool slurm_id(const char *s, size_t n)
{
	if (n == 0 || n >= OWNER_SHORT_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

static void component(const char *c, size_t n, struct cgroup_facts *out, bool *kube,
		      bool *under_docker)
{
	static const struct {
		const char *prefix, *runtime;
	} scopes[] = {
		{"cri-containerd-", "containerd"},
		{"crio-conmon-", "cri-o"},
		{"crio-", "cri-o"},
		{"docker-", "docker"},
		{"libpod-conmon-", "podman"},
		{"libpod-", "podman"},
	};
	bool unit = false;
	if (n > 6 && (memcmp(c + n - 6, ".scope", 6) == 0 || memcmp(c + n - 6, ".slice", 6) == 0)) {
		n -= 6;
		unit = true;
	}
	if (unit) {
		for (size_t k = 0; k < sizeof scopes / sizeof scopes[0]; k++) {
			size_t pl = strlen(scopes[k].prefix);
			if (starts(c, n, scopes[k].prefix) && is_container_id(c + pl, n - pl)) {
				set(out->container_id, sizeof out->container_id, c + pl, n - pl);
				set(out->runtime, sizeof out->runtime, scopes[k].runtime,
				    strlen(scopes[k].runtime));
				return;
			}
		}
	}
	if (starts(c, n, "kubepods")) {
		*kube = true;
		/* kubepods[-QOS][-pod<uid>] (systemd driver). */
		const char *q = c + 8;
		size_t nq = n - 8;
		if (starts(q, nq, "-burstable")) {
			set(out->qos, sizeof out->qos, "burstable", 9);
			q += 10, nq -= 10;
		} else if (starts(q, nq, "-besteffort")) {
			set(out->qos, sizeof out->qos, "besteffort", 10);
			q += 11, nq -= 11;
		}
		if (starts(q, nq, "-pod"))
			take_pod_uid(q + 4, nq - 4, out->pod_uid, sizeof out->pod_uid);
		return;
	}
	if (*kube && !unit && !out->pod_uid[0]) {
		if (n == 9 && memcmp(c, "burstable", 9) == 0) {
			set(out->qos, sizeof out->qos, "burstable", 9);
			return;
		}
		if (n == 10 && memcmp(c, "besteffort", 10) == 0) {
			set(out->qos, sizeof out->qos, "besteffort", 10);
			return;
		}
	}
	if (*kube && starts(c, n, "pod") &&
	    take_pod_uid(c + 3, n - 3, out->pod_uid, sizeof out->pod_uid))
		return;
	if (!unit && is_container_id(c, n)) {
		/* cgroupfs driver: the runtime is not in the path, except
		 * Docker's own /docker/<id>. */
		set(out->container_id, sizeof out->container_id, c, n);
		if (*under_docker)
			set(out->runtime, sizeof out->runtime, "docker", 6);
		else
			out->runtime[0] = '\0';
		return;
	}
	if (!unit && n == 6 && memcmp(c, "docker", 6) == 0) {
		*under_docker = true;
		return;
	}
	if (starts(c, n, "job_") && slurm_id(c + 4, n - 4)) {
		set(out->job, sizeof out->job, c + 4, n - 4);
		out->step[0] = '\0';
		return;
	}
	if (out->job[0] && starts(c, n, "step_") && slurm_id(c + 5, n - 5)) {
		set(out->step, sizeof out->step, c + 5, n - 5);
		return;
	}
	if (starts(c, n, "uid_") && n > 4 && n <= 14) {
		uint64_t v = 0;
		size_t i = 4;
		for (; i < n && isdigit((unsigned char)c[i]); i++)
			v = v * 10 + (uint64_t)(c[i] - '0');
		if (i == n && v <= UINT32_MAX) {
			out->slurm_uid = (uint32_t)v;
			out->slurm_uid_valid = true;
		}
	}
}

int cgroup_parse_path(const char *path, struct cgroup_facts *out)
{
	memset(out, 0, sizeof *out);
	bool kube = false, under_docker = false;
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		if (p > s) {
			bool was_docker = under_docker;
			component(s, (size_t)(p - s), out, &kube, &under_docker);
			/* "docker" names only its direct child. */
			if (was_docker && under_docker && !(p - s == 6 && memcmp(s, "docker", 6) == 0))
				under_docker = false;
		}
	}
	if (kube && out->pod_uid[0] && !out->qos[0])
		set(out->qos, sizeof out->qos, "guaranteed", 10);
	return 0;
}
