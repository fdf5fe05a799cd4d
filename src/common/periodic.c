/* A callback every period on its own thread; see periodic.h. */
#include "common/periodic.h"

#include <stdio.h>

#include "common/clock.h"
#include "common/status.h"

void periodic_init(struct periodic *p, const char *name, bool delay_first, periodic_fn *fn,
		   void *ctx)
{
	*p = (struct periodic){.fn = fn, .ctx = ctx, .delay_first = delay_first};
	snprintf(p->name, sizeof p->name, "%s", name ? name : "gpulse-periodic");
	pthread_mutex_init(&p->mu, NULL);
	mono_cond_init(&p->wake);
}

static void *periodic_main(void *arg)
{
	struct periodic *p = arg;
	pthread_setname_np(pthread_self(), p->name);
	pthread_mutex_lock(&p->mu);
	int64_t due = clock_mono_ns() + (p->delay_first ? p->period_ns : 0);
	bool restart = false; /* the next run starts the steps afresh */
	for (;;) {
		while (!p->stop && !p->kicked && clock_mono_ns() < due)
			mono_cond_wait_until(&p->wake, &p->mu, due);
		if (p->stop)
			break;
		bool fresh = restart || p->kicked;
		p->kicked = false;
		pthread_mutex_unlock(&p->mu);
		int64_t started = clock_mono_ns();
		p->fn(p->ctx);
		pthread_mutex_lock(&p->mu);
		/* A kicked run, or the one at once after an overrun, starts
		 * the steps afresh: no runs to catch up the missed ones. */
		due = (fresh ? started : due) + p->period_ns;
		int64_t now = clock_mono_ns();
		restart = due < now;
		if (restart)
			due = now;
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int periodic_start(struct periodic *p, int64_t period_ns)
{
	pthread_mutex_lock(&p->mu);
	if (p->running) {
		pthread_mutex_unlock(&p->mu);
		return GPULSE_ESTATE;
	}
	p->period_ns = period_ns > 0 ? period_ns : NS_PER_SEC;
	p->stop = false;
	p->kicked = false;
	int rc = pthread_create(&p->thread, NULL, periodic_main, p) == 0 ? GPULSE_OK
									 : GPULSE_ENOMEM;
	p->running = rc == GPULSE_OK;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

void periodic_kick(struct periodic *p)
{
	pthread_mutex_lock(&p->mu);
	p->kicked = true;
	mono_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
}

void periodic_set_period(struct periodic *p, int64_t period_ns)
{
	pthread_mutex_lock(&p->mu);
	p->period_ns = period_ns > 0 ? period_ns : NS_PER_SEC;
	pthread_mutex_unlock(&p->mu);
}

void periodic_stop(struct periodic *p)
{
	pthread_mutex_lock(&p->mu);
	bool was = p->running;
	p->stop = true;
	p->running = false;
	mono_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	if (was)
		pthread_join(p->thread, NULL);
}

void periodic_destroy(struct periodic *p)
{
	if (!p)
		return;
	periodic_stop(p);
	pthread_mutex_destroy(&p->mu);
	mono_cond_destroy(&p->wake);
}
