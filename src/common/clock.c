/* Clock helpers; see clock.h. */
#include "clock.h"

#include <errno.h>
#include <time.h>

static int64_t clock_read(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

int64_t clock_mono_ns(void)
{
	return clock_read(CLOCK_MONOTONIC);
}

int64_t clock_wall_ns(void)
{
	return clock_read(CLOCK_REALTIME);
}

int64_t clock_process_cpu_ns(void)
{
	return clock_read(CLOCK_PROCESS_CPUTIME_ID);
}

void clock_sleep_until(int64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = deadline_ns / NS_PER_SEC,
		.tv_nsec = deadline_ns % NS_PER_SEC,
	};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

void clock_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

int clock_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = deadline_ns / NS_PER_SEC,
		.tv_nsec = deadline_ns % NS_PER_SEC,
	};
	return pthread_cond_timedwait(c, m, &ts);
}
