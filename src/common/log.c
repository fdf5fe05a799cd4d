/* Levelled stderr logging and rate-limited complaints; see log.h. */
#include "common/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/clock.h"
#include "common/status.h"

static atomic_int log_level_now = LOG_INFO;
static const char *log_ident = "gpulse";

void log_set_level(enum log_level level)
{
	atomic_store(&log_level_now, (int)level);
}

int log_level_parse(const char *s, enum log_level *out)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(s, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return GPULSE_EINVAL;
}

void log_set_ident(const char *ident)
{
	log_ident = ident;
}

static void log_vmsg(enum log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	static const char *const tag[] = {"error", "warning", "info", "debug"};
	if ((int)level > atomic_load(&log_level_now))
		return;
	char line[1024];
	int n = snprintf(line, sizeof line, "%s: %s: ", log_ident, tag[level]);
	if (n < 0 || (size_t)n >= sizeof line)
		n = 0;
	vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	/* One write per line keeps lines from threads whole. */
	size_t len = strlen(line);
	if (len + 1 < sizeof line) {
		line[len++] = '\n';
		line[len] = '\0';
	}
	fputs(line, stderr);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

/* "HH:MM:SS", local time, of a wall-clock instant. */
static void complaint_since(int64_t wall_ns, char *out, size_t len)
{
	time_t t = (time_t)(wall_ns / 1000000000LL);
	struct tm tm;
	if (!localtime_r(&t, &tm) || strftime(out, len, "%H:%M:%S", &tm) == 0)
		snprintf(out, len, "?");
}

static bool complain_v(struct complaint *c, int64_t now_ns, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static bool complain_v(struct complaint *c, int64_t now_ns, const char *fmt, va_list ap)
{
	if (c->interval_ns && now_ns - c->last_ns < c->interval_ns) {
		c->suppressed++;
		return false;
	}
	char msg[768];
	vsnprintf(msg, sizeof msg, fmt, ap);
	if (c->suppressed) {
		char since[16];
		complaint_since(c->last_wall_ns, since, sizeof since);
		log_warn("%s (and %llu more like it since %s)", msg,
			 (unsigned long long)c->suppressed, since);
	} else {
		log_warn("%s", msg);
	}
	c->suppressed = 0;
	c->last_ns = now_ns;
	c->last_wall_ns = clock_wall_ns();
	c->interval_ns = c->interval_ns ? c->interval_ns * 2 : COMPLAINT_FIRST_NS;
	if (c->interval_ns > COMPLAINT_MAX_NS)
		c->interval_ns = COMPLAINT_MAX_NS;
	return true;
}

bool complain(struct complaint *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bool said = complain_v(c, clock_mono_ns(), fmt, ap);
	va_end(ap);
	return said;
}

bool complain_at(struct complaint *c, int64_t now_ns, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bool said = complain_v(c, now_ns, fmt, ap);
	va_end(ap);
	return said;
}

void complaint_clear(struct complaint *c, const char *fmt, ...)
{
	if (!c->interval_ns)
		return;
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (c->suppressed) {
		char since[16];
		complaint_since(c->last_wall_ns, since, sizeof since);
		log_info("%s (%llu more complaints since %s went unreported)", msg,
			 (unsigned long long)c->suppressed, since);
	} else {
		log_info("%s", msg);
	}
	c->interval_ns = 0;
	c->suppressed = 0;
}
