/* Monotonic condition variables (src/common/mono_cond.c): a timed wait
 * lasts until its monotonic deadline, and a signal ends it sooner. Only
 * lower bounds on time are asserted, which hold on any machine. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/mono_cond.h"

/* A deadline 200 ms ahead on the monotonic clock: ETIMEDOUT comes no
 * sooner. A condition created on CLOCK_REALTIME reads the same deadline as
 * a wall-clock time decades ago and times out at once. */
static void test_wait_until_deadline(void **state)
{
	(void)state;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct mono_cond mc;
	mono_cond_init(&mc);
	pthread_mutex_lock(&m);
	int64_t deadline = clock_mono_ns() + 200 * NS_PER_MS;
	int rc, wakes = 0;
	/* 0 is a spurious wake (nobody signals): wait again, as callers do. */
	while ((rc = mono_cond_wait_until(&mc, &m, deadline)) == 0 && ++wakes < 1000)
		;
	int64_t now = clock_mono_ns();
	pthread_mutex_unlock(&m);
	assert_int_equal(rc, ETIMEDOUT);
	assert_true(now >= deadline);
	/* A deadline already past times out without blocking. */
	pthread_mutex_lock(&m);
	assert_int_equal(mono_cond_wait_until(&mc, &m, clock_mono_ns() - NS_PER_SEC), ETIMEDOUT);
	assert_int_equal(mono_cond_wait_until(&mc, &m, 0), ETIMEDOUT);
	pthread_mutex_unlock(&m);
	mono_cond_destroy(&mc);
}

struct signaller {
	pthread_mutex_t m;
	struct mono_cond mc;
	bool flag;
};

static void *signal_main(void *arg)
{
	struct signaller *s = arg;
	pthread_mutex_lock(&s->m);
	s->flag = true;
	mono_cond_signal(&s->mc);
	pthread_mutex_unlock(&s->m);
	return NULL;
}

/* A signal ends the wait before a far deadline: the waiter sees 0. */
static void test_signal_wakes(void **state)
{
	(void)state;
	struct signaller s = {.m = PTHREAD_MUTEX_INITIALIZER};
	mono_cond_init(&s.mc);
	pthread_mutex_lock(&s.m);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, signal_main, &s), 0);
	int64_t deadline = clock_mono_ns() + 600 * NS_PER_SEC;
	int rc = 0;
	while (!s.flag && (rc = mono_cond_wait_until(&s.mc, &s.m, deadline)) == 0)
		;
	pthread_mutex_unlock(&s.m);
	pthread_join(t, NULL);
	assert_int_equal(rc, 0);
	assert_true(s.flag);
	mono_cond_destroy(&s.mc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_until_deadline),
		cmocka_unit_test(test_signal_wakes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
