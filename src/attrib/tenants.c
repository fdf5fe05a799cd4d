/* Activity per process and per owner over time; see tenants.h. Rows are
 * arrays scanned linearly: a few hundred at most, touched once a second
 * per GPU. */
#include "attrib/tenants.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/status.h"

#define ALONE_MIN_BUSY 0.2      /* busy enough alone to measure */
#define ALONE_OTHERS_MAX 0.02   /* the others' busy share that still counts as alone */
#define ALONE_TTL_NS (600LL * 1000000000LL)
#define ALONE_MIX_MAX 0.2       /* the class mix may have moved this far (L1) since */
#define ALONE_WEIGHT 0.3        /* of a new measurement in the running mean */

#define BOUND_IDLE_BUSY 0.05       /* busy less than this: idle */
#define BOUND_TENSOR 0.25          /* tensor activity while running, over this: tensor cores */
#define BOUND_DRAM 0.5             /* DRAM bandwidth while running, over this: memory */
#define BOUND_LAUNCH_RATE 1000.0   /* launches per second, and */
#define BOUND_LAUNCH_KERNEL_S 20e-6 /* kernels shorter than this on average, and */
#define BOUND_LAUNCH_BUSY 0.6      /* the GPU busy less than this: launch bound */
#define BOUND_SM_BUSY 0.5          /* busy over this, no pipe standing out: the SMs */

enum tenants_bound tenants_classify(double busy, const double intensity[SPLIT_METRIC_COUNT],
				    uint32_t valid, double launches_per_s)
{
	/* Many launches of short kernels leave the GPU waiting on the host:
	 * what the device's classifier calls launch_bound, told here by the
	 * library's counts (an NVML-only process cannot be). */
	if (launches_per_s >= BOUND_LAUNCH_RATE && busy < BOUND_LAUNCH_BUSY &&
	    busy / launches_per_s < BOUND_LAUNCH_KERNEL_S)
		return TENANTS_LAUNCH;
	if (busy < BOUND_IDLE_BUSY)
		return TENANTS_IDLE;
	if ((valid & 1u << SPLIT_TENSOR) && intensity[SPLIT_TENSOR] >= BOUND_TENSOR)
		return TENANTS_COMPUTE_TENSOR;
	if ((valid & 1u << SPLIT_DRAM) && intensity[SPLIT_DRAM] >= BOUND_DRAM)
		return TENANTS_MEMORY;
	if (busy >= BOUND_SM_BUSY)
		return TENANTS_COMPUTE_SM;
	return TENANTS_MIXED;
}

const char *tenants_bound_name(enum tenants_bound b)
{
	static const char *const names[] = {"idle", "compute_bound", "compute_bound",
					     "memory_bound", "launch_bound", "mixed"};
	return (unsigned)b < TENANTS_BOUND_COUNT ? names[b] : "mixed";
}

const char *tenants_bound_detail(enum tenants_bound b)
{
	static const char *const words[] = {"", "tensor cores", "SMs", "DRAM bandwidth",
					     "kernel launches", ""};
	return (unsigned)b < TENANTS_BOUND_COUNT ? words[b] : "";
}

struct prow {
	struct tenants_row r;
	uint64_t start_ticks;         /* with pid, the key: a reused pid is a new row */
	uint64_t seq;                 /* its scope's interval it was last in */
	int64_t seen_ns;
	bool alone_valid;
	int64_t alone_ns;
	double alone[SPLIT_METRIC_COUNT];
	double alone_mix[SPLIT_CLASS_COUNT];
};

struct pgroup {
	struct tenants_group g;
	bool in_mig;
	unsigned gpu_instance;
	uint64_t seq;
	int64_t seen_ns;
};

/* One remembered interval of one GPU (its busiest processes). */
struct hist_proc {
	uint32_t pid;
	uint64_t start_ticks;
	bool in_mig;
	unsigned gpu_instance;
	enum split_source source;
	uint32_t valid;
	double busy, launches;
	double ratio[SPLIT_METRIC_COUNT];
};

struct hist_interval {
	double end_s, interval_s;
	unsigned n;
	struct hist_proc p[TENANTS_HISTORY_PROCS];
};

struct history {
	struct hist_interval iv[TENANTS_HISTORY];
	size_t head, count;
};

struct pholder {
	struct tenants_holder h;
	int64_t seen_ns;
	bool low;                     /* under the threshold since low_since_ns */
	int64_t low_since_ns;
};

struct scope {
	struct split_calib calib;
	uint64_t seq;                 /* intervals added */
};

struct tenants {
	pthread_mutex_t lock;
	size_t max_rows;
	int64_t stale_ns;
	struct prow *rows;
	size_t nrows;
	struct pgroup *groups;
	size_t ngroups;
	struct pholder *holders;      /* max_rows + TENANTS_GPUS */
	size_t nholders;
	double idle_sm;
	int64_t idle_window_ns;
	struct scope *scopes[TENANTS_GPUS]; /* TENANTS_SCOPES each, on first use */
	struct history *hist[TENANTS_GPUS]; /* on first use */
	struct tenants_stats st;
};

int tenants_new(struct tenants **out, size_t max_rows, int64_t stale_ns)
{
	struct tenants *t = calloc(1, sizeof *t);
	if (!t)
		return GPULSE_ENOMEM;
	t->max_rows = max_rows ? max_rows : TENANTS_DEFAULT_ROWS;
	t->stale_ns = stale_ns > 0 ? stale_ns : TENANTS_DEFAULT_STALE_NS;
	/* A row per process, its GPU's "other" row, and a group per owner. */
	t->rows = calloc(t->max_rows + TENANTS_GPUS, sizeof *t->rows);
	t->groups = calloc(t->max_rows + TENANTS_GPUS, sizeof *t->groups);
	t->holders = calloc(t->max_rows + TENANTS_GPUS, sizeof *t->holders);
	t->idle_sm = TENANTS_DEFAULT_IDLE_SM;
	t->idle_window_ns = TENANTS_DEFAULT_IDLE_WINDOW_NS;
	if (!t->rows || !t->groups || !t->holders) {
		tenants_free(t);
		return GPULSE_ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return GPULSE_OK;
}

void tenants_free(struct tenants *t)
{
	if (!t)
		return;
	for (int g = 0; g < TENANTS_GPUS; g++) {
		free(t->scopes[g]);
		free(t->hist[g]);
	}
	if (t->rows && t->groups && t->holders)
		pthread_mutex_destroy(&t->lock);
	free(t->rows);
	free(t->groups);
	free(t->holders);
	free(t);
}

static int scope_index(const struct tenants_interval *in)
{
	return in->in_mig ? 1 + (int)(in->gpu_instance % (TENANTS_SCOPES - 1)) : 0;
}

static bool same_scope(const struct tenants_row *r, const struct tenants_interval *in)
{
	return r->gpu == in->gpu && r->in_mig == in->in_mig &&
	       (!in->in_mig || r->gpu_instance == in->gpu_instance);
}

static struct prow *find_row(struct tenants *t, const struct tenants_interval *in, uint32_t pid,
			     uint64_t start_ticks)
{
	for (size_t i = 0; i < t->nrows; i++) {
		struct prow *p = &t->rows[i];
		if (p->r.pid == pid && same_scope(&p->r, in) && (pid == 0 || p->start_ticks == start_ticks))
			return p;
	}
	return NULL;
}

/* Count the process rows (not "other" rows). */
static size_t process_rows(const struct tenants *t)
{
	size_t n = 0;
	for (size_t i = 0; i < t->nrows; i++)
		n += t->rows[i].r.pid != 0;
	return n;
}

static struct prow *new_row(struct tenants *t, const struct tenants_interval *in, uint32_t pid,
			    const struct tenants_proc *p, int64_t now)
{
	struct prow *r = &t->rows[t->nrows++];
	memset(r, 0, sizeof *r);
	r->seen_ns = now;  /* not a victim for the rest of its interval */
	r->r.gpu = in->gpu;
	r->r.in_mig = in->in_mig;
	r->r.gpu_instance = in->gpu_instance;
	r->r.pid = pid;
	if (p) {
		memcpy(r->r.comm, p->comm, sizeof r->r.comm);
		r->r.comm[sizeof r->r.comm - 1] = '\0';
		r->r.owner = p->owner;
		r->start_ticks = p->owner.start_ticks;
	} else {
		strcpy(r->r.comm, "other");
	}
	return r;
}

/* The row of process p, made when there is room; NULL: fold it. */
static struct prow *row_for(struct tenants *t, const struct tenants_interval *in,
			    const struct tenants_proc *p, int64_t now)
{
	struct prow *r = find_row(t, in, p->ev.pid, p->owner.start_ticks);
	if (r)
		return r;
	if (process_rows(t) >= t->max_rows) {
		/* Room from the row seen longest ago that is not current. */
		size_t victim = t->nrows;
		for (size_t i = 0; i < t->nrows; i++) {
			const struct prow *x = &t->rows[i];
			if (x->r.pid == 0 || x->seen_ns >= now)
				continue;
			if (victim == t->nrows || x->seen_ns < t->rows[victim].seen_ns)
				victim = i;
		}
		if (victim == t->nrows)
			return NULL;
		t->rows[victim] = t->rows[--t->nrows];
		t->st.expired_total++;
	}
	return new_row(t, in, p->ev.pid, p, now);
}

static bool same_owner(const struct proc_owner *a, const struct proc_owner *b)
{
	if (a->labels != b->labels)
		return false;
	for (int f = 0; f < OWNER_FIELD_COUNT; f++)
		if ((a->labels & 1u << f) &&
		    strcmp(owner_field_value(a, (enum owner_field)f),
			   owner_field_value(b, (enum owner_field)f)) != 0)
			return false;
	return true;
}

/* How certain a source is, for a group's: the least of its processes'. */
static int certainty(enum split_source s)
{
	return s == SPLIT_SOURCE_SOLE ? 3 : s == SPLIT_SOURCE_KERNELS ? 2 : s == SPLIT_SOURCE_NVML ? 1 : 0;
}

/* Add one process's part of an interval to its owner's group (the
 * owner's labelled fields, on the same GPU or MIG instance, are the key). */
static void add_to_group(struct tenants *t, const struct tenants_interval *in,
			 const struct proc_owner *owner, bool other, const struct split_share *s,
			 uint64_t seq, int64_t now)
{
	struct pgroup *g = NULL;
	for (size_t i = 0; i < t->ngroups && !g; i++) {
		struct pgroup *x = &t->groups[i];
		if (x->g.gpu == in->gpu && x->in_mig == in->in_mig &&
		    (!in->in_mig || x->gpu_instance == in->gpu_instance) &&
		    x->g.other == other && (other || same_owner(&x->g.owner, owner)))
			g = x;
	}
	if (!g) {
		if (t->ngroups == t->max_rows + TENANTS_GPUS)
			return;  /* never: there are no more owners than rows */
		g = &t->groups[t->ngroups++];
		memset(g, 0, sizeof *g);
		g->g.gpu = in->gpu;
		g->g.other = other;
		g->in_mig = g->g.in_mig = in->in_mig;
		g->gpu_instance = g->g.gpu_instance = in->gpu_instance;
	}
	g->g.owner = *owner;
	if (g->seq != seq) {
		/* The first of its processes in this interval: start afresh. */
		g->seq = seq;
		memset(g->g.ratio, 0, sizeof g->g.ratio);
		g->g.valid = s->valid;
		g->g.busy = 0;
		g->g.launches_per_s = 0;
		g->g.processes = 0;
		g->g.source = s->source;
	}
	g->seen_ns = now;
	g->g.valid &= s->valid;
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
		g->g.ratio[m] += s->ratio[m];
	g->g.busy += s->busy;
	g->g.launches_per_s += s->launches / in->dev.interval_s;
	g->g.gpu_time_s += s->busy_s;
	g->g.processes++;
	double in_run[SPLIT_METRIC_COUNT];
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
		in_run[m] = g->g.busy > 0 ? g->g.ratio[m] / g->g.busy : 0;
	g->g.bound = tenants_classify(g->g.busy, in_run, g->g.valid, g->g.launches_per_s);
	if (certainty(s->source) < certainty(g->g.source))
		g->g.source = s->source;
}

/* The owner of an "other" group: every labelled field reads "other". */
static void other_owner(struct proc_owner *o, uint16_t labels)
{
	memset(o, 0, sizeof *o);
	o->labels = labels;
	char *const fields[] = {o->cgroup, o->runtime, o->container_id, o->pod_uid, o->pod,
				o->namespace_, o->container, o->job, o->job_user, o->user};
	for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
		strcpy(fields[f], "other");
}

/* Whether a row's alone measurement still describes what it runs now. */
static bool alone_applies(const struct prow *r, const struct split_share *s, int64_t now)
{
	if (!r->alone_valid || now - r->alone_ns > ALONE_TTL_NS || !(s->busy > 0))
		return false;
	double d = 0;
	for (int k = 0; k < SPLIT_CLASS_COUNT; k++) {
		double x = s->class_busy[k] / s->busy - r->alone_mix[k];
		d += x < 0 ? -x : x;
	}
	return d <= ALONE_MIX_MAX;
}

static void learn_alone(struct prow *r, const struct split_device *dev, const struct split_share *s,
			int64_t now)
{
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
		if (!(dev->valid & 1u << m))
			continue;
		double a = dev->ratio[m] / s->busy;
		if (a > 1)
			a = 1;
		r->alone[m] = r->alone_valid ? (1 - ALONE_WEIGHT) * r->alone[m] + ALONE_WEIGHT * a : a;
	}
	for (int k = 0; k < SPLIT_CLASS_COUNT; k++)
		r->alone_mix[k] = s->class_busy[k] / s->busy;
	r->alone_valid = true;
	r->alone_ns = now;
}

/* Keep the interval's busiest processes for the windows of the diagnosis. */
static void remember(struct tenants *t, const struct tenants_interval *in,
		     const struct split_share *sh)
{
	if (!(in->end_s > 0))
		return;
	if (!t->hist[in->gpu] && !(t->hist[in->gpu] = calloc(1, sizeof *t->hist[in->gpu])))
		return;
	struct history *h = t->hist[in->gpu];
	struct hist_interval *iv = &h->iv[h->head];
	h->head = (h->head + 1) % TENANTS_HISTORY;
	if (h->count < TENANTS_HISTORY)
		h->count++;
	iv->end_s = in->end_s;
	iv->interval_s = in->dev.interval_s;
	iv->n = 0;
	bool taken[TENANTS_PROCS] = {false};
	while (iv->n < TENANTS_HISTORY_PROCS) {
		size_t best = in->n;
		for (size_t i = 0; i < in->n; i++)
			if (!taken[i] && (best == in->n || sh[i].busy > sh[best].busy))
				best = i;
		if (best == in->n)
			break;
		taken[best] = true;
		struct hist_proc *p = &iv->p[iv->n++];
		p->pid = sh[best].pid;
		p->start_ticks = in->procs[best].owner.start_ticks;
		p->in_mig = in->in_mig;
		p->gpu_instance = in->gpu_instance;
		p->source = sh[best].source;
		p->valid = sh[best].valid;
		p->busy = sh[best].busy;
		p->launches = sh[best].launches;
		memcpy(p->ratio, sh[best].ratio, sizeof p->ratio);
	}
}

size_t tenants_window(struct tenants *t, int gpu, double a_s, double b_s,
		      struct tenants_row *out, size_t max)
{
	if (gpu < 0 || gpu >= TENANTS_GPUS || !(b_s > a_s) || max == 0)
		return 0;
	size_t n = 0;
	double span = 0;            /* interval time in the window */
	double last_end = -1;       /* MIG instances' intervals of one read end together */
	pthread_mutex_lock(&t->lock);
	const struct history *h = t->hist[gpu];
	for (size_t k = 0; h && k < h->count; k++) {
		const struct hist_interval *iv = &h->iv[k];
		if (!(iv->end_s >= a_s && iv->end_s < b_s))
			continue;
		if (iv->end_s != last_end)
			span += iv->interval_s;
		last_end = iv->end_s;
		for (unsigned j = 0; j < iv->n; j++) {
			const struct hist_proc *p = &iv->p[j];
			size_t i = 0;
			while (i < n && !(out[i].pid == p->pid && out[i].in_mig == p->in_mig &&
					  out[i].gpu_instance == p->gpu_instance))
				i++;
			if (i == n) {
				if (n == max)
					continue;
				memset(&out[n], 0, sizeof out[n]);
				out[n].gpu = gpu;
				out[n].pid = p->pid;
				out[n].in_mig = p->in_mig;
				out[n].gpu_instance = p->gpu_instance;
				out[n].source = p->source;
				out[n].valid = p->valid;
				out[n].current = true;
				for (size_t r = 0; r < t->nrows; r++)
					if (t->rows[r].r.pid == p->pid && t->rows[r].r.gpu == gpu &&
					    t->rows[r].start_ticks == p->start_ticks) {
						memcpy(out[n].comm, t->rows[r].r.comm, sizeof out[n].comm);
						out[n].owner = t->rows[r].r.owner;
					}
				n++;
			}
			struct tenants_row *o = &out[i];
			o->valid &= p->valid;
			if (certainty(p->source) < certainty(o->source))
				o->source = p->source;
			/* Sums for now: means below. */
			o->busy += p->busy * iv->interval_s;
			o->launches_per_s += p->launches;
			o->gpu_time_s += p->busy * iv->interval_s;
			for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
				o->ratio[m] += p->ratio[m] * iv->interval_s;
		}
	}
	pthread_mutex_unlock(&t->lock);
	/* Means over the window's intervals (a process missing from one was
	 * idle in it), and the class of each. */
	for (size_t i = 0; i < n && span > 0; i++) {
		struct tenants_row *o = &out[i];
		o->busy /= span;
		o->launches_per_s /= span;
		for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
			o->ratio[m] /= span;
			o->intensity[m] = o->busy > 0 ? o->ratio[m] / o->busy : 0;
		}
		o->bound = tenants_classify(o->busy, o->intensity, o->valid, o->launches_per_s);
	}
	/* Busiest first. */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && out[j].busy > out[j - 1].busy; j--) {
			struct tenants_row x = out[j];
			out[j] = out[j - 1];
			out[j - 1] = x;
		}
	return n;
}

static void expire_locked(struct tenants *t, int64_t now)
{
	for (size_t i = 0; i < t->nrows;) {
		if (now - t->rows[i].seen_ns > t->stale_ns) {
			t->rows[i] = t->rows[--t->nrows];
			t->st.expired_total++;
		} else {
			i++;
		}
	}
	for (size_t i = 0; i < t->ngroups;) {
		if (now - t->groups[i].seen_ns > t->stale_ns)
			t->groups[i] = t->groups[--t->ngroups];
		else
			i++;
	}
	for (size_t i = 0; i < t->nholders;) {
		if (now - t->holders[i].seen_ns > t->stale_ns)
			t->holders[i] = t->holders[--t->nholders];
		else
			i++;
	}
}

void tenants_clear(struct tenants *t, int gpu)
{
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nrows; i++)
		if (t->rows[i].r.gpu == gpu)
			t->rows[i].r.current = false;
	for (size_t i = 0; i < t->ngroups; i++)
		if (t->groups[i].g.gpu == gpu)
			t->groups[i].g.current = false;
	pthread_mutex_unlock(&t->lock);
}

void tenants_expire(struct tenants *t, int64_t now_mono_ns)
{
	pthread_mutex_lock(&t->lock);
	expire_locked(t, now_mono_ns);
	pthread_mutex_unlock(&t->lock);
}

int tenants_add(struct tenants *t, const struct tenants_interval *in, int64_t now)
{
	if (in->gpu < 0 || in->gpu >= TENANTS_GPUS || in->n > TENANTS_PROCS ||
	    !(in->dev.interval_s > 0))
		return GPULSE_EINVAL;
	int64_t t0 = clock_mono_ns();
	int rc = GPULSE_OK;
	pthread_mutex_lock(&t->lock);
	if (!t->scopes[in->gpu]) {
		t->scopes[in->gpu] = calloc(TENANTS_SCOPES, sizeof *t->scopes[in->gpu]);
		if (!t->scopes[in->gpu]) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		for (int s = 0; s < TENANTS_SCOPES; s++)
			split_calib_init(&t->scopes[in->gpu][s].calib);
	}
	struct scope *sc = &t->scopes[in->gpu][scope_index(in)];
	uint64_t seq = ++sc->seq;

	/* Rows first (the alone measurements they hold feed the split). */
	struct split_evidence ev[TENANTS_PROCS];
	struct prow *rows[TENANTS_PROCS];
	struct split_share sh[TENANTS_PROCS];
	for (size_t i = 0; i < in->n; i++) {
		ev[i] = in->procs[i].ev;
		ev[i].alone_valid = false;
		rows[i] = row_for(t, in, &in->procs[i], now);
	}
	/* A first pass without alone measurements gives each its class mix,
	 * against which a measurement is checked. */
	if ((rc = split_apportion(&in->dev, ev, in->n, &sc->calib, sh)) != GPULSE_OK)
		goto out;
	bool any_alone = false;
	for (size_t i = 0; i < in->n; i++)
		if (rows[i] && alone_applies(rows[i], &sh[i], now)) {
			ev[i].alone_valid = true;
			memcpy(ev[i].alone, rows[i]->alone, sizeof ev[i].alone);
			any_alone = true;
		}
	if (any_alone && (rc = split_apportion(&in->dev, ev, in->n, &sc->calib, sh)) != GPULSE_OK)
		goto out;
	if (!in->no_learn)
		split_calib_update(&sc->calib, &in->dev, sh, in->n);

	/* One process busy and the rest idle: what it shows is its own. */
	size_t busiest = 0;
	double others = 0, total = 0;
	for (size_t i = 0; i < in->n; i++) {
		total += sh[i].busy;
		if (sh[i].busy > sh[busiest].busy)
			busiest = i;
	}
	others = in->n ? total - sh[busiest].busy : 0;
	if (in->n && !in->no_learn && rows[busiest] && sh[busiest].busy >= ALONE_MIN_BUSY &&
	    others <= ALONE_OTHERS_MAX && sh[busiest].source != SPLIT_SOURCE_NONE)
		learn_alone(rows[busiest], &in->dev, &sh[busiest], now);

	/* Fold into the rows; the unfitted into their GPU's "other". */
	struct prow *other = NULL;
	for (size_t i = 0; i < in->n; i++) {
		struct prow *r = rows[i];
		if (!r) {
			t->st.folded_total++;
			if (!other) {
				other = find_row(t, in, 0, 0);
				if (!other)
					other = new_row(t, in, 0, NULL, now);
				other->r.source = sh[i].source;
				other->r.valid = sh[i].valid;
				memset(other->r.ratio, 0, sizeof other->r.ratio);
				other->r.busy = other->r.launches_per_s = 0;
				other->r.bound = TENANTS_MIXED;
			}
			r = other;
			if (certainty(sh[i].source) < certainty(r->r.source))
				r->r.source = sh[i].source;
			r->r.valid &= sh[i].valid;
			for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
				r->r.ratio[m] += sh[i].ratio[m];
			r->r.busy += sh[i].busy;
			r->r.launches_per_s += sh[i].launches / in->dev.interval_s;
		} else {
			r->r.source = sh[i].source;
			r->r.valid = sh[i].valid;
			memcpy(r->r.ratio, sh[i].ratio, sizeof r->r.ratio);
			memcpy(r->r.intensity, sh[i].intensity, sizeof r->r.intensity);
			r->r.busy = sh[i].busy;
			r->r.launches_per_s = sh[i].launches / in->dev.interval_s;
			r->r.owner = in->procs[i].owner;  /* names come late (environ, pod-resources) */
			r->r.bound = tenants_classify(r->r.busy, r->r.intensity, r->r.valid,
						      r->r.launches_per_s);
		}
		r->seq = seq;
		r->seen_ns = now;
		r->r.gpu_time_s += sh[i].busy_s;
		/* A folded process's part goes to its GPU's "other" group, not
		 * its owner's: so the groups are bounded by the rows too. */
		if (rows[i]) {
			add_to_group(t, in, &in->procs[i].owner, false, &sh[i], seq, now);
		} else {
			struct proc_owner oth;
			other_owner(&oth, in->procs[i].owner.labels);
			add_to_group(t, in, &oth, true, &sh[i], seq, now);
		}
	}
	remember(t, in, sh);
	/* Rows of this scope not in this interval are no longer current. */
	for (size_t i = 0; i < t->nrows; i++)
		if (same_scope(&t->rows[i].r, in))
			t->rows[i].r.current = t->rows[i].seq == seq;
	for (size_t i = 0; i < t->ngroups; i++) {
		struct pgroup *g = &t->groups[i];
		if (g->g.gpu == in->gpu && g->in_mig == in->in_mig &&
		    (!in->in_mig || g->gpu_instance == in->gpu_instance))
			g->g.current = g->seq == seq;
	}
	t->st.intervals_total++;
	expire_locked(t, now);
out:
	t->st.split_ns_total += (uint64_t)(clock_mono_ns() - t0);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

size_t tenants_rows(struct tenants *t, struct tenants_row *out, size_t max)
{
	pthread_mutex_lock(&t->lock);
	size_t n = t->nrows;
	for (size_t i = 0; i < n && i < max; i++)
		out[i] = t->rows[i].r;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tenants_set_idle(struct tenants *t, double sm_ratio, int64_t window_ns)
{
	pthread_mutex_lock(&t->lock);
	t->idle_sm = sm_ratio > 0 && sm_ratio <= 1 ? sm_ratio : TENANTS_DEFAULT_IDLE_SM;
	t->idle_window_ns = window_ns > 0 ? window_ns : TENANTS_DEFAULT_IDLE_WINDOW_NS;
	pthread_mutex_unlock(&t->lock);
}

/* The holder of (gpu, workload), made when there is room (a holder not
 * current gives way first); NULL: counted and left out. */
static struct pholder *holder_for(struct tenants *t, int gpu, const char *pod, const char *ns,
				  const char *job, const char *job_user, int64_t now)
{
	for (size_t i = 0; i < t->nholders; i++) {
		struct tenants_holder *h = &t->holders[i].h;
		if (h->gpu == gpu && (job[0] ? strcmp(h->job, job) == 0
					     : !h->job[0] && strcmp(h->pod, pod) == 0 &&
						       strcmp(h->namespace_, ns) == 0))
			return &t->holders[i];
	}
	if (t->nholders == t->max_rows + TENANTS_GPUS) {
		size_t victim = t->nholders;
		for (size_t i = 0; i < t->nholders; i++)
			if (!t->holders[i].h.current && t->holders[i].seen_ns < now &&
			    (victim == t->nholders || t->holders[i].seen_ns < t->holders[victim].seen_ns))
				victim = i;
		if (victim == t->nholders) {
			t->st.holders_dropped_total++;
			return NULL;
		}
		t->holders[victim] = t->holders[--t->nholders];
	}
	struct pholder *p = &t->holders[t->nholders++];
	memset(p, 0, sizeof *p);
	p->h.gpu = gpu;
	snprintf(p->h.pod, sizeof p->h.pod, "%s", job[0] ? "" : pod);
	snprintf(p->h.namespace_, sizeof p->h.namespace_, "%s", job[0] ? "" : ns);
	snprintf(p->h.job, sizeof p->h.job, "%s", job);
	snprintf(p->h.job_user, sizeof p->h.job_user, "%s", job_user);
	return p;
}

void tenants_hold(struct tenants *t, int gpu, const struct tenants_alloc *allocs, size_t n,
		  bool judged, int64_t now)
{
	if (gpu < 0 || gpu >= TENANTS_GPUS)
		return;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nholders; i++) {
		struct tenants_holder *h = &t->holders[i].h;
		if (h->gpu != gpu)
			continue;
		h->current = h->allocated = h->idle = false;
		h->processes = 0;
		h->sm_active = 0;
	}
	for (size_t k = 0; k < n; k++) {
		const struct tenants_alloc *a = &allocs[k];
		if (!a->job[0] && !a->pod[0])
			continue;
		struct pholder *p = holder_for(t, gpu, a->pod, a->namespace_, a->job, a->job_user, now);
		if (!p)
			continue;
		p->h.current = p->h.allocated = true;
		p->seen_ns = now;
	}
	/* Its processes' parts; and whether some process that might be any
	 * pod's (no pod name, or folded into "other") was busy. */
	bool unsure = false;
	for (size_t i = 0; i < t->nrows; i++) {
		const struct tenants_row *r = &t->rows[i].r;
		if (r->gpu != gpu || !r->current)
			continue;
		double sm = r->valid & 1u << SPLIT_SM ? r->ratio[SPLIT_SM] : 0;
		const struct proc_owner *o = &r->owner;
		if (r->pid == 0 || (!o->job[0] && !o->pod[0])) {
			unsure |= sm >= t->idle_sm && (r->pid == 0 || o->pod_uid[0]);
			continue;
		}
		struct pholder *p = holder_for(t, gpu, o->pod, o->namespace_, o->job, o->job_user, now);
		if (!p)
			continue;
		p->h.current = true;
		p->h.processes++;
		p->h.sm_active += sm;
		p->seen_ns = now;
	}
	for (size_t i = 0; i < t->nholders; i++) {
		struct pholder *p = &t->holders[i];
		if (p->h.gpu != gpu || !p->h.current)
			continue;
		p->h.judged = judged;
		if (judged) {
			if (p->h.sm_active < t->idle_sm && !unsure) {
				if (!p->low)
					p->low_since_ns = now;
				p->low = true;
			} else {
				p->low = false;
			}
		}
		p->h.low_s = p->low ? (double)(now - p->low_since_ns) / 1e9 : 0;
		p->h.idle = judged && p->low && now - p->low_since_ns >= t->idle_window_ns;
	}
	expire_locked(t, now);
	pthread_mutex_unlock(&t->lock);
}

size_t tenants_holders(struct tenants *t, struct tenants_holder *out, size_t max)
{
	pthread_mutex_lock(&t->lock);
	size_t n = t->nholders;
	for (size_t i = 0; i < n && i < max; i++)
		out[i] = t->holders[i].h;
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t tenants_groups(struct tenants *t, struct tenants_group *out, size_t max)
{
	pthread_mutex_lock(&t->lock);
	size_t n = t->ngroups;
	for (size_t i = 0; i < n && i < max; i++)
		out[i] = t->groups[i].g;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tenants_get_stats(struct tenants *t, struct tenants_stats *out)
{
	pthread_mutex_lock(&t->lock);
	*out = t->st;
	out->rows = t->nrows;
	out->groups = t->ngroups;
	out->holders = t->nholders;
	pthread_mutex_unlock(&t->lock);
}
