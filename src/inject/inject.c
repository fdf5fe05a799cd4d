/* libgpulse-inject.so: loaded by the CUDA driver through
 * CUDA_INJECTION64_PATH, it records what the application's GPUs do with
 * CUPTI's activity and callback APIs, aggregates it in-process (agg.c),
 * keeps its cost under a budget (governor.c) and ships summaries to
 * gpulsed (client.c). docs/internals/inject.md has the design.
 *
 * This file: InitializeInjection and the exported API, the library's
 * thread, the interval's frames and the daemon's messages. CUPTI's
 * set-up and callbacks are in cupti_setup.c, the activity records and
 * NVTX ranges in records.c, continuous mode's census windows in
 * census_windows.c, giving CUPTI back to another profiler in handover.c,
 * exit and fork in forkexit.c; their shared state is inject_internal.h.
 *
 * Rules (DESIGN.md decision 7): never abort, never block an application
 * thread, bounded memory, every drop counted, and step aside with one log
 * line when CUPTI is missing, incompatible or taken by another profiler.
 *
 * Threads: the application's threads only run CUPTI callbacks here
 * (profiler start/stop, NVTX push/pop, context creation), which take no
 * lock that can be held for long (trylock, counted when busy). CUPTI's
 * own thread hands completed activity buffers to buffer_completed, which
 * aggregates under lib.mu. The library's thread ("gpulse-inject") opens
 * and closes tracing windows, flushes once a second and encodes frames;
 * the client's thread owns the socket. */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "inject/inject_internal.h"

#define API __attribute__((visibility("default")))
#define LOG_PREFIX "gpulse-inject: "

#define FLUSH_NS        NS_PER_SEC
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
#define CENSUS_WATCH_NS     (10 * NS_PER_MS) /* the watchdog's period while a window is open */
/* What exact kernel tracing leaves every later launch of the process
 * costing, once it has run (STATUS's lasting_cost_ppm): 15%, the median
 * measured on the H200 with CUPTI 13.0 and driver 580 (the runs of 12-30%
 * in docs/PERFORMANCE.md, 2026-12-01). A figure of this stack, not a
 * measurement of the process at hand. */
#define LASTING_COST_PPM    150000u

struct inject_lib lib = { .mu = PTHREAD_MUTEX_INITIALIZER };

API const char *gpulse_inject_version(void);
API int gpulse_inject_status_json(char *buf, size_t len);
API int InitializeInjection(void);

/* One line on stderr, always prefixed; the library says little. */
__attribute__((format(printf, 1, 2))) void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, LOG_PREFIX "%s\n", line);
}

void step_aside(const char *why)
{
	lib.stepped_aside = 1;
	lib.mode = WIRE_MODE_OFF;
	str_copy(lib.reason, sizeof lib.reason, why);
	say("stepping aside, the application runs untraced: %s", why);
}

/* ---- frames ---- */

int push_frame(const uint8_t *frame, size_t len, void *user)
{
	(void)user;
	if (!lib.client)
		return 0; /* no daemon connection is configured: nothing to count */
	client_push(lib.client, frame, len); /* drops are counted by the client */
	return 0;
}

void fill_hello(struct wire_hello *h)
{
	memset(h, 0, sizeof *h);
	h->pid = (uint32_t)getpid();
	h->ppid = (uint32_t)getppid();
	h->uid = (uint32_t)getuid();
	h->cupti_version = tracing.have_cupti || atomic_load(&tracing.arm_pending) ? lib.cupti.version : 0;
	h->cuda_driver_version = lib.driver_version;
	h->mode = lib.mode;
	h->budget_ppm = lib.budget_ppm;
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
	s->mode = lib.mode;
	s->active = (uint8_t)atomic_load(&tracing.active);
	s->stepped_aside = (uint8_t)lib.stepped_aside;
	str_copy(s->reason, sizeof s->reason, lib.reason);
	s->budget_ppm = lib.budget_ppm;
	if (lib.mode == WIRE_MODE_CONTINUOUS) {
		s->overhead_est_ppm = cen.gov.estimate_ppm;
		s->duty_ppm = cen.gov.duty_ppm;
		s->window_ns = cen.gov.on_ns;
	} else if (lib.mode == WIRE_MODE_FULL) {
		s->overhead_est_ppm = governor_predict_ppm(&cen.gov, 1, 0);
		s->duty_ppm = 1000000;
	}
	s->launch_rate_hz = cen.gov.rate_hz;
	s->records_total = atomic_load(&act.records_total);
	s->records_dropped_total = atomic_load(&act.records_dropped) + atomic_load(&act.nvtx_dropped);
	uint64_t fd = lib.frames_dropped;
	if (lib.client) {
		struct client_stats cs;
		client_get_stats(lib.client, &cs);
		fd += cs.frames_dropped;
	}
	s->frames_dropped_total = fd;
	s->kernels_other_total = lib.kernels_other;
	s->source = lib.mode == WIRE_MODE_CONTINUOUS && !atomic_load(&lib.capture_on)
			    ? WIRE_SOURCE_CENSUS : WIRE_SOURCE_TRACE;
	s->lasting_cost_ppm = tracing.lasting ? LASTING_COST_PPM : 0;
}

/* End the interval: swap the tables out, encode and queue the frames.
 * Runs on the library's thread (or at exit, once that thread is gone). */
void flush_interval(int64_t now_mono)
{
	int64_t now_wall = clock_wall_ns();
	uint64_t traced = atomic_exchange(&tracing.traced_accum, 0);
	if (atomic_load(&tracing.active)) {
		int64_t since = atomic_exchange(&tracing.active_since, now_mono);
		traced += now_mono > since ? (uint64_t)(now_mono - since) : 0;
	}
	if (lib.mode == WIRE_MODE_CONTINUOUS && cen.census && !life.is_fork_child) {
		/* The census's estimates cover the whole interval: that is
		 * the time its statistics stand for. */
		uint64_t iv_ns = now_wall > lib.interval_start_wall_ns
					 ? (uint64_t)(now_wall - lib.interval_start_wall_ns) : 0;
		int cap = atomic_load(&lib.capture_on), estimated = 0;
		census_fold(now_mono, iv_ns, !cap, &estimated);
		if (estimated)
			traced = iv_ns;
	}
	pthread_mutex_lock(&lib.mu);
	agg_take(lib.cur, lib.snap);
	pthread_mutex_unlock(&lib.mu);
	struct agg_interval iv = {
		.start_ns = (uint64_t)lib.interval_start_wall_ns, .end_ns = (uint64_t)now_wall,
		.traced_ns = traced, .topk = lib.cfg.topk,
	};
	uint64_t folded = 0;
	if (agg_encode(lib.enc, lib.snap, &iv, push_frame, NULL, &folded) != 0)
		lib.frames_dropped++;
	lib.kernels_other += lib.snap->kernels_other + folded;
	if (lib.total)
		agg_merge(lib.total, lib.snap);
	lib.interval_start_wall_ns = now_wall;
	/* Capture frames, then the status. */
	pthread_mutex_lock(&lib.mu);
	if (capture_pending(lib.cap)) {
		capture_drain(lib.cap, now_mono, 0, push_frame, NULL);
		if (!capture_pending(lib.cap))
			atomic_store(&lib.capture_on, 0);
	}
	pthread_mutex_unlock(&lib.mu);
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_STATUS;
	fill_status(&m.u.status);
	uint8_t frame[WIRE_HEADER_BYTES + 512];
	size_t len = wire_encode(&m, frame, sizeof frame);
	if (len)
		push_frame(frame, len, NULL);
	else
		lib.frames_dropped++;
}

/* ---- the library's thread ---- */

/* Whether tracing should be on now, by mode. */
static int want_tracing(void)
{
	if (lib.stepped_aside || !tracing.have_cupti)
		return 0;
	if (atomic_load(&lib.capture_on))
		return 1;
	switch (lib.mode) {
	case WIRE_MODE_FULL: return 1;
	case WIRE_MODE_CONTINUOUS:
		return 0; /* the census needs no activity tracing; captures are above */
	case WIRE_MODE_FOCUSED_PROFILER:
	case WIRE_MODE_FOCUSED_NVTX:
		return atomic_load(&tracing.focus_on) > 0;
	default: return 0;
	}
}

static void *inject_main(void *arg)
{
	(void)arg;
	int64_t next_flush = clock_mono_ns() + FLUSH_NS;
	pthread_mutex_lock(&lib.mu);
	while (!lib.stop) {
		pthread_mutex_unlock(&lib.mu);
		int64_t now = clock_mono_ns();
		/* Every subscription of the library changes under subs.mu, so that
		 * another profiler's subscribe (yield_subscriber) finds it
		 * either held or given back, never half way. */
		int flushed = 0;
		pthread_mutex_lock(&subs.mu);
		if (atomic_load(&subs.yielded) && !lib.stepped_aside)
			give_way(GIVE_WAY_YIELDED);
		/* A detach's result first: after one, CUPTI holds nothing of
		 * ours, and the census must not open or close a window on
		 * state that is gone. */
		if (lib.mode == WIRE_MODE_CONTINUOUS && !lib.stepped_aside && !life.is_fork_child)
			detach_tick(now);
		if (lib.mode == WIRE_MODE_CONTINUOUS && !lib.stepped_aside && !life.is_fork_child &&
		    (tracing.have_cupti || subs.holds_census)) {
			if (!subs.detach_sub && !atomic_load(&subs.detach_armed) && !atomic_load(&subs.detach_done))
				census_tick(now);
			census_poll_samples(now);
		}
		int want = want_tracing();
		int on = atomic_load(&tracing.active);
		if (want != on) {
			if (want) {
				set_tracing(1);
				tracing.window_start_ns = now;
			} else {
				set_tracing(0);
				tracing.window_start_ns = 0;
			}
		}
		if (atomic_load(&subs.sub_until_context) && (tracing.uvm_state != 0 || !tracing.have_cupti ||
							   now >= subs.sub_deadline_ns))
			release_context_subscriber();
		/* A capture asked before the first tick arms CUPTI now: a
		 * program of a second is over by the first flush (the H200's
		 * check of the known program got no capture at all). */
		pthread_mutex_lock(&lib.mu);
		int cap_waits = lib.pending_capture_set;
		pthread_mutex_unlock(&lib.mu);
		bool probed = cap_waits && atomic_load(&tracing.arm_pending) && !life.is_fork_child && arm_continuous();
		if (now >= next_flush) {
			probed = (atomic_load(&tracing.arm_pending) && !life.is_fork_child && arm_continuous()) || probed;
			if (tracing.have_cupti)
				lib.cupti.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
			if (!probed && !subs.holds_subscriber && !subs.holds_census && !subs.detach_sub &&
			    !atomic_load(&subs.sub_until_context) && tracing.have_cupti &&
			    (lib.mode == WIRE_MODE_FULL || lib.mode == WIRE_MODE_CONTINUOUS) &&
			    !(lib.cfg.skip & INJECT_SKIP_PROBE) && cupti_taken())
				give_way(GIVE_WAY_FOUND);
			if (tracing.uvm_state == 0 && tracing.have_cupti && !(lib.cfg.skip & INJECT_SKIP_UVM) &&
			    !atomic_load(&subs.sub_until_context) &&
			    (lib.mode == WIRE_MODE_CONTINUOUS || lib.mode == WIRE_MODE_FULL))
				enable_uvm_from_thread();
			flush_interval(now);
			next_flush = now + FLUSH_NS;
			flushed = 1;
		}
		pthread_mutex_unlock(&subs.mu);
		/* Objects loaded since (a profiler's library imported late):
		 * one loader step when none was. Outside subs.mu: the scan can wait
		 * for another thread's dlopen, whose constructors may
		 * subscribe (other_subscribe takes subs.mu). */
		if (flushed && subs.ip.scanned && !lib.stepped_aside)
			interpose_scan(&subs.ip);
		/* Sleep until the next thing to do: the flush, a census window's
		 * edge or the watchdog's look, whichever is first (not one
		 * period, so not common/periodic; the thread also runs with
		 * signals blocked and must not abort, see start_thread). */
		int64_t until = next_flush;
		if (lib.mode == WIRE_MODE_CONTINUOUS) {
			int64_t start = atomic_load(&cen.census_start_ns);
			/* The first window is watched closely: it ends by what
			 * it has cost, not by a clock. */
			int64_t edge = !subs.holds_census   ? cen.window_next_ns
				       : !cen.census_initial ? start + (int64_t)cen.gov.on_ns
							   : now + 10 * NS_PER_MS;
			if (edge > now && edge < until)
				until = edge;
			/* While a window may hold streams, the watchdog looks
			 * every CENSUS_WATCH_NS: a launch whose exit is never
			 * heard holds its stream that long past HOLD_MAX_NS at
			 * most, not a whole tick (a loaded CI machine once
			 * stretched a tick to 194 ms). */
			if (subs.holds_census && atomic_load(&cen.hold_state) == 2 && until > now + CENSUS_WATCH_NS)
				until = now + CENSUS_WATCH_NS;
		}
		if (until > now + THREAD_TICK_NS)
			until = now + THREAD_TICK_NS;
		pthread_mutex_lock(&lib.mu);
		if (!lib.stop)
			mono_cond_wait_until(&lib.wake, &lib.mu, until);
	}
	lib.thread_done = 1;
	mono_cond_broadcast(&lib.wake);
	pthread_mutex_unlock(&lib.mu);
	return NULL;
}

int start_thread(void)
{
	sigset_t all, old;
	sigfillset(&all);
	lib.thread_done = 0;
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&lib.thread, NULL, inject_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	lib.thread_started = rc == 0;
	return rc;
}

/* Daemon frames arrive on the client's thread. */
static void on_daemon_msg(const struct wire_msg *m, void *user)
{
	(void)user;
	if (m->type == WIRE_CAPTURE) {
		/* Before continuous mode's first tick the capture waits for
		 * CUPTI to be taken, which it asks for at once. */
		if (lib.stepped_aside)
			return;
		uint32_t secs = m->u.capture.seconds;
		if (secs == 0 || secs > CAPTURE_SECONDS_MAX)
			secs = secs ? CAPTURE_SECONDS_MAX : 1;
		pthread_mutex_lock(&lib.mu);
		if (!tracing.have_cupti) {
			/* Its seconds run from when tracing can start (the first
			 * tick arms CUPTI): counted from now, a capture asked at a
			 * program's start was over before it traced anything (the
			 * H200's check of a short program got 0 events). */
			lib.pending_capture = m->u.capture;
			lib.pending_capture.seconds = secs;
			lib.pending_capture_set = 1;
			mono_cond_signal(&lib.wake); /* arm now, not at the first flush */
			pthread_mutex_unlock(&lib.mu);
			return;
		}
		int64_t now = clock_mono_ns();
		capture_start(lib.cap, m->u.capture.capture_id, m->u.capture.max_events, now,
			      now + (int64_t)secs * NS_PER_SEC);
		atomic_store(&lib.capture_on, 1);
		mono_cond_signal(&lib.wake);
		pthread_mutex_unlock(&lib.mu);
	} else if (m->type == WIRE_CONFIG) {
		if (lib.stepped_aside || m->u.config.mode == WIRE_MODE_OFF)
			return; /* off is chosen at start (GPULSE_MODE=off) */
		pthread_mutex_lock(&lib.mu);
		/* gpulsed's settings are defaults: what the process's own
		 * environment set (GPULSE_MODE, GPULSE_BUDGET; gpulse run
		 * --focus, --budget) stays. */
		if (!lib.cfg.budget_set && m->u.config.budget_ppm && m->u.config.budget_ppm <= 1000000) {
			lib.budget_ppm = m->u.config.budget_ppm;
			governor_set_budget(&cen.gov, lib.budget_ppm);
		}
		/* Focused modes need the callbacks set up at start (they hold
		 * the subscriber): a running process switches between them
		 * only if it started in one. */
		int to_focus = m->u.config.mode == WIRE_MODE_FOCUSED_PROFILER ||
			       m->u.config.mode == WIRE_MODE_FOCUSED_NVTX;
		if (lib.cfg.mode_set) {
			/* the environment's mode stays */
		} else if (m->u.config.mode != lib.mode && m->u.config.mode < WIRE_MODE_OFF &&
		    (!to_focus || subs.holds_subscriber)) {
			lib.mode = m->u.config.mode;
			str_copy(lib.nvtx_focus, sizeof lib.nvtx_focus, m->u.config.nvtx_range);
			atomic_store(&tracing.focus_on, 0);
		} else if (to_focus && !subs.holds_subscriber && !lib.config_refused++) {
			say("a focused mode can only be chosen at start (GPULSE_MODE, gpulse run "
			    "--focus); staying %s", inject_mode_name(lib.mode));
		}
		mono_cond_signal(&lib.wake);
		pthread_mutex_unlock(&lib.mu);
	}
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
		cc.paths[i] = lib.cfg.socket_paths[i][0] ? lib.cfg.socket_paths[i] : NULL;
	cc.on_msg = on_daemon_msg;
	struct wire_hello h;
	fill_hello(&h);
	if (client_create(&lib.client, &cc, &h) != GPULSE_OK) {
		say("cannot start the daemon connection (out of memory or threads); "
		    "statistics stay in the process");
		lib.client = NULL;
	}
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
			 inject_mode_name(lib.mode), lib.stepped_aside ? "true" : "false",
			 atomic_load(&tracing.active), (unsigned long long)atomic_load(&act.records_total),
			 (unsigned long long)atomic_load(&act.records_dropped), cen.gov.duty_ppm,
			 cen.gov.estimate_ppm);
	return n > 0 && (size_t)n < len ? GPULSE_OK : GPULSE_ELIMIT;
}

API int InitializeInjection(void)
{
	if (lib.initialized)
		return 1;
	lib.initialized = 1;
	mono_cond_init(&lib.wake);
	lib.mono_to_wall_ns = clock_wall_ns() - clock_mono_ns();
	lib.interval_start_wall_ns = clock_wall_ns();
	cen.interval_start_mono_ns = clock_mono_ns();
	char err[1024];
	inject_config_load(&lib.cfg, env_get, (unsigned)getuid(), err, sizeof err);
	if (err[0])
		say("%s", err);
	lib.mode = lib.cfg.mode;
	lib.budget_ppm = lib.cfg.budget_ppm;
	str_copy(lib.nvtx_focus, sizeof lib.nvtx_focus, lib.cfg.nvtx_range);
	struct governor_config gc;
	governor_config_default(&gc);
	gc.budget_ppm = lib.budget_ppm;
	gc.cost_ns = lib.cfg.cost_ns;
	gc.tail_ns = lib.cfg.tail_ns;
	if (lib.cfg.mode == WIRE_MODE_CONTINUOUS) {
		/* The census's costs (callbacks leave nothing behind: no tail),
		 * unless set by hand. */
		if (!lib.cfg.cost_ns_set)
			gc.cost_ns = CENSUS_COST_NS;
		if (!lib.cfg.tail_ns_set)
			gc.tail_ns = 0;
		gc.fixed_ns = CENSUS_FIXED_NS;
		/* A window that heard no launch (a PyTorch process's first,
		 * while it builds its model) is followed by another within a
		 * second, not ten: the H200's training step went unseen for
		 * its whole 3 s run. A window's fixed cost a second is 0.1%,
		 * and the budget still spaces them wider if it must. */
		gc.period_ns = CENSUS_IDLE_PERIOD_NS;
	}
	governor_init(&cen.gov, &gc);
	int (*get_version)(int *) = NULL;
	void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	*(void **)(&get_version) = dlsym(libcuda ? libcuda : RTLD_DEFAULT, "cuDriverGetVersion");
	int dv = 0;
	if (get_version && get_version(&dv) == 0)
		lib.driver_version = (uint32_t)dv;

	lib.cur = agg_create();
	lib.snap = agg_create();
	lib.total = lib.cfg.dump_path[0] ? agg_create() : NULL;
	const char *sample_log = getenv("GPULSE_INJECT_SAMPLE_LOG"); /* benchmarks: every timed sample */
	if (sample_log && *sample_log && (cen.sample_log = fopen(sample_log, "w")) != NULL)
		setvbuf(cen.sample_log, NULL, _IOLBF, 0);
	lib.enc = agg_encoder_create();
	lib.cap = capture_create();
	act.names = calloc(NAME_CACHE, sizeof *act.names);
	if (lib.mode == WIRE_MODE_CONTINUOUS) {
		cen.census = calloc(1, sizeof *cen.census);
		cen.census_snap = calloc(1, sizeof *cen.census_snap);
		cen.census_means = calloc(1, sizeof *cen.census_means);
		cen.census_pool = calloc(1, sizeof *cen.census_pool);
	}
	if (!lib.cur || !lib.snap || !lib.enc || !lib.cap || (lib.cfg.dump_path[0] && !lib.total) ||
	    (lib.mode == WIRE_MODE_CONTINUOUS && (!cen.census || !cen.census_snap || !cen.census_means ||
					     !cen.census_pool))) {
		step_aside("out of memory for the aggregation tables");
		return 1;
	}
	if (lib.mode == WIRE_MODE_OFF) {
		step_aside("GPULSE_MODE=off");
	} else {
		find_demangler();
		setup_cupti();
	}
	connect_daemon();
	atexit(at_exit);
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	subs.sub_deadline_ns = clock_mono_ns() + SUB_HOLD_MAX_NS;
	if (tracing.have_cupti && lib.mode == WIRE_MODE_FULL)
		set_tracing(1);
	if (start_thread() != 0)
		say("cannot start the library's thread; statistics are written at exit only");
	return 1;
}

