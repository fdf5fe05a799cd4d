/* libgpulse-inject.so giving CUPTI back: to another profiler that takes
 * it (found by a probe, cupti_taken, or heard through its own
 * cuptiSubscribe, which interpose.c sends to yield_subscriber), and to
 * the application after exact tracing (GPULSE_DETACH, detach_tick). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "inject/inject_internal.h"
#include "common/clock.h"

struct inject_subs subs = { .mu = PTHREAD_MUTEX_INITIALIZER };

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

int cupti_taken(void)
{
	CUpti_SubscriberHandle s;
	CUptiResult r = lib.cupti.subscribe(&s, probe_cb, NULL);
	if (r == CUPTI_SUCCESS) {
		lib.cupti.unsubscribe(s);
		return 0;
	}
	return r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}

/* Another profiler took CUPTI: leave every CUPTI setting as it is (the
 * other tool owns them now) and stop tracing for good. */
void give_way(const char *why)
{
	tracing.have_cupti = 0;
	atomic_store(&tracing.active, 0);
	step_aside(why);
}

/* GPULSE_DETACH, on the library's thread: once exact tracing has run and
 * no capture is on, arm a cuptiFinalize at the next driver API exit (the
 * census's callbacks if a window is open, else a subscription of its
 * own); then take the result. */
void detach_tick(int64_t now)
{
	int done = atomic_exchange(&subs.detach_done, 0);
	if (done) {
		if (done > 0) {
			/* CUPTI is as at the process's start (no subscriber any
			 * more): arm again at the next tick (buffers, markers,
			 * the census). An open census window ends here. */
			subs.detach_sub = 0;
			subs.detaches++;
			tracing.lasting = 0;
			census_drop_window(now, 0); /* no exit is heard after cuptiFinalize */
			tracing.have_cupti = 0;
			tracing.uvm_state = 0;
			atomic_store(&act.buffers_on, 0);
			atomic_store(&tracing.arm_pending, 1);
			say("detached from CUPTI after exact tracing (GPULSE_DETACH): launches are back at "
			    "their cost before it; the census starts again");
		} else {
			subs.detach_refused = 1;
			if (subs.detach_sub) {
				lib.cupti.unsubscribe(subs.sub);
				subs.detach_sub = 0;
			}
			say("cuptiFinalize refused: %s; the lasting cost of exact tracing stays (not tried again)",
			    cupti_lib_strerror(&lib.cupti, (CUptiResult)atomic_load(&subs.detach_result)));
		}
		return;
	}
	if (atomic_load(&subs.detach_armed)) {
		int armed = 1;
		if (now < subs.detach_deadline_ns || !atomic_compare_exchange_strong(&subs.detach_armed, &armed, 0))
			return; /* armed, or detaching right now */
		/* No driver API call came: let the subscription go, later again. */
		if (subs.detach_sub) {
			lib.cupti.unsubscribe(subs.sub);
			subs.detach_sub = 0;
		}
		subs.detach_next_ns = now + 10 * NS_PER_SEC;
		return;
	}
	if (!lib.cfg.detach || !lib.cupti.finalize || !tracing.lasting || subs.detach_refused || !tracing.have_cupti ||
	    atomic_load(&tracing.active) || atomic_load(&lib.capture_on) || now < subs.detach_next_ns)
		return;
	/* What the capture traced is in; CUPTI's buffers go with it. */
	lib.cupti.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (!subs.holds_census) {
		CUptiResult r = lib.cupti.subscribe(&subs.sub, on_callback, NULL);
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			give_way(GIVE_WAY_FOUND);
			return;
		}
		if (r != CUPTI_SUCCESS)
			return;
		census_enable_callbacks(subs.sub);
		subs.detach_sub = 1;
	}
	subs.detach_deadline_ns = now + 10 * NS_PER_SEC;
	atomic_store(&subs.detach_armed, 1);
}

/* Full mode's subscriber, held until the unified-memory counters are
 * on (or given up), or for SUB_HOLD_MAX_NS if no context appears, so that
 * a profiler started later can still take CUPTI. */
void release_context_subscriber(void)
{
	if (atomic_exchange(&subs.sub_until_context, 0))
		lib.cupti.unsubscribe(subs.sub);
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
	if (life.is_fork_child || lib.stepped_aside || atomic_load(&subs.yielded))
		return;
	pthread_mutex_lock(&subs.mu);
	if (!atomic_exchange(&subs.yielded, 1) && !lib.stepped_aside) {
		int64_t now = clock_mono_ns();
		int held = subs.holds_census || subs.detach_sub || atomic_load(&subs.sub_until_context);
		if (subs.holds_census) {
			census_drop_window(now, 1);
			cen.window_log[cen.windows % WINDOW_LOG][1] = now;
			cen.windows++;
		}
		int armed = 1;
		if (atomic_compare_exchange_strong(&subs.detach_armed, &armed, 0) && subs.detach_sub)
			lib.cupti.unsubscribe(subs.sub);
		subs.detach_sub = 0;
		release_context_subscriber();
		if (held)
			subs.yields++;
	}
	pthread_mutex_unlock(&subs.mu);
	pthread_mutex_lock(&lib.mu);
	mono_cond_signal(&lib.wake); /* step aside now, not at the next tick */
	pthread_mutex_unlock(&lib.mu);
}

static CUptiResult CUPTIAPI other_subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
					    void *user)
{
	yield_subscriber();
	return lib.cupti.subscribe(sub, cb, user);
}

static CUptiResult CUPTIAPI other_subscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
					       void *user, CUpti_SubscriberParams *params)
{
	yield_subscriber();
	if (!lib.cupti.subscribe_v2)
		return CUPTI_ERROR_NOT_INITIALIZED;
	return lib.cupti.subscribe_v2(sub, cb, user, params);
}

static const struct interpose_entry subscribe_entries[] = {
	{ "cuptiSubscribe", (void *)other_subscribe },
	{ "cuptiSubscribe_v2", (void *)other_subscribe_v2 },
};

/* Continuous and full modes: send the other objects' subscribe calls to
 * yield_subscriber (not CUPTI's own, nor ours). Objects loaded later are
 * found by the library thread's rescan once a second. */
void install_interpose(void)
{
	if ((lib.mode != WIRE_MODE_CONTINUOUS && lib.mode != WIRE_MODE_FULL) ||
	    (lib.cfg.skip & INJECT_SKIP_INTERPOSE) || !interpose_supported())
		return;
	const void *skip[] = { (const void *)yield_subscriber, (const void *)lib.cupti.subscribe };
	interpose_init(&subs.ip, subscribe_entries, sizeof subscribe_entries / sizeof subscribe_entries[0],
		       skip, sizeof skip / sizeof skip[0]);
	interpose_scan(&subs.ip);
}

