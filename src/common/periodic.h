/* A thread that runs a callback every period on the monotonic clock
 * until stopped: the scrape, tick and sampling loops of gpulse, written
 * once. Timed waits go through mono_cond (mono_cond.h says why); a stop
 * wakes the thread at once rather than at its next period.
 *
 *     struct periodic t;
 *     periodic_init(&t, "gpulse-live", false, scrape, ls);
 *     periodic_start(&t, interval_ns);   ... scrape(ls) now, then every interval
 *     periodic_stop(&t);        ... returns once the thread has ended
 *     periodic_destroy(&t);
 *
 * Schedule: runs are due at fixed steps of the period from the start (not
 * a period after each run ends). A run that overran one or more steps is
 * followed by the next at once, and the steps go on from then: no burst
 * of runs to catch up. */
#ifndef GPULSE_PERIODIC_H
#define GPULSE_PERIODIC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/mono_cond.h"

/* Called on the periodic thread with no lock of this module held. */
typedef void periodic_fn(void *ctx);

/* Fields are private: use the functions below. */
struct periodic {
	pthread_mutex_t mu;
	struct mono_cond wake;
	pthread_t thread;
	periodic_fn *fn;
	void *ctx;
	int64_t period_ns;
	char name[16];
	bool delay_first, running, stop, kicked;
};

/* Set up p, not running: fn(ctx) on a thread named `name` (cut to 15
 * bytes), the first run at the start, or one period after it when
 * delay_first. */
void periodic_init(struct periodic *p, const char *name, bool delay_first, periodic_fn *fn,
		   void *ctx);

/* Start the thread, running fn every period_ns (> 0; 1 s if not).
 * 0, GPULSE_ESTATE (already running: nothing changes) or GPULSE_ENOMEM
 * (no thread). A stopped periodic may be started again. */
int periodic_start(struct periodic *p, int64_t period_ns);

/* Run now: at once if the thread waits, else right after the run in
 * progress; the steps go on from that run. No effect when stopped. */
void periodic_kick(struct periodic *p);

/* Run every period_ns (> 0; 1 s if not) from now on: the next run is
 * due period_ns after the run in progress (or, when waiting, after the
 * coming one). The callback may call it to pick its own next period. */
void periodic_set_period(struct periodic *p, int64_t period_ns);

/* Stop and join the thread: the run in progress finishes first; a
 * waiting thread is woken at once. No effect when not running. Not from
 * the callback itself. */
void periodic_stop(struct periodic *p);

/* periodic_stop, then release p's lock and condition. */
void periodic_destroy(struct periodic *p);

#endif
