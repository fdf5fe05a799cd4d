/* The periodic thread (common/periodic.c): its first run, its period as
 * a lower bound (never early: a bound that no machine's speed breaks),
 * no burst after an overrun, a stop that wakes a thread waiting an hour,
 * a kick, and start/stop/start. Waits are on conditions with generous
 * deadlines, never fixed sleeps. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/mono_cond.h"
#include "common/periodic.h"
#include "common/status.h"

#define MAX_RUNS 64
#define period (20 * NS_PER_MS)
#define HOUR_NS (3600LL * NS_PER_SEC)
#define PATIENCE_NS (30LL * NS_PER_SEC) /* far past any wait here */

struct rec {
	pthread_mutex_t mu;
	struct mono_cond cv;
	int n;
	int64_t at[MAX_RUNS];
	int64_t overrun_ns; /* the first run takes this long */
};

static void run(void *ctx)
{
	struct rec *r = ctx;
	int64_t now = clock_mono_ns();
	pthread_mutex_lock(&r->mu);
	int k = r->n;
	if (r->n < MAX_RUNS)
		r->at[r->n++] = now;
	mono_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (k == 0 && r->overrun_ns)
		clock_sleep_until(now + r->overrun_ns);
}

static void rec_init(struct rec *r)
{
	*r = (struct rec){0};
	pthread_mutex_init(&r->mu, NULL);
	mono_cond_init(&r->cv);
}

static void rec_free(struct rec *r)
{
	pthread_mutex_destroy(&r->mu);
	mono_cond_destroy(&r->cv);
}

/* Wait until n runs were counted; false if PATIENCE_NS passed first. */
static bool wait_runs(struct rec *r, int n)
{
	int64_t until = clock_mono_ns() + PATIENCE_NS;
	pthread_mutex_lock(&r->mu);
	while (r->n < n && clock_mono_ns() < until)
		mono_cond_wait_until(&r->cv, &r->mu, until);
	bool ok = r->n >= n;
	pthread_mutex_unlock(&r->mu);
	return ok;
}

static void test_period(void **state)
{
	(void)state;
	struct rec r;
	rec_init(&r);
	struct periodic p;
	periodic_init(&p, "test-periodic", false, run, &r);
	int64_t t0 = clock_mono_ns();
	assert_int_equal(periodic_start(&p, period), 0);
	assert_int_equal(periodic_start(&p, period), GPULSE_ESTATE);
	assert_true(wait_runs(&r, 6));
	periodic_stop(&p);
	pthread_mutex_lock(&r.mu);
	int n = r.n;
	pthread_mutex_unlock(&r.mu);
	/* Steps from the start: run k is never before t0 + k periods. */
	for (int k = 0; k < n; k++)
		if (r.at[k] < t0 + k * period)
			fail_msg("run %d at %lld ns, before its step %lld", k,
				 (long long)(r.at[k] - t0), (long long)(k * period));
	/* Stopped: no run after the stop returned. */
	periodic_stop(&p); /* a second stop is harmless */
	pthread_mutex_lock(&r.mu);
	assert_int_equal(r.n, n);
	pthread_mutex_unlock(&r.mu);
	/* Started again, it runs again. */
	assert_int_equal(periodic_start(&p, period), 0);
	assert_true(wait_runs(&r, n + 1));
	periodic_destroy(&p);
	rec_free(&r);
}

/* A run three periods long is followed by one at once, then by runs a
 * period apart again: not three runs in a row to catch up. (Half a
 * period is the bound: a run's own timestamp comes a moment after the
 * thread's, and a burst would be runs microseconds apart.) */
static void test_overrun_no_burst(void **state)
{
	(void)state;
	struct rec r;
	rec_init(&r);
	r.overrun_ns = 3 * period;
	struct periodic p;
	periodic_init(&p, "test-periodic", false, run, &r);
	assert_int_equal(periodic_start(&p, period), 0);
	assert_true(wait_runs(&r, 4));
	periodic_stop(&p);
	assert_true(r.at[1] - r.at[0] >= r.overrun_ns);
	for (int k = 2; k < r.n; k++)
		if (r.at[k] - r.at[k - 1] < period / 2)
			fail_msg("runs %d and %d %lld ns apart, a burst", k - 1, k,
				 (long long)(r.at[k] - r.at[k - 1]));
	periodic_destroy(&p);
	rec_free(&r);
}

/* delay_first with an hour's period: nothing runs; a kick runs it; a stop
 * returns at once, not in an hour. */
static void test_kick_and_stop_wake(void **state)
{
	(void)state;
	struct rec r;
	rec_init(&r);
	struct periodic p;
	periodic_init(&p, "test-periodic", true, run, &r);
	periodic_kick(&p); /* not running: nothing to do */
	assert_int_equal(periodic_start(&p, HOUR_NS), 0);
	periodic_kick(&p);
	assert_true(wait_runs(&r, 1));
	int64_t t = clock_mono_ns();
	periodic_stop(&p);
	assert_true(clock_mono_ns() - t < PATIENCE_NS);
	assert_int_equal(r.n, 1);
	periodic_destroy(&p);
	rec_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_period),
		cmocka_unit_test(test_overrun_no_burst),
		cmocka_unit_test(test_kick_and_stop_wake),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
