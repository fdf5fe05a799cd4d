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

#define FAKE_CUDA_STEP_NS 1000
#define FAKE_CUDA_WAITS   4096

enum { OK = 0, NOT_READY = 600, INVALID = 1 };


struct event {
	int64_t t;          /* when the GPU met it */
	int done;
};

enum { ITEM_EVENT, ITEM_KERNEL, ITEM_WAIT };
#define QUEUE 8192

static struct {
	pthread_mutex_t mu;
	int64_t kernel_ns;
	int cc_major;                   /* 0: cuDeviceGetAttribute fails */
	int64_t launch_step_ns;         /* 0: an event's step */
	int64_t gpu;                    /* the stream's clock: when it is free */
	struct item {
		int kind;
		int64_t at;             /* enqueued */
		struct event *ev;
		int wait;
	} q[QUEUE];
	unsigned head, tail;            /* q[head % QUEUE] .. q[(tail - 1) % QUEUE] */
	uint64_t dropped;               /* kernels not queued: the queue was full */
	struct {
		volatile uint32_t *addr;
		uint32_t value;
		int64_t at, let_go;     /* asked; first seen let go (0: not yet) */
	} waits[FAKE_CUDA_WAITS];
	int nwaits;
	int events_live;                /* created and not destroyed */
} fc = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int released(int w)
{
	return (int32_t)(__atomic_load_n(fc.waits[w].addr, __ATOMIC_ACQUIRE) - fc.waits[w].value) >= 0;
}

/* Under mu: run the queue as far as it goes now. */
static void run(void)
{
	int64_t now = now_ns();
	for (; fc.head != fc.tail; fc.head++) {
		struct item *it = &fc.q[fc.head % QUEUE];
		if (it->kind == ITEM_WAIT && !released(it->wait))
			return;
		int64_t start = fc.gpu > it->at ? fc.gpu : it->at;
		if (it->kind == ITEM_WAIT) {
			fc.gpu = start > now ? start : now; /* seen let go now */
			fc.waits[it->wait].let_go = now;
		} else if (it->kind == ITEM_EVENT) {
			fc.gpu = start + FAKE_CUDA_STEP_NS;
			it->ev->t = fc.gpu;
			it->ev->done = 1;
		} else {
			fc.gpu = start + (fc.launch_step_ns ? fc.launch_step_ns : FAKE_CUDA_STEP_NS) + fc.kernel_ns;
		}
	}
}

/* Under mu. */
static int enqueue(int kind, struct event *ev, int wait)
{
	run();
	if (fc.tail - fc.head >= QUEUE)
		return 0;
	fc.q[fc.tail % QUEUE] = (struct item){ .kind = kind, .at = now_ns(), .ev = ev, .wait = wait };
	fc.tail++;
	run();
	return 1;
}

/* A kernel launched on the stream (called by the CUPTI stand-in between
 * a launch's enter and exit callbacks). */
API void fake_cuda_launched(void)
{
	pthread_mutex_lock(&fc.mu);
	if (!enqueue(ITEM_KERNEL, NULL, 0))
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
	(void)stream;
	struct event *e = ev;
	pthread_mutex_lock(&fc.mu);
	e->done = 0;
	int ok = enqueue(ITEM_EVENT, e, 0);
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
	(void)stream;
	pthread_mutex_lock(&fc.mu);
	run();
	int busy = fc.head != fc.tail || fc.gpu > now_ns();
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
	(void)stream;
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
		if (enqueue(ITEM_WAIT, NULL, w)) {
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
	*p = calloc(1, n);
	return *p ? OK : INVALID;
}
