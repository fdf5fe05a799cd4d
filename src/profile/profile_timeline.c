/* Per-GPU timeline of traced intervals; see profile_timeline.h. */
#include "profile/profile_timeline.h"

#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"

#define MAP_PIDS 256             /* processes whose device mapping is cached */
#define VISIBLE_MAX 512          /* bytes of CUDA_VISIBLE_DEVICES kept */
#define ENVIRON_MAX (256 * 1024) /* bytes of /proc/PID/environ read */
#define MERGE_LOOKBACK 32        /* frames of one interval arrive together */
#define KIND_CACHE 512           /* kernel names whose kind is remembered */

struct interval {
	uint32_t pid;
	uint64_t start_ns, end_ns;
	uint64_t traced_ns;
	double launches, kernel_ns;
	double kind_ns[SPLIT_KIND_COUNT];
	double copy_bytes, copy_ns;
	double sync_ns;
};

struct ring {
	struct interval *slot;   /* PROFILE_TIMELINE_SLOTS; NULL until used */
	size_t head, count;      /* head: the next slot written */
};

struct pid_map {
	uint32_t pid;            /* 0: free */
	bool set;                /* CUDA_VISIBLE_DEVICES was found */
	char visible[VISIBLE_MAX];
	uint64_t used;           /* for eviction: the newest use wins */
};

struct profile_timeline {
	pthread_mutex_t lock;
	profile_uuid_fn *resolve;
	void *ctx;
	struct ring gpu[PROFILE_TIMELINE_GPUS];
	struct pid_map map[MAP_PIDS];
	uint64_t tick;
	/* split_kernel_kind of recent names by their hash: a name is matched
	 * against a few dozen words once, not at every interval. */
	struct {
		uint64_t hash;
		uint8_t kind;
		bool set;
	} kinds[KIND_CACHE];
};

/* The kind of a kernel name; called with the lock. */
static enum split_kind kind_of(struct profile_timeline *t, const char *name)
{
	uint64_t h = wire_name_hash(name);
	size_t i = (size_t)(h % KIND_CACHE);
	if (!t->kinds[i].set || t->kinds[i].hash != h) {
		t->kinds[i].hash = h;
		t->kinds[i].kind = (uint8_t)split_kernel_kind(name);
		t->kinds[i].set = true;
	}
	return (enum split_kind)t->kinds[i].kind;
}

int profile_timeline_new(struct profile_timeline **out, profile_uuid_fn *resolve, void *ctx)
{
	struct profile_timeline *t = calloc(1, sizeof *t);
	if (!t)
		return GPULSE_ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->resolve = resolve;
	t->ctx = ctx;
	*out = t;
	return GPULSE_OK;
}

void profile_timeline_free(struct profile_timeline *t)
{
	if (!t)
		return;
	for (int g = 0; g < PROFILE_TIMELINE_GPUS; g++)
		free(t->gpu[g].slot);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int profile_visible_device(const char *visible, uint32_t ordinal, profile_uuid_fn *resolve,
			   void *ctx)
{
	if (!visible)
		return ordinal < PROFILE_TIMELINE_GPUS ? (int)ordinal : -1;
	/* CUDA reads the list up to its first invalid entry. */
	const char *p = visible;
	for (uint32_t k = 0;; k++) {
		while (*p == ' ')
			p++;
		size_t len = strcspn(p, ",");
		char item[128];
		if (len == 0 || len >= sizeof item)
			return -1;
		memcpy(item, p, len);
		item[len] = '\0';
		while (len && item[len - 1] == ' ')
			item[--len] = '\0';
		int idx = -1;
		if (isdigit((unsigned char)item[0])) {
			char *end;
			long v = strtol(item, &end, 10);
			if (*end || v < 0 || v >= PROFILE_TIMELINE_GPUS)
				return -1;
			idx = (int)v;
		} else if (strncmp(item, "GPU-", 4) == 0 && resolve) {
			idx = resolve(ctx, item);
			if (idx < 0 || idx >= PROFILE_TIMELINE_GPUS)
				return -1;
		} else if (strncmp(item, "MIG-GPU-", 8) == 0 && resolve) {
			/* A MIG instance by its parent GPU (MIG-GPU-UUID/GI/CI,
			 * the form of drivers before R470): the work runs on
			 * that GPU. The later MIG-UUID form names no GPU. */
			item[strcspn(item, "/")] = '\0';
			idx = resolve(ctx, item + 4);
			if (idx < 0 || idx >= PROFILE_TIMELINE_GPUS)
				return -1;
		} else if (strncmp(item, "MIG-", 4) == 0 && resolve) {
			/* A MIG instance by its own UUID (R470 and later): the
			 * resolver knows each instance's parent GPU. */
			idx = resolve(ctx, item);
			if (idx < 0 || idx >= PROFILE_TIMELINE_GPUS)
				return -1;
		} else {
			return -1;  /* what CUDA would stop at */
		}
		if (k == ordinal)
			return idx;
		p += strcspn(p, ",");
		if (*p != ',')
			return -1;
		p++;
	}
}

/* CUDA_VISIBLE_DEVICES of pid into m (m->set false when unset or
 * unreadable: the daemon may not read another user's environment). */
static void read_visible(uint32_t pid, struct pid_map *m)
{
	m->set = false;
	char path[64];
	snprintf(path, sizeof path, "/proc/%u/environ", (unsigned)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char *buf = malloc(ENVIRON_MAX + 1);
	size_t n = 0;
	while (buf && n < ENVIRON_MAX) {
		ssize_t r = read(fd, buf + n, ENVIRON_MAX - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (!buf)
		return;
	buf[n] = '\0';
	static const char key[] = "CUDA_VISIBLE_DEVICES=";
	for (size_t i = 0; i < n;) {
		const char *e = buf + i;
		size_t len = strnlen(e, n - i);
		if (len >= sizeof key - 1 && memcmp(e, key, sizeof key - 1) == 0) {
			snprintf(m->visible, sizeof m->visible, "%.*s", (int)(len - (sizeof key - 1)),
				 e + sizeof key - 1);
			m->set = true;
			break;
		}
		i += len + 1;
	}
	free(buf);
}

/* The GPU index of pid's CUDA device `ordinal`; called with the lock. */
static int map_device(struct profile_timeline *t, uint32_t pid, uint32_t ordinal)
{
	struct pid_map *m = NULL, *victim = &t->map[0];
	for (int i = 0; i < MAP_PIDS; i++) {
		if (t->map[i].pid == pid) {
			m = &t->map[i];
			break;
		}
		if (t->map[i].used < victim->used)
			victim = &t->map[i];
	}
	if (!m) {
		m = victim;
		memset(m, 0, sizeof *m);
		m->pid = pid;
		read_visible(pid, m);
	}
	m->used = ++t->tick;
	return profile_visible_device(m->set ? m->visible : NULL, ordinal, t->resolve, t->ctx);
}

void profile_timeline_forget(struct profile_timeline *t, uint32_t pid)
{
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < MAP_PIDS; i++)
		if (t->map[i].pid == pid)
			memset(&t->map[i], 0, sizeof t->map[i]);
	pthread_mutex_unlock(&t->lock);
}

/* The interval of pid at this scope on ring r, merged into or new. */
static struct interval *slot_for(struct ring *r, uint32_t pid, const struct wire_scope *sc)
{
	for (size_t k = 0; k < r->count && k < MERGE_LOOKBACK; k++) {
		size_t i = (r->head + PROFILE_TIMELINE_SLOTS - 1 - k) % PROFILE_TIMELINE_SLOTS;
		struct interval *x = &r->slot[i];
		if (x->pid == pid && x->start_ns == sc->interval_start_ns &&
		    x->end_ns == sc->interval_end_ns)
			return x;
	}
	struct interval *x = &r->slot[r->head];
	r->head = (r->head + 1) % PROFILE_TIMELINE_SLOTS;
	if (r->count < PROFILE_TIMELINE_SLOTS)
		r->count++;
	memset(x, 0, sizeof *x);
	x->pid = pid;
	x->start_ns = sc->interval_start_ns;
	x->end_ns = sc->interval_end_ns;
	return x;
}

void profile_timeline_add(struct profile_timeline *t, uint32_t pid, const struct wire_msg *m)
{
	const struct wire_scope *sc;
	switch (m->type) {
	case WIRE_KERNELS:
		sc = &m->u.kernels.scope;
		break;
	case WIRE_COPIES:
		sc = &m->u.copies.scope;
		break;
	case WIRE_STREAMS:
		sc = &m->u.streams.scope;
		break;
	default:
		return;
	}
	if (!(sc->interval_end_ns > sc->interval_start_ns))
		return;
	pthread_mutex_lock(&t->lock);
	int g = map_device(t, pid, sc->device);
	if (g < 0)
		goto out;
	struct ring *r = &t->gpu[g];
	if (!r->slot && !(r->slot = calloc(PROFILE_TIMELINE_SLOTS, sizeof *r->slot)))
		goto out;
	struct interval *x = slot_for(r, pid, sc);
	if (sc->traced_ns > x->traced_ns)
		x->traced_ns = sc->traced_ns;
	if (m->type == WIRE_KERNELS) {
		for (uint32_t i = 0; i < m->u.kernels.count; i++) {
			const struct wire_kernel *k = &m->u.kernels.kernels[i];
			x->launches += (double)k->launches;
			x->kernel_ns += (double)k->total_ns;
			x->kind_ns[kind_of(t, k->name)] += (double)k->total_ns;
		}
	} else if (m->type == WIRE_COPIES) {
		for (uint32_t i = 0; i < m->u.copies.count; i++) {
			const struct wire_copy *c = &m->u.copies.copies[i];
			if (c->kind != WIRE_COPY_H2D && c->kind != WIRE_COPY_D2H)
				continue;
			x->copy_bytes += (double)c->bytes;
			x->copy_ns += (double)c->total_ns;
		}
	} else {
		for (uint32_t i = 0; i < m->u.streams.count; i++)
			x->sync_ns += (double)m->u.streams.streams[i].sync_wait_ns;
	}
out:
	pthread_mutex_unlock(&t->lock);
}

bool profile_timeline_sum(struct profile_timeline *t, int gpu, double a_s, double b_s,
			  struct profile_window_sum *out)
{
	memset(out, 0, sizeof *out);
	if (gpu < 0 || gpu >= PROFILE_TIMELINE_GPUS || !(b_s > a_s))
		return false;
	struct {
		uint32_t pid;
		double traced_ns, kernel_ns;
	} per[PROFILE_TIMELINE_PIDS];
	size_t npid = 0;
	double a = a_s * 1e9, b = b_s * 1e9;
	bool any = false;
	pthread_mutex_lock(&t->lock);
	const struct ring *r = &t->gpu[gpu];
	for (size_t k = 0; r->slot && k < r->count; k++) {
		const struct interval *x = &r->slot[k];
		double s = (double)x->start_ns, e = (double)x->end_ns;
		double lo = s > a ? s : a, hi = e < b ? e : b;
		if (!(hi > lo))
			continue;
		double f = (hi - lo) / (e - s);
		any = true;
		out->launches += f * x->launches;
		out->kernel_s += f * x->kernel_ns / 1e9;
		out->copy_bytes += f * x->copy_bytes;
		out->copy_s += f * x->copy_ns / 1e9;
		out->sync_wait_s += f * x->sync_ns / 1e9;
		size_t p = 0;
		while (p < npid && per[p].pid != x->pid)
			p++;
		if (p == npid) {
			if (npid == PROFILE_TIMELINE_PIDS)
				continue;  /* amounts counted; this process is not told apart */
			per[npid].pid = x->pid;
			per[npid].traced_ns = per[npid].kernel_ns = 0;
			npid++;
		}
		per[p].traced_ns += f * (double)x->traced_ns;
		per[p].kernel_ns += f * x->kernel_ns;
	}
	pthread_mutex_unlock(&t->lock);
	out->processes = (unsigned)npid;
	for (size_t p = 0; p < npid; p++) {
		if (per[p].traced_ns / 1e9 > out->traced_s)
			out->traced_s = per[p].traced_ns / 1e9;
		if (per[p].kernel_ns / 1e9 > out->top_kernel_s) {
			out->top_kernel_s = per[p].kernel_ns / 1e9;
			out->top_pid = per[p].pid;
		}
	}
	return any;
}

size_t profile_timeline_pids(struct profile_timeline *t, int gpu, double a_s, double b_s,
			     struct profile_pid_sum *out, size_t max)
{
	if (gpu < 0 || gpu >= PROFILE_TIMELINE_GPUS || !(b_s > a_s) || max == 0)
		return 0;
	size_t n = 0;
	double a = a_s * 1e9, b = b_s * 1e9;
	pthread_mutex_lock(&t->lock);
	const struct ring *r = &t->gpu[gpu];
	for (size_t k = 0; r->slot && k < r->count; k++) {
		const struct interval *x = &r->slot[k];
		double s = (double)x->start_ns, e = (double)x->end_ns;
		double lo = s > a ? s : a, hi = e < b ? e : b;
		if (!(hi > lo))
			continue;
		double f = (hi - lo) / (e - s);
		size_t p = 0;
		while (p < n && out[p].pid != x->pid)
			p++;
		if (p == n) {
			if (n == max)
				continue;
			memset(&out[n], 0, sizeof out[n]);
			out[n++].pid = x->pid;
		}
		/* The traced time of the overlap: an interval traced whole
		 * (continuous mode) covers all of it. */
		out[p].traced_s += f * (double)x->traced_ns / 1e9;
		out[p].launches += f * x->launches;
		for (int j = 0; j < SPLIT_KIND_COUNT; j++)
			out[p].kernel_s[j] += f * x->kind_ns[j] / 1e9;
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}
