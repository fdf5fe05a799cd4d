/* A condition variable whose timed waits run on CLOCK_MONOTONIC, the
 * clock every deadline in gpulse is computed on (clock_mono_ns).
 *
 * Why a type of its own: pthread_cond_timedwait reads its deadline on the
 * clock the condition was created with, CLOCK_REALTIME unless told
 * otherwise. A monotonic deadline (seconds since boot) read as wall-clock
 * time lies decades in the past, so every wait returns at once and the
 * waiting thread spins. Created and waited on only through these
 * functions, a condition cannot meet a deadline on the wrong clock; the
 * build rejects pthread_cond_timedwait anywhere else in src/
 * (cmake/check_cond_waits.cmake). A condition only ever waited on without
 * a deadline may stay a plain pthread_cond_t. */
#ifndef GPULSE_MONO_COND_H
#define GPULSE_MONO_COND_H

#include <pthread.h>
#include <stdint.h>

struct mono_cond {
	pthread_cond_t c; /* created on CLOCK_MONOTONIC; use the functions below */
};

void mono_cond_init(struct mono_cond *mc);
void mono_cond_destroy(struct mono_cond *mc);
void mono_cond_signal(struct mono_cond *mc);
void mono_cond_broadcast(struct mono_cond *mc);
/* Wait without a deadline; m is held, as for pthread_cond_wait. */
void mono_cond_wait(struct mono_cond *mc, pthread_mutex_t *m);
/* Wait until signalled or until the monotonic time deadline_ns
 * (clock_mono_ns); m is held. 0 (woken: possibly spuriously, the caller
 * checks its condition) or ETIMEDOUT (the deadline has passed). */
int mono_cond_wait_until(struct mono_cond *mc, pthread_mutex_t *m, int64_t deadline_ns);

#endif
