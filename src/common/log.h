/* Logging to stderr (journald picks it up under systemd) with levels, and a
 * rate-limited complaint for errors that would otherwise repeat every
 * sampling interval (collectd's habit): report once, then back off
 * doubling up to a day, and say so once when the condition clears. */
#ifndef GPULSE_LOG_H
#define GPULSE_LOG_H

#include <stdint.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Set the lowest level printed (default LOG_INFO). Thread-safe. */
void log_set_level(enum log_level level);
/* Parse "error", "warn", "info", "debug". 0 or GPULSE_EINVAL. */
int log_level_parse(const char *s, enum log_level *out);
/* Set the program name printed before each line (static storage). */
void log_set_ident(const char *ident);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* State of one repeating complaint. Zero-initialise it. Not thread-safe:
 * each complaint belongs to one thread (a collector lane, say). */
struct complaint {
	int64_t last_ns;     /* monotonic time of the last report */
	int64_t interval_ns; /* current back-off */
	uint64_t suppressed; /* reports skipped since the last one */
};

/* Report `fmt` at LOG_WARN unless the back-off says to stay quiet. */
void complain(struct complaint *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The condition cleared: say so once (at LOG_INFO) if it had been
 * reported, and reset the back-off. */
void complaint_clear(struct complaint *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
