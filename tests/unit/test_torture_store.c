/* Torture of the store (issue 14). Allocations: open a store in a
 * temporary directory, append, flush, query a range, write a record, run
 * retention, close and open again, failing each allocation in turn, the
 * store's and SQLite's (torture_shim.c; of a row of SQLite's, a sample:
 * SQLITE_STRIDE): the store never uses xalloc, so
 * every one of them must end in success or a clean error, with nothing
 * leaked. The same for the bus-to-store ingest, which must then still
 * make every series. SQLite writes: ingest, flush, rollup and retention
 * over a VFS that fails the k-th write, sync or truncate (or every one
 * from the k-th on); each time the error must be reported and counted,
 * and the file must afterwards open, pass PRAGMA integrity_check and hold
 * everything committed before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collect/bus.h"
#include "store/ingest.h"
#include "common/status.h"
#include "torture.h"
#include "store/tsdb.h"

#define T0 1795965289000LL   /* the samples' base time */
#define NOW (T0 + 3 * 3600 * 1000LL)

static const char *const path = torture_store_path;

static int64_t test_now(void *ctx)
{
	(void)ctx;
	return NOW;
}

static int open_store(struct tsdb **db, int64_t raw_retention_ms)
{
	/* 1024 series (the ingest makes about 100), not the default 100000: every open zeroes tables
	 * sized by max_series (3 MB of memset at the default, a seventh of
	 * the test's CPU time over its 7000 opens) while the allocations
	 * tortured are the same calls. */
	struct tsdb_opts o = {.path = path, .raw_retention_ms = raw_retention_ms,
			      .max_series = 1024, .clock = {.now_ms = test_now}};
	char err[256] = "";
	*db = NULL;
	int rc = tsdb_open(db, &o, err, sizeof err);
	if (rc != 0 && (*db || !err[0])) {
		fprintf(stderr, "tsdb_open: status %d with %s\n", rc,
			*db ? "a store handed out" : "no message");
		return -1;
	}
	/* Memory is not damage: a store refused as damaged would be moved
	 * aside or need a person. */
	if (rc == GPULSE_EPARSE && torture_injected()) {
		fprintf(stderr, "tsdb_open: an allocation failure taken for damage: %s\n", err);
		return -1;
	}
	return rc;
}

static int series(struct tsdb *db, const char *name, const char *gpu, uint32_t *ref)
{
	struct label l[] = {{"__name__", name}, {"gpu", gpu}};
	char err[256] = "";
	return tsdb_series(db, l, 2, ref, err, sizeof err);
}

/* Samples of `name` in [mint, maxt], or a negated status. */
static long count(struct tsdb *db, const char *name, int64_t mint, int64_t maxt)
{
	struct tsdb_matcher m = {TSDB_MATCH_EQ, "__name__", name};
	struct tsdb_select_opts so = {.mint = mint, .maxt = maxt, .mode = TSDB_READ_RAW};
	struct tsdb_iter *it = NULL;
	char err[256] = "";
	int rc = tsdb_select(db, &m, 1, &so, &it, err, sizeof err);
	if (rc != 0)
		return -rc;
	long n = 0;
	int r;
	while ((r = tsdb_iter_next_series(it)) == 1) {
		int64_t t;
		double v;
		while (tsdb_iter_next_sample(it, &t, &v) == 1)
			n++;
	}
	tsdb_iter_free(it);
	return r < 0 ? r : n;
}

/* ---- allocations ---- */

/* Of a row of SQLite's allocations, every this many is failed (with the
 * first and the last): see torture_sqlite_stride. */
#define SQLITE_STRIDE 8

#define ALLOC_SAMPLES 300

/* The whole life of a small store. A step that fails with a clean error
 * ends the run (the store is still closed); a flush that fails must
 * succeed when retried, since only one allocation fails per run. */
static int alloc_scenario(void *ctx)
{
	(void)ctx;
	torture_store_remove();
	struct tsdb *db;
	int rc = open_store(&db, 0);
	if (rc != 0)
		return rc;
	uint32_t ref[2];
	if ((rc = series(db, "x", "0", &ref[0])) != 0 || (rc = series(db, "x", "1", &ref[1])) != 0)
		goto out;
	for (int i = 0; i < ALLOC_SAMPLES; i++)
		for (int j = 0; j < 2; j++)
			if (tsdb_append(db, ref[j], T0 + i * 1000, (double)i) != 0) {
				fprintf(stderr, "tsdb_append failed\n");
				rc = -1;
				goto out;
			}
	if (tsdb_flush(db) != 0 && (rc = tsdb_flush(db)) != 0) {
		fprintf(stderr, "a retried flush failed (%d)\n", rc);
		rc = -1;
		goto out;
	}
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	long n = count(db, "x", T0, T0 + ALLOC_SAMPLES * 1000);
	if (n < 0) {
		rc = (int)-n;
		goto out;
	}
	/* A chunk whose copy could not be allocated is dropped and counted. */
	if ((uint64_t)n != st.samples_appended_total - st.samples_dropped_total) {
		fprintf(stderr, "read %ld samples of %llu appended, %llu dropped\n", n,
			(unsigned long long)st.samples_appended_total,
			(unsigned long long)st.samples_dropped_total);
		rc = -1;
		goto out;
	}
	char **names = NULL;
	size_t nn = 0;
	if ((rc = tsdb_label_names(db, &names, &nn)) != 0)
		goto out;
	tsdb_strings_free(names, nn);
	if ((rc = tsdb_record_put(db, "alert", "k1", T0, "{\"a\":1}")) != 0)
		goto out;
	struct tsdb_record rec;
	if ((rc = tsdb_record_get(db, "alert", "k1", &rec)) != 0)
		goto out;
	tsdb_record_clear(&rec);
	if ((rc = tsdb_enforce_retention(db, NOW)) != 0)
		goto out;
	tsdb_close(db);
	/* Open again: what was flushed is there. */
	if ((rc = open_store(&db, 0)) != 0)
		return rc;
	n = count(db, "x", T0, T0 + ALLOC_SAMPLES * 1000);
	if (n < 0)
		rc = (int)-n;
	else if ((uint64_t)n != st.samples_appended_total - st.samples_dropped_total) {
		fprintf(stderr, "after reopening: %ld samples\n", n);
		rc = -1;
	}
out:
	tsdb_close(db);
	return rc;
}

static void test_alloc_torture(void **state)
{
	(void)state;
	struct torture_report r;
	time_t t0 = time(NULL);
	/* About 5400 points, most of them SQLite's in the opens: each of the
	 * store's own fails, and of SQLite's the first, the last and every
	 * SQLITE_STRIDE-th of each row (torture.h). */
	torture_sqlite_stride(SQLITE_STRIDE);
	assert_int_equal(torture_run("store", TORTURE_RECOVERABLE, alloc_scenario, NULL, 0, &r), 0);
	assert_true(r.points > 100);
	assert_true(r.clean_errors > 0);
	fprintf(stderr, "store allocation torture: %lld s\n", (long long)(time(NULL) - t0));
	torture_sqlite_stride(1);
}

/* ---- the bus into the store ---- */

/* A GPU on the bus, the ingest subscribed, 20 updates of every field in
 * each tier and 20 ticks, one more round with nothing failing (every
 * series must then be there), a flush, everything freed. The store is opened
 * paused (its opening is alloc_scenario's). */
/* Copy the file at `from` to `to` (a closed store is one file: its -wal
 * checkpointed and removed). 0 or -1. */
static int copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char buf[8192];
	size_t n;
	int rc = in && out ? 0 : -1;
	while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			rc = -1;
	if (in && ferror(in))
		rc = -1;
	if (in)
		fclose(in);
	if (out && fclose(out) != 0)
		rc = -1;
	return rc;
}

/* Each ingest run starts from a new, empty store: made once and copied,
 * as making one (schema, VACUUM) costs more than the run itself and is
 * alloc_scenario's to torture. */
static char tmpl[160];

static int ingest_scenario(void *ctx)
{
	(void)ctx;
	struct tsdb *db;
	torture_pause(true);
	int rc = 0;
	if (!tmpl[0]) {
		torture_store_remove();
		if ((rc = open_store(&db, 0)) == 0) {
			tsdb_close(db);
			snprintf(tmpl, sizeof tmpl, "%s.empty", path);
			rc = rename(path, tmpl);
		}
	}
	torture_store_remove();
	if (rc == 0)
		rc = copy_file(tmpl, path);
	if (rc == 0)
		rc = open_store(&db, 0);
	torture_pause(false);
	if (rc != 0)
		return -1;
	struct bus *bus = NULL;
	struct ingest *ing = NULL;
	struct gpu_update *u = NULL;
	if ((rc = bus_create(&bus)) != 0)
		goto out;
	struct gpu_identity id;
	memset(&id, 0, sizeof id);
	strcpy(id.uuid, "GPU-0123");
	strcpy(id.name, "NVIDIA H200");
	int slot;
	if ((rc = bus_attach_gpu(bus, &id, &slot)) != 0 || (rc = ingest_create(&ing, db, bus)) != 0 ||
	    (rc = ingest_subscribe(ing)) != 0)
		goto out;
	if (!(u = calloc(1, sizeof *u))) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	for (int i = 0; i < 21; i++) {
		/* The last round with nothing failing: every series the clean
		 * run made is there after it (a failure is no reason to give
		 * a metric up for good). */
		if (i == 20)
			torture_pause(true);
		for (int t = 0; t < TIER_COUNT; t++) {
			memset(u, 0, sizeof *u);
			u->gpu = slot;
			u->tier = (enum tier)t;
			u->wall_ns = (T0 + i * 1000 + t) * 1000000;
			u->mask = u->valid = ~0ULL >> (64 - FIELD_COUNT);
			for (int f = 0; f < FIELD_COUNT; f++)
				u->v[f] = i + f;
			bus_publish(bus, u);
		}
		ingest_tick(ing, T0 + i * 1000 + 500);
	}
	static uint64_t clean_series;   /* the clean run comes first */
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	if (!clean_series)
		clean_series = st.series;
	if (st.series != clean_series) {
		fprintf(stderr, "%llu series of the clean run's %llu after the failure\n",
			(unsigned long long)st.series, (unsigned long long)clean_series);
		rc = -1;
		goto out;
	}
	torture_pause(false);
	if (tsdb_flush(db) != 0 && (rc = tsdb_flush(db)) != 0) {
		fprintf(stderr, "a retried flush failed (%d)\n", rc);
		rc = -1;
	}
out:
	torture_pause(false);
	free(u);
	ingest_destroy(ing);
	bus_destroy(bus);
	tsdb_close(db);
	return rc;
}

static void test_ingest_torture(void **state)
{
	(void)state;
	struct torture_report r;
	torture_sqlite_stride(SQLITE_STRIDE);
	assert_int_equal(torture_run("ingest", TORTURE_RECOVERABLE, ingest_scenario, NULL, 0, &r), 0);
	torture_sqlite_stride(1);
	unlink(tmpl);
	tmpl[0] = '\0';
	assert_true(r.points > 20);
}

/* ---- SQLite writes ---- */

static bool io_sticky;

#define PHASE_A 600   /* samples of each series committed before the faults */
#define PHASE_B 600   /* samples appended while they may come */

static bool integrity_ok(void)
{
	sqlite3 *s = NULL;
	bool ok = false;
	if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
		sqlite3_stmt *q = NULL;
		if (sqlite3_prepare_v2(s, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK &&
		    sqlite3_step(q) == SQLITE_ROW)
			ok = strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0;
		sqlite3_finalize(q);
	}
	sqlite3_close(s);
	return ok;
}

/* Phase A commits samples of "a" (recent) and "old" (past raw
 * retention); phase B, with the k-th write failing, appends more of "a"
 * (three minutes of them: rollups come due), flushes, writes a record,
 * runs retention and closes. Then, with no faults: the file opens, passes
 * integrity_check and holds all of phase A's "a", phase B's when its
 * flush said so, and no "old" when retention said it ran. Returns
 * whether the k-th operation came (0 when there were fewer), or -1. */
static int io_scenario(long k, long *ops)
{
	torture_store_remove();
	const int64_t ta = NOW - 20 * 60 * 1000LL;      /* phase A of "a" */
	const int64_t tb = ta + PHASE_A * 1000LL;      /* phase B */
	struct tsdb *db;
	if (open_store(&db, 3600 * 1000LL) != 0)
		return -1;
	uint32_t a, old;
	if (series(db, "a", "0", &a) != 0 || series(db, "old", "0", &old) != 0)
		return -1;
	for (int i = 0; i < PHASE_A; i++) {
		tsdb_append(db, a, ta + i * 1000LL, (double)i);
		tsdb_append(db, old, T0 + i * 1000LL, (double)i);
	}
	if (tsdb_flush(db) != 0)
		return -1;

	torture_io_arm(k, io_sticky);
	for (int i = 0; i < PHASE_B; i++)
		tsdb_append(db, a, tb + i * 1000LL, (double)i);
	int frc = tsdb_flush(db);
	int prc = tsdb_record_put(db, "alert", "k", NOW, "{}");
	int rrc = tsdb_enforce_retention(db, NOW);
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	tsdb_close(db);
	*ops = torture_io_disarm();
	bool hit = k > 0 && *ops >= k;

	int bad = 0;
	int rcs[] = {frc, prc, rrc};
	int failed = 0;
	for (int i = 0; i < 3; i++) {
		if (rcs[i] != 0 && rcs[i] != GPULSE_EIO) {
			fprintf(stderr, "write %ld: call %d returned %d, not GPULSE_EIO\n", k, i, rcs[i]);
			bad = 1;
		}
		failed += rcs[i] != 0;
	}
	if (failed && st.storage_errors_total == 0) {
		fprintf(stderr, "write %ld: a call failed and no storage error was counted\n", k);
		bad = 1;
	}
	if (!integrity_ok()) {
		fprintf(stderr, "write %ld: integrity_check failed\n", k);
		return -1;
	}
	if (open_store(&db, 3600 * 1000LL) != 0) {
		fprintf(stderr, "write %ld: the store does not open again\n", k);
		return -1;
	}
	long na = count(db, "a", ta, tb - 1);
	long nb = count(db, "a", tb, tb + PHASE_B * 1000LL);
	long nold = count(db, "old", T0, T0 + PHASE_A * 1000LL);
	struct tsdb_record rec;
	int grc = tsdb_record_get(db, "alert", "k", &rec);
	if (grc == 0)
		tsdb_record_clear(&rec);
	tsdb_close(db);
	if (na != PHASE_A) {
		fprintf(stderr, "write %ld: %ld of the %d committed samples\n", k, na, PHASE_A);
		bad = 1;
	}
	if (frc == 0 && nb != PHASE_B) {
		fprintf(stderr, "write %ld: the flush succeeded, %ld of %d samples\n", k, nb, PHASE_B);
		bad = 1;
	}
	if (nb != 0 && nb != PHASE_B) {
		fprintf(stderr, "write %ld: a partial flush: %ld of %d samples\n", k, nb, PHASE_B);
		bad = 1;
	}
	if (rrc == 0 && nold != 0) {
		fprintf(stderr, "write %ld: retention ran, %ld old samples left\n", k, nold);
		bad = 1;
	}
	if (prc == 0 && grc != 0) {
		fprintf(stderr, "write %ld: the record was written and is gone\n", k);
		bad = 1;
	}
	return bad ? -1 : hit;
}

static void io_torture(bool sticky)
{
	io_sticky = sticky;
	time_t t0 = time(NULL);
	long ops = 0;
	assert_int_equal(io_scenario(0, &ops), 0);
	assert_true(ops > 3);
	long bad = 0, hits = 0;
	for (long k = 1; k <= ops; k++) {
		long seen = 0;
		int rc = io_scenario(k, &seen);
		if (rc < 0)
			bad++;
		hits += rc == 1;
	}
	fprintf(stderr, "sqlite write torture (%s): %ld write/sync/truncate points, %ld hit, "
		"%ld bad, %lld s\n", sticky ? "every one from k on" : "the k-th alone", ops, hits,
		bad, (long long)(time(NULL) - t0));
	assert_int_equal(bad, 0);
}

static void test_sqlite_write_torture(void **state)
{
	(void)state;
	assert_int_equal(torture_io_install(), SQLITE_OK);
	io_torture(false);
	io_torture(true);
	torture_io_uninstall();
}

int main(void)
{
	/* Before anything opens SQLite. */
	if (torture_route_sqlite() != SQLITE_OK) {
		fprintf(stderr, "sqlite3_config(SQLITE_CONFIG_MALLOC) refused\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_alloc_torture, torture_store_setup, torture_store_teardown),
		cmocka_unit_test_setup_teardown(test_ingest_torture, torture_store_setup, torture_store_teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_write_torture, torture_store_setup, torture_store_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
