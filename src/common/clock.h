/* Clocks: monotonic for intervals and deadlines, wall clock only for
 * sample timestamps (STYLE.md). */
#ifndef GPULSE_CLOCK_H
#define GPULSE_CLOCK_H

#include <pthread.h>
#include <stdint.h>

#define NS_PER_SEC 1000000000LL
#define NS_PER_MS 1000000LL
#define NS_PER_US 1000LL

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t clock_mono_ns(void);
/* CLOCK_REALTIME in nanoseconds since the Unix epoch. */
int64_t clock_wall_ns(void);
/* "Now" on the wall clock, as a part that applies wall-clock rules
 * (retention, the choice of rollups, pruning) reads it. Such a part takes
 * one in its options, so a test can pin the time its data was recorded at
 * instead of meeting those rules against today's date. A zeroed one is the
 * system's wall clock. */
typedef int64_t clock_now_fn(void *ctx); /* ms since the Unix epoch */
struct clock_wall {
	clock_now_fn *now_ms; /* NULL: CLOCK_REALTIME */
	void *ctx;
};
/* The time of `c` in ms since the epoch; NULL or zeroed: CLOCK_REALTIME. */
int64_t clock_wall_ms(const struct clock_wall *c);
/* CPU time used by the whole process, in nanoseconds. */
int64_t clock_process_cpu_ns(void);
/* CPU time used by the calling thread, in nanoseconds. */
int64_t clock_thread_cpu_ns(void);
/* Sleep until the monotonic time `deadline_ns`, resuming after signals. */
void clock_sleep_until(int64_t deadline_ns);
/* RFC 3339 as Prometheus's API takes it, YYYY-MM-DDTHH:MM:SS[.frac]
 * (Z|+HH:MM|-HH:MM), to milliseconds since the epoch (the fraction
 * truncated to ms, as Go's time.Time). 0, or GPULSE_EINVAL. The writer is
 * buf_put_rfc3339. */
int clock_parse_rfc3339(const char *s, int64_t *t_ms);

#endif
