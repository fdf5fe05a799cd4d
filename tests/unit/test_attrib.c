/* Attribution (src/attrib): the cgroup parser on every layout, the /proc
 * readers and the PID cache on the fake trees of tests/data/attrib, the
 * pod-resources decoding and the join that names pods. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "attrib/attrib.h"
#include "attrib/cgroup.h"
#include "attrib/owner.h"
#include "attrib/podres.h"
#include "podresources.pb-c.h"
#include "common/status.h"

static char proc_root[PATH_MAX - 64];

static const char *fixture_root(void)
{
	if (!proc_root[0]) {
		const char *src = getenv("GPULSE_SOURCE_DIR");
		snprintf(proc_root, sizeof proc_root, "%s/tests/data/attrib/proc", src ? src : ".");
	}
	return proc_root;
}

static size_t slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n;
}

/* The path cgroup_pick_path picks from fixture PID's cgroup file. */
static void pick_of(int pid, char *path, size_t len)
{
	char file[PATH_MAX + 32], text[8192];
	snprintf(file, sizeof file, "%s/%d/cgroup", fixture_root(), pid);
	size_t n = slurp(file, text, sizeof text);
	assert_int_equal(cgroup_pick_path(text, n, path, len, NULL), 0);
}

static const char *c_id(int k)
{
	static const char *ids[] = {
		"",
		"201255379175636a9d8996b54b85f4d738e5b78e61870cf8cc630d505f274ad6",
		"36aa4512922faf45d9c2fb9066ff2dec72c627c2afe5dd1b6d06329f515e19ac",
		"84ed8db46e7bedbc6d325e89e4ad6c7476a0a0560755a5c18cf0a9627644b55e",
		"548f478bd3a17cf1dbb6bebc9c5885a29b750611a9881af831125a4db2739fb5",
		"07ce2908b5ad9509c3b50283ea981942dddf28d46b560d39490dfd7048685bd5",
	};
	return ids[k];
}

static void test_pick_hierarchy(void **state)
{
	(void)state;
	char path[1024];
	pick_of(1001, path, sizeof path);
	assert_true(strncmp(path, "/kubepods.slice/kubepods-burstable.slice/", 41) == 0);
	/* v1 with a hybrid host's "0::/": the memory controller's line. */
	pick_of(1002, path, sizeof path);
	assert_true(strncmp(path, "/kubepods/burstable/pod", 23) == 0);
	pick_of(1007, path, sizeof path);
	assert_string_equal(path, "/slurm/uid_1000/job_4242/step_batch/task_0");

	/* cpu before pids before others, name=systemd last but one, "/" last. */
	const char *t = "5:pids:/p\n4:cpu,cpuacct:/c\n3:devices:/d\n";
	assert_int_equal(cgroup_pick_path(t, strlen(t), path, sizeof path, NULL), 0);
	assert_string_equal(path, "/c");
	t = "1:name=systemd:/s\n2:freezer:/f\n";
	assert_int_equal(cgroup_pick_path(t, strlen(t), path, sizeof path, NULL), 0);
	assert_string_equal(path, "/f");
	t = "0::/\n";
	assert_int_equal(cgroup_pick_path(t, strlen(t), path, sizeof path, NULL), 0);
	assert_string_equal(path, "/");

	/* Errors: none, malformed (with the line), cut to fit. */
	int line = 0;
	assert_int_equal(cgroup_pick_path("", 0, path, sizeof path, &line), GPULSE_ENOENT);
	t = "0::/ok\nthis is not a cgroup line\n";
	assert_int_equal(cgroup_pick_path(t, strlen(t), path, sizeof path, &line), GPULSE_EPARSE);
	assert_int_equal(line, 2);
	t = "x1:memory:/a\n";
	assert_int_equal(cgroup_pick_path(t, strlen(t), path, sizeof path, &line), GPULSE_EPARSE);
	assert_int_equal(line, 1);
	t = "3:memory:relative\n";
	assert_int_equal(cgroup_pick_path(t, strlen(t), path, sizeof path, &line), GPULSE_EPARSE);
	t = "0::/abcdefgh\n";
	char small[5];
	assert_int_equal(cgroup_pick_path(t, strlen(t), small, sizeof small, NULL), 0);
	assert_string_equal(small, "/abc");
}

static void test_parse_layouts(void **state)
{
	(void)state;
	char path[1024];
	struct cgroup_facts f;

	pick_of(1001, path, sizeof path);
	cgroup_parse_path(path, &f);
	assert_string_equal(f.runtime, "containerd");
	assert_string_equal(f.container_id, c_id(1));
	assert_string_equal(f.pod_uid, "5f3c9a1e-2b7d-4e8f-9a0b-1c2d3e4f5a6b");
	assert_string_equal(f.qos, "burstable");
	assert_string_equal(f.job, "");

	pick_of(1002, path, sizeof path);
	cgroup_parse_path(path, &f);
	assert_string_equal(f.runtime, "");   /* the cgroupfs driver does not say */
	assert_string_equal(f.container_id, c_id(2));
	assert_string_equal(f.pod_uid, "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d");
	assert_string_equal(f.qos, "burstable");

	pick_of(1003, path, sizeof path);
	cgroup_parse_path(path, &f);
	assert_string_equal(f.runtime, "cri-o");
	assert_string_equal(f.container_id, c_id(3));
	assert_string_equal(f.pod_uid, "0d9e8f7a-6b5c-4d3e-2f1a-0b9c8d7e6f5a");
	assert_string_equal(f.qos, "besteffort");

	pick_of(1004, path, sizeof path);
	cgroup_parse_path(path, &f);
	assert_string_equal(f.runtime, "docker");
	assert_string_equal(f.container_id, c_id(4));
	assert_string_equal(f.pod_uid, "");

	pick_of(1005, path, sizeof path);
	cgroup_parse_path(path, &f);
	assert_string_equal(f.runtime, "docker");
	assert_string_equal(f.container_id, c_id(5));

	pick_of(1006, path, sizeof path);
	cgroup_parse_path(path, &f);
	assert_string_equal(f.job, "4711");
	assert_string_equal(f.step, "0");
	assert_false(f.slurm_uid_valid);
	assert_string_equal(f.container_id, "");

	pick_of(1007, path, sizeof path);
	cgroup_parse_path(path, &f);
	assert_string_equal(f.job, "4242");
	assert_string_equal(f.step, "batch");
	assert_true(f.slurm_uid_valid);
	assert_int_equal(f.slurm_uid, 1000);

	pick_of(1008, path, sizeof path);
	cgroup_parse_path(path, &f);
	assert_string_equal(f.runtime, "");
	assert_string_equal(f.container_id, "");
	assert_string_equal(f.pod_uid, "");
	assert_string_equal(f.job, "");

	/* A guaranteed pod (no QoS level), Podman, a static pod's hash, and
	 * Docker's own cgroup next to a container (kind: nodes in Docker). */
	char p2[400];
	snprintf(p2, sizeof p2, "/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope",
		 "11111111_2222_4333_8444_555555555555", c_id(1));
	cgroup_parse_path(p2, &f);
	assert_string_equal(f.qos, "guaranteed");
	assert_string_equal(f.pod_uid, "11111111-2222-4333-8444-555555555555");
	snprintf(p2, sizeof p2, "/machine.slice/libpod-%s.scope/container", c_id(2));
	cgroup_parse_path(p2, &f);
	assert_string_equal(f.runtime, "podman");
	assert_string_equal(f.container_id, c_id(2));
	cgroup_parse_path("/kubepods/besteffort/pod0123456789abcdef0123456789abcdef/x", &f);
	assert_string_equal(f.pod_uid, "0123456789abcdef0123456789abcdef");
	snprintf(p2, sizeof p2, "/docker/%s/kubepods/burstable/pod%s/%s", c_id(4),
		 "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", c_id(5));
	cgroup_parse_path(p2, &f);
	assert_string_equal(f.container_id, c_id(5));   /* the innermost */
	assert_string_equal(f.runtime, "");
	assert_string_equal(f.pod_uid, "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d");

	/* Near misses name nothing. */
	cgroup_parse_path("/system.slice/docker-abc.scope", &f);
	assert_string_equal(f.container_id, "");
	cgroup_parse_path("/kubepods/burstable/podNOTAUID", &f);
	assert_string_equal(f.pod_uid, "");
	cgroup_parse_path("/job_/step_1/uid_99999999999", &f);
	assert_string_equal(f.job, "");
	assert_false(f.slurm_uid_valid);
	cgroup_parse_path("", &f);
	assert_string_equal(f.runtime, "");
}

static void test_small_parsers(void **state)
{
	(void)state;
	uint32_t uid = 7;
	const char *st = "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t5\n";
	assert_int_equal(attrib_parse_status_uid(st, strlen(st), &uid), 0);
	assert_int_equal(uid, 1000);
	st = "Name:\tx\nUid:\t\n";
	assert_int_equal(attrib_parse_status_uid(st, strlen(st), &uid), GPULSE_EPARSE);
	st = "Uid:\t99999999999\t0\n";
	assert_int_equal(attrib_parse_status_uid(st, strlen(st), &uid), GPULSE_EPARSE);
	assert_int_equal(attrib_parse_status_uid("", 0, &uid), GPULSE_EPARSE);

	const char env[] = "A=1\0SLURM_JOB_ID=77\0SLURM_JOB_IDX=9\0HOSTNAME=a\x01\xff";
	char v[16];
	assert_true(attrib_environ_get(env, sizeof env - 1, "SLURM_JOB_ID", v, sizeof v));
	assert_string_equal(v, "77");
	assert_true(attrib_environ_get(env, sizeof env - 1, "HOSTNAME", v, sizeof v));
	assert_string_equal(v, "a??");   /* control and invalid bytes replaced */
	assert_false(attrib_environ_get(env, sizeof env - 1, "SLURM", v, sizeof v));

	char lab[6];
	owner_copy_label(lab, sizeof lab, "ab\xc3\xa9xyz", 7);
	assert_string_equal(lab, "ab\xc3\xa9x");
	owner_copy_label(lab, sizeof lab, "abcd\xc3\xa9", 6);
	assert_string_equal(lab, "abcd");   /* never half a character */

	const char *u = "GPU-fa4e0000-0000-4000-8000-000000000001";
	assert_true(attrib_device_matches(u, u));
	assert_true(attrib_device_matches("GPU-fa4e0000-0000-4000-8000-000000000001::3", u));
	assert_false(attrib_device_matches("GPU-fa4e0000-0000-4000-8000-000000000001::", u));
	assert_false(attrib_device_matches("GPU-fa4e0000-0000-4000-8000-0000000000012", u));
	assert_false(attrib_device_matches("GPU-fa4e0000-0000-4000-8000-000000000001::x", u));
	assert_false(attrib_device_matches(u, ""));

	assert_int_equal(owner_field_by_name("pod"), OWNER_POD);
	assert_int_equal(owner_field_by_name("pods"), -1);
	for (int f = 0; f < OWNER_FIELD_COUNT; f++)
		assert_int_equal(owner_field_by_name(owner_field_name((enum owner_field)f)), f);
}

/* The name getpwuid_r gives uid, or its number, as attrib does. */
static void name_of(uint32_t uid, char *out, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(out, len, "%s", pw->pw_name);
	else
		snprintf(out, len, "%u", (unsigned)uid);
}

static void test_resolve_fixtures(void **state)
{
	(void)state;
	struct attrib *a;
	struct attrib_config cfg = {.proc_root = fixture_root(), .labels = OWNER_DEFAULT_LABELS};
	assert_int_equal(attrib_open(&a, &cfg), 0);
	char u0[64], u1000[64], u1001[64];
	name_of(0, u0, sizeof u0);
	name_of(1000, u1000, sizeof u1000);
	name_of(1001, u1001, sizeof u1001);
	struct proc_owner o;

	attrib_resolve(a, 1001, &o);
	assert_true(o.resolved);
	assert_int_equal(o.labels, OWNER_DEFAULT_LABELS);
	assert_string_equal(o.runtime, "containerd");
	assert_string_equal(o.container_id, c_id(1));
	assert_string_equal(o.pod_uid, "5f3c9a1e-2b7d-4e8f-9a0b-1c2d3e4f5a6b");
	assert_string_equal(o.hostname, "trainer-0");
	assert_string_equal(o.user, u1000);
	assert_string_equal(o.pod, "");   /* no pod-resources table yet */
	assert_true(strncmp(o.cgroup, "/kubepods.slice/", 16) == 0);

	attrib_resolve(a, 1002, &o);
	assert_string_equal(o.container_id, c_id(2));
	assert_string_equal(o.user, u0);

	attrib_resolve(a, 1003, &o);
	assert_string_equal(o.runtime, "cri-o");
	assert_string_equal(o.hostname, "");
	assert_string_equal(o.user, u1001);

	attrib_resolve(a, 1006, &o);
	assert_string_equal(o.job, "4711");
	assert_string_equal(o.job_user, "alice");   /* SLURM_JOB_USER */
	assert_string_equal(o.user, u1000);

	/* No environ: the job and its user from the v1 path. */
	attrib_resolve(a, 1007, &o);
	assert_string_equal(o.job, "4242");
	assert_string_equal(o.job_user, u1000);

	attrib_resolve(a, 1008, &o);
	assert_string_equal(o.container_id, "");
	assert_string_equal(o.user, u0);
	char sum[160];
	owner_summary(&o, sum, sizeof sum);
	assert_string_equal(sum, "");

	/* A PID that does not exist: unresolved, counted, not cached. */
	attrib_resolve(a, 4000000, &o);
	assert_false(o.resolved);
	assert_string_equal(o.user, "");

	struct attrib_stats st;
	attrib_get_stats(a, &st);
	assert_int_equal(st.resolved_total, 6);
	assert_int_equal(st.proc_errors_total, 1);
	assert_int_equal(st.cache_hits_total, 0);
	attrib_resolve(a, 1001, &o);
	attrib_get_stats(a, &st);
	assert_int_equal(st.cache_hits_total, 1);
	assert_int_equal(st.resolved_total, 6);
	assert_false(st.podres_configured);

	/* Labels follow a reload, cached entries too. */
	attrib_set_labels(a, 1u << OWNER_CGROUP);
	attrib_resolve(a, 1001, &o);
	assert_int_equal(o.labels, 1u << OWNER_CGROUP);
	attrib_close(a);
	attrib_close(NULL);
}

/* With attribution's thread running, environ is read there: the owner
 * comes back pending, and attrib_update_owner completes it. */
static void test_environ_on_thread(void **state)
{
	(void)state;
	struct attrib *a;
	struct attrib_config cfg = {.proc_root = fixture_root(), .cgroup_root = "/nonexistent"};
	assert_int_equal(attrib_open(&a, &cfg), 0);
	struct proc_owner o;
	attrib_resolve(a, 1006, &o);
	assert_true(o.resolved);
	assert_string_equal(o.job, "4711");   /* from the cgroup path, at once */
	for (int i = 0; i < 500 && o.env_pending; i++) {
		usleep(10000);
		attrib_update_owner(a, 1006, &o);
	}
	assert_false(o.env_pending);
	assert_string_equal(o.job_user, "alice");
	/* A cache hit after that is complete at once. */
	struct proc_owner again;
	attrib_resolve(a, 1006, &again);
	assert_false(again.env_pending);
	assert_string_equal(again.job_user, "alice");
	/* A pod's HOSTNAME, likewise. */
	attrib_resolve(a, 1001, &o);
	for (int i = 0; i < 500 && o.env_pending; i++) {
		usleep(10000);
		attrib_update_owner(a, 1001, &o);
	}
	assert_string_equal(o.hostname, "trainer-0");
	attrib_close(a);
}

static void write_file(const char *dir, const char *name, const char *text, size_t n)
{
	char p[PATH_MAX];
	int len = snprintf(p, sizeof p, "%s/%s", dir, name);
	assert_true(len > 0 && (size_t)len < sizeof p);
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, n, f), n);
	fclose(f);
}

static void fake_proc(const char *root, int pid, unsigned long long start, const char *cgroup)
{
	char d[PATH_MAX], stat[256];
	snprintf(d, sizeof d, "%s/%d", root, pid);
	mkdir(d, 0700);
	snprintf(stat, sizeof stat,
		 "%d (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %llu 0 0\n", pid, start);
	write_file(d, "stat", stat, strlen(stat));
	write_file(d, "cgroup", cgroup, strlen(cgroup));
	write_file(d, "status", "Uid:\t0\t0\t0\t0\n", 13);
}

static void rm_tree(const char *root, int lo, int hi)
{
	static const char *files[] = {"stat", "cgroup", "status"};
	char p[PATH_MAX];
	for (int pid = lo; pid <= hi; pid++) {
		for (size_t k = 0; k < 3; k++) {
			snprintf(p, sizeof p, "%s/%d/%s", root, pid, files[k]);
			unlink(p);
		}
		snprintf(p, sizeof p, "%s/%d", root, pid);
		rmdir(p);
	}
	rmdir(root);
}

static void test_cache_reuse_and_bound(void **state)
{
	(void)state;
	char root[] = "/tmp/gpulse-attrib.XXXXXX";
	assert_non_null(mkdtemp(root));
	int n = ATTRIB_CACHE_MAX + 5;
	for (int pid = 1; pid <= n; pid++)
		fake_proc(root, pid, 100, "0::/system.slice/docker-"
					   "548f478bd3a17cf1dbb6bebc9c5885a29b750611a9881af831125a4db2739fb5.scope\n");
	struct attrib *a;
	struct attrib_config cfg = {.proc_root = root};
	assert_int_equal(attrib_open(&a, &cfg), 0);
	struct proc_owner o;
	attrib_resolve(a, 1, &o);
	assert_string_equal(o.runtime, "docker");

	/* The PID is reused by a process in another cgroup: a new start
	 * time, so it is read again, not served from the cache. */
	fake_proc(root, 1, 200, "0::/system.slice/slurmstepd.scope/job_9/step_0\n");
	attrib_resolve(a, 1, &o);
	assert_string_equal(o.runtime, "");
	assert_string_equal(o.job, "9");
	struct attrib_stats st;
	attrib_get_stats(a, &st);
	assert_int_equal(st.resolved_total, 2);
	assert_int_equal(st.cache_hits_total, 0);

	/* Past the bound, the least recently used go. */
	for (int pid = 2; pid <= n; pid++)
		attrib_resolve(a, (uint32_t)pid, &o);
	attrib_get_stats(a, &st);
	assert_int_equal(st.resolved_total, (uint64_t)n + 1);
	/* two entries for PID 1 (old start time, and new) and n - 1 others */
	assert_int_equal(st.cache_evictions_total, (uint64_t)(n + 1 - ATTRIB_CACHE_MAX));
	attrib_resolve(a, (uint32_t)n, &o);   /* recent: still cached */
	attrib_get_stats(a, &st);
	assert_int_equal(st.cache_hits_total, 1);

	/* A malformed cgroup file is counted, and the rest still read. */
	fake_proc(root, 2, 300, "garbage\n");
	attrib_resolve(a, 2, &o);
	assert_true(o.resolved);
	assert_string_equal(o.cgroup, "");
	assert_string_equal(o.user, "root");
	attrib_get_stats(a, &st);
	assert_int_equal(st.cgroup_errors_total, 1);
	attrib_close(a);
	rm_tree(root, 1, n);
}

static struct attrib_allocation alloc_of(const char *pod, const char *ns, const char *ctr,
					 const char *dev)
{
	struct attrib_allocation al = {0};
	snprintf(al.pod, sizeof al.pod, "%s", pod);
	snprintf(al.namespace_, sizeof al.namespace_, "%s", ns);
	snprintf(al.container, sizeof al.container, "%s", ctr);
	snprintf(al.resource, sizeof al.resource, "nvidia.com/gpu");
	snprintf(al.device_id, sizeof al.device_id, "%s", dev);
	return al;
}

static void test_name_pod(void **state)
{
	(void)state;
	struct attrib *a;
	assert_int_equal(attrib_open(&a, NULL), 0);
	const char *g0 = "GPU-00000000-0000-4000-8000-000000000000";
	const char *g1 = "GPU-00000000-0000-4000-8000-000000000001";
	char g1r0[96], g1r1[96];
	snprintf(g1r0, sizeof g1r0, "%s::0", g1);
	snprintf(g1r1, sizeof g1r1, "%s::1", g1);
	struct attrib_allocation al[] = {
		alloc_of("trainer-0", "ml", "main", g0),
		alloc_of("web-a", "apps", "srv", g1r0),
		alloc_of("web-b", "apps", "srv", g1r1),
	};
	attrib_set_allocations(a, al, 3);
	struct proc_owner o = {.resolved = true};
	snprintf(o.pod_uid, sizeof o.pod_uid, "5f3c9a1e-2b7d-4e8f-9a0b-1c2d3e4f5a6b");
	attrib_name_pod(a, g0, NULL, &o);
	assert_string_equal(o.pod, "trainer-0");
	assert_string_equal(o.namespace_, "ml");
	assert_string_equal(o.container, "main");
	char sum[160];
	owner_summary(&o, sum, sizeof sum);
	assert_string_equal(sum, "ml/trainer-0/main");

	/* A time-sliced GPU held by two pods: only HOSTNAME tells them apart. */
	attrib_name_pod(a, g1, NULL, &o);
	assert_string_equal(o.pod, "");
	snprintf(o.hostname, sizeof o.hostname, "web-b");
	attrib_name_pod(a, g1, NULL, &o);
	assert_string_equal(o.pod, "web-b");
	assert_string_equal(o.namespace_, "apps");

	/* Not in a pod: never named, even on an allocated GPU. */
	struct proc_owner host = {.resolved = true};
	attrib_name_pod(a, g0, NULL, &host);
	assert_string_equal(host.pod, "");

	struct attrib_allocation out[4];
	assert_int_equal(attrib_allocations(a, out, 4), 3);
	assert_int_equal(attrib_allocations(a, out, 2), 2);
	attrib_close(a);
}

/* A ListPodResourcesResponse as the kubelet sends it, packed by protobuf-c. */
static size_t pack_response(uint8_t *buf, size_t cap, int npods)
{
	V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
	V1__PodResources pods[8], *pp[8];
	V1__ContainerResources ctr[8], *cp[8];
	V1__ContainerDevices dev[8], *dp[8];
	char names[8][32];
	char *ids[8][2];
	char idbuf[8][2][64];
	for (int i = 0; i < npods; i++) {
		v1__pod_resources__init(&pods[i]);
		v1__container_resources__init(&ctr[i]);
		v1__container_devices__init(&dev[i]);
		snprintf(names[i], sizeof names[i], "pod-%d", i);
		pods[i].name = names[i];
		pods[i].namespace_ = (char *)"ns";
		ctr[i].name = (char *)"c";
		dev[i].resource_name = (char *)"nvidia.com/gpu";
		for (int k = 0; k < 2; k++) {
			snprintf(idbuf[i][k], sizeof idbuf[i][k], "GPU-%d-%d", i, k);
			ids[i][k] = idbuf[i][k];
		}
		dev[i].n_device_ids = 2;
		dev[i].device_ids = ids[i];
		dp[i] = &dev[i];
		ctr[i].n_devices = 1;
		ctr[i].devices = &dp[i];
		cp[i] = &ctr[i];
		pods[i].n_containers = 1;
		pods[i].containers = &cp[i];
		pp[i] = &pods[i];
	}
	resp.n_pod_resources = (size_t)npods;
	resp.pod_resources = pp;
	size_t n = v1__list_pod_resources_response__get_packed_size(&resp);
	assert_true(n <= cap);
	return v1__list_pod_resources_response__pack(&resp, buf);
}

static void test_podres_decode(void **state)
{
	(void)state;
	uint8_t msg[4096];
	size_t len = pack_response(msg, sizeof msg, 3);
	struct attrib_allocation out[8];
	size_t n, dropped;
	char err[160];
	assert_int_equal(podres_decode(msg, len, out, 8, &n, &dropped, err, sizeof err), 0);
	assert_int_equal(n, 6);
	assert_int_equal(dropped, 0);
	assert_string_equal(out[0].pod, "pod-0");
	assert_string_equal(out[0].namespace_, "ns");
	assert_string_equal(out[0].container, "c");
	assert_string_equal(out[0].resource, "nvidia.com/gpu");
	assert_string_equal(out[1].device_id, "GPU-0-1");
	assert_string_equal(out[5].device_id, "GPU-2-1");
	/* Bounded: the rest counted. */
	assert_int_equal(podres_decode(msg, len, out, 4, &n, &dropped, err, sizeof err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(dropped, 2);
	/* An empty answer is no pods, not an error. */
	assert_int_equal(podres_decode(msg, 0, out, 8, &n, &dropped, err, sizeof err), 0);
	assert_int_equal(n, 0);
	/* Garbage: a wire type that cannot be, a length past the end. */
	const uint8_t bad[] = {0x0a, 0x7f, 0x01};
	assert_int_equal(podres_decode(bad, sizeof bad, out, 8, &n, &dropped, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "ListPodResourcesResponse"));

	/* gRPC framing. */
	uint8_t body[4200] = {0, 0, 0, (uint8_t)(len >> 8), (uint8_t)len};
	memcpy(body + 5, msg, len);
	const uint8_t *m;
	size_t mlen;
	assert_int_equal(podres_grpc_unframe(body, len + 5, &m, &mlen, err, sizeof err), 0);
	assert_int_equal(mlen, len);
	assert_ptr_equal(m, body + 5);
	assert_int_equal(podres_grpc_unframe(body, len + 4, &m, &mlen, err, sizeof err),
			 GPULSE_EPARSE);
	assert_int_equal(podres_grpc_unframe(body, 3, &m, &mlen, err, sizeof err), GPULSE_EPARSE);
	body[0] = 1;
	assert_int_equal(podres_grpc_unframe(body, len + 5, &m, &mlen, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "compressed"));
}

static void test_podres_absent_socket(void **state)
{
	(void)state;
	struct attrib_allocation out[2];
	size_t n, dropped;
	char err[256];
	const char *path = "/tmp/gpulse-attrib-no-such.sock";
	assert_int_equal(podres_list(path, 1000000000, out, 2, &n, &dropped, err, sizeof err),
			 GPULSE_ENOENT);
	assert_non_null(strstr(err, path));
	/* A socket file nobody listens on: refused, said so. */
	char dir[] = "/tmp/gpulse-attrib.XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sock[PATH_MAX];
	snprintf(sock, sizeof sock, "%s/not-a-socket", dir);
	write_file(dir, "not-a-socket", "x", 1);
	assert_int_not_equal(podres_list(sock, 1000000000, out, 2, &n, &dropped, err, sizeof err), 0);
	assert_non_null(strstr(err, sock));
	unlink(sock);
	rmdir(dir);
}

static void test_slurm_devices(void **state)
{
	(void)state;
	uint64_t m;
	const char *t = "c 195:255 rwm\nc 195:254 rwm\nc 195:3 rwm\nc 195:12 rw\nc 1:3 rwm\nc 195:x rwm\n";
	assert_true(attrib_parse_devices_list(t, strlen(t), &m));
	assert_true(m == (1ull << 3 | 1ull << 12));
	t = "a *:* rwm\n";
	assert_false(attrib_parse_devices_list(t, strlen(t), &m));
	assert_true(attrib_parse_devices_list("", 0, &m));
	assert_true(m == 0);

	/* The fixture's v1 devices hierarchy: jobs 4242 and 5000 hold GPUs
	 * 0 and 1; job 6000 may use everything and so names none. */
	char root[PATH_MAX];
	snprintf(root, sizeof root, "%s/../cgroup", fixture_root());
	struct attrib_allocation out[8];
	size_t n, dropped;
	assert_int_equal(attrib_scan_slurm(root, out, 8, &n, &dropped), 0);
	assert_int_equal(n, 2);
	assert_int_equal(dropped, 0);
	int j4242 = strcmp(out[0].job, "4242") == 0 ? 0 : 1;
	assert_string_equal(out[j4242].job, "4242");
	assert_int_equal(out[j4242].minor, 0);
	assert_string_equal(out[j4242].job_user, "1000");   /* a name only in attrib's refresh */
	assert_string_equal(out[1 - j4242].job, "5000");
	assert_int_equal(out[1 - j4242].minor, 1);
	assert_string_equal(out[j4242].pod, "");
	/* Bounded. */
	assert_int_equal(attrib_scan_slurm(root, out, 1, &n, &dropped), 0);
	assert_int_equal(n, 1);
	assert_int_equal(dropped, 1);
	/* No v1 devices hierarchy (a cgroup v2 host): nothing, no error. */
	assert_int_equal(attrib_scan_slurm("/nonexistent", out, 8, &n, &dropped), 0);
	assert_int_equal(n, 0);

	/* Through attrib's own thread: the table fills, user names resolved. */
	struct attrib *a;
	struct attrib_config cfg = {.cgroup_root = root, .pod_resources_refresh_ns = 1000000000};
	assert_int_equal(attrib_open(&a, &cfg), 0);
	struct attrib_stats st;
	for (int i = 0; i < 200; i++) {
		attrib_get_stats(a, &st);
		if (st.slurm_jobs > 0)
			break;
		usleep(10000);
	}
	assert_true(st.slurm_configured);
	assert_int_equal(st.slurm_jobs, 2);
	assert_false(st.podres_configured);
	assert_int_equal(attrib_allocations(a, out, 8), 2);
	char u1000[64];
	name_of(1000, u1000, sizeof u1000);
	assert_string_equal(out[strcmp(out[0].job, "4242") == 0 ? 0 : 1].job_user, u1000);
	attrib_close(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick_hierarchy),
		cmocka_unit_test(test_parse_layouts),
		cmocka_unit_test(test_small_parsers),
		cmocka_unit_test(test_resolve_fixtures),
		cmocka_unit_test(test_cache_reuse_and_bound),
		cmocka_unit_test(test_name_pod),
		cmocka_unit_test(test_podres_decode),
		cmocka_unit_test(test_podres_absent_socket),
		cmocka_unit_test(test_slurm_devices),
		cmocka_unit_test(test_environ_on_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
