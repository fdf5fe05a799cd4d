/* libFuzzer target for the parsers of what attribution reads about a
 * process (src/attrib/cgroup.c, attrib.c): any process can shape its
 * cgroup path (a container runtime or Slurm plugin names it; a user with
 * delegation creates sub-cgroups) and its environment, so any bytes. The
 * input is read whole as /proc/PID/cgroup text (the path picked, and the
 * input itself as a path, are parsed), as /proc/PID/status, as an environ
 * block, and as a Slurm job's devices.list. Whatever comes out must be
 * NUL-terminated within its field and UTF-8; nothing may read out of
 * bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attrib/attrib.h"
#include "attrib/cgroup.h"
#include "common/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct cgroup_facts *f)
{
	if (strnlen(f->container_id, sizeof f->container_id) == sizeof f->container_id ||
	    strnlen(f->pod_uid, sizeof f->pod_uid) == sizeof f->pod_uid ||
	    strnlen(f->job, sizeof f->job) == sizeof f->job ||
	    strnlen(f->step, sizeof f->step) == sizeof f->step)
		abort();
	size_t n = strlen(f->container_id);
	if (n != 0 && n != 64)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[1024];
	struct cgroup_facts f;
	int line = 0;
	if (cgroup_pick_path((const char *)data, size, path, sizeof path, &line) == 0) {
		if (path[0] != '/')
			abort();
		cgroup_parse_path(path, &f);
		check(&f);
	}
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	cgroup_parse_path(s, &f);
	check(&f);
	char label[64];
	owner_copy_label(label, sizeof label, (const char *)data, size);
	char again[64];
	if (utf8_clean(again, sizeof again, label) != strlen(label) || strcmp(again, label) != 0)
		abort();
	free(s);
	uint32_t uid;
	attrib_parse_status_uid((const char *)data, size, &uid);
	char v[OWNER_SHORT_LEN];
	if (attrib_environ_get((const char *)data, size, "SLURM_JOB_ID", v, sizeof v) &&
	    strnlen(v, sizeof v) == sizeof v)
		abort();
	uint64_t minors;
	if (attrib_parse_devices_list((const char *)data, size, &minors) && (minors >> 63) > 1)
		abort();
	return 0;
}
