/* Tests for the injection library's socket client (src/inject/client.c):
 * with no daemon it never blocks and counts what it drops; against a fake
 * daemon (a listening Unix socket in this test) HELLO comes first, every
 * frame arrives whole and decodes with wire_decode, frames queued while
 * the daemon was away are delivered after it comes back, daemon frames
 * reach the callback, the exit flush is bounded, and a forked child
 * starts fresh with its own HELLO. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "inject/inject_client.h"
#include "common/clock.h"
#include "common/status.h"
#include "wire/wire.h"

static char sock_path[108];

/* A fresh path per test, so a client left over by a failed test cannot
 * connect to the next test's listener. */
static void make_path(void)
{
	static int seq;
	snprintf(sock_path, sizeof sock_path, "/tmp/gpulse-test-client-%d-%d.sock", (int)getpid(), ++seq);
	unlink(sock_path);
}

static int listen_sock(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static int accept_within(int lfd, int ms)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	if (poll(&p, 1, ms) <= 0)
		return -1;
	return accept(lfd, NULL, NULL);
}

/* Read one whole frame from fd within ms; decode it into *m. */
static int read_frame(int fd, struct wire_msg *m, int ms)
{
	uint8_t hdr[WIRE_HEADER_BYTES];
	static uint8_t payload[WIRE_MAX_PAYLOAD];
	size_t got = 0;
	int64_t deadline = clock_mono_ns() + (int64_t)ms * NS_PER_MS;
	unsigned type = 0;
	uint32_t len = 0;
	for (int phase = 0; phase < 2; phase++) {
		uint8_t *dst = phase ? payload : hdr;
		size_t want = phase ? len : WIRE_HEADER_BYTES;
		got = 0;
		while (got < want) {
			int left = (int)((deadline - clock_mono_ns()) / NS_PER_MS);
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (left <= 0 || poll(&p, 1, left) <= 0)
				return -1;
			ssize_t r = read(fd, dst + got, want - got);
			if (r <= 0)
				return -1;
			got += (size_t)r;
		}
		if (phase == 0 && wire_header_parse(hdr, &type, &len) != 0)
			return -2;
	}
	char err[200];
	int rc = wire_decode(m, type, payload, len, err, sizeof err);
	if (rc)
		fail_msg("frame %s does not decode: %s", wire_type_name(type), err);
	return 0;
}

static struct wire_hello hello(uint32_t pid)
{
	struct wire_hello h;
	memset(&h, 0, sizeof h);
	h.pid = pid;
	h.mode = WIRE_MODE_CONTINUOUS;
	h.budget_ppm = 5000;
	snprintf(h.cmdline, sizeof h.cmdline, "test");
	snprintf(h.lib_version, sizeof h.lib_version, "0.1.0");
	return h;
}

static size_t status_frame(uint8_t *buf, size_t cap, uint64_t seq)
{
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_STATUS;
	m.u.status.records_total = seq;
	m.u.status.budget_ppm = 5000;
	size_t n = wire_encode(&m, buf, cap);
	assert_true(n > 0);
	return n;
}

static void test_no_daemon_never_blocks(void **state)
{
	(void)state;
	make_path(); /* nobody listens there */
	struct client_config cfg = { .paths = { sock_path }, .ring_bytes = 4096 };
	struct wire_hello h = hello(1);
	struct client *c;
	assert_int_equal(client_create(&c, &cfg, &h), 0);
	uint8_t f[512];
	size_t n = status_frame(f, sizeof f, 1);
	int64_t t0 = clock_mono_ns();
	int accepted = 0, dropped = 0;
	for (int i = 0; i < 1000; i++) {
		if (client_push(c, f, n) == 0)
			accepted++;
		else
			dropped++;
	}
	int64_t took = clock_mono_ns() - t0;
	/* 1000 pushes with no daemon return at once (1 s: room for a loaded
	 * sanitizer run; a push that waited on the daemon would never return). */
	assert_true(took < 1 * NS_PER_SEC);
	assert_int_equal(accepted, (int)(4096 / (n + 4)));
	struct client_stats st;
	client_get_stats(c, &st);
	assert_int_equal(st.frames_dropped, (uint64_t)dropped);
	assert_int_equal(st.frames_queued, (uint64_t)accepted);
	assert_int_equal(st.connected, 0);
	/* A frame larger than the ring is refused, and counted. */
	static uint8_t big[8192];
	memcpy(big, f, n);
	assert_int_equal(client_push(c, big, sizeof big), GPULSE_ELIMIT);
	/* The exit flush does not wait for a daemon that is not there. */
	t0 = clock_mono_ns();
	assert_int_equal(client_flush(c, clock_mono_ns() + 200 * NS_PER_MS), GPULSE_ETIMEDOUT);
	assert_true(clock_mono_ns() - t0 < 150 * NS_PER_MS);
	for (int i = 0; i < 500; i++) { /* the first attempt is the thread's first act */
		client_get_stats(c, &st);
		if (st.connect_failures >= 1)
			break;
		usleep(10000);
	}
	assert_true(st.connect_failures >= 1);
	assert_int_equal(st.frames_dropped, (uint64_t)dropped + 1);
	client_destroy(c);
	client_destroy(NULL);
}

static struct wire_capture got_capture;
static int got_msgs;

static void on_msg(const struct wire_msg *m, void *user)
{
	(void)user;
	if (m->type == WIRE_CAPTURE)
		got_capture = m->u.capture;
	__atomic_add_fetch(&got_msgs, 1, __ATOMIC_SEQ_CST);
}

static void test_fake_daemon_frames(void **state)
{
	(void)state;
	make_path();
	int lfd = listen_sock();
	struct client_config cfg = { .paths = { "/nonexistent/first.sock", sock_path },
				     .on_msg = on_msg, .backoff_min_ns = 10 * NS_PER_MS };
	struct wire_hello h = hello(4242);
	struct client *c;
	assert_int_equal(client_create(&c, &cfg, &h), 0);
	uint8_t f[512];
	for (uint64_t i = 1; i <= 5; i++) {
		size_t n = status_frame(f, sizeof f, i);
		assert_int_equal(client_push(c, f, n), 0);
	}
	int fd = accept_within(lfd, 5000);
	assert_true(fd >= 0);
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	assert_int_equal(read_frame(fd, &m, 5000), 0);
	assert_int_equal(m.type, WIRE_HELLO);
	assert_int_equal(m.u.hello.pid, 4242);
	for (uint64_t i = 1; i <= 5; i++) {
		assert_int_equal(read_frame(fd, &m, 5000), 0);
		assert_int_equal(m.type, WIRE_STATUS);
		assert_int_equal(m.u.status.records_total, i); /* in order, none lost */
	}
	/* The daemon asks for a capture: the callback gets it. */
	struct wire_msg cap;
	memset(&cap, 0, sizeof cap);
	cap.type = WIRE_CAPTURE;
	cap.u.capture.capture_id = 99;
	cap.u.capture.seconds = 3;
	cap.u.capture.max_events = 1000;
	uint8_t cf[64];
	size_t cn = wire_encode(&cap, cf, sizeof cf);
	assert_int_equal(write(fd, cf, cn), (ssize_t)cn);
	for (int i = 0; i < 500 && __atomic_load_n(&got_msgs, __ATOMIC_SEQ_CST) == 0; i++)
		usleep(10000);
	assert_int_equal(got_capture.capture_id, 99);
	assert_int_equal(got_capture.seconds, 3);
	/* The daemon restarts: frames queued meanwhile arrive after a new HELLO. */
	close(fd);
	for (int i = 0; i < 500; i++) {
		struct client_stats st;
		client_get_stats(c, &st);
		if (!st.connected)
			break;
		usleep(10000);
	}
	size_t n = status_frame(f, sizeof f, 6);
	assert_int_equal(client_push(c, f, n), 0);
	fd = accept_within(lfd, 5000);
	assert_true(fd >= 0);
	assert_int_equal(read_frame(fd, &m, 5000), 0);
	assert_int_equal(m.type, WIRE_HELLO);
	assert_int_equal(read_frame(fd, &m, 5000), 0);
	assert_int_equal(m.type, WIRE_STATUS);
	assert_int_equal(m.u.status.records_total, 6);
	assert_int_equal(client_flush(c, clock_mono_ns() + 2 * NS_PER_SEC), 0);
	struct client_stats st;
	client_get_stats(c, &st);
	assert_int_equal(st.connects, 2);
	assert_int_equal(st.frames_sent, 6);
	assert_int_equal(st.frames_dropped, 0);
	assert_int_equal(st.frames_received, 1);
	wire_msg_free(&m);
	client_destroy(c);
	close(fd);
	close(lfd);
	unlink(sock_path);
}

static void test_flush_bounded_when_daemon_stalls(void **state)
{
	(void)state;
	make_path();
	int lfd = listen_sock();
	struct client_config cfg = { .paths = { sock_path }, .ring_bytes = 8u << 20 };
	struct wire_hello h = hello(7);
	struct client *c;
	assert_int_equal(client_create(&c, &cfg, &h), 0);
	int fd = accept_within(lfd, 5000);
	assert_true(fd >= 0);
	/* The daemon reads nothing: the socket buffer fills and the client
	 * keeps the rest queued; a push never waits. */
	static uint8_t big[200 * 1024];
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_STATUS;
	size_t n = wire_encode(&m, big, sizeof big);
	int64_t t0 = clock_mono_ns();
	for (int i = 0; i < 5000; i++)
		client_push(c, big, n);
	assert_true(clock_mono_ns() - t0 < 2 * NS_PER_SEC);
	t0 = clock_mono_ns();
	int rc = client_flush(c, clock_mono_ns() + 200 * NS_PER_MS);
	int64_t took = clock_mono_ns() - t0;
	/* Either all fit in the socket buffers, or the flush gave up on time. */
	if (rc != 0) {
		assert_int_equal(rc, GPULSE_ETIMEDOUT);
		assert_true(took >= 150 * NS_PER_MS && took < 1 * NS_PER_SEC);
	}
	client_destroy(c);
	close(fd);
	close(lfd);
	unlink(sock_path);
}

static void test_fork_child_starts_fresh(void **state)
{
	(void)state;
	make_path();
	int lfd = listen_sock();
	struct client_config cfg = { .paths = { sock_path }, .backoff_min_ns = 10 * NS_PER_MS };
	struct wire_hello h = hello((uint32_t)getpid());
	struct client *c;
	assert_int_equal(client_create(&c, &cfg, &h), 0);
	int fd = accept_within(lfd, 5000);
	assert_true(fd >= 0);
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	assert_int_equal(read_frame(fd, &m, 5000), 0);
	assert_int_equal(m.u.hello.pid, (uint32_t)getpid());
	/* A frame is queued but the parent forks before it is sent. */
	client_fork_prepare(c);
	pid_t pid = fork();
	if (pid == 0) {
		struct wire_hello ch = hello((uint32_t)getpid());
		client_fork_child(c, &ch);
		struct client_stats st;
		client_get_stats(c, &st);
		uint8_t f[512];
		size_t n = status_frame(f, sizeof f, 77);
		int ok = st.frames_sent == 0 && st.frames_queued == 0 && client_push(c, f, n) == 0 &&
			 client_flush(c, clock_mono_ns() + 3 * NS_PER_SEC) == 0;
		client_destroy(c);
		_exit(ok ? 0 : 1);
	}
	client_fork_parent(c);
	assert_true(pid > 0);
	/* The child's own connection: HELLO with its pid, then its frame. */
	int cfd = accept_within(lfd, 5000);
	assert_true(cfd >= 0);
	assert_int_equal(read_frame(cfd, &m, 5000), 0);
	assert_int_equal(m.type, WIRE_HELLO);
	assert_int_equal(m.u.hello.pid, (uint32_t)pid);
	assert_int_equal(read_frame(cfd, &m, 5000), 0);
	assert_int_equal(m.u.status.records_total, 77);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The parent's connection still works. */
	uint8_t f[512];
	size_t n = status_frame(f, sizeof f, 5);
	assert_int_equal(client_push(c, f, n), 0);
	assert_int_equal(read_frame(fd, &m, 5000), 0);
	assert_int_equal(m.u.status.records_total, 5);
	wire_msg_free(&m);
	client_destroy(c);
	close(cfd);
	close(fd);
	close(lfd);
	unlink(sock_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_daemon_never_blocks),
		cmocka_unit_test(test_fake_daemon_frames),
		cmocka_unit_test(test_flush_bounded_when_daemon_stalls),
		cmocka_unit_test(test_fork_child_starts_fresh),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
