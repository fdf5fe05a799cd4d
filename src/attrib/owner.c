/* Names and values of a process owner's fields (owner.h). */
#include "attrib/owner.h"

#include <stdio.h>
#include <string.h>

static const char *const names[OWNER_FIELD_COUNT] = {
	[OWNER_CGROUP] = "cgroup",         [OWNER_RUNTIME] = "runtime",
	[OWNER_CONTAINER_ID] = "container_id", [OWNER_POD_UID] = "pod_uid",
	[OWNER_POD] = "pod",               [OWNER_NAMESPACE] = "namespace",
	[OWNER_CONTAINER] = "container",   [OWNER_JOB] = "job",
	[OWNER_JOB_USER] = "job_user",     [OWNER_USER] = "user",
};

const char *owner_field_name(enum owner_field f)
{
	return (unsigned)f < OWNER_FIELD_COUNT ? names[f] : "";
}

const char *owner_field_value(const struct proc_owner *o, enum owner_field f)
{
	switch (f) {
	case OWNER_CGROUP: return o->cgroup;
	case OWNER_RUNTIME: return o->runtime;
	case OWNER_CONTAINER_ID: return o->container_id;
	case OWNER_POD_UID: return o->pod_uid;
	case OWNER_POD: return o->pod;
	case OWNER_NAMESPACE: return o->namespace_;
	case OWNER_CONTAINER: return o->container;
	case OWNER_JOB: return o->job;
	case OWNER_JOB_USER: return o->job_user;
	case OWNER_USER: return o->user;
	case OWNER_FIELD_COUNT: break;
	}
	return "";
}

int owner_field_by_name(const char *name)
{
	for (int f = 0; f < OWNER_FIELD_COUNT; f++)
		if (strcmp(names[f], name) == 0)
			return f;
	return -1;
}

void owner_summary(const struct proc_owner *o, char *out, size_t outlen)
{
	if (o->pod[0])
		snprintf(out, outlen, "%s/%s%s%s", o->namespace_, o->pod, o->container[0] ? "/" : "",
			 o->container);
	else if (o->pod_uid[0])
		snprintf(out, outlen, "pod %.8s", o->pod_uid);
	else if (o->job[0])
		snprintf(out, outlen, "job %s%s%s", o->job, o->job_user[0] ? " " : "", o->job_user);
	else if (o->container_id[0])
		snprintf(out, outlen, "%s %.12s", o->runtime[0] ? o->runtime : "container",
			 o->container_id);
	else
		snprintf(out, outlen, "%s", "");
}
