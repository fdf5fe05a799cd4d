/* Attribution of GPU processes (attrib.h): /proc readers, the PID cache,
 * the UID -> name cache and the join with the pod-resources allocations. */
#include "attrib/attrib.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attrib/cgroup.h"
#include "common/log.h"
#include "common/mono_cond.h"
#include "attrib/podres.h"
#include "common/status.h"

struct cache_entry {
	uint32_t pid;
	uint64_t start_ticks;       /* /proc/PID/stat field 22 */
	uint64_t last_used;         /* the cache's clock at the last hit */
	struct proc_owner owner;
};

struct user_entry {
	uint32_t uid;
	char name[OWNER_SHORT_LEN];
};

struct attrib {
	char proc_root[256];
	char cgroup_root[256];
	char socket[256];
	int64_t refresh_ns, timeout_ns;
	_Atomic uint16_t labels;

	pthread_mutex_t lock;       /* cache, users, allocations, stats */
	struct cache_entry *cache;  /* ATTRIB_CACHE_MAX */
	int ncache;
	uint64_t clock;
	struct user_entry users[ATTRIB_USER_CACHE_MAX];
	int nusers, next_user;
	struct attrib_allocation *allocs;   /* ATTRIB_ALLOC_MAX */
	size_t nallocs;
	struct attrib_stats st;

	/* environ reads for the thread: (pid, start time), a ring under lock */
	struct {
		uint32_t pid;
		uint64_t ticks;
	} envq[ATTRIB_ENV_QUEUE];
	int envq_head, envq_len;

	pthread_t thread;
	bool have_thread;
	pthread_mutex_t wake_lock;
	struct mono_cond wake;
	bool stopping;
	bool env_work;              /* environ reads queued (under wake_lock) */
};

/* ---- small parsers ---------------------------------------------------- */

int attrib_parse_status_uid(const char *text, size_t len, uint32_t *uid)
{
	size_t i = 0;
	while (i < len) {
		size_t end = i;
		while (end < len && text[end] != '\n')
			end++;
		if (end - i > 4 && memcmp(text + i, "Uid:", 4) == 0) {
			size_t k = i + 4;
			while (k < end && (text[k] == '\t' || text[k] == ' '))
				k++;
			uint64_t v = 0;
			size_t d = k;
			while (d < end && isdigit((unsigned char)text[d]) && d - k < 11)
				v = v * 10 + (uint64_t)(text[d++] - '0');
			if (d == k || v > UINT32_MAX || (d < end && text[d] != '\t' && text[d] != ' '))
				return GPULSE_EPARSE;
			*uid = (uint32_t)v;
			return 0;
		}
		i = end + 1;
	}
	return GPULSE_EPARSE;
}

bool attrib_environ_get(const char *env, size_t len, const char *var, char *out, size_t outlen)
{
	size_t vl = strlen(var);
	size_t i = 0;
	while (i < len) {
		const char *e = env + i;
		const char *nul = memchr(e, '\0', len - i);
		size_t n = nul ? (size_t)(nul - e) : len - i;
		if (n > vl && memcmp(e, var, vl) == 0 && e[vl] == '=') {
			owner_copy_label(out, outlen, e + vl + 1, n - vl - 1);
			return true;
		}
		i += n + 1;
	}
	return false;
}

bool attrib_device_matches(const char *device_id, const char *uuid)
{
	if (!uuid || !uuid[0])
		return false;
	size_t n = strlen(uuid);
	if (strncmp(device_id, uuid, n) != 0)
		return false;
	if (device_id[n] == '\0')
		return true;
	if (device_id[n] != ':' || device_id[n + 1] != ':' || !device_id[n + 2])
		return false;
	for (const char *p = device_id + n + 2; *p; p++)
		if (!isdigit((unsigned char)*p))
			return false;
	return true;
}

/* Read at most cap - 1 bytes of proc_root/PID/NAME into buf, NUL-terminated;
 * returns the length, or -1 when it cannot be opened or read. *more says
 * whether the file went on past cap - 1. */
static ssize_t read_proc(const struct attrib *a, uint32_t pid, const char *name, char *buf,
			 size_t cap, bool *more)
{
	char path[384];
	snprintf(path, sizeof path, "%s/%" PRIu32 "/%s", a->proc_root, pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got < cap - 1) {
		ssize_t n = read(fd, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (more) {
		char extra;
		*more = got == cap - 1 && read(fd, &extra, 1) == 1;
	}
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

/* Field 22 of /proc/PID/stat (start time in clock ticks). The comm in
 * field 2 may hold spaces and parentheses: count from the last ')'. */
static bool start_ticks(const struct attrib *a, uint32_t pid, uint64_t *out)
{
	char buf[1024];
	ssize_t n = read_proc(a, pid, "stat", buf, sizeof buf, NULL);
	if (n <= 0)
		return false;
	char *p = strrchr(buf, ')');
	if (!p)
		return false;
	p++;
	for (int field = 2; field < 22; field++) {
		while (*p == ' ')
			p++;
		if (field == 21)
			break;
		while (*p && *p != ' ')
			p++;
		if (!*p)
			return false;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (end == p || errno)
		return false;
	*out = v;
	return true;
}

/* UID -> name through getpwuid_r, once per UID (NSS may be slow: a
 * directory service answers once, not once per process). A UID without
 * a name is shown as its number. Called without a->lock, which it takes
 * only around the cache, never across getpwuid_r: a slow directory must
 * not hold the exporters that read the allocations. */
static void user_name(struct attrib *a, uint32_t uid, char *out, size_t outlen)
{
	pthread_mutex_lock(&a->lock);
	for (int i = 0; i < a->nusers; i++) {
		if (a->users[i].uid == uid) {
			snprintf(out, outlen, "%s", a->users[i].name);
			pthread_mutex_unlock(&a->lock);
			return;
		}
	}
	pthread_mutex_unlock(&a->lock);
	struct passwd pw, *res = NULL;
	char buf[2048];
	char name[OWNER_SHORT_LEN];
	if (getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name)
		owner_copy_label(name, sizeof name, res->pw_name, strlen(res->pw_name));
	else
		snprintf(name, sizeof name, "%" PRIu32, uid);
	pthread_mutex_lock(&a->lock);
	int slot = a->nusers < ATTRIB_USER_CACHE_MAX ? a->nusers++ : a->next_user++ % ATTRIB_USER_CACHE_MAX;
	a->users[slot].uid = uid;
	snprintf(a->users[slot].name, sizeof a->users[slot].name, "%s", name);
	pthread_mutex_unlock(&a->lock);
	snprintf(out, outlen, "%s", name);
}

/* environ is readable by the process's owner and root only; a Slurm
 * job's ID and user, and a pod's HOSTNAME, come from there. Fills only
 * the fields found. */
static void read_environ(const struct attrib *a, uint32_t pid, struct proc_owner *o, bool *cut)
{
	char *env = malloc(ATTRIB_ENVIRON_MAX);
	if (!env)
		return;
	bool more = false;
	ssize_t n = read_proc(a, pid, "environ", env, ATTRIB_ENVIRON_MAX, &more);
	if (n > 0) {
		*cut = more;
		char job[OWNER_SHORT_LEN];
		if (attrib_environ_get(env, (size_t)n, "SLURM_JOB_ID", job, sizeof job) && job[0])
			snprintf(o->job, sizeof o->job, "%s", job);
		attrib_environ_get(env, (size_t)n, "SLURM_JOB_USER", o->job_user, sizeof o->job_user);
		if (o->pod_uid[0])
			attrib_environ_get(env, (size_t)n, "HOSTNAME", o->hostname, sizeof o->hostname);
	}
	free(env);
}

/* What one read of /proc/PID found besides the owner's strings. */
struct proc_read {
	bool uid_ok, job_uid_ok;
	uint32_t uid, job_uid;      /* the process's real UID; the job's (v1 uid_U) */
	bool cgroup_bad, env_cut, cut;
};

/* Read everything /proc says about pid into o. Called without the lock
 * (file reads only). True when anything could be read. */
static bool read_owner(struct attrib *a, uint32_t pid, struct proc_owner *o, struct proc_read *r)
{
	memset(o, 0, sizeof *o);
	memset(r, 0, sizeof *r);
	char buf[8192];
	bool any = false;
	bool more = false;
	ssize_t n = read_proc(a, pid, "cgroup", buf, sizeof buf, &more);
	if (n >= 0) {
		any = true;
		char path[1024];
		int line = 0;
		int rc = cgroup_pick_path(buf, (size_t)n, path, sizeof path, &line);
		if (rc == 0) {
			if (strlen(path) >= sizeof o->cgroup)
				r->cut = true;
			owner_copy_label(o->cgroup, sizeof o->cgroup, path, strlen(path));
			struct cgroup_facts f;
			cgroup_parse_path(path, &f);
			snprintf(o->runtime, sizeof o->runtime, "%s", f.runtime);
			snprintf(o->container_id, sizeof o->container_id, "%s", f.container_id);
			snprintf(o->pod_uid, sizeof o->pod_uid, "%s", f.pod_uid);
			snprintf(o->job, sizeof o->job, "%s", f.job);
			r->job_uid_ok = f.slurm_uid_valid && f.job[0];
			r->job_uid = f.slurm_uid;
		} else if (rc == GPULSE_EPARSE) {
			r->cgroup_bad = true;
		}
	}
	n = read_proc(a, pid, "status", buf, sizeof buf, NULL);
	if (n >= 0) {
		any = true;
		r->uid_ok = attrib_parse_status_uid(buf, (size_t)n, &r->uid) == 0;
	}
	if (a->have_thread)
		o->env_pending = true;   /* read on the thread (attrib_resolve) */
	else
		read_environ(a, pid, o, &r->env_cut);
	o->resolved = any;
	return any;
}

const char *attrib_proc_root(const struct attrib *a)
{
	return a ? a->proc_root : "/proc";
}

void attrib_set_labels(struct attrib *a, uint16_t labels)
{
	if (a)
		atomic_store(&a->labels, labels);
}

void attrib_resolve(struct attrib *a, uint32_t pid, struct proc_owner *out)
{
	uint64_t ticks = 0;
	bool have_ticks = start_ticks(a, pid, &ticks);
	pthread_mutex_lock(&a->lock);
	if (have_ticks) {
		for (int i = 0; i < a->ncache; i++) {
			struct cache_entry *e = &a->cache[i];
			if (e->pid == pid && e->start_ticks == ticks) {
				e->last_used = ++a->clock;
				*out = e->owner;
				out->labels = atomic_load(&a->labels);
				a->st.cache_hits_total++;
				pthread_mutex_unlock(&a->lock);
				return;
			}
		}
	}
	pthread_mutex_unlock(&a->lock);

	struct proc_read r;
	read_owner(a, pid, out, &r);
	out->labels = atomic_load(&a->labels);

	/* v1's /slurm/uid_U/job_J names the job's owner when the environment
	 * could not be read. */
	if (out->job[0] && !out->job_user[0] && r.job_uid_ok)
		user_name(a, r.job_uid, out->job_user, sizeof out->job_user);
	if (r.uid_ok)
		user_name(a, r.uid, out->user, sizeof out->user);
	pthread_mutex_lock(&a->lock);
	if (r.cut)
		a->st.labels_truncated_total++;
	if (r.cgroup_bad)
		a->st.cgroup_errors_total++;
	if (r.env_cut)
		a->st.environ_truncated_total++;
	if (!out->resolved || !have_ticks) {
		/* Gone, or not ours to read: not cached, tried again next time. */
		out->env_pending = false;
		a->st.proc_errors_total++;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	a->st.resolved_total++;
	int slot;
	if (a->ncache < ATTRIB_CACHE_MAX) {
		slot = a->ncache++;
	} else {
		slot = 0;
		for (int i = 1; i < a->ncache; i++)
			if (a->cache[i].last_used < a->cache[slot].last_used)
				slot = i;
		a->st.cache_evictions_total++;
	}
	out->start_ticks = ticks;
	if (out->env_pending) {
		if (a->envq_len < ATTRIB_ENV_QUEUE) {
			int k = (a->envq_head + a->envq_len++) % ATTRIB_ENV_QUEUE;
			a->envq[k].pid = pid;
			a->envq[k].ticks = ticks;
		} else {
			out->env_pending = false;   /* not read: counted */
			a->st.environ_skipped_total++;
		}
	}
	a->cache[slot] = (struct cache_entry){
		.pid = pid, .start_ticks = ticks, .last_used = ++a->clock, .owner = *out};
	bool wake = out->env_pending;
	pthread_mutex_unlock(&a->lock);
	if (wake) {
		pthread_mutex_lock(&a->wake_lock);
		a->env_work = true;
		mono_cond_broadcast(&a->wake);
		pthread_mutex_unlock(&a->wake_lock);
	}
}

void attrib_update_owner(struct attrib *a, uint32_t pid, struct proc_owner *out)
{
	if (!a || !out->env_pending)
		return;
	pthread_mutex_lock(&a->lock);
	for (int i = 0; i < a->ncache; i++) {
		const struct cache_entry *e = &a->cache[i];
		if (e->pid != pid || e->start_ticks != out->start_ticks)
			continue;
		if (!e->owner.env_pending) {
			snprintf(out->job, sizeof out->job, "%s", e->owner.job);
			snprintf(out->job_user, sizeof out->job_user, "%s", e->owner.job_user);
			snprintf(out->hostname, sizeof out->hostname, "%s", e->owner.hostname);
			out->env_pending = false;
		}
		break;
	}
	pthread_mutex_unlock(&a->lock);
}

/* Read the environment of every queued process, without the lock, and
 * put what it says into its cache entry. */
static void drain_environ(struct attrib *a)
{
	for (;;) {
		pthread_mutex_lock(&a->lock);
		if (a->envq_len == 0) {
			pthread_mutex_unlock(&a->lock);
			return;
		}
		uint32_t pid = a->envq[a->envq_head].pid;
		uint64_t ticks = a->envq[a->envq_head].ticks;
		a->envq_head = (a->envq_head + 1) % ATTRIB_ENV_QUEUE;
		a->envq_len--;
		struct proc_owner o;
		bool found = false;
		for (int i = 0; i < a->ncache && !found; i++) {
			if (a->cache[i].pid == pid && a->cache[i].start_ticks == ticks) {
				o = a->cache[i].owner;
				found = true;
			}
		}
		pthread_mutex_unlock(&a->lock);
		if (!found)
			continue;   /* pushed out of the cache meanwhile */
		bool cut = false;
		read_environ(a, pid, &o, &cut);
		pthread_mutex_lock(&a->lock);
		if (cut)
			a->st.environ_truncated_total++;
		for (int i = 0; i < a->ncache; i++) {
			struct cache_entry *e = &a->cache[i];
			if (e->pid != pid || e->start_ticks != ticks)
				continue;
			snprintf(e->owner.job, sizeof e->owner.job, "%s", o.job);
			snprintf(e->owner.job_user, sizeof e->owner.job_user, "%s", o.job_user);
			snprintf(e->owner.hostname, sizeof e->owner.hostname, "%s", o.hostname);
			e->owner.env_pending = false;
			break;
		}
		pthread_mutex_unlock(&a->lock);
	}
}

/* ---- pod-resources join ----------------------------------------------- */

void attrib_name_pod(struct attrib *a, const char *gpu_uuid, const char *mig_uuid,
		     struct proc_owner *out)
{
	out->pod[0] = out->namespace_[0] = out->container[0] = '\0';
	if (!a)
		return;
	out->labels = atomic_load(&a->labels);
	if (!out->pod_uid[0])
		return;
	pthread_mutex_lock(&a->lock);
	const struct attrib_allocation *pick = NULL;
	int pods = 0;
	for (size_t i = 0; i < a->nallocs; i++) {
		const struct attrib_allocation *al = &a->allocs[i];
		if (!attrib_device_matches(al->device_id, gpu_uuid) &&
		    !(mig_uuid && attrib_device_matches(al->device_id, mig_uuid)))
			continue;
		bool named = out->hostname[0] && strcmp(al->pod, out->hostname) == 0;
		if (pick && strcmp(pick->pod, al->pod) == 0 &&
		    strcmp(pick->namespace_, al->namespace_) == 0)
			continue;
		if (named) {
			pick = al;
			pods = 1;
			break;
		}
		if (!pick)
			pick = al;
		pods++;
	}
	if (pick && pods == 1) {
		snprintf(out->pod, sizeof out->pod, "%s", pick->pod);
		snprintf(out->namespace_, sizeof out->namespace_, "%s", pick->namespace_);
		snprintf(out->container, sizeof out->container, "%s", pick->container);
	}
	pthread_mutex_unlock(&a->lock);
}

void attrib_set_allocations(struct attrib *a, const struct attrib_allocation *in, size_t n)
{
	pthread_mutex_lock(&a->lock);
	if (n > ATTRIB_ALLOC_MAX) {
		a->st.podres_allocations_dropped_total += n - ATTRIB_ALLOC_MAX;
		n = ATTRIB_ALLOC_MAX;
	}
	memcpy(a->allocs, in, n * sizeof *in);
	a->nallocs = n;
	pthread_mutex_unlock(&a->lock);
}

size_t attrib_allocations(struct attrib *a, struct attrib_allocation *out, size_t max)
{
	if (!a)
		return 0;
	pthread_mutex_lock(&a->lock);
	size_t n = a->nallocs < max ? a->nallocs : max;
	memcpy(out, a->allocs, n * sizeof *out);
	pthread_mutex_unlock(&a->lock);
	return n;
}

void attrib_get_stats(struct attrib *a, struct attrib_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	*out = a->st;
	out->podres_allocations = a->nallocs;
	pthread_mutex_unlock(&a->lock);
}

/* ---- Slurm jobs' GPUs from their cgroup device rules -------------------- */

bool attrib_parse_devices_list(const char *text, size_t len, uint64_t *minors)
{
	*minors = 0;
	size_t i = 0;
	while (i < len) {
		size_t end = i;
		while (end < len && text[end] != '\n')
			end++;
		const char *l = text + i;
		size_t n = end - i;
		if (n >= 1 && l[0] == 'a')
			return false;   /* "a *:* rwm": everything, no GPU in particular */
		if (n > 6 && memcmp(l, "c 195:", 6) == 0) {
			unsigned v = 0;
			size_t k = 6, d = 0;
			while (k < n && isdigit((unsigned char)l[k]) && d < 4)
				v = v * 10 + (unsigned)(l[k++] - '0'), d++;
			if (d > 0 && (k == n || l[k] == ' ') && v < 64)
				*minors |= 1ull << v;
		}
		i = end + 1;
	}
	return true;
}

static bool name_is(const char *name, const char *prefix, const char **rest)
{
	size_t n = strlen(prefix);
	if (strncmp(name, prefix, n) != 0 || !name[n])
		return false;
	*rest = name + n;
	return true;
}

unsigned attrib_scan_slurm(const char *cgroup_root, struct attrib_allocation *out, size_t max,
			   size_t *n, size_t *dropped)
{
	unsigned errors = 0;
	*n = *dropped = 0;
	char base[512];
	snprintf(base, sizeof base, "%s/devices", cgroup_root);
	DIR *top = opendir(base);
	if (!top)
		return 0;   /* no v1 devices hierarchy: nothing to read */
	struct dirent *t;
	while ((t = readdir(top))) {
		/* "slurm", or "slurm_NODE" when several slurmd share a host. */
		if (strcmp(t->d_name, "slurm") != 0 && strncmp(t->d_name, "slurm_", 6) != 0)
			continue;
		char sdir[800];
		snprintf(sdir, sizeof sdir, "%s/%s", base, t->d_name);
		DIR *sd = opendir(sdir);
		if (!sd)
			continue;
		struct dirent *u;
		while ((u = readdir(sd))) {
			const char *uid;
			if (!name_is(u->d_name, "uid_", &uid))
				continue;
			char udir[1100];
			snprintf(udir, sizeof udir, "%s/%s", sdir, u->d_name);
			DIR *ud = opendir(udir);
			if (!ud)
				continue;
			struct dirent *j;
			while ((j = readdir(ud))) {
				const char *job;
				if (!name_is(j->d_name, "job_", &job) || strlen(job) >= OWNER_SHORT_LEN)
					continue;
				char file[1400], text[4096];
				snprintf(file, sizeof file, "%s/%s/devices.list", udir, j->d_name);
				int fd = open(file, O_RDONLY | O_CLOEXEC);
				ssize_t got = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
				if (fd >= 0)
					close(fd);
				if (got < 0) {
					errors++;
					continue;
				}
				uint64_t minors;
				if (!attrib_parse_devices_list(text, (size_t)got, &minors))
					continue;
				for (int m = 0; m < 64; m++) {
					if (!(minors & 1ull << m))
						continue;
					if (*n >= max) {
						(*dropped)++;
						continue;
					}
					struct attrib_allocation *a = &out[(*n)++];
					memset(a, 0, sizeof *a);
					owner_copy_label(a->job, sizeof a->job, job, strlen(job));
					owner_copy_label(a->job_user, sizeof a->job_user, uid, strlen(uid));
					a->minor = m;
					snprintf(a->resource, sizeof a->resource, "slurm");
				}
			}
			closedir(ud);
		}
		closedir(sd);
	}
	closedir(top);
	return errors;
}

/* ---- the pod-resources thread ----------------------------------------- */

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One refresh: List, then swap the table in. The call runs without the
 * lock, into a buffer of the thread's own, so lookups never wait on it. */
static void refresh(struct attrib *a, struct attrib_allocation *scratch)
{
	size_t n = 0, dropped = 0;
	char err[160] = "";
	int rc = 0;
	if (a->socket[0]) {
		rc = podres_list(a->socket, a->timeout_ns, scratch, ATTRIB_ALLOC_MAX, &n, &dropped,
				 err, sizeof err);
		for (size_t i = 0; i < n; i++)
			scratch[i].minor = -1;
	}
	if (rc != 0) {
		/* Keep the pods of the last good answer (below); Slurm's are
		 * read again whatever the kubelet does. */
		pthread_mutex_lock(&a->lock);
		n = 0;
		for (size_t i = 0; i < a->nallocs; i++)
			if (!a->allocs[i].job[0])
				scratch[n++] = a->allocs[i];
		pthread_mutex_unlock(&a->lock);
	}
	size_t ns = 0, sdropped = 0;
	unsigned serr = 0;
	if (a->cgroup_root[0])
		serr = attrib_scan_slurm(a->cgroup_root, scratch + n, ATTRIB_ALLOC_MAX - n, &ns,
					 &sdropped);
	for (size_t i = n; i < n + ns; i++) {
		/* uid_U -> a name, through the same once-per-UID cache. */
		char *end;
		unsigned long uid = strtoul(scratch[i].job_user, &end, 10);
		if (scratch[i].job_user[0] && !*end && uid <= UINT32_MAX)
			user_name(a, (uint32_t)uid, scratch[i].job_user, sizeof scratch[i].job_user);
	}
	pthread_mutex_lock(&a->lock);
	a->st.slurm_scan_errors_total += serr;
	a->st.podres_allocations_dropped_total += sdropped;
	uint64_t jobs = 0;
	for (size_t i = n; i < n + ns; i++) {
		bool seen = false;
		for (size_t k = n; k < i && !seen; k++)
			seen = strcmp(scratch[k].job, scratch[i].job) == 0;
		jobs += !seen;
	}
	a->st.slurm_jobs = jobs;
	pthread_mutex_unlock(&a->lock);
	attrib_set_allocations(a, scratch, n + ns);
	if (!a->socket[0])
		return;
	pthread_mutex_lock(&a->lock);
	bool changed = strcmp(err, a->st.podres_last_error) != 0;
	if (rc != 0 && changed && rc != GPULSE_ENOENT)
		log_warn("attribution: %s (retried every %.0f s)", err, (double)a->refresh_ns / 1e9);
	else if (rc == 0 && a->st.podres_failures_total > 0 && !a->st.podres_available)
		log_info("attribution: pod-resources answers again (%zu device allocations)", n);
	if (rc == 0) {
		a->st.podres_refreshes_total++;
		a->st.podres_allocations_dropped_total += dropped;
		a->st.podres_available = true;
		a->st.podres_last_error[0] = '\0';
	} else {
		/* Keep the last table: a kubelet restart should not make every
		 * pod's GPUs look free for one refresh. */
		a->st.podres_failures_total++;
		a->st.podres_available = false;
		snprintf(a->st.podres_last_error, sizeof a->st.podres_last_error, "%s", err);
	}
	pthread_mutex_unlock(&a->lock);
}

static void *podres_thread(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-podres");
	struct attrib *a = arg;
	struct attrib_allocation *scratch = calloc(ATTRIB_ALLOC_MAX, sizeof *scratch);
	if (!scratch)
		return NULL;
	/* Two jobs on one thread: the refresh every refresh_ns, and the
	 * environ reads as soon as they are queued. */
	int64_t due = mono_ns();
	pthread_mutex_lock(&a->wake_lock);
	while (!a->stopping) {
		bool work = a->env_work;
		a->env_work = false;
		pthread_mutex_unlock(&a->wake_lock);
		if (work)
			drain_environ(a);
		if (mono_ns() >= due) {
			refresh(a, scratch);
			due = mono_ns() + a->refresh_ns;
		}
		/* due is on CLOCK_MONOTONIC (mono_ns), as mono_cond waits. */
		pthread_mutex_lock(&a->wake_lock);
		while (!a->stopping && !a->env_work) {
			if (mono_cond_wait_until(&a->wake, &a->wake_lock, due) == ETIMEDOUT)
				break;
		}
	}
	pthread_mutex_unlock(&a->wake_lock);
	free(scratch);
	return NULL;
}

int attrib_open(struct attrib **out, const struct attrib_config *cfg)
{
	*out = NULL;
	struct attrib *a = calloc(1, sizeof *a);
	if (!a)
		return GPULSE_ENOMEM;
	a->cache = calloc(ATTRIB_CACHE_MAX, sizeof *a->cache);
	a->allocs = calloc(ATTRIB_ALLOC_MAX, sizeof *a->allocs);
	if (!a->cache || !a->allocs) {
		free(a->cache);
		free(a->allocs);
		free(a);
		return GPULSE_ENOMEM;
	}
	snprintf(a->proc_root, sizeof a->proc_root, "%s",
		 cfg && cfg->proc_root && cfg->proc_root[0] ? cfg->proc_root : "/proc");
	if (cfg && cfg->cgroup_root)
		snprintf(a->cgroup_root, sizeof a->cgroup_root, "%s", cfg->cgroup_root);
	if (cfg && cfg->pod_resources_socket)
		snprintf(a->socket, sizeof a->socket, "%s", cfg->pod_resources_socket);
	a->refresh_ns = cfg && cfg->pod_resources_refresh_ns > 0 ? cfg->pod_resources_refresh_ns
							      : 10 * (int64_t)1000000000;
	a->timeout_ns = cfg && cfg->pod_resources_timeout_ns > 0 ? cfg->pod_resources_timeout_ns
							      : 2 * (int64_t)1000000000;
	atomic_store(&a->labels, cfg ? cfg->labels : OWNER_DEFAULT_LABELS);
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->wake_lock, NULL);
	mono_cond_init(&a->wake);
	a->st.podres_configured = a->socket[0] != '\0';
	a->st.slurm_configured = a->cgroup_root[0] != '\0';
	if (a->socket[0] || a->cgroup_root[0])
		a->have_thread = pthread_create(&a->thread, NULL, podres_thread, a) == 0;
	*out = a;
	return 0;
}

void attrib_close(struct attrib *a)
{
	if (!a)
		return;
	if (a->have_thread) {
		pthread_mutex_lock(&a->wake_lock);
		a->stopping = true;
		mono_cond_broadcast(&a->wake);
		pthread_mutex_unlock(&a->wake_lock);
		pthread_join(a->thread, NULL);
	}
	mono_cond_destroy(&a->wake);
	pthread_mutex_destroy(&a->wake_lock);
	pthread_mutex_destroy(&a->lock);
	free(a->cache);
	free(a->allocs);
	free(a);
}
