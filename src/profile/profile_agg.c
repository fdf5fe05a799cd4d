/* Per-process CUDA statistics from libgpulse-inject.so; see profile_agg.h.
 * A table of processes (pointers, max_processes), each with up to
 * PROFILE_MAX_DEVICES device entries allocated on first use; every
 * lookup is a linear scan, which at these sizes (hundreds of processes,
 * tens of kernels per device) costs less than keeping hash tables. */
#include "profile/profile_agg.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "store/tsdb.h"
#include "common/utf8.h"

struct pkernel {
	char *name;                     /* cleaned to UTF-8, malloc'd (up to
					   WIRE_KERNEL_NAME_MAX bytes: most are
					   short, so not a fixed array) */
	char id[17];                    /* 16 hex digits of wire_name_hash(name) */
	uint64_t launches, total_ns, min_ns, max_ns;
	uint64_t hist[WIRE_HIST_BUCKETS];
	uint32_t grid[3], block[3], registers, shared_bytes;
};

struct pcopy {
	uint64_t count, bytes, total_ns;
	bool seen;
};

struct prange {
	char name[WIRE_NAME_MAX + 1];
	uint64_t count, total_ns, max_ns;
};

struct pdev {
	uint32_t device;
	struct pkernel *kernels;        /* kernels_per_process entries */
	unsigned nkernels;
	struct pkernel other;
	bool have_other;
	struct pcopy copies[WIRE_COPY_KIND_COUNT][2];
	bool have_uvm;
	uint64_t cpu_faults, gpu_faults, uvm_h2d, uvm_d2h, thrashing, throttling;
	bool have_streams;
	uint64_t busy_ns, gap_ns, sync_wait_ns, syncs;
	struct prange ranges[PROFILE_RANGES_PER_DEVICE];
	unsigned nranges;
	struct prange range_other;
	bool have_range_other;
	uint64_t traced_ns;
};

struct pproc {
	uint32_t pid, uid;
	char comm[PROFILE_COMM_MAX];
	char pid_text[16];
	struct wire_hello hello;
	struct wire_status status;
	bool have_status;
	bool connected;
	int64_t disconnected_ns;        /* monotonic */
	struct pdev *dev[PROFILE_MAX_DEVICES];
	unsigned ndev;
};

struct profile_agg {
	pthread_mutex_t lock;
	struct profile_limits lim;
	struct pproc **procs;
	unsigned nprocs;
	struct profile_agg_stats st;
};

static const char *const mode_names[] = {"continuous", "profiler-api", "nvtx", "full", "off"};
static const char *const copy_names[] = {"h2d", "d2h", "d2d", "peer", "other", "memset"};
static const char *const source_names[] = {[WIRE_SOURCE_TRACE] = "trace",
					   [WIRE_SOURCE_CENSUS] = "census"};

const char *profile_source_name(unsigned source)
{
	return source < sizeof source_names / sizeof source_names[0] ? source_names[source]
								     : "unknown";
}

/* What p's statistics are built from: its last STATUS says; before the
 * first one, its HELLO's mode (the library's own rule: continuous mode
 * counts launches unless a capture is on, and none is at HELLO). */
static unsigned source_of(const struct pproc *p)
{
	if (p->have_status)
		return p->status.source;
	return p->hello.mode == WIRE_MODE_CONTINUOUS ? WIRE_SOURCE_CENSUS : WIRE_SOURCE_TRACE;
}

const char *profile_mode_name(unsigned mode)
{
	return mode < sizeof mode_names / sizeof mode_names[0] ? mode_names[mode] : "unknown";
}

int profile_mode_parse(const char *name)
{
	for (size_t i = 0; i < sizeof mode_names / sizeof mode_names[0]; i++)
		if (strcmp(name, mode_names[i]) == 0)
			return (int)i;
	return -1;
}

const char *profile_copy_kind_name(unsigned kind)
{
	return kind < WIRE_COPY_KIND_COUNT ? copy_names[kind] : "unknown";
}

int profile_agg_new(struct profile_agg **out, const struct profile_limits *limits)
{
	struct profile_agg *a = calloc(1, sizeof *a);
	if (!a)
		return GPULSE_ENOMEM;
	a->lim = *limits;
	if (!a->lim.max_processes)
		a->lim.max_processes = 512;
	if (!a->lim.kernels_per_process)
		a->lim.kernels_per_process = 32;
	if (!a->lim.max_kernel_series)
		a->lim.max_kernel_series = 4096;
	if (!a->lim.expire_ns)
		a->lim.expire_ns = 300LL * 1000000000LL;
	a->procs = calloc(a->lim.max_processes, sizeof *a->procs);
	if (!a->procs) {
		free(a);
		return GPULSE_ENOMEM;
	}
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return 0;
}

static void proc_free(struct profile_agg *a, struct pproc *p)
{
	for (unsigned i = 0; i < p->ndev; i++) {
		a->st.kernel_series -= p->dev[i]->nkernels;
		for (unsigned k = 0; p->dev[i]->kernels && k < p->dev[i]->nkernels; k++)
			free(p->dev[i]->kernels[k].name);
		free(p->dev[i]->kernels);
		free(p->dev[i]);
	}
	free(p);
}

void profile_agg_free(struct profile_agg *a)
{
	if (!a)
		return;
	for (unsigned i = 0; i < a->nprocs; i++)
		proc_free(a, a->procs[i]);
	free(a->procs);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

static struct pproc *find(struct profile_agg *a, uint32_t pid, unsigned *idx)
{
	for (unsigned i = 0; i < a->nprocs; i++)
		if (a->procs[i]->pid == pid) {
			if (idx)
				*idx = i;
			return a->procs[i];
		}
	return NULL;
}

static void remove_at(struct profile_agg *a, unsigned i)
{
	proc_free(a, a->procs[i]);
	a->procs[i] = a->procs[--a->nprocs];
}

/* The process name: the first word of the command line, without its
 * directory, when /proc gave none. */
static void comm_from_cmdline(char *out, size_t len, const char *cmdline)
{
	size_t n = strcspn(cmdline, " ");
	const char *start = cmdline;
	for (size_t i = 0; i < n; i++)
		if (cmdline[i] == '/')
			start = cmdline + i + 1;
	size_t k = (size_t)(cmdline + n - start);
	char tmp[PROFILE_COMM_MAX];
	if (k >= sizeof tmp)
		k = sizeof tmp - 1;
	memcpy(tmp, start, k);
	tmp[k] = '\0';
	utf8_clean(out, len, k ? tmp : "unknown");
}

int profile_agg_hello(struct profile_agg *a, const struct wire_hello *h, const char *comm,
		      int64_t now_mono_ns)
{
	int rc = 0;
	pthread_mutex_lock(&a->lock);
	unsigned idx;
	struct pproc *p = find(a, h->pid, &idx);
	if (p && p->hello.start_wall_ns != h->start_wall_ns) {
		/* The pid was reused by a new process. */
		remove_at(a, idx);
		p = NULL;
	}
	if (!p) {
		if (a->nprocs == a->lim.max_processes) {
			/* Make room: the process disconnected longest ago goes. */
			int victim = -1;
			for (unsigned i = 0; i < a->nprocs; i++)
				if (!a->procs[i]->connected &&
				    (victim < 0 ||
				     a->procs[i]->disconnected_ns < a->procs[victim]->disconnected_ns))
					victim = (int)i;
			if (victim < 0) {
				a->st.processes_refused_total++;
				rc = GPULSE_ELIMIT;
				goto out;
			}
			remove_at(a, (unsigned)victim);
			a->st.processes_expired_total++;
		}
		p = calloc(1, sizeof *p);
		if (!p) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		a->procs[a->nprocs++] = p;
	}
	p->pid = h->pid;
	p->uid = h->uid;
	p->hello = *h;
	utf8_clean(p->hello.cmdline, sizeof p->hello.cmdline, h->cmdline);
	utf8_clean(p->hello.lib_version, sizeof p->hello.lib_version, h->lib_version);
	if (comm && comm[0])
		utf8_clean(p->comm, sizeof p->comm, comm);
	else
		comm_from_cmdline(p->comm, sizeof p->comm, p->hello.cmdline);
	snprintf(p->pid_text, sizeof p->pid_text, "%u", (unsigned)h->pid);
	p->connected = true;
	(void)now_mono_ns;
out:
	pthread_mutex_unlock(&a->lock);
	return rc;
}

void profile_agg_disconnect(struct profile_agg *a, uint32_t pid, int64_t now_mono_ns)
{
	pthread_mutex_lock(&a->lock);
	struct pproc *p = find(a, pid, NULL);
	if (p) {
		p->connected = false;
		p->disconnected_ns = now_mono_ns;
	}
	pthread_mutex_unlock(&a->lock);
}

void profile_agg_expire(struct profile_agg *a, int64_t now_mono_ns)
{
	pthread_mutex_lock(&a->lock);
	for (unsigned i = 0; i < a->nprocs;) {
		struct pproc *p = a->procs[i];
		if (!p->connected && now_mono_ns - p->disconnected_ns >= a->lim.expire_ns) {
			remove_at(a, i);
			a->st.processes_expired_total++;
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&a->lock);
}

bool profile_agg_has(struct profile_agg *a, uint32_t pid, char *comm, size_t len)
{
	pthread_mutex_lock(&a->lock);
	struct pproc *p = find(a, pid, NULL);
	if (p && comm)
		snprintf(comm, len, "%s", p->comm);
	pthread_mutex_unlock(&a->lock);
	return p != NULL;
}

/* The entry of `device`, created on first use; NULL past the bound. */
static struct pdev *device_of(struct profile_agg *a, struct pproc *p, uint32_t device)
{
	for (unsigned i = 0; i < p->ndev; i++)
		if (p->dev[i]->device == device)
			return p->dev[i];
	if (p->ndev == PROFILE_MAX_DEVICES) {
		a->st.devices_folded_total++;
		return NULL;
	}
	struct pdev *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->device = device;
	d->other.name = (char *)"other"; /* never freed: not in kernels[] */
	snprintf(d->other.id, sizeof d->other.id, "%016llx",
		 (unsigned long long)wire_name_hash("other"));
	strcpy(d->range_other.name, "other");
	p->dev[p->ndev++] = d;
	return d;
}

static void kernel_add(struct pkernel *k, const struct wire_kernel *w)
{
	if (w->launches == 0)
		return;
	if (k->launches == 0 || w->min_ns < k->min_ns)
		k->min_ns = w->min_ns;
	if (w->max_ns > k->max_ns)
		k->max_ns = w->max_ns;
	k->launches += w->launches;
	k->total_ns += w->total_ns;
	for (unsigned b = 0; b < WIRE_HIST_BUCKETS; b++)
		k->hist[b] += w->hist[b];
	memcpy(k->grid, w->grid, sizeof k->grid);
	memcpy(k->block, w->block, sizeof k->block);
	k->registers = w->registers;
	k->shared_bytes = w->shared_bytes;
}

/* Merge a whole named entry into "other". */
static void kernel_fold(struct pkernel *other, const struct pkernel *k)
{
	if (k->launches == 0)
		return;
	if (other->launches == 0 || k->min_ns < other->min_ns)
		other->min_ns = k->min_ns;
	if (k->max_ns > other->max_ns)
		other->max_ns = k->max_ns;
	other->launches += k->launches;
	other->total_ns += k->total_ns;
	for (unsigned b = 0; b < WIRE_HIST_BUCKETS; b++)
		other->hist[b] += k->hist[b];
}

static void add_kernel(struct profile_agg *a, struct pdev *d, const struct wire_kernel *w)
{
	char name[WIRE_KERNEL_NAME_MAX + 1];
	utf8_clean(name, sizeof name, w->name);
	if (strcmp(name, "other") == 0 || name[0] == '\0') {
		kernel_add(&d->other, w);
		d->have_other = true;
		return;
	}
	for (unsigned i = 0; i < d->nkernels; i++)
		if (strcmp(d->kernels[i].name, name) == 0) {
			kernel_add(&d->kernels[i], w);
			return;
		}
	if (!d->kernels)
		d->kernels = calloc(a->lim.kernels_per_process, sizeof *d->kernels);
	char *copy = d->kernels ? strdup(name) : NULL;
	if (!copy) {
		kernel_add(&d->other, w);
		d->have_other = true;
		return;
	}
	struct pkernel *slot = NULL;
	if (d->nkernels < a->lim.kernels_per_process && a->st.kernel_series < a->lim.max_kernel_series) {
		slot = &d->kernels[d->nkernels++];
		a->st.kernel_series++;
	} else {
		/* Full: one entry goes to "other", the new kernel or, when the
		 * new one weighs more, the lightest named one. */
		a->st.kernels_folded_total++;
		d->have_other = true;
		if (d->nkernels > 0) {
			struct pkernel *light = &d->kernels[0];
			for (unsigned i = 1; i < d->nkernels; i++)
				if (d->kernels[i].total_ns < light->total_ns)
					light = &d->kernels[i];
			if (w->total_ns > light->total_ns) {
				kernel_fold(&d->other, light);
				slot = light;
			}
		}
		if (!slot) {
			free(copy);
			kernel_add(&d->other, w);
			return;
		}
	}
	free(slot->name);
	memset(slot, 0, sizeof *slot);
	slot->name = copy;
	snprintf(slot->id, sizeof slot->id, "%016llx", (unsigned long long)wire_name_hash(copy));
	kernel_add(slot, w);
}

static void add_range(struct profile_agg *a, struct pdev *d, const struct wire_range *w)
{
	char name[WIRE_NAME_MAX + 1];
	utf8_clean(name, sizeof name, w->name);
	struct prange *r = NULL;
	for (unsigned i = 0; i < d->nranges && !r; i++)
		if (strcmp(d->ranges[i].name, name) == 0)
			r = &d->ranges[i];
	if (!r && strcmp(name, "other") != 0 && name[0] && d->nranges < PROFILE_RANGES_PER_DEVICE) {
		r = &d->ranges[d->nranges++];
		strcpy(r->name, name);
	}
	if (!r) {
		if (strcmp(name, "other") != 0)
			a->st.ranges_folded_total++;
		r = &d->range_other;
		d->have_range_other = true;
	}
	r->count += w->count;
	r->total_ns += w->total_ns;
	if (w->max_ns > r->max_ns)
		r->max_ns = w->max_ns;
}

int profile_agg_frame(struct profile_agg *a, uint32_t pid, const struct wire_msg *m)
{
	int rc = 0;
	pthread_mutex_lock(&a->lock);
	struct pproc *p = find(a, pid, NULL);
	if (!p) {
		a->st.frames_unknown_process_total++;
		rc = GPULSE_ENOENT;
		goto out;
	}
	struct pdev *d = NULL;
	switch (m->type) {
	case WIRE_STATUS:
		p->status = m->u.status;
		utf8_clean(p->status.reason, sizeof p->status.reason, m->u.status.reason);
		p->have_status = true;
		break;
	case WIRE_KERNELS:
		if (!(d = device_of(a, p, m->u.kernels.scope.device)))
			break;
		d->traced_ns += m->u.kernels.scope.traced_ns;
		for (uint32_t i = 0; i < m->u.kernels.count; i++)
			add_kernel(a, d, &m->u.kernels.kernels[i]);
		break;
	case WIRE_COPIES:
		if (!(d = device_of(a, p, m->u.copies.scope.device)))
			break;
		for (uint32_t i = 0; i < m->u.copies.count; i++) {
			const struct wire_copy *c = &m->u.copies.copies[i];
			struct pcopy *pc = &d->copies[c->kind][c->pinned];
			pc->count += c->count;
			pc->bytes += c->bytes;
			pc->total_ns += c->total_ns;
			pc->seen = true;
		}
		break;
	case WIRE_UVM:
		if (!(d = device_of(a, p, m->u.uvm.scope.device)))
			break;
		d->have_uvm = true;
		d->cpu_faults += m->u.uvm.cpu_page_faults;
		d->gpu_faults += m->u.uvm.gpu_page_faults;
		d->uvm_h2d += m->u.uvm.bytes_h2d;
		d->uvm_d2h += m->u.uvm.bytes_d2h;
		d->thrashing += m->u.uvm.thrashing;
		d->throttling += m->u.uvm.throttling;
		break;
	case WIRE_STREAMS:
		if (!(d = device_of(a, p, m->u.streams.scope.device)))
			break;
		d->have_streams = true;
		for (uint32_t i = 0; i < m->u.streams.count; i++) {
			const struct wire_stream *s = &m->u.streams.streams[i];
			d->busy_ns += s->busy_ns;
			d->gap_ns += s->gap_ns;
			d->sync_wait_ns += s->sync_wait_ns;
			d->syncs += s->syncs;
		}
		break;
	case WIRE_RANGES:
		if (!(d = device_of(a, p, m->u.ranges.scope.device)))
			break;
		for (uint32_t i = 0; i < m->u.ranges.count; i++)
			add_range(a, d, &m->u.ranges.ranges[i]);
		break;
	default:
		break;
	}
out:
	pthread_mutex_unlock(&a->lock);
	return rc;
}

void profile_agg_stats(struct profile_agg *a, struct profile_agg_stats *out)
{
	pthread_mutex_lock(&a->lock);
	*out = a->st;
	out->processes = a->nprocs;
	out->connected = 0;
	for (unsigned i = 0; i < a->nprocs; i++)
		out->connected += a->procs[i]->connected;
	pthread_mutex_unlock(&a->lock);
}

/* ---- series --------------------------------------------------------------- */

#define NS_TO_S(ns) ((double)(ns) / 1e9)

/* Emit one sample with the process's pid and comm, then more labels. */
static void psample(struct profile_emitter *e, const struct pproc *p, const char *const *names,
		    const char *const *values, size_t n, double v)
{
	const char *ln[PROFILE_EMIT_MAX_LABELS], *lv[PROFILE_EMIT_MAX_LABELS];
	ln[0] = "pid";
	lv[0] = p->pid_text;
	ln[1] = "comm";
	lv[1] = p->comm;
	for (size_t i = 0; i < n && i + 2 < PROFILE_EMIT_MAX_LABELS; i++) {
		ln[i + 2] = names[i];
		lv[i + 2] = values[i];
	}
	e->sample(e, ln, lv, n + 2, v);
}

enum kfield { KF_LAUNCHES, KF_SECONDS };

/* Per-kernel series carry kernel_id (16 hex digits of wire_name_hash of
 * the name as the library sent it: short, stable across processes and
 * restarts, one per kernel) and kernel, the name fitted to the store's
 * label bound (TSDB_MAX_LABEL_VALUE, 1024 bytes: past it, a cut and the
 * name's hash, as the library fits names to WIRE_KERNEL_NAME_MAX).
 * kernel_id adds no series (it is one to one with the name); the
 * whole name, up to WIRE_KERNEL_NAME_MAX, is in /api/v1/kernels, gpulse
 * kernels and captures (docs/internals/profiling.md). */
static void emit_kernels(struct profile_agg *a, struct profile_emitter *e, enum kfield f)
{
	static const char *const names[] = {"gpu", "kernel_id", "kernel"};
	char label[TSDB_MAX_LABEL_VALUE + 1];
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct pproc *p = a->procs[i];
		for (unsigned j = 0; j < p->ndev; j++) {
			const struct pdev *d = p->dev[j];
			char gpu[16];
			snprintf(gpu, sizeof gpu, "%u", (unsigned)d->device);
			for (unsigned k = 0; k <= d->nkernels; k++) {
				const struct pkernel *kk = k < d->nkernels ? &d->kernels[k] : &d->other;
				if (k == d->nkernels && !d->have_other)
					continue;
				wire_name_fit(label, TSDB_MAX_LABEL_VALUE, kk->name);
				const char *values[] = {gpu, kk->id, label};
				psample(e, p, names, values, 3,
					f == KF_LAUNCHES ? (double)kk->launches : NS_TO_S(kk->total_ns));
			}
		}
	}
}

enum cfield { CF_OPS, CF_BYTES, CF_SECONDS };

static void emit_copies(struct profile_agg *a, struct profile_emitter *e, enum cfield f)
{
	static const char *const names[] = {"gpu", "kind", "pinned"};
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct pproc *p = a->procs[i];
		for (unsigned j = 0; j < p->ndev; j++) {
			const struct pdev *d = p->dev[j];
			char gpu[16];
			snprintf(gpu, sizeof gpu, "%u", (unsigned)d->device);
			for (unsigned k = 0; k < WIRE_COPY_KIND_COUNT; k++)
				for (unsigned pin = 0; pin < 2; pin++) {
					const struct pcopy *c = &d->copies[k][pin];
					if (!c->seen)
						continue;
					const char *values[] = {gpu, copy_names[k], pin ? "true" : "false"};
					double v = f == CF_OPS ? (double)c->count
						 : f == CF_BYTES ? (double)c->bytes : NS_TO_S(c->total_ns);
					psample(e, p, names, values, 3, v);
				}
		}
	}
}

/* A per-device counter picked by offset into struct pdev. */
static void emit_dev_u64(struct profile_agg *a, struct profile_emitter *e, size_t off,
			 size_t flag_off, double scale, const char *extra_name, const char *extra_value)
{
	const char *names[] = {"gpu", extra_name};
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct pproc *p = a->procs[i];
		for (unsigned j = 0; j < p->ndev; j++) {
			const struct pdev *d = p->dev[j];
			if (flag_off != (size_t)-1 && !*(const bool *)((const char *)d + flag_off))
				continue;
			char gpu[16];
			snprintf(gpu, sizeof gpu, "%u", (unsigned)d->device);
			const char *values[] = {gpu, extra_value};
			uint64_t v = *(const uint64_t *)((const char *)d + off);
			psample(e, p, names, values, extra_name ? 2 : 1, (double)v * scale);
		}
	}
}

enum rfield { RF_COUNT, RF_SECONDS };

static void emit_ranges(struct profile_agg *a, struct profile_emitter *e, enum rfield f)
{
	static const char *const names[] = {"gpu", "range"};
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct pproc *p = a->procs[i];
		for (unsigned j = 0; j < p->ndev; j++) {
			const struct pdev *d = p->dev[j];
			char gpu[16];
			snprintf(gpu, sizeof gpu, "%u", (unsigned)d->device);
			for (unsigned k = 0; k <= d->nranges; k++) {
				const struct prange *r = k < d->nranges ? &d->ranges[k] : &d->range_other;
				if (k == d->nranges && !d->have_range_other)
					continue;
				const char *values[] = {gpu, r->name};
				psample(e, p, names, values, 2,
					f == RF_COUNT ? (double)r->count : NS_TO_S(r->total_ns));
			}
		}
	}
}

enum sfield {
	SF_CONNECTED, SF_ACTIVE, SF_STEPPED, SF_BUDGET, SF_OVERHEAD, SF_DUTY, SF_WINDOW, SF_RATE,
	SF_RECORDS, SF_RECORDS_DROPPED, SF_FRAMES_DROPPED, SF_FOLDED, SF_LASTING,
};

static void emit_status(struct profile_agg *a, struct profile_emitter *e, enum sfield f)
{
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct pproc *p = a->procs[i];
		const struct wire_status *s = &p->status;
		if (f != SF_CONNECTED && !p->have_status)
			continue;
		double v = 0;
		switch (f) {
		case SF_CONNECTED: v = p->connected; break;
		case SF_ACTIVE: v = s->active; break;
		case SF_STEPPED: {
			static const char *const names[] = {"reason"};
			const char *values[] = {s->reason[0] ? s->reason : "none"};
			psample(e, p, names, values, 1, s->stepped_aside);
			continue;
		}
		case SF_BUDGET: v = s->budget_ppm / 1e6; break;
		case SF_OVERHEAD: v = s->overhead_est_ppm / 1e6; break;
		case SF_DUTY: v = s->duty_ppm / 1e6; break;
		case SF_WINDOW: v = NS_TO_S(s->window_ns); break;
		case SF_RATE: v = s->launch_rate_hz; break;
		case SF_RECORDS: v = (double)s->records_total; break;
		case SF_RECORDS_DROPPED: v = (double)s->records_dropped_total; break;
		case SF_FRAMES_DROPPED: v = (double)s->frames_dropped_total; break;
		case SF_FOLDED: v = (double)s->kernels_other_total; break;
		case SF_LASTING: v = s->lasting_cost_ppm / 1e6; break;
		}
		psample(e, p, NULL, NULL, 0, v);
	}
}

static void emit_info(struct profile_agg *a, struct profile_emitter *e)
{
	static const char *const names[] = {"uid", "mode", "source", "lib_version",
					    "cupti_version"};
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct pproc *p = a->procs[i];
		char uid[16], cupti[16];
		snprintf(uid, sizeof uid, "%u", (unsigned)p->uid);
		snprintf(cupti, sizeof cupti, "%u", (unsigned)p->hello.cupti_version);
		unsigned mode = p->have_status ? p->status.mode : p->hello.mode;
		const char *values[] = {uid, profile_mode_name(mode),
					profile_source_name(source_of(p)),
					p->hello.lib_version[0] ? p->hello.lib_version : "unknown", cupti};
		psample(e, p, names, values, 5, 1);
	}
}

#define DOFF(m) offsetof(struct pdev, m)
#define NOFLAG ((size_t)-1)

void profile_agg_emit(struct profile_agg *a, struct profile_emitter *e)
{
	pthread_mutex_lock(&a->lock);
	profile_family(e, "gpulse_inject_info", PROFILE_GAUGE,
		       "A CUDA process running libgpulse-inject.so: its uid, tracing mode, source of its "
		       "statistics (trace: exact; census: estimated from launch callbacks) and library.");
	emit_info(a, e);
	profile_family(e, "gpulse_inject_connected", PROFILE_GAUGE,
		       "1 while the process's injection library is connected to gpulsed.");
	emit_status(a, e, SF_CONNECTED);
	profile_family(e, "gpulse_inject_active", PROFILE_GAUGE,
		       "1 while the library is tracing (inside a duty-cycle window or focus range).");
	emit_status(a, e, SF_ACTIVE);
	profile_family(e, "gpulse_inject_stepped_aside", PROFILE_GAUGE,
		       "1 when the library stepped aside (CUPTI missing, incompatible or taken), with why.");
	emit_status(a, e, SF_STEPPED);
	profile_family(e, "gpulse_inject_budget_ratio", PROFILE_GAUGE,
		       "Overhead budget the library's governor keeps to, as a share of run time.");
	emit_status(a, e, SF_BUDGET);
	profile_family(e, "gpulse_inject_overhead_ratio", PROFILE_GAUGE,
		       "The governor's estimate of the run time tracing adds, as a share.");
	emit_status(a, e, SF_OVERHEAD);
	profile_family(e, "gpulse_inject_duty_ratio", PROFILE_GAUGE,
		       "Share of time tracing is on.");
	emit_status(a, e, SF_DUTY);
	profile_family(e, "gpulse_inject_window_seconds", PROFILE_GAUGE,
		       "Length of the current tracing window.");
	emit_status(a, e, SF_WINDOW);
	profile_family(e, "gpulse_inject_launches_per_second", PROFILE_GAUGE,
		       "Kernel launch rate the governor measured.");
	emit_status(a, e, SF_RATE);
	profile_family(e, "gpulse_inject_records_total", PROFILE_COUNTER,
		       "Activity records the library processed.");
	emit_status(a, e, SF_RECORDS);
	profile_family(e, "gpulse_inject_records_dropped_total", PROFILE_COUNTER,
		       "Activity records lost (CUPTI dropped them or the library's buffers were full).");
	emit_status(a, e, SF_RECORDS_DROPPED);
	profile_family(e, "gpulse_inject_frames_dropped_total", PROFILE_COUNTER,
		       "Frames the library could not send to gpulsed (buffer full while disconnected).");
	emit_status(a, e, SF_FRAMES_DROPPED);
	profile_family(e, "gpulse_inject_kernels_folded_total", PROFILE_COUNTER,
		       "Kernel launches the library folded into \"other\" (its top-K cap).");
	emit_status(a, e, SF_FOLDED);
	profile_family(e, "gpulse_inject_lasting_cost_ratio", PROFILE_GAUGE,
		       "What exact kernel tracing, once run in the process, adds to each of its later "
		       "kernel launches until it exits (0: never run; CUPTI 13.0's figure).");
	emit_status(a, e, SF_LASTING);

	profile_family(e, "gpulse_process_traced_seconds_total", PROFILE_COUNTER,
		       "Time tracing was on for the process on the GPU (divide counts by it for rates).");
	emit_dev_u64(a, e, DOFF(traced_ns), NOFLAG, 1e-9, NULL, NULL);
	profile_family(e, "gpulse_process_kernel_launches_total", PROFILE_COUNTER,
		       "Kernel launches seen while tracing, by kernel (top kernels, the rest in \"other\").");
	emit_kernels(a, e, KF_LAUNCHES);
	profile_family(e, "gpulse_process_kernel_seconds_total", PROFILE_COUNTER,
		       "GPU time of the kernels seen while tracing, by kernel.");
	emit_kernels(a, e, KF_SECONDS);
	profile_family(e, "gpulse_process_copy_operations_total", PROFILE_COUNTER,
		       "Memory copies and memsets seen while tracing, by kind and host memory type.");
	emit_copies(a, e, CF_OPS);
	profile_family(e, "gpulse_process_copy_bytes_total", PROFILE_COUNTER,
		       "Bytes copied or set, by kind and host memory type.");
	emit_copies(a, e, CF_BYTES);
	profile_family(e, "gpulse_process_copy_seconds_total", PROFILE_COUNTER,
		       "GPU time of copies and memsets, by kind and host memory type.");
	emit_copies(a, e, CF_SECONDS);
	profile_family(e, "gpulse_process_uvm_cpu_page_faults_total", PROFILE_COUNTER,
		       "Unified-memory page faults on the CPU.");
	emit_dev_u64(a, e, DOFF(cpu_faults), DOFF(have_uvm), 1, NULL, NULL);
	profile_family(e, "gpulse_process_uvm_gpu_page_faults_total", PROFILE_COUNTER,
		       "Unified-memory page faults on the GPU.");
	emit_dev_u64(a, e, DOFF(gpu_faults), DOFF(have_uvm), 1, NULL, NULL);
	profile_family(e, "gpulse_process_uvm_migrated_bytes_total", PROFILE_COUNTER,
		       "Unified-memory bytes migrated, by direction.");
	emit_dev_u64(a, e, DOFF(uvm_h2d), DOFF(have_uvm), 1, "direction", "h2d");
	emit_dev_u64(a, e, DOFF(uvm_d2h), DOFF(have_uvm), 1, "direction", "d2h");
	profile_family(e, "gpulse_process_uvm_thrashing_total", PROFILE_COUNTER,
		       "Unified-memory thrashing events.");
	emit_dev_u64(a, e, DOFF(thrashing), DOFF(have_uvm), 1, NULL, NULL);
	profile_family(e, "gpulse_process_uvm_throttling_total", PROFILE_COUNTER,
		       "Unified-memory throttling events.");
	emit_dev_u64(a, e, DOFF(throttling), DOFF(have_uvm), 1, NULL, NULL);
	profile_family(e, "gpulse_process_stream_busy_seconds_total", PROFILE_COUNTER,
		       "Time the process's streams had work on the GPU (summed over streams).");
	emit_dev_u64(a, e, DOFF(busy_ns), DOFF(have_streams), 1e-9, NULL, NULL);
	profile_family(e, "gpulse_process_stream_gap_seconds_total", PROFILE_COUNTER,
		       "Idle gaps between operations on the process's streams (summed over streams).");
	emit_dev_u64(a, e, DOFF(gap_ns), DOFF(have_streams), 1e-9, NULL, NULL);
	profile_family(e, "gpulse_process_sync_wait_seconds_total", PROFILE_COUNTER,
		       "Host time spent waiting in synchronize calls.");
	emit_dev_u64(a, e, DOFF(sync_wait_ns), DOFF(have_streams), 1e-9, NULL, NULL);
	profile_family(e, "gpulse_process_syncs_total", PROFILE_COUNTER, "Synchronize calls.");
	emit_dev_u64(a, e, DOFF(syncs), DOFF(have_streams), 1, NULL, NULL);
	profile_family(e, "gpulse_process_nvtx_ranges_total", PROFILE_COUNTER,
		       "NVTX ranges ended, by name (the rest in \"other\").");
	emit_ranges(a, e, RF_COUNT);
	profile_family(e, "gpulse_process_nvtx_range_seconds_total", PROFILE_COUNTER,
		       "Time inside NVTX ranges, by name.");
	emit_ranges(a, e, RF_SECONDS);
	pthread_mutex_unlock(&a->lock);
}

/* ---- JSON ----------------------------------------------------------------- */

static void json_num(struct buf *b, double v)
{
	if (!isfinite(v))
		v = 0;
	buf_put_double(b, v);
}

/* ,"observed_ratio":R,"lasting_cost_ratio":R from a STATUS. */
static void put_observed(struct buf *b, const struct wire_status *s)
{
	buf_puts(b, ",\"observed_ratio\":");
	json_num(b, s->duty_ppm / 1e6);
	buf_puts(b, ",\"lasting_cost_ratio\":");
	json_num(b, s->lasting_cost_ppm / 1e6);
}

int profile_agg_processes_json(struct profile_agg *a, struct buf *out)
{
	pthread_mutex_lock(&a->lock);
	buf_puts(out, "\"processes\":[");
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct pproc *p = a->procs[i];
		const struct wire_status *s = &p->status;
		if (i)
			buf_putc(out, ',');
		buf_printf(out, "{\"pid\":%u,\"ppid\":%u,\"uid\":%u,\"comm\":", (unsigned)p->pid,
			   (unsigned)p->hello.ppid, (unsigned)p->uid);
		buf_put_json_string(out, p->comm);
		buf_puts(out, ",\"cmdline\":");
		buf_put_json_string(out, p->hello.cmdline);
		buf_puts(out, ",\"lib_version\":");
		buf_put_json_string(out, p->hello.lib_version);
		buf_printf(out, ",\"cupti_version\":%u,\"cuda_driver_version\":%u,\"connected\":%s,"
			   "\"start_time\":", (unsigned)p->hello.cupti_version,
			   (unsigned)p->hello.cuda_driver_version, p->connected ? "true" : "false");
		json_num(out, NS_TO_S(p->hello.start_wall_ns));
		unsigned mode = p->have_status ? s->mode : p->hello.mode;
		buf_printf(out, ",\"mode\":\"%s\",\"status_known\":%s,\"source\":\"%s\"",
			   profile_mode_name(mode), p->have_status ? "true" : "false",
			   profile_source_name(source_of(p)));
		if (p->have_status) {
			put_observed(out, s);
			buf_printf(out, ",\"active\":%s,\"stepped_aside\":%s,\"reason\":",
				   s->active ? "true" : "false", s->stepped_aside ? "true" : "false");
			buf_put_json_string(out, s->reason);
			buf_puts(out, ",\"budget_ratio\":");
			json_num(out, s->budget_ppm / 1e6);
			buf_puts(out, ",\"overhead_ratio\":");
			json_num(out, s->overhead_est_ppm / 1e6);
			buf_puts(out, ",\"duty_ratio\":");
			json_num(out, s->duty_ppm / 1e6);
			buf_puts(out, ",\"window_seconds\":");
			json_num(out, NS_TO_S(s->window_ns));
			buf_puts(out, ",\"launches_per_second\":");
			json_num(out, s->launch_rate_hz);
			buf_printf(out, ",\"records_total\":%llu,\"records_dropped_total\":%llu,"
				   "\"frames_dropped_total\":%llu,\"kernels_folded_total\":%llu",
				   (unsigned long long)s->records_total,
				   (unsigned long long)s->records_dropped_total,
				   (unsigned long long)s->frames_dropped_total,
				   (unsigned long long)s->kernels_other_total);
		}
		buf_puts(out, ",\"gpus\":[");
		for (unsigned j = 0; j < p->ndev; j++) {
			const struct pdev *d = p->dev[j];
			uint64_t launches = d->other.launches, ns = d->other.total_ns;
			for (unsigned k = 0; k < d->nkernels; k++) {
				launches += d->kernels[k].launches;
				ns += d->kernels[k].total_ns;
			}
			buf_printf(out, "%s{\"gpu\":%u,\"kernel_launches\":%llu,\"kernel_seconds\":",
				   j ? "," : "", (unsigned)d->device, (unsigned long long)launches);
			json_num(out, NS_TO_S(ns));
			buf_puts(out, ",\"traced_seconds\":");
			json_num(out, NS_TO_S(d->traced_ns));
			buf_putc(out, '}');
		}
		buf_puts(out, "]}");
	}
	buf_puts(out, "]");
	pthread_mutex_unlock(&a->lock);
	return out->failed ? GPULSE_ELIMIT : 0;
}

double profile_hist_quantile(const uint64_t hist[WIRE_HIST_BUCKETS], double q, uint64_t min_ns,
			     uint64_t max_ns)
{
	uint64_t total = 0;
	for (unsigned b = 0; b < WIRE_HIST_BUCKETS; b++)
		total += hist[b];
	if (total == 0)
		return 0;
	double rank = q * (double)total, seen = 0;
	double v = (double)max_ns;
	for (unsigned b = 0; b < WIRE_HIST_BUCKETS; b++) {
		if (!hist[b])
			continue;
		if (seen + (double)hist[b] >= rank) {
			double lo = b == 0 ? 0 : ldexp(1, (int)b);
			double hi = b == WIRE_HIST_BUCKETS - 1 ? fmax((double)max_ns, lo)
							       : ldexp(1, (int)b + 1);
			double frac = (rank - seen) / (double)hist[b];
			v = lo + (hi - lo) * frac;
			break;
		}
		seen += (double)hist[b];
	}
	if (v > (double)max_ns)
		v = (double)max_ns;
	if (v < (double)min_ns)
		v = (double)min_ns;
	return v;
}

struct krow {
	const struct pproc *p;
	const struct pdev *d;
	const struct pkernel *k;
	bool other;
	unsigned pair;   /* which (process, device) it belongs to, for per_process */
};

static int krow_cmp(const void *x, const void *y)
{
	const struct krow *a = x, *b = y;
	if (a->k->total_ns != b->k->total_ns)
		return a->k->total_ns > b->k->total_ns ? -1 : 1;
	if (a->p->pid != b->p->pid)
		return a->p->pid < b->p->pid ? -1 : 1;
	return strcmp(a->k->name, b->k->name);
}

int profile_agg_kernels_json(struct profile_agg *a, struct buf *out, int64_t pid, int64_t gpu,
			     unsigned limit)
{
	return profile_agg_kernels_top_json(a, out, pid, gpu, limit, 0);
}

int profile_agg_kernels_top_json(struct profile_agg *a, struct buf *out, int64_t pid, int64_t gpu,
				 unsigned limit, unsigned per_process)
{
	pthread_mutex_lock(&a->lock);
	/* GPU time per device over every traced process: the denominator of
	 * "share". Device ordinals are small; bigger ones share a slot. */
	uint64_t gpu_ns[PROFILE_MAX_DEVICES * 4] = {0};
	size_t n = 0;
	for (unsigned i = 0; i < a->nprocs; i++)
		for (unsigned j = 0; j < a->procs[i]->ndev; j++) {
			const struct pdev *d = a->procs[i]->dev[j];
			uint64_t s = d->other.total_ns;
			for (unsigned k = 0; k < d->nkernels; k++)
				s += d->kernels[k].total_ns;
			gpu_ns[d->device % (PROFILE_MAX_DEVICES * 4)] += s;
			if ((pid < 0 || a->procs[i]->pid == pid) && (gpu < 0 || d->device == gpu))
				n += d->nkernels + (d->have_other ? 1 : 0);
		}
	struct krow *rows = calloc(n ? n : 1, sizeof *rows);
	/* Rows kept so far per (process, device): at most one pair per row. */
	unsigned *kept = calloc(n ? n : 1, sizeof *kept);
	if (!rows || !kept) {
		free(rows);
		free(kept);
		pthread_mutex_unlock(&a->lock);
		return GPULSE_ENOMEM;
	}
	size_t r = 0;
	unsigned pairs = 0;
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct pproc *p = a->procs[i];
		if (pid >= 0 && p->pid != pid)
			continue;
		for (unsigned j = 0; j < p->ndev; j++) {
			const struct pdev *d = p->dev[j];
			if (gpu >= 0 && d->device != gpu)
				continue;
			for (unsigned k = 0; k < d->nkernels; k++)
				rows[r++] = (struct krow){p, d, &d->kernels[k], false, pairs};
			if (d->have_other)
				rows[r++] = (struct krow){p, d, &d->other, true, pairs};
			pairs++;
		}
	}
	qsort(rows, r, sizeof *rows, krow_cmp);
	/* per_process: each pair's heaviest rows only; the order stays. */
	if (per_process > 0) {
		size_t w = 0;
		for (size_t i = 0; i < r; i++)
			if (kept[rows[i].pair]++ < per_process)
				rows[w++] = rows[i];
		r = w;
	}
	free(kept);
	buf_puts(out, "\"kernels\":[");
	for (size_t i = 0; i < r && i < limit; i++) {
		const struct krow *x = &rows[i];
		const struct pkernel *k = x->k;
		uint64_t denom = gpu_ns[x->d->device % (PROFILE_MAX_DEVICES * 4)];
		if (i)
			buf_putc(out, ',');
		buf_printf(out, "{\"pid\":%u,\"comm\":", (unsigned)x->p->pid);
		buf_put_json_string(out, x->p->comm);
		buf_printf(out, ",\"source\":\"%s\"", profile_source_name(source_of(x->p)));
		if (x->p->have_status)
			put_observed(out, &x->p->status);
		buf_printf(out, ",\"gpu\":%u,\"kernel_id\":\"%s\",\"kernel\":", (unsigned)x->d->device,
			   k->id);
		buf_put_json_string(out, k->name);
		buf_printf(out, ",\"other\":%s,\"launches\":%llu,\"seconds\":", x->other ? "true" : "false",
			   (unsigned long long)k->launches);
		json_num(out, NS_TO_S(k->total_ns));
		buf_puts(out, ",\"share\":");
		json_num(out, denom ? (double)k->total_ns / (double)denom : 0);
		buf_puts(out, ",\"gpu_ratio\":");
		json_num(out, x->d->traced_ns ? (double)k->total_ns / (double)x->d->traced_ns : 0);
		buf_puts(out, ",\"mean_seconds\":");
		json_num(out, k->launches ? NS_TO_S(k->total_ns) / (double)k->launches : 0);
		buf_puts(out, ",\"p50_seconds\":");
		json_num(out, profile_hist_quantile(k->hist, 0.5, k->min_ns, k->max_ns) / 1e9);
		buf_puts(out, ",\"p99_seconds\":");
		json_num(out, profile_hist_quantile(k->hist, 0.99, k->min_ns, k->max_ns) / 1e9);
		buf_puts(out, ",\"min_seconds\":");
		json_num(out, NS_TO_S(k->min_ns));
		buf_puts(out, ",\"max_seconds\":");
		json_num(out, NS_TO_S(k->max_ns));
		if (!x->other)
			buf_printf(out, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"registers\":%u,"
				   "\"shared_bytes\":%u", k->grid[0], k->grid[1], k->grid[2],
				   k->block[0], k->block[1], k->block[2], k->registers,
				   k->shared_bytes);
		buf_putc(out, '}');
	}
	buf_printf(out, "],\"total\":%zu", r);
	free(rows);
	pthread_mutex_unlock(&a->lock);
	return out->failed ? GPULSE_ELIMIT : 0;
}
