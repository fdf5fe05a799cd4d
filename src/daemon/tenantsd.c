/* The feed of per-process activity; see tenantsd.h. */
#include "daemon/tenantsd.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collector.h"
#include "common/clock.h"
#include "diagnose/diagnose.h"
#include "common/status.h"

#define PID_SUMS 256  /* traced processes told apart on one GPU */

/* A GPU's last normal-tier state, split when the next one comes. */
struct pending {
	bool set;
	int64_t start_wall_ns, end_wall_ns;
	struct gpu_snapshot snap;
};

#define HOLD_ALLOCS 1024  /* the pod-resources table's bound */

struct tenantsd {
	struct bus *bus;
	struct profiling *prof;
	struct attrib *attrib;          /* allocations; NULL: processes only */
	struct attrib_allocation *al;   /* scratch, HOLD_ALLOCS, under lock */
	struct tenants_alloc hold[HOLD_ALLOCS];
	struct tenants *t;
	pthread_mutex_t lock;           /* lanes of different GPUs publish at once */
	int64_t last_wall_ns[GPU_MAX];  /* previous normal-tier update */
	struct pending *pend[GPU_MAX];  /* allocated on first use */
	struct tenants_interval in;     /* scratch, under lock */
	struct profile_pid_sum sums[PID_SUMS];
};

static const enum field_id gpm_field[SPLIT_METRIC_COUNT] = {
	[SPLIT_SM] = F_GPM_SM, [SPLIT_TENSOR] = F_GPM_TENSOR, [SPLIT_DRAM] = F_GPM_DRAM};
static const enum mig_gpm mig_field[SPLIT_METRIC_COUNT] = {
	[SPLIT_SM] = MIG_GPM_SM_ACTIVE, [SPLIT_TENSOR] = MIG_GPM_TENSOR, [SPLIT_DRAM] = MIG_GPM_DRAM};

/* Process p of the snapshot into the interval, with its evidence. */
static void add_proc(struct tenantsd *d, const struct gpu_process *p, size_t nsums,
		     double interval_s)
{
	struct tenants_interval *in = &d->in;
	if (in->n == TENANTS_PROCS)
		return;
	struct tenants_proc *tp = &in->procs[in->n++];
	memset(tp, 0, sizeof *tp);
	memcpy(tp->comm, p->comm, sizeof tp->comm);
	tp->comm[sizeof tp->comm - 1] = '\0';
	tp->owner = p->owner;
	tp->ev.pid = p->pid;
	if (p->util_valid) {
		tp->ev.nvml_valid = true;
		tp->ev.nvml_sm = p->sm_ratio;
		tp->ev.nvml_mem = p->mem_ratio;
	}
	for (size_t k = 0; k < nsums; k++) {
		const struct profile_pid_sum *s = &d->sums[k];
		/* The library speaks for the interval when it traced most of
		 * it (continuous mode's intervals are traced whole). */
		if (s->pid != p->pid || s->traced_s < 0.5 * interval_s)
			continue;
		tp->ev.kernels_valid = true;
		memcpy(tp->ev.kernel_s, s->kernel_s, sizeof tp->ev.kernel_s);
		tp->ev.launches = s->launches;
	}
	/* A library whose frames for the interval are not all in (it just
	 * started, or they are late): its process looks like one without
	 * it, which is no lesson for the calibration. */
	if (!tp->ev.kernels_valid && profiling_has(d->prof, p->pid))
		in->no_learn = true;
}


/* Who holds the GPU of snapshot s now (its allocations, and the pods of
 * its process rows), and whether each is idle by the split. */
static void hold_pending(struct tenantsd *d, const struct gpu_snapshot *s, bool judged,
			 int64_t now)
{
	size_t nal = d->attrib && d->al ? attrib_allocations(d->attrib, d->al, HOLD_ALLOCS) : 0;
	size_t n = 0;
	for (size_t k = 0; k < nal && k < HOLD_ALLOCS; k++) {
		if (!gpu_snapshot_holds(s, &d->al[k]))
			continue;
		struct tenants_alloc *h = &d->hold[n++];
		memcpy(h->pod, d->al[k].pod, sizeof h->pod);
		memcpy(h->namespace_, d->al[k].namespace_, sizeof h->namespace_);
		memcpy(h->job, d->al[k].job, sizeof h->job);
		memcpy(h->job_user, d->al[k].job_user, sizeof h->job_user);
	}
	tenants_hold(d->t, s->id.index, d->hold, n, judged, now);
}

/* Split what p holds: the whole GPU, or each MIG instance. True when the
 * GPU's SM activity was apportioned (or there was nobody to give it to). */
static bool split_pending(struct tenantsd *d, const struct pending *p, int64_t now)
{
	const struct gpu_snapshot *s = &p->snap;
	double a_s = (double)p->start_wall_ns / 1e9, b_s = (double)p->end_wall_ns / 1e9;
	double interval_s = b_s - a_s;
	bool sm = (s->valid & FIELD_BIT(F_GPM_SM)) != 0;
	for (int k = 0; s->mig_valid && k < s->nmig && k < GPU_MIG_MAX; k++)
		sm |= (s->mig[k].gpm_valid & 1u << MIG_GPM_SM_ACTIVE) != 0;
	if (s->procs_valid && s->nprocs == 0)
		tenants_clear(d->t, s->id.index);  /* nobody runs: nothing is current */
	if (!s->procs_valid || !(interval_s > 0))
		return false;
	if (s->nprocs == 0)
		return sm;
	size_t nsums = profiling_pids(d->prof, s->id.index, a_s, b_s, d->sums, PID_SUMS);
	if (nsums > PID_SUMS)
		nsums = PID_SUMS;
	struct tenants_interval *in = &d->in;
	bool mig = s->mig_valid && s->nmig > 0;
	for (int k = 0; k < (mig ? s->nmig : 1); k++) {
		memset(in, 0, offsetof(struct tenants_interval, procs));
		in->gpu = s->id.index;
		in->dev.interval_s = interval_s;
		in->end_s = b_s;
		if ((s->valid & FIELD_BIT(F_GPU_UTIL)) && !mig) {
			in->dev.busy_valid = true;
			in->dev.busy = s->v[F_GPU_UTIL];
		}
		for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
			if (mig && (s->mig[k].gpm_valid & 1u << mig_field[m])) {
				in->dev.valid |= 1u << m;
				in->dev.ratio[m] = s->mig[k].gpm[mig_field[m]];
			} else if (!mig && (s->valid & FIELD_BIT(gpm_field[m]))) {
				in->dev.valid |= 1u << m;
				in->dev.ratio[m] = s->v[gpm_field[m]];
			}
		}
		if (!in->dev.valid)
			continue;  /* no GPM (before Hopper, or per instance): nothing to split */
		if (mig) {
			in->in_mig = true;
			in->gpu_instance = s->mig[k].gpu_instance;
		}
		for (int i = 0; i < s->nprocs && i < GPU_PROC_MAX; i++) {
			const struct gpu_process *gp = &s->procs[i];
			if (mig && (!gp->in_mig || gp->gpu_instance != s->mig[k].gpu_instance))
				continue;
			add_proc(d, gp, nsums, interval_s);
		}
		if (in->n)
			tenants_add(d->t, in, now);
	}
	return sm;
}

static void on_update(void *ctx, const struct gpu_update *u)
{
	struct tenantsd *d = ctx;
	if (u->tier != TIER_NORMAL || !u->has_procs || u->gpu < 0 || u->gpu >= GPU_MAX)
		return;
	pthread_mutex_lock(&d->lock);
	int g = u->gpu;
	int64_t now = clock_mono_ns();
	if (!d->pend[g] && !(d->pend[g] = calloc(1, sizeof *d->pend[g])))
		goto out;
	struct pending *p = d->pend[g];
	/* The interval before this one: its libraries' frames are in now. */
	if (p->set)
		hold_pending(d, &p->snap, split_pending(d, p, now), now);
	else
		tenants_expire(d->t, now);
	p->set = false;
	if (d->last_wall_ns[g] > 0 && u->wall_ns > d->last_wall_ns[g] &&
	    bus_read(d->bus, g, &p->snap) == GPULSE_OK) {
		p->start_wall_ns = d->last_wall_ns[g];
		p->end_wall_ns = u->wall_ns;
		p->set = true;
	}
	d->last_wall_ns[g] = u->wall_ns;
out:
	pthread_mutex_unlock(&d->lock);
}

#define WINDOW_PROCS 16

int tenantsd_window_json(struct tenantsd *d, struct buf *b, int gpu, double start_s,
			 double end_s, int bottleneck)
{
	struct tenants_row rows[WINDOW_PROCS];
	size_t n = d ? tenants_window(d->t, gpu, start_s, end_s, rows, WINDOW_PROCS) : 0;
	if (n > WINDOW_PROCS)
		n = WINDOW_PROCS;
	static const char *const keys[SPLIT_METRIC_COUNT] = {"sm_active", "tensor_active",
							     "dram_bandwidth"};
	int metric = bottleneck == DIAG_COMPUTE_BOUND ? SPLIT_TENSOR
		     : bottleneck == DIAG_MEMORY_BOUND ? SPLIT_DRAM : SPLIT_SM;
	buf_printf(b, "{\"gpu\":%d,\"start_s\":", gpu);
	buf_put_double(b, start_s);
	buf_puts(b, ",\"end_s\":");
	buf_put_double(b, end_s);
	buf_puts(b, ",\"processes\":[");
	size_t top = n;
	double total = 0;
	for (size_t i = 0; i < n; i++) {
		const struct tenants_row *r = &rows[i];
		char sum[160];
		owner_summary(&r->owner, sum, sizeof sum);
		buf_printf(b, "%s{\"pid\":%u,\"comm\":", i ? "," : "", (unsigned)r->pid);
		buf_put_json_string(b, r->comm);
		buf_puts(b, ",\"owner\":");
		buf_put_json_string(b, sum);
		buf_printf(b, ",\"source\":\"%s\",\"busy\":", split_source_name(r->source));
		buf_put_double(b, r->busy);
		for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
			buf_printf(b, ",\"%s\":", keys[m]);
			if (r->valid & 1u << m)
				buf_put_double(b, r->ratio[m]);
			else
				buf_puts(b, "null");
		}
		buf_printf(b, ",\"bound\":\"%s\",\"bound_detail\":\"%s\"}",
			   tenants_bound_name(r->bound), tenants_bound_detail(r->bound));
		if (r->valid & 1u << metric) {
			total += r->ratio[metric];
			if (top == n || r->ratio[metric] > rows[top].ratio[metric])
				top = i;
		}
	}
	buf_puts(b, "],\"device_bound\":");
	if (bottleneck >= 0 && bottleneck < DIAG_CLASS_COUNT)
		buf_printf(b, "\"%s\"", diag_class_name((enum diag_class)bottleneck));
	else
		buf_puts(b, "null");
	/* The same per owner (pod, container, job, user: its summary), each
	 * classed on its summed parts and held against the window's class. */
	buf_puts(b, ",\"workloads\":[");
	bool done[WINDOW_PROCS] = {false};
	size_t nw = 0;
	for (size_t i = 0; i < n; i++) {
		if (done[i])
			continue;
		char sum[160], other[160];
		owner_summary(&rows[i].owner, sum, sizeof sum);
		struct tenants_row g = rows[i];
		unsigned procs = 1;
		for (size_t j = i + 1; j < n; j++) {
			owner_summary(&rows[j].owner, other, sizeof other);
			if (done[j] || strcmp(sum, other) != 0)
				continue;
			done[j] = true;
			procs++;
			g.valid &= rows[j].valid;
			g.busy += rows[j].busy;
			g.launches_per_s += rows[j].launches_per_s;
			for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
				g.ratio[m] += rows[j].ratio[m];
		}
		for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
			g.intensity[m] = g.busy > 0 ? g.ratio[m] / g.busy : 0;
		g.bound = tenants_classify(g.busy, g.intensity, g.valid, g.launches_per_s);
		buf_puts(b, nw++ ? ",{\"owner\":" : "{\"owner\":");
		buf_put_json_string(b, sum);
		buf_printf(b, ",\"processes\":%u,\"busy\":", procs);
		buf_put_double(b, g.busy);
		for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
			buf_printf(b, ",\"%s\":", keys[m]);
			if (g.valid & 1u << m)
				buf_put_double(b, g.ratio[m]);
			else
				buf_puts(b, "null");
		}
		buf_printf(b, ",\"bound\":\"%s\",\"bound_detail\":\"%s\",\"bottleneck_share\":",
			   tenants_bound_name(g.bound), tenants_bound_detail(g.bound));
		if (total > 0 && (g.valid & 1u << metric) && bottleneck != DIAG_IDLE)
			buf_put_double(b, g.ratio[metric] / total);
		else
			buf_puts(b, "null");
		buf_puts(b, "}");
	}
	buf_puts(b, "],\"bottleneck_owner\":");
	if (top < n && total > 0 && bottleneck != DIAG_IDLE) {
		buf_printf(b, "{\"pid\":%u,\"comm\":", (unsigned)rows[top].pid);
		buf_put_json_string(b, rows[top].comm);
		buf_printf(b, ",\"activity\":\"%s\",\"share\":",
			   split_metric_name((enum split_metric)metric));
		buf_put_double(b, rows[top].ratio[metric] / total);
		buf_puts(b, "}}");
	} else {
		buf_puts(b, "null}");
	}
	return b->failed ? GPULSE_ELIMIT : GPULSE_OK;
}

int tenantsd_start(struct tenantsd **out, struct bus *bus, struct profiling *prof)
{
	struct tenantsd *d = calloc(1, sizeof *d);
	if (!d)
		return GPULSE_ENOMEM;
	d->bus = bus;
	d->prof = prof;
	int rc = tenants_new(&d->t, 0, 0);
	if (rc) {
		free(d);
		return rc;
	}
	pthread_mutex_init(&d->lock, NULL);
	if ((rc = bus_subscribe(bus, on_update, d)) != GPULSE_OK) {
		tenantsd_stop(d);
		return rc;
	}
	*out = d;
	return GPULSE_OK;
}

int tenantsd_set_attrib(struct tenantsd *d, struct attrib *a, double idle_sm_ratio,
			int64_t idle_window_ns)
{
	pthread_mutex_lock(&d->lock);
	int rc = GPULSE_OK;
	if (a && !d->al && !(d->al = calloc(HOLD_ALLOCS, sizeof *d->al)))
		rc = GPULSE_ENOMEM;
	else
		d->attrib = a;
	pthread_mutex_unlock(&d->lock);
	tenants_set_idle(d->t, idle_sm_ratio, idle_window_ns);
	return rc;
}

struct tenants *tenantsd_tenants(struct tenantsd *d)
{
	return d ? d->t : NULL;
}

void tenantsd_stop(struct tenantsd *d)
{
	if (!d)
		return;
	for (int g = 0; g < GPU_MAX; g++)
		free(d->pend[g]);
	free(d->al);
	tenants_free(d->t);
	pthread_mutex_destroy(&d->lock);
	free(d);
}
