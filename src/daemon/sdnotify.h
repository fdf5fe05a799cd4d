/* Telling systemd how gpulsed is doing (Type=notify): readiness once it
 * serves, watchdog pings from the main loop, reload and stop, and STATUS=
 * lines for `systemctl status`. Messages go through libsystemd's
 * sd_notify to $NOTIFY_SOCKET; without one (not under systemd) every call
 * is a no-op that costs a getenv. */
#ifndef GPULSE_SDNOTIFY_H
#define GPULSE_SDNOTIFY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "common/metric.h"

struct buf;

struct sdnotify {
	int64_t watchdog_ns;    /* ping interval: half of WATCHDOG_USEC; 0 no watchdog */
	int64_t next_ping_ns;   /* monotonic time of the next ping */
	bool ready;             /* READY=1 sent */
	/* Written by the main thread, read by /metrics. */
	atomic_uint_fast64_t sent_total;    /* messages handed to $NOTIFY_SOCKET */
	atomic_uint_fast64_t failed_total;  /* messages that could not be sent */
};

/* Read the watchdog setting of the environment (sd_watchdog_enabled:
 * WATCHDOG_USEC, and WATCHDOG_PID when set must be this process) into
 * *n, at monotonic time now_ns. The environment is left as it is:
 * sd_notify reads $NOTIFY_SOCKET at each call, and what children that
 * inherit it might send is ignored by systemd (NotifyAccess=main). */
void sdnotify_init(struct sdnotify *n, int64_t now_ns);

/* READY=1 with a STATUS= line (status may be NULL); sent once, later
 * calls only update STATUS. */
void sdnotify_ready(struct sdnotify *n, const char *status);

/* A STATUS= line alone. */
void sdnotify_status(struct sdnotify *n, const char *status);

/* RELOADING=1 before a reload, READY=1 after it (systemd's reload
 * protocol for Type=notify). */
void sdnotify_reloading(struct sdnotify *n);
void sdnotify_reloaded(struct sdnotify *n, const char *status);

/* STOPPING=1 as shutdown begins. */
void sdnotify_stopping(struct sdnotify *n);

/* WATCHDOG=1 when a ping is due at now_ns; nothing otherwise or without
 * a watchdog. Call it from the loop whose liveness the ping vouches for. */
void sdnotify_watchdog(struct sdnotify *n, int64_t now_ns);

/* Nanoseconds until the next ping is due (0 when overdue), or -1 without
 * a watchdog: the longest the main loop may sleep. */
int64_t sdnotify_wait_ns(const struct sdnotify *n, int64_t now_ns);

/* gpulse_systemd_notifications_total{result="sent|failed"} to a metric
 * sink (/metrics' text writer or the store's). */
void sdnotify_metrics(const struct sdnotify *n, struct metric_sink *s);

#endif
