/* Capacity report: gathering the series onto the slot grid and computing
 * the figures (report.h; definitions in docs/internals/report.md). */
#include "report/report.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/quantile.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

#define HOUR_MS 3600000.0
#define RAW_MARGIN_MS (10 * 60 * 1000) /* raw segment starts this far inside retention */
#define RAW_TAIL_MS (3 * 60 * 1000)    /* minutes that may not be rolled up yet */

void report_matrix_free(struct report_matrix *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		struct report_series *s = &m->series[i];
		for (size_t k = 0; k < s->nlabels; k++) {
			free(s->labels[k].name);
			free(s->labels[k].value);
		}
		free(s->labels);
		free(s->t_ms);
		free(s->v);
	}
	free(m->series);
	m->series = NULL;
	m->n = 0;
}

const char *report_series_label(const struct report_series *s, const char *name)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].name, name) == 0)
			return s->labels[i].value;
	return NULL;
}

int report_parse_band(const char *s, double *lo, double *hi)
{
	char *end;
	double a = strtod(s, &end);
	if (end == s || *end != '-')
		return GPULSE_EINVAL;
	const char *p = end + 1;
	double b = strtod(p, &end);
	if (end == p || *end != '\0' || !isfinite(a) || !isfinite(b))
		return GPULSE_EINVAL;
	if (a > 1 || b > 1) { /* percent */
		a /= 100;
		b /= 100;
	}
	if (!(a >= 0 && b <= 1 && a < b))
		return GPULSE_EINVAL;
	*lo = a;
	*hi = b;
	return 0;
}

double report_percentile(const double *sorted, size_t n, double p)
{
	return n ? sorted[quantile_rank_index(n, p / 100.0)] : NAN;
}

/* Put the k-th smallest of a[lo..hi] at a[k], the smaller ones before it
 * and the larger after (the finite values of a slot array). Hand-written
 * because C has no nth_element and no Debian library offers one for
 * plain doubles: a report takes four percentiles of 43,200 slots per GPU
 * and of the pooled model, and sorting them all was a tenth of its time
 * (docs/PERFORMANCE.md). Three-way partitions keep the long runs of equal
 * values (an idle GPU's zeros) linear; the pivot is the median of three,
 * and after 64 rounds that did not shrink the range by a quarter it falls
 * back to a sort of what is left, so no input is quadratic. */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void select_kth(double *a, size_t lo, size_t hi, size_t k)
{
	int bad = 0;
	while (hi > lo) {
		size_t n = hi - lo + 1;
		if (n <= 16 || bad > 64) {
			qsort(a + lo, n, sizeof *a, cmp_double);
			return;
		}
		double x = a[lo], y = a[lo + n / 2], z = a[hi];
		double piv = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y);
		/* a[lo..lt) < piv, a[lt..i) == piv, a(gt..hi] > piv */
		size_t lt = lo, i = lo, gt = hi;
		while (i <= gt) {
			double v = a[i];
			if (v < piv) {
				a[i++] = a[lt];
				a[lt++] = v;
			} else if (v > piv) {
				a[i] = a[gt];
				a[gt] = v;
				if (gt == 0)
					break;
				gt--;
			} else {
				i++;
			}
		}
		if (k < lt) {
			if ((lt - lo) * 4 > n * 3)
				bad++;
			hi = lt - 1;
		} else if (k > gt) {
			if ((hi - gt) * 4 > n * 3)
				bad++;
			lo = gt + 1;
		} else {
			return; /* a[k] is in the run equal to the pivot */
		}
	}
}

/* The distribution of the finite values of v[0..n); tmp holds n doubles.
 * The percentiles are the values a sort would put at their ranks,
 * selected one after another, each in the part below the last. */
static struct report_dist dist_of(const double *v, size_t n, double *tmp)
{
	struct report_dist d = {0};
	double sum = 0, mx = -INFINITY;
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i])) {
			tmp[d.n++] = v[i];
			sum += v[i];
			if (v[i] > mx)
				mx = v[i];
		}
	if (d.n == 0) {
		d.mean = d.p50 = d.p95 = d.p99 = d.max = NAN;
		return d;
	}
	d.mean = sum / (double)d.n;
	d.max = mx;
	size_t k99 = quantile_rank_index(d.n, 0.99), k95 = quantile_rank_index(d.n, 0.95),
	       k50 = quantile_rank_index(d.n, 0.50);
	select_kth(tmp, 0, d.n - 1, k99);
	d.p99 = tmp[k99];
	if (k95 < k99)
		select_kth(tmp, 0, k99 - 1, k95);
	d.p95 = tmp[k95];
	if (k50 < k95)
		select_kth(tmp, 0, k95 - 1, k50);
	d.p50 = tmp[k50];
	return d;
}

static void note(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct report *r, const char *fmt, ...)
{
	if (r->nnotes >= REPORT_MAX_NOTES)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->notes[r->nnotes++], REPORT_TEXT_MAX, fmt, ap);
	va_end(ap);
}

static void rec(struct report *r, const char *kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void rec(struct report *r, const char *kind, const char *fmt, ...)
{
	if (r->nrecs >= REPORT_MAX_RECS)
		return;
	struct report_rec *x = &r->recs[r->nrecs++];
	str_copy(x->kind, sizeof x->kind, kind);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->text, sizeof x->text, fmt, ap);
	va_end(ap);
}

/* ---- allocation ---- */

static double *nan_array(size_t n)
{
	double *a = xmalloc((n ? n : 1) * sizeof *a);
	for (size_t i = 0; i < n; i++)
		a[i] = NAN;
	return a;
}

static void gpu_init(struct report_gpu *g, size_t nslots)
{
	memset(g, 0, sizeof *g);
	g->s_busy = nan_array(nslots);
	g->s_sm = nan_array(nslots);
	g->s_tensor = nan_array(nslots);
	g->s_util = nan_array(nslots);
	g->s_mem = nan_array(nslots);
	g->s_memtot = nan_array(nslots);
	g->s_procmem = nan_array(nslots);
	g->s_class_share = nan_array(nslots);
	g->s_class = xmalloc(nslots ? nslots : 1);
	memset(g->s_class, -1, nslots ? nslots : 1);
	g->replaced_by = g->replaces = -1;
	g->health_min = NAN;
}

static void gpu_release(struct report_gpu *g)
{
	free(g->s_busy);
	free(g->s_sm);
	free(g->s_tensor);
	free(g->s_util);
	free(g->s_mem);
	free(g->s_memtot);
	free(g->s_procmem);
	free(g->s_class);
	free(g->s_class_share);
}

static void opts_fill(struct report_opts *o)
{
	if (o->step_ms <= 0)
		o->step_ms = REPORT_DEFAULT_STEP_MS;
	if (!(o->band_hi > 0)) {
		o->band_lo = 0.70;
		o->band_hi = 0.80;
	}
	if (!(o->idle_ratio > 0))
		o->idle_ratio = REPORT_IDLE_RATIO;
	if (!(o->busy_line > 0))
		o->busy_line = REPORT_BUSY_LINE;
	if (o->min_history_ms <= 0)
		o->min_history_ms = REPORT_MIN_HISTORY_MS;
}

static struct report *report_new(const struct report_opts *o)
{
	struct report *r = xcalloc(1, sizeof *r);
	r->o = *o;
	opts_fill(&r->o);
	int64_t s = r->o.step_ms;
	r->start_ms = (r->o.start_ms / s) * s;
	r->end_ms = ((r->o.end_ms + s - 1) / s) * s;
	if (r->end_ms <= r->start_ms)
		r->end_ms = r->start_ms + s;
	r->nslots = (size_t)((r->end_ms - r->start_ms) / s);
	r->split_ms = r->read_split_ms = r->start_ms;
	r->source_kind = "synthetic";
	return r;
}

struct report *report_alloc(const struct report_opts *o, size_t ngpus)
{
	struct report *r = report_new(o);
	r->gpus = xcalloc(ngpus ? ngpus : 1, sizeof *r->gpus);
	r->ngpus = ngpus;
	for (size_t i = 0; i < ngpus; i++) {
		gpu_init(&r->gpus[i], r->nslots);
		snprintf(r->gpus[i].gpu, sizeof r->gpus[i].gpu, "%u", (unsigned)(i % 100000));
	}
	return r;
}

void report_free(struct report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->ngpus; i++)
		gpu_release(&r->gpus[i]);
	free(r->gpus);
	for (size_t i = 0; i < r->nhosts; i++)
		free(r->hosts[i].s_mean);
	free(r->hosts);
	free(r->models);
	free(r->procs);
	free(r->pods);
	free(r);
}

/* ---- gathering ---- */

enum metric { M_UTIL, M_SM, M_TENSOR, M_MEM, M_MEMTOT, M_CLASS, M_PROC, M_KERNEL, M_HEALTH, M_DRAIN,
	      M_POD, M_COUNT };

static const struct {
	const char *fn, *name;
} metric_q[M_COUNT] = {
	[M_UTIL] = {"avg_over_time", "gpulse_gpu_utilization_ratio"},
	[M_SM] = {"avg_over_time", "gpulse_gpu_sm_active_ratio"},
	[M_TENSOR] = {"avg_over_time", "gpulse_gpu_tensor_active_ratio"},
	[M_MEM] = {"max_over_time", "gpulse_gpu_memory_used_bytes"},
	[M_MEMTOT] = {"max_over_time", "gpulse_gpu_memory_total_bytes"},
	[M_CLASS] = {"avg_over_time", "gpulse_gpu_bottleneck"},
	[M_PROC] = {"max_over_time", "gpulse_process_gpu_memory_bytes"},
	/* the injection library's GPU time per kernel: a counter, read as
	 * its largest value per slot and summed as increases */
	[M_KERNEL] = {"max_over_time", "gpulse_process_kernel_seconds_total"},
	/* the health score (docs/internals/health.md): its lowest slot, and
	 * the reason of any slot that said to drain the GPU */
	[M_HEALTH] = {"min_over_time", "gpulse_gpu_health_score"},
	[M_DRAIN] = {"max_over_time", "gpulse_gpu_health_drain"},
	/* allocated but idle by the activity split, per pod or job */
	[M_POD] = {"avg_over_time", "gpulse_workload_allocated_idle"},
};

struct gather {
	struct report *r;
	const struct report_source *src;
	size_t capgpus, capprocs, cappods;
};

static int find_gpu(struct gather *g, const struct report_series *s, bool create, size_t *out,
		    char *err, size_t errlen)
{
	struct report *r = g->r;
	const char *host = g->src->fleet ? report_series_label(s, "instance") : NULL;
	const char *uuid = report_series_label(s, "uuid");
	const char *idx = report_series_label(s, "gpu");
	if (!idx && !uuid)
		return GPULSE_ENOENT;
	bool by_index = false;
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		if (strcmp(x->host, host ? host : "") != 0)
			continue;
		if (uuid ? strcmp(x->uuid, uuid) == 0 : (!x->uuid[0] && strcmp(x->gpu, idx) == 0)) {
			*out = i;
			return 0;
		}
		/* series without uuid (the injection library's): the GPU of
		 * that index, the one seen last when a card was replaced */
		if (!uuid && !create && strcmp(x->gpu, idx) == 0) {
			*out = i;
			by_index = true;
		}
	}
	if (by_index)
		return 0;
	if (!create)
		return GPULSE_ENOENT;
	if (r->ngpus >= REPORT_MAX_GPUS || (r->ngpus + 1) * r->nslots > REPORT_MAX_CELLS) {
		str_errf(err, errlen,
			 "more than %zu GPUs over %zu slots: past the report's bound of %d GPU-slots; "
			 "use a larger --step, a shorter range or --gpu",
			 r->ngpus, r->nslots, REPORT_MAX_CELLS);
		return GPULSE_ELIMIT;
	}
	if (r->ngpus == g->capgpus) {
		g->capgpus = g->capgpus ? g->capgpus * 2 : 8;
		r->gpus = xrealloc(r->gpus, g->capgpus * sizeof *r->gpus);
	}
	struct report_gpu *x = &r->gpus[r->ngpus];
	gpu_init(x, r->nslots);
	str_copy(x->host, sizeof x->host, host ? host : "");
	str_copy(x->gpu, sizeof x->gpu, idx ? idx : "?");
	str_copy(x->uuid, sizeof x->uuid, uuid ? uuid : "");
	const char *model = report_series_label(s, "model");
	str_copy(x->model, sizeof x->model, model ? model : "unknown");
	*out = r->ngpus++;
	return 0;
}

/* The slot of an evaluation time (slot start + step - 1 ms), or -1 for a
 * time off the grid. */
static long slot_of(const struct report *r, int64_t t_ms)
{
	int64_t k = t_ms + 1 - r->o.step_ms - r->start_ms;
	if (k < 0 || k % r->o.step_ms != 0)
		return -1;
	k /= r->o.step_ms;
	return k < (int64_t)r->nslots ? (long)k : -1;
}

static bool slot_idle(const struct report *r, const struct report_gpu *x, size_t k)
{
	double u = isfinite(x->s_util[k]) ? x->s_util[k] : x->s_sm[k];
	return isfinite(u) && u < r->o.idle_ratio;
}

static struct report_proc *find_proc(struct gather *g, const struct report_gpu *x,
				     const char *pid, const char *comm)
{
	struct report *r = g->r;
	for (size_t i = 0; i < r->nprocs; i++) {
		struct report_proc *p = &r->procs[i];
		if (strcmp(p->pid, pid) == 0 && strcmp(p->comm, comm) == 0 &&
		    strcmp(p->uuid, x->uuid) == 0 && strcmp(p->gpu, x->gpu) == 0 &&
		    strcmp(p->host, x->host) == 0)
			return p;
	}
	if (r->nprocs >= REPORT_MAX_PROCS) {
		r->procs_dropped++;
		return NULL;
	}
	if (r->nprocs == g->capprocs) {
		g->capprocs = g->capprocs ? g->capprocs * 2 : 16;
		r->procs = xrealloc(r->procs, g->capprocs * sizeof *r->procs);
	}
	struct report_proc *p = &r->procs[r->nprocs++];
	memset(p, 0, sizeof *p);
	str_copy(p->host, sizeof p->host, x->host);
	str_copy(p->gpu, sizeof p->gpu, x->gpu);
	str_copy(p->uuid, sizeof p->uuid, x->uuid);
	str_copy(p->pid, sizeof p->pid, pid);
	str_copy(p->comm, sizeof p->comm, comm);
	p->sm_mean = NAN;
	return p;
}

static struct report_pod *find_pod(struct gather *g, const struct report_gpu *x,
				   const struct report_series *s)
{
	struct report *r = g->r;
	const char *pod = report_series_label(s, "pod"), *ns = report_series_label(s, "namespace");
	const char *job = report_series_label(s, "job");
	pod = pod ? pod : "";
	ns = ns ? ns : "";
	job = job ? job : "";
	for (size_t i = 0; i < r->npods; i++) {
		struct report_pod *p = &r->pods[i];
		if (strcmp(p->pod, pod) == 0 && strcmp(p->namespace_, ns) == 0 &&
		    strcmp(p->job, job) == 0 && strcmp(p->uuid, x->uuid) == 0 &&
		    strcmp(p->gpu, x->gpu) == 0 && strcmp(p->host, x->host) == 0)
			return p;
	}
	if (r->npods >= REPORT_MAX_PODS) {
		r->pods_dropped++;
		return NULL;
	}
	if (r->npods == g->cappods) {
		g->cappods = g->cappods ? g->cappods * 2 : 16;
		r->pods = xrealloc(r->pods, g->cappods * sizeof *r->pods);
	}
	struct report_pod *p = &r->pods[r->npods++];
	memset(p, 0, sizeof *p);
	str_copy(p->host, sizeof p->host, x->host);
	str_copy(p->gpu, sizeof p->gpu, x->gpu);
	str_copy(p->uuid, sizeof p->uuid, x->uuid);
	str_copy(p->pod, sizeof p->pod, pod);
	str_copy(p->namespace_, sizeof p->namespace_, ns);
	str_copy(p->job, sizeof p->job, job);
	return p;
}

static int place(struct gather *g, enum metric m, const struct report_matrix *mx, char *err,
		 size_t errlen)
{
	struct report *r = g->r;
	double step_h = (double)r->o.step_ms / HOUR_MS;
	for (size_t i = 0; i < mx->n; i++) {
		const struct report_series *s = &mx->series[i];
		size_t gi;
		bool create = m <= M_MEMTOT;
		int rc = find_gpu(g, s, create, &gi, err, errlen);
		if (rc == GPULSE_ENOENT)
			continue;
		if (rc)
			return rc;
		struct report_gpu *x = &r->gpus[gi];
		int cls = -1;
		if (m == M_CLASS) {
			const char *c = report_series_label(s, "class");
			cls = c ? diag_class_by_name(c) : -1;
			if (cls < 0)
				continue;
		}
		struct report_proc *p = NULL;
		struct report_pod *pd = m == M_POD ? find_pod(g, x, s) : NULL;
		if (m == M_POD && !pd)
			continue;
		double prev = NAN;
		if (m == M_KERNEL) {
			const char *pid = report_series_label(s, "pid");
			const char *comm = report_series_label(s, "comm");
			p = find_proc(g, x, pid ? pid : "?", comm ? comm : "?");
		}
		if (m == M_PROC) {
			const char *pid = report_series_label(s, "pid");
			const char *comm = report_series_label(s, "comm");
			x->has_procs = true;
			p = find_proc(g, x, pid ? pid : "?", comm ? comm : "?");
			if (p && p->mem_total_bytes == 0) {
				for (size_t k = 0; k < r->nslots; k++)
					if (isfinite(x->s_memtot[k]) && x->s_memtot[k] > p->mem_total_bytes)
						p->mem_total_bytes = x->s_memtot[k];
			}
		}
		for (size_t j = 0; j < s->n; j++) {
			long k = slot_of(r, s->t_ms[j]);
			if (m == M_MEMTOT && k < 0 && s->t_ms[j] >= r->start_ms) {
				/* read as one slot per segment (fetch): its last slot */
				int64_t kk = (s->t_ms[j] - r->start_ms) / r->o.step_ms;
				k = kk < (int64_t)r->nslots ? (long)kk : (long)r->nslots - 1;
			}
			double v = s->v[j];
			if (k < 0 || !isfinite(v))
				continue;
			switch (m) {
			case M_UTIL: x->s_util[k] = v; break;
			case M_SM: x->s_sm[k] = v; break;
			case M_TENSOR: x->s_tensor[k] = v; break;
			case M_MEM: x->s_mem[k] = v; break;
			case M_MEMTOT: x->s_memtot[k] = v; break;
			case M_HEALTH:
				if (!(v >= x->health_min))
					x->health_min = v;
				break;
			case M_DRAIN:
				if (v > 0) {
					const char *why = report_series_label(s, "reason");
					str_copy(x->drain_reason, sizeof x->drain_reason, why ? why : "?");
				}
				break;
			case M_CLASS:
				if (!isfinite(x->s_class_share[k]) || v > x->s_class_share[k]) {
					x->s_class_share[k] = v;
					x->s_class[k] = (signed char)cls;
				}
				break;
			case M_KERNEL:
				/* a counter: its increases, a drop being a restart */
				if (p && isfinite(prev))
					p->kernel_s += v >= prev ? v - prev : v;
				if (p)
					p->traced = true;
				prev = v;
				break;
			case M_POD:
				pd->held_h += step_h;
				if (v >= 0.5)
					pd->idle_h += step_h;
				break;
			case M_PROC:
				if (!isfinite(x->s_procmem[k]))
					x->s_procmem[k] = 0;
				x->s_procmem[k] += v;
				if (p && v > 0) {
					p->seen_h += step_h;
					if (slot_idle(r, x, (size_t)k))
						p->idle_held_h += step_h;
					if (v > p->mem_high_bytes)
						p->mem_high_bytes = v;
				}
				break;
			default: break;
			}
		}
	}
	return 0;
}

/* Query metric m over slots [a, b) in requests of at most `chunk` steps. */
static int fetch(struct gather *g, enum metric m, int64_t a, int64_t b, bool rollups,
		 size_t chunk, char *err, size_t errlen)
{
	struct report *r = g->r;
	int64_t step = r->o.step_ms;
	char sel[64] = "";
	if (r->o.gpu >= 0)
		snprintf(sel, sizeof sel, "{gpu=\"%d\"}", r->o.gpu);
	char expr[256];
	snprintf(expr, sizeof expr, "%s(%s%s[%lldms])", metric_q[m].fn, metric_q[m].name, sel,
		 (long long)(step - 1));
	if (g->src->ops->slots)
		chunk = 50000; /* bounded by the slot arrays alone */
	if (g->src->ops->slots && m == M_MEMTOT) {
		/* Only its largest value is used (the card's size): one slot
		 * for the whole segment saves a read of every minute. */
		struct report_matrix mx = {0};
		int rc = g->src->ops->slots(g->src->ctx, metric_q[m].name, r->o.gpu, a, b, b - a,
					    rollups, true, &mx, err, errlen);
		if (rc == 0)
			rc = place(g, m, &mx, err, errlen);
		report_matrix_free(&mx);
		return rc;
	}
	for (int64_t c = a; c < b; c += (int64_t)chunk * step) {
		int64_t ce = c + (int64_t)chunk * step;
		if (ce > b)
			ce = b;
		struct report_matrix mx = {0};
		int rc = g->src->ops->slots
				 ? g->src->ops->slots(g->src->ctx, metric_q[m].name, r->o.gpu, c, ce, step,
						      rollups, strcmp(metric_q[m].fn, "max_over_time") == 0,
						      &mx, err, errlen)
				 : g->src->ops->query_range(g->src->ctx, expr, c + step - 1, ce - 1, step,
							    rollups, &mx, err, errlen);
		if (rc == 0)
			rc = place(g, m, &mx, err, errlen);
		report_matrix_free(&mx);
		if (rc)
			return rc;
	}
	return 0;
}

int report_build(const struct report_source *src, const struct report_opts *o,
		 struct report **out, char *err, size_t errlen)
{
	*out = NULL;
	if (o->end_ms <= o->start_ms) {
		str_errf(err, errlen, "the range is empty: --until must be after the start of --since");
		return GPULSE_EINVAL;
	}
	if (o->step_ms < 0 || (o->step_ms > 0 && o->step_ms < 1000)) {
		str_errf(err, errlen, "--step must be at least 1s");
		return GPULSE_EINVAL;
	}
	struct report *r = report_new(o);
	r->source_kind = src->ops->kind;
	str_copy(r->source_where, sizeof r->source_where, src->where ? src->where : "");
	if (r->nslots > REPORT_MAX_CELLS) {
		str_errf(err, errlen, "%zu slots of %llds: past the report's bound of %d; use a larger --step",
			 r->nslots, (long long)(r->o.step_ms / 1000), REPORT_MAX_CELLS);
		report_free(r);
		return GPULSE_ELIMIT;
	}
	int64_t step = r->o.step_ms;
	if (src->raw_retention_ms > 0) {
		int64_t split = r->o.now_ms - src->raw_retention_ms + RAW_MARGIN_MS;
		split = ((split + step - 1) / step) * step;
		r->split_ms = split < r->start_ms ? r->start_ms : split > r->end_ms ? r->end_ms : split;
	}
	r->read_split_ms = r->split_ms;
	if (src->ops->slots && src->rollup_step_ms > 0 && step % src->rollup_step_ms == 0) {
		/* Closed minutes are the same from rollups as from raw samples;
		 * the last few may not be rolled up yet: those are read raw. */
		int64_t tail = ((r->o.now_ms - RAW_TAIL_MS) / step) * step;
		if (tail > r->read_split_ms)
			r->read_split_ms = tail < r->end_ms ? tail : r->end_ms;
	}
	struct gather g = {.r = r, .src = src};
	size_t chunk_roll = src->max_steps ? src->max_steps : 10000;
	size_t chunk_raw = src->max_raw_steps ? src->max_raw_steps : 480;
	int rc = 0;
	for (int m = 0; m < M_COUNT && rc == 0; m++) {
		if (r->read_split_ms > r->start_ms)
			rc = fetch(&g, (enum metric)m, r->start_ms, r->read_split_ms, true, chunk_roll,
				   err, errlen);
		if (rc == 0 && r->end_ms > r->read_split_ms)
			rc = fetch(&g, (enum metric)m, r->read_split_ms, r->end_ms, false, chunk_raw,
				   err, errlen);
	}
	if (rc) {
		report_free(r);
		return rc;
	}
	report_compute(r);
	*out = r;
	return 0;
}

/* ---- figures ---- */

/* Mon-Fri 08:00-18:00 UTC. */
static bool working_hour(int64_t t_ms)
{
	time_t t = (time_t)(t_ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	return tm.tm_wday >= 1 && tm.tm_wday <= 5 && tm.tm_hour >= 8 && tm.tm_hour < 18;
}

static int hour_of(int64_t t_ms)
{
	int64_t h = (t_ms / 3600000) % 24;
	return (int)(h < 0 ? h + 24 : h);
}

static void gpu_figures(struct report *r, struct report_gpu *x, double *tmp)
{
	size_t n = r->nslots;
	double step_h = (double)r->o.step_ms / HOUR_MS;
	x->has_gpm = false;
	x->has_tensor = false;
	for (size_t k = 0; k < n; k++) {
		if (isfinite(x->s_sm[k]))
			x->has_gpm = true;
		if (isfinite(x->s_tensor[k]))
			x->has_tensor = true;
	}
	x->busy_metric = x->has_gpm ? "sm_active" : "utilization";
	long first = -1, last = -1;
	double hsum[24] = {0};
	size_t hn[24] = {0}, hist_n = 0;
	size_t run = 0;
	memset(x->hist, 0, sizeof x->hist);
	memset(x->class_h, 0, sizeof x->class_h);
	x->covered_h = x->gap_h = x->raw_h = x->rollup_h = x->read_raw_h = 0;
	x->idle_h = x->alloc_idle_h = x->busy_h = x->above_h = x->longest_above_h = 0;
	x->idle_off_h = 0;
	x->class_none_h = 0;
	x->crossings = 0;
	x->mem_high_bytes = x->mem_total_bytes = 0;
	x->mem_high_ms = 0;
	for (size_t k = 0; k < n; k++) {
		int64_t t = r->start_ms + (int64_t)k * r->o.step_ms;
		x->s_busy[k] = x->has_gpm ? x->s_sm[k] : x->s_util[k];
		bool covered = isfinite(x->s_util[k]) || isfinite(x->s_sm[k]);
		if (isfinite(x->s_mem[k]) && x->s_mem[k] > x->mem_high_bytes) {
			x->mem_high_bytes = x->s_mem[k];
			x->mem_high_ms = t;
		}
		if (isfinite(x->s_memtot[k]) && x->s_memtot[k] > x->mem_total_bytes)
			x->mem_total_bytes = x->s_memtot[k];
		double b = x->s_busy[k];
		if (isfinite(b) && b >= r->o.busy_line) {
			if (run == 0)
				x->crossings++;
			run++;
			x->above_h += step_h;
			if ((double)run * step_h > x->longest_above_h)
				x->longest_above_h = (double)run * step_h;
		} else {
			run = 0;
		}
		if (!covered)
			continue;
		if (first < 0)
			first = (long)k;
		last = (long)k;
		x->covered_h += step_h;
		if (t >= r->split_ms)
			x->raw_h += step_h;
		else
			x->rollup_h += step_h;
		if (t >= r->read_split_ms)
			x->read_raw_h += step_h;
		if (slot_idle(r, x, k)) {
			x->idle_h += step_h;
			if (!working_hour(t))
				x->idle_off_h += step_h;
			bool held = x->has_procs ? isfinite(x->s_procmem[k]) && x->s_procmem[k] > 0
						 : isfinite(x->s_mem[k]) &&
							   x->s_mem[k] >= (double)REPORT_ALLOC_MIN_BYTES;
			if (held)
				x->alloc_idle_h += step_h;
		} else {
			x->busy_h += step_h;
		}
		if (x->s_class[k] >= 0 && x->s_class[k] < DIAG_CLASS_COUNT)
			x->class_h[(int)x->s_class[k]] += step_h;
		else
			x->class_none_h += step_h;
		if (isfinite(b)) {
			int bin = (int)floor(b * REPORT_HIST_BINS);
			bin = bin < 0 ? 0 : bin >= REPORT_HIST_BINS ? REPORT_HIST_BINS - 1 : bin;
			x->hist[bin]++;
			hist_n++;
			int h = hour_of(t);
			hsum[h] += b;
			hn[h]++;
		}
	}
	for (int i = 0; i < REPORT_HIST_BINS; i++)
		x->hist[i] = hist_n ? x->hist[i] / (double)hist_n : 0;
	for (int h = 0; h < 24; h++)
		x->hour_mean[h] = hn[h] ? hsum[h] / (double)hn[h] : NAN;
	x->first_ms = first >= 0 ? r->start_ms + first * r->o.step_ms : 0;
	x->last_ms = last >= 0 ? r->start_ms + last * r->o.step_ms : 0;
	x->gap_h = first >= 0 ? (double)(last - first + 1) * step_h - x->covered_h : 0;
	x->busy = dist_of(x->s_busy, n, tmp);
	x->sm = dist_of(x->s_sm, n, tmp);
	x->tensor = dist_of(x->s_tensor, n, tmp);
	x->util = dist_of(x->s_util, n, tmp);
}

static int cmp_gpu(const void *a, const void *b)
{
	const struct report_gpu *x = a, *y = b;
	int c = strcmp(x->host, y->host);
	if (c)
		return c;
	long gx = strtol(x->gpu, NULL, 10), gy = strtol(y->gpu, NULL, 10);
	if (gx != gy)
		return gx < gy ? -1 : 1;
	return x->first_ms < y->first_ms ? -1 : x->first_ms > y->first_ms;
}

static void link_replacements(struct report *r)
{
	for (size_t i = 0; i + 1 < r->ngpus; i++) {
		struct report_gpu *a = &r->gpus[i], *b = &r->gpus[i + 1];
		if (strcmp(a->host, b->host) == 0 && strcmp(a->gpu, b->gpu) == 0 && a->uuid[0] &&
		    b->uuid[0] && strcmp(a->uuid, b->uuid) != 0) {
			a->replaced_by = (int)(i + 1);
			b->replaces = (int)i;
		}
	}
}

static void host_figures(struct report *r, struct report_host *h, double *tmp)
{
	size_t n = r->nslots;
	double step_h = (double)r->o.step_ms / HOUR_MS;
	h->s_mean = nan_array(n);
	double *fail = nan_array(n);
	double hsum[24] = {0};
	size_t hn[24] = {0}, below = 0, in = 0, above = 0, work = 0, work_above = 0;
	for (size_t k = 0; k < n; k++) {
		double sum = 0;
		size_t cnt = 0;
		for (size_t i = 0; i < r->ngpus; i++) {
			const struct report_gpu *x = &r->gpus[i];
			if (strcmp(x->host, h->host) == 0 && isfinite(x->s_busy[k])) {
				sum += x->s_busy[k];
				cnt++;
			}
		}
		if (!cnt)
			continue;
		double m = sum / (double)cnt;
		h->s_mean[k] = m;
		if (cnt >= 2)
			fail[k] = sum / (double)(cnt - 1);
		h->covered_h += step_h;
		if (m < r->o.band_lo)
			below++;
		else if (m > r->o.band_hi)
			above++;
		else
			in++;
		int64_t t = r->start_ms + (int64_t)k * r->o.step_ms;
		if (working_hour(t)) {
			work++;
			if (m > r->o.band_hi)
				work_above++;
		}
		int hr = hour_of(t);
		hsum[hr] += m;
		hn[hr]++;
	}
	size_t total = below + in + above;
	h->below = total ? (double)below / (double)total : 0;
	h->in = total ? (double)in / (double)total : 0;
	h->above = total ? (double)above / (double)total : 0;
	h->work_h = (double)work * step_h;
	h->work_above = work ? (double)work_above / (double)work : 0;
	for (int i = 0; i < 24; i++)
		h->hour_mean[i] = hn[i] ? hsum[i] / (double)hn[i] : NAN;
	h->busy = dist_of(h->s_mean, n, tmp);
	h->peak_p95 = h->busy.p95;
	struct report_dist fd = dist_of(fail, n, tmp);
	h->failover_p95 = fd.n ? fd.p95 : NAN;
	h->peak_room = h->busy.n && h->busy.p95 <= r->o.busy_line;
	h->failover_room = fd.n ? fd.p95 <= 1.0 : false;
	if (!h->busy.n)
		h->verdict = "no data";
	else if (h->busy.mean < r->o.band_lo)
		h->verdict = "below band";
	else if (h->busy.mean > r->o.band_hi)
		h->verdict = "above band";
	else
		h->verdict = "in band";
	free(fail);
}

static void model_figures(struct report *r, double *tmp, double *pool)
{
	free(r->models);
	r->models = xcalloc(r->ngpus ? r->ngpus : 1, sizeof *r->models);
	r->nmodels = 0;
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		size_t m;
		for (m = 0; m < r->nmodels; m++)
			if (strcmp(r->models[m].model, x->model) == 0 &&
			    strcmp(r->models[m].host, x->host) == 0)
				break;
		if (m == r->nmodels) {
			struct report_model *nm = &r->models[r->nmodels++];
			str_copy(nm->model, sizeof nm->model, x->model);
			str_copy(nm->host, sizeof nm->host, x->host);
		}
		struct report_model *md = &r->models[m];
		md->ngpus++;
		md->covered_h += x->covered_h;
		md->idle_h += x->idle_h;
		md->alloc_idle_h += x->alloc_idle_h;
		if (x->mem_high_bytes > md->mem_high_bytes)
			md->mem_high_bytes = x->mem_high_bytes;
		if (x->mem_total_bytes > md->mem_total_bytes)
			md->mem_total_bytes = x->mem_total_bytes;
		if (!x->has_gpm)
			md->any_no_gpm = true;
	}
	for (size_t m = 0; m < r->nmodels; m++) {
		struct report_model *md = &r->models[m];
		for (int which = 0; which < 2; which++) {
			size_t np = 0;
			for (size_t i = 0; i < r->ngpus; i++) {
				const struct report_gpu *x = &r->gpus[i];
				if (strcmp(x->model, md->model) != 0 || strcmp(x->host, md->host) != 0)
					continue;
				const double *v = which ? x->s_tensor : x->s_busy;
				for (size_t k = 0; k < r->nslots; k++)
					pool[np++] = v[k];
			}
			struct report_dist d = dist_of(pool, np, tmp);
			if (which)
				md->tensor = d;
			else
				md->busy = d;
		}
	}
}

static const char *gpu_name(const struct report_gpu *x, char *buf, size_t len)
{
	if (x->host[0])
		snprintf(buf, len, "%s GPU %s", x->host, x->gpu);
	else
		snprintf(buf, len, "GPU %s", x->gpu);
	return buf;
}

/* GiB: what nvidia-smi calls MiB/GiB, and what "141 GB" of an H200 means. */
static double gb(double bytes)
{
	return bytes / 1073741824.0;
}

static void recommend(struct report *r, double *tmp)
{
	char a[160], b[160];
	for (size_t i = 0; i < r->nhosts; i++) {
		const struct report_host *h = &r->hosts[i];
		const char *hn = h->host[0] ? h->host : "the host";
		if (!h->busy.n)
			continue;
		double share = h->work_h > 0 ? h->work_above : h->above;
		if (share >= 0.20)
			rec(r, "add-capacity",
			    "%s is above the %.0f-%.0f%% band %.0f%% of %s (mean busy %.0f%%, p95 %.0f%%): add capacity",
			    hn, r->o.band_lo * 100, r->o.band_hi * 100, share * 100,
			    h->work_h > 0 ? "working hours" : "the time", h->busy.mean * 100,
			    h->busy.p95 * 100);
		if (h->ngpus >= 2 && !h->failover_room && isfinite(h->failover_p95))
			rec(r, "failover",
			    "%s has no room for failover: with one of its %zu GPUs lost, the others would need %.0f%% (p95)",
			    hn, h->ngpus, h->failover_p95 * 100);
		if (!h->peak_room)
			rec(r, "add-capacity",
			    "%s has little room for peaks: p95 of mean busy is %.0f%%, above the %.0f%% line",
			    hn, h->busy.p95 * 100, r->o.busy_line * 100);
	}
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		if (x->covered_h > 0 && x->idle_h / x->covered_h >= 0.5 && x->idle_h / x->covered_h < 0.95 &&
		    x->idle_off_h >= 0.7 * x->idle_h)
			rec(r, "share",
			    "%s (%s) was idle %.0f%% of its %.1f h, %.0f%% of that outside working hours (%.1f GPU-hours): give it batch or training work at night and at weekends",
			    gpu_name(x, a, sizeof a), x->model, x->idle_h / x->covered_h * 100,
			    x->covered_h, x->idle_off_h / x->idle_h * 100, x->idle_off_h);
		else if (x->covered_h > 0 && x->idle_h / x->covered_h >= 0.5)
			rec(r, "release",
			    "%s (%s) was idle %.0f%% of its %.1f h (%.1f GPU-hours, %.1f of them with memory held): release it or give it more work",
			    gpu_name(x, a, sizeof a), x->model, x->idle_h / x->covered_h * 100,
			    x->covered_h, x->idle_h, x->alloc_idle_h);
	}
	/* consolidate: two lightly used GPUs of one model on one host */
	bool *used = xcalloc(r->ngpus ? r->ngpus : 1, sizeof *used);
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		if (used[i] || !x->busy.n || x->busy.p95 >= r->o.band_lo / 2 || x->replaced_by >= 0)
			continue;
		for (size_t j = i + 1; j < r->ngpus; j++) {
			const struct report_gpu *y = &r->gpus[j];
			if (used[j] || !y->busy.n || y->busy.p95 >= r->o.band_lo / 2 ||
			    y->replaced_by >= 0 || strcmp(x->host, y->host) != 0 ||
			    strcmp(x->model, y->model) != 0)
				continue;
			double *sum = nan_array(r->nslots);
			for (size_t k = 0; k < r->nslots; k++)
				if (isfinite(x->s_busy[k]) || isfinite(y->s_busy[k]))
					sum[k] = (isfinite(x->s_busy[k]) ? x->s_busy[k] : 0) +
						 (isfinite(y->s_busy[k]) ? y->s_busy[k] : 0);
			struct report_dist d = dist_of(sum, r->nslots, tmp);
			free(sum);
			bool mem_fits = x->mem_total_bytes <= 0 ||
					x->mem_high_bytes + y->mem_high_bytes <= x->mem_total_bytes;
			if (d.n && d.p95 <= r->o.band_hi && mem_fits) {
				rec(r, "consolidate",
				    "consolidate %s (p95 %.0f%%) and %s (p95 %.0f%%): together p95 %.0f%%, memory peaks %.1f + %.1f GiB of %.1f GiB; one %s is freed",
				    gpu_name(x, a, sizeof a), x->busy.p95 * 100, gpu_name(y, b, sizeof b),
				    y->busy.p95 * 100, d.p95 * 100, gb(x->mem_high_bytes),
				    gb(y->mem_high_bytes), gb(x->mem_total_bytes), x->model);
				used[i] = used[j] = true;
				break;
			}
		}
	}
	free(used);
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct report_proc *p = &r->procs[i];
		if (p->mem_total_bytes > 0 && p->mem_high_bytes > 0 &&
		    p->mem_high_bytes < 0.25 * p->mem_total_bytes && p->seen_h >= 1)
			rec(r, "right-size",
			    "pid %s (%s) on GPU %s%s%s: memory peak %.1f GiB of %.1f GiB (%.0f%%): right-size it (a smaller GPU or a MIG slice)",
			    p->pid, p->comm, p->gpu, p->host[0] ? " of " : "", p->host,
			    gb(p->mem_high_bytes), gb(p->mem_total_bytes),
			    p->mem_high_bytes / p->mem_total_bytes * 100);
		/* worth a word: a quarter of its time or more, a quarter hour or more */
		if (p->seen_h > 0 && p->idle_held_h / p->seen_h >= 0.25 && p->idle_held_h >= 0.25)
			rec(r, "allocated-idle",
			    "pid %s (%s) held up to %.1f GiB on GPU %s%s%s for %.1f h while it was idle (%.0f%% of the %.1f h it held memory)",
			    p->pid, p->comm, gb(p->mem_high_bytes), p->gpu, p->host[0] ? " of " : "",
			    p->host, p->idle_held_h, p->seen_h > 0 ? p->idle_held_h / p->seen_h * 100 : 0,
			    p->seen_h);
	}
	for (size_t i = 0; i < r->npods; i++) {
		const struct report_pod *p = &r->pods[i];
		if (p->held_h > 0 && p->idle_h / p->held_h >= 0.25 && p->idle_h >= 0.25)
			rec(r, "allocated-idle",
			    "%s %s%s%s held GPU %s%s%s for %.1f h, %.1f h of it (%.0f%%) with its part of the SM activity under the idle line: release it or share the GPU",
			    p->job[0] ? "job" : "pod", p->job[0] ? p->job : p->namespace_,
			    p->job[0] ? "" : "/", p->job[0] ? "" : p->pod, p->gpu,
			    p->host[0] ? " of " : "", p->host, p->held_h, p->idle_h,
			    p->idle_h / p->held_h * 100);
	}
	if (r->nrecs == 0)
		for (size_t i = 0; i < r->nhosts; i++)
			if (strcmp(r->hosts[i].verdict, "in band") == 0)
				rec(r, "in-band", "%s sits in the band with room for peaks: no change",
				    r->hosts[i].host[0] ? r->hosts[i].host : "the host");
}

void report_compute(struct report *r)
{
	opts_fill(&r->o);
	size_t n = r->nslots;
	size_t pool_n = n * (r->ngpus ? r->ngpus : 1);
	double *tmp = xmalloc((pool_n ? pool_n : 1) * sizeof *tmp);
	double *pool = xmalloc((pool_n ? pool_n : 1) * sizeof *pool);
	r->nnotes = 0;
	r->nrecs = 0;
	for (size_t i = 0; i < r->ngpus; i++)
		gpu_figures(r, &r->gpus[i], tmp);
	if (r->ngpus > 1)
		qsort(r->gpus, r->ngpus, sizeof *r->gpus, cmp_gpu);
	link_replacements(r);

	for (size_t i = 0; i < r->nhosts; i++)
		free(r->hosts[i].s_mean);
	free(r->hosts);
	r->hosts = xcalloc(r->ngpus ? r->ngpus : 1, sizeof *r->hosts);
	r->nhosts = 0;
	for (size_t i = 0; i < r->ngpus; i++) {
		size_t h;
		for (h = 0; h < r->nhosts; h++)
			if (strcmp(r->hosts[h].host, r->gpus[i].host) == 0)
				break;
		if (h == r->nhosts)
			str_copy(r->hosts[r->nhosts++].host, sizeof r->hosts[h].host, r->gpus[i].host);
		if (r->gpus[i].replaces < 0)
			r->hosts[h].ngpus++;
	}
	for (size_t h = 0; h < r->nhosts; h++)
		host_figures(r, &r->hosts[h], tmp);
	model_figures(r, tmp, pool);

	double most = 0, raw = 0, roll = 0;
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		if (x->covered_h > most)
			most = x->covered_h;
		raw += x->raw_h;
		roll += x->rollup_h;
	}
	double step_s = (double)r->o.step_ms / 1000;
	double read_raw_h = 0;
	for (size_t i = 0; i < r->ngpus; i++)
		read_raw_h += r->gpus[i].read_raw_h;
	if (r->read_split_ms > r->split_ms && raw > 0 && read_raw_h <= 0)
		snprintf(r->resolution, sizeof r->resolution,
			 "per-%gs means: %.1f GPU-hours within the raw retention, read from the 1-minute rollups of its closed minutes (each holds its raw samples' sum, count and max: the same slot means and peaks), %.1f GPU-hours beyond the raw retention from the rollups",
			 step_s, raw, roll);
	else if (r->read_split_ms > r->split_ms && raw > 0)
		snprintf(r->resolution, sizeof r->resolution,
			 "per-%gs means: %.1f GPU-hours within the raw retention, read from raw samples for the last %.1f GPU-hours and from the 1-minute rollups of closed minutes before (each holds its raw samples' sum, count and max: the same slot means and peaks), %.1f GPU-hours beyond the raw retention from the rollups",
			 step_s, raw, read_raw_h, roll);
	else if (roll > 0 && raw > 0)
		snprintf(r->resolution, sizeof r->resolution,
			 "per-%gs means: %.1f GPU-hours from raw samples (the store's raw retention), %.1f GPU-hours from its 1-minute rollups",
			 step_s, raw, roll);
	else if (roll > 0)
		snprintf(r->resolution, sizeof r->resolution,
			 "per-%gs means from the store's 1-minute rollups (the range is older than its raw retention)",
			 step_s);
	else
		snprintf(r->resolution, sizeof r->resolution, "per-%gs means from raw samples", step_s);

	r->enough_history = most * HOUR_MS >= (double)r->o.min_history_ms;
	if (r->ngpus == 0)
		note(r, "no data: no GPU series in the range (is the store empty, or the range before its first sample?)");
	else if (!r->enough_history)
		note(r, "too little history to recommend: the longest GPU record in the range is %.1f min; recommendations need %.0f h",
		     most * 60, (double)r->o.min_history_ms / HOUR_MS);
	char a[160];
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct report_gpu *x = &r->gpus[i];
		if (x->covered_h > 0 && !x->has_gpm)
			note(r, "%s (%s) has no GPM counters in the range: busy is NVML utilization (time any kernel ran), which overstates how much of the GPU worked",
			     gpu_name(x, a, sizeof a), x->model);
		if (x->replaced_by >= 0) {
			char when[40];
			time_t t = (time_t)(r->gpus[x->replaced_by].first_ms / 1000);
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
			note(r, "%s: %s was replaced by %s (first seen %s): shown as two GPUs",
			     gpu_name(x, a, sizeof a), x->uuid, r->gpus[x->replaced_by].uuid, when);
		}
		if (x->gap_h >= step_s / 3600 * 1.5 && x->gap_h > 0)
			note(r, "%s: %.1f h without data between its first and last sample (counted neither idle nor busy)",
			     gpu_name(x, a, sizeof a), x->gap_h);
	}
	if (r->pods_dropped)
		note(r, "%zu pods beyond the report's bound of %d were left out", r->pods_dropped,
		     REPORT_MAX_PODS);
	if (r->procs_dropped)
		note(r, "%zu processes beyond the report's bound of %d were left out", r->procs_dropped,
		     REPORT_MAX_PROCS);
	if (r->enough_history)
		recommend(r, tmp);
	free(tmp);
	free(pool);
}
