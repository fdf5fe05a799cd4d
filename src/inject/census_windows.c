/* Continuous mode's launch census in libgpulse-inject.so, on CUPTI and
 * the driver: the windows that subscribe to the launch and copy
 * callbacks and count (census_open, census_close, census_tick), the
 * callbacks themselves (census_api), the timed samples of launches
 * between two events (census_time_start/_end, read by
 * census_poll_samples), and the fold of an interval's counts into
 * estimates. The arithmetic is CUPTI-free, in census.c and governor.c. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "inject/inject_internal.h"
#include "common/clock.h"

/* The first window counts from the first launch until it has cost the
 * application this much (launches times their cost), or for
 * SUB_HOLD_MAX_NS: a program of a second or two is counted whole, and a
 * long one pays it once. */
#define CENSUS_INITIAL_NS   (10 * NS_PER_MS)
#define EVPAIR_TIMEOUT_NS   (10 * NS_PER_SEC)
#define HOLD_MAX_NS         (2 * NS_PER_MS) /* a held stream is let go by then, come what may */

struct inject_census cen = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* The dump's log: window number cen.windows opened at `now`, not yet closed. */
void log_window_open(int64_t now)
{
	cen.window_log[cen.windows % WINDOW_LOG][0] = now;
	cen.window_log[cen.windows % WINDOW_LOG][1] = 0;
}

/* ---- continuous mode: the launch census ---- */

/* The driver entry points a census window hears about. Runtime launches
 * and copies reach the driver's, so one domain covers both. */
static const CUpti_CallbackId census_cbids[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
};

/* Ask subscriber `sub` for the census's callbacks. */
void census_enable_callbacks(CUpti_SubscriberHandle sub)
{
	for (size_t i = 0; i < sizeof census_cbids / sizeof census_cbids[0]; i++)
		lib.cupti.enable_callback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, census_cbids[i]);
}

/* Every copy and memset entry above takes (dst, src or value, count) first:
 * the count is read at one place for all of them. */
struct copy_head {
	CUdeviceptr dst;
	uint64_t src_or_value;
	size_t count;
};
_Static_assert(offsetof(cuMemcpyHtoD_v2_params, ByteCount) == offsetof(struct copy_head, count), "");
_Static_assert(offsetof(cuMemcpyDtoH_v2_params, ByteCount) == offsetof(struct copy_head, count), "");
_Static_assert(offsetof(cuMemcpyDtoD_v2_params, ByteCount) == offsetof(struct copy_head, count), "");
_Static_assert(offsetof(cuMemcpyAsync_params, ByteCount) == offsetof(struct copy_head, count), "");
_Static_assert(offsetof(cuMemcpy_params, ByteCount) == offsetof(struct copy_head, count), "");
_Static_assert(offsetof(cuMemsetD8_v2_params, N) == offsetof(struct copy_head, count), "");
_Static_assert(offsetof(cuMemsetD32_v2_params, N) == offsetof(struct copy_head, count), "");
_Static_assert(offsetof(cuMemsetD32Async_params, N) == offsetof(struct copy_head, count), "");

/* A copy's kind and bytes per counted unit; 0 for a launch. */
static int census_copy_kind(CUpti_CallbackId c, uint8_t *kind, unsigned *unit)
{
	*unit = 1;
	switch (c) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2: case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds:
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz:
		*kind = WIRE_COPY_H2D; return 1;
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2: case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds:
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz:
		*kind = WIRE_COPY_D2H; return 1;
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2: case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds:
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz:
		*kind = WIRE_COPY_D2D; return 1;
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpy: case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz:
		*kind = WIRE_COPY_OTHER; return 1; /* unified addressing: the direction is not named */
	case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2: case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async:
	case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds: case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz:
		*kind = WIRE_COPY_MEMSET; return 1;
	case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2: case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async:
	case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds: case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz:
		*kind = WIRE_COPY_MEMSET; *unit = 4; return 1;
	default: return 0;
	}
}

/* A launch's shape and stream from its parameters; whether it is one. */
static int census_launch_args(CUpti_CallbackId c, const void *params, uint32_t grid[3],
			      uint32_t block[3], uint32_t *shared, CUstream *stream, int *ptsz)
{
	*ptsz = c == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
		c == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
		c == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
	switch (c) {
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
		/* cuLaunchCooperativeKernel's parameters begin as these do. */
		const cuLaunchKernel_params *p = params;
		grid[0] = p->gridDimX, grid[1] = p->gridDimY, grid[2] = p->gridDimZ;
		block[0] = p->blockDimX, block[1] = p->blockDimY, block[2] = p->blockDimZ;
		*shared = p->sharedMemBytes;
		*stream = p->hStream;
		return 1;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
		const CUlaunchConfig *cfg = ((const cuLaunchKernelEx_params *)params)->config;
		if (!cfg)
			return 0;
		grid[0] = cfg->gridDimX, grid[1] = cfg->gridDimY, grid[2] = cfg->gridDimZ;
		block[0] = cfg->blockDimX, block[1] = cfg->blockDimY, block[2] = cfg->blockDimZ;
		*shared = cfg->sharedMemBytes;
		*stream = cfg->hStream;
		return 1;
	}
	default: return 0;
	}
}

/* Whether to time this launch of a kernel (size class) that has had
 * `drawn` launches drawn for timing: one in census_sample_stride's, at
 * random (a fixed stride would meet a workload's own period: every 32nd
 * launch of a step of 64 is always the same kernel); xorshift64 per
 * thread. */
static int sample_this(uint64_t drawn)
{
	static _Thread_local uint64_t x;
	if (lib.cfg.skip & INJECT_SKIP_SAMPLES)
		return 0;
	if (!x)
		x = (uint64_t)clock_mono_ns() ^ ((uint64_t)(uintptr_t)&x << 17) ^ 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x % census_sample_stride(drawn, lib.cfg.sample_every) == 0;
}

/* CUPTI's device of a context, cached (under cen.mu). */
static uint32_t census_device(CUcontext ctx, uint32_t uid)
{
	static struct { uint32_t uid, dev; int used; } cache[CENSUS_CONTEXTS];
	for (int i = 0; i < CENSUS_CONTEXTS; i++)
		if (cache[i].used && cache[i].uid == uid)
			return cache[i].dev;
	uint32_t dev = 0;
	if (lib.cupti.get_device_id && ctx)
		lib.cupti.get_device_id(ctx, &dev);
	for (int i = 0; i < CENSUS_CONTEXTS; i++)
		if (!cache[i].used) {
			cache[i].used = 1, cache[i].uid = uid, cache[i].dev = dev;
			break;
		}
	return dev;
}

/* The pinned word per pair that a held stream waits on, allocated once
 * (portable: any context's stream may wait on it) by the first launch
 * that wants it; NULL where that failed or is not offered. */
static uint32_t *hold_flags(void)
{
	int st = atomic_load(&cen.hold_state);
	if (st == 2)
		return atomic_load(&cen.hold_flags);
	if (st != 0 || !drv.wait_value || !drv.wait_value_ptsz || !drv.host_alloc ||
	    (lib.cfg.skip & INJECT_SKIP_HOLD) || !atomic_compare_exchange_strong(&cen.hold_state, &st, 1))
		return NULL;
	void *p = NULL;
	if (drv.host_alloc(&p, EVPAIRS_MAX * sizeof(uint32_t),
			   CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS || !p) {
		atomic_store(&cen.hold_state, -1);
		return NULL;
	}
	memset(p, 0, EVPAIRS_MAX * sizeof(uint32_t));
	atomic_store(&cen.hold_flags, (uint32_t *)p);
	atomic_store(&cen.hold_state, 2);
	return p;
}

/* Let a held stream go: the word never moves backwards (a late second
 * release of an older value must not re-arm a newer wait). */
static void hold_release(unsigned i, uint32_t seq)
{
	uint32_t *flags = atomic_load(&cen.hold_flags);
	if (!flags || !seq)
		return;
	uint32_t cur = __atomic_load_n(&flags[i], __ATOMIC_ACQUIRE);
	while ((int32_t)(cur - seq) < 0 &&
	       !__atomic_compare_exchange_n(&flags[i], &cur, seq, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		;
}

/* Every pair's hold let go: after an unsubscribe or a detach, whose
 * launch exits may never be heard (library thread, or exit). */
void hold_release_all(void)
{
	if (!atomic_load(&cen.hold_flags))
		return;
	pthread_mutex_lock(&cen.mu);
	for (unsigned i = 0; i < EVPAIRS_MAX; i++)
		if (cen.hold_next[i])
			hold_release(i, cen.hold_next[i]);
	pthread_mutex_unlock(&cen.mu);
}

/* A timed launch: events around it on its stream, never in a stream that
 * is being captured into a graph (an event there would become a node of
 * the application's graph). Returns the pair's slot + 1, or 0.
 *
 * On a busy stream the start event completes when the work before it
 * does, and the kernel follows at once: the interval is the kernel's. On
 * an idle one the start event would complete as soon as it is recorded,
 * before the kernel is even submitted, and the interval would hold the
 * launch call (several microseconds: more than a small kernel runs).
 * There the stream is held: it first waits on a pinned word that the
 * launch's exit sets, so the GPU meets the floor event, the start event,
 * the kernel and the end event back to back. The GPU was idle waiting
 * for the host anyway; the kernel starts as late as the launch call's
 * return instead of its submission. Only a kernel launched before in
 * this interval is held: a first launch may load the module or grow the
 * local memory, which waits on the device, and a held stream would make
 * that wait until the watchdog (HOLD_MAX_NS) lets it go. */
static uint64_t census_time_start(int slot, const char *key, CUstream stream, int ptsz, int seen,
				  uint32_t context, uint32_t device, uint8_t cls, int dense, int hold_busy)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if ((ptsz ? drv.is_capturing_ptsz : drv.is_capturing)(stream, &st) != CUDA_SUCCESS ||
	    st != CU_STREAM_CAPTURE_STATUS_NONE)
		return 0;
	int idle = (ptsz ? drv.stream_query_ptsz : drv.stream_query)(stream) == CUDA_SUCCESS;
	/* A kernel whose unheld samples were unclear (census_means_unclear)
	 * is held on a busy stream too. */
	uint32_t *flags = (idle || hold_busy) && seen ? hold_flags() : NULL;
	/* A kernel's first draws (every launch, `dense`) are kept to samples
	 * the GPU meets back to back, held or behind earlier work: an idle
	 * stream's launch that cannot be held reads the launch call less the
	 * host's measure of it, the least exact kind, and timing the first
	 * launch of every window so would make it common (the stand-in's
	 * 5 us kernel read 5.3 us under ASan). At the later rates such
	 * launches are timed as before: a kernel only ever launched so has
	 * no other sample. */
	if (dense && idle && !flags)
		return 0;
	if (pthread_mutex_trylock(&cen.mu) != 0)
		return 0; /* never wait on an application thread */
	unsigned i = 0;
	while (i < EVPAIRS_MAX && atomic_load(&cen.evpairs[i].state) != 0)
		i++;
	struct evpair *e = &cen.evpairs[i < EVPAIRS_MAX ? i : 0];
	uint32_t seq = 0, gen = 0;
	if (i < EVPAIRS_MAX) {
		atomic_store(&e->state, 5); /* being set up: the reader leaves it */
		gen = ++cen.gen_next;
		if (flags) {
			seq = ++cen.hold_next[i];
			if (!seq)
				seq = cen.hold_next[i] = 1;
		}
	}
	pthread_mutex_unlock(&cen.mu);
	if (i == EVPAIRS_MAX)
		return 0; /* every pair is in flight: not timed */
	CUevent a = NULL, f = NULL;
	int ok = drv.event_create(&a, CU_EVENT_DEFAULT) == CUDA_SUCCESS;
	if (ok && seq &&
	    (ptsz ? drv.wait_value_ptsz : drv.wait_value)(stream, (CUdeviceptr)(uintptr_t)&flags[i], seq,
							   CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
		seq = 0;
	/* The floor event, just before the start, wherever the GPU meets
	 * the two back to back (held, or behind earlier work). */
	if (ok && (seq || !idle) &&
	    (drv.event_create(&f, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
	     (ptsz ? drv.event_record_ptsz : drv.event_record)(f, stream) != CUDA_SUCCESS)) {
		if (f)
			drv.event_destroy(f);
		f = NULL;
	}
	ok = ok && (ptsz ? drv.event_record_ptsz : drv.event_record)(a, stream) == CUDA_SUCCESS;
	if (!ok) {
		hold_release(i, seq);
		if (a)
			drv.event_destroy(a);
		if (f)
			drv.event_destroy(f);
		atomic_store(&e->state, 0);
		return 0;
	}
	e->a = a, e->b = NULL, e->f = f, e->slot = slot, e->key = key, e->idle = idle && !seq;
	e->hold_seq = seq, e->start_done_at_exit = 0, e->host_gap_ns = 0, e->t_ns = clock_mono_ns();
	e->busy_held = seq && !idle;
	e->gen = gen, e->context = context, e->device = device, e->cls = cls;
	atomic_store(&e->late, 0);
	atomic_store(&e->state, 1);
	return (uint64_t)gen << 16 | (i + 1);
}

/* At the launch call's exit, on the launching thread and without the
 * lock: the pair is claimed (1 -> 4) so that the reader leaves it alone,
 * the end event recorded, a held stream let go. Unless held, whether the
 * start event has completed yet is asked: if not, the GPU was still busy
 * with earlier work when the kernel arrived, and the kernel follows its
 * start event at once (the interval is the kernel's); if it has, the GPU
 * may have idled between the two for part of the launch call, by an
 * amount the events cannot tell. */
static void census_time_end(uint64_t ticket, CUstream stream, int ptsz)
{
	int64_t t_end = clock_mono_ns();
	/* CUPTI does not clear the word between calls: a launch whose enter
	 * came before the window opened carries whatever was there. */
	unsigned idx = (unsigned)(ticket & 0xffff);
	if (idx < 1 || idx > EVPAIRS_MAX)
		return;
	struct evpair *e = &cen.evpairs[idx - 1];
	int one = 1;
	if (!atomic_compare_exchange_strong(&e->state, &one, 4))
		return; /* the reader timed it out meanwhile (and let it go): counted as lost */
	if (e->gen != (uint32_t)(ticket >> 16)) {
		atomic_store(&e->state, 1); /* another launch's pair */
		return;
	}
	CUevent b = NULL;
	int ok = drv.event_create(&b, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
		 (ptsz ? drv.event_record_ptsz : drv.event_record)(b, stream) == CUDA_SUCCESS;
	/* Asked after the end event is queued: a start still pending then
	 * means the kernel had not begun, so the end event follows it. Asked
	 * before (as until 2026-12-07), a start that completed in between let
	 * a short kernel run and end before its end event was queued, and the
	 * interval held the host's time: under ASan the stand-in's 5 us
	 * kernel read 5.8-6.1 us once every launch of a kernel's first 8 was
	 * timed back to back. */
	int done = !e->hold_seq && drv.event_query(e->a) == CUDA_SUCCESS;
	hold_release(idx - 1, e->hold_seq);
	if (!ok && b) {
		drv.event_destroy(b);
		b = NULL;
	}
	e->b = b;
	e->host_gap_ns = t_end - e->t_ns;
	e->start_done_at_exit = done;
	/* Without its end, it times out and is counted as lost. */
	atomic_store(&e->state, b ? 2 : 1);
}

/* Launch and copy callbacks while a census window counts. On the
 * application's thread: the lock is only tried, the callback's own time
 * is measured. */
void census_api(CUpti_CallbackId cbid, const CUpti_CallbackData *d)
{
	int armed = 1;
	if (d->callbackSite == CUPTI_API_EXIT && atomic_load_explicit(&subs.detach_armed, memory_order_relaxed) == 1 &&
	    atomic_compare_exchange_strong(&subs.detach_armed, &armed, 2)) {
		/* At an API exit, as CUPTI wants cuptiFinalize called: every
		 * subscription, callback, kind and buffer of CUPTI's is gone
		 * after it; the library's thread sets up the census again. It
		 * touches no CUPTI setting while this runs (detach_armed is
		 * 2 until the result is in). */
		CUptiResult r = lib.cupti.finalize();
		atomic_store(&subs.detach_result, (int)r);
		atomic_store(&subs.detach_done, r == CUPTI_SUCCESS ? 1 : -1);
		atomic_store(&subs.detach_armed, 0);
		return;
	}
	if (life.exited || life.is_fork_child)
		return;
	/* A launch's exit is heard even when the window closed after its
	 * enter: a held stream waits on it. */
	int on = atomic_load_explicit(&cen.census_on, memory_order_relaxed);
	if (!on && d->callbackSite == CUPTI_API_ENTER)
		return;
	int64_t t0 = clock_mono_ns();
	uint32_t grid[3], block[3], shared = 0;
	CUstream stream = NULL;
	int ptsz = 0;
	if (census_launch_args(cbid, d->functionParams, grid, block, &shared, &stream, &ptsz)) {
		if (d->callbackSite == CUPTI_API_EXIT) {
			if (d->correlationData && *d->correlationData)
				census_time_end(*d->correlationData, stream, ptsz);
			if (!on)
				return;
			goto out;
		}
		if (atomic_load_explicit(&cen.census_first, memory_order_relaxed)) {
			/* The first window's rate is measured from its first launch. */
			int_fast64_t zero = 0;
			atomic_compare_exchange_strong(&cen.census_first_launch_ns, &zero, t0);
			atomic_store(&cen.census_first, 0);
		}
		if (!atomic_load_explicit(&cen.first_seen_ns, memory_order_relaxed)) {
			int_fast64_t zero = 0;
			atomic_compare_exchange_strong(&cen.first_seen_ns, &zero, t0);
		}
		atomic_fetch_add_explicit(&act.launch_records, 1, memory_order_relaxed);
		if (d->correlationData)
			*d->correlationData = 0;
		if (pthread_mutex_trylock(&cen.mu) != 0) {
			atomic_fetch_add(&cen.census_busy, 1);
			goto out;
		}
		uint32_t dev = census_device(d->context, d->contextUid);
		int slot = census_launch(cen.census, d->symbolName, d->contextUid, dev, grid, block, shared);
		int seen = !cen.census->k[slot].is_other && cen.census->k[slot].launches > 1;
		uint8_t cls = cen.census->k[slot].cls;
		uint64_t drawn = census_means_drawn(cen.census_means, d->symbolName, d->contextUid, cls);
		int take = drv.can_time && d->correlationData && sample_this(drawn);
		int hold_busy = 0;
		if (take) {
			census_means_draw(cen.census_means, d->symbolName, d->contextUid, cls);
			hold_busy = census_means_hold_busy(cen.census_means, d->symbolName, d->contextUid, cls);
		}
		pthread_mutex_unlock(&cen.mu);
		if (take) {
			*d->correlationData = census_time_start(slot, d->symbolName, stream, ptsz, seen,
								     d->contextUid, dev, cls, drawn < SAMPLES_FIRST,
								     hold_busy);
			/* Not timed: the draw is given back (under the lock if
			 * free now; else it stays counted, a sample fewer). */
			if (!*d->correlationData && pthread_mutex_trylock(&cen.mu) == 0) {
				census_means_discard(cen.census_means, d->symbolName, d->contextUid, cls);
				pthread_mutex_unlock(&cen.mu);
			}
		}
	} else if (d->callbackSite == CUPTI_API_ENTER && on) {
		uint8_t kind;
		unsigned unit;
		if (!census_copy_kind(cbid, &kind, &unit) || !d->functionParams)
			goto out;
		const struct copy_head *h = d->functionParams;
		atomic_fetch_add_explicit(&act.launch_records, 1, memory_order_relaxed);
		if (pthread_mutex_trylock(&cen.mu) != 0) {
			atomic_fetch_add(&cen.census_busy, 1);
			goto out;
		}
		census_copy(cen.census, d->contextUid, census_device(d->context, d->contextUid), kind,
			    (uint64_t)h->count * unit);
		pthread_mutex_unlock(&cen.mu);
	}
out:
	atomic_fetch_add_explicit(&cen.cb_self_ns, (uint64_t)(clock_mono_ns() - t0), memory_order_relaxed);
	if (d->callbackSite == CUPTI_API_ENTER)
		atomic_fetch_add_explicit(&cen.cb_calls, 1, memory_order_relaxed);
}

/* Words for the dump's strings: no quote, backslash or control. */
static void plain_words(char *s)
{
	for (; *s; s++)
		if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
			*s = '?';
}

/* The floors a held sample of device `dev` (CUPTI's id, the CUDA
 * ordinal) holds besides its kernel (census_offset_floors): the device's
 * calibration (calib.h), measured the first time one of its samples is
 * read, and tried again (CALIB_TRIES at most, CALIB_RETRY_NS apart) when
 * the GPU was too busy to measure; an earlier process's kept calibration
 * of the device and driver meanwhile, or when every try was refused; the
 * model's when there is none. A calibration that succeeded is kept for
 * the processes after. Library thread only. */
static double offset_floors(uint32_t dev)
{
	enum { DEVS = 64 };
	static double floors[DEVS];
	static int tries[DEVS];
	static bool settled[DEVS];
	static int64_t next_try[DEVS]; /* 0: the first read tries at once */
	static double kept[DEVS];      /* floors; 0: not looked for, < 0: none */
	static char key[DEVS][96];
	if (lib.cfg.offset_floors >= 0 || dev >= DEVS || (lib.cfg.skip & INJECT_SKIP_CALIBRATE)) {
		cen.offset_floors = census_offset_floors(lib.cfg.offset_floors, NULL, -1, &cen.offset_source);
		return cen.offset_floors;
	}
	int64_t now = clock_mono_ns();
	if (!settled[dev] && now >= next_try[dev]) {
		char dir[4096];
		int have_dir = calib_keep_dir(dir, sizeof dir);
		if (kept[dev] == 0) {
			kept[dev] = -1;
			if (!have_dir)
				snprintf(cen.kept_why, sizeof cen.kept_why, "no directory (GPULSE_CALIB_DIR off, no home)");
			else if (!calib_device_key((int)dev, key[dev], sizeof key[dev]))
				snprintf(cen.kept_why, sizeof cen.kept_why, "no key: the device's UUID or driver unread");
			else if ((cen.kept_found = calib_keep_load(dir, key[dev], &cen.kept, cen.kept_why,
								   sizeof cen.kept_why)))
				kept[dev] = cen.kept.floors;
		}
		struct calib_result r;
		calib_measure((int)dev, &r);
		cen.calib_ns += (uint64_t)(clock_mono_ns() - now);
		floors[dev] = census_offset_floors(-1, &r, kept[dev], &cen.offset_source);
		if (r.ok && have_dir && key[dev][0])
			cen.kept_stored = calib_keep_store(dir, key[dev], &r, (long long)time(NULL), cen.kept_why,
							   sizeof cen.kept_why);
		plain_words(cen.kept_why);
		cen.calib = r;
		cen.calib_tried++;
		cen.offset_floors = floors[dev];
		settled[dev] = r.ok || !r.retry || ++tries[dev] >= CALIB_TRIES;
		next_try[dev] = now + CALIB_RETRY_NS;
	}
	return floors[dev];
}

/* Read the events of timed launches that completed (library thread): the
 * driver calls run outside the lock. */
void census_poll_samples(int64_t now)
{
	if (!drv.can_time)
		return;
	struct evpair todo[EVPAIRS_MAX];
	unsigned idx[EVPAIRS_MAX], n = 0;
	pthread_mutex_lock(&cen.mu);
	for (unsigned i = 0; i < EVPAIRS_MAX; i++) {
		struct evpair *e = &cen.evpairs[i];
		int st = atomic_load(&e->state);
		if (st == 1 && e->hold_seq && now - e->t_ns > HOLD_MAX_NS && !atomic_load(&e->late)) {
			/* The watchdog: a held stream whose launch has not
			 * returned is let go (its time is then not the
			 * kernel's alone). */
			atomic_store(&e->late, 1);
			hold_release(i, e->hold_seq);
			cen.holds_late++;
		}
		if (st == 1 && now - e->t_ns <= EVPAIR_TIMEOUT_NS)
			continue;
		if ((st == 1 || st == 2) && atomic_compare_exchange_strong(&e->state, &st, 3)) {
			if (st == 1)
				hold_release(i, e->hold_seq);
			todo[n].a = e->a, todo[n].b = st == 2 ? e->b : NULL, todo[n].f = e->f;
			todo[n].slot = e->slot, todo[n].key = e->key, todo[n].t_ns = e->t_ns;
			todo[n].context = e->context, todo[n].device = e->device, todo[n].cls = e->cls;
			todo[n].idle = e->idle, todo[n].host_gap_ns = e->host_gap_ns;
			todo[n].start_done_at_exit = e->start_done_at_exit;
			todo[n].hold_seq = atomic_load(&e->late) ? 0 : e->hold_seq;
			todo[n].busy_held = e->busy_held;
			todo[n].late = atomic_load(&e->late);
			idx[n++] = i;
		}
	}
	pthread_mutex_unlock(&cen.mu);
	if (!n)
		return;
	uint64_t dur[EVPAIRS_MAX], floor_ns[EVPAIRS_MAX];
	double off_floors[EVPAIRS_MAX];
	int done[EVPAIRS_MAX]; /* 1 timed, -1 lost, -2 left out, 0 not yet */
	for (unsigned j = 0; j < n; j++) {
		done[j] = -1;
		floor_ns[j] = UINT64_MAX;
		if (!todo[j].b || atomic_load(&todo[j].late))
			continue; /* its end never came (the window closed), or let go late: lost */
		if (!todo[j].idle && todo[j].start_done_at_exit) {
			/* Busy when timing began, idle before the kernel came:
			 * the interval holds an unknown part of the launch
			 * call. Left out rather than guessed: a kernel's time
			 * does not depend on which case its sample met, and
			 * the next sample of it meets one of the clear ones. */
			done[j] = -2;
			continue;
		}
		CUresult q = drv.event_query(todo[j].b);
		if (q == CUDA_ERROR_NOT_READY && now - todo[j].t_ns <= EVPAIR_TIMEOUT_NS) {
			done[j] = 0;
			continue;
		}
		float ms = 0;
		if (q == CUDA_SUCCESS && drv.event_elapsed(&ms, todo[j].a, todo[j].b) == CUDA_SUCCESS &&
		    ms >= 0) {
			double ns = (double)ms * 1e6;
			if (todo[j].idle)
				ns -= (double)todo[j].host_gap_ns;
			dur[j] = ns > 0 ? (uint64_t)ns : 0;
			done[j] = 1;
			float fm = 0;
			if (todo[j].f && drv.event_elapsed(&fm, todo[j].f, todo[j].a) == CUDA_SUCCESS && fm >= 0)
				floor_ns[j] = (uint64_t)((double)fm * 1e6);
		}
	}
	/* Outside the lock: a device's first sample calibrates it (a few
	 * milliseconds), and launches meanwhile must not miss the lock. */
	for (unsigned j = 0; j < n; j++)
		off_floors[j] = done[j] == 1 ? offset_floors(todo[j].device) : 0;
	pthread_mutex_lock(&cen.mu);
	for (unsigned j = 0; j < n; j++) {
		struct evpair *e = &cen.evpairs[idx[j]];
		if (done[j] == 0) {
			atomic_store(&e->state, 2);
			continue;
		}
		if (done[j] == 1 && floor_ns[j] != UINT64_MAX) {
			/* A floor is two events met back to back: one many times
			 * the mean so far was not (the GPU switched to other work
			 * between them), and would move every sample's offset. */
			int back_to_back = census_floor_met(floor_ns[j], cen.floor_ns, cen.floor_n);
			if (cen.floor_n >= 8 && floor_ns[j] > 4 * cen.floor_ns / cen.floor_n)
				cen.floor_outliers++;
			else
				cen.floor_n++, cen.floor_ns += floor_ns[j];
			/* Unheld, behind earlier work, with a floor half again the
			 * mean: the stream drained between the floor and start
			 * events, so the start completed as it was recorded and
			 * the interval holds the launch call (an H100 round of
			 * 2 us kernels read 6.2 us from such samples). Left out,
			 * as an ambiguous sample is. */
			if (!todo[j].hold_seq && !back_to_back) {
				done[j] = -2;
				cen.samples_unmet++;
			}
		}
		if (done[j] == 1) {
			/* Between the start and end events the GPU takes two
			 * steps besides the kernel: the launch itself and the
			 * end event, each near what one event takes after
			 * another (the floor): how many floors, by the
			 * device (offset_floors). */
			uint64_t off = cen.floor_n ? (uint64_t)(off_floors[j] * (double)cen.floor_ns /
								  (double)cen.floor_n + 0.5)
						 : 0;
			if (cen.sample_log)
				fprintf(cen.sample_log, "%s\t%llu\t%lld\t%d\t%d\n", todo[j].key ? kernel_name(todo[j].key) : "?",
					(unsigned long long)dur[j],
					floor_ns[j] != UINT64_MAX ? (long long)floor_ns[j] : -1LL,
					todo[j].hold_seq != 0, todo[j].idle);
			uint64_t kernel_ns = dur[j] > off ? dur[j] - off : 0;
			census_sample(cen.census, todo[j].slot, todo[j].key, kernel_ns);
			/* Also when the interval it belongs to was flushed before
			 * its events were read (census_sample drops it then). */
			census_means_add(cen.census_means, todo[j].key, todo[j].context, todo[j].cls, kernel_ns);
			if (todo[j].hold_seq)
				cen.holds++;
			if (todo[j].hold_seq && todo[j].busy_held)
				cen.holds_busy++;
		} else {
			if (done[j] == -2) {
				cen.samples_ambiguous++;
				census_means_unclear(cen.census_means, todo[j].key, todo[j].context,
						     todo[j].cls);
			} else
				cen.samples_lost++;
			/* Its draw is given back: a kernel whose samples are
			 * often left out still gets its early ones. */
			census_means_discard(cen.census_means, todo[j].key, todo[j].context, todo[j].cls);
		}
		atomic_store(&e->state, 0);
	}
	pthread_mutex_unlock(&cen.mu);
	for (unsigned j = 0; j < n; j++)
		if (done[j] != 0) {
			drv.event_destroy(todo[j].a);
			if (todo[j].b)
				drv.event_destroy(todo[j].b);
			if (todo[j].f)
				drv.event_destroy(todo[j].f);
		}
}

/* Open a census window: subscribe (which also proves no other profiler
 * holds CUPTI) and ask for the launch and copy callbacks. */
static int census_open(int64_t now)
{
	int64_t t0 = clock_mono_ns();
	CUptiResult r = lib.cupti.subscribe(&subs.sub, on_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		give_way(GIVE_WAY_FOUND);
		return 0;
	}
	if (r != CUPTI_SUCCESS)
		return 0;
	census_enable_callbacks(subs.sub);
	subs.holds_census = 1;
	cen.window_records_base = atomic_load(&act.launch_records);
	if (cen.census_initial)
		atomic_store(&cen.census_first, 1);
	atomic_store(&cen.census_start_ns, now);
	atomic_store(&cen.census_on, 1);
	log_window_open(now);
	cen.census_fixed_ns = clock_mono_ns() - t0;
	cen.census_cpu0_ns = clock_thread_cpu_ns();
	return 1;
}

/* A window's counted time from `start` to `now` that lies after the first
 * launch any window heard: the time the pool's rates are taken over (a
 * program's set-up before its first launch is not its launch rate). */
static uint64_t pooled_time(int64_t start, int64_t now)
{
	int64_t first = atomic_load(&cen.first_seen_ns);
	if (first <= 0 || start <= 0)
		return 0;
	int64_t from = start > first ? start : first;
	return now > from ? (uint64_t)(now - from) : 0;
}

/* Close it: the counted time, what it saw and what it cost go to the
 * governor, which plans the next. */
static void census_close(int64_t now)
{
	int64_t t0 = clock_mono_ns();
	atomic_store(&cen.census_on, 0);
	lib.cupti.unsubscribe(subs.sub);
	hold_release_all(); /* an exit that was not heard lets nothing wait */
	subs.holds_census = 0;
	int64_t start = atomic_load(&cen.census_start_ns);
	uint64_t counted = start > 0 && now > start ? (uint64_t)(now - start) : 0;
	cen.observed_ns += counted;
	cen.pool_observed_ns += pooled_time(start, now);
	uint64_t on = counted + cen.census_split_ns;
	cen.census_split_ns = 0;
	int64_t first = atomic_exchange(&cen.census_first_launch_ns, 0);
	if (cen.census_initial && first > 0 && now > first)
		on = (uint64_t)(now - first); /* the rate, from the first launch */
	atomic_store(&cen.census_start_ns, 0);
	atomic_store(&cen.census_first, 0);
	cen.census_initial = 0;
	uint64_t recs = atomic_load(&act.launch_records) - cen.window_records_base;
	uint64_t sn = atomic_exchange(&cen.cb_self_ns, 0), sc = atomic_exchange(&cen.cb_calls, 0);
	/* The library thread's own work while the window was open (reading
	 * the samples' events, the watchdog) is the window's too: on a
	 * process whose threads fill its cores it is time the application
	 * does not get, so it is priced per launch like the callbacks'. */
	int64_t cpu = cen.census_cpu0_ns > 0 ? clock_thread_cpu_ns() - cen.census_cpu0_ns : 0;
	cen.census_cpu0_ns = 0;
	if (cpu > 0 && counted > 0) {
		cen.lib_window_cpu_ns += (uint64_t)cpu;
		cen.lib_window_ns += counted;
		sn += (uint64_t)cpu;
	}
	if (sc)
		governor_observe_processing(&cen.gov, (double)sn / (double)sc);
	double fixed = (double)(cen.census_fixed_ns + (clock_mono_ns() - t0));
	governor_window_done(&cen.gov, on, recs, 2 * fixed);
	cen.window_log[cen.windows % WINDOW_LOG][1] = now;
	cen.windows++;
	cen.window_next_ns = now + (int64_t)cen.gov.off_ns;
}

/* An open census window ends outside the governor's plan, its counted
 * time kept for the interval's estimate: after a detach (CUPTI holds no
 * subscriber any more: unsubscribe 0), or when another profiler
 * subscribes (the window's subscription given back: 1). */
void census_drop_window(int64_t now, int unsubscribe)
{
	atomic_store(&cen.census_on, 0);
	if (unsubscribe && subs.holds_census)
		lib.cupti.unsubscribe(subs.sub);
	hold_release_all(); /* no exit of ours is heard from here on */
	int64_t start = atomic_exchange(&cen.census_start_ns, 0);
	if (subs.holds_census && start > 0 && now > start) {
		cen.observed_ns += (uint64_t)(now - start);
		cen.pool_observed_ns += pooled_time(start, now);
	}
	subs.holds_census = 0;
	cen.census_split_ns = 0;
}

/* The library's thread, each turn: open and close census windows. The
 * first window (opened at CUDA's start) counts from the first launch;
 * without one for SUB_HOLD_MAX_NS it gives the subscriber back. */
void census_tick(int64_t now)
{
	if (subs.holds_census) {
		int64_t start = atomic_load(&cen.census_start_ns);
		if (cen.census_initial && atomic_load(&cen.census_first)) {
			if (now >= subs.sub_deadline_ns)
				census_close(now); /* no launch came: give the subscriber back */
		} else if (cen.census_initial) {
			double spent = (double)(atomic_load(&act.launch_records) - cen.window_records_base) *
				       cen.gov.cost_ns;
			if (spent >= (double)CENSUS_INITIAL_NS || now >= subs.sub_deadline_ns)
				census_close(now);
		} else if (now >= start + (int64_t)cen.gov.on_ns) {
			census_close(now);
			if (cen.gov.off_ns == 0)
				census_open(now);
		}
	} else if (now >= cen.window_next_ns) {
		census_open(now);
	}
}

static const char *census_name(const char *mangled, void *user)
{
	(void)user;
	return kernel_name(mangled);
}

/* The interval's census into lib.cur as estimates for the whole interval
 * (unless `add` is 0: a capture's exact records stand for the interval
 * then, and estimates beside them would count the same launches twice):
 * what its windows counted, plus the pool's recent rates for the time no
 * window observed (census.h). Returns the share of the interval observed;
 * *estimated is set when it stood anything for the interval. */
double census_fold(int64_t now_mono, uint64_t interval_ns, int add, int *estimated)
{
	*estimated = 0;
	pthread_mutex_lock(&cen.mu);
	census_take(cen.census, cen.census_snap);
	pthread_mutex_unlock(&cen.mu);
	uint64_t seen = cen.observed_ns, pooled = cen.pool_observed_ns;
	cen.observed_ns = 0;
	cen.pool_observed_ns = 0;
	int64_t start = atomic_load(&cen.census_start_ns);
	if (subs.holds_census && start > 0 && now_mono > start) {
		seen += (uint64_t)(now_mono - start);
		pooled += pooled_time(start, now_mono);
		/* The open window's counted time from here on is the next interval's. */
		atomic_store(&cen.census_start_ns, now_mono);
		cen.census_split_ns += (uint64_t)(now_mono - start);
	}
	/* The interval's time after the first launch heard, less what the
	 * windows observed of it: the pool's rates stand for that. */
	uint64_t active = pooled_time(cen.interval_start_mono_ns, now_mono);
	uint64_t unobserved = active > pooled ? active - pooled : 0;
	cen.interval_start_mono_ns = now_mono;
	double observed = interval_ns ? (double)seen / (double)interval_ns : 0;
	if (observed > 1)
		observed = 1;
	if (add) {
		census_pool_add(cen.census_pool, cen.census_snap, pooled, interval_ns);
		pthread_mutex_lock(&lib.mu);
		*estimated = census_estimate(cen.census_snap, cen.census_pool, unobserved, cen.census_means,
					     lib.cur, census_name, NULL, &cen.untimed_launches) > 0;
		pthread_mutex_unlock(&lib.mu);
	}
	return observed;
}

