/* Tests for the HTTP connection guard (src/http/http_guard.c) on its own,
 * with socketpairs standing in for MHD's connections: which connection an
 * arrival evicts, the per-address cap, the busy cap, and the head
 * deadline. A shut-down connection is seen as end-of-file on the pair's
 * other end. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "http/http_guard.h"
#include "common/status.h"

struct pair {
	int ours;    /* handed to the guard, as MHD's socket */
	int peer;    /* the client's end */
};

static struct pair pair_open(void)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	return (struct pair){sv[0], sv[1]};
}

static void pair_close(struct pair *p)
{
	close(p->ours);
	close(p->peer);
}

/* True when the guard has shut `p` down (the client end reads EOF). */
static bool shut_down(const struct pair *p, int wait_ms)
{
	struct pollfd f = {.fd = p->peer, .events = POLLIN};
	if (poll(&f, 1, wait_ms) <= 0)
		return false;
	char b;
	return recv(p->peer, &b, 1, MSG_DONTWAIT) == 0;
}

static struct sockaddr_in v4(const char *a)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	assert_int_equal(inet_pton(AF_INET, a, &sa.sin_addr), 1);
	return sa;
}

static struct http_guard *start(unsigned n, unsigned per_address, unsigned reserved,
				int64_t head_ns)
{
	struct guard_config gc = {
		.max_connections = n, .slots = n + 8, .reserved = reserved,
		.per_address = per_address, .head_timeout_ns = head_ns,
		.next_head_timeout_ns = head_ns, .sweep_ns = 10 * NS_PER_MS,
	};
	struct http_guard *g = NULL;
	assert_int_equal(guard_start(&g, &gc), GPULSE_OK);
	return g;
}

/* Past N, an arrival evicts the connection that has waited longest for a
 * head, but never one being served, nor one whose head was buffered. */
static void test_eviction_order(void **state)
{
	(void)state;
	struct http_guard *g = start(3, 3, 1, 60 * NS_PER_SEC);
	struct sockaddr_in a = v4("10.0.0.1");
	struct pair p[5];
	struct guard_conn *c[5];
	for (int i = 0; i < 5; i++)
		p[i] = pair_open();
	c[0] = guard_open(g, p[0].ours, (struct sockaddr *)&a, false);
	c[1] = guard_open(g, p[1].ours, (struct sockaddr *)&a, true);  /* head buffered */
	c[2] = guard_open(g, p[2].ours, (struct sockaddr *)&a, false);
	assert_true(guard_head(g, c[0], false));                        /* busy */
	c[3] = guard_open(g, p[3].ours, (struct sockaddr *)&a, false);
	/* 0 is busy and 1 buffered: 2 is the one evicted. */
	assert_true(shut_down(&p[2], 1000));
	assert_false(shut_down(&p[0], 50));
	assert_false(shut_down(&p[1], 0));
	assert_false(shut_down(&p[3], 0));
	assert_int_equal(guard_shed(g, HTTP_SHED_EVICTED), 1);
	guard_close(g, c[2]);
	/* With nothing evictable, an arrival is let in (MHD's limit bounds it). */
	guard_done(g, c[0]); /* 0 waits again, now the newest */
	c[4] = guard_open(g, p[4].ours, (struct sockaddr *)&a, false);
	assert_true(shut_down(&p[3], 1000)); /* 3 had waited longer than 0 */
	assert_false(shut_down(&p[0], 0));
	for (int i = 0; i < 5; i++) {
		if (i != 2)
			guard_close(g, c[i]);
		pair_close(&p[i]);
	}
	guard_stop(g);
}

/* A connected TCP pair on loopback: the guard asks the kernel (TCP_INFO)
 * whether a client has sent anything, which a socketpair cannot answer. */
static struct pair tcp_pair(int listener)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	assert_int_equal(getsockname(listener, (struct sockaddr *)&sa, &len), 0);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
	int s = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	assert_true(s >= 0);
	return (struct pair){s, c};
}

/* A connection that has sent nothing is evicted before an older one that
 * has sent part of its head (a TLS scrape in its handshake): a flood of
 * silent connections cannot push a scrape out by age alone. With none
 * silent, age decides. Nothing the client sent is read: the kernel's
 * count is what the guard looks at. */
static void test_silent_evicted_first(void **state)
{
	(void)state;
	struct http_guard *g = start(3, 3, 1, 60 * NS_PER_SEC);
	struct sockaddr_in a = v4("127.0.0.1"), l = a;
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&l, sizeof l), 0);
	assert_int_equal(listen(lfd, 16), 0);
	struct pair p[6];
	struct guard_conn *c[6];
	for (int i = 0; i < 6; i++)
		p[i] = tcp_pair(lfd);
	assert_int_equal(send(p[0].peer, "\x16", 1, 0), 1); /* 0 has spoken */
	for (int i = 0; i < 3; i++)
		c[i] = guard_open(g, p[i].ours, (struct sockaddr *)&a, false);
	c[3] = guard_open(g, p[3].ours, (struct sockaddr *)&a, false);
	assert_true(shut_down(&p[1], 1000)); /* the oldest silent one, not 0 */
	assert_false(shut_down(&p[0], 50));
	guard_close(g, c[1]);
	c[4] = guard_open(g, p[4].ours, (struct sockaddr *)&a, false);
	assert_true(shut_down(&p[2], 1000));
	assert_false(shut_down(&p[0], 50));
	guard_close(g, c[2]);
	/* Everyone has spoken: the oldest goes, as before. */
	assert_int_equal(send(p[3].peer, "G", 1, 0), 1);
	assert_int_equal(send(p[4].peer, "G", 1, 0), 1);
	c[5] = guard_open(g, p[5].ours, (struct sockaddr *)&a, false);
	assert_true(shut_down(&p[0], 1000));
	assert_false(shut_down(&p[3], 50));
	assert_int_equal(guard_shed(g, HTTP_SHED_EVICTED), 3);
	for (int i = 0; i < 6; i++) {
		if (i != 1 && i != 2)
			guard_close(g, c[i]);
		pair_close(&p[i]);
	}
	close(lfd);
	guard_stop(g);
}

/* The per-address cap evicts within the address (IPv6 by /64), and refuses
 * the newcomer when every connection of the address is busy. */
static void test_per_address_cap(void **state)
{
	(void)state;
	struct http_guard *g = start(16, 2, 2, 60 * NS_PER_SEC);
	struct sockaddr_in6 x = {.sin6_family = AF_INET6}, y = x, other = x;
	inet_pton(AF_INET6, "2001:db8:1:2::10", &x.sin6_addr);
	inet_pton(AF_INET6, "2001:db8:1:2::20", &y.sin6_addr);   /* same /64 */
	inet_pton(AF_INET6, "2001:db8:1:3::10", &other.sin6_addr);
	struct pair p[5];
	struct guard_conn *c[5];
	for (int i = 0; i < 5; i++)
		p[i] = pair_open();
	c[0] = guard_open(g, p[0].ours, (struct sockaddr *)&x, false);
	c[1] = guard_open(g, p[1].ours, (struct sockaddr *)&other, false);
	c[2] = guard_open(g, p[2].ours, (struct sockaddr *)&y, false);
	c[3] = guard_open(g, p[3].ours, (struct sockaddr *)&x, false); /* third of the /64 */
	assert_true(shut_down(&p[0], 1000));
	assert_false(shut_down(&p[1], 50));
	assert_int_equal(guard_shed(g, HTTP_SHED_EVICTED), 1);
	guard_close(g, c[0]);
	assert_true(guard_head(g, c[2], false));
	assert_true(guard_head(g, c[3], false));
	c[4] = guard_open(g, p[4].ours, (struct sockaddr *)&y, false);
	assert_true(shut_down(&p[4], 1000));
	assert_int_equal(guard_shed(g, HTTP_SHED_PER_ADDRESS), 1);
	for (int i = 1; i < 5; i++)
		guard_close(g, c[i]);
	for (int i = 0; i < 5; i++)
		pair_close(&p[i]);
	guard_stop(g);
}

/* Ordinary requests keep at most N - reserved busy; reserved ones may use
 * the rest; a finished request gives its slot back. */
static void test_busy_cap(void **state)
{
	(void)state;
	struct http_guard *g = start(4, 4, 2, 60 * NS_PER_SEC);
	struct pair p[4];
	struct guard_conn *c[4];
	for (int i = 0; i < 4; i++) {
		p[i] = pair_open();
		c[i] = guard_open(g, p[i].ours, NULL, false);
	}
	assert_true(guard_head(g, c[0], false));
	assert_true(guard_head(g, c[1], false));
	assert_false(guard_head(g, c[2], false));   /* 503 */
	assert_true(guard_head(g, c[3], true));     /* a scrape */
	assert_int_equal(guard_shed(g, HTTP_SHED_BUSY), 1);
	guard_done(g, c[0]);
	guard_done(g, c[2]);
	assert_true(guard_head(g, c[2], false));
	for (int i = 0; i < 4; i++) {
		guard_close(g, c[i]);
		pair_close(&p[i]);
	}
	guard_stop(g);
}

/* A waiting connection is shut at its deadline, a busy one is not. */
static void test_deadline(void **state)
{
	(void)state;
	struct http_guard *g = start(8, 8, 2, 200 * NS_PER_MS);
	struct pair w = pair_open(), b = pair_open();
	int64_t t0 = clock_mono_ns();
	struct guard_conn *cw = guard_open(g, w.ours, NULL, false);
	struct guard_conn *cb = guard_open(g, b.ours, NULL, false);
	assert_true(guard_head(g, cb, true));
	assert_true(shut_down(&w, 5000));
	assert_true(clock_mono_ns() - t0 >= 200 * NS_PER_MS);
	assert_false(shut_down(&b, 300));
	assert_int_equal(guard_shed(g, HTTP_SHED_HEAD_TIMEOUT), 1);
	guard_close(g, cw);
	guard_close(g, cb);
	pair_close(&w);
	pair_close(&b);
	guard_stop(g);
}

/* With no connection waiting the sweeper sleeps (it looked ten times a
 * second before); a connection that arrives after a quiet spell is still
 * shut at its deadline, the sweeper told of it. */
static void test_idle_sweeper_sleeps(void **state)
{
	(void)state;
	struct http_guard *g = start(8, 8, 2, 50 * NS_PER_MS);
	struct timespec nap = {0, 300 * 1000000L};
	nanosleep(&nap, NULL);
	uint64_t idle = guard_sweeps(g);
	assert_true(idle <= 2); /* the sweep period is 10 ms: 30 looks before */
	struct pair w = pair_open();
	int64_t t0 = clock_mono_ns();
	struct guard_conn *cw = guard_open(g, w.ours, NULL, false);
	assert_true(shut_down(&w, 2000));
	int64_t took = clock_mono_ns() - t0;
	assert_true(took >= 50 * NS_PER_MS);
	assert_int_equal(guard_shed(g, HTTP_SHED_HEAD_TIMEOUT), 1);
	assert_true(guard_sweeps(g) > idle);
	guard_close(g, cw);
	pair_close(&w);
	/* Nothing waits again: back to sleep. */
	uint64_t after = guard_sweeps(g);
	nanosleep(&nap, NULL);
	assert_true(guard_sweeps(g) <= after + 1);
	guard_stop(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eviction_order),
		cmocka_unit_test(test_silent_evicted_first),
		cmocka_unit_test(test_per_address_cap),
		cmocka_unit_test(test_busy_cap),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_idle_sweeper_sleeps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
