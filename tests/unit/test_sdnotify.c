/* systemd's notification protocol (src/daemon/sdnotify.c) against a fake
 * $NOTIFY_SOCKET: a unix datagram socket the test binds, as systemd does
 * for a Type=notify service. Checks READY=1 with its STATUS=, the
 * watchdog's interval (half of WATCHDOG_USEC) and its pings, RELOADING
 * and STOPPING, a socket that is gone (counted as failed), no socket at
 * all (nothing sent, nothing counted), and the exposition of the counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "daemon/sdnotify.h"
#include "export/prom.h"

#define MS 1000000LL

struct fake {
	char dir[64];
	char path[96];
	int fd;
};


/* The systemd families as /metrics writes them. */
static void emit_sdnotify(void *ctx, struct metric_sink *s)
{
	sdnotify_metrics(ctx, s);
}

static int setup(void **state)
{
	struct fake *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	snprintf(f->dir, sizeof f->dir, "/tmp/gpulse-sdn.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof f->path, "%s/notify", f->dir);
	f->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->path);
	if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		return -1;
	char pid[32];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	setenv("NOTIFY_SOCKET", f->path, 1);
	setenv("WATCHDOG_PID", pid, 1);
	setenv("WATCHDOG_USEC", "2000000", 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fake *f = *state;
	close(f->fd);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_PID");
	unsetenv("WATCHDOG_USEC");
	return 0;
}

/* The next datagram, or "" when none is waiting (the sends are
 * synchronous: a message sent is queued on the socket before sd_notify
 * returns). */
static const char *next_msg(struct fake *f)
{
	static char msg[1024];
	ssize_t n = recv(f->fd, msg, sizeof msg - 1, 0);
	if (n < 0) {
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		n = 0;
	}
	msg[n] = '\0';
	return msg;
}

static void test_ready_and_status(void **state)
{
	struct fake *f = *state;
	struct sdnotify n;
	sdnotify_init(&n, 0);
	assert_false(n.ready);
	sdnotify_ready(&n, "serving 2 GPU(s)");
	assert_true(n.ready);
	assert_string_equal(next_msg(f), "READY=1\nSTATUS=serving 2 GPU(s)");
	/* Ready once: a second call only updates the status. */
	sdnotify_ready(&n, "still serving");
	assert_string_equal(next_msg(f), "STATUS=still serving");
	sdnotify_status(&n, "busy");
	assert_string_equal(next_msg(f), "STATUS=busy");
	sdnotify_reloading(&n);
	assert_non_null(strstr(next_msg(f), "RELOADING=1"));
	sdnotify_reloaded(&n, "reloaded");
	assert_string_equal(next_msg(f), "READY=1\nSTATUS=reloaded");
	sdnotify_stopping(&n);
	assert_non_null(strstr(next_msg(f), "STOPPING=1"));
	assert_string_equal(next_msg(f), "");
	assert_int_equal(atomic_load(&n.sent_total), 6);
	assert_int_equal(atomic_load(&n.failed_total), 0);
}

static void test_watchdog_interval_and_pings(void **state)
{
	struct fake *f = *state;
	struct sdnotify n;
	int64_t t0 = 5000 * MS;
	sdnotify_init(&n, t0);
	/* WATCHDOG_USEC 2 s: a ping every second. */
	assert_int_equal(n.watchdog_ns, 1000 * MS);
	assert_int_equal(sdnotify_wait_ns(&n, t0), 0);
	sdnotify_watchdog(&n, t0);
	assert_string_equal(next_msg(f), "WATCHDOG=1");
	/* Not due again before the interval passes. */
	assert_int_equal(sdnotify_wait_ns(&n, t0 + 400 * MS), 600 * MS);
	sdnotify_watchdog(&n, t0 + 400 * MS);
	assert_string_equal(next_msg(f), "");
	sdnotify_watchdog(&n, t0 + 1000 * MS);
	assert_string_equal(next_msg(f), "WATCHDOG=1");
	/* Late: pinged at once, and the next one an interval after. */
	assert_int_equal(sdnotify_wait_ns(&n, t0 + 5000 * MS), 0);
	sdnotify_watchdog(&n, t0 + 5000 * MS);
	assert_string_equal(next_msg(f), "WATCHDOG=1");
	assert_int_equal(sdnotify_wait_ns(&n, t0 + 5000 * MS), 1000 * MS);
}

static void test_watchdog_of_another_process(void **state)
{
	(void)state;
	/* WATCHDOG_PID names another process: not ours to ping. */
	setenv("WATCHDOG_PID", "1", 1);
	struct sdnotify n;
	sdnotify_init(&n, 0);
	assert_int_equal(n.watchdog_ns, 0);
	assert_int_equal(sdnotify_wait_ns(&n, 0), -1);
	sdnotify_watchdog(&n, 0);
	assert_int_equal(atomic_load(&n.sent_total), 0);
}

static void test_socket_gone_is_counted(void **state)
{
	struct fake *f = *state;
	char gone[160];
	snprintf(gone, sizeof gone, "%s/absent", f->dir);
	setenv("NOTIFY_SOCKET", gone, 1);
	struct sdnotify n;
	sdnotify_init(&n, 0);
	sdnotify_ready(&n, "x");
	sdnotify_watchdog(&n, 0);
	assert_int_equal(atomic_load(&n.sent_total), 0);
	assert_int_equal(atomic_load(&n.failed_total), 2);

	struct buf b;
	buf_init(&b, 4096);
	assert_int_equal(prom_emit_text(&b, false, emit_sdnotify, &n), 0);
	assert_non_null(strstr(b.data, "# TYPE gpulse_systemd_notifications_total counter\n"));
	assert_non_null(strstr(b.data, "gpulse_systemd_notifications_total{result=\"failed\"} 2\n"));
	assert_non_null(strstr(b.data, "gpulse_systemd_notifications_total{result=\"sent\"} 0\n"));
	buf_reset(&b);
	assert_int_equal(prom_emit_text(&b, true, emit_sdnotify, &n), 0);
	assert_non_null(strstr(b.data, "# TYPE gpulse_systemd_notifications counter\n"));
	buf_free(&b);
}

static void test_not_under_systemd(void **state)
{
	(void)state;
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	struct sdnotify n;
	sdnotify_init(&n, 0);
	assert_int_equal(sdnotify_wait_ns(&n, 0), -1);
	sdnotify_ready(&n, "x");
	sdnotify_watchdog(&n, 0);
	sdnotify_stopping(&n);
	assert_true(n.ready);
	assert_int_equal(atomic_load(&n.sent_total), 0);
	assert_int_equal(atomic_load(&n.failed_total), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ready_and_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watchdog_interval_and_pings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watchdog_of_another_process, setup, teardown),
		cmocka_unit_test_setup_teardown(test_socket_gone_is_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_under_systemd, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
