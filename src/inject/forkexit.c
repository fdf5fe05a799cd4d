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

#include "inject_internal.h"
#include "clock.h"
#include "str.h"

#define EXIT_FLUSH_NS   (200 * NS_PER_MS)

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

void at_exit(void)
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

void fork_prepare(void)
{
	pthread_mutex_lock(&g.mu);
	if (g.client)
		client_fork_prepare(g.client);
}

void fork_parent(void)
{
	if (g.client)
		client_fork_parent(g.client);
	pthread_mutex_unlock(&g.mu);
}

void fork_child(void)
{
	/* The child has one thread and a CUDA context it must not use.
	 * It reports as a new process with nothing traced: statistics
	 * start from zero, and a fork+exec child loads the library anew. */
	pthread_mutex_init(&g.mu, NULL);
	pthread_mutex_init(&g.smu, NULL);
	mono_cond_init(&g.wake);
	g.is_fork_child = 1;
	nvtx_fork_child();
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
	if (g.client) {
		struct wire_hello h;
		fill_hello(&h);
		client_fork_child(g.client, &h);
	}
	start_thread();
}

