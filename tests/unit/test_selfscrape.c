/* The store's scrape of /metrics (src/daemon/selfscrape.c) against a real
 * store: a name no other writer declares is taken on its first scrape and
 * its series come back with their labels (escapes undone, empty values
 * dropped), histograms as _bucket/_sum/_count; a name another writer
 * declares is left alone, and so are the bench results benchd stores
 * (benchd_store_metrics) before the store holds any; a store reopened
 * after a restart, holding every name the last run stored, changes
 * nothing (the names are taken again at once); a series gone gets
 * one staleness marker and is forgotten after SELFSCRAPE_FORGET_SCRAPES;
 * max_series holds. The clock is injected: samples are stamped relative
 * to a fixed T0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/benchd.h"
#include "common/buf.h"
#include "daemon/selfscrape.h"
#include "common/status.h"
#include "store/tsdb.h"

#define T0 1795965289000LL

static char dir[64];
static char path[128];

static int64_t test_now(void *ctx)
{
	(void)ctx;
	return T0 + 3600 * 1000;
}

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/gpulse-scrapeXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/store.db", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static struct tsdb *open_db(void)
{
	struct tsdb_opts o = {.path = path, .clock.now_ms = test_now};
	struct tsdb *db = NULL;
	char err[256] = "";
	if (tsdb_open(&db, &o, err, sizeof err))
		fail_msg("tsdb_open: %s", err);
	return db;
}

/* Samples of the series matching name (and k=v when k) in [T0, T0+1h]:
 * how many series, and the values of the first, in *vals. */
static size_t samples(struct tsdb *db, const char *name, const char *k, const char *v,
		      double *vals, size_t max, size_t *nseries, char *labels, size_t lcap)
{
	struct tsdb_matcher m[2] = {{TSDB_MATCH_EQ, "__name__", name}, {TSDB_MATCH_EQ, k, v}};
	struct tsdb_select_opts so = {.mint = T0 - 1000, .maxt = T0 + 3600 * 1000,
				      .mode = TSDB_READ_RAW};
	struct tsdb_iter *it;
	char err[256];
	assert_int_equal(tsdb_select(db, m, k ? 2 : 1, &so, &it, err, sizeof err), 0);
	size_t n = 0;
	*nseries = 0;
	while (tsdb_iter_next_series(it) == 1) {
		if ((*nseries)++ == 0) {
			size_t nl;
			const struct tsdb_label *l = tsdb_iter_labels(it, &nl);
			size_t w = 0;
			for (size_t i = 0; i < nl && labels; i++)
				w += (size_t)snprintf(labels + w, lcap - w, "%s%s=%s", i ? "," : "",
						      l[i].name, l[i].value);
			int64_t t;
			double x;
			while (tsdb_iter_next_sample(it, &t, &x) == 1)
				if (n < max)
					vals[n++] = x;
		}
	}
	tsdb_iter_free(it);
	return n;
}

static const char scrape1[] =
	"# HELP gpulse_gpu_info Identity.\n"
	"# TYPE gpulse_gpu_info gauge\n"
	"gpulse_gpu_info{gpu=\"0\",model=\"NVIDIA \\\"H200\\\"\",driver=\"\",source=\"a\\\\b\\nc\"} 1\n"
	"gpulse_gpus 2\n"
	"# TYPE gpulse_lat_seconds histogram\n"
	"gpulse_lat_seconds_bucket{le=\"0.1\"} 3\n"
	"gpulse_lat_seconds_bucket{le=\"+Inf\"} 5\n"
	"gpulse_lat_seconds_sum 1.5\n"
	"gpulse_lat_seconds_count 5\n"
	"gpulse_gpu_power_watts{gpu=\"0\"} 100\n"
	"gpulse_proc{pid=\"1\"} 7\n"
	"not a sample line\n";

static const char *const power_writer[] = {"gpulse_gpu_power_watts", NULL};

static void test_owned_and_foreign(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	/* Another writer stores gpulse_gpu_power_watts already, and says so. */
	struct tsdb_label pl[2] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", "0"}};
	uint32_t pref;
	char err[256];
	assert_int_equal(tsdb_series(db, pl, 2, &pref, err, sizeof err), 0);
	assert_int_equal(tsdb_append(db, pref, T0, 99), 0);

	struct selfscrape *s;
	struct selfscrape_opts o = {.foreign_names = power_writer};
	assert_int_equal(selfscrape_create(&s, db, &o, NULL, NULL), 0);
	/* The first scrape stores already: no name waits on the store. */
	selfscrape_ingest(s, scrape1, strlen(scrape1), T0 + 2000);
	double v[16];
	size_t ns;
	assert_int_equal(samples(db, "gpulse_gpus", NULL, NULL, v, 16, &ns, NULL, 0), 1);
	assert_int_equal(ns, 1);
	for (int i = 3; i <= 4; i++)
		selfscrape_ingest(s, scrape1, strlen(scrape1), T0 + i * 1000);
	assert_int_equal(samples(db, "gpulse_gpus", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	assert_int_equal(ns, 1);
	assert_true(v[0] == 2 && v[2] == 2);
	/* Labels: escapes undone, the empty one dropped. */
	char labels[512];
	assert_int_equal(samples(db, "gpulse_gpu_info", NULL, NULL, v, 16, &ns, labels, sizeof labels), 3);
	assert_string_equal(labels, "__name__=gpulse_gpu_info,gpu=0,model=NVIDIA \"H200\",source=a\\b\nc");
	/* A histogram, as its three sample names. */
	assert_int_equal(samples(db, "gpulse_lat_seconds_bucket", "le", "+Inf", v, 16, &ns, NULL, 0), 3);
	assert_true(v[0] == 5);
	assert_int_equal(samples(db, "gpulse_lat_seconds_bucket", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	assert_int_equal(ns, 2);
	assert_int_equal(samples(db, "gpulse_lat_seconds_sum", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	assert_true(v[0] == 1.5);
	assert_int_equal(samples(db, "gpulse_lat_seconds_count", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	/* The foreign name: only its own writer's sample. */
	assert_int_equal(samples(db, "gpulse_gpu_power_watts", NULL, NULL, v, 16, &ns, NULL, 0), 1);
	assert_true(v[0] == 99);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.scrapes_total, 3);
	assert_int_equal(st.names_foreign, 1);
	assert_int_equal(st.names_owned, 6); /* info, gpus, _bucket, _sum, _count, proc */
	assert_int_equal(st.series, 7);

	/* gpulse_proc{pid="1"} goes away: one staleness marker, then nothing;
	 * after SELFSCRAPE_FORGET_SCRAPES it is forgotten. */
	static const char scrape2[] = "gpulse_gpus 3\n";
	selfscrape_ingest(s, scrape2, strlen(scrape2), T0 + 5000);
	selfscrape_ingest(s, scrape2, strlen(scrape2), T0 + 6000);
	size_t n = samples(db, "gpulse_proc", NULL, NULL, v, 16, &ns, NULL, 0);
	assert_int_equal(n, 4);
	assert_true(isnan(v[3]) && v[2] == 7);
	for (int i = 0; i < SELFSCRAPE_FORGET_SCRAPES; i++)
		selfscrape_ingest(s, scrape2, strlen(scrape2), T0 + 7000 + i * 1000);
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.series, 1);
	assert_int_equal(samples(db, "gpulse_proc", NULL, NULL, v, 16, &ns, NULL, 0), 4);
	selfscrape_destroy(s);
	tsdb_close(db);
}

/* A restart (issue: every systemd restart stored nothing of /metrics):
 * the store reopened holds every name the last run's scraper stored; the
 * new scraper takes them again from its first scrape, and still leaves
 * the declared name alone. */
static void test_reopened_store(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	struct selfscrape_opts o = {.foreign_names = power_writer};
	struct selfscrape *s;
	assert_int_equal(selfscrape_create(&s, db, &o, NULL, NULL), 0);
	for (int i = 1; i <= 3; i++)
		selfscrape_ingest(s, scrape1, strlen(scrape1), T0 + i * 1000);
	selfscrape_destroy(s);
	tsdb_close(db);

	db = open_db();
	assert_int_equal(selfscrape_create(&s, db, &o, NULL, NULL), 0);
	selfscrape_ingest(s, scrape1, strlen(scrape1), T0 + 10000);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.names_owned, 6); /* info, gpus, _bucket, _sum, _count, proc */
	assert_int_equal(st.names_foreign, 1);
	assert_int_equal(st.series, 7);
	assert_int_equal(st.samples_appended_total, 7);
	double v[16];
	size_t ns;
	assert_int_equal(samples(db, "gpulse_gpus", NULL, NULL, v, 16, &ns, NULL, 0), 4);
	assert_int_equal(samples(db, "gpulse_lat_seconds_count", NULL, NULL, v, 16, &ns, NULL, 0), 4);
	assert_int_equal(samples(db, "gpulse_gpu_power_watts", NULL, NULL, v, 16, &ns, NULL, 0), 0);
	selfscrape_destroy(s);
	tsdb_close(db);
}

/* A name declared another writer's (the ingest's per-process series) is
 * never taken, though the store holds none of it yet. */
static void test_declared_foreign(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	static const char *const foreign[] = {"gpulse_proc", NULL};
	struct selfscrape_opts o = {.foreign_names = foreign};
	struct selfscrape *s;
	assert_int_equal(selfscrape_create(&s, db, &o, NULL, NULL), 0);
	for (int i = 1; i <= 4; i++)
		selfscrape_ingest(s, scrape1, strlen(scrape1), T0 + i * 1000);
	double v[16];
	size_t ns;
	assert_int_equal(samples(db, "gpulse_proc", NULL, NULL, v, 16, &ns, NULL, 0), 0);
	assert_int_equal(ns, 0);
	assert_int_equal(samples(db, "gpulse_gpus", NULL, NULL, v, 16, &ns, NULL, 0), 4);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.names_foreign, 1);
	assert_int_equal(st.names_owned, 6); /* info, gpus, _bucket, _sum, _count, power */
	selfscrape_destroy(s);
	tsdb_close(db);
}

/* The bench results (benchd_store_metrics, which benchd writes into the
 * store at each run) are never taken from /metrics, though the store
 * holds none of them yet (opened after a run), while benchd's counters,
 * stored by no one else, are. The list is the daemon's: daemon.c hands
 * it to the scraper with the ingest's. */
static void test_bench_results_left_to_benchd(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	struct selfscrape_opts o = {.foreign_names = benchd_store_metrics};
	struct selfscrape *s;
	assert_int_equal(selfscrape_create(&s, db, &o, NULL, NULL), 0);
	struct buf text;
	buf_init(&text, 1 << 16);
	size_t nres = 0;
	for (const char *const *n = benchd_store_metrics; *n; n++, nres++)
		buf_printf(&text, "# TYPE %s gauge\n%s{gpu=\"0\",uuid=\"GPU-a\",figure=\"matmul\"} 1.5\n",
			   *n, *n);
	assert_true(nres >= 10);
	buf_puts(&text, "gpulse_bench_runs_total{gpu=\"0\",outcome=\"kept\"} 1\n");
	assert_false(text.failed);
	for (int i = 1; i <= 5; i++)
		selfscrape_ingest(s, text.data, text.len, T0 + i * 1000);
	double v[16];
	size_t ns;
	for (const char *const *n = benchd_store_metrics; *n; n++) {
		if (samples(db, *n, NULL, NULL, v, 16, &ns, NULL, 0) != 0 || ns != 0)
			fail_msg("%s was taken from /metrics", *n);
	}
	assert_int_equal(samples(db, "gpulse_bench_runs_total", NULL, NULL, v, 16, &ns, NULL, 0), 5);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.names_foreign, nres);
	assert_int_equal(st.names_owned, 1);
	buf_free(&text);
	selfscrape_destroy(s);
	tsdb_close(db);
}

/* More series than max_series: the rest are refused and counted. */
static void test_bound(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	struct selfscrape *s;
	struct selfscrape_opts o = {.max_series = 5};
	assert_int_equal(selfscrape_create(&s, db, &o, NULL, NULL), 0);
	char text[2048];
	size_t w = 0;
	for (int i = 0; i < 12; i++)
		w += (size_t)snprintf(text + w, sizeof text - w, "gpulse_proc{pid=\"%d\"} %d\n", i, i);
	for (int k = 0; k < 3; k++)
		selfscrape_ingest(s, text, w, T0 + k * 1000);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.series, 5);
	assert_int_equal(st.series_refused_total, 3 * 7);
	selfscrape_destroy(s);
	tsdb_close(db);
	selfscrape_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_owned_and_foreign, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopened_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_declared_foreign, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bench_results_left_to_benchd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bound, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
