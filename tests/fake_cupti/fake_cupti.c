/* A stand-in for CUPTI, for testing libgpulse-inject.so on machines
 * without a GPU (tests/unit/test_inject_fake_cupti.c). It implements the
 * CUPTI calls the library makes, with CUPTI's rules as far as the library
 * depends on them: one subscriber at a time, activity records only for
 * enabled kinds, buffers from the library's request callback, returned
 * by a flush or when full, unified-memory counters NOT_READY until a
 * context exists. The test plays the application through the fake_cupti_*
 * calls: launches, copies, migrations, API callbacks, a context created,
 * another profiler taking CUPTI. Records sit in fixed 512-byte slots (the
 * library reads them only through cuptiActivityGetNextRecord). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>
#include <generated_nvtx_meta.h>

#include "fake_cupti.h"

#define API __attribute__((visibility("default")))
#define SLOT 512
#define KINDS 128
#define CALLBACKS 64
#define HELD_MAX 1024

_Static_assert(sizeof(CUpti_ActivityKernel10) <= SLOT, "kernel record fits a slot");
_Static_assert(sizeof(CUpti_ActivityMemcpy6) <= SLOT, "copy record fits a slot");
_Static_assert(sizeof(CUpti_ActivityUnifiedMemoryCounter3) <= SLOT, "uvm record fits a slot");
_Static_assert(sizeof(CUpti_ActivityMarker2) <= SLOT, "marker record fits a slot");


static struct {
	pthread_mutex_t mu;
	pthread_cond_t taken;       /* fake_cupti_take_subscriber succeeded */
	int gate;                   /* the next cuptiSubscribe waits for that */
	int drop_exits;             /* launches whose exit is not delivered */
	const char *slow_call_name; /* launches of this kernel ... */
	int64_t slow_call_ns;       /* ... spend this long after submission before their exit */
	CUpti_BuffersCallbackRequestFunc request;
	CUpti_BuffersCallbackCompleteFunc complete;
	uint8_t *buf;
	size_t size, used;
	size_t dropped;
	uint8_t on[KINDS];
	int context;
	int uvm_configured;
	int subscribed, foreign;
	CUpti_CallbackFunc cb;
	void *cb_user;
	struct { CUpti_CallbackDomain d; CUpti_CallbackId id; } cbs[CALLBACKS];
	int ncbs;
	struct fake_cupti_stats st;
	uint32_t correlation;
	int hold;                 /* keep full buffers until a flush */
	int slow_flush_ms;        /* a flush takes this long (a stuck CUPTI) */
	struct held { uint8_t *buf; size_t size, used; } held[HELD_MAX];
	int nheld;
} f = { .mu = PTHREAD_MUTEX_INITIALIZER, .taken = PTHREAD_COND_INITIALIZER };

static int token;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

API CUptiResult cuptiGetVersion(uint32_t *v)
{
	*v = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	*s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : r == CUPTI_ERROR_NOT_READY ? "CUPTI_ERROR_NOT_READY"
		: r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
		: "CUPTI_ERROR_UNKNOWN";
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetTimestamp(uint64_t *t)
{
	*t = now_ns();
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *user)
{
	pthread_mutex_lock(&f.mu);
	if (f.gate) {
		f.gate = 0;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 30;
		while (!f.foreign && pthread_cond_timedwait(&f.taken, &f.mu, &until) == 0)
			;
	}
	if (f.subscribed) {
		pthread_mutex_unlock(&f.mu);
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	f.subscribed = 1;
	f.foreign = 0;
	f.cb = cb;
	f.cb_user = user;
	f.ncbs = 0;
	f.st.subscribes++;
	*sub = (CUpti_SubscriberHandle)&token;
	pthread_mutex_unlock(&f.mu);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
	(void)sub;
	pthread_mutex_lock(&f.mu);
	f.subscribed = 0;
	f.cb = NULL;
	f.ncbs = 0;
	pthread_mutex_unlock(&f.mu);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
				    CUpti_CallbackDomain d, CUpti_CallbackId id)
{
	(void)sub;
	pthread_mutex_lock(&f.mu);
	if (enable && f.ncbs < CALLBACKS) {
		f.cbs[f.ncbs].d = d;
		f.cbs[f.ncbs].id = id;
		f.ncbs++;
	}
	pthread_mutex_unlock(&f.mu);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
					       CUpti_BuffersCallbackCompleteFunc done)
{
	pthread_mutex_lock(&f.mu);
	f.request = req;
	f.complete = done;
	f.st.registrations++;
	pthread_mutex_unlock(&f.mu);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityConfigureUnifiedMemoryCounter(CUpti_ActivityUnifiedMemoryCounterConfig *c,
							   uint32_t n)
{
	(void)c;
	(void)n;
	pthread_mutex_lock(&f.mu);
	CUptiResult r = f.context ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_READY;
	f.uvm_configured |= f.context;
	pthread_mutex_unlock(&f.mu);
	return r;
}

/* A kind on or off; the kernel kind's switches are counted. */
static CUptiResult set_kind(CUpti_ActivityKind k, int on)
{
	if ((unsigned)k >= KINDS)
		return CUPTI_ERROR_INVALID_KIND;
	pthread_mutex_lock(&f.mu);
	CUptiResult r = CUPTI_SUCCESS;
	if (on && k == CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER && !f.uvm_configured)
		r = CUPTI_ERROR_NOT_READY;
	else
		f.on[k] = (uint8_t)on;
	if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		*(on ? &f.st.enables : &f.st.disables) += 1;
	f.st.kind_changes++;
	pthread_mutex_unlock(&f.mu);
	return r;
}

API CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	return set_kind(k, 1);
}

API CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	return set_kind(k, 0);
}

/* CUPTI reads the per-thread buffer attribute only before the buffer
 * callbacks are registered and before any kind is enabled; setting it
 * later is undefined there, and counted here. */
API CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *value)
{
	if (a != CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER)
		return CUPTI_SUCCESS;
	if (!size || *size != sizeof(uint8_t) || !value)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&f.mu);
	if (f.st.registrations || f.st.kind_changes)
		f.st.late_attributes++;
	f.st.shared_buffer = *(const uint8_t *)value == 0;
	pthread_mutex_unlock(&f.mu);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec)
{
	uint8_t *next = *rec ? (uint8_t *)*rec + SLOT : buffer;
	if (next + SLOT > buffer + valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)next;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t stream, size_t *dropped)
{
	(void)c;
	(void)stream;
	pthread_mutex_lock(&f.mu);
	*dropped = f.dropped;
	f.dropped = 0;
	pthread_mutex_unlock(&f.mu);
	return CUPTI_SUCCESS;
}

/* Hand the current buffer back (outside the lock: the library's callback
 * takes its own). */
static void deliver(uint8_t *b, size_t size, size_t used, CUpti_BuffersCallbackCompleteFunc done)
{
	if (b && done)
		done(NULL, 0, b, size, used);
}

API CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	(void)flag;
	pthread_mutex_lock(&f.mu);
	int slow = f.slow_flush_ms;
	pthread_mutex_unlock(&f.mu);
	if (slow > 0) {
		struct timespec ts = { slow / 1000, (long)(slow % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&f.mu);
	if (f.hold) {
		/* Still holding: a flush returns nothing (the library's
		 * once-a-second flush must not give back what a slow run of
		 * the test has not yet filled: under load, 100 000 launches
		 * outlasted a second, and nothing was dropped). */
		pthread_mutex_unlock(&f.mu);
		return CUPTI_SUCCESS;
	}
	struct held out[HELD_MAX + 1];
	int n = f.nheld;
	memcpy(out, f.held, (size_t)n * sizeof out[0]);
	f.nheld = 0;
	if (f.buf)
		out[n++] = (struct held){ f.buf, f.size, f.used };
	CUpti_BuffersCallbackCompleteFunc done = f.complete;
	f.buf = NULL;
	f.used = 0;
	pthread_mutex_unlock(&f.mu);
	for (int i = 0; i < n; i++)
		deliver(out[i].buf, out[i].size, out[i].used, done);
	return CUPTI_SUCCESS;
}

/* Append one record of `kind` (if that kind is on); returns 1 if kept. */
static int append(const void *rec, size_t len, CUpti_ActivityKind kind)
{
	pthread_mutex_lock(&f.mu);
	if (!f.on[kind]) {
		pthread_mutex_unlock(&f.mu);
		return 0;
	}
	uint8_t *full = NULL;
	size_t full_size = 0, full_used = 0;
	if (f.buf && f.used + SLOT > f.size) {
		if (f.hold && f.nheld < HELD_MAX) {
			/* As CUPTI does when its thread is behind: the buffer
			 * waits, and the next one is asked for. */
			f.held[f.nheld++] = (struct held){ f.buf, f.size, f.used };
		} else {
			full = f.buf;
			full_size = f.size;
			full_used = f.used;
		}
		f.buf = NULL;
	}
	if (!f.buf && f.request) {
		uint8_t *b = NULL;
		size_t size = 0, max = 0;
		f.request(&b, &size, &max);
		if (b && size >= SLOT) {
			f.buf = b;
			f.size = size;
			f.used = 0;
		}
	}
	int kept = 0;
	if (f.buf) {
		memset(f.buf + f.used, 0, SLOT);
		memcpy(f.buf + f.used, rec, len);
		f.used += SLOT;
		kept = 1;
	} else {
		f.dropped++;
	}
	CUpti_BuffersCallbackCompleteFunc done = f.complete;
	pthread_mutex_unlock(&f.mu);
	deliver(full, full_size, full_used, done);
	return kept;
}

/* ---- the test's side ---- */

API void fake_cupti_context_created(void)
{
	pthread_mutex_lock(&f.mu);
	f.context = 1;
	CUpti_CallbackFunc cb = NULL;
	for (int i = 0; i < f.ncbs; i++)
		if (f.subscribed && f.cbs[i].d == CUPTI_CB_DOMAIN_RESOURCE &&
		    f.cbs[i].id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
			cb = f.cb;
	void *user = f.cb_user;
	pthread_mutex_unlock(&f.mu);
	CUpti_ResourceData rd;
	memset(&rd, 0, sizeof rd);
	if (cb)
		cb(user, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &rd);
}

/* An API call the subscriber may have asked to hear about (site:
 * CUPTI_API_ENTER or CUPTI_API_EXIT). */
API void fake_cupti_api(int domain, int cbid, int site)
{
	pthread_mutex_lock(&f.mu);
	CUpti_CallbackFunc cb = NULL;
	for (int i = 0; i < f.ncbs; i++)
		if (f.subscribed && f.cbs[i].d == (CUpti_CallbackDomain)domain &&
		    f.cbs[i].id == (CUpti_CallbackId)cbid)
			cb = f.cb;
	void *user = f.cb_user;
	pthread_mutex_unlock(&f.mu);
	CUpti_CallbackData d;
	memset(&d, 0, sizeof d);
	d.callbackSite = (CUpti_ApiCallbackSite)site;
	d.functionName = "fake";
	if (cb)
		cb(user, (CUpti_CallbackDomain)domain, (CUpti_CallbackId)cbid, &d);
}

static _Thread_local int in_api_exit; /* inside a driver call's exit callback */

/* The subscriber's callback if it asked for (domain, cbid); under f.mu. */
static CUpti_CallbackFunc wanted(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	for (int i = 0; i < f.ncbs; i++)
		if (f.subscribed && f.cbs[i].d == domain && f.cbs[i].id == cbid)
			return f.cb;
	return NULL;
}

/* A driver API call as CUPTI reports it to a subscriber that asked: the
 * enter and exit callbacks around it, with its parameters and the
 * per-call correlation data CUPTI keeps between the two. Counted in
 * driver_callbacks when heard. */
static void driver_call(CUpti_CallbackId cbid, const char *symbol, const void *params)
{
	pthread_mutex_lock(&f.mu);
	CUpti_CallbackFunc cb = wanted(CUPTI_CB_DOMAIN_DRIVER_API, cbid);
	void *user = f.cb_user;
	if (cb)
		f.st.driver_callbacks++;
	pthread_mutex_unlock(&f.mu);
	if (!cb)
		return;
	uint64_t corr = 0;
	CUpti_CallbackData d;
	memset(&d, 0, sizeof d);
	d.functionName = "fake";
	d.symbolName = symbol;
	d.functionParams = params;
	d.context = (CUcontext)&token;
	d.contextUid = 1;
	d.correlationData = &corr;
	d.correlationId = __atomic_add_fetch(&f.correlation, 1, __ATOMIC_RELAXED);
	d.callbackSite = CUPTI_API_ENTER;
	cb(user, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
	/* The launch itself, for the driver stand-in (tests/fake_cupti/
	 * fake_cuda.c) where a test loaded it. */
	static void (*launched)(void);
	static int looked;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		*(void **)(&launched) = dlsym(RTLD_DEFAULT, "fake_cuda_launched");
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	if (launched && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
		launched();
	pthread_mutex_lock(&f.mu);
	int64_t slow = f.slow_call_name && symbol && strcmp(symbol, f.slow_call_name) == 0 ? f.slow_call_ns : 0;
	pthread_mutex_unlock(&f.mu);
	for (uint64_t t0 = now_ns(); (int64_t)(now_ns() - t0) < slow;)
		; /* the rest of a slow launch call, the kernel already submitted */
	if (__atomic_load_n(&f.drop_exits, __ATOMIC_RELAXED) > 0 &&
	    __atomic_sub_fetch(&f.drop_exits, 1, __ATOMIC_RELAXED) >= 0)
		return; /* an exit that is never heard */
	d.callbackSite = CUPTI_API_EXIT;
	in_api_exit = 1;
	cb(user, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
	in_api_exit = 0;
}

/* Launches of kernel `name` (NULL: none) spend ns after the kernel's
 * submission before their exit callback: a launch call that outlasts the
 * work queued before it (a cuDNN kernel's on the H100). */
API void fake_cupti_set_launch_call_ns(const char *name, int64_t ns)
{
	pthread_mutex_lock(&f.mu);
	f.slow_call_name = name;
	f.slow_call_ns = ns;
	pthread_mutex_unlock(&f.mu);
}

/* The next n launches' exit callbacks are not delivered. */
API void fake_cupti_drop_exits(int n)
{
	__atomic_store_n(&f.drop_exits, n, __ATOMIC_RELAXED);
}

/* CUPTI wants cuptiFinalize called at an API exit (from the callback):
 * elsewhere the stand-in refuses it (counted), so a test sees where the
 * library calls it. Afterwards CUPTI is as new: no subscriber, callback,
 * kind or buffer callbacks. */
API CUptiResult cuptiFinalize(void)
{
	pthread_mutex_lock(&f.mu);
	if (!in_api_exit) {
		f.st.finalize_refused++;
		pthread_mutex_unlock(&f.mu);
		return CUPTI_ERROR_INVALID_OPERATION;
	}
	f.subscribed = 0;
	f.foreign = 0;
	f.cb = NULL;
	f.ncbs = 0;
	memset(f.on, 0, sizeof f.on);
	f.request = NULL;
	f.complete = NULL;
	f.uvm_configured = 0;
	f.st.finalizes++;
	pthread_mutex_unlock(&f.mu);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetDeviceId(CUcontext ctx, uint32_t *dev)
{
	(void)ctx;
	*dev = 0;
	return CUPTI_SUCCESS;
}

/* n launches of a kernel `name` (a pointer that stays valid, as CUPTI's
 * names do) lasting dur_ns each, on stream 7 of device 0: the driver's
 * launch callbacks if asked for, and a kernel record if the kind is on. */
API void fake_cupti_launch(const char *name, uint64_t dur_ns, int n)
{
	cuLaunchKernel_params p;
	memset(&p, 0, sizeof p);
	p.gridDimX = 128, p.gridDimY = 1, p.gridDimZ = 1;
	p.blockDimX = 256, p.blockDimY = 1, p.blockDimZ = 1;
	p.hStream = (CUstream)(uintptr_t)7;
	for (int i = 0; i < n; i++) {
		driver_call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, name, &p);
		CUpti_ActivityKernel10 k;
		memset(&k, 0, sizeof k);
		k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k.name = name;
		k.deviceId = 0;
		k.contextId = 1;
		k.streamId = 7;
		k.start = now_ns();
		k.end = k.start + dur_ns;
		k.gridX = 128, k.gridY = 1, k.gridZ = 1;
		k.blockX = 256, k.blockY = 1, k.blockZ = 1;
		k.registersPerThread = 32;
		k.correlationId = __atomic_add_fetch(&f.correlation, 1, __ATOMIC_RELAXED);
		int kept = append(&k, sizeof k, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
		pthread_mutex_lock(&f.mu);
		f.st.launches++;
		f.st.kernel_records += (uint64_t)kept;
		pthread_mutex_unlock(&f.mu);
	}
}

/* The application's cudaProfilerStart (start = 1: the callback at its
 * exit) or cudaProfilerStop (start = 0: at its entry). */
API void fake_cupti_profiler(int start)
{
	if (start)
		fake_cupti_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000,
			       CUPTI_API_EXIT);
	else
		fake_cupti_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000,
			       CUPTI_API_ENTER);
}

/* A copy of `bytes`, host to device (to_device = 1) or back, from pinned
 * or pageable host memory. */
API void fake_cupti_memcpy(int to_device, int pinned, uint64_t bytes, uint64_t dur_ns)
{
	int copy_kind = to_device ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD : CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	CUpti_ActivityMemcpy6 m;
	memset(&m, 0, sizeof m);
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = (uint8_t)copy_kind;
	uint8_t host = pinned ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	m.srcKind = copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? host : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.dstKind = copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? host : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.bytes = bytes;
	m.start = now_ns();
	m.end = m.start + dur_ns;
	m.deviceId = 0;
	m.contextId = 1;
	m.streamId = 7;
	cuMemcpyHtoDAsync_v2_params p;
	memset(&p, 0, sizeof p);
	p.ByteCount = bytes;
	driver_call(to_device ? CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2
			      : CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, NULL, &p);
	append(&m, sizeof m, CUPTI_ACTIVITY_KIND_MEMCPY);
}

/* One unified-memory migration of `bytes`, to the device (to_device =
 * 1) or back. */
API void fake_cupti_uvm(int to_device, uint64_t value)
{
	CUpti_ActivityUnifiedMemoryCounter3 u;
	memset(&u, 0, sizeof u);
	u.kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER;
	u.counterKind = to_device ? CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD
				  : CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH;
	u.value = value;
	u.start = now_ns();
	u.end = u.start + 1000;
	u.srcId = 0;
	u.dstId = 0;
	append(&u, sizeof u, CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
}

/* Another profiler (torch.profiler, Nsight) takes CUPTI's one
 * subscriber; fails (returns 0) if someone holds it. */
API int fake_cupti_take_subscriber(void)
{
	pthread_mutex_lock(&f.mu);
	int ok = !f.subscribed;
	if (ok) {
		f.subscribed = 1;
		f.foreign = 1;
		f.cb = NULL;
		f.ncbs = 0;
		pthread_cond_broadcast(&f.taken);
	}
	pthread_mutex_unlock(&f.mu);
	return ok;
}

API void fake_cupti_gate_next_subscribe(void)
{
	pthread_mutex_lock(&f.mu);
	f.gate = 1;
	pthread_mutex_unlock(&f.mu);
}

API void fake_cupti_stats(struct fake_cupti_stats *s)
{
	pthread_mutex_lock(&f.mu);
	*s = f.st;
	s->subscribed = f.subscribed;
	s->foreign = f.foreign;
	s->kernel_kind_on = f.on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL];
	s->uvm_on = f.on[CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER];
	pthread_mutex_unlock(&f.mu);
}

/* NVTX through CUPTI's callbacks (what NVTX_INJECTION64_PATH gives):
 * params as CUPTI passes them, and for a start the new range's id as the
 * return value (ret_id 0: none given). */
static void nvtx_cb(CUpti_CallbackId cbid, const void *params, const void *ret)
{
	pthread_mutex_lock(&f.mu);
	CUpti_CallbackFunc cb = NULL;
	for (int i = 0; i < f.ncbs; i++)
		if (f.subscribed && f.cbs[i].d == CUPTI_CB_DOMAIN_NVTX && f.cbs[i].id == cbid)
			cb = f.cb;
	void *user = f.cb_user;
	pthread_mutex_unlock(&f.mu);
	CUpti_NvtxData d;
	memset(&d, 0, sizeof d);
	d.functionName = "nvtx";
	d.functionParams = params;
	d.functionReturnValue = ret;
	if (cb)
		cb(user, CUPTI_CB_DOMAIN_NVTX, cbid, &d);
}

API void fake_cupti_nvtx_push(const char *name)
{
	nvtxRangePushA_params p = { .message = name };
	nvtx_cb(CUPTI_CBID_NVTX_nvtxRangePushA, &p, NULL);
}

API void fake_cupti_nvtx_pop(void)
{
	nvtx_cb(CUPTI_CBID_NVTX_nvtxRangePop, NULL, NULL);
}

API void fake_cupti_nvtx_start(const char *name, uint64_t ret_id)
{
	nvtxRangeStartA_params p = { .message = name };
	nvtxRangeId_t id = ret_id;
	nvtx_cb(CUPTI_CBID_NVTX_nvtxRangeStartA, &p, ret_id ? &id : NULL);
}

API void fake_cupti_nvtx_end(uint64_t id)
{
	nvtxRangeEnd_params p = { .id = id };
	nvtx_cb(CUPTI_CBID_NVTX_nvtxRangeEnd, &p, NULL);
}

/* Keep full buffers (on = 1), through flushes, until the first flush
 * after the hold ends (on = 0), so that the library's cap on outstanding
 * buffers is reached and records are dropped. */
API void fake_cupti_hold_buffers(int on)
{
	pthread_mutex_lock(&f.mu);
	f.hold = on;
	pthread_mutex_unlock(&f.mu);
}

/* An NVTX range edge as a MARKER activity record (what continuous and
 * full modes see): start = 1 opens range `id` named `name`, start = 0
 * closes it. */
API void fake_cupti_marker(int start, uint32_t id, const char *name)
{
	CUpti_ActivityMarker2 mk;
	memset(&mk, 0, sizeof mk);
	mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
	mk.flags = start ? CUPTI_ACTIVITY_FLAG_MARKER_START : CUPTI_ACTIVITY_FLAG_MARKER_END;
	mk.timestamp = now_ns();
	mk.id = id;
	mk.name = start ? name : NULL;
	append(&mk, sizeof mk, CUPTI_ACTIVITY_KIND_MARKER);
}

/* From now on every flush takes ms milliseconds, as when CUPTI's thread
 * is stuck behind the driver. */
API void fake_cupti_slow_flush(int ms)
{
	pthread_mutex_lock(&f.mu);
	f.slow_flush_ms = ms;
	pthread_mutex_unlock(&f.mu);
}
