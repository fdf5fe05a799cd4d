/* The profiling socket server (src/profile/profile_server.c), in process
 * with a real Unix socket: the directory and path checks, one server per
 * socket, a stale socket replaced, HELLO answered with CONFIG, frames fed
 * to the aggregate, a HELLO that lies refused, a bad header closing the
 * connection, and captures (answered, refused for an unknown or busy
 * pid, capped), one user held to its share of the connections so that
 * another still gets in, a connection silent past its HELLO closed while
 * a busy one stays, then a clean stop that removes the socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "profile/profile_agg.h"
#include "profile/profile_server.h"
#include "common/status.h"
#include "wire/wire.h"

static char dir[64];
static char sock_path[100];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/gpulse-ps.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(sock_path, sizeof sock_path, "%s/s/inject.sock", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int connect_to(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true(strlen(path) < sizeof sa.sun_path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	return fd;
}

static void send_msg(int fd, const struct wire_msg *m)
{
	static uint8_t f[WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD];
	size_t n = wire_encode(m, f, sizeof f);
	assert_true(n > 0);
	assert_int_equal(send(fd, f, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Read one frame (5 s at most): its type, decoded into m; -1 on EOF. */
static int read_msg(int fd, struct wire_msg *m)
{
	uint8_t buf[WIRE_HEADER_BYTES + 1024];
	size_t have = 0, need = WIRE_HEADER_BYTES;
	unsigned type = 0;
	uint32_t len = 0;
	while (have < need) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 5000) != 1)
			fail_msg("no frame from the server within 5 s");
		ssize_t n = recv(fd, buf + have, need - have, 0);
		if (n <= 0)
			return -1;
		have += (size_t)n;
		if (have == WIRE_HEADER_BYTES && need == WIRE_HEADER_BYTES) {
			assert_int_equal(wire_header_parse(buf, &type, &len), 0);
			assert_true(len <= 1024);
			need += len;
		}
	}
	char err[256];
	if (wire_decode(m, type, buf + WIRE_HEADER_BYTES, len, err, sizeof err) != 0)
		fail_msg("bad frame from the server: %s", err);
	return (int)type;
}

static void hello(int fd, uint32_t pid)
{
	struct wire_msg m = {.type = WIRE_HELLO};
	m.u.hello.pid = pid;
	m.u.hello.uid = (uint32_t)getuid();
	m.u.hello.start_wall_ns = 1;
	snprintf(m.u.hello.cmdline, sizeof m.u.hello.cmdline, "test_profile_server");
	send_msg(fd, &m);
}

static bool wait_until(bool (*cond)(void *), void *arg)
{
	for (int i = 0; i < 500; i++) {
		if (cond(arg))
			return true;
		usleep(10000);
	}
	return false;
}

static struct profile_server *g_srv;

static bool has_self(void *agg)
{
	return profile_agg_has(agg, (uint32_t)getpid(), NULL, 0);
}

static bool refused_pid(void *arg)
{
	(void)arg;
	struct profile_server_stats st;
	profile_server_stats(g_srv, &st);
	return st.refused_total[PROFILE_REFUSE_PID_MISMATCH] == 1;
}

static void test_ids(void **state)
{
	(void)state;
	uint32_t ids[4];
	size_t n;
	char err[128];
	assert_int_equal(profile_parse_ids("", ids, 4, &n, err, sizeof err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(profile_parse_ids("0, 1000,4294967295", ids, 4, &n, err, sizeof err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(ids[1], 1000);
	assert_int_equal(ids[2], 4294967295u);
	assert_int_equal(profile_parse_ids("12,alice", ids, 4, &n, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "\"alice\""));
	assert_int_equal(profile_parse_ids("-1", ids, 4, &n, err, sizeof err), GPULSE_EINVAL);
	assert_int_equal(profile_parse_ids("4294967296", ids, 4, &n, err, sizeof err), GPULSE_EINVAL);
	assert_int_equal(profile_parse_ids("1,2,3,4,5", ids, 4, &n, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "more than 4"));
}

static void test_paths(void **state)
{
	(void)state;
	struct profile_agg *agg;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&agg, &lim), 0);
	struct profile_server_config c = {.socket_path = sock_path, .agg = agg};
	struct profile_server *s = NULL, *s2 = NULL;
	char err[512];

	/* A directory others may write to (not sticky) is refused. */
	char sub[96];
	snprintf(sub, sizeof sub, "%s/s", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(chmod(sub, 0777), 0);
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "writable by other users"));
	assert_int_equal(chmod(sub, 01777), 0);  /* sticky, as /tmp: fine */
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), 0);

	/* One server per socket. */
	assert_int_equal(profile_server_start(&s2, &c, err, sizeof err), GPULSE_EBUSY);
	assert_non_null(strstr(err, "another gpulsed"));
	struct stat st;
	assert_int_equal(stat(sock_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0666);
	profile_server_stop(s);
	assert_int_equal(stat(sock_path, &st), -1);

	/* A stale socket (its server gone without cleaning) is replaced. */
	int stale = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	assert_int_equal(bind(stale, (struct sockaddr *)&sa, sizeof sa), 0);
	close(stale);
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), 0);
	close(connect_to(sock_path));
	profile_server_stop(s);

	/* Anything else at the path is left alone. */
	FILE *f = fopen(sock_path, "w");
	fclose(f);
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "not a socket"));
	assert_int_equal(stat(sock_path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	unlink(sock_path);

	/* A path longer than sun_path. */
	char longp[200];
	memset(longp, 'x', sizeof longp - 1);
	longp[sizeof longp - 1] = '\0';
	c.socket_path = longp;
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), GPULSE_EINVAL);
	profile_agg_free(agg);
}

struct capture_job {
	struct profile_server *s;
	struct profile_capture c;
	int rc;
	char err[256];
};

static void *capture_thread(void *arg)
{
	struct capture_job *j = arg;
	j->rc = profile_server_capture(j->s, &j->c, j->err, sizeof j->err);
	return NULL;
}

static void send_events(int fd, uint64_t id, uint32_t n)
{
	struct wire_event ev[3];
	memset(ev, 0, sizeof ev);
	for (uint32_t i = 0; i < 3; i++) {
		ev[i].kind = WIRE_EV_KERNEL;
		ev[i].stream = 7;
		ev[i].start_ns = 1000 * (i + 1);
		ev[i].end_ns = 1000 * (i + 1) + 500;
		/* Names that share their first 300 bytes (template kernels). */
		static char names[3][320];
		memset(names[i], 'x', 300);
		snprintf(names[i] + 300, 20, "<k%u>", i);
		ev[i].name = names[i];
	}
	struct wire_msg m = {.type = WIRE_TRACE_EVENTS};
	m.u.trace_events.capture_id = id;
	m.u.trace_events.count = n;
	m.u.trace_events.events = ev;
	send_msg(fd, &m);
	m = (struct wire_msg){.type = WIRE_TRACE_END};
	m.u.trace_end.capture_id = id;
	m.u.trace_end.events_total = n;
	m.u.trace_end.events_dropped = 4;
	send_msg(fd, &m);
}

static void test_session(void **state)
{
	(void)state;
	struct profile_agg *agg;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&agg, &lim), 0);
	struct profile_server_config c = {.socket_path = sock_path, .agg = agg,
					  .capture_max_events = 2};
	c.defaults.mode = WIRE_MODE_FOCUSED_NVTX;
	c.defaults.budget_ppm = 1234;
	snprintf(c.defaults.nvtx_range, sizeof c.defaults.nvtx_range, "step");
	struct profile_server *s;
	char err[512];
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), 0);
	g_srv = s;

	/* HELLO with our own pid: answered with the defaults. */
	int fd = connect_to(sock_path);
	hello(fd, (uint32_t)getpid());
	struct wire_msg m = {0};
	assert_int_equal(read_msg(fd, &m), WIRE_CONFIG);
	assert_int_equal(m.u.config.mode, WIRE_MODE_FOCUSED_NVTX);
	assert_int_equal(m.u.config.budget_ppm, 1234);
	assert_string_equal(m.u.config.nvtx_range, "step");
	assert_true(wait_until(has_self, agg));

	/* A capture: asked on another thread, answered here. */
	struct capture_job job = {.s = s, .c = {.pid = (uint32_t)getpid(), .seconds = 3}};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, capture_thread, &job), 0);
	assert_int_equal(read_msg(fd, &m), WIRE_CAPTURE);
	assert_int_equal(m.u.capture.seconds, 3);
	assert_int_equal(m.u.capture.max_events, 2);
	uint64_t id = m.u.capture.capture_id;
	/* The same pid cannot be captured twice at once. */
	struct profile_capture busy = {.pid = (uint32_t)getpid(), .seconds = 1};
	assert_int_equal(profile_server_capture(s, &busy, err, sizeof err), GPULSE_EBUSY);
	/* Events for another capture id are not taken. */
	send_events(fd, id + 1, 1);
	send_events(fd, id, 3);
	pthread_join(t, NULL);
	assert_int_equal(job.rc, 0);
	assert_true(job.c.complete);
	assert_int_equal(job.c.n, 2);                 /* the cap */
	assert_int_equal(job.c.received, 3);
	assert_int_equal(job.c.dropped_daemon, 1);
	assert_int_equal(job.c.dropped_library, 4);
	/* Whole names, each its own, held in the events' one block. */
	assert_string_equal(job.c.events[0].name + 300, "<k0>");
	assert_string_equal(job.c.events[1].name + 300, "<k1>");
	assert_int_equal(strlen(job.c.events[1].name), 304);
	for (size_t i = 0; i < 2; i++)
		assert_true(job.c.events[i].name >= (const char *)(job.c.events + 2) &&
			    job.c.events[i].name < (const char *)(job.c.events + 2) + 2 * 305);
	assert_string_equal(job.c.comm, "test_profile_se");
	free(job.c.events);

	/* No library of that pid. */
	struct profile_capture none = {.pid = 1, .seconds = 1};
	assert_int_equal(profile_server_capture(s, &none, err, sizeof err), GPULSE_ENOENT);
	assert_non_null(strstr(err, "pid 1"));

	/* A HELLO that names another pid ends the connection. */
	int liar = connect_to(sock_path);
	hello(liar, (uint32_t)getpid() + 1);
	assert_int_equal(read_msg(liar, &m), -1);
	close(liar);
	assert_true(wait_until(refused_pid, NULL));

	/* A bad magic ends the connection; frames before HELLO are counted. */
	int bad = connect_to(sock_path);
	struct wire_msg st = {.type = WIRE_STATUS};
	send_msg(bad, &st);
	uint8_t junk[WIRE_HEADER_BYTES] = "NOPE";
	assert_int_equal(send(bad, junk, sizeof junk, MSG_NOSIGNAL), (ssize_t)sizeof junk);
	assert_int_equal(read_msg(bad, &m), -1);
	close(bad);

	struct profile_server_stats ss;
	profile_server_stats(s, &ss);
	assert_int_equal(ss.bad_frames_total[PROFILE_BAD_BEFORE_HELLO], 1);
	assert_int_equal(ss.bad_frames_total[PROFILE_BAD_BAD_HEADER], 1);
	assert_int_equal(ss.bad_frames_total[PROFILE_BAD_UNKNOWN_CAPTURE], 2);
	assert_int_equal(ss.captures_total, 1);
	assert_int_equal(ss.captures_failed_total, 1);
	assert_int_equal(ss.capture_events_dropped_total, 1);
	assert_int_equal(ss.accepted_total, 3);

	/* The self-metrics, as /metrics shows them. */
	struct buf b;
	buf_init(&b, 1 << 20);
	struct profile_prom_emitter pe;
	profile_prom_emitter_init(&pe, &b, false);
	profile_server_emit(s, &pe.e);
	assert_non_null(strstr(b.data, "gpulse_profile_bad_frames_total{reason=\"bad_header\"} 1\n"));
	assert_non_null(strstr(b.data, "gpulse_profile_connections_total{result=\"pid_mismatch\"} 1\n"));
	assert_non_null(strstr(b.data, "gpulse_profile_frames_total{type=\"TRACE_EVENTS\"} 2\n"));
	assert_non_null(strstr(b.data, "gpulse_profile_clients 1\n"));
	buf_free(&b);

	/* Stopping closes the library's connection and removes the socket. */
	profile_server_stop(s);
	assert_int_equal(read_msg(fd, &m), -1);
	close(fd);
	assert_int_equal(access(sock_path, F_OK), -1);
	/* The process stays known, disconnected, until it expires. */
	assert_true(profile_agg_has(agg, (uint32_t)getpid(), NULL, 0));
	struct profile_agg_stats as;
	profile_agg_stats(agg, &as);
	assert_int_equal(as.connected, 0);
	wire_msg_free(&m);
	profile_agg_free(agg);
}

static bool refused_count(void *arg)
{
	const int *want = arg;
	struct profile_server_stats st;
	profile_server_stats(g_srv, &st);
	return st.refused_total[want[0]] == (uint64_t)want[1];
}

/* Admission by uid/gid lists and the per-uid cap; interrupting a
 * capture in progress. */
static void test_admission(void **state)
{
	(void)state;
	struct profile_agg *agg;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&agg, &lim), 0);
	struct profile_server_config c = {.socket_path = sock_path, .agg = agg,
					  .max_clients_per_uid = 1};
	c.allowed_uids[0] = (uint32_t)getuid() + 1;
	c.n_allowed_uids = 1;
	struct profile_server *s;
	char err[512];
	struct wire_msg m = {0};
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), 0);
	g_srv = s;
	int fd = connect_to(sock_path);
	assert_int_equal(read_msg(fd, &m), -1);
	close(fd);
	int want[2] = {PROFILE_REFUSE_NOT_ALLOWED, 1};
	assert_true(wait_until(refused_count, want));
	profile_server_stop(s);

	/* Our primary group is allowed: in; a second connection of the same
	 * uid is over max_clients_per_uid. */
	c.allowed_gids[0] = (uint32_t)getgid();
	c.n_allowed_gids = 1;
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), 0);
	g_srv = s;
	fd = connect_to(sock_path);
	hello(fd, (uint32_t)getpid());
	assert_int_equal(read_msg(fd, &m), WIRE_CONFIG);
	int fd2 = connect_to(sock_path);
	assert_int_equal(read_msg(fd2, &m), -1);
	close(fd2);
	int want2[2] = {PROFILE_REFUSE_MAX_PER_UID, 1};
	assert_true(wait_until(refused_count, want2));

	/* A capture the library never answers ends when gpulsed stops. */
	struct capture_job job = {.s = s, .c = {.pid = (uint32_t)getpid(), .seconds = 600}};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, capture_thread, &job), 0);
	assert_int_equal(read_msg(fd, &m), WIRE_CAPTURE);
	int64_t t0 = clock_mono_ns();
	profile_server_interrupt(s);
	pthread_join(t, NULL);
	assert_int_equal(job.rc, GPULSE_ESTATE);
	assert_null(job.c.events);
	assert_true(clock_mono_ns() - t0 < 5000000000LL);
	profile_server_stop(s);
	close(fd);
	wire_msg_free(&m);
	profile_agg_free(agg);
}

/* A connection that never says HELLO gives its slot back; a capture
 * nobody answers ends at its deadline, one whose library leaves ends
 * then, both incomplete. */
static void test_timeouts(void **state)
{
	(void)state;
	struct profile_agg *agg;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&agg, &lim), 0);
	struct profile_server_config c = {.socket_path = sock_path, .agg = agg,
					  .hello_timeout_ns = 200000000, .capture_grace_ns = 100000000};
	struct profile_server *s;
	char err[512];
	struct wire_msg m = {0};
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), 0);
	g_srv = s;
	int mute = connect_to(sock_path);
	assert_int_equal(read_msg(mute, &m), -1);   /* closed after ~200 ms */
	close(mute);
	int want[2] = {PROFILE_REFUSE_HELLO_TIMEOUT, 1};
	assert_true(wait_until(refused_count, want));

	int fd = connect_to(sock_path);
	hello(fd, (uint32_t)getpid());
	assert_int_equal(read_msg(fd, &m), WIRE_CONFIG);
	/* Unanswered: back after 1 s + the grace, with what came. */
	struct capture_job job = {.s = s, .c = {.pid = (uint32_t)getpid(), .seconds = 1}};
	pthread_t t;
	int64_t t0 = clock_mono_ns();
	assert_int_equal(pthread_create(&t, NULL, capture_thread, &job), 0);
	assert_int_equal(read_msg(fd, &m), WIRE_CAPTURE);
	struct wire_event ev = {.kind = WIRE_EV_KERNEL, .start_ns = 5, .end_ns = 9};
	struct wire_msg te = {.type = WIRE_TRACE_EVENTS};
	te.u.trace_events.capture_id = m.u.capture.capture_id;
	te.u.trace_events.count = 1;
	te.u.trace_events.events = &ev;
	send_msg(fd, &te);
	pthread_join(t, NULL);
	int64_t took = clock_mono_ns() - t0;
	assert_int_equal(job.rc, 0);
	assert_false(job.c.complete);
	assert_int_equal(job.c.n, 1);
	assert_true(took >= 1100000000LL && took < 5000000000LL);
	free(job.c.events);

	/* The library leaves during a capture: it ends at once. */
	job = (struct capture_job){.s = s, .c = {.pid = (uint32_t)getpid(), .seconds = 600}};
	t0 = clock_mono_ns();
	assert_int_equal(pthread_create(&t, NULL, capture_thread, &job), 0);
	assert_int_equal(read_msg(fd, &m), WIRE_CAPTURE);
	close(fd);
	pthread_join(t, NULL);
	assert_int_equal(job.rc, 0);
	assert_false(job.c.complete);
	assert_int_equal(job.c.n, 0);
	assert_true(clock_mono_ns() - t0 < 5000000000LL);
	free(job.c.events);
	profile_server_stop(s);
	wire_msg_free(&m);
	profile_agg_free(agg);
}

static bool clients_are(void *arg)
{
	struct profile_server_stats st;
	profile_server_stats(g_srv, &st);
	return st.clients == *(const uint64_t *)arg;
}

/* In a forked child as `uid`: connect, HELLO as ourselves, and wait for
 * the daemon's CONFIG. Exit status 0 when it came, 1 when the connection
 * was closed instead, 2 on a setup error. No cmocka in the child. */
static int child_hello_as(uid_t uid)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgid(uid) != 0 || setuid(uid) != 0)
			_exit(2);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
			_exit(2);
		struct wire_msg m = {.type = WIRE_HELLO};
		m.u.hello.pid = (uint32_t)getpid();
		m.u.hello.uid = (uint32_t)uid;
		m.u.hello.start_wall_ns = 1;
		static uint8_t f[WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD];
		size_t n = wire_encode(&m, f, sizeof f);
		if (!n || send(fd, f, n, MSG_NOSIGNAL) != (ssize_t)n)
			_exit(2);
		uint8_t hdr[WIRE_HEADER_BYTES];
		size_t have = 0;
		while (have < sizeof hdr) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			if (poll(&p, 1, 5000) != 1)
				_exit(2);
			ssize_t r = recv(fd, hdr + have, sizeof hdr - have, 0);
			if (r <= 0)
				_exit(1);
			have += (size_t)r;
		}
		unsigned type;
		uint32_t len;
		_exit(wire_header_parse(hdr, &type, &len) == 0 && type == WIRE_CONFIG ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* One user cannot take every slot: with max_clients 4 and no per-user
 * bound configured, a user's share is a quarter (1), so its other
 * connections are refused and a library of another user still gets in.
 * The other user is a forked child that changes uid, so this needs
 * root (as in CI). */
static void test_per_uid_share(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	/* The child, as nobody, must reach the socket under the temp dir. */
	assert_int_equal(chmod(dir, 0755), 0);
	struct profile_agg *agg;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&agg, &lim), 0);
	struct profile_server_config c = {.socket_path = sock_path, .agg = agg, .max_clients = 4};
	struct profile_server *s;
	char err[512];
	struct wire_msg m = {0};
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), 0);
	g_srv = s;
	int fds[4];
	fds[0] = connect_to(sock_path);
	hello(fds[0], (uint32_t)getpid());
	assert_int_equal(read_msg(fds[0], &m), WIRE_CONFIG);
	for (int i = 1; i < 4; i++)
		fds[i] = connect_to(sock_path);
	int want[2] = {PROFILE_REFUSE_MAX_PER_UID, 3};
	assert_true(wait_until(refused_count, want));
	uint64_t one = 1;
	assert_true(wait_until(clients_are, &one));
	/* Another user (nobody) connects and is answered. */
	assert_int_equal(child_hello_as(65534), 0);
	struct profile_server_stats st;
	profile_server_stats(s, &st);
	assert_int_equal(st.refused_total[PROFILE_REFUSE_MAX_CLIENTS], 0);
	assert_int_equal(st.accepted_total, 2);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	profile_server_stop(s);
	wire_msg_free(&m);
	profile_agg_free(agg);
}

/* A connection that said HELLO and then nothing is closed after
 * idle_timeout (500 ms here), counted; one that keeps sending STATUS
 * (as the library does every second) stays. */
static void test_idle_timeout(void **state)
{
	(void)state;
	struct profile_agg *agg;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&agg, &lim), 0);
	struct profile_server_config c = {.socket_path = sock_path, .agg = agg,
					  .idle_timeout_ns = 500000000};
	struct profile_server *s;
	char err[512];
	struct wire_msg m = {0};
	assert_int_equal(profile_server_start(&s, &c, err, sizeof err), 0);
	g_srv = s;
	int quiet = connect_to(sock_path), busy = connect_to(sock_path);
	hello(quiet, (uint32_t)getpid());
	hello(busy, (uint32_t)getpid());
	assert_int_equal(read_msg(quiet, &m), WIRE_CONFIG);
	assert_int_equal(read_msg(busy, &m), WIRE_CONFIG);
	struct wire_msg status = {.type = WIRE_STATUS};
	status.u.status = (struct wire_status){.mode = WIRE_MODE_CONTINUOUS, .active = 1};
	int64_t t0 = clock_mono_ns();
	int want[2] = {PROFILE_REFUSE_IDLE_TIMEOUT, 1};
	while (!refused_count(want)) {
		if (clock_mono_ns() - t0 > 5000000000LL)
			fail_msg("the silent connection was not closed within 5 s");
		status.u.status.t_wall_ns = (uint64_t)clock_wall_ns();
		send_msg(busy, &status);
		usleep(100000);
	}
	assert_true(clock_mono_ns() - t0 >= 500000000LL);
	assert_int_equal(read_msg(quiet, &m), -1);
	close(quiet);
	/* Still well past the timeout, the busy one is connected. */
	for (int i = 0; i < 10; i++) {
		status.u.status.t_wall_ns = (uint64_t)clock_wall_ns();
		send_msg(busy, &status);
		usleep(100000);
	}
	struct pollfd p = {.fd = busy, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 0), 0);
	struct profile_server_stats st;
	profile_server_stats(s, &st);
	assert_int_equal(st.clients, 1);
	assert_int_equal(st.refused_total[PROFILE_REFUSE_IDLE_TIMEOUT], 1);
	assert_true(profile_agg_has(agg, (uint32_t)getpid(), NULL, 0));
	close(busy);
	profile_server_stop(s);
	wire_msg_free(&m);
	profile_agg_free(agg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids),
		cmocka_unit_test_setup_teardown(test_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admission, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeouts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_per_uid_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
