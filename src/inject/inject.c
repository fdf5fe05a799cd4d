/* libgpulse-inject.so: loaded by the CUDA driver through
 * CUDA_INJECTION64_PATH, it records what the application's GPUs do with
 * CUPTI's activity and callback APIs, aggregates it in-process (agg.c),
 * keeps its cost under a budget (governor.c) and ships summaries to
 * gpulsed (client.c). docs/internals/inject.md has the design.
 *
 * Rules (DESIGN.md decision 7): never abort, never block an application
 * thread, bounded memory, every drop counted, and step aside with one log
 * line when CUPTI is missing, incompatible or taken by another profiler.
 *
 * Threads: the application's threads only run CUPTI callbacks here
 * (profiler start/stop, NVTX push/pop, context creation), which take no
 * lock that can be held for long (trylock, counted when busy). CUPTI's
 * own thread hands completed activity buffers to buffer_completed, which
 * aggregates under g.mu. The library's thread ("gpulse-inject") opens
 * and closes tracing windows, flushes once a second and encodes frames;
 * the client's thread owns the socket. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>
#include <generated_nvtx_meta.h>

#include "inject/agg.h"
#include "inject/capture.h"
#include "inject/calib.h"
#include "inject/census.h"
#include "inject/inject_client.h"
#include "common/clock.h"
#include "inject/cupti_shim.h"
#include "inject/governor.h"
#include "inject/interpose.h"
#include "inject/inject_config.h"
#include "common/mono_cond.h"
#include "common/status.h"
#include "common/str.h"
#include "wire/wire.h"

#define API __attribute__((visibility("default")))
#define LOG_PREFIX "gpulse-inject: "

#define BUFFER_BYTES    (1u << 20)  /* one CUPTI activity buffer */
#define BUFFERS_MAX     32          /* outstanding: 32 MiB at most */
#define NAME_CACHE      1024        /* demangled kernel names, by CUPTI's pointer */
#define NVTX_DEPTH      32          /* nested ranges tracked per thread */
#define FLUSH_NS        NS_PER_SEC
#define EXIT_FLUSH_NS   (200 * NS_PER_MS)
#define THREAD_TICK_NS  (100 * NS_PER_MS)
#define SUB_HOLD_MAX_NS (10 * NS_PER_SEC)
/* Continuous mode's census (census.h): what one observed launch costs the
 * application besides the library's own time in the callback, which is
 * measured: CUPTI's dispatch of the enter and exit callbacks (a prior,
 * from the H200: a subscriber with the census's callbacks, whose body was
 * a lock, a counter and a clock read, made an empty launch 0.70 us dearer
 * on 2026-12-02, bench/cupti_states.cu step B; 0.5-0.6 us on 12-01;
 * docs/PERFORMANCE.md). */
#define CENSUS_COST_NS      700.0
/* A window's fixed cost prior: subscribing and enabling the callbacks,
 * then unsubscribing, on the library's thread (measured; this floor). */
#define CENSUS_FIXED_NS     (1 * NS_PER_MS)
#define CENSUS_IDLE_PERIOD_NS NS_PER_SEC /* windows that hear nothing: one a second */
/* The first window counts from the first launch until it has cost the
 * application this much (launches times their cost), or for
 * SUB_HOLD_MAX_NS: a program of a second or two is counted whole, and a
 * long one pays it once. */
#define CENSUS_INITIAL_NS   (10 * NS_PER_MS)
#define EVPAIRS_MAX         256  /* timed launches whose events are not read yet */
#define EVPAIR_TIMEOUT_NS   (10 * NS_PER_SEC)
#define HOLD_MAX_NS         (2 * NS_PER_MS) /* a held stream is let go by then, come what may */
#define CENSUS_WATCH_NS     (10 * NS_PER_MS) /* the watchdog's period while a window is open */
/* What exact kernel tracing leaves every later launch of the process
 * costing, once it has run (STATUS's lasting_cost_ppm): 15%, the median
 * measured on the H200 with CUPTI 13.0 and driver 580 (the runs of 12-30%
 * in docs/PERFORMANCE.md, 2026-12-01). A figure of this stack, not a
 * measurement of the process at hand. */
#define LASTING_COST_PPM    150000u

static const CUpti_ActivityKind traced_kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};
#define NKINDS (sizeof traced_kinds / sizeof traced_kinds[0])

#define WINDOW_LOG 32 /* continuous windows whose edges the dump lists */

/* Whether GPULSE_INJECT_SKIP leaves a traced kind off. */
static int kind_skipped(CUpti_ActivityKind k, unsigned skip)
{
	if (k == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
		return (skip & INJECT_SKIP_SYNC) != 0;
	if (k != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		return (skip & INJECT_SKIP_COPIES) != 0;
	return 0;
}

#define MARKERS_OPEN 256  /* NVTX ranges open at once (continuous and full modes) */

struct marker_open {
	uint32_t id;               /* 0: free */
	uint64_t start_ns;
	char name[WIRE_NAME_MAX + 1];
};

struct name_entry {
	const char *key;           /* CUPTI's name pointer (stable per function) */
	char *name;                /* demangled and fitted (wire_kernel_name_fit), malloc'd */
};

static struct {
	int initialized;
	struct inject_config cfg;
	struct cupti_lib cupti;
	CUpti_SubscriberHandle sub;
	atomic_int have_cupti;     /* CUPTI opened and ours (read on the client's thread too) */
	atomic_int stepped_aside;  /* read on the client's thread too */
	char reason[WIRE_REASON_MAX + 1];
	int is_fork_child;         /* CUDA is unusable in a forked child */
	uint32_t driver_version;

	pthread_mutex_t mu;        /* agg, capture, names, counters below */
	struct mono_cond wake;
	struct agg *cur, *snap, *total;
	struct agg_encoder *enc;
	struct capture *cap;
	struct name_entry *names;  /* NAME_CACHE */
	uint64_t names_uncached;
	int64_t cupti_to_wall_ns;  /* add to a CUPTI timestamp for wall clock */
	int64_t mono_to_wall_ns;

	/* Tracing state (g.mu, except where atomic). */
	uint8_t mode;
	uint32_t budget_ppm;
	char nvtx_focus[WIRE_NAME_MAX + 1];
	atomic_int active;         /* activity kinds enabled now */
	atomic_int focus_on;       /* focused mode: inside the range/profiler region */
	atomic_int capture_on;
	int64_t window_start_ns;   /* monotonic, when active */
	int64_t sub_deadline_ns;   /* full mode: release the subscriber by then */
	int64_t window_next_ns;
	int64_t interval_start_wall_ns;
	struct governor gov;

	/* Continuous mode's census (census.h): the callbacks add under cmu,
	 * taken with trylock on application threads (a busy lock makes the
	 * launch unobserved, counted in census_busy). */
	pthread_mutex_t cmu;
	struct census *census, *census_snap;
	struct census_means *census_means; /* each kernel's samples over the process's life (library thread) */
	struct census_pool *census_pool;   /* the recent windows' rates (library thread) */
	atomic_int_fast64_t first_seen_ns; /* monotonic, the first launch a window heard */
	uint64_t pool_observed_ns;        /* this interval's observed time from first_seen_ns on */
	int64_t interval_start_mono_ns;
	atomic_int census_on;             /* launch callbacks are counting */
	atomic_int census_first;          /* the first window waits for the first launch */
	atomic_int_fast64_t census_start_ns; /* monotonic, when the window began counting */
	atomic_int_fast64_t census_first_launch_ns; /* the first window's first launch */
	uint64_t observed_ns;             /* counted time of this interval's closed windows */
	atomic_uint_fast64_t cb_self_ns, cb_calls; /* the callbacks' own time, and how many */
	atomic_uint_fast64_t census_busy;
	struct evpair {
		CUevent a, b;
		int slot;
		const char *key;
		int64_t t_ns;             /* host time just after the start event was recorded */
		int64_t host_gap_ns;      /* from then to the end of the launch call */
		int idle;                 /* the stream had no work left when timing began */
		int start_done_at_exit;   /* the start event had completed when the call returned */
		CUevent f;                /* held: the event just before a (the pair's floor) */
		uint32_t hold_seq;        /* held: the value its stream waits for; 0 none */
		uint32_t gen;             /* in the ticket: a stale or foreign one is ignored */
		uint32_t context;         /* CUPTI's context id of the launch */
		uint32_t device;          /* CUPTI's device id of the launch */
		uint8_t cls;              /* the launch's size class (census_class) */
		atomic_int late;          /* the watchdog let its stream go: not timed */
		/* 0 free, 1 start recorded, 4 its end being recorded (by the
		 * launching thread, without the lock), 2 both, 3 being read.
		 * Taken 0 -> 1 and 3 -> 0 under cmu; 1 -> 4 -> 2|1 by the
		 * launching thread, 1|2 -> 3 by the reader, by exchange. */
		atomic_int state;
	} evpairs[EVPAIRS_MAX];           /* fields other than state: under cmu or the state's owner */
	unsigned nevpairs;
	uint64_t samples_lost;            /* timed launches whose events failed or timed out */
	uint64_t samples_ambiguous;       /* timed launches left out: see census_poll_samples */
	uint64_t samples_unmet;           /* ... of those, unheld ones whose floor was not back to back */
	double offset_floors;             /* floors taken off the last device's held samples */
	const char *offset_source;        /* ... whence: census_offset_floors */
	struct calib_result calib;        /* the last device's calibration (calib.h) */
	int calib_tried;                  /* ... tries */
	uint64_t calib_ns;                /* the library thread's time calibrating */
	uint64_t floor_outliers;          /* floors left out of floor_ns: not back to back */
	/* Holding an idle stream while a sampled launch is submitted (see
	 * census_time_start): one word of pinned, device-mapped host memory
	 * per pair, which its stream waits on. */
	_Atomic(uint32_t *) hold_flags;
	atomic_int hold_state;            /* 0 not tried, 1 allocating, 2 ready, -1 unavailable */
	uint32_t hold_next[EVPAIRS_MAX];  /* the last value used per pair (under cmu) */
	uint32_t gen_next;                /* under cmu */
	uint64_t holds, holds_late;       /* held samples; those let go by the watchdog */
	FILE *sample_log;                 /* GPULSE_INJECT_SAMPLE_LOG: each timed sample, raw (benchmarks) */
	uint64_t floor_n, floor_ns;       /* held pairs' event-to-event floors */
	uint64_t untimed_launches;        /* estimated launches of kernels no sample timed */
	int lasting;                      /* exact kernel tracing has run in this process */
	int holds_census;                 /* a census window holds the subscriber (library thread) */
	struct wire_capture pending_capture; /* asked before CUPTI was armed (under mu) */
	int pending_capture_set;
	/* GPULSE_DETACH: after a capture, cuptiFinalize at an application's
	 * API exit, to give back the cost exact tracing leaves (off by
	 * default: on CUPTI 13.0 / driver 580 it crashed while another thread
	 * launched). */
	atomic_int detach_armed;          /* 1: the next driver API exit detaches; 2: detaching now */
	atomic_int detach_done;           /* 1 detached, -1 refused (set in the callback) */
	atomic_int detach_result;         /* cuptiFinalize's result */
	int detach_sub;                   /* the library subscribed to hear that exit */
	int64_t detach_deadline_ns, detach_next_ns;
	uint64_t detaches;
	int detach_refused;
	int census_initial;               /* it is the first window (CENSUS_INITIAL_NS) */
	int64_t census_fixed_ns;          /* the library thread's time to open the window */
	int64_t census_cpu0_ns;           /* the library thread's CPU clock when it opened */
	uint64_t lib_window_cpu_ns;       /* the library thread's CPU time inside windows (dump) */
	uint64_t lib_window_ns;           /* the windows' time that was measured over */
	uint64_t census_split_ns;         /* the open window's time counted in earlier intervals */

	/* Counters. */
	atomic_uint_fast64_t launch_records; /* kernels + copies + memsets seen */
	int holds_subscriber;      /* focused modes: callbacks need one */
	/* Another profiler subscribing (interpose.h): its cuptiSubscribe
	 * comes to yield_subscriber, which takes smu, the lock of every
	 * change to the library's own subscriptions (the library thread's
	 * census, probe, detach and context wait), gives back what the
	 * library holds and sets yielded, after which it takes none. */
	pthread_mutex_t smu;
	atomic_int yielded;
	struct interpose ip;       /* the library thread's, after set-up; scanned: installed */
	uint64_t yields;           /* subscriptions given back to another profiler */
	atomic_int sub_until_context; /* full mode: subscribed until the first context exists */
	atomic_int arm_pending;    /* continuous mode: CUPTI not touched until the first tick */
	atomic_int uvm_state;      /* 0 not yet, 1 on, -1 given up (set on a callback, read by the thread) */
	/* Activity buffers registered with CUPTI: at the first tick
	 * (arm_continuous), or in continuous mode already at the first
	 * context, inside the first census window (context_created_early). */
	pthread_mutex_t bmu;
	atomic_int buffers_on;
	struct marker_open *markers; /* MARKERS_OPEN, under g.mu */
	atomic_uint_fast64_t records_total;
	atomic_uint_fast64_t records_dropped; /* CUPTI's drops, refused buffers, bounds */
	atomic_uint_fast64_t buffers_out;
	atomic_uint_fast64_t proc_ns, proc_records;
	atomic_uint_fast64_t nvtx_dropped;
	atomic_int_fast64_t active_since; /* monotonic, when tracing last turned on */
	atomic_uint_fast64_t traced_accum; /* traced time of windows already closed */
	uint64_t frames_dropped;   /* frames that could not be encoded or queued */
	uint64_t kernels_other;
	atomic_uint_fast64_t enable_failures;
	uint64_t windows;
	int64_t window_log[WINDOW_LOG][2]; /* monotonic open, close of the last windows (dump) */
	unsigned config_refused;   /* CONFIG frames asking for a focus we cannot give */

	struct client *client;
	pthread_t thread;
	int thread_started;
	int stop;
	int thread_done;               /* the thread left its loop (under mu) */
	int exited;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER, .cmu = PTHREAD_MUTEX_INITIALIZER,
	.smu = PTHREAD_MUTEX_INITIALIZER, .bmu = PTHREAD_MUTEX_INITIALIZER };

struct nvtx_frame {
	int64_t start_mono_ns;
	uint8_t focus;
	char name[WIRE_NAME_MAX + 1];
};

static _Thread_local struct {
	unsigned depth;
	struct nvtx_frame frames[NVTX_DEPTH];
} nvtx_stack;

/* NVTX start/end ranges (focused nvtx mode): unlike push/pop they may end
 * on another thread, so they live in one small table under their own
 * lock, held only to copy an entry in or out. */
#define NVTX_OPEN_MAX 64

static struct {
	pthread_mutex_t mu;
	struct nvtx_open {
		uint64_t id;           /* nvtxRangeId_t; 0: free */
		struct nvtx_frame f;
	} open[NVTX_OPEN_MAX];
} nvtx_ranges = { .mu = PTHREAD_MUTEX_INITIALIZER };

API const char *gpulse_inject_version(void);
API int gpulse_inject_status_json(char *buf, size_t len);
API int InitializeInjection(void);

/* One line on stderr, always prefixed; the library says little. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, LOG_PREFIX "%s\n", line);
}

static void step_aside(const char *why)
{
	g.stepped_aside = 1;
	g.mode = WIRE_MODE_OFF;
	str_copy(g.reason, sizeof g.reason, why);
	say("stepping aside, the application runs untraced: %s", why);
}

/* ---- names ---- */

typedef char *cxa_demangle_fn(const char *, char *, size_t *, int *);
static cxa_demangle_fn *demangler;

static void find_demangler(void)
{
	*(void **)(&demangler) = dlsym(RTLD_DEFAULT, "__cxa_demangle");
	if (!demangler) {
		void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
		if (h)
			*(void **)(&demangler) = dlsym(h, "__cxa_demangle");
	}
}

/* The kernel's name as torch.profiler (Kineto: abi::__cxa_demangle, the
 * mangled text when that fails) and Nsight Systems show it, fitted to
 * WIRE_KERNEL_NAME_MAX with a hash of the whole past it. */
static void demangle_into(const char *mangled, char out[WIRE_KERNEL_NAME_MAX + 1])
{
	int status = -1;
	char *d = NULL;
	if (demangler && mangled[0] == '_' && mangled[1] == 'Z')
		d = demangler(mangled, NULL, NULL, &status);
	wire_kernel_name_fit(out, (d && status == 0) ? d : mangled);
	free(d);
}

/* Demangled name for CUPTI's name pointer; under g.mu. */
static const char *kernel_name(const char *mangled)
{
	static char scratch[WIRE_KERNEL_NAME_MAX + 1];
	if (!mangled)
		return "(unnamed)";
	if (g.names) {
		uintptr_t h = ((uintptr_t)mangled >> 4) * 0x9e3779b97f4a7c15ull;
		unsigned i = (unsigned)(h >> 40) & (NAME_CACHE - 1);
		for (unsigned probe = 0; probe < 16; probe++, i = (i + 1) & (NAME_CACHE - 1)) {
			struct name_entry *e = &g.names[i];
			if (e->key == mangled)
				return e->name;
			if (!e->key) {
				demangle_into(mangled, scratch);
				e->name = strdup(scratch);
				if (!e->name)
					break;
				e->key = mangled;
				return e->name;
			}
		}
	}
	g.names_uncached++;
	demangle_into(mangled, scratch);
	return scratch;
}

/* ---- activity ---- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*max_records = 0;
	*buffer = NULL;
	*size = 0;
	/* Past the cap CUPTI drops records and counts them; we read its
	 * count when the next buffer completes. */
	if (atomic_fetch_add(&g.buffers_out, 1) >= BUFFERS_MAX) {
		atomic_fetch_sub(&g.buffers_out, 1);
		return;
	}
	uint8_t *b = aligned_alloc(8, BUFFER_BYTES);
	if (!b) {
		atomic_fetch_sub(&g.buffers_out, 1);
		return;
	}
	*buffer = b;
	*size = BUFFER_BYTES;
}

static uint8_t copy_kind(uint8_t cupti_kind)
{
	switch (cupti_kind) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return WIRE_COPY_H2D;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return WIRE_COPY_D2H;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return WIRE_COPY_D2D;
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return WIRE_COPY_PEER;
	default: return WIRE_COPY_OTHER;
	}
}

/* Host memory is pageable only when CUPTI says so; device memory on
 * both sides counts as pinned. */
static uint8_t copy_pinned(uint8_t kind, uint8_t src_kind, uint8_t dst_kind)
{
	uint8_t host = kind == WIRE_COPY_H2D ? src_kind : kind == WIRE_COPY_D2H ? dst_kind : 0;
	if (kind == WIRE_COPY_OTHER)
		host = src_kind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ? src_kind : dst_kind;
	return host != CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
}

/* Whether what happens now belongs to a capture (callbacks, which run
 * as it happens); under g.mu. */
static int capturing(void)
{
	return atomic_load_explicit(&g.capture_on, memory_order_relaxed) &&
	       capture_active(g.cap, clock_mono_ns());
}

/* Whether an activity record that started at CUPTI time ts belongs to a
 * capture (records arrive up to a flush later); under g.mu. */
static int captured(int cap, uint64_t ts)
{
	return cap && capture_active(g.cap, (int64_t)ts + g.cupti_to_wall_ns - g.mono_to_wall_ns);
}

/* NVTX ranges from MARKER records (continuous and full modes): a start
 * record names the range, the end record with the same id closes it.
 * Under g.mu. */
static void marker(uint32_t flags, uint32_t id, uint64_t ts, const char *name, int cap)
{
	if (!g.markers || id == 0)
		return;
	unsigned h = (id * 2654435761u) & (MARKERS_OPEN - 1);
	if (flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		for (unsigned p = 0; p < MARKERS_OPEN; p++, h = (h + 1) & (MARKERS_OPEN - 1)) {
			struct marker_open *m = &g.markers[h];
			if (m->id == 0) {
				m->id = id;
				m->start_ns = ts;
				str_copy(m->name, sizeof m->name, name ? name : "");
				return;
			}
		}
		atomic_fetch_add(&g.nvtx_dropped, 1); /* too many open ranges */
	} else if (flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		/* Linear probing: the run from the id's home slot ends at the
		 * first free slot (deletions re-seat what follows them). */
		for (unsigned p = 0; p < MARKERS_OPEN && g.markers[h].id;
		     p++, h = (h + 1) & (MARKERS_OPEN - 1)) {
			struct marker_open *m = &g.markers[h];
			if (m->id != id)
				continue;
			agg_add_range(g.cur, m->name, ts > m->start_ns ? ts - m->start_ns : 0);
			if (captured(cap, m->start_ns))
				capture_add(g.cap, WIRE_EV_RANGE, 0, 0, 0,
					    m->start_ns + (uint64_t)g.cupti_to_wall_ns,
					    ts + (uint64_t)g.cupti_to_wall_ns, 0, m->name);
			m->id = 0;
			/* Re-seat the entries after it in the probe run, so later
			 * lookups still find them. */
			unsigned j = (h + 1) & (MARKERS_OPEN - 1);
			while (g.markers[j].id) {
				struct marker_open t = g.markers[j];
				g.markers[j].id = 0;
				unsigned k = (t.id * 2654435761u) & (MARKERS_OPEN - 1);
				while (g.markers[k].id)
					k = (k + 1) & (MARKERS_OPEN - 1);
				g.markers[k] = t;
				j = (j + 1) & (MARKERS_OPEN - 1);
			}
			return;
		}
	}
}

static void process_record(CUpti_Activity *rec, int cap)
{
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
		struct agg_kernel_rec r = {
			.name = kernel_name(k->name), .device = k->deviceId, .context = k->contextId,
			.stream = k->streamId, .start_ns = k->start, .end_ns = k->end,
			.grid = { (uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ },
			.block = { (uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ },
			.registers = k->registersPerThread,
			.shared_bytes = (uint32_t)k->staticSharedMemory + (uint32_t)k->dynamicSharedMemory,
		};
		agg_add_kernel(g.cur, &r);
		atomic_fetch_add_explicit(&g.launch_records, 1, memory_order_relaxed);
		if (captured(cap, k->start))
			capture_add(g.cap, WIRE_EV_KERNEL, 0, k->deviceId, k->streamId,
				    k->start + (uint64_t)g.cupti_to_wall_ns,
				    k->end + (uint64_t)g.cupti_to_wall_ns, 0, r.name);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
		uint8_t kind = copy_kind(m->copyKind);
		struct agg_copy_rec r = {
			.kind = kind, .pinned = copy_pinned(kind, m->srcKind, m->dstKind),
			.device = m->deviceId, .context = m->contextId, .stream = m->streamId,
			.start_ns = m->start, .end_ns = m->end, .bytes = m->bytes,
		};
		agg_add_copy(g.cur, &r);
		atomic_fetch_add_explicit(&g.launch_records, 1, memory_order_relaxed);
		if (captured(cap, m->start))
			capture_add(g.cap, WIRE_EV_COPY, kind, m->deviceId, m->streamId,
				    m->start + (uint64_t)g.cupti_to_wall_ns,
				    m->end + (uint64_t)g.cupti_to_wall_ns, m->bytes,
				    agg_copy_kind_name(kind));
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)rec;
		struct agg_copy_rec r = {
			.kind = WIRE_COPY_PEER, .pinned = 1, .device = m->deviceId,
			.context = m->contextId, .stream = m->streamId, .start_ns = m->start,
			.end_ns = m->end, .bytes = m->bytes,
		};
		agg_add_copy(g.cur, &r);
		atomic_fetch_add_explicit(&g.launch_records, 1, memory_order_relaxed);
		if (captured(cap, m->start))
			capture_add(g.cap, WIRE_EV_COPY, WIRE_COPY_PEER, m->deviceId, m->streamId,
				    m->start + (uint64_t)g.cupti_to_wall_ns,
				    m->end + (uint64_t)g.cupti_to_wall_ns, m->bytes, "peer");
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
		struct agg_copy_rec r = {
			.kind = WIRE_COPY_MEMSET, .pinned = 1, .device = m->deviceId,
			.context = m->contextId, .stream = m->streamId, .start_ns = m->start,
			.end_ns = m->end, .bytes = m->bytes,
		};
		agg_add_copy(g.cur, &r);
		atomic_fetch_add_explicit(&g.launch_records, 1, memory_order_relaxed);
		if (captured(cap, m->start))
			capture_add(g.cap, WIRE_EV_MEMSET, WIRE_COPY_MEMSET, m->deviceId, m->streamId,
				    m->start + (uint64_t)g.cupti_to_wall_ns,
				    m->end + (uint64_t)g.cupti_to_wall_ns, m->bytes, "memset");
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)rec;
		/* A stream waiting on an event is GPU-side ordering, not a
		 * host wait. */
		if (s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT)
			break;
		struct agg_sync_rec r = {
			.device = 0, .context = s->contextId,
			.stream = s->streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? AGG_STREAM_NONE
										    : s->streamId,
			.start_ns = s->start, .end_ns = s->end,
		};
		/* The record names no device; the context's kernels do. */
		for (unsigned i = 0; i < g.cur->nscopes; i++)
			if (g.cur->scopes[i].context == s->contextId)
				r.device = g.cur->scopes[i].device;
		agg_add_sync(g.cur, &r);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MARKER: {
		const CUpti_ActivityMarker2 *mk = (const CUpti_ActivityMarker2 *)rec;
		marker(mk->flags, mk->id, mk->timestamp, mk->name, cap);
		break;
	}
	case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
		const CUpti_ActivityUnifiedMemoryCounter3 *u =
			(const CUpti_ActivityUnifiedMemoryCounter3 *)rec;
		enum agg_uvm_counter c;
		uint32_t dev = u->srcId;
		switch (u->counterKind) {
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
			c = AGG_UVM_BYTES_H2D;
			dev = u->dstId;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
			c = AGG_UVM_BYTES_D2H;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
			/* One record per CPU fault; its value is not a count
			 * (the H200 showed address-sized numbers there). */
			agg_add_uvm(g.cur, 0, AGG_UVM_CPU_FAULTS, 1);
			return;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
			c = AGG_UVM_GPU_FAULTS;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING:
			c = AGG_UVM_THRASHING;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING:
			c = AGG_UVM_THROTTLING;
			break;
		default:
			return;
		}
		if (dev >= 1024)
			dev = 0; /* a CPU id or "invalid" on the other side */
		agg_add_uvm(g.cur, dev, c, u->value);
		break;
	}
	default:
		break;
	}
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	(void)size;
	if (buffer && valid > 0 && g.cur) {
		int64_t t0 = clock_mono_ns();
		uint64_t n = 0;
		pthread_mutex_lock(&g.mu);
		int cap = atomic_load(&g.capture_on);
		uint64_t dropped_before = g.cur->dropped;
		CUpti_Activity *rec = NULL;
		while (g.cupti.activity_get_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
			process_record(rec, cap);
			n++;
		}
		uint64_t bound_drops = g.cur->dropped - dropped_before;
		pthread_mutex_unlock(&g.mu);
		atomic_fetch_add(&g.records_total, n);
		atomic_fetch_add(&g.records_dropped, bound_drops);
		atomic_fetch_add(&g.proc_ns, (uint64_t)(clock_mono_ns() - t0));
		atomic_fetch_add(&g.proc_records, n);
	}
	size_t dropped = 0;
	if (g.cupti.activity_get_num_dropped_records &&
	    g.cupti.activity_get_num_dropped_records(ctx, stream_id, &dropped) == CUPTI_SUCCESS &&
	    dropped)
		atomic_fetch_add(&g.records_dropped, dropped);
	if (buffer) {
		free(buffer);
		atomic_fetch_sub(&g.buffers_out, 1);
	}
}

/* Turn the traced kinds on or off. Called from the library's thread,
 * and from callbacks of the focused modes. */
static void set_tracing(int on)
{
	if (!g.have_cupti || g.is_fork_child)
		return;
	int was = atomic_exchange(&g.active, on);
	if (was == on)
		return;
	int64_t now = clock_mono_ns();
	if (on && !g.lasting) {
		/* CUPTI 13.0 leaves launches dearer for good once kernels were
		 * traced (docs/internals/inject.md): said once, and reported. */
		g.lasting = 1;
		say("exact kernel tracing is on: on CUPTI 13.0 this process's kernel launches stay "
		    "about 12-30%% dearer until it exits");
	}
	if (on)
		atomic_store(&g.active_since, now);
	else
		atomic_fetch_add(&g.traced_accum, (uint64_t)(now - atomic_load(&g.active_since)));
	for (size_t i = 0; i < NKINDS; i++) {
		if (kind_skipped(traced_kinds[i], g.cfg.skip))
			continue;
		CUptiResult r = on ? g.cupti.activity_enable(traced_kinds[i])
				   : g.cupti.activity_disable(traced_kinds[i]);
		/* May run on an application thread (focused modes): no lock. */
		if (r != CUPTI_SUCCESS && atomic_fetch_add(&g.enable_failures, 1) == 0)
			say("cannot %s activity kind %d: %s (counted; going on)",
			    on ? "enable" : "disable", (int)traced_kinds[i],
			    cupti_lib_strerror(&g.cupti, r));
	}
}

/* Whether another CUPTI client holds the subscriber now. In continuous
 * and full modes the library holds none (it needs no callbacks there), so
 * a profiler that starts later (torch.profiler, whose CUPTI setup fails
 * if a subscriber exists) can take CUPTI; the library checks before it
 * touches CUPTI's state and gives way when it sees one. */
static void CUPTIAPI probe_cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId c, const void *x)
{
	(void)u;
	(void)d;
	(void)c;
	(void)x;
}

static int cupti_taken(void)
{
	CUpti_SubscriberHandle s;
	CUptiResult r = g.cupti.subscribe(&s, probe_cb, NULL);
	if (r == CUPTI_SUCCESS) {
		g.cupti.unsubscribe(s);
		return 0;
	}
	return r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}

#define GIVE_WAY_FOUND "another profiler started using CUPTI (torch.profiler, Nsight); " \
		       "gpulse leaves it to them"
#define GIVE_WAY_YIELDED "another profiler subscribed to CUPTI (torch.profiler, Nsight): " \
			 "gpulse gave its subscriber back and leaves CUPTI to it"

/* Another profiler took CUPTI: leave every CUPTI setting as it is (the
 * other tool owns them now) and stop tracing for good. */
static void give_way(const char *why)
{
	g.have_cupti = 0;
	atomic_store(&g.active, 0);
	step_aside(why);
}

/* ---- callbacks ---- */

/* A range opens: name it, and turn tracing on if it is the focus. */
static void range_begin(struct nvtx_frame *f, const char *name)
{
	str_copy(f->name, sizeof f->name, name ? name : "");
	f->focus = g.mode == WIRE_MODE_FOCUSED_NVTX && strcmp(f->name, g.nvtx_focus) == 0;
	if (f->focus && atomic_fetch_add(&g.focus_on, 1) == 0)
		set_tracing(1);
	f->start_mono_ns = clock_mono_ns();
}

static void range_end(const struct nvtx_frame *f, int64_t end);

static void nvtx_push(const char *name)
{
	if (nvtx_stack.depth >= NVTX_DEPTH) {
		nvtx_stack.depth++; /* keep pops balanced; the range is not timed */
		atomic_fetch_add(&g.nvtx_dropped, 1);
		return;
	}
	range_begin(&nvtx_stack.frames[nvtx_stack.depth++], name);
}

static void nvtx_pop(void)
{
	int64_t end = clock_mono_ns();
	if (nvtx_stack.depth == 0)
		return; /* a pop without a push seen (the range began before us) */
	if (nvtx_stack.depth > NVTX_DEPTH) {
		nvtx_stack.depth--;
		return;
	}
	range_end(&nvtx_stack.frames[--nvtx_stack.depth], end);
}

/* nvtxRangeStart*: CUPTI passes the new range's id as the call's return
 * value. A range whose id is not given cannot be matched to its end, so
 * it is not timed and never turns tracing on (counted). */
static void nvtx_start(const char *name, const void *ret)
{
	uint64_t id = ret ? *(const nvtxRangeId_t *)ret : 0;
	if (id == 0) {
		atomic_fetch_add(&g.nvtx_dropped, 1);
		return;
	}
	struct nvtx_frame f;
	range_begin(&f, name);
	pthread_mutex_lock(&nvtx_ranges.mu);
	struct nvtx_open *slot = NULL;
	for (int i = 0; i < NVTX_OPEN_MAX && !slot; i++)
		if (nvtx_ranges.open[i].id == 0)
			slot = &nvtx_ranges.open[i];
	if (slot) {
		slot->id = id;
		slot->f = f;
	}
	pthread_mutex_unlock(&nvtx_ranges.mu);
	if (!slot) {
		/* Too many open: untimed, and its focus is given back now. */
		atomic_fetch_add(&g.nvtx_dropped, 1);
		if (f.focus && atomic_fetch_sub(&g.focus_on, 1) == 1)
			set_tracing(0);
	}
}

static void nvtx_end(uint64_t id)
{
	int64_t end = clock_mono_ns();
	struct nvtx_frame f;
	int found = 0;
	pthread_mutex_lock(&nvtx_ranges.mu);
	for (int i = 0; i < NVTX_OPEN_MAX && !found; i++)
		if (id && nvtx_ranges.open[i].id == id) {
			f = nvtx_ranges.open[i].f;
			nvtx_ranges.open[i].id = 0;
			found = 1;
		}
	pthread_mutex_unlock(&nvtx_ranges.mu);
	if (found)
		range_end(&f, end); /* else it began before us, or was dropped */
}

static void range_end(const struct nvtx_frame *f, int64_t end)
{
	uint64_t dur = end > f->start_mono_ns ? (uint64_t)(end - f->start_mono_ns) : 0;
	if (f->focus && atomic_fetch_sub(&g.focus_on, 1) == 1)
		set_tracing(0);
	/* Never wait on an application thread: if the lock is busy (a
	 * flush is copying the tables), the range is counted as dropped. */
	if (pthread_mutex_trylock(&g.mu) != 0) {
		atomic_fetch_add(&g.nvtx_dropped, 1);
		return;
	}
	if (g.cur)
		agg_add_range(g.cur, f->name, dur);
	if (capturing())
		capture_add(g.cap, WIRE_EV_RANGE, 0, 0, 0,
			    (uint64_t)(f->start_mono_ns + g.mono_to_wall_ns),
			    (uint64_t)(end + g.mono_to_wall_ns), 0, f->name);
	pthread_mutex_unlock(&g.mu);
}

/* Unified-memory counters need a context: enabling them in
 * InitializeInjection fails with NOT_READY, so the library's thread tries
 * each tick until a context exists (and focused modes from the
 * context-created callback). */
static void enable_uvm(void)
{
	if (g.uvm_state != 0 || !g.cupti.activity_configure_uvm)
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
	CUptiResult r = g.cupti.activity_configure_uvm(cfg, 4);
	if (r == CUPTI_SUCCESS)
		r = g.cupti.activity_enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	if (r == CUPTI_SUCCESS) {
		g.uvm_state = 1;
	} else if (r != CUPTI_ERROR_NOT_READY) {
		g.uvm_state = -1;
		say("unified-memory counters unavailable: %s; going on without them",
		    cupti_lib_strerror(&g.cupti, r));
	}
}

static void census_api(CUpti_CallbackId cbid, const CUpti_CallbackData *d);
static void context_created_early(void);

static void CUPTIAPI on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				 const void *data)
{
	(void)user;
	if (g.exited || g.is_fork_child || calib_this_thread())
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
		if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED && !(g.cfg.skip & INJECT_SKIP_UVM)) {
			if (g.mode == WIRE_MODE_CONTINUOUS)
				context_created_early();
			else
				enable_uvm(); /* fails with NOT_READY before a context exists */
		}
		return;
	}
	const CUpti_CallbackData *d = data;
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && g.mode == WIRE_MODE_CONTINUOUS) {
		census_api(cbid, d);
		return;
	}
	if (g.mode != WIRE_MODE_FOCUSED_PROFILER)
		return;
	int start = (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
		     cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000) ||
		    (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
	/* The runtime's start calls the driver's: both fire, and turning
	 * tracing on twice is a no-op. On at exit of start, off at entry of
	 * stop, so only the work in between is traced. */
	if (start && d->callbackSite == CUPTI_API_EXIT) {
		atomic_store(&g.focus_on, 1);
		set_tracing(1);
	} else if (!start && d->callbackSite == CUPTI_API_ENTER) {
		atomic_store(&g.focus_on, 0);
		set_tracing(0);
	}
}

/* The library's thread has no CUDA context, and CUPTI enables the
 * unified-memory counters only with one current. Borrow the primary
 * context of the first device whose primary context the application
 * already made active (never create one: that would take GPU memory on a
 * device the application may not use). */
static struct {
	int loaded;
	__typeof__(cuDeviceGetCount) *device_count;
	__typeof__(cuDeviceGet) *device_get;
	__typeof__(cuDevicePrimaryCtxGetState) *primary_state;
	__typeof__(cuDevicePrimaryCtxRetain) *primary_retain;
	__typeof__(cuDevicePrimaryCtxRelease) *primary_release;
	__typeof__(cuCtxPushCurrent) *push;
	__typeof__(cuCtxPopCurrent) *pop;
	/* Timing a sample of the census's launches. */
	__typeof__(cuEventCreate) *event_create;
	__typeof__(cuEventRecord) *event_record, *event_record_ptsz;
	__typeof__(cuEventQuery) *event_query;
	__typeof__(cuEventElapsedTime) *event_elapsed;
	__typeof__(cuEventDestroy) *event_destroy;
	__typeof__(cuStreamIsCapturing) *is_capturing, *is_capturing_ptsz;
	__typeof__(cuStreamQuery) *stream_query, *stream_query_ptsz;
	int can_time;
	__typeof__(cuStreamWaitValue32) *wait_value, *wait_value_ptsz;
	__typeof__(cuMemHostAlloc) *host_alloc;
} drv;

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

static void enable_uvm_from_thread(void)
{
	load_driver_fns();
	if (!drv.device_count || !drv.device_get || !drv.primary_state || !drv.primary_retain ||
	    !drv.primary_release || !drv.push || !drv.pop) {
		g.uvm_state = -1;
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

static uint64_t window_records_base;

/* The dump's log: window number g.windows opened at `now`, not yet closed. */
static void log_window_open(int64_t now)
{
	g.window_log[g.windows % WINDOW_LOG][0] = now;
	g.window_log[g.windows % WINDOW_LOG][1] = 0;
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
	if (g.cfg.skip & INJECT_SKIP_SAMPLES)
		return 0;
	if (!x)
		x = (uint64_t)clock_mono_ns() ^ ((uint64_t)(uintptr_t)&x << 17) ^ 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x % census_sample_stride(drawn, g.cfg.sample_every) == 0;
}

/* CUPTI's device of a context, cached (under g.cmu). */
static uint32_t census_device(CUcontext ctx, uint32_t uid)
{
	static struct { uint32_t uid, dev; int used; } cache[CENSUS_CONTEXTS];
	for (int i = 0; i < CENSUS_CONTEXTS; i++)
		if (cache[i].used && cache[i].uid == uid)
			return cache[i].dev;
	uint32_t dev = 0;
	if (g.cupti.get_device_id && ctx)
		g.cupti.get_device_id(ctx, &dev);
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
	int st = atomic_load(&g.hold_state);
	if (st == 2)
		return atomic_load(&g.hold_flags);
	if (st != 0 || !drv.wait_value || !drv.wait_value_ptsz || !drv.host_alloc ||
	    (g.cfg.skip & INJECT_SKIP_HOLD) || !atomic_compare_exchange_strong(&g.hold_state, &st, 1))
		return NULL;
	void *p = NULL;
	if (drv.host_alloc(&p, EVPAIRS_MAX * sizeof(uint32_t),
			   CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS || !p) {
		atomic_store(&g.hold_state, -1);
		return NULL;
	}
	memset(p, 0, EVPAIRS_MAX * sizeof(uint32_t));
	atomic_store(&g.hold_flags, (uint32_t *)p);
	atomic_store(&g.hold_state, 2);
	return p;
}

/* Let a held stream go: the word never moves backwards (a late second
 * release of an older value must not re-arm a newer wait). */
static void hold_release(unsigned i, uint32_t seq)
{
	uint32_t *flags = atomic_load(&g.hold_flags);
	if (!flags || !seq)
		return;
	uint32_t cur = __atomic_load_n(&flags[i], __ATOMIC_ACQUIRE);
	while ((int32_t)(cur - seq) < 0 &&
	       !__atomic_compare_exchange_n(&flags[i], &cur, seq, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		;
}

/* Every pair's hold let go: after an unsubscribe or a detach, whose
 * launch exits may never be heard (library thread, or exit). */
static void hold_release_all(void)
{
	if (!atomic_load(&g.hold_flags))
		return;
	pthread_mutex_lock(&g.cmu);
	for (unsigned i = 0; i < EVPAIRS_MAX; i++)
		if (g.hold_next[i])
			hold_release(i, g.hold_next[i]);
	pthread_mutex_unlock(&g.cmu);
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
				  uint32_t context, uint32_t device, uint8_t cls)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if ((ptsz ? drv.is_capturing_ptsz : drv.is_capturing)(stream, &st) != CUDA_SUCCESS ||
	    st != CU_STREAM_CAPTURE_STATUS_NONE)
		return 0;
	int idle = (ptsz ? drv.stream_query_ptsz : drv.stream_query)(stream) == CUDA_SUCCESS;
	uint32_t *flags = idle && seen ? hold_flags() : NULL;
	if (pthread_mutex_trylock(&g.cmu) != 0)
		return 0; /* never wait on an application thread */
	unsigned i = 0;
	while (i < EVPAIRS_MAX && atomic_load(&g.evpairs[i].state) != 0)
		i++;
	struct evpair *e = &g.evpairs[i < EVPAIRS_MAX ? i : 0];
	uint32_t seq = 0, gen = 0;
	if (i < EVPAIRS_MAX) {
		atomic_store(&e->state, 5); /* being set up: the reader leaves it */
		gen = ++g.gen_next;
		if (flags) {
			seq = ++g.hold_next[i];
			if (!seq)
				seq = g.hold_next[i] = 1;
		}
	}
	pthread_mutex_unlock(&g.cmu);
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
	struct evpair *e = &g.evpairs[idx - 1];
	int one = 1;
	if (!atomic_compare_exchange_strong(&e->state, &one, 4))
		return; /* the reader timed it out meanwhile (and let it go): counted as lost */
	if (e->gen != (uint32_t)(ticket >> 16)) {
		atomic_store(&e->state, 1); /* another launch's pair */
		return;
	}
	int done = !e->hold_seq && drv.event_query(e->a) == CUDA_SUCCESS;
	CUevent b = NULL;
	int ok = drv.event_create(&b, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
		 (ptsz ? drv.event_record_ptsz : drv.event_record)(b, stream) == CUDA_SUCCESS;
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
static void census_api(CUpti_CallbackId cbid, const CUpti_CallbackData *d)
{
	int armed = 1;
	if (d->callbackSite == CUPTI_API_EXIT && atomic_load_explicit(&g.detach_armed, memory_order_relaxed) == 1 &&
	    atomic_compare_exchange_strong(&g.detach_armed, &armed, 2)) {
		/* At an API exit, as CUPTI wants cuptiFinalize called: every
		 * subscription, callback, kind and buffer of CUPTI's is gone
		 * after it; the library's thread sets up the census again. It
		 * touches no CUPTI setting while this runs (detach_armed is
		 * 2 until the result is in). */
		CUptiResult r = g.cupti.finalize();
		atomic_store(&g.detach_result, (int)r);
		atomic_store(&g.detach_done, r == CUPTI_SUCCESS ? 1 : -1);
		atomic_store(&g.detach_armed, 0);
		return;
	}
	if (g.exited || g.is_fork_child)
		return;
	/* A launch's exit is heard even when the window closed after its
	 * enter: a held stream waits on it. */
	int on = atomic_load_explicit(&g.census_on, memory_order_relaxed);
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
		if (atomic_load_explicit(&g.census_first, memory_order_relaxed)) {
			/* The first window's rate is measured from its first launch. */
			int_fast64_t zero = 0;
			atomic_compare_exchange_strong(&g.census_first_launch_ns, &zero, t0);
			atomic_store(&g.census_first, 0);
		}
		if (!atomic_load_explicit(&g.first_seen_ns, memory_order_relaxed)) {
			int_fast64_t zero = 0;
			atomic_compare_exchange_strong(&g.first_seen_ns, &zero, t0);
		}
		atomic_fetch_add_explicit(&g.launch_records, 1, memory_order_relaxed);
		if (d->correlationData)
			*d->correlationData = 0;
		if (pthread_mutex_trylock(&g.cmu) != 0) {
			atomic_fetch_add(&g.census_busy, 1);
			goto out;
		}
		uint32_t dev = census_device(d->context, d->contextUid);
		int slot = census_launch(g.census, d->symbolName, d->contextUid, dev, grid, block, shared);
		int seen = !g.census->k[slot].is_other && g.census->k[slot].launches > 1;
		uint8_t cls = g.census->k[slot].cls;
		int take = drv.can_time && d->correlationData &&
			   sample_this(census_means_drawn(g.census_means, d->symbolName, d->contextUid, cls));
		if (take)
			census_means_draw(g.census_means, d->symbolName, d->contextUid, cls);
		pthread_mutex_unlock(&g.cmu);
		if (take)
			*d->correlationData = census_time_start(slot, d->symbolName, stream, ptsz, seen,
								     d->contextUid, dev, cls);
	} else if (d->callbackSite == CUPTI_API_ENTER && on) {
		uint8_t kind;
		unsigned unit;
		if (!census_copy_kind(cbid, &kind, &unit) || !d->functionParams)
			goto out;
		const struct copy_head *h = d->functionParams;
		atomic_fetch_add_explicit(&g.launch_records, 1, memory_order_relaxed);
		if (pthread_mutex_trylock(&g.cmu) != 0) {
			atomic_fetch_add(&g.census_busy, 1);
			goto out;
		}
		census_copy(g.census, d->contextUid, census_device(d->context, d->contextUid), kind,
			    (uint64_t)h->count * unit);
		pthread_mutex_unlock(&g.cmu);
	}
out:
	atomic_fetch_add_explicit(&g.cb_self_ns, (uint64_t)(clock_mono_ns() - t0), memory_order_relaxed);
	if (d->callbackSite == CUPTI_API_ENTER)
		atomic_fetch_add_explicit(&g.cb_calls, 1, memory_order_relaxed);
}

/* The floors a held sample of device `dev` (CUPTI's id, the CUDA
 * ordinal) holds besides its kernel (census_offset_floors): the device's
 * calibration (calib.h), measured the first time one of its samples is
 * read, and tried again (CALIB_TRIES at most, CALIB_RETRY_NS apart) when
 * the GPU was too busy to measure; the model's meanwhile. Library thread
 * only. */
static double offset_floors(uint32_t dev)
{
	enum { DEVS = 64 };
	static double floors[DEVS];
	static int tries[DEVS];
	static bool settled[DEVS];
	static int64_t next_try[DEVS]; /* 0: the first read tries at once */
	if (g.cfg.offset_floors >= 0 || dev >= DEVS || (g.cfg.skip & INJECT_SKIP_CALIBRATE)) {
		g.offset_floors = census_offset_floors(g.cfg.offset_floors, NULL, &g.offset_source);
		return g.offset_floors;
	}
	int64_t now = clock_mono_ns();
	if (!settled[dev] && now >= next_try[dev]) {
		struct calib_result r;
		calib_measure((int)dev, &r);
		g.calib_ns += (uint64_t)(clock_mono_ns() - now);
		floors[dev] = census_offset_floors(-1, &r, &g.offset_source);
		g.calib = r;
		g.calib_tried++;
		g.offset_floors = floors[dev];
		settled[dev] = r.ok || !r.retry || ++tries[dev] >= CALIB_TRIES;
		next_try[dev] = now + CALIB_RETRY_NS;
	}
	return floors[dev];
}

/* Read the events of timed launches that completed (library thread): the
 * driver calls run outside the lock. */
static void census_poll_samples(int64_t now)
{
	if (!drv.can_time)
		return;
	struct evpair todo[EVPAIRS_MAX];
	unsigned idx[EVPAIRS_MAX], n = 0;
	pthread_mutex_lock(&g.cmu);
	for (unsigned i = 0; i < EVPAIRS_MAX; i++) {
		struct evpair *e = &g.evpairs[i];
		int st = atomic_load(&e->state);
		if (st == 1 && e->hold_seq && now - e->t_ns > HOLD_MAX_NS && !atomic_load(&e->late)) {
			/* The watchdog: a held stream whose launch has not
			 * returned is let go (its time is then not the
			 * kernel's alone). */
			atomic_store(&e->late, 1);
			hold_release(i, e->hold_seq);
			g.holds_late++;
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
			todo[n].late = atomic_load(&e->late);
			idx[n++] = i;
		}
	}
	pthread_mutex_unlock(&g.cmu);
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
	pthread_mutex_lock(&g.cmu);
	for (unsigned j = 0; j < n; j++) {
		struct evpair *e = &g.evpairs[idx[j]];
		if (done[j] == 0) {
			atomic_store(&e->state, 2);
			continue;
		}
		if (done[j] == 1 && floor_ns[j] != UINT64_MAX) {
			/* A floor is two events met back to back: one many times
			 * the mean so far was not (the GPU switched to other work
			 * between them), and would move every sample's offset. */
			int back_to_back = census_floor_met(floor_ns[j], g.floor_ns, g.floor_n);
			if (g.floor_n >= 8 && floor_ns[j] > 4 * g.floor_ns / g.floor_n)
				g.floor_outliers++;
			else
				g.floor_n++, g.floor_ns += floor_ns[j];
			/* Unheld, behind earlier work, with a floor half again the
			 * mean: the stream drained between the floor and start
			 * events, so the start completed as it was recorded and
			 * the interval holds the launch call (an H100 round of
			 * 2 us kernels read 6.2 us from such samples). Left out,
			 * as an ambiguous sample is. */
			if (!todo[j].hold_seq && !back_to_back) {
				done[j] = -2;
				g.samples_unmet++;
			}
		}
		if (done[j] == 1) {
			/* Between the start and end events the GPU takes two
			 * steps besides the kernel: the launch itself and the
			 * end event, each near what one event takes after
			 * another (the floor): how many floors, by the
			 * device (offset_floors). */
			uint64_t off = g.floor_n ? (uint64_t)(off_floors[j] * (double)g.floor_ns /
								  (double)g.floor_n + 0.5)
						 : 0;
			if (g.sample_log)
				fprintf(g.sample_log, "%s\t%llu\t%lld\t%d\t%d\n", todo[j].key ? kernel_name(todo[j].key) : "?",
					(unsigned long long)dur[j],
					floor_ns[j] != UINT64_MAX ? (long long)floor_ns[j] : -1LL,
					todo[j].hold_seq != 0, todo[j].idle);
			uint64_t kernel_ns = dur[j] > off ? dur[j] - off : 0;
			census_sample(g.census, todo[j].slot, todo[j].key, kernel_ns);
			/* Also when the interval it belongs to was flushed before
			 * its events were read (census_sample drops it then). */
			census_means_add(g.census_means, todo[j].key, todo[j].context, todo[j].cls, kernel_ns);
			if (todo[j].hold_seq)
				g.holds++;
		} else {
			if (done[j] == -2)
				g.samples_ambiguous++;
			else
				g.samples_lost++;
			/* Its draw is given back: a kernel whose samples are
			 * often left out still gets its early ones. */
			census_means_discard(g.census_means, todo[j].key, todo[j].context, todo[j].cls);
		}
		atomic_store(&e->state, 0);
	}
	pthread_mutex_unlock(&g.cmu);
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
	CUptiResult r = g.cupti.subscribe(&g.sub, on_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		give_way(GIVE_WAY_FOUND);
		return 0;
	}
	if (r != CUPTI_SUCCESS)
		return 0;
	for (size_t i = 0; i < sizeof census_cbids / sizeof census_cbids[0]; i++)
		g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API, census_cbids[i]);
	g.holds_census = 1;
	window_records_base = atomic_load(&g.launch_records);
	if (g.census_initial)
		atomic_store(&g.census_first, 1);
	atomic_store(&g.census_start_ns, now);
	atomic_store(&g.census_on, 1);
	log_window_open(now);
	g.census_fixed_ns = clock_mono_ns() - t0;
	g.census_cpu0_ns = clock_thread_cpu_ns();
	return 1;
}

/* A window's counted time from `start` to `now` that lies after the first
 * launch any window heard: the time the pool's rates are taken over (a
 * program's set-up before its first launch is not its launch rate). */
static uint64_t pooled_time(int64_t start, int64_t now)
{
	int64_t first = atomic_load(&g.first_seen_ns);
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
	atomic_store(&g.census_on, 0);
	g.cupti.unsubscribe(g.sub);
	hold_release_all(); /* an exit that was not heard lets nothing wait */
	g.holds_census = 0;
	int64_t start = atomic_load(&g.census_start_ns);
	uint64_t counted = start > 0 && now > start ? (uint64_t)(now - start) : 0;
	g.observed_ns += counted;
	g.pool_observed_ns += pooled_time(start, now);
	uint64_t on = counted + g.census_split_ns;
	g.census_split_ns = 0;
	int64_t first = atomic_exchange(&g.census_first_launch_ns, 0);
	if (g.census_initial && first > 0 && now > first)
		on = (uint64_t)(now - first); /* the rate, from the first launch */
	atomic_store(&g.census_start_ns, 0);
	atomic_store(&g.census_first, 0);
	g.census_initial = 0;
	uint64_t recs = atomic_load(&g.launch_records) - window_records_base;
	uint64_t sn = atomic_exchange(&g.cb_self_ns, 0), sc = atomic_exchange(&g.cb_calls, 0);
	/* The library thread's own work while the window was open (reading
	 * the samples' events, the watchdog) is the window's too: on a
	 * process whose threads fill its cores it is time the application
	 * does not get, so it is priced per launch like the callbacks'. */
	int64_t cpu = g.census_cpu0_ns > 0 ? clock_thread_cpu_ns() - g.census_cpu0_ns : 0;
	g.census_cpu0_ns = 0;
	if (cpu > 0 && counted > 0) {
		g.lib_window_cpu_ns += (uint64_t)cpu;
		g.lib_window_ns += counted;
		sn += (uint64_t)cpu;
	}
	if (sc)
		governor_observe_processing(&g.gov, (double)sn / (double)sc);
	double fixed = (double)(g.census_fixed_ns + (clock_mono_ns() - t0));
	governor_window_done(&g.gov, on, recs, 2 * fixed);
	g.window_log[g.windows % WINDOW_LOG][1] = now;
	g.windows++;
	g.window_next_ns = now + (int64_t)g.gov.off_ns;
}

/* An open census window ends outside the governor's plan, its counted
 * time kept for the interval's estimate: after a detach (CUPTI holds no
 * subscriber any more: unsubscribe 0), or when another profiler
 * subscribes (the window's subscription given back: 1). */
static void census_drop_window(int64_t now, int unsubscribe)
{
	atomic_store(&g.census_on, 0);
	if (unsubscribe && g.holds_census)
		g.cupti.unsubscribe(g.sub);
	hold_release_all(); /* no exit of ours is heard from here on */
	int64_t start = atomic_exchange(&g.census_start_ns, 0);
	if (g.holds_census && start > 0 && now > start) {
		g.observed_ns += (uint64_t)(now - start);
		g.pool_observed_ns += pooled_time(start, now);
	}
	g.holds_census = 0;
	g.census_split_ns = 0;
}

/* The library's thread, each turn: open and close census windows. The
 * first window (opened at CUDA's start) counts from the first launch;
 * without one for SUB_HOLD_MAX_NS it gives the subscriber back. */
static void census_tick(int64_t now)
{
	if (g.holds_census) {
		int64_t start = atomic_load(&g.census_start_ns);
		if (g.census_initial && atomic_load(&g.census_first)) {
			if (now >= g.sub_deadline_ns)
				census_close(now); /* no launch came: give the subscriber back */
		} else if (g.census_initial) {
			double spent = (double)(atomic_load(&g.launch_records) - window_records_base) *
				       g.gov.cost_ns;
			if (spent >= (double)CENSUS_INITIAL_NS || now >= g.sub_deadline_ns)
				census_close(now);
		} else if (now >= start + (int64_t)g.gov.on_ns) {
			census_close(now);
			if (g.gov.off_ns == 0)
				census_open(now);
		}
	} else if (now >= g.window_next_ns) {
		census_open(now);
	}
}

/* GPULSE_DETACH, on the library's thread: once exact tracing has run and
 * no capture is on, arm a cuptiFinalize at the next driver API exit (the
 * census's callbacks if a window is open, else a subscription of its
 * own); then take the result. */
static void detach_tick(int64_t now)
{
	int done = atomic_exchange(&g.detach_done, 0);
	if (done) {
		if (done > 0) {
			/* CUPTI is as at the process's start (no subscriber any
			 * more): arm again at the next tick (buffers, markers,
			 * the census). An open census window ends here. */
			g.detach_sub = 0;
			g.detaches++;
			g.lasting = 0;
			census_drop_window(now, 0); /* no exit is heard after cuptiFinalize */
			g.have_cupti = 0;
			g.uvm_state = 0;
			atomic_store(&g.buffers_on, 0);
			atomic_store(&g.arm_pending, 1);
			say("detached from CUPTI after exact tracing (GPULSE_DETACH): launches are back at "
			    "their cost before it; the census starts again");
		} else {
			g.detach_refused = 1;
			if (g.detach_sub) {
				g.cupti.unsubscribe(g.sub);
				g.detach_sub = 0;
			}
			say("cuptiFinalize refused: %s; the lasting cost of exact tracing stays (not tried again)",
			    cupti_lib_strerror(&g.cupti, (CUptiResult)atomic_load(&g.detach_result)));
		}
		return;
	}
	if (atomic_load(&g.detach_armed)) {
		int armed = 1;
		if (now < g.detach_deadline_ns || !atomic_compare_exchange_strong(&g.detach_armed, &armed, 0))
			return; /* armed, or detaching right now */
		/* No driver API call came: let the subscription go, later again. */
		if (g.detach_sub) {
			g.cupti.unsubscribe(g.sub);
			g.detach_sub = 0;
		}
		g.detach_next_ns = now + 10 * NS_PER_SEC;
		return;
	}
	if (!g.cfg.detach || !g.cupti.finalize || !g.lasting || g.detach_refused || !g.have_cupti ||
	    atomic_load(&g.active) || atomic_load(&g.capture_on) || now < g.detach_next_ns)
		return;
	/* What the capture traced is in; CUPTI's buffers go with it. */
	g.cupti.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (!g.holds_census) {
		CUptiResult r = g.cupti.subscribe(&g.sub, on_callback, NULL);
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			give_way(GIVE_WAY_FOUND);
			return;
		}
		if (r != CUPTI_SUCCESS)
			return;
		for (size_t i = 0; i < sizeof census_cbids / sizeof census_cbids[0]; i++)
			g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API, census_cbids[i]);
		g.detach_sub = 1;
	}
	g.detach_deadline_ns = now + 10 * NS_PER_SEC;
	atomic_store(&g.detach_armed, 1);
}

static const char *census_name(const char *mangled, void *user)
{
	(void)user;
	return kernel_name(mangled);
}

/* The interval's census into g.cur as estimates for the whole interval
 * (unless `add` is 0: a capture's exact records stand for the interval
 * then, and estimates beside them would count the same launches twice):
 * what its windows counted, plus the pool's recent rates for the time no
 * window observed (census.h). Returns the share of the interval observed;
 * *estimated is set when it stood anything for the interval. */
static double census_fold(int64_t now_mono, uint64_t interval_ns, int add, int *estimated)
{
	*estimated = 0;
	pthread_mutex_lock(&g.cmu);
	census_take(g.census, g.census_snap);
	pthread_mutex_unlock(&g.cmu);
	uint64_t seen = g.observed_ns, pooled = g.pool_observed_ns;
	g.observed_ns = 0;
	g.pool_observed_ns = 0;
	int64_t start = atomic_load(&g.census_start_ns);
	if (g.holds_census && start > 0 && now_mono > start) {
		seen += (uint64_t)(now_mono - start);
		pooled += pooled_time(start, now_mono);
		/* The open window's counted time from here on is the next interval's. */
		atomic_store(&g.census_start_ns, now_mono);
		g.census_split_ns += (uint64_t)(now_mono - start);
	}
	/* The interval's time after the first launch heard, less what the
	 * windows observed of it: the pool's rates stand for that. */
	uint64_t active = pooled_time(g.interval_start_mono_ns, now_mono);
	uint64_t unobserved = active > pooled ? active - pooled : 0;
	g.interval_start_mono_ns = now_mono;
	double observed = interval_ns ? (double)seen / (double)interval_ns : 0;
	if (observed > 1)
		observed = 1;
	if (add) {
		census_pool_add(g.census_pool, g.census_snap, pooled, interval_ns);
		pthread_mutex_lock(&g.mu);
		*estimated = census_estimate(g.census_snap, g.census_pool, unobserved, g.census_means,
					     g.cur, census_name, NULL, &g.untimed_launches) > 0;
		pthread_mutex_unlock(&g.mu);
	}
	return observed;
}

/* ---- frames ---- */

static int push_frame(const uint8_t *frame, size_t len, void *user)
{
	(void)user;
	if (!g.client)
		return 0; /* no daemon connection is configured: nothing to count */
	client_push(g.client, frame, len); /* drops are counted by the client */
	return 0;
}

static void fill_hello(struct wire_hello *h)
{
	memset(h, 0, sizeof *h);
	h->pid = (uint32_t)getpid();
	h->ppid = (uint32_t)getppid();
	h->uid = (uint32_t)getuid();
	h->cupti_version = g.have_cupti || atomic_load(&g.arm_pending) ? g.cupti.version : 0;
	h->cuda_driver_version = g.driver_version;
	h->mode = g.mode;
	h->budget_ppm = g.budget_ppm;
	h->start_wall_ns = (uint64_t)clock_wall_ns();
	str_copy(h->lib_version, sizeof h->lib_version, GPULSE_VERSION);
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, h->cmdline, WIRE_CMD_MAX);
		close(fd);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				if (h->cmdline[i] == '\0')
					h->cmdline[i] = ' ';
			while (n > 0 && h->cmdline[n - 1] == ' ')
				n--;
			h->cmdline[n] = '\0';
		}
	}
}

static void fill_status(struct wire_status *s)
{
	memset(s, 0, sizeof *s);
	s->t_wall_ns = (uint64_t)clock_wall_ns();
	s->mode = g.mode;
	s->active = (uint8_t)atomic_load(&g.active);
	s->stepped_aside = (uint8_t)g.stepped_aside;
	str_copy(s->reason, sizeof s->reason, g.reason);
	s->budget_ppm = g.budget_ppm;
	if (g.mode == WIRE_MODE_CONTINUOUS) {
		s->overhead_est_ppm = g.gov.estimate_ppm;
		s->duty_ppm = g.gov.duty_ppm;
		s->window_ns = g.gov.on_ns;
	} else if (g.mode == WIRE_MODE_FULL) {
		s->overhead_est_ppm = governor_predict_ppm(&g.gov, 1, 0);
		s->duty_ppm = 1000000;
	}
	s->launch_rate_hz = g.gov.rate_hz;
	s->records_total = atomic_load(&g.records_total);
	s->records_dropped_total = atomic_load(&g.records_dropped) + atomic_load(&g.nvtx_dropped);
	uint64_t fd = g.frames_dropped;
	if (g.client) {
		struct client_stats cs;
		client_get_stats(g.client, &cs);
		fd += cs.frames_dropped;
	}
	s->frames_dropped_total = fd;
	s->kernels_other_total = g.kernels_other;
	s->source = g.mode == WIRE_MODE_CONTINUOUS && !atomic_load(&g.capture_on)
			    ? WIRE_SOURCE_CENSUS : WIRE_SOURCE_TRACE;
	s->lasting_cost_ppm = g.lasting ? LASTING_COST_PPM : 0;
}

/* End the interval: swap the tables out, encode and queue the frames.
 * Runs on the library's thread (or at exit, once that thread is gone). */
static void flush_interval(int64_t now_mono)
{
	int64_t now_wall = clock_wall_ns();
	uint64_t traced = atomic_exchange(&g.traced_accum, 0);
	if (atomic_load(&g.active)) {
		int64_t since = atomic_exchange(&g.active_since, now_mono);
		traced += now_mono > since ? (uint64_t)(now_mono - since) : 0;
	}
	if (g.mode == WIRE_MODE_CONTINUOUS && g.census && !g.is_fork_child) {
		/* The census's estimates cover the whole interval: that is
		 * the time its statistics stand for. */
		uint64_t iv_ns = now_wall > g.interval_start_wall_ns
					 ? (uint64_t)(now_wall - g.interval_start_wall_ns) : 0;
		int cap = atomic_load(&g.capture_on), estimated = 0;
		census_fold(now_mono, iv_ns, !cap, &estimated);
		if (estimated)
			traced = iv_ns;
	}
	pthread_mutex_lock(&g.mu);
	agg_take(g.cur, g.snap);
	pthread_mutex_unlock(&g.mu);
	struct agg_interval iv = {
		.start_ns = (uint64_t)g.interval_start_wall_ns, .end_ns = (uint64_t)now_wall,
		.traced_ns = traced, .topk = g.cfg.topk,
	};
	uint64_t folded = 0;
	if (agg_encode(g.enc, g.snap, &iv, push_frame, NULL, &folded) != 0)
		g.frames_dropped++;
	g.kernels_other += g.snap->kernels_other + folded;
	if (g.total)
		agg_merge(g.total, g.snap);
	g.interval_start_wall_ns = now_wall;
	/* Capture frames, then the status. */
	pthread_mutex_lock(&g.mu);
	if (capture_pending(g.cap)) {
		capture_drain(g.cap, now_mono, 0, push_frame, NULL);
		if (!capture_pending(g.cap))
			atomic_store(&g.capture_on, 0);
	}
	pthread_mutex_unlock(&g.mu);
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_STATUS;
	fill_status(&m.u.status);
	uint8_t frame[WIRE_HEADER_BYTES + 512];
	size_t len = wire_encode(&m, frame, sizeof frame);
	if (len)
		push_frame(frame, len, NULL);
	else
		g.frames_dropped++;
}

/* NVTX reaches CUPTI only when NVTX_INJECTION64_PATH names CUPTI and is
 * set before the application's first NVTX call (CUDA initialises, and
 * loads this library, before most applications annotate anything). */
static void setenv_nvtx(void)
{
	if (!getenv("NVTX_INJECTION64_PATH") && g.cupti.path[0] == '/')
		setenv("NVTX_INJECTION64_PATH", g.cupti.path, 0);
}

/* Route CUPTI's activity buffers to this library. */
static int register_buffers(char *err, size_t errlen)
{
	if ((g.cfg.skip & INJECT_SKIP_PERTHREAD) && g.cupti.activity_set_attribute) {
		/* Must come before the callbacks and any kind (cupti_activity.h). */
		uint8_t no = 0;
		size_t sz = sizeof no;
		CUptiResult a = g.cupti.activity_set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
							       &sz, &no);
		if (a != CUPTI_SUCCESS)
			say("cannot turn per-thread activity buffers off: %s; going on",
			    cupti_lib_strerror(&g.cupti, a));
	}
	CUptiResult r = g.cupti.activity_register_callbacks(buffer_requested, buffer_completed);
	if (r == CUPTI_SUCCESS)
		return GPULSE_OK;
	snprintf(err, errlen, "cuptiActivityRegisterCallbacks failed: %s", cupti_lib_strerror(&g.cupti, r));
	return GPULSE_EVENDOR;
}

/* register_buffers once per attachment: the first context's callback
 * (continuous mode) and the first tick may both come to it. */
static int register_buffers_once(char *err, size_t errlen)
{
	int rc = GPULSE_OK;
	pthread_mutex_lock(&g.bmu);
	if (!atomic_load(&g.buffers_on)) {
		rc = register_buffers(err, errlen);
		if (rc == GPULSE_OK)
			atomic_store(&g.buffers_on, 1);
	}
	pthread_mutex_unlock(&g.bmu);
	return rc;
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
	if (g.stepped_aside || atomic_load(&g.yielded) || (g.cfg.skip & INJECT_SKIP_UVM))
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
	if (g.cfg.skip & INJECT_SKIP_NVTX)
		return;
	if (!g.markers) /* armed again after a detach: the table stays */
		g.markers = calloc(MARKERS_OPEN, sizeof *g.markers);
	if (g.markers && g.cupti.activity_enable(CUPTI_ACTIVITY_KIND_MARKER) == CUPTI_SUCCESS)
		setenv_nvtx();
}

/* Continuous mode, the library's first tick: if CUPTI is still free,
 * take the buffers and start the windows; else step aside having
 * touched nothing. Returns whether it probed for another profiler (that
 * tick's probe is then done). */
static bool arm_continuous(void)
{
	if (!atomic_exchange(&g.arm_pending, 0) || g.stepped_aside)
		return false;
	char err[WIRE_REASON_MAX + 1];
	/* A census window holding the subscriber is proof enough that no
	 * other profiler holds it. */
	if (!g.holds_census && cupti_taken()) {
		step_aside("CUPTI was taken by another profiler (torch.profiler, Nsight) as the "
			   "application started; gpulse leaves it to them");
		return true;
	}
	if (register_buffers_once(err, sizeof err) != GPULSE_OK) {
		step_aside(err);
		return true;
	}
	enable_markers();
	g.window_next_ns = clock_mono_ns();
	pthread_mutex_lock(&g.mu);
	g.have_cupti = 1;
	if (g.pending_capture_set) {
		int64_t now = clock_mono_ns();
		capture_start(g.cap, g.pending_capture.capture_id, g.pending_capture.max_events, now,
			      now + (int64_t)g.pending_capture.seconds * NS_PER_SEC);
		atomic_store(&g.capture_on, 1);
		g.pending_capture_set = 0;
	}
	pthread_mutex_unlock(&g.mu);
	return true;
}

/* ---- the library's thread ---- */

/* Whether tracing should be on now, by mode. */
static int want_tracing(void)
{
	if (g.stepped_aside || !g.have_cupti)
		return 0;
	if (atomic_load(&g.capture_on))
		return 1;
	switch (g.mode) {
	case WIRE_MODE_FULL: return 1;
	case WIRE_MODE_CONTINUOUS:
		return 0; /* the census needs no activity tracing; captures are above */
	case WIRE_MODE_FOCUSED_PROFILER:
	case WIRE_MODE_FOCUSED_NVTX:
		return atomic_load(&g.focus_on) > 0;
	default: return 0;
	}
}

/* Full mode's subscriber, held until the unified-memory counters are
 * on (or given up), or for SUB_HOLD_MAX_NS if no context appears, so that
 * a profiler started later can still take CUPTI. */
static void release_context_subscriber(void)
{
	if (atomic_exchange(&g.sub_until_context, 0))
		g.cupti.unsubscribe(g.sub);
}

/* ---- another profiler subscribing ---- */

/* The other CUPTI clients' cuptiSubscribe and cuptiSubscribe_v2 come
 * here (interpose.h): a subscriber the library holds (a census window,
 * full mode's wait for the first context, a detach waiting for an API
 * exit) is given back first and none is taken again, so the other
 * profiler's subscription succeeds wherever it falls; the library's
 * thread then steps aside (GIVE_WAY_YIELDED). Runs on the application's
 * thread, once; it waits for the library thread's census work at most.
 * Focused modes hold their subscriber by the user's choice and are left
 * as they are (the hook is not installed there). */
static void yield_subscriber(void)
{
	if (g.is_fork_child || g.stepped_aside || atomic_load(&g.yielded))
		return;
	pthread_mutex_lock(&g.smu);
	if (!atomic_exchange(&g.yielded, 1) && !g.stepped_aside) {
		int64_t now = clock_mono_ns();
		int held = g.holds_census || g.detach_sub || atomic_load(&g.sub_until_context);
		if (g.holds_census) {
			census_drop_window(now, 1);
			g.window_log[g.windows % WINDOW_LOG][1] = now;
			g.windows++;
		}
		int armed = 1;
		if (atomic_compare_exchange_strong(&g.detach_armed, &armed, 0) && g.detach_sub)
			g.cupti.unsubscribe(g.sub);
		g.detach_sub = 0;
		release_context_subscriber();
		if (held)
			g.yields++;
	}
	pthread_mutex_unlock(&g.smu);
	pthread_mutex_lock(&g.mu);
	mono_cond_signal(&g.wake); /* step aside now, not at the next tick */
	pthread_mutex_unlock(&g.mu);
}

static CUptiResult CUPTIAPI other_subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
					    void *user)
{
	yield_subscriber();
	return g.cupti.subscribe(sub, cb, user);
}

static CUptiResult CUPTIAPI other_subscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
					       void *user, CUpti_SubscriberParams *params)
{
	yield_subscriber();
	if (!g.cupti.subscribe_v2)
		return CUPTI_ERROR_NOT_INITIALIZED;
	return g.cupti.subscribe_v2(sub, cb, user, params);
}

static const struct interpose_entry subscribe_entries[] = {
	{ "cuptiSubscribe", (void *)other_subscribe },
	{ "cuptiSubscribe_v2", (void *)other_subscribe_v2 },
};

/* Continuous and full modes: send the other objects' subscribe calls to
 * yield_subscriber (not CUPTI's own, nor ours). Objects loaded later are
 * found by the library thread's rescan once a second. */
static void install_interpose(void)
{
	if ((g.mode != WIRE_MODE_CONTINUOUS && g.mode != WIRE_MODE_FULL) ||
	    (g.cfg.skip & INJECT_SKIP_INTERPOSE) || !interpose_supported())
		return;
	const void *skip[] = { (const void *)yield_subscriber, (const void *)g.cupti.subscribe };
	interpose_init(&g.ip, subscribe_entries, sizeof subscribe_entries / sizeof subscribe_entries[0],
		       skip, sizeof skip / sizeof skip[0]);
	interpose_scan(&g.ip);
}

static void *inject_main(void *arg)
{
	(void)arg;
	int64_t next_flush = clock_mono_ns() + FLUSH_NS;
	pthread_mutex_lock(&g.mu);
	while (!g.stop) {
		pthread_mutex_unlock(&g.mu);
		int64_t now = clock_mono_ns();
		/* Every subscription of the library changes under smu, so that
		 * another profiler's subscribe (yield_subscriber) finds it
		 * either held or given back, never half way. */
		int flushed = 0;
		pthread_mutex_lock(&g.smu);
		if (atomic_load(&g.yielded) && !g.stepped_aside)
			give_way(GIVE_WAY_YIELDED);
		/* A detach's result first: after one, CUPTI holds nothing of
		 * ours, and the census must not open or close a window on
		 * state that is gone. */
		if (g.mode == WIRE_MODE_CONTINUOUS && !g.stepped_aside && !g.is_fork_child)
			detach_tick(now);
		if (g.mode == WIRE_MODE_CONTINUOUS && !g.stepped_aside && !g.is_fork_child &&
		    (g.have_cupti || g.holds_census)) {
			if (!g.detach_sub && !atomic_load(&g.detach_armed) && !atomic_load(&g.detach_done))
				census_tick(now);
			census_poll_samples(now);
		}
		int want = want_tracing();
		int on = atomic_load(&g.active);
		if (want != on) {
			if (want) {
				set_tracing(1);
				g.window_start_ns = now;
			} else {
				set_tracing(0);
				g.window_start_ns = 0;
			}
		}
		if (atomic_load(&g.sub_until_context) && (g.uvm_state != 0 || !g.have_cupti ||
							   now >= g.sub_deadline_ns))
			release_context_subscriber();
		/* A capture asked before the first tick arms CUPTI now: a
		 * program of a second is over by the first flush (the H200's
		 * check of the known program got no capture at all). */
		pthread_mutex_lock(&g.mu);
		int cap_waits = g.pending_capture_set;
		pthread_mutex_unlock(&g.mu);
		bool probed = cap_waits && atomic_load(&g.arm_pending) && !g.is_fork_child && arm_continuous();
		if (now >= next_flush) {
			probed = (atomic_load(&g.arm_pending) && !g.is_fork_child && arm_continuous()) || probed;
			if (g.have_cupti)
				g.cupti.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
			if (!probed && !g.holds_subscriber && !g.holds_census && !g.detach_sub &&
			    !atomic_load(&g.sub_until_context) && g.have_cupti &&
			    (g.mode == WIRE_MODE_FULL || g.mode == WIRE_MODE_CONTINUOUS) &&
			    !(g.cfg.skip & INJECT_SKIP_PROBE) && cupti_taken())
				give_way(GIVE_WAY_FOUND);
			if (g.uvm_state == 0 && g.have_cupti && !(g.cfg.skip & INJECT_SKIP_UVM) &&
			    !atomic_load(&g.sub_until_context) &&
			    (g.mode == WIRE_MODE_CONTINUOUS || g.mode == WIRE_MODE_FULL))
				enable_uvm_from_thread();
			flush_interval(now);
			next_flush = now + FLUSH_NS;
			flushed = 1;
		}
		pthread_mutex_unlock(&g.smu);
		/* Objects loaded since (a profiler's library imported late):
		 * one loader step when none was. Outside smu: the scan can wait
		 * for another thread's dlopen, whose constructors may
		 * subscribe (other_subscribe takes smu). */
		if (flushed && g.ip.scanned && !g.stepped_aside)
			interpose_scan(&g.ip);
		/* Sleep until the next thing to do. */
		int64_t until = next_flush;
		if (g.mode == WIRE_MODE_CONTINUOUS) {
			int64_t start = atomic_load(&g.census_start_ns);
			/* The first window is watched closely: it ends by what
			 * it has cost, not by a clock. */
			int64_t edge = !g.holds_census   ? g.window_next_ns
				       : !g.census_initial ? start + (int64_t)g.gov.on_ns
							   : now + 10 * NS_PER_MS;
			if (edge > now && edge < until)
				until = edge;
			/* While a window may hold streams, the watchdog looks
			 * every CENSUS_WATCH_NS: a launch whose exit is never
			 * heard holds its stream that long past HOLD_MAX_NS at
			 * most, not a whole tick (a loaded CI machine once
			 * stretched a tick to 194 ms). */
			if (g.holds_census && atomic_load(&g.hold_state) == 2 && until > now + CENSUS_WATCH_NS)
				until = now + CENSUS_WATCH_NS;
		}
		if (until > now + THREAD_TICK_NS)
			until = now + THREAD_TICK_NS;
		pthread_mutex_lock(&g.mu);
		if (!g.stop)
			mono_cond_wait_until(&g.wake, &g.mu, until);
	}
	g.thread_done = 1;
	mono_cond_broadcast(&g.wake);
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

static int start_thread(void)
{
	sigset_t all, old;
	sigfillset(&all);
	g.thread_done = 0;
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&g.thread, NULL, inject_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	g.thread_started = rc == 0;
	return rc;
}

/* Daemon frames arrive on the client's thread. */
static void on_daemon_msg(const struct wire_msg *m, void *user)
{
	(void)user;
	if (m->type == WIRE_CAPTURE) {
		/* Before continuous mode's first tick the capture waits for
		 * CUPTI to be taken, which it asks for at once. */
		if (g.stepped_aside)
			return;
		uint32_t secs = m->u.capture.seconds;
		if (secs == 0 || secs > CAPTURE_SECONDS_MAX)
			secs = secs ? CAPTURE_SECONDS_MAX : 1;
		pthread_mutex_lock(&g.mu);
		if (!g.have_cupti) {
			/* Its seconds run from when tracing can start (the first
			 * tick arms CUPTI): counted from now, a capture asked at a
			 * program's start was over before it traced anything (the
			 * H200's check of a short program got 0 events). */
			g.pending_capture = m->u.capture;
			g.pending_capture.seconds = secs;
			g.pending_capture_set = 1;
			mono_cond_signal(&g.wake); /* arm now, not at the first flush */
			pthread_mutex_unlock(&g.mu);
			return;
		}
		int64_t now = clock_mono_ns();
		capture_start(g.cap, m->u.capture.capture_id, m->u.capture.max_events, now,
			      now + (int64_t)secs * NS_PER_SEC);
		atomic_store(&g.capture_on, 1);
		mono_cond_signal(&g.wake);
		pthread_mutex_unlock(&g.mu);
	} else if (m->type == WIRE_CONFIG) {
		if (g.stepped_aside || m->u.config.mode == WIRE_MODE_OFF)
			return; /* off is chosen at start (GPULSE_MODE=off) */
		pthread_mutex_lock(&g.mu);
		/* gpulsed's settings are defaults: what the process's own
		 * environment set (GPULSE_MODE, GPULSE_BUDGET; gpulse run
		 * --focus, --budget) stays. */
		if (!g.cfg.budget_set && m->u.config.budget_ppm && m->u.config.budget_ppm <= 1000000) {
			g.budget_ppm = m->u.config.budget_ppm;
			governor_set_budget(&g.gov, g.budget_ppm);
		}
		/* Focused modes need the callbacks set up at start (they hold
		 * the subscriber): a running process switches between them
		 * only if it started in one. */
		int to_focus = m->u.config.mode == WIRE_MODE_FOCUSED_PROFILER ||
			       m->u.config.mode == WIRE_MODE_FOCUSED_NVTX;
		if (g.cfg.mode_set) {
			/* the environment's mode stays */
		} else if (m->u.config.mode != g.mode && m->u.config.mode < WIRE_MODE_OFF &&
		    (!to_focus || g.holds_subscriber)) {
			g.mode = m->u.config.mode;
			str_copy(g.nvtx_focus, sizeof g.nvtx_focus, m->u.config.nvtx_range);
			atomic_store(&g.focus_on, 0);
		} else if (to_focus && !g.holds_subscriber && !g.config_refused++) {
			say("a focused mode can only be chosen at start (GPULSE_MODE, gpulse run "
			    "--focus); staying %s", inject_mode_name(g.mode));
		}
		mono_cond_signal(&g.wake);
		pthread_mutex_unlock(&g.mu);
	}
}

/* ---- exit and fork ---- */

static void write_dump(void)
{
	if (!g.cfg.dump_path[0] || !g.total)
		return;
	char path[INJECT_PATH_MAX + 16];
	if (g.is_fork_child)
		snprintf(path, sizeof path, "%s.%d", g.cfg.dump_path, (int)getpid());
	else
		str_copy(path, sizeof path, g.cfg.dump_path);
	FILE *f = fopen(path, "we");
	if (!f) {
		say("cannot write %s: %s", path, strerror(errno));
		return;
	}
	char extra[8192];
	struct client_stats cs;
	memset(&cs, 0, sizeof cs);
	if (g.client)
		client_get_stats(g.client, &cs);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	char reason[2 * WIRE_REASON_MAX + 4];
	size_t o = 0;
	for (const char *p = g.reason; *p && o + 3 < sizeof reason; p++) {
		if (*p == '"' || *p == '\\')
			reason[o++] = '\\';
		reason[o++] = (*p >= 0x20) ? *p : ' ';
	}
	reason[o] = '\0';
	snprintf(extra, sizeof extra,
		 "\"pid\": %d, \"mode\": \"%s\", \"stepped_aside\": %s, \"reason\": \"%s\", "
		 "\"cupti_version\": %u, \"budget_ppm\": %u, \"records_total\": %llu, "
		 "\"records_dropped_total\": %llu, \"nvtx_dropped\": %llu, "
		 "\"kernels_other_total\": %llu, \"windows\": %llu, "
		 "\"governor\": {\"rate_hz\": %.1f, \"cost_ns\": %.1f, \"fixed_ns\": %.1f, "
		 "\"on_ns\": %llu, \"off_ns\": %llu, \"duty_ppm\": %u, \"estimate_ppm\": %u}, "
		 "\"client\": {\"connects\": %llu, \"frames_sent\": %llu, \"frames_dropped\": %llu}, "
		 "\"enable_failures\": %llu, \"uvm_state\": %d, \"holds_subscriber\": %s, "
		 "\"maxrss_kb\": %ld, \"source\": \"%s\", \"lasting_cost\": %s, "
		 "\"census\": {\"busy\": %llu, \"samples_lost\": %llu, \"samples_ambiguous\": %llu, "
		 "\"samples_unmet\": %llu, "
		 "\"holds\": %llu, \"holds_late\": %llu, \"hold_state\": %d, \"floor_n\": %llu, "
		 "\"floor_mean_ns\": %.1f, \"floor_outliers\": %llu, "
		 "\"untimed_launches\": %llu, \"unpooled\": %llu, "
		 "\"can_time\": %s, \"cb_cost_ns\": %.1f, \"sample_every\": %u, "
		 "\"lib_cpu_in_windows_ppm\": %.1f}, \"detaches\": %llu",
		 (int)getpid(), g.mode == WIRE_MODE_FOCUSED_NVTX ? "nvtx" : inject_mode_name(g.mode),
		 g.stepped_aside ? "true" : "false", reason, g.have_cupti ? g.cupti.version : 0,
		 g.budget_ppm, (unsigned long long)atomic_load(&g.records_total),
		 (unsigned long long)atomic_load(&g.records_dropped),
		 (unsigned long long)atomic_load(&g.nvtx_dropped),
		 (unsigned long long)g.kernels_other, (unsigned long long)g.windows, g.gov.rate_hz,
		 g.gov.cost_ns, g.gov.fixed_ns, (unsigned long long)g.gov.on_ns,
		 (unsigned long long)g.gov.off_ns, g.gov.duty_ppm, g.gov.estimate_ppm,
		 (unsigned long long)cs.connects, (unsigned long long)cs.frames_sent,
		 (unsigned long long)(cs.frames_dropped + g.frames_dropped),
		 (unsigned long long)atomic_load(&g.enable_failures), g.uvm_state,
		 g.holds_subscriber ? "true" : "false", ru.ru_maxrss,
		 g.mode == WIRE_MODE_CONTINUOUS ? "census" : "trace", g.lasting ? "true" : "false",
		 (unsigned long long)atomic_load(&g.census_busy), (unsigned long long)g.samples_lost,
		 (unsigned long long)g.samples_ambiguous, (unsigned long long)g.samples_unmet,
		 (unsigned long long)g.holds,
		 (unsigned long long)g.holds_late, atomic_load(&g.hold_state), (unsigned long long)g.floor_n,
		 g.floor_n ? (double)g.floor_ns / (double)g.floor_n : 0.0, (unsigned long long)g.floor_outliers,
		 (unsigned long long)g.untimed_launches,
		 (unsigned long long)(g.census_pool ? g.census_pool->unpooled : 0),
		 drv.can_time ? "true" : "false", g.gov.cost_ns, g.cfg.sample_every,
		 g.lib_window_ns ? (double)g.lib_window_cpu_ns * 1e6 / (double)g.lib_window_ns : 0.0,
		 (unsigned long long)g.detaches);
	/* The edges of the last windows, on CLOCK_MONOTONIC (benchmarks line
	 * their own timings up with them); close 0: still open. */
	size_t o2 = strlen(extra);
	/* The floors off a held sample, beside the census's figures. */
	{
		const struct calib_result *c = &g.calib;
		/* why: the library's own words, with no quote or backslash. */
		o2 += (size_t)snprintf(extra + o2, sizeof extra - o2,
				       ", \"sample_offset\": {\"offset_floors\": %.3f, \"source\": \"%s\", "
				       "\"calibration\": {\"tries\": %d, \"ok\": %s, \"why\": \"%s\", "
				       "\"offset_ns\": %.1f, \"excess_ns\": %.1f, \"gap_ns\": %.1f, \"bound_ns\": %.1f, "
				       "\"floor_ns\": %.1f, \"floors\": %.3f, "
				       "\"spread_ns\": %.1f, \"slope\": %.4f, \"timer_step_ns\": %.0f, "
				       "\"samples\": %u, \"took_ns\": %llu}}",
				       g.offset_floors, g.offset_source ? g.offset_source : "none",
				       g.calib_tried, c->ok ? "true" : "false", c->why, c->offset_ns,
				       c->excess_ns, c->gap_ns, c->bound_ns, c->floor_ns, c->floors, c->spread_ns, isfinite(c->slope) ? c->slope : 0.0,
				       c->timer_step_ns, c->samples, (unsigned long long)g.calib_ns);
	}
	/* Other objects' subscribe calls sent here, and subscriptions given
	 * back to another profiler. */
	o2 += (size_t)snprintf(extra + o2, sizeof extra - o2,
			       ", \"interpose\": {\"installed\": %s, \"scans\": %llu, \"objects\": %llu, "
			       "\"patched\": %llu, \"failed\": %llu, \"scan_ns\": %llu, \"yields\": %llu}",
			       g.ip.scanned ? "true" : "false", (unsigned long long)g.ip.scans,
			       (unsigned long long)g.ip.objects, (unsigned long long)g.ip.patched,
			       (unsigned long long)g.ip.failed, (unsigned long long)g.ip.scan_ns,
			       (unsigned long long)g.yields);
	o2 += (size_t)snprintf(extra + o2, sizeof extra - o2, ", \"window_log_mono_ns\": [");
	uint64_t first = g.windows > WINDOW_LOG ? g.windows - WINDOW_LOG : 0;
	int open_now = g.mode == WIRE_MODE_CONTINUOUS && g.window_log[g.windows % WINDOW_LOG][0] &&
		       !g.window_log[g.windows % WINDOW_LOG][1];
	for (uint64_t w = first; w < g.windows + (uint64_t)open_now && o2 < sizeof extra; w++)
		o2 += (size_t)snprintf(extra + o2, sizeof extra - o2, "%s[%lld, %lld]",
				       w > first ? ", " : "", (long long)g.window_log[w % WINDOW_LOG][0],
				       (long long)g.window_log[w % WINDOW_LOG][1]);
	if (o2 < sizeof extra)
		snprintf(extra + o2, sizeof extra - o2, "]");
	agg_dump_json(g.total, f, extra);
	fclose(f);
}

static void at_exit(void)
{
	if (!g.initialized || g.exited)
		return;
	int thread_stuck = 0;
	if (g.thread_started) {
		/* The thread may be inside a CUPTI or driver call; exit must
		 * not wait on it for long. The wait is on the monotonic clock
		 * (pthread_timedjoin_np's deadline is on the wall clock, which
		 * a step of the system's time can put days away). */
		int64_t until = clock_mono_ns() + 500 * NS_PER_MS;
		pthread_mutex_lock(&g.mu);
		g.stop = 1;
		mono_cond_broadcast(&g.wake);
		while (!g.thread_done && clock_mono_ns() < until)
			mono_cond_wait_until(&g.wake, &g.mu, until);
		int done = g.thread_done;
		pthread_mutex_unlock(&g.mu);
		if (done) {
			pthread_join(g.thread, NULL);
		} else {
			thread_stuck = 1;
			say("the library's thread did not stop within 500 ms; exiting without the last flush");
		}
		g.thread_started = 0;
	}
	if (thread_stuck) {
		g.exited = 1;
		hold_release_all(); /* exits are not heard from here on */
		write_dump();
		return;
	}
	int64_t now = clock_mono_ns();
	if ((g.have_cupti || atomic_load(&g.buffers_on)) && !g.is_fork_child) {
		/* Everything recorded so far, including partly filled buffers
		 * (a program over before the first tick has buffers, for its
		 * unified-memory counters, and no have_cupti yet). */
		g.cupti.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	}
	if (g.cur) {
		flush_interval(now);
		pthread_mutex_lock(&g.mu);
		if (g.pending_capture_set) {
			/* Asked, never started (CUPTI was not armed before the
			 * exit): answered, empty, so the asker is not left
			 * waiting for its end. */
			capture_start(g.cap, g.pending_capture.capture_id, g.pending_capture.max_events, now, now);
			g.pending_capture_set = 0;
		}
		if (capture_pending(g.cap))
			capture_drain(g.cap, now, 1, push_frame, NULL);
		pthread_mutex_unlock(&g.mu);
	}
	g.exited = 1;
	hold_release_all(); /* exits are not heard from here on */
	if (g.have_cupti && !g.is_fork_child)
		set_tracing(0);
	if (g.client)
		client_flush(g.client, now + EXIT_FLUSH_NS);
	write_dump();
	/* The client's thread is stopped, but its memory stays: CUPTI's
	 * thread may still be inside a callback that reads g. */
	if (g.client)
		client_destroy(g.client);
	g.client = NULL;
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&g.mu);
	if (g.client)
		client_fork_prepare(g.client);
}

static void fork_parent(void)
{
	if (g.client)
		client_fork_parent(g.client);
	pthread_mutex_unlock(&g.mu);
}

static void fork_child(void)
{
	/* The child has one thread and a CUDA context it must not use.
	 * It reports as a new process with nothing traced: statistics
	 * start from zero, and a fork+exec child loads the library anew. */
	pthread_mutex_init(&g.mu, NULL);
	pthread_mutex_init(&g.smu, NULL);
	mono_cond_init(&g.wake);
	g.is_fork_child = 1;
	pthread_mutex_init(&nvtx_ranges.mu, NULL);
	memset(nvtx_ranges.open, 0, sizeof nvtx_ranges.open);
	atomic_store(&g.sub_until_context, 0); /* the parent's; CUPTI is not the child's to touch */
	atomic_store(&g.active, 0);
	atomic_store(&g.capture_on, 0);
	atomic_store(&g.census_on, 0);
	g.holds_census = 0;
	pthread_mutex_init(&g.cmu, NULL);
	if (g.census)
		census_clear(g.census);
	if (g.cur)
		agg_clear(g.cur);
	if (g.total)
		agg_clear(g.total);
	atomic_store(&g.records_total, 0);
	atomic_store(&g.records_dropped, 0);
	g.frames_dropped = 0;
	g.kernels_other = 0;
	g.stop = 0;
	g.thread_started = 0;
	nvtx_stack.depth = 0;
	if (g.client) {
		struct wire_hello h;
		fill_hello(&h);
		client_fork_child(g.client, &h);
	}
	start_thread();
}

/* ---- entry ---- */

static const char *env_get(const char *name)
{
	return getenv(name);
}

static void connect_daemon(void)
{
	struct client_config cc;
	memset(&cc, 0, sizeof cc);
	for (int i = 0; i < CLIENT_PATHS_MAX; i++)
		cc.paths[i] = g.cfg.socket_paths[i][0] ? g.cfg.socket_paths[i] : NULL;
	cc.on_msg = on_daemon_msg;
	struct wire_hello h;
	fill_hello(&h);
	if (client_create(&g.client, &cc, &h) != GPULSE_OK) {
		say("cannot start the daemon connection (out of memory or threads); "
		    "statistics stay in the process");
		g.client = NULL;
	}
}

static int setup_cupti(void)
{
	char err[WIRE_REASON_MAX + 1] = "";
	int rc = cupti_lib_open(&g.cupti, g.cfg.cupti_path, err, sizeof err);
	if (rc != GPULSE_OK) {
		step_aside(err);
		return rc;
	}
	CUptiResult r;
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
	int focused = g.mode == WIRE_MODE_FOCUSED_PROFILER || g.mode == WIRE_MODE_FOCUSED_NVTX;
	if (g.cupti.subscribe_v2) {
		CUpti_SubscriberParams p;
		memset(&p, 0, sizeof p);
		p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
		p.subscriberName = "gpulse";
		p.oldSubscriberName = other;
		p.oldSubscriberSize = sizeof other - 1;
		r = g.cupti.subscribe_v2(&g.sub, on_callback, NULL, &p);
	} else {
		r = g.cupti.subscribe(&g.sub, on_callback, NULL);
	}
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		snprintf(err, sizeof err, "CUPTI is already in use by another profiler%s%s%s",
			 other[0] ? " (" : "", other, other[0] ? ")" : "");
		step_aside(err);
		return GPULSE_EBUSY;
	}
	if (r != CUPTI_SUCCESS) {
		snprintf(err, sizeof err, "cuptiSubscribe failed: %s", cupti_lib_strerror(&g.cupti, r));
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
	int until_context = g.mode == WIRE_MODE_FULL && !(g.cfg.skip & INJECT_SKIP_UVM) &&
			    g.cupti.activity_configure_uvm;
	if (until_context) {
		atomic_store(&g.sub_until_context, 1);
		g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE,
					CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	} else if (!focused && g.mode != WIRE_MODE_CONTINUOUS) {
		g.cupti.unsubscribe(g.sub);
	}
	g.holds_subscriber = focused;
	if (g.mode == WIRE_MODE_CONTINUOUS) {
		/* Touch no CUPTI setting until the library's first tick has
		 * checked again that CUPTI is free (arm_continuous): a
		 * profiler started before CUDA (torch.profiler entered before
		 * the first CUDA call) may have registered its buffers and
		 * enabled its kinds without holding a subscriber yet, and
		 * registering ours, or closing a window, would take them from
		 * it (the H200 run of 2026-11-29: torch.profiler saw 0 CUDA
		 * events). NVTX must reach CUPTI before the first NVTX call. */
		if (!(g.cfg.skip & INJECT_SKIP_NVTX))
			setenv_nvtx();
		atomic_store(&g.arm_pending, 1);
		/* The first census window, on the subscription just made: it
		 * counts from the application's first launch, so a program of
		 * a second is seen too (census_tick closes it, or gives the
		 * subscriber back if no launch comes). Callbacks touch none of
		 * the activity state a profiler started before CUDA may own. */
		load_driver_fns();
		if (g.cupti.app_loaded) {
			/* An application that loaded CUPTI itself may be a
			 * profiler's host (PyTorch: torch.profiler entered before
			 * CUDA sets CUPTI up and subscribes later, and holding
			 * the subscriber now made it record no CUDA event on the
			 * H200): its first window waits for the first tick. */
			g.cupti.unsubscribe(g.sub);
			goto timestamps;
		}
		for (size_t i = 0; i < sizeof census_cbids / sizeof census_cbids[0]; i++)
			g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API, census_cbids[i]);
		/* The first context, heard only in this window: unified
		 * memory is counted from then (context_created_early). */
		if (!(g.cfg.skip & INJECT_SKIP_UVM) && g.cupti.activity_configure_uvm)
			g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE,
						CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
		g.holds_census = 1;
		g.census_initial = 1;
		atomic_store(&g.census_first, 1);
		/* Observed from now: launches before the first are none. */
		atomic_store(&g.census_start_ns, clock_mono_ns());
		atomic_store(&g.census_on, 1);
		log_window_open(clock_mono_ns());
		goto timestamps;
	}
	if (register_buffers(err, sizeof err) != GPULSE_OK) {
		if (focused || atomic_exchange(&g.sub_until_context, 0))
			g.cupti.unsubscribe(g.sub);
		step_aside(err);
		return GPULSE_EVENDOR;
	}
	g.have_cupti = 1;
	if (!focused) {
		enable_markers();
		goto timestamps;
	}
	/* Callbacks that stay on in every mode cost nothing on launches. */
	g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	if (g.mode == WIRE_MODE_FOCUSED_PROFILER) {
		g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API,
					CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
		g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API,
					CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
		g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API,
					CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
		g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API,
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
		g.cupti.enable_callback(1, g.sub, CUPTI_CB_DOMAIN_NVTX, nvtx_ids[i]);
	setenv_nvtx();
timestamps:
	install_interpose();
	uint64_t ts = 0;
	if (g.cupti.get_timestamp(&ts) == CUPTI_SUCCESS)
		g.cupti_to_wall_ns = clock_wall_ns() - (int64_t)ts;
	return GPULSE_OK;
}

API const char *gpulse_inject_version(void)
{
	return GPULSE_VERSION;
}

API int gpulse_inject_status_json(char *buf, size_t len)
{
	if (!buf || len == 0)
		return GPULSE_EINVAL;
	int n = snprintf(buf, len,
			 "{\"mode\":\"%s\",\"stepped_aside\":%s,\"active\":%d,\"records_total\":%llu,"
			 "\"records_dropped_total\":%llu,\"duty_ppm\":%u,\"estimate_ppm\":%u}",
			 inject_mode_name(g.mode), g.stepped_aside ? "true" : "false",
			 atomic_load(&g.active), (unsigned long long)atomic_load(&g.records_total),
			 (unsigned long long)atomic_load(&g.records_dropped), g.gov.duty_ppm,
			 g.gov.estimate_ppm);
	return n > 0 && (size_t)n < len ? GPULSE_OK : GPULSE_ELIMIT;
}

API int InitializeInjection(void)
{
	if (g.initialized)
		return 1;
	g.initialized = 1;
	mono_cond_init(&g.wake);
	g.mono_to_wall_ns = clock_wall_ns() - clock_mono_ns();
	g.interval_start_wall_ns = clock_wall_ns();
	g.interval_start_mono_ns = clock_mono_ns();
	char err[1024];
	inject_config_load(&g.cfg, env_get, (unsigned)getuid(), err, sizeof err);
	if (err[0])
		say("%s", err);
	g.mode = g.cfg.mode;
	g.budget_ppm = g.cfg.budget_ppm;
	str_copy(g.nvtx_focus, sizeof g.nvtx_focus, g.cfg.nvtx_range);
	struct governor_config gc;
	governor_config_default(&gc);
	gc.budget_ppm = g.budget_ppm;
	gc.cost_ns = g.cfg.cost_ns;
	gc.tail_ns = g.cfg.tail_ns;
	if (g.cfg.mode == WIRE_MODE_CONTINUOUS) {
		/* The census's costs (callbacks leave nothing behind: no tail),
		 * unless set by hand. */
		if (!g.cfg.cost_ns_set)
			gc.cost_ns = CENSUS_COST_NS;
		if (!g.cfg.tail_ns_set)
			gc.tail_ns = 0;
		gc.fixed_ns = CENSUS_FIXED_NS;
		/* A window that heard no launch (a PyTorch process's first,
		 * while it builds its model) is followed by another within a
		 * second, not ten: the H200's training step went unseen for
		 * its whole 3 s run. A window's fixed cost a second is 0.1%,
		 * and the budget still spaces them wider if it must. */
		gc.period_ns = CENSUS_IDLE_PERIOD_NS;
	}
	governor_init(&g.gov, &gc);
	int (*get_version)(int *) = NULL;
	void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	*(void **)(&get_version) = dlsym(libcuda ? libcuda : RTLD_DEFAULT, "cuDriverGetVersion");
	int dv = 0;
	if (get_version && get_version(&dv) == 0)
		g.driver_version = (uint32_t)dv;

	g.cur = agg_create();
	g.snap = agg_create();
	g.total = g.cfg.dump_path[0] ? agg_create() : NULL;
	const char *sample_log = getenv("GPULSE_INJECT_SAMPLE_LOG"); /* benchmarks: every timed sample */
	if (sample_log && *sample_log && (g.sample_log = fopen(sample_log, "w")) != NULL)
		setvbuf(g.sample_log, NULL, _IOLBF, 0);
	g.enc = agg_encoder_create();
	g.cap = capture_create();
	g.names = calloc(NAME_CACHE, sizeof *g.names);
	if (g.mode == WIRE_MODE_CONTINUOUS) {
		g.census = calloc(1, sizeof *g.census);
		g.census_snap = calloc(1, sizeof *g.census_snap);
		g.census_means = calloc(1, sizeof *g.census_means);
		g.census_pool = calloc(1, sizeof *g.census_pool);
	}
	if (!g.cur || !g.snap || !g.enc || !g.cap || (g.cfg.dump_path[0] && !g.total) ||
	    (g.mode == WIRE_MODE_CONTINUOUS && (!g.census || !g.census_snap || !g.census_means ||
					     !g.census_pool))) {
		step_aside("out of memory for the aggregation tables");
		return 1;
	}
	if (g.mode == WIRE_MODE_OFF) {
		step_aside("GPULSE_MODE=off");
	} else {
		find_demangler();
		setup_cupti();
	}
	connect_daemon();
	atexit(at_exit);
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	g.sub_deadline_ns = clock_mono_ns() + SUB_HOLD_MAX_NS;
	if (g.have_cupti && g.mode == WIRE_MODE_FULL)
		set_tracing(1);
	if (start_thread() != 0)
		say("cannot start the library's thread; statistics are written at exit only");
	return 1;
}
