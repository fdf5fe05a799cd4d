/* What the tests of the built libgpulse-inject.so and its parts share
 * (test_inject_so.c, test_inject_fake_cupti.c, test_inject_interpose.c):
 * where the build put the libraries, a listening socket that stands in
 * for gpulsed, a reader of the library's frames, and NEED for their child
 * processes. Static functions (unused ones allowed): each test includes
 * it once. */
#ifndef GPULSE_TESTS_INJECT_TEST_H
#define GPULSE_TESTS_INJECT_TEST_H

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "wire/wire.h"

/* A file `rel` next to this test program's folder (<build>/tests/), into
 * out[len]; whether it is readable. */
__attribute__((unused)) static int inject_test_path(const char *rel, char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	snprintf(out, len, "%s/%s", exe, rel);
	return access(out, R_OK) == 0;
}

/* A Unix socket listening at path (replaced if there); -1 on failure. */
__attribute__((unused)) static int inject_test_listen(const char *path)
{
	unlink(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 4) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The library's connection to the listening socket, within 10 s (the
 * test fails otherwise). */
__attribute__((unused)) static int inject_test_accept(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 10000), 1);
	int fd = accept(lfd, NULL, NULL);
	assert_true(fd >= 0);
	return fd;
}

/* Called for each decoded frame; nonzero stops the reading. */
typedef int inject_test_frame_fn(int fd, unsigned type, const struct wire_msg *m, void *user);

/* Read the library's frames from fd until on_frame says stop, EOF or
 * `seconds` pass. A frame that does not decode fails the test. */
__attribute__((unused)) static void inject_test_read_frames(int fd, int seconds, inject_test_frame_fn *on_frame, void *user)
{
	static uint8_t buf[1 << 20];
	size_t len = 0;
	int64_t deadline = clock_mono_ns() + seconds * NS_PER_SEC;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)((deadline - clock_mono_ns()) / NS_PER_MS);
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return;
		ssize_t r = read(fd, buf + len, sizeof buf - len);
		if (r <= 0)
			return;
		len += (size_t)r;
		size_t off = 0;
		int stop = 0;
		while (!stop && len - off >= WIRE_HEADER_BYTES) {
			unsigned type;
			uint32_t plen;
			assert_int_equal(wire_header_parse(buf + off, &type, &plen), 0);
			if (len - off < WIRE_HEADER_BYTES + plen)
				break;
			struct wire_msg m;
			memset(&m, 0, sizeof m);
			assert_int_equal(wire_decode(&m, type, buf + off + WIRE_HEADER_BYTES, plen, NULL, 0), 0);
			stop = on_frame(fd, type, &m, user);
			wire_msg_free(&m);
			off += WIRE_HEADER_BYTES + plen;
		}
		if (stop)
			return;
		memmove(buf, buf + off, len - off);
		len -= off;
	}
}

/* In a test's child process: a failed step ends it with a message (the
 * parent sees exit status 10). */
#define NEED(cond)                                                                        \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			_exit(10);                                                        \
		}                                                                         \
	} while (0)

#endif
