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
 * aggregates under g.mu. The library's thread ("gpulse-inject") opens
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

#include "inject_internal.h"
#include "clock.h"
#include "status.h"
#include "str.h"

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

struct inject_globals g = { .mu = PTHREAD_MUTEX_INITIALIZER, .cmu = PTHREAD_MUTEX_INITIALIZER,
	.smu = PTHREAD_MUTEX_INITIALIZER, .bmu = PTHREAD_MUTEX_INITIALIZER };

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
	g.stepped_aside = 1;
	g.mode = WIRE_MODE_OFF;
	str_copy(g.reason, sizeof g.reason, why);
	say("stepping aside, the application runs untraced: %s", why);
}

/* ---- frames ---- */

int push_frame(const uint8_t *frame, size_t len, void *user)
{
	(void)user;
	if (!g.client)
		return 0; /* no daemon connection is configured: nothing to count */
	client_push(g.client, frame, len); /* drops are counted by the client */
	return 0;
}

void fill_hello(struct wire_hello *h)
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
void flush_interval(int64_t now_mono)
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

int start_thread(void)
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

