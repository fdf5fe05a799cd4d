/* What the files of libgpulse-inject.so share (docs/internals/inject.md,
 * "Files"): the library's state, and the functions one file calls in
 * another. Internal: nothing here is exported (the version script,
 * inject.map, keeps every symbol but the API local). */
#ifndef GPULSE_INJECT_INTERNAL_H
#define GPULSE_INJECT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cupti.h>

#include "agg.h"
#include "calib.h"
#include "capture.h"
#include "census.h"
#include "cupti_shim.h"
#include "governor.h"
#include "inject_client.h"
#include "inject_config.h"
#include "interpose.h"
#include "mono_cond.h"
#include "wire.h"

#define NAME_CACHE      1024        /* demangled kernel names, by CUPTI's pointer */
#define EVPAIRS_MAX     256         /* timed launches whose events are not read yet */
#define WINDOW_LOG      32          /* continuous windows whose edges the dump lists */
#define MARKERS_OPEN    256         /* NVTX ranges open at once (continuous and full modes) */

#define GIVE_WAY_FOUND "another profiler started using CUPTI (torch.profiler, Nsight); " \
		       "gpulse leaves it to them"
#define GIVE_WAY_YIELDED "another profiler subscribed to CUPTI (torch.profiler, Nsight): " \
			 "gpulse gave its subscriber back and leaves CUPTI to it"

struct marker_open {
	uint32_t id;               /* 0: free */
	uint64_t start_ns;
	char name[WIRE_NAME_MAX + 1];
};

struct name_entry {
	const char *key;           /* CUPTI's name pointer (stable per function) */
	char *name;                /* demangled and fitted (wire_kernel_name_fit), malloc'd */
};

struct inject_globals {
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
};
extern struct inject_globals g;

/* The driver's entry points the library calls itself (cupti_setup.c,
 * load_driver_fns): the primary context borrowed to enable the
 * unified-memory counters, and the census's timed samples. */
struct driver_fns {
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
};
extern struct driver_fns drv;

/* ---- inject.c: the entry, the library's thread, frames ---- */

/* One line on stderr, always prefixed; the library says little. */
__attribute__((format(printf, 1, 2))) void say(const char *fmt, ...);
void step_aside(const char *why);
int push_frame(const uint8_t *frame, size_t len, void *user);
void fill_hello(struct wire_hello *h);
void flush_interval(int64_t now_mono);
int start_thread(void);

/* ---- records.c: kernel names, activity records, NVTX ranges ---- */

void find_demangler(void);
const char *kernel_name(const char *mangled);
void nvtx_push(const char *name);
void nvtx_pop(void);
void nvtx_start(const char *name, const void *ret);
void nvtx_end(uint64_t id);
void nvtx_fork_child(void);
int register_buffers(char *err, size_t errlen);
int register_buffers_once(char *err, size_t errlen);

/* ---- cupti_setup.c: CUPTI set-up, tracing on and off, callbacks ---- */

void set_tracing(int on);
void CUPTIAPI on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			  const void *data);
void enable_uvm_from_thread(void);
bool arm_continuous(void);
int setup_cupti(void);

/* ---- census_windows.c: continuous mode's census windows and samples ---- */

void census_enable_callbacks(CUpti_SubscriberHandle sub);
void log_window_open(int64_t now);
void census_api(CUpti_CallbackId cbid, const CUpti_CallbackData *d);
void hold_release_all(void);
void census_poll_samples(int64_t now);
void census_drop_window(int64_t now, int unsubscribe);
void census_tick(int64_t now);
double census_fold(int64_t now_mono, uint64_t interval_ns, int add, int *estimated);

/* ---- handover.c: another profiler taking CUPTI, and detaching ---- */

int cupti_taken(void);
void give_way(const char *why);
void release_context_subscriber(void);
void install_interpose(void);
void detach_tick(int64_t now);

/* ---- forkexit.c: exit and fork ---- */

void at_exit(void);
void fork_prepare(void);
void fork_parent(void);
void fork_child(void);

#endif
