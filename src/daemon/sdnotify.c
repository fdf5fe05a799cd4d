/* systemd's notification protocol through libsystemd (sd-daemon(3)):
 * the protocol is small, but libsystemd is in every Debian release, keeps
 * up with its extensions (abstract sockets, vsock) and is what systemd's
 * own documentation asks services to use. */
#include "daemon/sdnotify.h"

#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/status.h"

void sdnotify_init(struct sdnotify *n, int64_t now_ns)
{
	memset(n, 0, sizeof *n);
	uint64_t usec = 0;
	int r = sd_watchdog_enabled(0, &usec);
	if (r > 0 && usec > 0) {
		/* Half the interval, as sd_watchdog_enabled(3) advises: a
		 * ping that is a little late still lands in time. */
		n->watchdog_ns = (int64_t)(usec * 1000 / 2);
		if (n->watchdog_ns < 1000000)
			n->watchdog_ns = 1000000;
		n->next_ping_ns = now_ns;
		log_info("systemd watchdog: pinging every %.3f s", (double)n->watchdog_ns / 1e9);
	} else if (r < 0) {
		log_warn("systemd watchdog: WATCHDOG_USEC is not usable (%s); not pinging",
			 strerror(-r));
	}
}

/* Send one message; counts it. Without $NOTIFY_SOCKET sd_notify returns
 * 0 and nothing is counted either way. */
static void send_msg(struct sdnotify *n, const char *msg)
{
	int r = sd_notify(0, msg);
	if (r > 0) {
		atomic_fetch_add(&n->sent_total, 1);
	} else if (r < 0) {
		/* Logged once: systemd gone or the socket refused; the next
		 * failures are only counted. */
		if (atomic_fetch_add(&n->failed_total, 1) == 0)
			log_warn("systemd notification failed: %s", strerror(-r));
	}
}

static void send_with_status(struct sdnotify *n, const char *head, const char *status)
{
	char msg[512];
	if (status && status[0])
		snprintf(msg, sizeof msg, "%s%sSTATUS=%s", head, head[0] ? "\n" : "", status);
	else
		snprintf(msg, sizeof msg, "%s", head);
	if (msg[0])
		send_msg(n, msg);
}

void sdnotify_ready(struct sdnotify *n, const char *status)
{
	send_with_status(n, n->ready ? "" : "READY=1", status);
	n->ready = true;
}

void sdnotify_status(struct sdnotify *n, const char *status)
{
	send_with_status(n, "", status);
}

void sdnotify_reloading(struct sdnotify *n)
{
	send_msg(n, "RELOADING=1\nSTATUS=reloading the configuration");
}

void sdnotify_reloaded(struct sdnotify *n, const char *status)
{
	send_with_status(n, "READY=1", status);
	n->ready = true;
}

void sdnotify_stopping(struct sdnotify *n)
{
	send_msg(n, "STOPPING=1\nSTATUS=shutting down");
}

void sdnotify_watchdog(struct sdnotify *n, int64_t now_ns)
{
	if (n->watchdog_ns <= 0 || now_ns < n->next_ping_ns)
		return;
	send_msg(n, "WATCHDOG=1");
	n->next_ping_ns = now_ns + n->watchdog_ns;
}

int64_t sdnotify_wait_ns(const struct sdnotify *n, int64_t now_ns)
{
	if (n->watchdog_ns <= 0)
		return -1;
	return n->next_ping_ns > now_ns ? n->next_ping_ns - now_ns : 0;
}

static const struct metric_family notifications = {
	.name = "gpulse_systemd_notifications_total",
	.kind = METRIC_KIND_COUNTER,
	.help = "Messages to systemd's notification socket (READY, WATCHDOG, STATUS, ...), by result.",
	.labels = (const char *const[]){"result", NULL},
};

void sdnotify_metrics(const struct sdnotify *n, struct metric_sink *s)
{
	metric_u64(s, &notifications, (const char *const[]){"sent"}, atomic_load(&n->sent_total));
	metric_u64(s, &notifications, (const char *const[]){"failed"},
		   atomic_load(&n->failed_total));
}
