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

#include "inject/agg.h"
#include "inject/calib.h"
#include "inject/capture.h"
#include "inject/census.h"
#include "inject/cupti_shim.h"
#include "inject/governor.h"
#include "inject/inject_client.h"
#include "inject/inject_config.h"
#include "inject/interpose.h"
#include "common/mono_cond.h"
#include "wire/wire.h"

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

/* The library's state, one struct per concern, each defined in the file
 * of its concern. Beside each field: the lock that guards it, or that it
 * is written once before the library's threads start ("once"), or is
 * atomic, or belongs to one thread. Threads: the application's (CUPTI
 * callbacks), CUPTI's (buffer_completed), the library's thread
 * (inject_main), the client's (on_daemon_msg). Locks nest only as
 * subs.mu, then lib.mu or cen.mu, then the client's own (a frame queued
 * under lib.mu). CUPTI's callbacks on application
 * threads only try lib.mu and cen.mu (a busy lock is counted, not waited
 * for); they wait only for locks held to copy an entry (records.c's
 * nvtx_ranges) or for set-up (act.buffers_mu). Another profiler's
 * cuptiSubscribe waits for subs.mu (yield_subscriber). */

/* The library (inject.c): its settings, the interval's tables, a capture,
 * the daemon connection, the library's thread. */
struct inject_lib {
	/* The interval's tables (cur, cap) and the kernel names and NVTX
	 * markers of records.c, a capture asked early, the settings a CONFIG
	 * frame changes, and the thread's stop. */
	pthread_mutex_t mu;
	struct mono_cond wake;     /* on mu: the library's thread sleeps on it */
	int initialized;           /* once (InitializeInjection) */
	struct inject_config cfg;  /* once */
	struct cupti_lib cupti;    /* once (setup_cupti) */
	uint32_t driver_version;   /* once */
	int64_t mono_to_wall_ns;   /* once */
	int64_t cupti_to_wall_ns;  /* once (setup_cupti): add to a CUPTI timestamp for wall clock */
	/* Set under mu by a CONFIG frame (on_daemon_msg), to off by
	 * step_aside without it; read without a lock everywhere (a plain
	 * byte: a callback may act on the mode before). */
	uint8_t mode;
	uint32_t budget_ppm;       /* mu (on_daemon_msg); read on the library thread without it */
	char nvtx_focus[WIRE_NAME_MAX + 1]; /* mu (on_daemon_msg); read by range_begin without it */
	unsigned config_refused;   /* mu: CONFIG frames asking for a focus we cannot give */
	atomic_int stepped_aside;  /* read on the client's thread too */
	char reason[WIRE_REASON_MAX + 1]; /* step_aside: the library thread, or before it starts */

	struct agg *cur;           /* mu */
	struct agg *snap, *total;  /* the library thread (flush_interval), exit and fork after it */
	struct agg_encoder *enc;   /* the library thread */
	struct capture *cap;       /* mu */
	atomic_int capture_on;     /* set and cleared under mu, with cap */
	struct wire_capture pending_capture; /* mu: asked before CUPTI was armed */
	int pending_capture_set;   /* mu */
	int64_t interval_start_wall_ns; /* the library thread */
	uint64_t frames_dropped;   /* the library thread: frames that could not be encoded or queued */
	uint64_t kernels_other;    /* the library thread */

	struct client *client;     /* once (connect_daemon); NULL after exit's */
	/* The application's thread that starts or stops it: InitializeInjection,
	 * at_exit, fork_child. */
	pthread_t thread;
	int thread_started;
	int stop;                  /* mu */
	int thread_done;           /* mu: the thread left its loop */
};
extern struct inject_lib lib;

/* CUPTI's activity tracing, switched on and off (cupti_setup.c). No lock:
 * each field is atomic or written by one thread at a time. */
struct inject_tracing {
	atomic_int have_cupti;     /* CUPTI opened and ours (read on the client's thread too) */
	atomic_int arm_pending;    /* continuous mode: CUPTI not touched until the first tick */
	atomic_int uvm_state;      /* 0 not yet, 1 on, -1 given up (set on a callback, read by the thread) */
	atomic_int active;         /* activity kinds enabled now */
	atomic_int focus_on;       /* focused mode: inside the range/profiler region */
	atomic_int_fast64_t active_since; /* monotonic, when tracing last turned on */
	atomic_uint_fast64_t traced_accum; /* traced time of windows already closed */
	atomic_uint_fast64_t enable_failures;
	int64_t window_start_ns;   /* the library thread: monotonic, when it turned tracing on (unread) */
	/* Exact kernel tracing has run in this process: set by set_tracing
	 * (the library thread, or an application's in focused modes), cleared
	 * by detach_tick (the library thread, continuous mode). */
	int lasting;
};
extern struct inject_tracing tracing;

/* Activity records and NVTX ranges (records.c). */
struct inject_activity {
	/* Activity buffers registered with CUPTI: at the first tick
	 * (arm_continuous), or in continuous mode already at the first
	 * context, inside the first census window (context_created_early). */
	pthread_mutex_t buffers_mu;
	atomic_int buffers_on;     /* set under buffers_mu */
	struct name_entry *names;  /* NAME_CACHE, once; entries under lib.mu */
	uint64_t names_uncached;   /* lib.mu */
	/* MARKERS_OPEN, allocated by enable_markers before the MARKER kind is
	 * on; entries under lib.mu. */
	struct marker_open *markers;
	atomic_uint_fast64_t launch_records; /* kernels + copies + memsets seen (the census's too) */
	atomic_uint_fast64_t records_total;
	atomic_uint_fast64_t records_dropped; /* CUPTI's drops, refused buffers, bounds */
	atomic_uint_fast64_t buffers_out;
	atomic_uint_fast64_t proc_ns, proc_records;
	atomic_uint_fast64_t nvtx_dropped;
};
extern struct inject_activity act;

/* A timed launch's events (census_time_start). */
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
	int busy_held;            /* held although its stream was busy (census_means_hold_busy) */
	uint32_t gen;             /* in the ticket: a stale or foreign one is ignored */
	uint32_t context;         /* CUPTI's context id of the launch */
	uint32_t device;          /* CUPTI's device id of the launch */
	uint8_t cls;              /* the launch's size class (census_class) */
	atomic_int late;          /* the watchdog let its stream go: not timed */
	/* 0 free, 1 start recorded, 4 its end being recorded (by the
	 * launching thread, without the lock), 2 both, 3 being read.
	 * Taken 0 -> 1 and 3 -> 0 under cen.mu; 1 -> 4 -> 2|1 by the
	 * launching thread, 1|2 -> 3 by the reader, by exchange. */
	atomic_int state;
};

/* Continuous mode's census (census_windows.c; the arithmetic is census.h
 * and governor.h). The callbacks add under mu, taken with trylock on
 * application threads (a busy lock makes the launch unobserved, counted
 * in census_busy). Fields said to be the library thread's are also read
 * by the exit's dump, after that thread stopped. */
struct inject_census {
	pthread_mutex_t mu;
	struct census *census;            /* mu */
	struct census *census_snap;       /* the library thread */
	/* Each kernel's samples over the process's life: written under mu by
	 * the library thread, read under it by the callbacks. */
	struct census_means *census_means;
	struct census_pool *census_pool;  /* the recent windows' rates (library thread) */
	/* The library thread's; a CONFIG frame's budget is set in it under
	 * lib.mu, on the client's thread (on_daemon_msg). */
	struct governor gov;

	/* The windows. */
	atomic_int census_on;             /* launch callbacks are counting */
	atomic_int census_first;          /* the first window waits for the first launch */
	atomic_int_fast64_t census_start_ns; /* monotonic, when the window began counting */
	atomic_int_fast64_t census_first_launch_ns; /* the first window's first launch */
	atomic_int_fast64_t first_seen_ns; /* monotonic, the first launch a window heard */
	atomic_uint_fast64_t cb_self_ns, cb_calls; /* the callbacks' own time, and how many */
	atomic_uint_fast64_t census_busy;
	int census_initial;               /* the library thread: the first window (CENSUS_INITIAL_NS) */
	int64_t window_next_ns;           /* the library thread */
	uint64_t window_records_base;     /* the library thread: launch_records when the window opened */
	int64_t census_fixed_ns;          /* the library thread's time to open the window */
	int64_t census_cpu0_ns;           /* the library thread's CPU clock when it opened */
	uint64_t lib_window_cpu_ns;       /* the library thread's CPU time inside windows (dump) */
	uint64_t lib_window_ns;           /* the library thread: the windows' time that was measured over */
	int64_t interval_start_mono_ns;   /* the library thread */
	uint64_t untimed_launches;        /* the library thread: launches of kernels no sample timed */
	/* Under subs.mu (the library thread's ticks and flushes, and
	 * yield_subscriber, hold it). */
	uint64_t observed_ns;             /* counted time of this interval's closed windows */
	uint64_t pool_observed_ns;        /* this interval's observed time from first_seen_ns on */
	uint64_t census_split_ns;         /* the open window's time counted in earlier intervals */
	uint64_t windows;
	int64_t window_log[WINDOW_LOG][2]; /* monotonic open, close of the last windows (dump) */

	/* The timed samples. */
	struct evpair evpairs[EVPAIRS_MAX]; /* fields other than state: under mu or the state's owner */
	uint32_t gen_next;                /* mu */
	/* Holding an idle stream while a sampled launch is submitted (see
	 * census_time_start): one word of pinned, device-mapped host memory
	 * per pair, which its stream waits on. */
	_Atomic(uint32_t *) hold_flags;
	atomic_int hold_state;            /* 0 not tried, 1 allocating, 2 ready, -1 unavailable */
	uint32_t hold_next[EVPAIRS_MAX];  /* mu: the last value used per pair */
	uint64_t samples_lost;            /* mu: timed launches whose events failed or timed out */
	uint64_t samples_ambiguous;       /* mu: timed launches left out: see census_poll_samples */
	uint64_t samples_unmet;           /* mu: ... of those, unheld ones whose floor was not back to back */
	uint64_t holds, holds_late;       /* mu: held samples; those let go by the watchdog */
	uint64_t holds_busy;              /* mu: held samples whose stream was busy */
	uint64_t floor_n, floor_ns;       /* mu: held pairs' event-to-event floors */
	uint64_t floor_outliers;          /* mu: floors left out of floor_ns: not back to back */
	double offset_floors;             /* the library thread: floors off the last device's held samples */
	const char *offset_source;        /* ... whence: census_offset_floors */
	struct calib_result calib;        /* the library thread: the last device's calibration (calib.h) */
	int calib_tried;                  /* ... tries */
	uint64_t calib_ns;                /* the library thread's time calibrating */
	struct calib_kept kept;           /* the library thread: the last device's kept calibration */
	int kept_found, kept_stored;      /* ... read from its file; this process's written to it */
	char kept_why[192];               /* ... why not found or not stored (no quote or backslash) */
	FILE *sample_log;                 /* once: GPULSE_INJECT_SAMPLE_LOG, each timed sample (benchmarks) */
};
extern struct inject_census cen;

/* The library's subscriptions to CUPTI, and giving them back (handover.c).
 * Another profiler subscribing (interpose.h): its cuptiSubscribe comes to
 * yield_subscriber, which takes mu, the lock of every change to the
 * library's own subscriptions (the library thread's census, probe,
 * detach and context wait), gives back what the library holds and sets
 * yielded, after which it takes none. */
struct inject_subs {
	pthread_mutex_t mu;
	CUpti_SubscriberHandle sub;       /* mu (setup_cupti: once) */
	int holds_census;                 /* mu: a census window holds sub (its thread reads it without) */
	int holds_subscriber;             /* once: focused modes, whose callbacks need one */
	atomic_int sub_until_context;     /* full mode: subscribed until the first context exists */
	int64_t sub_deadline_ns;          /* once: full mode, the first window release sub by then */
	atomic_int yielded;               /* set under mu */
	uint64_t yields;                  /* mu: subscriptions given back to another profiler */
	struct interpose ip;              /* the library thread's, after set-up; scanned: installed */
	/* GPULSE_DETACH: after a capture, cuptiFinalize at an application's
	 * API exit, to give back the cost exact tracing leaves (off by
	 * default: on CUPTI 13.0 / driver 580 it crashed while another thread
	 * launched). */
	atomic_int detach_armed;          /* 1: the next driver API exit detaches; 2: detaching now */
	atomic_int detach_done;           /* 1 detached, -1 refused (set in the callback) */
	atomic_int detach_result;         /* cuptiFinalize's result */
	int detach_sub;                   /* mu: the library subscribed to hear that exit */
	int64_t detach_deadline_ns, detach_next_ns; /* the library thread */
	uint64_t detaches;                /* the library thread */
	int detach_refused;               /* the library thread */
};
extern struct inject_subs subs;

/* The process's life (forkexit.c): each written once, read without a
 * lock (plain ints: a callback already running may miss the change). */
struct inject_life {
	int is_fork_child;         /* fork_child, before the child's thread starts: CUDA is unusable there */
	int exited;                /* at_exit */
};
extern struct inject_life life;

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
