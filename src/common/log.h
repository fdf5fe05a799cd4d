/* Logging to stderr (journald picks it up under systemd) with levels, and a
 * rate-limited complaint for errors that would otherwise repeat every
 * sampling interval (collectd's habit): report once, then back off
 * doubling up to a day, and say so once when the condition clears. */
#ifndef GPULSE_LOG_H
#define GPULSE_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Set the lowest level printed (default LOG_INFO). Thread-safe. */
void log_set_level(enum log_level level);
/* Parse "error", "warn", "info", "debug". 0 or GPULSE_EINVAL. */
int log_level_parse(const char *s, enum log_level *out);
/* Set the program name printed before each line (static storage). */
void log_set_ident(const char *ident);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* State of one repeating complaint. Zero-initialise it. Not thread-safe:
 * each complaint belongs to one thread (a collector lane, say) or to one
 * lock. */
struct complaint {
	int64_t last_ns;      /* monotonic time of the last report */
	int64_t interval_ns;  /* current back-off; 0: quiet until reported */
	int64_t last_wall_ns; /* wall time of the last report, for the log */
	uint64_t suppressed;  /* reports skipped since the last one */
};

/* The first back-off after a report, and its cap (collectd's day). */
#define COMPLAINT_FIRST_NS (10LL * 1000000000LL)
#define COMPLAINT_MAX_NS (86400LL * 1000000000LL)

/* Report `fmt` at LOG_WARN unless the back-off says to stay quiet: the
 * first report goes out, later ones within the back-off are counted, and
 * the next report out says "(and N more like it since HH:MM:SS)", the
 * local time of the previous report. Each report doubles the back-off,
 * from COMPLAINT_FIRST_NS up to COMPLAINT_MAX_NS. Returns true when it
 * printed. complain() reads clock_mono_ns(); complain_at() takes the
 * monotonic time `now_ns` from its caller (tests pass their own). */
bool complain(struct complaint *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool complain_at(struct complaint *c, int64_t now_ns, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The condition cleared: say so once (at LOG_INFO) if it had been
 * reported, with the count of reports still unsaid, and reset the
 * back-off so that the next complaint is reported at once. */
void complaint_clear(struct complaint *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
