// What each CUPTI state costs an empty-kernel launch on this GPU, and
// what a tracing window's edges cost: the facts the continuous mode of
// libgpulse-inject.so is designed on (docs/internals/inject.md). Uses
// CUPTI directly, in one process, so states are compared without the
// spread between processes.
//   cupti_states [SEQUENCE [N]]   N launches per timed round (default 50000)
// SEQUENCE: the steps below, in order, in one process (compare states
// against the process's own first measurement). Prints one line per
// measurement: name, value, unit.
#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__global__ void k_empty(void) {}
__global__ void k_other(void) {} /* launched only by step Q: never traced unless Q runs in a window */

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
	CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};
#define NK (sizeof kinds / sizeof kinds[0])

static unsigned long recs, zero_ts, buffers;
static int n_launch = 50000;
static int check_each; /* cudaGetLastError after each launch (step L) */
static int use_other;  /* launch k_other instead of k_empty (step Q) */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void CUPTIAPI req(uint8_t **b, size_t *size, size_t *max)
{
	*b = (uint8_t *)aligned_alloc(8, 1 << 20);
	*size = 1 << 20;
	*max = 0;
}

static void CUPTIAPI done(CUcontext c, uint32_t s, uint8_t *b, size_t size, size_t valid)
{
	(void)c, (void)s, (void)size;
	CUpti_Activity *r = NULL;
	__atomic_fetch_add(&buffers, 1, __ATOMIC_SEQ_CST);
	while (valid && cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
		if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
			const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
			__atomic_fetch_add(&recs, 1, __ATOMIC_SEQ_CST);
			if (k->start == 0 || k->end == 0)
				__atomic_fetch_add(&zero_ts, 1, __ATOMIC_SEQ_CST);
		}
	}
	free(b);
}

static void enable_all(int on)
{
	for (size_t i = 0; i < NK; i++) {
		CUptiResult r = on ? cuptiActivityEnable(kinds[i]) : cuptiActivityDisable(kinds[i]);
		if (r != CUPTI_SUCCESS) {
			const char *s = "";
			cuptiGetResultString(r, &s);
			fprintf(stderr, "%s kind %d: %s\n", on ? "enable" : "disable", kinds[i], s);
		}
	}
}

// Median ns per launch over `reps` rounds of n_launch launches.
static double measure(int reps)
{
	double t[64];
	for (int r = 0; r < reps; r++) {
		double t0 = now_ns();
		if (check_each)
			for (int i = 0; i < n_launch; i++) {
				k_empty<<<1, 1>>>();
				(void)cudaGetLastError(); /* as PyTorch checks each launch */
			}
		else if (use_other)
			for (int i = 0; i < n_launch; i++)
				k_other<<<1, 1>>>();
		else
			for (int i = 0; i < n_launch; i++)
				k_empty<<<1, 1>>>();
		cudaDeviceSynchronize();
		t[r] = (now_ns() - t0) / n_launch;
	}
	qsort(t, (size_t)reps, sizeof t[0], cmpd);
	return t[reps / 2];
}

static void report(const char *name, double v, const char *unit)
{
	printf("%-44s %12.1f %s\n", name, v, unit);
	fflush(stdout);
}

static double timed(void (*f)(void))
{
	double t0 = now_ns();
	f();
	return now_ns() - t0;
}
static void en(void) { enable_all(1); }
static void dis(void) { enable_all(0); }
static void flush0(void) { cuptiActivityFlushAll(0); }
static void flushf(void) { cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); }

static double median_of(void (*f)(void), int n, int busy)
{
	double t[64];
	for (int i = 0; i < n; i++) {
		if (busy)
			for (int j = 0; j < 5000; j++)
				k_empty<<<1, 1>>>();
		t[i] = timed(f);
		if (busy)
			cudaDeviceSynchronize();
	}
	qsort(t, (size_t)n, sizeof t[0], cmpd);
	return t[n / 2];
}

// Detach (cuptiFinalize) the way CUPTI requires: at the exit of a CUDA
// API call, from a callback. The caller arms it; the next API call on any
// thread finalizes. Returns ns spent inside cuptiFinalize.
static int detach_armed;
static double finalize_ns;
static pthread_mutex_t fin_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fin_cv = PTHREAD_COND_INITIALIZER;
static int finalized;
static CUpti_SubscriberHandle fin_sub;
static int self_detach; /* step Y: detach through the arming thread's own call */

static void CUPTIAPI detach_cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *x)
{
	(void)u, (void)id;
	const CUpti_CallbackData *cb = (const CUpti_CallbackData *)x;
	/* Runtime calls only (a driver call's exit may be nested inside a
	 * runtime call, whose own exit then runs in a detached CUPTI), or
	 * the detaching thread's own driver call. */
	if (cb->callbackSite != CUPTI_API_EXIT ||
	    (d != CUPTI_CB_DOMAIN_RUNTIME_API && !(self_detach && d == CUPTI_CB_DOMAIN_DRIVER_API)))
		return;
	pthread_mutex_lock(&fin_mu);
	if (detach_armed) {
		detach_armed = 0;
		double t0 = now_ns();
		cuptiUnsubscribe(fin_sub);
		cuptiFinalize();
		finalize_ns = now_ns() - t0;
		finalized = 1;
		pthread_cond_broadcast(&fin_cv);
	}
	pthread_mutex_unlock(&fin_mu);
}

// Arm the detach; with wait, block until an API call has done it.
static int arm_detach(int wait)
{
	if (cuptiSubscribe(&fin_sub, detach_cb, NULL) != CUPTI_SUCCESS)
		return -1;
	/* Only calls that launch nothing: finalizing at a launch's exit
	 * crashed in CUPTI on the H200. */
	static const CUpti_CallbackId safe[] = {
		CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
	};
	if (self_detach) {
		/* This thread's own driver call: finalize on the thread that
		 * subscribed (an application thread's launch crashed inside
		 * CUPTI after a detach made from another thread). */
		cuptiEnableCallback(1, fin_sub, CUPTI_CB_DOMAIN_DRIVER_API,
				    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount);
	} else {
		for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++)
			cuptiEnableCallback(1, fin_sub, CUPTI_CB_DOMAIN_RUNTIME_API, safe[i]);
	}
	/* Armed last: this thread makes no CUPTI call after this. */
	pthread_mutex_lock(&fin_mu);
	finalized = 0;
	detach_armed = 1;
	pthread_mutex_unlock(&fin_mu);
	if (self_detach) {
		int n;
		cuDeviceGetCount(&n);
	}
	if (!wait)
		return 0;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&fin_mu);
	while (!finalized)
		if (pthread_cond_timedwait(&fin_cv, &fin_mu, &until) != 0)
			break;
	int ok = finalized;
	pthread_mutex_unlock(&fin_mu);
	return ok ? 0 : -2;
}

// A background thread opens a window of on_ms every period_ms, like the
// library's continuous mode; how = 0: no flush at close, 1: forced flush
// at close, 2: default flush at close.
struct duty {
	int on_ms, period_ms, how;
	int stop;
	unsigned long windows;
	double edge_ns, finalize_ns;
	unsigned long detach_failed;
};

static void *duty_thread(void *arg)
{
	struct duty *d = (struct duty *)arg;
	while (!__atomic_load_n(&d->stop, __ATOMIC_SEQ_CST)) {
		double t0 = now_ns();
		if (d->how == 3)
			fprintf(stderr, "window %lu: attach\n", d->windows);
		if (d->how == 3)
			cuptiActivityRegisterCallbacks(req, done);
		if (d->how == 3)
			fprintf(stderr, "window %lu: attached\n", d->windows);
		enable_all(1);
		double t1 = now_ns();
		usleep((useconds_t)d->on_ms * 1000);
		double t2 = now_ns();
		enable_all(0);
		if (d->how == 1)
			cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		else if (d->how == 2)
			cuptiActivityFlushAll(0);
		else if (d->how == 3) {
			cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
			fprintf(stderr, "window %lu: detach\n", d->windows);
			if (arm_detach(1) != 0)
				d->detach_failed++;
			fprintf(stderr, "window %lu: detached\n", d->windows);
			d->finalize_ns += finalize_ns;
		}
		double t3 = now_ns();
		d->edge_ns += (t1 - t0) + (t3 - t2);
		d->windows++;
		double rest = d->period_ms * 1e6 - (t3 - t0);
		if (rest > 0)
			usleep((useconds_t)(rest / 1000));
	}
	return NULL;
}

static void run_duty(const char *name, int on_ms, int period_ms, int how, double plain)
{
	struct duty d;
	memset(&d, 0, sizeof d);
	d.on_ms = on_ms, d.period_ms = period_ms, d.how = how;
	unsigned long r0 = __atomic_load_n(&recs, __ATOMIC_SEQ_CST);
	pthread_t th;
	pthread_create(&th, NULL, duty_thread, &d);
	double v = measure(25);
	__atomic_store_n(&d.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(th, NULL);
	if (how != 3) {
		enable_all(0);
		cudaDeviceSynchronize();
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	}
	char line[128];
	snprintf(line, sizeof line, "duty %s: ns/launch", name);
	report(line, v, "ns");
	snprintf(line, sizeof line, "duty %s: ratio to plain", name);
	report(line, v / plain, "x");
	snprintf(line, sizeof line, "duty %s: windows", name);
	report(line, (double)d.windows, "");
	snprintf(line, sizeof line, "duty %s: edge cost per window", name);
	report(line, d.windows ? d.edge_ns / d.windows / 1e3 : 0, "us");
	if (how == 3) {
		snprintf(line, sizeof line, "duty %s: cuptiFinalize per window", name);
		report(line, d.windows ? d.finalize_ns / d.windows / 1e3 : 0, "us");
		snprintf(line, sizeof line, "duty %s: detaches timed out", name);
		report(line, (double)d.detach_failed, "");
	}
	snprintf(line, sizeof line, "duty %s: kernel records per window", name);
	report(line, d.windows ? (double)(__atomic_load_n(&recs, __ATOMIC_SEQ_CST) - r0) / d.windows : 0, "");
}

static void edges(void)
{
	// Edge costs, idle GPU and with 5000 launches queued.
	report("enable 5 kinds, idle", median_of(en, 9, 0) / 1e3, "us");
	report("disable 5 kinds, idle", median_of(dis, 9, 0) / 1e3, "us");
	report("flushAll(0), idle", median_of(flush0, 9, 0) / 1e3, "us");
	report("flushAll(forced), idle", median_of(flushf, 9, 0) / 1e3, "us");
	report("enable 5 kinds, 5000 queued", median_of(en, 9, 1) / 1e3, "us");
	report("disable 5 kinds, 5000 queued", median_of(dis, 9, 1) / 1e3, "us");
	enable_all(1);
	report("flushAll(forced), tracing, 5000 queued", median_of(flushf, 9, 1) / 1e3, "us");
	report("flushAll(0), tracing, 5000 queued", median_of(flush0, 9, 1) / 1e3, "us");
	enable_all(0);
	cudaDeviceSynchronize();
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);

}

static void closes(void)
{
	// Which records of a window come back, by how it is closed.
	struct { const char *name; int sync_before_disable; int flush; } cl[] = {
		{ "close: disable, forced flush at once", 0, 1 },
		{ "close: disable, default flush at once", 0, 2 },
		{ "close: sync, disable, forced flush", 1, 1 },
		{ "close: disable, no flush (next flush later)", 0, 0 },
	};
	for (size_t c = 0; c < sizeof cl / sizeof cl[0]; c++) {
		unsigned long a = __atomic_load_n(&recs, __ATOMIC_SEQ_CST), z = __atomic_load_n(&zero_ts, __ATOMIC_SEQ_CST);
		enable_all(1);
		for (int i = 0; i < 20000; i++)
			k_empty<<<1, 1>>>();
		if (cl[c].sync_before_disable)
			cudaDeviceSynchronize();
		enable_all(0);
		if (cl[c].flush == 1)
			cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		else if (cl[c].flush == 2)
			cuptiActivityFlushAll(0);
		unsigned long got = __atomic_load_n(&recs, __ATOMIC_SEQ_CST) - a, gz = __atomic_load_n(&zero_ts, __ATOMIC_SEQ_CST) - z;
		cudaDeviceSynchronize();
		usleep(20000);
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		char line[160];
		snprintf(line, sizeof line, "%s: at close / 20000", cl[c].name);
		report(line, (double)got, "");
		snprintf(line, sizeof line, "%s: zero timestamps", cl[c].name);
		report(line, (double)gz, "");
		snprintf(line, sizeof line, "%s: after sync / 20000", cl[c].name);
		report(line, (double)(__atomic_load_n(&recs, __ATOMIC_SEQ_CST) - a), "");
	}

}

// One step of a sequence: P measure, R register callbacks, M MARKER on,
// S subscribe+unsubscribe, T ten of those, E the five kinds on, D off,
// K kernels only on, k kernels off, F forced flush, X window edge costs,
// C which records a closed window returns, W duty cycles, Z detach
// (cuptiFinalize at the next API call), V duty cycles that detach
// between windows, L check each launch with cudaGetLastError from now on,
// Y detach through the arming thread's own driver call, c/d kernels on/off
// for the current context only, H CUPTI's buffers in pinned host memory,
// G one shared activity buffer instead of per-thread ones (before R),
// A the cost of other calls than launches (api_mix), I each driver call
// of a census sample alone, J/j PC sampling on/off, U a compute kernel's
// GPU time, O/o every driver
// API callback on (empty body) / off.
// A one-byte activity attribute; reports `refused` with CUPTI's code.
// Steps B, b, e: continuous mode's census windows (src/inject/census_windows.c),
// measured alone. B subscribes a callback that counts every driver launch
// (as the census does: a lock, a table, a clock read); e makes it also
// time one launch in 32 with two CUDA events on the launch's stream, as
// the census's samples are; b unsubscribes. Whether launches are back at
// their first cost after b is the question of the lasting cost.
static CUpti_SubscriberHandle census_sub;
static int census_events;
static unsigned long census_seen, census_timed;
static pthread_mutex_t census_mu = PTHREAD_MUTEX_INITIALIZER;
static void CUPTIAPI census_cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *x)
{
	(void)u, (void)d;
	const CUpti_CallbackData *cd = (const CUpti_CallbackData *)x;
	if (id != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel && id != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
		return;
	CUstream st = id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel
			      ? ((const cuLaunchKernel_params *)cd->functionParams)->hStream
			      : ((const cuLaunchKernelEx_params *)cd->functionParams)->config->hStream;
	if (cd->callbackSite == CUPTI_API_ENTER) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		pthread_mutex_lock(&census_mu);
		census_seen++;
		pthread_mutex_unlock(&census_mu);
		*cd->correlationData = 0;
		if (census_events && census_seen % 32 == 0) {
			CUevent a;
			if (cuEventCreate(&a, CU_EVENT_DEFAULT) == CUDA_SUCCESS && cuEventRecord(a, st) == CUDA_SUCCESS)
				*cd->correlationData = (uint64_t)(uintptr_t)a;
		}
	} else if (*cd->correlationData) {
		CUevent a = (CUevent)(uintptr_t)*cd->correlationData, b;
		/* The library reads and destroys them later, on its thread;
		 * destroying a recorded event at once is legal and costs the
		 * launching thread about the same. */
		if (cuEventCreate(&b, CU_EVENT_DEFAULT) == CUDA_SUCCESS && cuEventRecord(b, st) == CUDA_SUCCESS)
			cuEventDestroy(b);
		cuEventDestroy(a);
		census_timed++;
	}
}

static void census_on(void)
{
	if (cuptiSubscribe(&census_sub, census_cb, NULL) != CUPTI_SUCCESS) {
		report("census subscribe refused", 0, "");
		return;
	}
	static const CUpti_CallbackId ids[] = {
		CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
		CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		cuptiEnableCallback(1, census_sub, CUPTI_CB_DOMAIN_DRIVER_API, ids[i]);
}

static void set_u8_attr(CUpti_ActivityAttribute a, uint8_t v, const char *refused)
{
	size_t sz = sizeof v;
	CUptiResult r = cuptiActivitySetAttribute(a, &sz, &v);
	if (r != CUPTI_SUCCESS)
		report(refused, (double)r, "");
}

// Step A: what calls other than launches cost in the current state (a
// census subscriber enables the launch and copy callbacks only: does every
// other driver and runtime call pay for it too?). Median ns per call over
// 7 rounds of n_api calls each, for the calls a PyTorch step makes between
// its launches.
static int n_api = 20000;
static double api_round(int which, CUstream st, cudaEvent_t ev)
{
	double t[7];
	for (int r = 0; r < 7; r++) {
		int dev;
		CUcontext ctx;
		cudaStreamCaptureStatus cs;
		double t0 = now_ns();
		for (int i = 0; i < n_api; i++) {
			switch (which) {
			case 0: cudaGetDevice(&dev); break;
			case 1: cudaStreamIsCapturing((cudaStream_t)st, &cs); break;
			case 2: cuCtxGetCurrent(&ctx); break;
			case 3: cuStreamQuery(st); break;
			case 4: cudaEventRecord(ev, (cudaStream_t)st); break;
			case 5: (void)cudaGetLastError(); break;
			default: k_empty<<<1, 1, 0, (cudaStream_t)st>>>(); break;
			}
		}
		cudaDeviceSynchronize();
		t[r] = (now_ns() - t0) / n_api;
	}
	qsort(t, 7, sizeof t[0], cmpd);
	return t[3];
}

// Step I: what each driver call of a census sample costs the launching
// thread by itself (src/inject/census_windows.c, census_time_start/_end), on an
// idle stream (2000 calls) and on one busy with a long kernel (300): the
// median ns per call.
__global__ void k_spin(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles)
		;
}

static void sample_calls(void)
{
	enum { N = 2000 };
	static CUevent ev[N];
	static double t[N];
	CUstream st;
	cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
	uint32_t *word = NULL;
	cuMemHostAlloc((void **)&word, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
	*word = 1;
	for (int busy = 0; busy < 2; busy++) {
		const char *tag = busy ? "busy" : "idle";
		int n = busy ? 300 : N; /* behind one kernel: far from filling the stream's queue */
		char line[96];
		if (busy) /* about 2 s of one kernel: every call below meets a busy stream */
			k_spin<<<1, 1, 0, (cudaStream_t)st>>>(4000000000ll);
#define TIME_CALL(label, call)                                                   \
	do {                                                                     \
		for (int i = 0; i < n; i++) {                                    \
			double t0 = now_ns();                                    \
			call;                                                    \
			t[i] = now_ns() - t0;                                    \
		}                                                                \
		qsort(t, (size_t)n, sizeof t[0], cmpd);                          \
		snprintf(line, sizeof line, "  sample %s, %s", label, tag);      \
		report(line, t[n / 2], "ns");                                    \
	} while (0)
		CUstreamCaptureStatus cs;
		TIME_CALL("cuEventCreate", cuEventCreate(&ev[i], CU_EVENT_DEFAULT));
		TIME_CALL("cuStreamIsCapturing", cuStreamIsCapturing(st, &cs));
		TIME_CALL("cuStreamQuery", cuStreamQuery(st));
		TIME_CALL("cuEventRecord", cuEventRecord(ev[i], st));
		TIME_CALL("cuEventQuery", cuEventQuery(ev[i]));
		TIME_CALL("cuStreamWaitValue32", cuStreamWaitValue32(st, (CUdeviceptr)(uintptr_t)word, 1,
								  CU_STREAM_WAIT_VALUE_GEQ));
		TIME_CALL("cuEventRecord again", cuEventRecord(ev[i], st));
		TIME_CALL("cuEventDestroy", cuEventDestroy(ev[i]));
#undef TIME_CALL
		cuStreamSynchronize(st);
	}
	cuMemFreeHost(word);
	cuStreamDestroy(st);
}

// Steps O, o: a subscriber with every driver API callback on and an
// empty body (what counting all calls would cost), then off.
static CUpti_SubscriberHandle all_sub;
static unsigned long all_calls;
static void CUPTIAPI all_cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *x)
{
	(void)u, (void)d, (void)id;
	if (((const CUpti_CallbackData *)x)->callbackSite == CUPTI_API_ENTER)
		__atomic_fetch_add(&all_calls, 1, __ATOMIC_RELAXED);
}

static void api_mix(void)
{
	static const char *names[] = {
		"  api cudaGetDevice",      "  api cudaStreamIsCapturing", "  api cuCtxGetCurrent",
		"  api cuStreamQuery",      "  api cudaEventRecord",       "  api cudaGetLastError",
		"  api launch (own stream)",
	};
	CUstream st;
	cudaEvent_t ev;
	cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
	cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	for (int w = 0; w < 7; w++)
		report(names[w], api_round(w, st, ev), "ns");
	cudaEventDestroy(ev);
	cuStreamDestroy(st);
}

// Steps J, j: CUPTI PC sampling (continuous collection, the period of
// pc_period: 2^(5 + n) cycles) on the current context, then off (the
// samples gathered reported): what it costs launches while on and after,
// measured with P, and a compute kernel's GPU time with U.
static int pc_period = 20; /* about 2^25 cycles between an SM's samples: 17 ms at 1.98 GHz */
static CUpti_PCSamplingData pc_data;
static CUcontext pc_ctx;

static void pc_check(CUptiResult r, const char *what)
{
	if (r != CUPTI_SUCCESS) {
		const char *m = "";
		cuptiGetResultString(r, &m);
		printf("  pc sampling: %s: %s\n", what, m);
	}
}

static void pc_on(void)
{
	cudaFree(0);
	cuCtxGetCurrent(&pc_ctx);
	CUpti_PCSamplingEnableParams en = {CUpti_PCSamplingEnableParamsSize, NULL, pc_ctx};
	pc_check(cuptiPCSamplingEnable(&en), "enable");
	size_t nstall = 0;
	CUpti_PCSamplingGetNumStallReasonsParams np = {CUpti_PCSamplingGetNumStallReasonsParamsSize, NULL, pc_ctx, &nstall};
	pc_check(cuptiPCSamplingGetNumStallReasons(&np), "stall reasons");
	uint32_t *idx = (uint32_t *)calloc(nstall ? nstall : 1, sizeof *idx);
	char **names = (char **)calloc(nstall ? nstall : 1, sizeof *names);
	for (size_t i = 0; i < nstall; i++)
		names[i] = (char *)calloc(CUPTI_STALL_REASON_STRING_SIZE, 1);
	CUpti_PCSamplingGetStallReasonsParams sp = {CUpti_PCSamplingGetStallReasonsParamsSize, NULL, pc_ctx, nstall, idx, names};
	pc_check(cuptiPCSamplingGetStallReasons(&sp), "stall reason names");
	enum { NPC = 2000 };
	memset(&pc_data, 0, sizeof pc_data);
	pc_data.size = sizeof pc_data;
	pc_data.collectNumPcs = NPC;
	pc_data.pPcData = (CUpti_PCSamplingPCData *)calloc(NPC, sizeof(CUpti_PCSamplingPCData));
	for (int i = 0; i < NPC; i++) {
		pc_data.pPcData[i].size = sizeof(CUpti_PCSamplingPCData);
		pc_data.pPcData[i].stallReason = (CUpti_PCSamplingStallReason *)calloc(nstall ? nstall : 1, sizeof(CUpti_PCSamplingStallReason));
	}
	CUpti_PCSamplingConfigurationInfo ci[6];
	memset(ci, 0, sizeof ci);
	ci[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
	ci[0].attributeData.samplingPeriodData.samplingPeriod = (uint32_t)pc_period;
	ci[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
	ci[1].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
	ci[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
	ci[2].attributeData.stallReasonData.stallReasonCount = nstall;
	ci[2].attributeData.stallReasonData.pStallReasonIndex = idx;
	ci[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
	ci[3].attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
	ci[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
	ci[4].attributeData.samplingDataBufferData.samplingDataBuffer = &pc_data;
	ci[5].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
	ci[5].attributeData.enableStartStopControlData.enableStartStopControl = 1;
	CUpti_PCSamplingConfigurationInfoParams cp = {CUpti_PCSamplingConfigurationInfoParamsSize, NULL, pc_ctx, 6, ci};
	pc_check(cuptiPCSamplingSetConfigurationAttribute(&cp), "configure");
	CUpti_PCSamplingStartParams st = {CUpti_PCSamplingStartParamsSize, NULL, pc_ctx};
	pc_check(cuptiPCSamplingStart(&st), "start");
	report("  pc sampling stall reasons", (double)nstall, "");
}

static void pc_off(void)
{
	CUpti_PCSamplingStopParams sp = {CUpti_PCSamplingStopParamsSize, NULL, pc_ctx};
	pc_check(cuptiPCSamplingStop(&sp), "stop");
	CUpti_PCSamplingGetDataParams gp = {CUpti_PCSamplingGetDataParamsSize, NULL, pc_ctx, &pc_data};
	uint64_t total = 0, pcs = 0;
	for (int i = 0; i < 64; i++) {
		CUptiResult r = cuptiPCSamplingGetData(&gp);
		total += pc_data.totalSamples, pcs += pc_data.totalNumPcs;
		if (r != CUPTI_SUCCESS || pc_data.remainingNumPcs == 0)
			break;
	}
	report("  pc sampling samples", (double)total, "");
	report("  pc sampling pcs", (double)pcs, "");
	CUpti_PCSamplingDisableParams dp = {CUpti_PCSamplingDisableParamsSize, NULL, pc_ctx};
	pc_check(cuptiPCSamplingDisable(&dp), "disable");
}

// Step U: a compute kernel's GPU time (events; median of 15 of ~2 ms).
__global__ void k_fma(float *out, int iters)
{
	float a = threadIdx.x * 1e-3f, b = 1.0001f;
	for (int i = 0; i < iters; i++)
		a = a * b + 1e-7f;
	out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

static void gpu_time(void)
{
	static float *out;
	if (!out)
		cudaMalloc(&out, 132 * 8 * 256 * sizeof(float));
	cudaEvent_t a, b;
	cudaEventCreate(&a);
	cudaEventCreate(&b);
	double t[15];
	for (int r = 0; r < 15; r++) {
		cudaEventRecord(a);
		k_fma<<<132 * 8, 256>>>(out, 20000);
		cudaEventRecord(b);
		cudaEventSynchronize(b);
		float ms = 0;
		cudaEventElapsedTime(&ms, a, b);
		t[r] = ms * 1e3;
	}
	qsort(t, 15, sizeof t[0], cmpd);
	report("  compute kernel GPU time", t[7], "us");
	cudaEventDestroy(a);
	cudaEventDestroy(b);
}

static double base = 0;

// Step N: the same measurement from a thread that has never launched.
static void *measure_thread(void *out)
{
	*(double *)out = measure(7);
	return NULL;
}
static void step(char c)
{
	char line[64];
	CUpti_SubscriberHandle s;
	switch (c) {
	case 'P':
		snprintf(line, sizeof line, "  measure");
		base = measure(7);
		report(line, base, "ns");
		break;
	case 'Q': // the other kernel: is the state after a window per function?
		use_other = 1;
		report("  measure k_other", measure(7), "ns");
		use_other = 0;
		break;
	case 'N': { // a fresh thread: is the state after a window per thread?
		pthread_t th;
		double v = 0;
		if (pthread_create(&th, NULL, measure_thread, &v) == 0 && pthread_join(th, NULL) == 0)
			report("  measure on a new thread", v, "ns");
		break;
	}
	case 'A': api_mix(); break;
	case 'J': pc_on(); break;
	case 'j': pc_off(); break;
	case 'U': gpu_time(); break;
	case 'I': sample_calls(); break;
	case 'O':
		if (cuptiSubscribe(&all_sub, all_cb, NULL) == CUPTI_SUCCESS)
			cuptiEnableDomain(1, all_sub, CUPTI_CB_DOMAIN_DRIVER_API);
		else
			report("all-calls subscribe refused", 0, "");
		break;
	case 'o':
		cuptiUnsubscribe(all_sub);
		report("  driver calls heard", (double)all_calls, "");
		break;
	case 'R': cuptiActivityRegisterCallbacks(req, done); break;
	case 'B': census_on(); break;
	case 'e': census_events = 1; break;
	case 'b':
		cuptiUnsubscribe(census_sub);
		report("  census launches heard", (double)census_seen, "");
		report("  census launches timed", (double)census_timed, "");
		census_events = 0;
		break;
	case 'G': // one shared activity buffer instead of per-thread ones (before R)
		set_u8_attr(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, 0, "per-thread buffers off refused");
		break;
	case 'M': cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER); break;
	case 'S':
		if (cuptiSubscribe(&s, NULL, NULL) == CUPTI_SUCCESS)
			cuptiUnsubscribe(s);
		break;
	case 'T':
		for (int i = 0; i < 10; i++)
			if (cuptiSubscribe(&s, NULL, NULL) == CUPTI_SUCCESS)
				cuptiUnsubscribe(s);
		break;
	case 'E': enable_all(1); break;
	case 'D': enable_all(0); break;
	case 'K': cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); break;
	case 'k': cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); break;
	case 'F': cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); break;
	case 'X': edges(); break;
	case 'C': closes(); break;
	case 'L': check_each = 1; break;
	case 'Y': self_detach = 1; break;
	case 'c':
	case 'd': {
		CUcontext ctx = NULL;
		cuCtxGetCurrent(&ctx);
		CUptiResult r = c == 'c' ? cuptiActivityEnableContext(ctx, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
					 : cuptiActivityDisableContext(ctx, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
		if (r != CUPTI_SUCCESS)
			report("context enable/disable failed", (double)r, "");
		break;
	}
	case 'H':
		set_u8_attr(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, 1, "pinned host buffers refused");
		break;
	case 'Z': {
		cudaDeviceSynchronize();
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		double t0 = now_ns();
		arm_detach(0);
		int dev;
		cudaGetDevice(&dev); /* the API call that detaches */
		report("detach: arm + finalize at the next call", (now_ns() - t0) / 1e3, "us");
		report("detach: inside cuptiFinalize", finalize_ns / 1e3, "us");
		break;
	}
	case 'V':
		run_duty("10ms/1s detach between", 10, 1000, 3, base);
		run_duty("50ms/2s detach between", 50, 2000, 3, base);
		run_duty("10ms/200ms detach between", 10, 200, 3, base);
		break;
	case 'W':
		run_duty("10ms/1s forced flush", 10, 1000, 1, base);
		run_duty("10ms/1s no flush", 10, 1000, 0, base);
		run_duty("2ms/100ms no flush", 2, 100, 0, base);
		run_duty("50ms/1s no flush", 50, 1000, 0, base);
		break;
	default: break;
	}
}

int main(int argc, char **argv)
{
	const char *seq = argc > 1 ? argv[1] : "PRPMPSPEPDPXCPW";
	if (argc > 2)
		n_launch = atoi(argv[2]);
	if (getenv("PC_PERIOD"))
		pc_period = atoi(getenv("PC_PERIOD"));
	for (int i = 0; i < 200000; i++) {
		k_empty<<<1, 1>>>();
		k_other<<<1, 1>>>();
	}
	cudaDeviceSynchronize();
	printf("sequence %s\n", seq);
	for (const char *p = seq; *p; p++) {
		if (*p != 'P')
			printf("  step %c\n", *p);
		step(*p);
	}
	return 0;
}
