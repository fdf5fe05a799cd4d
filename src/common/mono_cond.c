/* Monotonic condition variables (mono_cond.h): the one place in src/ that
 * calls pthread_cond_timedwait. */
#include "common/mono_cond.h"

#include <errno.h>
#include <time.h>

#include "common/clock.h"

void mono_cond_init(struct mono_cond *mc)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&mc->c, &ca);
	pthread_condattr_destroy(&ca);
}

void mono_cond_destroy(struct mono_cond *mc)
{
	pthread_cond_destroy(&mc->c);
}

void mono_cond_signal(struct mono_cond *mc)
{
	pthread_cond_signal(&mc->c);
}

void mono_cond_broadcast(struct mono_cond *mc)
{
	pthread_cond_broadcast(&mc->c);
}

void mono_cond_wait(struct mono_cond *mc, pthread_mutex_t *m)
{
	pthread_cond_wait(&mc->c, m);
}

int mono_cond_wait_until(struct mono_cond *mc, pthread_mutex_t *m, int64_t deadline_ns)
{
	if (deadline_ns < 0)
		deadline_ns = 0;
	struct timespec ts = {
		.tv_sec = deadline_ns / NS_PER_SEC,
		.tv_nsec = deadline_ns % NS_PER_SEC,
	};
	return pthread_cond_timedwait(&mc->c, m, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}
