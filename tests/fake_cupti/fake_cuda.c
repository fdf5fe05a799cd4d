/* A stand-in for the few CUDA driver entry points libgpulse-inject.so's
 * census uses to time its samples (events, stream queries, stream waits,
 * pinned memory), built as libcuda.so.1 so that the library's
 * dlopen("libcuda.so.1", RTLD_NOLOAD) finds it once a test has loaded it.
 * Together with the CUPTI stand-in it runs the timing path without a GPU.
 *
 * The model of the GPU is one stream run in order from a queue: an event
 * takes FAKE_CUDA_STEP_NS, a kernel (the CUPTI stand-in says when one is
 * launched: fake_cuda_launched) a step for its launch plus its own time
 * (set by the test), and a cuStreamWaitValue32 stops the queue until its
 * word reaches the value. Nothing starts before it is enqueued. So a
 * held sample (wait, floor, start, kernel, end) reads 2 steps + the kernel
 * and its floor pair 1 step; an unheld one on an idle stream also holds
 * the host's time between its start event and the launch. Every wait is
 * remembered, so a test can ask whether each was let go. A test may give
 * the device a compute capability (cuDeviceGetAttribute answers only
 * then) and a launch step other than an event's (fake_cuda_set_device).
 * The library's calibration (src/inject/calib_cuda.c) runs on a stream of
 * its own (cuStreamCreate: a second queue, run beside the first as the
 * GPU runs two streams) and launches its kernel through cuLaunchKernel:
 * the kernel takes the launch step (after an event; after another kernel
 * FAKE_CUDA_KK_NS), a head of FAKE_CUDA_HEAD_NS, its spin and a tail of
 * FAKE_CUDA_TAIL_NS (what an exact trace counts as the kernel's besides
 * the spin), and writes the "%globaltimer" it read at the start and end
 * of the spin (this file's clock) and a timer step of FAKE_CUDA_TIMER_NS.
 * A held sample there reads launch step + head + spin + tail + 1 step,
 * and a pair back to back shows tail + KK + head between the spins; the
 * offset is launch step + 1 step, as for the application's kernels. With
 * KK = head + tail (the case where the library's middle of the bracket is
 * exact, src/inject/calib.h) the calibration finds it. Calls that wait for
 * the whole device or the legacy stream on a real driver (cuMemFree,
 * cuMemFreeHost, cuModuleUnload, cuMemcpyDtoH) are counted: the library
 * must make none, since the application's launch held on its word may be
 * what such a call waits for.
 *
 * Types are spelled out rather than taken from cuda.h, whose macros
 * rename the entry points this file must export under their real names. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

/* What this file exports: the test's calls, then the driver's. */
API void fake_cuda_launched(void);
API void fake_cuda_set_kernel_ns(int64_t ns);
API void fake_cuda_set_device(int cc_major, int64_t launch_step_ns);
API int cuDeviceGet(int *dev, int ordinal);
API int cuDeviceGetAttribute(int *value, int attrib, int dev);
API int cuDeviceGetUuid_v2(unsigned char uuid[16], int dev);
API int cuDriverGetVersion(int *v);
API void fake_cuda_waits(int *total, int *holding, int64_t *longest_ns);
API int fake_cuda_events_live(void);
API int cuEventCreate(void **ev, unsigned flags);
API int cuEventDestroy_v2(void *ev);
API int cuEventRecord(void *ev, void *stream);
API int cuEventRecord_ptsz(void *ev, void *stream);
API int cuEventQuery(void *ev);
API int cuEventElapsedTime_v2(float *ms, void *a, void *b);
API int cuStreamIsCapturing(void *stream, int *status);
API int cuStreamIsCapturing_ptsz(void *stream, int *status);
API int cuStreamQuery(void *stream);
API int cuStreamQuery_ptsz(void *stream);
API int cuStreamWaitValue32_v2(void *stream, uint64_t addr, uint32_t value, unsigned flags);
API int cuStreamWaitValue32_v2_ptsz(void *stream, uint64_t addr, uint32_t value, unsigned flags);
API int cuMemHostAlloc(void **p, size_t n, unsigned flags);
API int cuMemFreeHost(void *p);
API int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active);
API int cuDevicePrimaryCtxRetain(void **ctx, int dev);
API int cuDevicePrimaryCtxRelease_v2(int dev);
API int cuCtxPushCurrent_v2(void *ctx);
API int cuCtxPopCurrent_v2(void **ctx);
API int cuThreadExchangeStreamCaptureMode(int *mode);
API int cuModuleLoadData(void **mod, const void *image);
API int cuModuleGetFunction(void **fn, void *mod, const char *name);
API int cuModuleUnload(void *mod);
API int cuMemAlloc_v2(uint64_t *p, size_t n);
API int cuMemFree_v2(uint64_t p);
API int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n);
API int cuStreamCreate(void **stream, unsigned flags);
API int cuStreamDestroy_v2(void *stream);
API int cuStreamSynchronize(void *stream);
API int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
		       unsigned bz, unsigned shared, void *stream, void **params, void **extra);
API void fake_cuda_calibration(int *kernels, int *left, int *synchronizing);
API void fake_cuda_set_calibration_stall(int on);

#define FAKE_CUDA_STEP_NS 1000
#define FAKE_CUDA_TIMER_NS 32
#define FAKE_CUDA_HEAD_NS 150
#define FAKE_CUDA_TAIL_NS 250
#define FAKE_CUDA_KK_NS (FAKE_CUDA_HEAD_NS + FAKE_CUDA_TAIL_NS)
#define FAKE_CUDA_WAITS   4096

enum { OK = 0, NOT_READY = 600, INVALID = 1 };


struct event {
	int64_t t;          /* when the GPU met it */
	int done;
};

enum { ITEM_EVENT, ITEM_KERNEL, ITEM_WAIT };
#define QUEUE 8192
enum { STREAMS = 2 }; /* 0: the application's (any stream it names); 1: one cuStreamCreate made */

static struct {
	pthread_mutex_t mu;
	int64_t kernel_ns;
	int cc_major;                   /* 0: cuDeviceGetAttribute fails */
	int64_t launch_step_ns;         /* 0: an event's */
	struct queue {
		int64_t gpu;            /* the stream's clock: when it is free */
		struct item {
			int kind;
			int64_t at;     /* enqueued */
			struct event *ev;
			int wait;
			int64_t spin;   /* a calibration kernel's: its spin; -1 the application's */
			uint64_t *out;  /* ... where it writes its stamps */
		} q[QUEUE];
		unsigned head, tail; /* q[head % QUEUE] .. q[(tail - 1) % QUEUE] */
		int after_kernel;    /* the last item run was a kernel */
	} s[STREAMS];
	uint64_t dropped;               /* kernels not queued: the queue was full */
	struct {
		volatile uint32_t *addr;
		uint32_t value;
		int64_t at, let_go;     /* asked; first seen let go (0: not yet) */
	} waits[FAKE_CUDA_WAITS];
	int nwaits;
	int events_live;                /* created and not destroyed */
	int created;                    /* streams made and not released */
	int synchronizing;              /* calls that wait for the device or the legacy stream */
	int calibrations;               /* calibration kernels run */
	int calib_stall;                /* the second stream's kernels never run (a GPU full of other work) */
	void *allocs[64];               /* device and host memory given out, as a driver holds it */
} fc = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void *remember(void *m);
static void synchronizing(void);
static void forget(void *m);

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int released(int w)
{
	if (!fc.waits[w].addr)
		return 1; /* its word was freed (after it was let go) */
	return (int32_t)(__atomic_load_n(fc.waits[w].addr, __ATOMIC_ACQUIRE) - fc.waits[w].value) >= 0;
}

static int stream_index(void *stream)
{
	return stream == (void *)&fc.s[1] ? 1 : 0;
}

/* Under mu: run the queues as far as they go now. */
static void run(void)
{
	int64_t now = now_ns();
	for (int k = 0; k < STREAMS; k++) {
		struct queue *s = &fc.s[k];
		for (; s->head != s->tail; s->head++) {
			struct item *it = &s->q[s->head % QUEUE];
			if (it->kind == ITEM_WAIT && !released(it->wait))
				break;
			if (it->kind == ITEM_KERNEL && it->spin >= 0 && fc.calib_stall)
				break;
			int64_t start = s->gpu > it->at ? s->gpu : it->at;
			int64_t step = fc.launch_step_ns ? fc.launch_step_ns : FAKE_CUDA_STEP_NS;
			if (it->kind == ITEM_WAIT) {
				s->gpu = start > now ? start : now; /* seen let go now */
				fc.waits[it->wait].let_go = now;
			} else if (it->kind == ITEM_EVENT) {
				s->gpu = start + FAKE_CUDA_STEP_NS;
				it->ev->t = s->gpu;
				it->ev->done = 1;
			} else if (it->spin >= 0) {
				int64_t t0 = start + (s->after_kernel ? FAKE_CUDA_KK_NS : step) + FAKE_CUDA_HEAD_NS;
				it->out[0] = (uint64_t)t0;
				it->out[1] = (uint64_t)(t0 + it->spin);
				it->out[2] = FAKE_CUDA_TIMER_NS;
				s->gpu = t0 + it->spin + FAKE_CUDA_TAIL_NS;
				fc.calibrations++;
			} else {
				s->gpu = start + step + fc.kernel_ns;
			}
			s->after_kernel = it->kind == ITEM_KERNEL;
		}
	}
}

/* Under mu. */
static int enqueue(int stream, int kind, struct event *ev, int wait, int64_t spin, uint64_t *out)
{
	run();
	struct queue *s = &fc.s[stream];
	if (s->tail - s->head >= QUEUE)
		return 0;
	s->q[s->tail % QUEUE] =
		(struct item){ .kind = kind, .at = now_ns(), .ev = ev, .wait = wait, .spin = spin, .out = out };
	s->tail++;
	run();
	return 1;
}

/* A kernel launched on the stream (called by the CUPTI stand-in between
 * a launch's enter and exit callbacks). */
API void fake_cuda_launched(void)
{
	pthread_mutex_lock(&fc.mu);
	if (!enqueue(0, ITEM_KERNEL, NULL, 0, -1, NULL))
		fc.dropped++;
	pthread_mutex_unlock(&fc.mu);
}

API void fake_cuda_set_kernel_ns(int64_t ns)
{
	pthread_mutex_lock(&fc.mu);
	fc.kernel_ns = ns;
	pthread_mutex_unlock(&fc.mu);
}

API void fake_cuda_set_device(int cc_major, int64_t launch_step_ns)
{
	pthread_mutex_lock(&fc.mu);
	fc.cc_major = cc_major;
	fc.launch_step_ns = launch_step_ns;
	pthread_mutex_unlock(&fc.mu);
}

API int cuDeviceGet(int *dev, int ordinal)
{
	if (!dev || ordinal != 0)
		return INVALID;
	*dev = 0;
	return OK;
}

/* The device's UUID: the bytes 0x00..0x0f (the kept calibration's key). */
API int cuDeviceGetUuid_v2(unsigned char uuid[16], int dev)
{
	if (!uuid || dev != 0)
		return INVALID;
	for (int i = 0; i < 16; i++)
		uuid[i] = (unsigned char)i;
	return OK;
}

API int cuDriverGetVersion(int *v)
{
	if (!v)
		return INVALID;
	*v = 13000;
	return OK;
}

enum { ATTR_CC_MAJOR = 75 }; /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */

API int cuDeviceGetAttribute(int *value, int attrib, int dev)
{
	pthread_mutex_lock(&fc.mu);
	int major = fc.cc_major;
	pthread_mutex_unlock(&fc.mu);
	if (!value || dev != 0 || attrib != ATTR_CC_MAJOR || !major)
		return INVALID;
	*value = major;
	return OK;
}

/* How many waits were asked for, how many of them are not let go, and
 * the longest a stream was held (ns, as the queue saw it: the queue runs
 * at every call into this file). */
API void fake_cuda_waits(int *total, int *holding, int64_t *longest_ns)
{
	pthread_mutex_lock(&fc.mu);
	run();
	int h = 0;
	int64_t longest = 0;
	for (int i = 0; i < fc.nwaits; i++) {
		h += !released(i);
		int64_t held = (fc.waits[i].let_go ? fc.waits[i].let_go : now_ns()) - fc.waits[i].at;
		if (held > longest)
			longest = held;
	}
	*total = fc.nwaits;
	*holding = h;
	*longest_ns = longest;
	pthread_mutex_unlock(&fc.mu);
}

/* How many events exist (created, not yet destroyed): the library
 * destroys a timed launch's events once it has read them, so none left
 * means every sample taken so far has been read. */
API int fake_cuda_events_live(void)
{
	pthread_mutex_lock(&fc.mu);
	int n = fc.events_live;
	pthread_mutex_unlock(&fc.mu);
	return n;
}

API int cuEventCreate(void **ev, unsigned flags)
{
	(void)flags;
	*ev = calloc(1, sizeof(struct event));
	if (!*ev)
		return INVALID;
	pthread_mutex_lock(&fc.mu);
	fc.events_live++;
	pthread_mutex_unlock(&fc.mu);
	return OK;
}

API int cuEventDestroy_v2(void *ev)
{
	if (ev) {
		pthread_mutex_lock(&fc.mu);
		fc.events_live--;
		pthread_mutex_unlock(&fc.mu);
	}
	free(ev);
	return OK;
}

static int record(void *ev, void *stream)
{
	struct event *e = ev;
	pthread_mutex_lock(&fc.mu);
	e->done = 0;
	int ok = enqueue(stream_index(stream), ITEM_EVENT, e, 0, -1, NULL);
	pthread_mutex_unlock(&fc.mu);
	return ok ? OK : INVALID;
}

API int cuEventRecord(void *ev, void *stream)
{
	return record(ev, stream);
}

API int cuEventRecord_ptsz(void *ev, void *stream)
{
	return record(ev, stream);
}

API int cuEventQuery(void *ev)
{
	pthread_mutex_lock(&fc.mu);
	run();
	const struct event *e = ev;
	int r = e->done && e->t <= now_ns() ? OK : NOT_READY;
	pthread_mutex_unlock(&fc.mu);
	return r;
}

API int cuEventElapsedTime_v2(float *ms, void *a, void *b)
{
	pthread_mutex_lock(&fc.mu);
	run();
	int ok = ((struct event *)a)->done && ((struct event *)b)->done;
	if (ok)
		*ms = (float)((double)(((struct event *)b)->t - ((struct event *)a)->t) / 1e6);
	pthread_mutex_unlock(&fc.mu);
	return ok ? OK : NOT_READY;
}

static int is_capturing(void *stream, int *status)
{
	(void)stream;
	*status = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
	return OK;
}

API int cuStreamIsCapturing(void *stream, int *status)
{
	return is_capturing(stream, status);
}

API int cuStreamIsCapturing_ptsz(void *stream, int *status)
{
	return is_capturing(stream, status);
}

static int query(void *stream)
{
	pthread_mutex_lock(&fc.mu);
	run();
	const struct queue *s = &fc.s[stream_index(stream)];
	int busy = s->head != s->tail || s->gpu > now_ns();
	pthread_mutex_unlock(&fc.mu);
	return busy ? NOT_READY : OK;
}

API int cuStreamQuery(void *stream)
{
	return query(stream);
}

API int cuStreamQuery_ptsz(void *stream)
{
	return query(stream);
}

static int wait_value(void *stream, uint64_t addr, uint32_t value, unsigned flags)
{
	if (flags != 0) /* only CU_STREAM_WAIT_VALUE_GEQ is modelled */
		return INVALID;
	pthread_mutex_lock(&fc.mu);
	int r = INVALID;
	if (fc.nwaits < FAKE_CUDA_WAITS) {
		int w = fc.nwaits;
		fc.waits[w].addr = (volatile uint32_t *)(uintptr_t)addr;
		fc.waits[w].value = value;
		fc.waits[w].at = now_ns();
		fc.waits[w].let_go = 0;
		if (enqueue(stream_index(stream), ITEM_WAIT, NULL, w, -1, NULL)) {
			fc.nwaits++;
			r = OK;
		}
	}
	pthread_mutex_unlock(&fc.mu);
	return r;
}

API int cuStreamWaitValue32_v2(void *stream, uint64_t addr, uint32_t value, unsigned flags)
{
	return wait_value(stream, addr, value, flags);
}

API int cuStreamWaitValue32_v2_ptsz(void *stream, uint64_t addr, uint32_t value, unsigned flags)
{
	return wait_value(stream, addr, value, flags);
}

API int cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
	(void)flags;
	*p = remember(calloc(1, n));
	return *p ? OK : INVALID;
}

API int cuMemFreeHost(void *p)
{
	synchronizing();
	forget(p);
	return OK;
}

/* The primary context: active once the test has told a compute
 * capability (the timed cases), as an application's would be. */
API int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
	pthread_mutex_lock(&fc.mu);
	*active = dev == 0 && fc.cc_major != 0;
	pthread_mutex_unlock(&fc.mu);
	*flags = 0;
	return dev == 0 ? OK : INVALID;
}

static int primary_ctx;

API int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	*ctx = &primary_ctx;
	return dev == 0 ? OK : INVALID;
}

API int cuDevicePrimaryCtxRelease_v2(int dev)
{
	return dev == 0 ? OK : INVALID;
}

API int cuCtxPushCurrent_v2(void *ctx)
{
	return ctx == &primary_ctx ? OK : INVALID;
}

API int cuCtxPopCurrent_v2(void **ctx)
{
	if (ctx)
		*ctx = &primary_ctx;
	return OK;
}

API int cuThreadExchangeStreamCaptureMode(int *mode)
{
	*mode = 0;
	return OK;
}

static void made(int d)
{
	pthread_mutex_lock(&fc.mu);
	fc.created += d;
	pthread_mutex_unlock(&fc.mu);
}

/* The module: any PTX naming gpulse_calibrate. */
static int module_tag;

API int cuModuleLoadData(void **mod, const void *image)
{
	if (!image || !strstr(image, ".entry gpulse_calibrate("))
		return INVALID;
	*mod = &module_tag;
	return OK;
}

API int cuModuleGetFunction(void **fn, void *mod, const char *name)
{
	if (mod != &module_tag || strcmp(name, "gpulse_calibrate") != 0)
		return INVALID;
	*fn = &module_tag;
	return OK;
}

API int cuModuleUnload(void *mod)
{
	if (mod != &module_tag)
		return INVALID;
	synchronizing();
	return OK;
}

/* Memory given out stays reachable from here until freed, as a driver
 * holds it (what a calibration abandons under a stalled kernel is not a
 * leak of the process's heap). */
static void *remember(void *m)
{
	pthread_mutex_lock(&fc.mu);
	for (size_t i = 0; m && i < sizeof fc.allocs / sizeof fc.allocs[0]; i++)
		if (!fc.allocs[i]) {
			fc.allocs[i] = m;
			break;
		}
	pthread_mutex_unlock(&fc.mu);
	return m;
}

static void forget(void *m)
{
	pthread_mutex_lock(&fc.mu);
	for (size_t i = 0; m && i < sizeof fc.allocs / sizeof fc.allocs[0]; i++)
		if (fc.allocs[i] == m)
			fc.allocs[i] = NULL;
	for (int w = 0; m && w < fc.nwaits; w++)
		if ((uintptr_t)fc.waits[w].addr == (uintptr_t)m) {
			if (!fc.waits[w].let_go)
				fc.waits[w].let_go = now_ns();
			fc.waits[w].addr = NULL;
		}
	pthread_mutex_unlock(&fc.mu);
	free(m);
}

API int cuMemAlloc_v2(uint64_t *p, size_t n)
{
	void *m = remember(calloc(1, n));
	*p = (uint64_t)(uintptr_t)m;
	return m ? OK : INVALID;
}

API int cuMemFree_v2(uint64_t p)
{
	synchronizing();
	forget((void *)(uintptr_t)p);
	return OK;
}

API int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n)
{
	synchronizing();
	pthread_mutex_lock(&fc.mu);
	run();
	memcpy(dst, (const void *)(uintptr_t)src, n);
	pthread_mutex_unlock(&fc.mu);
	return OK;
}

API int cuStreamCreate(void **stream, unsigned flags)
{
	(void)flags;
	*stream = &fc.s[1];
	made(1);
	return OK;
}

API int cuStreamDestroy_v2(void *stream)
{
	if (stream != &fc.s[1])
		return INVALID;
	made(-1);
	return OK;
}

API int cuStreamSynchronize(void *stream)
{
	for (;;) {
		if (query(stream) == OK)
			return OK;
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}

API int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
		       unsigned bz, unsigned shared, void *stream, void **params, void **extra)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)extra;
	if (fn != &module_tag || !params)
		return INVALID;
	uint64_t out = *(uint64_t *)params[0];
	int64_t spin = (int64_t)*(unsigned long long *)params[1];
	pthread_mutex_lock(&fc.mu);
	int ok = enqueue(stream_index(stream), ITEM_KERNEL, NULL, 0, spin, (uint64_t *)(uintptr_t)out);
	pthread_mutex_unlock(&fc.mu);
	return ok ? OK : INVALID;
}

static void synchronizing(void)
{
	pthread_mutex_lock(&fc.mu);
	fc.synchronizing++;
	pthread_mutex_unlock(&fc.mu);
}

/* How many calibration kernels ran, how many of the streams the
 * calibration made are not released, and how many synchronising calls
 * the process made. */
API void fake_cuda_calibration(int *kernels, int *left, int *synchronizing)
{
	pthread_mutex_lock(&fc.mu);
	run();
	*kernels = fc.calibrations;
	*left = fc.created;
	*synchronizing = fc.synchronizing;
	pthread_mutex_unlock(&fc.mu);
}

/* The second stream's kernels wait for ever from now on (on: 1), as on a
 * GPU whose every SM runs the application's long kernels. */
API void fake_cuda_set_calibration_stall(int on)
{
	pthread_mutex_lock(&fc.mu);
	fc.calib_stall = on;
	pthread_mutex_unlock(&fc.mu);
}
