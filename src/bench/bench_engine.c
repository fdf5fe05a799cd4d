/* The benchmark engine; see bench_engine.h and docs/internals/bench.md.
 *
 * Every figure is made of timed runs: a warm-up (clocks and power settle,
 * cuBLASLt picks its kernels), then `runs` batches, each long enough that
 * the events' resolution and the launch gaps do not matter, each timed
 * with CUDA events on one stream. A figure's value is the median of its
 * runs, except for the figures bound by the host's CPU (launches,
 * pageable copies): they take more and shorter repetitions and the edge
 * of their fastest decile (bench_math.h, BENCH_EST_FAST_P90), since
 * everything else on a shared host only ever slows them. min, median,
 * max and spread say how steady it was either way. A watcher thread reads
 * NVML every 50 ms meanwhile and charges what it sees (clocks, power,
 * temperature, clock event reasons, other processes) to the figure being
 * run.
 *
 * Why one file: every figure is measured through the one private engine
 * (struct eng: the CUDA context, stream, events, the NVML watcher and the
 * run statistics); the arithmetic, peaks and result format already stand
 * apart (bench_math, bench_result). */
#include "bench/bench_engine.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench/bench_math.h"
#include "bench_ptx.h"
#include "common/clock.h"
#include "bench/cuda_lib.h"
#include "nvml/nvml_shim.h"
#include "common/periodic.h"
#include "common/status.h"
#include "common/str.h"

#define GIB ((size_t)1024 * 1024 * 1024)
#define MIB ((size_t)1024 * 1024)
#define MATMUL_N 8192ULL
#define WORKSPACE_BYTES (64 * MIB)
#define WATCH_PERIOD_NS (50 * NS_PER_MS)
#define PROC_EVERY 5          /* process list every 5th watch (250 ms) */
#define BUSY_UTIL_PCT 5       /* utilization at start that counts as in use */
#define MAX_RUNS 128
#define MAX_PROCS 64

/* ---- the NVML watcher ---- */

#define MAX_SELF 4

/* Our own entries in NVML's process list. getpid() is ours, but in a PID
 * namespace (a container) NVML reports the host's pid, so the engine also
 * takes as its own the pids that appeared on the GPU while it created its
 * context, having just found none there (bench_run). */
struct self_pids {
	unsigned pid[MAX_SELF];
	int n;
};


struct acc {
	double min, max, sum;
	unsigned n;
};

struct watch {
	struct nvml_lib *nv;
	nvml_device_t dev;
	struct periodic ticker;        /* watch_tick every WATCH_PERIOD_NS */
	unsigned tick;                 /* the ticker's count */
	pthread_mutex_t mu;
	int fig;                       /* figure being run, -1: none */
	struct acc sm, mem, power, temp;
	uint64_t reasons;
	unsigned foreign_pid;          /* first other process seen, 0: none */
	unsigned foreign_seen;         /* watches that saw one */
	struct self_pids self;
};

static void acc_add(struct acc *a, double v)
{
	if (a->n == 0 || v < a->min)
		a->min = v;
	if (a->n == 0 || v > a->max)
		a->max = v;
	a->sum += v;
	a->n++;
}

static void acc_take(struct acc *a, struct bench_range *r)
{
	r->valid = a->n > 0;
	if (r->valid) {
		r->min = a->min;
		r->max = a->max;
		r->mean = a->sum / a->n;
	}
	memset(a, 0, sizeof *a);
}

static bool is_self(const struct self_pids *s, unsigned pid)
{
	for (int i = 0; i < s->n; i++)
		if (s->pid[i] == pid)
			return true;
	return false;
}

/* The pids NVML lists on the GPU, at most `max`; -1 when it cannot say. */
static int gpu_pids(struct nvml_lib *nv, nvml_device_t dev, unsigned *out, int max)
{
	if (!nv->device_get_compute_running_processes)
		return -1;
	struct nvml_process_info p[MAX_PROCS];
	unsigned n = MAX_PROCS;
	nvml_return_t r = NVML_CALL(nv, device_get_compute_running_processes, dev, &n, p);
	if (r == NVML_ABI_ERROR_INSUFFICIENT_SIZE)
		n = MAX_PROCS;
	else if (r != NVML_ABI_SUCCESS)
		return -1;
	int k = 0;
	for (unsigned i = 0; i < n && i < MAX_PROCS && k < max; i++)
		out[k++] = p[i].pid ? p[i].pid : 1;
	return k;
}

/* Other processes on the GPU: the first pid that is not ours, or 0. */
static unsigned foreign_process(struct nvml_lib *nv, nvml_device_t dev, const struct self_pids *self)
{
	unsigned pids[MAX_PROCS];
	int n = gpu_pids(nv, dev, pids, MAX_PROCS);
	for (int i = 0; i < n; i++)
		if (!is_self(self, pids[i]))
			return pids[i];
	return 0;
}

/* One reading of every gauge, charged to figure `fig` (-1: none) unless
 * the figure changed meanwhile. Takes and releases w->mu. */
static void watch_sample(struct watch *w, int fig, bool procs)
{
	struct nvml_lib *nv = w->nv;
	unsigned sm = 0, mem = 0, mw = 0, t = 0;
	unsigned long long reasons = 0;
	bool has_sm = nv->device_get_clock_info &&
		      NVML_CALL(nv, device_get_clock_info, w->dev, NVML_ABI_CLOCK_SM, &sm) == 0;
	bool has_mem = nv->device_get_clock_info &&
		       NVML_CALL(nv, device_get_clock_info, w->dev, NVML_ABI_CLOCK_MEM, &mem) == 0;
	bool has_p = nv->device_get_power_usage &&
		     NVML_CALL(nv, device_get_power_usage, w->dev, &mw) == 0;
	bool has_t = nv->device_get_temperature &&
		     NVML_CALL(nv, device_get_temperature, w->dev, NVML_ABI_TEMPERATURE_GPU, &t) == 0;
	bool has_r = nv->device_get_current_clocks_event_reasons &&
		     NVML_CALL(nv, device_get_current_clocks_event_reasons, w->dev, &reasons) == 0;
	unsigned other = procs ? foreign_process(nv, w->dev, &w->self) : 0;
	pthread_mutex_lock(&w->mu);
	if (other) {
		if (!w->foreign_pid)
			w->foreign_pid = other;
		w->foreign_seen++;
	}
	if (fig >= 0 && fig == w->fig) {
		if (has_sm)
			acc_add(&w->sm, sm);
		if (has_mem)
			acc_add(&w->mem, mem);
		if (has_p)
			acc_add(&w->power, mw / 1000.0);
		if (has_t)
			acc_add(&w->temp, t);
		if (has_r)
			w->reasons |= reasons;
	}
	pthread_mutex_unlock(&w->mu);
}

/* One reading, on the ticker's thread. */
static void watch_tick(void *arg)
{
	struct watch *w = arg;
	pthread_mutex_lock(&w->mu);
	int fig = w->fig;
	pthread_mutex_unlock(&w->mu);
	watch_sample(w, fig, w->tick++ % PROC_EVERY == 0);
}

static void watch_begin(struct watch *w, int fig)
{
	pthread_mutex_lock(&w->mu);
	memset(&w->sm, 0, sizeof w->sm);
	memset(&w->mem, 0, sizeof w->mem);
	memset(&w->power, 0, sizeof w->power);
	memset(&w->temp, 0, sizeof w->temp);
	w->reasons = 0;
	w->fig = fig;
	pthread_mutex_unlock(&w->mu);
}

static void watch_end(struct watch *w, struct bench_figure *f)
{
	/* A figure shorter than the watch period still gets one reading. */
	pthread_mutex_lock(&w->mu);
	bool none = w->sm.n == 0 && w->power.n == 0 && w->fig >= 0;
	int fig = w->fig;
	pthread_mutex_unlock(&w->mu);
	if (none && w->nv)
		watch_sample(w, fig, false);
	pthread_mutex_lock(&w->mu);
	acc_take(&w->sm, &f->sm_clock_mhz);
	acc_take(&w->mem, &f->mem_clock_mhz);
	acc_take(&w->power, &f->power_watts);
	acc_take(&w->temp, &f->temperature_celsius);
	/* "Idle" and "applications clocks" are no throttling. */
	f->throttle_reasons = w->reasons & ~0x3ULL;
	w->fig = -1;
	pthread_mutex_unlock(&w->mu);
}

/* ---- the engine ---- */

struct eng {
	const struct bench_opts *o;
	struct bench_result *r;
	struct cuda_lib *cu;
	struct cublaslt_lib *lt;
	cu_device_t dev;
	cu_ctx_t ctx;
	bool ctx_retained;
	cu_stream_t stream;
	cu_event_t ev0, ev1;
	cu_module_t mod;
	cu_function_t k_fill, k_read, k_empty;
	struct watch w;
	double warm_s, batch_s;
	int runs;
	/* Host-bound figures: repetitions of about a scheduler slice each,
	 * so that some fall between other tenants' bursts, and as many as
	 * make about the same time as a figure's runs. */
	double host_batch_s;
	int host_runs;
	size_t copy_bytes;
	char *err;
	size_t errlen;
};

#define CU(e, call, what)                                                                     \
	do {                                                                                  \
		cu_result_t cu_r_ = (call);                                                   \
		if (cu_r_ != CU_ABI_SUCCESS) {                                                \
			snprintf((e)->err, (e)->errlen, "%s failed: %s", what,                \
				 cuda_lib_strerror((e)->cu, cu_r_));                          \
			return cu_r_ == CU_ABI_ERROR_OUT_OF_MEMORY ? GPULSE_ENOMEM : GPULSE_EVENDOR; \
		}                                                                             \
	} while (0)

static bool stopped(const struct eng *e)
{
	return e->o->stop && *e->o->stop;
}

static bool wanted(const struct eng *e, const char *name)
{
	const char *s = e->o->only;
	if (!s || !*s)
		return true;
	size_t n = strlen(name);
	while (*s) {
		const char *c = strchr(s, ',');
		size_t len = c ? (size_t)(c - s) : strlen(s);
		if (len == n && strncmp(s, name, n) == 0)
			return true;
		if (!c)
			break;
		s = c + 1;
	}
	return false;
}

/* One enqueued iteration of what a figure times. */
typedef int op_fn(struct eng *e, void *arg);

/* Time `iters` iterations on the stream: seconds by the events. */
static int time_batch(struct eng *e, op_fn *op, void *arg, int iters, double *seconds)
{
	CU(e, e->cu->event_record(e->ev0, e->stream), "cuEventRecord");
	for (int i = 0; i < iters; i++) {
		int rc = op(e, arg);
		if (rc)
			return rc;
	}
	CU(e, e->cu->event_record(e->ev1, e->stream), "cuEventRecord");
	CU(e, e->cu->event_synchronize(e->ev1), "cuEventSynchronize");
	float ms = 0;
	CU(e, e->cu->event_elapsed_time(&ms, e->ev0, e->ev1), "cuEventElapsedTime");
	*seconds = ms / 1e3;
	return 0;
}

/* The figure's value, method and estimator from its runs' values v[0..n)
 * (sorted in place), with min, median, max and spread; false when there
 * is nothing to summarize. */
static bool finish_figure(struct bench_figure *f, double *v, int n, enum bench_estimator est)
{
	f->runs = n;
	if (n == 0 || !bench_summarize(v, (size_t)n, &f->min, &f->median, &f->max, &f->spread_ratio)) {
		f->runs = 0;
		return false;
	}
	f->value = bench_estimate(v, (size_t)n, est, f->higher_is_better);
	str_copy(f->method, sizeof f->method, bench_estimator_name(est));
	bench_estimator_text(est, f->higher_is_better, (size_t)n, f->estimator, sizeof f->estimator);
	if (f->has_peak && f->peak > 0)
		f->peak_fraction = f->value / f->peak;
	return true;
}

/* Warm up, then time batches of `op`: e->runs of about e->batch_s, or,
 * for a host-bound figure, e->host_runs of about e->host_batch_s. Each
 * run's figure is work x iterations / seconds (or, with
 * per_iter_seconds, seconds per iteration). Fills f's statistics, its
 * value by the median, or for a host-bound figure by the fast decile. */
static int measure(struct eng *e, struct bench_figure *f, op_fn *op, void *arg, double work,
		   bool per_iter_seconds, double warm_s, bool host_bound)
{
	double batch_s = host_bound ? e->host_batch_s : e->batch_s;
	int runs = host_bound ? e->host_runs : e->runs;
	double t1 = 0;
	int rc = time_batch(e, op, arg, 1, &t1);
	if (rc)
		return rc;
	int iters = 1;
	double warmed = t1;
	/* Warm up in batches of about a run's length; the last one sets the
	 * iteration count of the timed runs. */
	do {
		double per = t1 / iters;
		if (per <= 0)
			per = 1e-6;
		long want = lround(batch_s / per);
		iters = want < 1 ? 1 : want > 200000 ? 200000 : (int)want;
		if ((rc = time_batch(e, op, arg, iters, &t1)))
			return rc;
		warmed += t1;
	} while (warmed < warm_s && !stopped(e));
	double per = t1 / iters;
	long want = lround(batch_s / (per > 0 ? per : 1e-6));
	iters = want < 1 ? 1 : want > 200000 ? 200000 : (int)want;

	double v[MAX_RUNS];
	int n = 0;
	watch_begin(&e->w, e->r->nfig - 1);
	for (int i = 0; i < runs && i < MAX_RUNS && !stopped(e); i++) {
		double s;
		if ((rc = time_batch(e, op, arg, iters, &s))) {
			watch_end(&e->w, f);
			return rc;
		}
		v[n++] = per_iter_seconds ? s / iters : bench_rate(work * iters, s);
	}
	watch_end(&e->w, f);
	if (!finish_figure(f, v, n, host_bound ? BENCH_EST_FAST_P90 : BENCH_EST_MEDIAN))
		return stopped(e) ? GPULSE_ECANCELED : GPULSE_EVENDOR;
	return 0;
}

static int launch(struct eng *e, cu_function_t fn, unsigned grid, unsigned block, void **params)
{
	CU(e, e->cu->launch_kernel(fn, grid, 1, 1, block, 1, 1, 0, e->stream, params, NULL),
	   "cuLaunchKernel");
	return 0;
}

static unsigned grid_for(const struct eng *e)
{
	return (unsigned)(e->r->gpu.sm_count > 0 ? e->r->gpu.sm_count : 80) * 8;
}

/* Fill `bytes` at p with random words: hash bits masked into finite
 * values of each type in [-2, -1] u [1, 2] (never zeros: zeros make
 * tensor cores draw less power and run faster than real data). */
static int fill(struct eng *e, cu_deviceptr_t p, size_t bytes, const char *type, unsigned seed)
{
	unsigned a0 = 0xffffffffU, o0 = 0, a1 = 0xffffffffU, o1 = 0;
	if (strcmp(type, "bf16") == 0)
		a0 = a1 = 0x807f807fU, o0 = o1 = 0x3f803f80U;
	else if (strcmp(type, "fp16") == 0)
		a0 = a1 = 0x83ff83ffU, o0 = o1 = 0x3c003c00U;
	else if (strcmp(type, "fp32") == 0 || strcmp(type, "tf32") == 0)
		a0 = a1 = 0x807fffffU, o0 = o1 = 0x3f800000U;
	else if (strcmp(type, "fp64") == 0)
		a1 = 0x800fffffU, o1 = 0x3ff00000U; /* high word odd: little-endian */
	else if (strcmp(type, "fp8") == 0)
		a0 = a1 = 0x87878787U, o0 = o1 = 0x38383838U;
	unsigned long long n = bytes / 4;
	void *params[] = {&p, &n, &seed, &a0, &o0, &a1, &o1};
	int rc = launch(e, e->k_fill, grid_for(e), 256, params);
	if (rc)
		return rc;
	CU(e, e->cu->stream_synchronize(e->stream), "filling a buffer (cuStreamSynchronize)");
	return 0;
}

static int dalloc(struct eng *e, cu_deviceptr_t *p, size_t bytes, const char *what)
{
	cu_result_t r = e->cu->mem_alloc(p, bytes);
	if (r != CU_ABI_SUCCESS) {
		*p = 0;
		snprintf(e->err, e->errlen, "cannot allocate %zu MiB of device memory for %s (%s)",
			 bytes / MIB, what, cuda_lib_strerror(e->cu, r));
		return r == CU_ABI_ERROR_OUT_OF_MEMORY ? GPULSE_ENOMEM : GPULSE_EVENDOR;
	}
	return 0;
}

static void dfree(struct eng *e, cu_deviceptr_t *p)
{
	if (*p)
		e->cu->mem_free(*p);
	*p = 0;
}

/* ---- the host side's CPUs ---- */

/* "0-3,8,10-11" for the CPUs in `set`, into out (cut at its size). */
static void cpus_text(const cpu_set_t *set, char *out, size_t len)
{
	size_t o = 0;
	out[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE && o + 1 < len; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		int end = c;
		while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set))
			end++;
		int w = end > c ? snprintf(out + o, len - o, "%s%d-%d", o ? "," : "", c, end)
				: snprintf(out + o, len - o, "%s%d", o ? "," : "", c);
		if (w < 0 || (size_t)w >= len - o) {
			out[o] = '\0';
			break;
		}
		o += (size_t)w;
		c = end;
	}
}

/* Run the host side on the CPUs NVML names as the GPU's nearest (its
 * NUMA node), within those this thread may use, from before the CUDA
 * context exists: pageable copies are the host's memcpy through the
 * driver's staging buffers and launch figures are host CPU time, and both
 * change with the node they run on and the memory they touch (first touch
 * places the pages). The thread's own set is kept in *saved for
 * unbind_host. No binding when NVML cannot say, or when the nearest CPUs
 * are all of ours anyway. */
static bool bind_near_gpu(struct nvml_lib *nv, nvml_device_t dev, struct bench_result *r,
			  cpu_set_t *saved)
{
	enum { WORDS = CPU_SETSIZE / (8 * sizeof(unsigned long)) };
	unsigned long near[WORDS];
	memset(near, 0, sizeof near);
	if (pthread_getaffinity_np(pthread_self(), sizeof *saved, saved) != 0)
		return false;
	cpu_set_t want;
	CPU_ZERO(&want);
	if (nv->device_get_cpu_affinity && NVML_CALL(nv, device_get_cpu_affinity, dev, WORDS, near) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if ((near[c / (8 * sizeof(unsigned long))] >> (c % (8 * sizeof(unsigned long)))) & 1UL &&
			    CPU_ISSET(c, saved))
				CPU_SET(c, &want);
	if (CPU_COUNT(&want) == 0 || CPU_EQUAL(&want, saved) ||
	    pthread_setaffinity_np(pthread_self(), sizeof want, &want) != 0) {
		cpus_text(saved, r->host_cpus, sizeof r->host_cpus);
		return false;
	}
	cpus_text(&want, r->host_cpus, sizeof r->host_cpus);
	return true;
}

/* ---- launch figures ---- */

static int op_empty(struct eng *e, void *arg)
{
	(void)arg;
	return launch(e, e->k_empty, 1, 32, NULL);
}

static int bench_launch(struct eng *e)
{
	/* Throughput: back-to-back empty kernels, timed on the GPU; the GPU
	 * waits for the host's launches, so it is host CPU time. */
	struct bench_figure *f = bench_result_add(e->r, "launch_rate", "", "launches_per_second");
	if (!f)
		return 0;
	snprintf(f->size, sizeof f->size, "empty kernel, 1 block of 32 threads");
	int rc = measure(e, f, op_empty, NULL, 1.0, false, e->warm_s / 2, true);
	if (rc)
		return rc;
	/* Latency: one launch and the wait for it, on the host's clock. */
	f = bench_result_add(e->r, "launch_latency", "", "seconds");
	if (!f)
		return 0;
	f->higher_is_better = false;
	snprintf(f->size, sizeof f->size, "launch + cuStreamSynchronize of an empty kernel");
	/* Each repetition's figure is the median of its launches, each timed
	 * alone: a shared host's preemptions and interrupts land on a few
	 * launches and would move a repetition's mean by as much as they
	 * took. The figure is the fast decile of the repetitions (as many
	 * launches in all as 10 runs of 200 or 30 of 1000 were): a burst of
	 * another tenant's work that spans a whole repetition only makes it
	 * slower. Warmed first: the first launches of a context pay for its
	 * lazy setup. */
	double v[MAX_RUNS];
	enum { PER_RUN_MAX = 250 };
	double one[PER_RUN_MAX];
	int n = 0;
	int per_run = e->o->full ? PER_RUN_MAX : 50;
	for (int j = 0; j < 200 && !stopped(e); j++) {
		if ((rc = op_empty(e, NULL)))
			return rc;
		CU(e, e->cu->stream_synchronize(e->stream), "cuStreamSynchronize");
	}
	watch_begin(&e->w, e->r->nfig - 1);
	for (int i = 0; i < e->host_runs && i < MAX_RUNS && !stopped(e); i++) {
		for (int j = 0; j < per_run; j++) {
			int64_t t0 = clock_mono_ns();
			if ((rc = op_empty(e, NULL))) {
				watch_end(&e->w, f);
				return rc;
			}
			cu_result_t r = e->cu->stream_synchronize(e->stream);
			if (r != CU_ABI_SUCCESS) {
				watch_end(&e->w, f);
				snprintf(e->err, e->errlen, "cuStreamSynchronize failed: %s",
					 cuda_lib_strerror(e->cu, r));
				return GPULSE_EVENDOR;
			}
			one[j] = (double)(clock_mono_ns() - t0) / 1e9;
		}
		double lo, med, hi, spread;
		if (!bench_summarize(one, (size_t)per_run, &lo, &med, &hi, &spread))
			continue;
		v[n++] = med;
	}
	watch_end(&e->w, f);
	finish_figure(f, v, n, BENCH_EST_FAST_P90);
	return 0;
}

/* ---- memory figures ---- */

struct copy_arg {
	cu_deviceptr_t dst, src;
	void *host;
	size_t bytes;
	int dir; /* 0 d2d, 1 h2d, 2 d2h */
};

static int op_copy(struct eng *e, void *arg)
{
	struct copy_arg *c = arg;
	if (c->dir == 0)
		CU(e, e->cu->memcpy_dtod_async(c->dst, c->src, c->bytes, e->stream), "cuMemcpyDtoDAsync");
	else if (c->dir == 1)
		CU(e, e->cu->memcpy_htod_async(c->dst, c->host, c->bytes, e->stream), "cuMemcpyHtoDAsync");
	else
		CU(e, e->cu->memcpy_dtoh_async(c->host, c->src, c->bytes, e->stream), "cuMemcpyDtoHAsync");
	return 0;
}

struct read_arg {
	cu_deviceptr_t p, out;
	unsigned long long nvec;
	unsigned grid;
};

static int op_read(struct eng *e, void *arg)
{
	struct read_arg *a = arg;
	void *params[] = {&a->p, &a->nvec, &a->out};
	return launch(e, e->k_read, a->grid, 256, params);
}

static void dram_peak(struct eng *e, struct bench_figure *f)
{
	f->has_peak = bench_dram_peak(e->r->gpu.max_mem_clock_mhz, e->r->gpu.mem_bus_width_bits,
				      &f->peak, f->peak_source, sizeof f->peak_source);
}

static int bench_device_memory(struct eng *e)
{
	cu_deviceptr_t a = 0, b = 0;
	size_t bytes = e->copy_bytes;
	int rc = dalloc(e, &a, bytes, "the device copy");
	if (!rc)
		rc = dalloc(e, &b, bytes, "the device copy");
	if (!rc)
		rc = fill(e, a, bytes, "fp32", 0x1234u);
	if (!rc && wanted(e, "dram_copy") && !stopped(e)) {
		struct bench_figure *f = bench_result_add(e->r, "dram_copy", "", "bytes_per_second");
		if (f) {
			snprintf(f->size, sizeof f->size, "%zu bytes, read and write counted", bytes);
			dram_peak(e, f);
			struct copy_arg c = {.dst = b, .src = a, .bytes = bytes, .dir = 0};
			rc = measure(e, f, op_copy, &c, 2.0 * (double)bytes, false, e->warm_s, false);
		}
	}
	if (!rc && wanted(e, "dram_read") && !stopped(e)) {
		struct bench_figure *f = bench_result_add(e->r, "dram_read", "", "bytes_per_second");
		if (f) {
			struct read_arg ra = {.p = a, .out = b, .grid = grid_for(e)};
			unsigned long long step = 4ULL * ra.grid * 256; /* four grid strides */
			ra.nvec = bytes / 16 / step * step;
			snprintf(f->size, sizeof f->size, "%llu bytes, 16-byte loads", ra.nvec * 16);
			dram_peak(e, f);
			rc = measure(e, f, op_read, &ra, (double)ra.nvec * 16, false, e->warm_s, false);
		}
	}
	dfree(e, &a);
	dfree(e, &b);
	return rc;
}

static void pcie_peak(struct eng *e, struct bench_figure *f)
{
	/* Against the link's maximum, so that a link trained down shows. */
	const struct bench_gpu *g = &e->r->gpu;
	unsigned gen = g->pcie_gen_max ? g->pcie_gen_max : g->pcie_gen;
	unsigned width = g->pcie_width_max ? g->pcie_width_max : g->pcie_width;
	f->has_peak = bench_pcie_peak(gen, width, &f->peak, f->peak_source, sizeof f->peak_source);
}

/* The pageable buffer: its own mapping, so that nothing about it depends
 * on the allocator or on the host's transparent huge page setting; the
 * pageable figures' noise beyond CPU steal is the host's memory, and each
 * of these removes a part of it:
 * - 4 KiB pages (MADV_NOHUGEPAGE): whether a buffer gets huge pages under
 *   THP "always" depends on how fragmented the host's memory is at the
 *   time, so it changes between processes; small pages are what every
 *   run gets, and what most applications' buffers are;
 * - every page touched before timing, with a value (untouched pages map
 *   the zero page, which copies faster than real data, and a first touch
 *   inside a timed copy is a page fault in it);
 * - locked (mlock) where RLIMIT_MEMLOCK allows, so that reclaim, swap and
 *   compaction cannot move a page away between repetitions; the figure's
 *   size says whether it was.
 * Returns NULL when the mapping fails; *locked says whether mlock took. */
static void *pageable_alloc(size_t bytes, bool *locked)
{
	*locked = false;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_NOHUGEPAGE
	(void)madvise(p, bytes, MADV_NOHUGEPAGE);
#endif
	memset(p, 0xa5, bytes);
	*locked = mlock(p, bytes) == 0;
	return p;
}

static void pageable_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

static int bench_host_copies(struct eng *e)
{
	if (!wanted(e, "h2d") && !wanted(e, "d2h"))
		return 0;
	/* Pageable: 64 MiB, far above the driver's staging chunks (so each
	 * copy is its steady pipeline of memcpy into staging and DMA out of
	 * it), and short enough (6-11 ms at the 6-10 GB/s a host memcpy
	 * gives) that a repetition is one copy of about a scheduler slice. */
	size_t pinned_bytes = GIB, pageable_bytes = 64 * MIB;
	bool locked = false;
	cu_deviceptr_t d = 0;
	void *pinned = NULL, *pageable = NULL;
	int rc = dalloc(e, &d, pinned_bytes, "the host copies");
	if (rc)
		return rc;
	cu_result_t r = e->cu->mem_alloc_host(&pinned, pinned_bytes);
	if (r != CU_ABI_SUCCESS) {
		pinned = NULL;
		bench_result_skip(e->r, "h2d", "pinned", "cannot pin %zu MiB of host memory (%s)",
				  pinned_bytes / MIB, cuda_lib_strerror(e->cu, r));
	}
	/* (Pinned pages are resident from the allocation.) */
	pageable = pageable_alloc(pageable_bytes, &locked);
	for (int dir = 0; !pageable && dir < 2; dir++)
		bench_result_skip(e->r, dir ? "d2h" : "h2d", "pageable",
				  "cannot map %zu MiB of host memory", pageable_bytes / MIB);
	static const char *const dirs[] = {"h2d", "d2h"};
	for (int v = 0; v < 2 && !rc; v++) {
		void *host = v == 0 ? pinned : pageable;
		size_t bytes = v == 0 ? pinned_bytes : pageable_bytes;
		if (!host)
			continue;
		for (int dir = 0; dir < 2 && !rc && !stopped(e); dir++) {
			if (!wanted(e, dirs[dir]))
				continue;
			struct bench_figure *f = bench_result_add(e->r, dirs[dir],
								  v == 0 ? "pinned" : "pageable",
								  "bytes_per_second");
			if (!f)
				break;
			if (v == 0)
				snprintf(f->size, sizeof f->size, "%zu bytes", bytes);
			else
				snprintf(f->size, sizeof f->size, "%zu bytes, 4 KiB pages, %s", bytes,
					 locked ? "locked" : "not locked");
			pcie_peak(e, f);
			struct copy_arg c = {.dst = d, .src = d, .host = host, .bytes = bytes,
					     .dir = dir + 1};
			rc = measure(e, f, op_copy, &c, (double)bytes, false, e->warm_s / 2, v == 1);
		}
	}
	if (pinned)
		e->cu->mem_free_host(pinned);
	pageable_free(pageable, pageable_bytes);
	dfree(e, &d);
	return rc;
}

/* ---- matrix multiply ---- */

struct mm_type {
	const char *precision;
	int ab_type, cd_type, compute, scale;
	size_t ab_size, cd_size;
};

static const struct mm_type mm_types[] = {
	{"bf16", CUDA_ABI_R_16BF, CUDA_ABI_R_16BF, CUBLAS_ABI_COMPUTE_32F, CUDA_ABI_R_32F, 2, 2},
	{"fp16", CUDA_ABI_R_16F, CUDA_ABI_R_16F, CUBLAS_ABI_COMPUTE_32F, CUDA_ABI_R_32F, 2, 2},
	{"fp8", CUDA_ABI_R_8F_E4M3, CUDA_ABI_R_16BF, CUBLAS_ABI_COMPUTE_32F, CUDA_ABI_R_32F, 1, 2},
	{"tf32", CUDA_ABI_R_32F, CUDA_ABI_R_32F, CUBLAS_ABI_COMPUTE_32F_FAST_TF32, CUDA_ABI_R_32F, 4, 4},
	{"fp32", CUDA_ABI_R_32F, CUDA_ABI_R_32F, CUBLAS_ABI_COMPUTE_32F, CUDA_ABI_R_32F, 4, 4},
	{"fp64", CUDA_ABI_R_64F, CUDA_ABI_R_64F, CUBLAS_ABI_COMPUTE_64F, CUDA_ABI_R_64F, 8, 8},
};

struct mm_arg {
	culib_handle_t h;
	culib_desc_t desc;
	culib_layout_t la, lb, lc;
	struct culib_algo algo;
	cu_deviceptr_t a, b, c, ws;
	size_t ws_size;
	float alpha_f, beta_f;
	double alpha_d, beta_d;
	bool fp64;
};

static int op_matmul(struct eng *e, void *arg)
{
	struct mm_arg *m = arg;
	const void *alpha = m->fp64 ? (const void *)&m->alpha_d : (const void *)&m->alpha_f;
	const void *beta = m->fp64 ? (const void *)&m->beta_d : (const void *)&m->beta_f;
	culib_status_t s = e->lt->matmul(m->h, m->desc, alpha, (const void *)(uintptr_t)m->a, m->la,
					 (const void *)(uintptr_t)m->b, m->lb, beta,
					 (const void *)(uintptr_t)m->c, m->lc, (void *)(uintptr_t)m->c,
					 m->lc, &m->algo, (void *)(uintptr_t)m->ws, m->ws_size,
					 e->stream);
	if (s != CUBLAS_ABI_STATUS_SUCCESS) {
		snprintf(e->err, e->errlen, "cublasLtMatmul failed (cublasStatus %d)", s);
		return GPULSE_EVENDOR;
	}
	return 0;
}

static int bench_one_matmul(struct eng *e, culib_handle_t h, const struct mm_type *t,
			    cu_deviceptr_t ws)
{
	const uint64_t n = MATMUL_N;
	struct mm_arg m = {.h = h, .ws = ws, .ws_size = WORKSPACE_BYTES, .alpha_f = 1, .beta_f = 0,
			   .alpha_d = 1, .beta_d = 0, .fp64 = t->ab_type == CUDA_ABI_R_64F};
	struct culib_heuristic heur;
	culib_pref_t pref = NULL;
	int rc = 0, found = 0;
	culib_status_t s;
	int32_t opT = CUBLAS_ABI_OP_T, opN = CUBLAS_ABI_OP_N;
	uint64_t wsz = WORKSPACE_BYTES;
	memset(&heur, 0, sizeof heur);
	/* TN (A transposed): the layout cuBLASLt's fp8 kernels require, and
	 * as fast as any for the others. */
	if ((s = e->lt->desc_create(&m.desc, t->compute, t->scale)) ||
	    (s = e->lt->desc_set(m.desc, CUBLASLT_ABI_MATMUL_DESC_TRANSA, &opT, sizeof opT)) ||
	    (s = e->lt->desc_set(m.desc, CUBLASLT_ABI_MATMUL_DESC_TRANSB, &opN, sizeof opN)) ||
	    (s = e->lt->layout_create(&m.la, t->ab_type, n, n, (int64_t)n)) ||
	    (s = e->lt->layout_create(&m.lb, t->ab_type, n, n, (int64_t)n)) ||
	    (s = e->lt->layout_create(&m.lc, t->cd_type, n, n, (int64_t)n)) ||
	    (s = e->lt->pref_create(&pref)) ||
	    (s = e->lt->pref_set(pref, CUBLASLT_ABI_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz)) ||
	    (s = e->lt->heuristic(h, m.desc, m.la, m.lb, m.lc, m.lc, pref, 1, &heur, &found)) ||
	    found < 1) {
		bench_result_skip(e->r, "matmul", t->precision,
				  "cuBLASLt has no %s kernel for %llux%llux%llu here (cublasStatus %d)",
				  t->precision, (unsigned long long)n, (unsigned long long)n,
				  (unsigned long long)n, s);
		goto out;
	}
	m.algo = heur.algo;
	if ((rc = dalloc(e, &m.a, n * n * t->ab_size, "matrix A")) ||
	    (rc = dalloc(e, &m.b, n * n * t->ab_size, "matrix B")) ||
	    (rc = dalloc(e, &m.c, n * n * t->cd_size, "matrix C")))
		goto out;
	const char *fill_type = strcmp(t->precision, "tf32") == 0 ? "fp32" : t->precision;
	if ((rc = fill(e, m.a, n * n * t->ab_size, fill_type, 0xa11ce5u)) ||
	    (rc = fill(e, m.b, n * n * t->ab_size, fill_type, 0xb0b5eedu)))
		goto out;
	struct bench_figure *f = bench_result_add(e->r, "matmul", t->precision, "flop_per_second");
	if (!f)
		goto out;
	snprintf(f->size, sizeof f->size, "%llux%llux%llu", (unsigned long long)n,
		 (unsigned long long)n, (unsigned long long)n);
	unsigned clock = e->r->gpu.max_sm_clock_mhz;
	f->has_peak = bench_matmul_peak(e->r->gpu.cc_major, e->r->gpu.cc_minor, t->precision,
					e->r->gpu.sm_count, clock, &f->peak, f->peak_source,
					sizeof f->peak_source);
	rc = measure(e, f, op_matmul, &m, bench_matmul_flop(n, n, n), false, e->warm_s * 1.5, false);
	if (rc == GPULSE_EVENDOR && f->runs == 0) {
		/* A kernel the heuristic offered but that does not run: say so
		 * and go on with the other precisions. */
		e->r->nfig--;
		bench_result_skip(e->r, "matmul", t->precision, "%s", e->err);
		rc = 0;
	}
out:
	dfree(e, &m.a);
	dfree(e, &m.b);
	dfree(e, &m.c);
	if (pref)
		e->lt->pref_destroy(pref);
	if (m.la)
		e->lt->layout_destroy(m.la);
	if (m.lb)
		e->lt->layout_destroy(m.lb);
	if (m.lc)
		e->lt->layout_destroy(m.lc);
	if (m.desc)
		e->lt->desc_destroy(m.desc);
	return rc;
}

static int bench_matmuls(struct eng *e)
{
	if (!wanted(e, "matmul"))
		return 0;
	char lterr[384];
	if (cublaslt_lib_open(&e->lt, e->o->cublaslt_path, lterr, sizeof lterr) != GPULSE_OK) {
		for (size_t i = 0; i < sizeof mm_types / sizeof mm_types[0]; i++)
			bench_result_skip(e->r, "matmul", mm_types[i].precision, "%s", lterr);
		bench_result_note(e->r, "no matrix multiply figures: %s", lterr);
		return 0;
	}
	if (e->lt->version)
		snprintf(e->r->cublaslt, sizeof e->r->cublaslt, "%.96s (version %zu)", e->lt->path,
			 e->lt->version);
	else
		str_copy(e->r->cublaslt, sizeof e->r->cublaslt, e->lt->path);
	culib_handle_t h = NULL;
	culib_status_t s = e->lt->create(&h);
	if (s != CUBLAS_ABI_STATUS_SUCCESS) {
		for (size_t i = 0; i < sizeof mm_types / sizeof mm_types[0]; i++)
			bench_result_skip(e->r, "matmul", mm_types[i].precision,
					  "cublasLtCreate failed (cublasStatus %d)", s);
		bench_result_note(e->r, "cublasLtCreate failed (cublasStatus %d): no matrix multiply figures", s);
		return 0;
	}
	cu_deviceptr_t ws = 0;
	int rc = dalloc(e, &ws, WORKSPACE_BYTES, "the cuBLASLt workspace");
	for (size_t i = 0; !rc && i < sizeof mm_types / sizeof mm_types[0] && !stopped(e); i++) {
		const struct mm_type *t = &mm_types[i];
		if (!bench_precision_supported(e->r->gpu.cc_major, e->r->gpu.cc_minor, t->precision)) {
			bench_result_skip(e->r, "matmul", t->precision,
					  "compute capability %d.%d has no %s tensor cores",
					  e->r->gpu.cc_major, e->r->gpu.cc_minor, t->precision);
			continue;
		}
		rc = bench_one_matmul(e, h, t, ws);
	}
	dfree(e, &ws);
	e->lt->destroy(h);
	return rc;
}

/* ---- identity and conditions ---- */

static void identify(struct nvml_lib *nv, nvml_device_t dev, struct bench_gpu *g, char *driver,
		     size_t dlen)
{
	unsigned v;
	if (nv->system_get_driver_version)
		NVML_CALL(nv, system_get_driver_version, driver, (unsigned)dlen);
	if (nv->device_get_name)
		NVML_CALL(nv, device_get_name, dev, g->name, sizeof g->name);
	if (nv->device_get_uuid)
		NVML_CALL(nv, device_get_uuid, dev, g->uuid, sizeof g->uuid);
	int maj = 0, min = 0;
	if (nv->device_get_cuda_compute_capability &&
	    NVML_CALL(nv, device_get_cuda_compute_capability, dev, &maj, &min) == 0)
		g->cc_major = maj, g->cc_minor = min;
	if (nv->device_get_max_clock_info &&
	    NVML_CALL(nv, device_get_max_clock_info, dev, NVML_ABI_CLOCK_SM, &v) == 0)
		g->max_sm_clock_mhz = v;
	if (nv->device_get_max_clock_info &&
	    NVML_CALL(nv, device_get_max_clock_info, dev, NVML_ABI_CLOCK_MEM, &v) == 0)
		g->max_mem_clock_mhz = v;
	if (nv->device_get_memory_bus_width && NVML_CALL(nv, device_get_memory_bus_width, dev, &v) == 0)
		g->mem_bus_width_bits = v;
	if (nv->device_get_curr_pcie_link_generation &&
	    NVML_CALL(nv, device_get_curr_pcie_link_generation, dev, &v) == 0)
		g->pcie_gen = v;
	if (nv->device_get_curr_pcie_link_width &&
	    NVML_CALL(nv, device_get_curr_pcie_link_width, dev, &v) == 0)
		g->pcie_width = v;
	if (nv->device_get_max_pcie_link_generation &&
	    NVML_CALL(nv, device_get_max_pcie_link_generation, dev, &v) == 0)
		g->pcie_gen_max = v;
	if (nv->device_get_max_pcie_link_width &&
	    NVML_CALL(nv, device_get_max_pcie_link_width, dev, &v) == 0)
		g->pcie_width_max = v;
	if (nv->device_get_enforced_power_limit &&
	    NVML_CALL(nv, device_get_enforced_power_limit, dev, &v) == 0)
		g->power_limit_watts = v / 1000.0;
	struct nvml_memory_v2 m2 = {.version = NVML_ABI_MEMORY_V2_VERSION};
	struct nvml_memory_v1 m1;
	if (nv->device_get_memory_info_v2 && NVML_CALL(nv, device_get_memory_info_v2, dev, &m2) == 0)
		g->mem_total_bytes = m2.total;
	else if (nv->device_get_memory_info && NVML_CALL(nv, device_get_memory_info, dev, &m1) == 0)
		g->mem_total_bytes = m1.total;
}

static void comm_of(unsigned pid, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%u/comm", pid);
	FILE *f = fopen(path, "r");
	out[0] = '\0';
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = '\0';
		fclose(f);
	}
	if (!out[0])
		snprintf(out, len, "?");
}

static void uuid_text(const struct cu_uuid *u, char *out, size_t len)
{
	const unsigned char *b = u->bytes;
	snprintf(out, len,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
}

static int open_cuda(struct eng *e)
{
	int rc = cuda_lib_open(&e->cu, e->o->cuda_path, e->err, e->errlen);
	if (rc)
		return rc;
	int v = 0;
	if (e->cu->driver_get_version(&v) == CU_ABI_SUCCESS)
		e->r->cuda_driver_version = v;
	int count = 0;
	CU(e, e->cu->device_get_count(&count), "cuDeviceGetCount");
	/* CUDA numbers devices its own way (CUDA_DEVICE_ORDER,
	 * CUDA_VISIBLE_DEVICES): find NVML's GPU by UUID. */
	for (int i = 0; i < count; i++) {
		cu_device_t d;
		struct cu_uuid u;
		char text[80];
		if (e->cu->device_get(&d, i) || e->cu->device_get_uuid(&u, d))
			continue;
		uuid_text(&u, text, sizeof text);
		if (strcmp(text, e->r->gpu.uuid) == 0) {
			e->dev = d;
			int sm = 0;
			if (e->cu->device_get_attribute(&sm, CU_ABI_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) == 0)
				e->r->gpu.sm_count = sm;
			int maj = 0, min = 0;
			if (!e->r->gpu.cc_major &&
			    e->cu->device_get_attribute(&maj, CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) == 0 &&
			    e->cu->device_get_attribute(&min, CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d) == 0)
				e->r->gpu.cc_major = maj, e->r->gpu.cc_minor = min;
			return 0;
		}
	}
	snprintf(e->err, e->errlen,
		 "GPU %d (%s) is not among the %d GPUs CUDA sees (CUDA_VISIBLE_DEVICES?)",
		 e->o->gpu, e->r->gpu.uuid, count);
	return GPULSE_ENOENT;
}

static int setup_cuda(struct eng *e, size_t need)
{
	CU(e, e->cu->primary_ctx_retain(&e->ctx, e->dev), "cuDevicePrimaryCtxRetain");
	e->ctx_retained = true;
	CU(e, e->cu->ctx_set_current(e->ctx), "cuCtxSetCurrent");
	size_t free_b = 0, total_b = 0;
	CU(e, e->cu->mem_get_info(&free_b, &total_b), "cuMemGetInfo");
	if (free_b < need) {
		snprintf(e->err, e->errlen,
			 "not enough free memory on GPU %d: the benchmark needs %zu MiB, %zu MiB of "
			 "%zu MiB are free (another process holds the rest?)",
			 e->o->gpu, need / MIB, free_b / MIB, total_b / MIB);
		return GPULSE_ENOMEM;
	}
	CU(e, e->cu->stream_create(&e->stream, CU_ABI_STREAM_NON_BLOCKING), "cuStreamCreate");
	CU(e, e->cu->event_create(&e->ev0, CU_ABI_EVENT_DEFAULT), "cuEventCreate");
	CU(e, e->cu->event_create(&e->ev1, CU_ABI_EVENT_DEFAULT), "cuEventCreate");
	CU(e, e->cu->module_load_data(&e->mod, bench_ptx), "loading the benchmark kernels (cuModuleLoadData)");
	CU(e, e->cu->module_get_function(&e->k_fill, e->mod, "gpulse_fill"), "cuModuleGetFunction");
	CU(e, e->cu->module_get_function(&e->k_read, e->mod, "gpulse_read"), "cuModuleGetFunction");
	CU(e, e->cu->module_get_function(&e->k_empty, e->mod, "gpulse_empty"), "cuModuleGetFunction");
	return 0;
}

static void teardown_cuda(struct eng *e)
{
	if (!e->cu)
		return;
	if (e->ctx_retained) {
		e->cu->ctx_synchronize();
		if (e->mod)
			e->cu->module_unload(e->mod);
		if (e->ev0)
			e->cu->event_destroy(e->ev0);
		if (e->ev1)
			e->cu->event_destroy(e->ev1);
		if (e->stream)
			e->cu->stream_destroy(e->stream);
		e->cu->primary_ctx_release(e->dev);
	}
	cublaslt_lib_close(e->lt);
	cuda_lib_close(e->cu);
}

int bench_run(const struct bench_opts *o, struct bench_result *r, char *err, size_t errlen)
{
	struct eng e = {.o = o, .r = r, .err = err, .errlen = errlen};
	struct nvml_lib *nv = NULL;
	int rc;
	bool bound = false;
	cpu_set_t saved_cpus;
	memset(r, 0, sizeof *r);
	r->version = BENCH_FORMAT_VERSION;
	r->t_ms = clock_wall_ns() / NS_PER_MS;
	int64_t t0 = clock_mono_ns();
	str_copy(r->mode, sizeof r->mode, o->full ? "full" : "quick");
	if (o->host)
		str_copy(r->host, sizeof r->host, o->host);
	else if (gethostname(r->host, sizeof r->host) != 0)
		r->host[0] = '\0';
	r->host[sizeof r->host - 1] = '\0';
	e.warm_s = o->full ? 2.0 : 0.4;
	e.batch_s = o->full ? 0.2 : 0.05;
	e.runs = o->full ? 30 : 10;
	e.host_batch_s = o->full ? 0.04 : 0.01;
	e.host_runs = o->full ? 120 : 40;
	e.copy_bytes = o->full ? 2 * GIB : GIB;

	const char *np = o->nvml_path ? o->nvml_path : getenv("GPULSE_NVML_LIBRARY");
	char nerr[256];
	if ((rc = nvml_lib_open(&nv, np, nerr, sizeof nerr)) != GPULSE_OK) {
		snprintf(err, errlen, "no NVIDIA driver: %s", nerr);
		return rc;
	}
	unsigned count = 0;
	nvml_device_t dev;
	if (NVML_CALL(nv, device_get_count, &count) != 0 || o->gpu < 0 || (unsigned)o->gpu >= count ||
	    NVML_CALL(nv, device_get_handle_by_index, (unsigned)o->gpu, &dev) != 0) {
		snprintf(err, errlen, "no GPU %d (this machine has %u)", o->gpu, count);
		rc = GPULSE_ENOENT;
		goto out_nvml;
	}
	r->gpu.index = o->gpu;
	identify(nv, dev, &r->gpu, r->driver, sizeof r->driver);
	unsigned cur = 0, pend = 0;
	if (nv->device_get_mig_mode && NVML_CALL(nv, device_get_mig_mode, dev, &cur, &pend) == 0 &&
	    cur == NVML_ABI_FEATURE_ENABLED) {
		snprintf(err, errlen,
			 "GPU %d (%s) is in MIG mode: gpulse bench measures whole GPUs, and a "
			 "slice's figures would read as a degraded card (it does not change MIG)",
			 o->gpu, r->gpu.uuid);
		rc = GPULSE_ENOTSUP;
		goto out_nvml;
	}

	/* In use? Another process, or utilization before we start. NVML's
	 * utilization covers its last sample period (up to a second), so a
	 * run right after another (gpu-check's five) may still read busy:
	 * without a process, it must stay busy over three readings a second
	 * apart to count. */
	struct self_pids self = {.pid = {(unsigned)getpid()}, .n = 1};
	unsigned other = foreign_process(nv, dev, &self);
	struct nvml_utilization u = {0};
	bool util_busy = false;
	for (int tries = 0; tries < 3; tries++) {
		util_busy = nv->device_get_utilization_rates &&
			    NVML_CALL(nv, device_get_utilization_rates, dev, &u) == 0 &&
			    u.gpu > BUSY_UTIL_PCT;
		if (!util_busy || other || (o->stop && *o->stop))
			break;
		if (tries < 2)
			clock_sleep_until(clock_mono_ns() + NS_PER_SEC);
	}
	r->baseline = true;
	if (other || util_busy) {
		char comm[32] = "";
		if (other)
			comm_of(other, comm, sizeof comm);
		char why[200];
		if (other)
			snprintf(why, sizeof why, "process %u (%s) is on the GPU%s", other, comm,
				 util_busy ? " and it is busy" : "");
		else
			snprintf(why, sizeof why, "the GPU is %u%% utilized", u.gpu);
		if (!o->allow_busy) {
			snprintf(err, errlen,
				 "GPU %d is in use (%s): a benchmark now would measure the job as much "
				 "as the card, so nothing was run (--allow-busy runs it anyway, marked "
				 "not a baseline)",
				 o->gpu, why);
			rc = GPULSE_EBUSY;
			goto out_nvml;
		}
		r->baseline = false;
		bench_result_note(r, "not a baseline: at the start %s", why);
	}

	e.w.nv = nv;
	e.w.dev = dev;
	e.w.fig = -1;
	e.w.self = self;
	bound = bind_near_gpu(nv, dev, r, &saved_cpus);
	if ((rc = open_cuda(&e)))
		goto out;
	if ((rc = setup_cuda(&e, o->full ? 5 * GIB : 3 * GIB)))
		goto out;
	/* Our context exists now: what appeared on the GPU meanwhile is us
	 * (there was nothing at the start), whatever pid NVML gives it. */
	if (!other) {
		unsigned pids[MAX_SELF];
		int n = gpu_pids(nv, dev, pids, MAX_SELF);
		for (int i = 0; i < n && e.w.self.n < MAX_SELF; i++)
			if (!is_self(&e.w.self, pids[i]))
				e.w.self.pid[e.w.self.n++] = pids[i];
	}

	pthread_mutex_init(&e.w.mu, NULL);
	periodic_init(&e.w.ticker, "gpulse-benchw", false, watch_tick, &e.w);
	if (periodic_start(&e.w.ticker, WATCH_PERIOD_NS) != 0)
		bench_result_note(r, "the NVML watcher did not start: no clocks, power or temperature");

	if (wanted(&e, "launch"))
		rc = bench_launch(&e);
	if (!rc && !stopped(&e) && (wanted(&e, "dram_copy") || wanted(&e, "dram_read")))
		rc = bench_device_memory(&e);
	if (!rc && !stopped(&e))
		rc = bench_host_copies(&e);
	if (!rc && !stopped(&e))
		rc = bench_matmuls(&e);
	if (rc == GPULSE_ECANCELED)
		rc = 0;

	periodic_destroy(&e.w.ticker);
	pthread_mutex_destroy(&e.w.mu);
	/* A last look, so that a run shorter than the watcher's period is
	 * judged too. */
	unsigned last = foreign_process(nv, dev, &e.w.self);
	if (last && !e.w.foreign_pid)
		e.w.foreign_pid = last;
	if (stopped(&e)) {
		r->interrupted = true;
		r->baseline = false;
		bench_result_note(r, "interrupted: the figures are partial and not a baseline");
	}
	if (e.w.foreign_pid) {
		char comm[32];
		comm_of(e.w.foreign_pid, comm, sizeof comm);
		r->baseline = false;
		bench_result_note(r, "not a baseline: process %u (%s) used the GPU during the run",
				  e.w.foreign_pid, comm);
	}
	for (int i = 0; i < r->nfig; i++) {
		uint64_t bad = r->fig[i].throttle_reasons & (0x8ULL | 0x40ULL | 0x80ULL);
		if (bad) {
			bench_result_note(r, "%s %s ran with hardware slowdown (thermal or power brake): "
					  "check cooling and power before trusting it",
					  r->fig[i].name, r->fig[i].variant);
			break;
		}
	}
out:
	teardown_cuda(&e);
	if (bound)
		pthread_setaffinity_np(pthread_self(), sizeof saved_cpus, &saved_cpus);
out_nvml:
	nvml_lib_close(nv);
	r->duration_s = (double)(clock_mono_ns() - t0) / 1e9;
	return rc;
}
