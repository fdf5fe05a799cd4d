/* libgpulse-inject.so at the process's exit (the last flush, the JSON
 * dump) and across fork (the child reports as a new process with nothing
 * traced). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "inject/inject_internal.h"
#include "common/clock.h"
#include "common/str.h"

#define EXIT_FLUSH_NS   (200 * NS_PER_MS)

struct inject_life life;

/* ---- exit and fork ---- */

static void write_dump(void)
{
	if (!lib.cfg.dump_path[0] || !lib.total)
		return;
	char path[INJECT_PATH_MAX + 16];
	if (life.is_fork_child)
		snprintf(path, sizeof path, "%s.%d", lib.cfg.dump_path, (int)getpid());
	else
		str_copy(path, sizeof path, lib.cfg.dump_path);
	FILE *f = fopen(path, "we");
	if (!f) {
		say("cannot write %s: %s", path, strerror(errno));
		return;
	}
	char extra[8192];
	struct client_stats cs;
	memset(&cs, 0, sizeof cs);
	if (lib.client)
		client_get_stats(lib.client, &cs);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	char reason[2 * WIRE_REASON_MAX + 4];
	size_t o = 0;
	for (const char *p = lib.reason; *p && o + 3 < sizeof reason; p++) {
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
		 "\"holds\": %llu, \"holds_busy\": %llu, \"holds_late\": %llu, \"hold_state\": %d, \"floor_n\": %llu, "
		 "\"floor_mean_ns\": %.1f, \"floor_outliers\": %llu, "
		 "\"untimed_launches\": %llu, \"unpooled\": %llu, "
		 "\"can_time\": %s, \"cb_cost_ns\": %.1f, \"sample_every\": %u, "
		 "\"lib_cpu_in_windows_ppm\": %.1f}, \"detaches\": %llu",
		 (int)getpid(), lib.mode == WIRE_MODE_FOCUSED_NVTX ? "nvtx" : inject_mode_name(lib.mode),
		 lib.stepped_aside ? "true" : "false", reason, tracing.have_cupti ? lib.cupti.version : 0,
		 lib.budget_ppm, (unsigned long long)atomic_load(&act.records_total),
		 (unsigned long long)atomic_load(&act.records_dropped),
		 (unsigned long long)atomic_load(&act.nvtx_dropped),
		 (unsigned long long)lib.kernels_other, (unsigned long long)cen.windows, cen.gov.rate_hz,
		 cen.gov.cost_ns, cen.gov.fixed_ns, (unsigned long long)cen.gov.on_ns,
		 (unsigned long long)cen.gov.off_ns, cen.gov.duty_ppm, cen.gov.estimate_ppm,
		 (unsigned long long)cs.connects, (unsigned long long)cs.frames_sent,
		 (unsigned long long)(cs.frames_dropped + lib.frames_dropped),
		 (unsigned long long)atomic_load(&tracing.enable_failures), tracing.uvm_state,
		 subs.holds_subscriber ? "true" : "false", ru.ru_maxrss,
		 lib.mode == WIRE_MODE_CONTINUOUS ? "census" : "trace", tracing.lasting ? "true" : "false",
		 (unsigned long long)atomic_load(&cen.census_busy), (unsigned long long)cen.samples_lost,
		 (unsigned long long)cen.samples_ambiguous, (unsigned long long)cen.samples_unmet,
		 (unsigned long long)cen.holds, (unsigned long long)cen.holds_busy,
		 (unsigned long long)cen.holds_late, atomic_load(&cen.hold_state), (unsigned long long)cen.floor_n,
		 cen.floor_n ? (double)cen.floor_ns / (double)cen.floor_n : 0.0, (unsigned long long)cen.floor_outliers,
		 (unsigned long long)cen.untimed_launches,
		 (unsigned long long)(cen.census_pool ? cen.census_pool->unpooled : 0),
		 drv.can_time ? "true" : "false", cen.gov.cost_ns, lib.cfg.sample_every,
		 cen.lib_window_ns ? (double)cen.lib_window_cpu_ns * 1e6 / (double)cen.lib_window_ns : 0.0,
		 (unsigned long long)subs.detaches);
	/* The edges of the last windows, on CLOCK_MONOTONIC (benchmarks line
	 * their own timings up with them); close 0: still open. */
	size_t o2 = strlen(extra);
	/* The floors off a held sample, beside the census's figures. */
	{
		const struct calib_result *c = &cen.calib;
		/* why: the library's own words, with no quote or backslash. */
		o2 += (size_t)snprintf(extra + o2, sizeof extra - o2,
				       ", \"sample_offset\": {\"offset_floors\": %.3f, \"source\": \"%s\", "
				       "\"calibration\": {\"tries\": %d, \"ok\": %s, \"why\": \"%s\", "
				       "\"offset_ns\": %.1f, \"excess_ns\": %.1f, \"gap_ns\": %.1f, \"bound_ns\": %.1f, "
				       "\"floor_ns\": %.1f, \"floors\": %.3f, "
				       "\"spread_ns\": %.1f, \"delayed\": %.3f, \"slope\": %.4f, \"timer_step_ns\": %.0f, "
				       "\"samples\": %u, \"took_ns\": %llu}, "
				       "\"kept\": {\"found\": %s, \"floors\": %.3f, \"offset_ns\": %.1f, "
				       "\"bound_ns\": %.1f, \"floor_ns\": %.1f, \"at_s\": %lld, \"stored\": %s, "
				       "\"why\": \"%s\"}}",
				       cen.offset_floors, cen.offset_source ? cen.offset_source : "none",
				       cen.calib_tried, c->ok ? "true" : "false", c->why, c->offset_ns,
				       c->excess_ns, c->gap_ns, c->bound_ns, c->floor_ns, c->floors, isfinite(c->spread_ns) ? c->spread_ns : 0.0, c->delayed, isfinite(c->slope) ? c->slope : 0.0,
				       c->timer_step_ns, c->samples, (unsigned long long)cen.calib_ns,
				       cen.kept_found ? "true" : "false", cen.kept.floors, cen.kept.offset_ns,
				       cen.kept.bound_ns, cen.kept.floor_ns, cen.kept.at_s,
				       cen.kept_stored ? "true" : "false", cen.kept_why);
	}
	/* Other objects' subscribe calls sent here, and subscriptions given
	 * back to another profiler. */
	o2 += (size_t)snprintf(extra + o2, sizeof extra - o2,
			       ", \"interpose\": {\"installed\": %s, \"scans\": %llu, \"objects\": %llu, "
			       "\"patched\": %llu, \"failed\": %llu, \"scan_ns\": %llu, \"yields\": %llu}",
			       subs.ip.scanned ? "true" : "false", (unsigned long long)subs.ip.scans,
			       (unsigned long long)subs.ip.objects, (unsigned long long)subs.ip.patched,
			       (unsigned long long)subs.ip.failed, (unsigned long long)subs.ip.scan_ns,
			       (unsigned long long)subs.yields);
	o2 += (size_t)snprintf(extra + o2, sizeof extra - o2, ", \"window_log_mono_ns\": [");
	uint64_t first = cen.windows > WINDOW_LOG ? cen.windows - WINDOW_LOG : 0;
	int open_now = lib.mode == WIRE_MODE_CONTINUOUS && cen.window_log[cen.windows % WINDOW_LOG][0] &&
		       !cen.window_log[cen.windows % WINDOW_LOG][1];
	for (uint64_t w = first; w < cen.windows + (uint64_t)open_now && o2 < sizeof extra; w++)
		o2 += (size_t)snprintf(extra + o2, sizeof extra - o2, "%s[%lld, %lld]",
				       w > first ? ", " : "", (long long)cen.window_log[w % WINDOW_LOG][0],
				       (long long)cen.window_log[w % WINDOW_LOG][1]);
	if (o2 < sizeof extra)
		snprintf(extra + o2, sizeof extra - o2, "]");
	agg_dump_json(lib.total, f, extra);
	fclose(f);
}

void at_exit(void)
{
	if (!lib.initialized || life.exited)
		return;
	int thread_stuck = 0;
	if (lib.thread_started) {
		/* The thread may be inside a CUPTI or driver call; exit must
		 * not wait on it for long. The wait is on the monotonic clock
		 * (pthread_timedjoin_np's deadline is on the wall clock, which
		 * a step of the system's time can put days away). */
		int64_t until = clock_mono_ns() + 500 * NS_PER_MS;
		pthread_mutex_lock(&lib.mu);
		lib.stop = 1;
		mono_cond_broadcast(&lib.wake);
		while (!lib.thread_done && clock_mono_ns() < until)
			mono_cond_wait_until(&lib.wake, &lib.mu, until);
		int done = lib.thread_done;
		pthread_mutex_unlock(&lib.mu);
		if (done) {
			pthread_join(lib.thread, NULL);
		} else {
			thread_stuck = 1;
			say("the library's thread did not stop within 500 ms; exiting without the last flush");
		}
		lib.thread_started = 0;
	}
	if (thread_stuck) {
		life.exited = 1;
		hold_release_all(); /* exits are not heard from here on */
		write_dump();
		return;
	}
	int64_t now = clock_mono_ns();
	if ((tracing.have_cupti || atomic_load(&act.buffers_on)) && !life.is_fork_child) {
		/* Everything recorded so far, including partly filled buffers
		 * (a program over before the first tick has buffers, for its
		 * unified-memory counters, and no have_cupti yet). */
		lib.cupti.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	}
	if (lib.cur) {
		flush_interval(now);
		pthread_mutex_lock(&lib.mu);
		if (lib.pending_capture_set) {
			/* Asked, never started (CUPTI was not armed before the
			 * exit): answered, empty, so the asker is not left
			 * waiting for its end. */
			capture_start(lib.cap, lib.pending_capture.capture_id, lib.pending_capture.max_events, now, now);
			lib.pending_capture_set = 0;
		}
		if (capture_pending(lib.cap))
			capture_drain(lib.cap, now, 1, push_frame, NULL);
		pthread_mutex_unlock(&lib.mu);
	}
	life.exited = 1;
	hold_release_all(); /* exits are not heard from here on */
	if (tracing.have_cupti && !life.is_fork_child)
		set_tracing(0);
	if (lib.client)
		client_flush(lib.client, now + EXIT_FLUSH_NS);
	write_dump();
	/* The client's thread is stopped, but its memory stays: CUPTI's
	 * thread may still be inside a callback that reads the library's state. */
	if (lib.client)
		client_destroy(lib.client);
	lib.client = NULL;
}

void fork_prepare(void)
{
	pthread_mutex_lock(&lib.mu);
	if (lib.client)
		client_fork_prepare(lib.client);
}

void fork_parent(void)
{
	if (lib.client)
		client_fork_parent(lib.client);
	pthread_mutex_unlock(&lib.mu);
}

void fork_child(void)
{
	/* The child has one thread and a CUDA context it must not use.
	 * It reports as a new process with nothing traced: statistics
	 * start from zero, and a fork+exec child loads the library anew. */
	pthread_mutex_init(&lib.mu, NULL);
	pthread_mutex_init(&subs.mu, NULL);
	mono_cond_init(&lib.wake);
	life.is_fork_child = 1;
	nvtx_fork_child();
	atomic_store(&subs.sub_until_context, 0); /* the parent's; CUPTI is not the child's to touch */
	atomic_store(&tracing.active, 0);
	atomic_store(&lib.capture_on, 0);
	atomic_store(&cen.census_on, 0);
	subs.holds_census = 0;
	pthread_mutex_init(&cen.mu, NULL);
	if (cen.census)
		census_clear(cen.census);
	if (lib.cur)
		agg_clear(lib.cur);
	if (lib.total)
		agg_clear(lib.total);
	atomic_store(&act.records_total, 0);
	atomic_store(&act.records_dropped, 0);
	lib.frames_dropped = 0;
	lib.kernels_other = 0;
	lib.stop = 0;
	lib.thread_started = 0;
	if (lib.client) {
		struct wire_hello h;
		fill_hello(&h);
		client_fork_child(lib.client, &h);
	}
	start_thread();
}

