/* CUPTI's set-up in libgpulse-inject.so: the subscription made at
 * CUDA's start (setup_cupti), the callbacks it asks for and their
 * dispatch (on_callback), the traced activity kinds turned on and off
 * (set_tracing), the unified-memory counters and NVTX markers, the
 * driver entry points the library calls itself, and continuous mode's
 * arming at the first tick. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <generated_nvtx_meta.h>

#include "inject/inject_internal.h"
#include "common/clock.h"
#include "common/status.h"

struct inject_tracing tracing;

static const CUpti_ActivityKind traced_kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};
#define NKINDS (sizeof traced_kinds / sizeof traced_kinds[0])

/* Whether GPULSE_INJECT_SKIP leaves a traced kind off. */
static int kind_skipped(CUpti_ActivityKind k, unsigned skip)
{
	if (k == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
		return (skip & INJECT_SKIP_SYNC) != 0;
	if (k != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		return (skip & INJECT_SKIP_COPIES) != 0;
	return 0;
}

/* Turn the traced kinds on or off. Called from the library's thread,
 * and from callbacks of the focused modes. */
void set_tracing(int on)
{
	if (!tracing.have_cupti || life.is_fork_child)
		return;
	int was = atomic_exchange(&tracing.active, on);
	if (was == on)
		return;
	int64_t now = clock_mono_ns();
	if (on && !tracing.lasting) {
		/* CUPTI 13.0 leaves launches dearer for good once kernels were
		 * traced (docs/internals/inject.md): said once, and reported. */
		tracing.lasting = 1;
		say("exact kernel tracing is on: on CUPTI 13.0 this process's kernel launches stay "
		    "about 12-30%% dearer until it exits");
	}
	if (on)
		atomic_store(&tracing.active_since, now);
	else
		atomic_fetch_add(&tracing.traced_accum, (uint64_t)(now - atomic_load(&tracing.active_since)));
	for (size_t i = 0; i < NKINDS; i++) {
		if (kind_skipped(traced_kinds[i], lib.cfg.skip))
			continue;
		CUptiResult r = on ? lib.cupti.activity_enable(traced_kinds[i])
				   : lib.cupti.activity_disable(traced_kinds[i]);
		/* May run on an application thread (focused modes): no lock. */
		if (r != CUPTI_SUCCESS && atomic_fetch_add(&tracing.enable_failures, 1) == 0)
			say("cannot %s activity kind %d: %s (counted; going on)",
			    on ? "enable" : "disable", (int)traced_kinds[i],
			    cupti_lib_strerror(&lib.cupti, r));
	}
}

/* Unified-memory counters need a context: enabling them in
 * InitializeInjection fails with NOT_READY, so the library's thread tries
 * each tick until a context exists (and focused modes from the
 * context-created callback). */
static void enable_uvm(void)
{
	if (tracing.uvm_state != 0 || !lib.cupti.activity_configure_uvm)
		return;
	CUpti_ActivityUnifiedMemoryCounterConfig cfg[4];
	static const CUpti_ActivityUnifiedMemoryCounterKind kinds[4] = {
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
	};
	for (int i = 0; i < 4; i++) {
		cfg[i].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
		cfg[i].kind = kinds[i];
		cfg[i].deviceId = 0;
		cfg[i].enable = 1;
	}
	CUptiResult r = lib.cupti.activity_configure_uvm(cfg, 4);
	if (r == CUPTI_SUCCESS)
		r = lib.cupti.activity_enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	if (r == CUPTI_SUCCESS) {
		tracing.uvm_state = 1;
	} else if (r != CUPTI_ERROR_NOT_READY) {
		tracing.uvm_state = -1;
		say("unified-memory counters unavailable: %s; going on without them",
		    cupti_lib_strerror(&lib.cupti, r));
	}
}

static void context_created_early(void);

void CUPTIAPI on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				 const void *data)
{
	(void)user;
	if (life.exited || life.is_fork_child || calib_this_thread())
		return; /* the calibration's own launches are not the application's */
	if (domain == CUPTI_CB_DOMAIN_NVTX) {
		const CUpti_NvtxData *d = data;
		switch (cbid) {
		case CUPTI_CBID_NVTX_nvtxRangePushA:
			nvtx_push(((const nvtxRangePushA_params *)d->functionParams)->message);
			break;
		case CUPTI_CBID_NVTX_nvtxRangePushEx: {
			const nvtxEventAttributes_t *a =
				((const nvtxRangePushEx_params *)d->functionParams)->eventAttrib;
			nvtx_push(a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "");
			break;
		}
		case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
			const nvtxEventAttributes_t *a =
				((const nvtxDomainRangePushEx_params *)d->functionParams)->core.eventAttrib;
			nvtx_push(a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "");
			break;
		}
		case CUPTI_CBID_NVTX_nvtxRangePop:
		case CUPTI_CBID_NVTX_nvtxDomainRangePop:
			nvtx_pop();
			break;
		case CUPTI_CBID_NVTX_nvtxRangeStartA:
			nvtx_start(((const nvtxRangeStartA_params *)d->functionParams)->message,
				   d->functionReturnValue);
			break;
		case CUPTI_CBID_NVTX_nvtxRangeStartEx: {
			const nvtxEventAttributes_t *a =
				((const nvtxRangeStartEx_params *)d->functionParams)->eventAttrib;
			nvtx_start(a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "",
				   d->functionReturnValue);
			break;
		}
		case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx: {
			const nvtxEventAttributes_t *a =
				((const nvtxDomainRangeStartEx_params *)d->functionParams)->core.eventAttrib;
			nvtx_start(a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "",
				   d->functionReturnValue);
			break;
		}
		case CUPTI_CBID_NVTX_nvtxRangeEnd:
			nvtx_end(((const nvtxRangeEnd_params *)d->functionParams)->id);
			break;
		case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
			nvtx_end(((const nvtxDomainRangeEnd_params *)d->functionParams)->core.id);
			break;
		default:
			break;
		}
		return;
	}
	if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
		if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED && !(lib.cfg.skip & INJECT_SKIP_UVM)) {
			if (lib.mode == WIRE_MODE_CONTINUOUS)
				context_created_early();
			else
				enable_uvm(); /* fails with NOT_READY before a context exists */
		}
		return;
	}
	const CUpti_CallbackData *d = data;
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && lib.mode == WIRE_MODE_CONTINUOUS) {
		census_api(cbid, d);
		return;
	}
	if (lib.mode != WIRE_MODE_FOCUSED_PROFILER)
		return;
	int start = (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
		     cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000) ||
		    (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
	/* The runtime's start calls the driver's: both fire, and turning
	 * tracing on twice is a no-op. On at exit of start, off at entry of
	 * stop, so only the work in between is traced. */
	if (start && d->callbackSite == CUPTI_API_EXIT) {
		atomic_store(&tracing.focus_on, 1);
		set_tracing(1);
	} else if (!start && d->callbackSite == CUPTI_API_ENTER) {
		atomic_store(&tracing.focus_on, 0);
		set_tracing(0);
	}
}

/* The library's thread has no CUDA context, and CUPTI enables the
 * unified-memory counters only with one current. Borrow the primary
 * context of the first device whose primary context the application
 * already made active (never create one: that would take GPU memory on a
 * device the application may not use). */
struct driver_fns drv;

static void load_driver_fns(void)
{
	if (drv.loaded)
		return;
	drv.loaded = 1;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return;
	*(void **)(&drv.device_count) = dlsym(h, "cuDeviceGetCount");
	*(void **)(&drv.device_get) = dlsym(h, "cuDeviceGet");
	*(void **)(&drv.primary_state) = dlsym(h, "cuDevicePrimaryCtxGetState");
	*(void **)(&drv.primary_retain) = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)(&drv.primary_release) = dlsym(h, "cuDevicePrimaryCtxRelease_v2");
	*(void **)(&drv.push) = dlsym(h, "cuCtxPushCurrent_v2");
	*(void **)(&drv.pop) = dlsym(h, "cuCtxPopCurrent_v2");
	*(void **)(&drv.event_create) = dlsym(h, "cuEventCreate");
	*(void **)(&drv.event_record) = dlsym(h, "cuEventRecord");
	*(void **)(&drv.event_record_ptsz) = dlsym(h, "cuEventRecord_ptsz");
	*(void **)(&drv.event_query) = dlsym(h, "cuEventQuery");
	*(void **)(&drv.event_elapsed) = dlsym(h, "cuEventElapsedTime_v2");
	if (!drv.event_elapsed)
		*(void **)(&drv.event_elapsed) = dlsym(h, "cuEventElapsedTime");
	*(void **)(&drv.event_destroy) = dlsym(h, "cuEventDestroy_v2");
	*(void **)(&drv.is_capturing) = dlsym(h, "cuStreamIsCapturing");
	*(void **)(&drv.is_capturing_ptsz) = dlsym(h, "cuStreamIsCapturing_ptsz");
	*(void **)(&drv.stream_query) = dlsym(h, "cuStreamQuery");
	*(void **)(&drv.stream_query_ptsz) = dlsym(h, "cuStreamQuery_ptsz");
	*(void **)(&drv.wait_value) = dlsym(h, "cuStreamWaitValue32_v2");
	*(void **)(&drv.wait_value_ptsz) = dlsym(h, "cuStreamWaitValue32_v2_ptsz");
	*(void **)(&drv.host_alloc) = dlsym(h, "cuMemHostAlloc");
	drv.can_time = drv.event_create && drv.event_record && drv.event_record_ptsz &&
		       drv.event_query && drv.event_elapsed && drv.event_destroy && drv.is_capturing &&
		       drv.is_capturing_ptsz && drv.stream_query && drv.stream_query_ptsz;
}

void enable_uvm_from_thread(void)
{
	load_driver_fns();
	if (!drv.device_count || !drv.device_get || !drv.primary_state || !drv.primary_retain ||
	    !drv.primary_release || !drv.push || !drv.pop) {
		tracing.uvm_state = -1;
		return;
	}
	int n = 0;
	if (drv.device_count(&n) != CUDA_SUCCESS)
		return;
	for (int i = 0; i < n; i++) {
		CUdevice dev;
		unsigned flags = 0;
		int active = 0;
		if (drv.device_get(&dev, i) != CUDA_SUCCESS ||
		    drv.primary_state(dev, &flags, &active) != CUDA_SUCCESS || !active)
			continue;
		CUcontext ctx = NULL;
		if (drv.primary_retain(&ctx, dev) != CUDA_SUCCESS)
			continue;
		if (drv.push(ctx) == CUDA_SUCCESS) {
			enable_uvm();
			CUcontext popped;
			drv.pop(&popped);
		}
		drv.primary_release(dev);
		return;
	}
}

/* NVTX reaches CUPTI only when NVTX_INJECTION64_PATH names CUPTI and is
 * set before the application's first NVTX call (CUDA initialises, and
 * loads this library, before most applications annotate anything). */
static void setenv_nvtx(void)
{
	if (!getenv("NVTX_INJECTION64_PATH") && lib.cupti.path[0] == '/')
		setenv("NVTX_INJECTION64_PATH", lib.cupti.path, 0);
}

/* Continuous mode, the first context, heard inside the first census
 * window (which holds CUPTI's one subscriber from CUDA's start, so no
 * other profiler has CUPTI set up): the unified-memory counters go on
 * now, with the activity buffers they need, rather than at the first
 * tick, a second in, after a short program's migrations (the H100 check
 * of 2026-12: 256 MiB migrated in a 1 s program read 0 bytes). Counter
 * records cost only migrations and faults, which the application makes
 * anyway; the kind stays on (docs/internals/inject.md). */
static void context_created_early(void)
{
	char err[WIRE_REASON_MAX + 1];
	if (lib.stepped_aside || atomic_load(&subs.yielded) || (lib.cfg.skip & INJECT_SKIP_UVM))
		return;
	if (register_buffers_once(err, sizeof err) != GPULSE_OK) {
		say("%s; unified memory is counted from the first tick", err);
		return;
	}
	enable_uvm();
}

/* Continuous and full modes: NVTX ranges arrive as MARKER records; the
 * kind costs only the application's own NVTX calls, so it stays on. */
static void enable_markers(void)
{
	if (lib.cfg.skip & INJECT_SKIP_NVTX)
		return;
	if (!act.markers) /* armed again after a detach: the table stays */
		act.markers = calloc(MARKERS_OPEN, sizeof *act.markers);
	if (act.markers && lib.cupti.activity_enable(CUPTI_ACTIVITY_KIND_MARKER) == CUPTI_SUCCESS)
		setenv_nvtx();
}

/* Continuous mode, the library's first tick: if CUPTI is still free,
 * take the buffers and start the windows; else step aside having
 * touched nothing. Returns whether it probed for another profiler (that
 * tick's probe is then done). */
bool arm_continuous(void)
{
	if (!atomic_exchange(&tracing.arm_pending, 0) || lib.stepped_aside)
		return false;
	char err[WIRE_REASON_MAX + 1];
	/* A census window holding the subscriber is proof enough that no
	 * other profiler holds it. */
	if (!subs.holds_census && cupti_taken()) {
		step_aside("CUPTI was taken by another profiler (torch.profiler, Nsight) as the "
			   "application started; gpulse leaves it to them");
		return true;
	}
	if (register_buffers_once(err, sizeof err) != GPULSE_OK) {
		step_aside(err);
		return true;
	}
	enable_markers();
	cen.window_next_ns = clock_mono_ns();
	pthread_mutex_lock(&lib.mu);
	tracing.have_cupti = 1;
	if (lib.pending_capture_set) {
		int64_t now = clock_mono_ns();
		capture_start(lib.cap, lib.pending_capture.capture_id, lib.pending_capture.max_events, now,
			      now + (int64_t)lib.pending_capture.seconds * NS_PER_SEC);
		atomic_store(&lib.capture_on, 1);
		lib.pending_capture_set = 0;
	}
	pthread_mutex_unlock(&lib.mu);
	return true;
}

int setup_cupti(void)
{
	char err[WIRE_REASON_MAX + 1] = "";
	int rc = cupti_lib_open(&lib.cupti, lib.cfg.cupti_path, err, sizeof err);
	if (rc != GPULSE_OK) {
		step_aside(err);
		return rc;
	}
	CUptiResult r;
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
	int focused = lib.mode == WIRE_MODE_FOCUSED_PROFILER || lib.mode == WIRE_MODE_FOCUSED_NVTX;
	if (lib.cupti.subscribe_v2) {
		CUpti_SubscriberParams p;
		memset(&p, 0, sizeof p);
		p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
		p.subscriberName = "gpulse";
		p.oldSubscriberName = other;
		p.oldSubscriberSize = sizeof other - 1;
		r = lib.cupti.subscribe_v2(&subs.sub, on_callback, NULL, &p);
	} else {
		r = lib.cupti.subscribe(&subs.sub, on_callback, NULL);
	}
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		snprintf(err, sizeof err, "CUPTI is already in use by another profiler%s%s%s",
			 other[0] ? " (" : "", other, other[0] ? ")" : "");
		step_aside(err);
		return GPULSE_EBUSY;
	}
	if (r != CUPTI_SUCCESS) {
		snprintf(err, sizeof err, "cuptiSubscribe failed: %s", cupti_lib_strerror(&lib.cupti, r));
		step_aside(err);
		return GPULSE_EVENDOR;
	}
	/* Continuous and full modes need no callbacks: the subscription was
	 * only the check that no other profiler is here. Full mode keeps it
	 * until the first context exists, to enable the unified-memory
	 * counters in the context-created callback, before the application
	 * can touch managed memory (the library's thread, which enables
	 * them in continuous mode, comes up to a second late: the H200 runs
	 * of 2026-11-29 missed every migration of a short program). */
	int until_context = lib.mode == WIRE_MODE_FULL && !(lib.cfg.skip & INJECT_SKIP_UVM) &&
			    lib.cupti.activity_configure_uvm;
	if (until_context) {
		atomic_store(&subs.sub_until_context, 1);
		lib.cupti.enable_callback(1, subs.sub, CUPTI_CB_DOMAIN_RESOURCE,
					CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	} else if (!focused && lib.mode != WIRE_MODE_CONTINUOUS) {
		lib.cupti.unsubscribe(subs.sub);
	}
	subs.holds_subscriber = focused;
	if (lib.mode == WIRE_MODE_CONTINUOUS) {
		/* Touch no CUPTI setting until the library's first tick has
		 * checked again that CUPTI is free (arm_continuous): a
		 * profiler started before CUDA (torch.profiler entered before
		 * the first CUDA call) may have registered its buffers and
		 * enabled its kinds without holding a subscriber yet, and
		 * registering ours, or closing a window, would take them from
		 * it (the H200 run of 2026-11-29: torch.profiler saw 0 CUDA
		 * events). NVTX must reach CUPTI before the first NVTX call. */
		if (!(lib.cfg.skip & INJECT_SKIP_NVTX))
			setenv_nvtx();
		atomic_store(&tracing.arm_pending, 1);
		/* The first census window, on the subscription just made: it
		 * counts from the application's first launch, so a program of
		 * a second is seen too (census_tick closes it, or gives the
		 * subscriber back if no launch comes). Callbacks touch none of
		 * the activity state a profiler started before CUDA may own. */
		load_driver_fns();
		if (lib.cupti.app_loaded) {
			/* An application that loaded CUPTI itself may be a
			 * profiler's host (PyTorch: torch.profiler entered before
			 * CUDA sets CUPTI up and subscribes later, and holding
			 * the subscriber now made it record no CUDA event on the
			 * H200): its first window waits for the first tick. */
			lib.cupti.unsubscribe(subs.sub);
			goto timestamps;
		}
		census_enable_callbacks(subs.sub);
		/* The first context, heard only in this window: unified
		 * memory is counted from then (context_created_early). */
		if (!(lib.cfg.skip & INJECT_SKIP_UVM) && lib.cupti.activity_configure_uvm)
			lib.cupti.enable_callback(1, subs.sub, CUPTI_CB_DOMAIN_RESOURCE,
						CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
		subs.holds_census = 1;
		cen.census_initial = 1;
		atomic_store(&cen.census_first, 1);
		/* Observed from now: launches before the first are none. */
		atomic_store(&cen.census_start_ns, clock_mono_ns());
		atomic_store(&cen.census_on, 1);
		log_window_open(clock_mono_ns());
		goto timestamps;
	}
	if (register_buffers(err, sizeof err) != GPULSE_OK) {
		if (focused || atomic_exchange(&subs.sub_until_context, 0))
			lib.cupti.unsubscribe(subs.sub);
		step_aside(err);
		return GPULSE_EVENDOR;
	}
	tracing.have_cupti = 1;
	if (!focused) {
		enable_markers();
		goto timestamps;
	}
	/* Callbacks that stay on in every mode cost nothing on launches. */
	lib.cupti.enable_callback(1, subs.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	if (lib.mode == WIRE_MODE_FOCUSED_PROFILER) {
		lib.cupti.enable_callback(1, subs.sub, CUPTI_CB_DOMAIN_RUNTIME_API,
					CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
		lib.cupti.enable_callback(1, subs.sub, CUPTI_CB_DOMAIN_RUNTIME_API,
					CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
		lib.cupti.enable_callback(1, subs.sub, CUPTI_CB_DOMAIN_DRIVER_API,
					CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
		lib.cupti.enable_callback(1, subs.sub, CUPTI_CB_DOMAIN_DRIVER_API,
					CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
	}
	static const CUpti_CallbackId nvtx_ids[] = {
		CUPTI_CBID_NVTX_nvtxRangePushA, CUPTI_CBID_NVTX_nvtxRangePushEx,
		CUPTI_CBID_NVTX_nvtxRangePop, CUPTI_CBID_NVTX_nvtxDomainRangePushEx,
		CUPTI_CBID_NVTX_nvtxDomainRangePop, CUPTI_CBID_NVTX_nvtxRangeStartA,
		CUPTI_CBID_NVTX_nvtxRangeStartEx, CUPTI_CBID_NVTX_nvtxRangeEnd,
		CUPTI_CBID_NVTX_nvtxDomainRangeStartEx, CUPTI_CBID_NVTX_nvtxDomainRangeEnd,
	};
	for (size_t i = 0; i < sizeof nvtx_ids / sizeof nvtx_ids[0]; i++)
		lib.cupti.enable_callback(1, subs.sub, CUPTI_CB_DOMAIN_NVTX, nvtx_ids[i]);
	setenv_nvtx();
timestamps:
	install_interpose();
	uint64_t ts = 0;
	if (lib.cupti.get_timestamp(&ts) == CUPTI_SUCCESS)
		lib.cupti_to_wall_ns = clock_wall_ns() - (int64_t)ts;
	return GPULSE_OK;
}

