/* Prometheus's query API (src/api/query.c) over a store of the test's
 * own, through HTTP on 127.0.0.1:0: which series /api/v1/series and the
 * label endpoints list for a window that falls in a gap of a series'
 * data, a regular expression that exceeds its match limit failing the
 * query (422, never a partial 200), the message of a query that timed
 * out while queued behind another, and a query stopped at its deadline
 * while its answer is built. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "api/query.h"
#include "common/clock.h"
#include "http/http_server.h"
#include "http_test.h"
#include "common/rx.h"
#include "common/status.h"
#include "store/tsdb.h"

#define T0 1795965289000LL

struct fixture {
	char dir[64];
	struct tsdb *db;
	struct api api;
	struct http_server *http;
	char base[64];
};

static struct fixture fx;

static int64_t fixed_now(void *ctx)
{
	(void)ctx;
	return T0 + 3600 * 1000;
}

static int setup(void **state)
{
	(void)state;
	memset(&fx, 0, sizeof fx);
	strcpy(fx.dir, "/tmp/gpulse-apihttpXXXXXX");
	assert_non_null(mkdtemp(fx.dir));
	char path[128];
	snprintf(path, sizeof path, "%s/store.db", fx.dir);
	struct tsdb_opts o = {.path = path, .clock.now_ms = fixed_now};
	char err[256] = "";
	if (tsdb_open(&fx.db, &o, err, sizeof err) != 0)
		fail_msg("tsdb_open: %s", err);
	api_init(&fx.api, fx.db);
	return 0;
}

/* Start the server with the api as the test has set it. */
static void serve(void)
{
	struct http_config cfg = {
		.listen = "127.0.0.1:0", .threads = 2, .max_connections = 32, .timeout_s = 30,
		.max_body_bytes = 64 << 20,
	};
	char err[256] = "";
	if (http_server_start(&fx.http, &cfg, err, sizeof err) != 0)
		fail_msg("http_server_start: %s", err);
	assert_int_equal(api_register(fx.http, &fx.api), 0);
	snprintf(fx.base, sizeof fx.base, "http://127.0.0.1:%d", http_server_port(fx.http));
}

static int teardown(void **state)
{
	(void)state;
	http_server_stop(fx.http);
	tsdb_close(fx.db);
	rx_set_limits(0, 0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx.dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static uint32_t series(const char *name, const char *k, const char *v)
{
	struct label l[2] = {{"__name__", name}, {k, v}};
	uint32_t ref = 0;
	char err[256];
	assert_int_equal(tsdb_series(fx.db, l, 2, &ref, err, sizeof err), 0);
	return ref;
}

static void get(struct reply *r, const char *path_and_query)
{
	char u[4096];
	snprintf(u, sizeof u, "%s%s", fx.base, path_and_query);
	http_test_fetch(r, u, NULL, NULL, NULL, NULL);
	buf_putc(&r->body, '\0');
}

static const char *body(const struct reply *r)
{
	return r->body.data ? r->body.data : "";
}

/* A window in the gap of one series' data lists it, as Prometheus does;
 * one after another series' last sample does not list that one. */
static void test_series_window(void **state)
{
	(void)state;
	uint32_t gap = series("win_m", "k", "gap");
	uint32_t before = series("win_m", "k", "before");
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tsdb_append(fx.db, gap, T0 + i * 1000, i), 0);
		assert_int_equal(tsdb_append(fx.db, before, T0 + i * 1000, i), 0);
	}
	for (int i = 0; i < 3; i++)
		assert_int_equal(tsdb_append(fx.db, gap, T0 + 600000 + i * 1000, i), 0);
	serve();
	char q[512];
	long long lo = (T0 + 100000) / 1000, hi = (T0 + 200000) / 1000;
	struct reply r;
	snprintf(q, sizeof q, "/api/v1/series?match[]=win_m&start=%lld&end=%lld", lo, hi);
	get(&r, q);
	assert_int_equal(r.status, 200);
	assert_string_equal(body(&r),
			    "{\"status\":\"success\",\"data\":[{\"__name__\":\"win_m\",\"k\":\"gap\"}]}\n");
	reply_free(&r);
	snprintf(q, sizeof q, "/api/v1/label/k/values?match[]=win_m&start=%lld&end=%lld", lo, hi);
	get(&r, q);
	assert_string_equal(body(&r), "{\"status\":\"success\",\"data\":[\"gap\"]}\n");
	reply_free(&r);
	snprintf(q, sizeof q, "/api/v1/labels?start=%lld&end=%lld", lo, hi);
	get(&r, q);
	assert_string_equal(body(&r), "{\"status\":\"success\",\"data\":[\"__name__\",\"k\"]}\n");
	reply_free(&r);
	/* After the gap series' last sample: nothing. */
	snprintf(q, sizeof q, "/api/v1/series?match[]=win_m&start=%lld&end=%lld",
		 (T0 + 603000) / 1000, (T0 + 700000) / 1000);
	get(&r, q);
	assert_string_equal(body(&r), "{\"status\":\"success\",\"data\":[]}\n");
	reply_free(&r);
}

/* A series name that (x+x+)+y takes the backtracker past its limit on,
 * and, with the DFA workspace shrunk, the DFA matcher too. */
#define HARD_NAME "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxyy"

/* A regular expression that cannot decide fails the query with Prometheus's
 * error JSON naming the matcher: never a 200 without the series. */
static void test_regex_limit(void **state)
{
	(void)state;
	rx_set_limits(0, 20);
	uint32_t hard = series(HARD_NAME, "k", "v");
	uint32_t easy = series("xxy", "k", "v");
	assert_int_equal(tsdb_append(fx.db, hard, T0, 1), 0);
	assert_int_equal(tsdb_append(fx.db, easy, T0, 1), 0);
	serve();
	static const char *const paths[] = {
		"/api/v1/query?query=%7B__name__%3D~%22(x%2Bx%2B)%2By%22%7D&time=",
		"/api/v1/series?match[]=%7B__name__%3D~%22(x%2Bx%2B)%2By%22%7D&start=",
		"/api/v1/labels?match[]=%7B__name__%3D~%22(x%2Bx%2B)%2By%22%7D&start=",
	};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		char q[512];
		snprintf(q, sizeof q, "%s%lld", paths[i], (T0 + 1000) / 1000);
		struct reply r;
		get(&r, q);
		assert_int_equal(r.status, 422);
		assert_non_null(strstr(body(&r), "\"status\":\"error\",\"errorType\":\"execution\""));
		assert_non_null(strstr(body(&r), "regular expression in matcher __name__=~\\\"(x+x+)+y\\\" "
						 "exceeded its match limit"));
		reply_free(&r);
	}
}

/* Many series over many steps: an answer of millions of points. */
static void big_store(int nseries)
{
	for (int i = 0; i < nseries; i++) {
		char v[32];
		snprintf(v, sizeof v, "%d", i);
		uint32_t ref = series("big_m", "i", v);
		assert_int_equal(tsdb_append(fx.db, ref, T0, 0.1 * i + 1e-7), 0);
	}
}

static int64_t ms_since(int64_t t0_ns)
{
	return (clock_mono_ns() - t0_ns) / 1000000;
}

/* A range query whose answer is 1.1 million points with values that take
 * Go's shortest formatting its slow path (microseconds each, seconds in
 * all, while evaluating them takes a fraction of that): the deadline is
 * checked while the answer is written, so it is a 503 timeout soon after
 * query.timeout, never the whole answer (or a 422 for its size) seconds
 * later. */
static void test_timeout_formatting(void **state)
{
	(void)state;
	/* A fifth of what writing the answer took on a 2-core machine (1.5 s
	 * and more under load; one clock-400d run on a quiet moment wrote it
	 * within a 1.5 s deadline and answered 200): the margin, not the
	 * machine, decides. */
	const int64_t timeout_ms = 300;
	big_store(100);
	fx.api.timeout_ns = timeout_ms * 1000000;
	serve();
	char q[512];
	snprintf(q, sizeof q, "/api/v1/query_range?query=big_m&start=%lld&end=%lld&step=0.001",
		 T0 / 1000, T0 / 1000 + 11);
	int64_t t0 = clock_mono_ns();
	struct reply r;
	get(&r, q);
	int64_t took_ms = ms_since(t0);
	assert_int_equal(r.status, 503);
	assert_non_null(strstr(body(&r), "\"errorType\":\"timeout\""));
	assert_non_null(strstr(body(&r), "query timed out in "));
	/* Generous: the deadline is looked at every 4096 points, on a loaded
	 * machine; the whole answer would take seconds more. */
	if (took_ms > 9000)
		fail_msg("the timeout came after %lld ms (query.timeout %lld ms)", (long long)took_ms,
			 (long long)timeout_ms);
	reply_free(&r);
}

/* A handler on the query pool that holds its slot until released. */
static atomic_int hold_started, hold_release;

static int h_hold(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	atomic_store(&hold_started, 1);
	int64_t give_up = clock_mono_ns() + 30LL * 1000000000;
	while (!atomic_load(&hold_release) && clock_mono_ns() < give_up)
		usleep(1000);
	return buf_puts(&resp->body, "held\n");
}

static int h_busy(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	resp->status = 503;
	return 0;
}

struct bg_get {
	pthread_t t;
	const char *path;
	struct reply r;
};

static void *bg_main(void *arg)
{
	struct bg_get *g = arg;
	get(&g->r, g->path);
	return NULL;
}

static bool wait_until(bool (*cond)(void), int64_t max_ms)
{
	int64_t end = clock_mono_ns() + max_ms * 1000000;
	while (!cond() && clock_mono_ns() < end)
		usleep(1000);
	return cond();
}

static bool hold_running(void)
{
	return atomic_load(&hold_started) != 0;
}

static bool one_queued(void)
{
	struct api_stats st;
	api_stats(&fx.api, &st);
	return st.queued == 1;
}

static int64_t sent_ns, wait_ns;

static bool waited(void)
{
	return clock_mono_ns() >= sent_ns + wait_ns;
}

/* query.max_concurrency 1: a query queued behind one that holds the slot
 * for most of its query.timeout gets the slot with too little time left
 * and stops while its answer is computed; its message says the time went
 * in the query queue, not only "in expression evaluation". */
static void test_timeout_after_queue(void **state)
{
	(void)state;
	const int64_t timeout_ms = 1500;
	big_store(100);
	fx.api.timeout_ns = timeout_ms * 1000000;
	fx.api.max_concurrency = 1;
	serve();
	assert_int_equal(http_route_deferred(fx.http, "/hold", h_hold, h_busy, NULL, fx.api.pool), 0);
	atomic_store(&hold_started, 0);
	atomic_store(&hold_release, 0);
	struct bg_get hold = {.path = "/hold"}, q = {0};
	assert_int_equal(pthread_create(&hold.t, NULL, bg_main, &hold), 0);
	assert_true(wait_until(hold_running, 10000));
	char path[512];
	snprintf(path, sizeof path, "/api/v1/query_range?query=big_m&start=%lld&end=%lld&step=0.001",
		 T0 / 1000, T0 / 1000 + 11);
	q.path = path;
	sent_ns = clock_mono_ns();
	assert_int_equal(pthread_create(&q.t, NULL, bg_main, &q), 0);
	assert_true(wait_until(one_queued, 10000));
	/* Most of its time spent waiting, then the slot. */
	wait_ns = (timeout_ms - 300) * 1000000;
	assert_true(wait_until(waited, 10000));
	atomic_store(&hold_release, 1);
	pthread_join(hold.t, NULL);
	pthread_join(q.t, NULL);
	assert_int_equal(q.r.status, 503);
	assert_non_null(strstr(body(&q.r), "\"errorType\":\"timeout\""));
	if (!strstr(body(&q.r), "query queue"))
		fail_msg("the timeout does not name the queue: %s", body(&q.r));
	reply_free(&hold.r);
	reply_free(&q.r);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_series_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_regex_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_formatting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_after_queue, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
