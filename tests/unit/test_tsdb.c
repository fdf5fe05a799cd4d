/* The store: what is appended comes back exactly after flush and reopen
 * (the real H200 recording, 22 series), head and disk merge without
 * duplicates, matchers select like PromQL, rollups equal min/max/sum/count
 * computed directly, retention drops old data, records persist, bounds
 * give errors and count, a full database keeps samples in memory and
 * resumes, foreign or damaged files are refused with a sentence, a
 * full disk at open is reported as a full disk or an I/O error, a damaged
 * chunk (random bytes, one flipped bit) is skipped, counted and logged
 * while the rest of the range is served, and a store written before
 * chunks had checksums (schema 1) opens and reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"
#include "store/rollblock.h"
#include "store/tsdb.h"

#define STALE_NAN 0x7ff0000000000002ull
#define T0 1795965289000LL

static char dir[64];
static char path[128];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/gpulse-tsdbXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/store.db", dir);
	return 0;
}

static void capture_abandon(void);

static int teardown(void **state)
{
	(void)state;
	capture_abandon();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* The store's clock in these tests: an hour after T0, so samples at T0
 * meet retention and rollup rules the same way whatever today's date. */
static int64_t test_now(void *ctx)
{
	(void)ctx;
	return T0 + 3600 * 1000;
}

static struct tsdb *open_db(const struct tsdb_opts *extra)
{
	struct tsdb_opts o = { 0 };
	if (extra)
		o = *extra;
	o.path = path;
	if (!o.clock.now_ms)
		o.clock.now_ms = test_now;
	struct tsdb *db = NULL;
	char err[256] = "";
	int rc = tsdb_open(&db, &o, err, sizeof err);
	if (rc != 0)
		fail_msg("tsdb_open: %s", err);
	return db;
}

static uint32_t series2(struct tsdb *db, const char *name, const char *k, const char *v)
{
	struct label l[2] = { { "__name__", name }, { k, v } };
	uint32_t ref = 0;
	char err[256];
	assert_int_equal(tsdb_series(db, l, k ? 2 : 1, &ref, err, sizeof err), 0);
	return ref;
}

/* The rollup blocks on disk, oldest first, each decoded (rollblock.h):
 * their first bucket and bucket count, the longest block, and the
 * buckets in all. Fails the test on a block that does not decode. */
struct disk_blocks {
	int n;
	int64_t mint[256];
	int buckets[256];
	int total;
	size_t longest;
};

static void read_disk_blocks(struct disk_blocks *d)
{
	memset(d, 0, sizeof *d);
	sqlite3 *s;
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(s, "SELECT mint, data FROM rollup_blocks ORDER BY series_id, mint",
					    -1, &q, NULL), SQLITE_OK);
	static struct rollblock b;
	while (sqlite3_step(q) == SQLITE_ROW && d->n < 256) {
		size_t len = (size_t)sqlite3_column_bytes(q, 1);
		const char *why = NULL;
		if (rollblock_decode(sqlite3_column_blob(q, 1), len, sqlite3_column_int64(q, 0), &b, &why) != 0)
			fail_msg("block at %lld: %s", (long long)sqlite3_column_int64(q, 0), why);
		d->mint[d->n] = sqlite3_column_int64(q, 0);
		d->buckets[d->n++] = b.n;
		d->total += b.n;
		if (len > d->longest)
			d->longest = len;
	}
	sqlite3_finalize(q);
	sqlite3_close(s);
}

static uint64_t bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

/* All samples of the one series matching __name__=name, into t/v. */
static size_t read_series(struct tsdb *db, const char *name, int64_t mint, int64_t maxt,
			  int64_t *t, double *v, size_t max)
{
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", name };
	struct tsdb_select_opts so = { .mint = mint, .maxt = maxt, .mode = TSDB_READ_RAW };
	struct tsdb_iter *it;
	char err[256];
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	size_t n = 0;
	int rc = tsdb_iter_next_series(it);
	assert_true(rc >= 0);
	if (rc == 1) {
		while (n < max && tsdb_iter_next_sample(it, &t[n], &v[n]) == 1)
			n++;
		assert_int_equal(tsdb_iter_next_series(it), 0);
	}
	tsdb_iter_free(it);
	return n;
}

/* ---- the real recording ---- */

enum { MAXR = 4000, MAXC = 32 };
static int64_t rt[MAXR];
static double rv[MAXC][MAXR];
static char rnames[MAXC][64];
static size_t nrows;
static int ncols;

static void load_recording(void)
{
	if (nrows)
		return;
	const char *d = getenv("GPULSE_TEST_DATA");
	char p[4096];
	snprintf(p, sizeof p, "%s/recordings/h200-phases-10hz.csv", d ? d : GPULSE_SOURCE_DATADIR);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	char line[8192];
	assert_non_null(fgets(line, sizeof line, f));
	line[strcspn(line, "\r\n")] = 0;
	char *save = NULL;
	char *tok = strtok_r(line, ",", &save);   /* t_s */
	while ((tok = strtok_r(NULL, ",", &save)) && ncols < MAXC)
		snprintf(rnames[ncols++], sizeof rnames[0], "gpulse_gpu_%s", tok);
	while (fgets(line, sizeof line, f) && nrows < MAXR) {
		char *end;
		rt[nrows] = (int64_t)llround(strtod(line, &end) * 1000.0);
		for (int c = 0; c < ncols; c++)
			rv[c][nrows] = strtod(end + 1, &end);
		nrows++;
	}
	fclose(f);
	assert_int_equal(ncols, 22);
}

static void check_recording(struct tsdb *db, size_t upto)
{
	static int64_t t[MAXR];
	static double v[MAXR];
	for (int c = 0; c < ncols; c++) {
		size_t n = read_series(db, rnames[c], INT64_MIN, INT64_MAX, t, v, MAXR);
		assert_int_equal(n, upto);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(t[i], rt[i]);
			assert_true(bits(v[i]) == bits(rv[c][i]));
		}
	}
}

static void test_real_round_trip(void **state)
{
	(void)state;
	load_recording();
	struct tsdb *db = open_db(NULL);
	uint32_t ref[MAXC];
	for (int c = 0; c < ncols; c++)
		ref[c] = series2(db, rnames[c], "gpu", "0");
	size_t half = nrows / 2 + 17;
	for (size_t i = 0; i < half; i++)
		for (int c = 0; c < ncols; c++)
			assert_int_equal(tsdb_append(db, ref[c], rt[i], rv[c][i]), 0);
	assert_int_equal(tsdb_flush(db), 0);
	/* The open chunk is now both on disk and in the head; more samples go
	 * into the same chunk: the merge must show each sample once. */
	for (size_t i = half; i < nrows; i++)
		for (int c = 0; c < ncols; c++)
			assert_int_equal(tsdb_append(db, ref[c], rt[i], rv[c][i]), 0);
	check_recording(db, nrows);
	assert_int_equal(tsdb_flush(db), 0);
	check_recording(db, nrows);
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	assert_int_equal(st.samples_appended_total, nrows * (size_t)ncols);
	assert_int_equal(st.series, (uint64_t)ncols);
	assert_int_equal(st.storage_errors_total, 0);
	assert_true(st.chunks_flushed_total > 0);
	tsdb_close(db);

	db = open_db(NULL);
	check_recording(db, nrows);
	/* References are stable across reopen; appends continue after the
	 * last stored sample and refuse older ones. */
	assert_int_equal(series2(db, rnames[3], "gpu", "0"), ref[3]);
	assert_int_equal(tsdb_append(db, ref[3], rt[nrows - 1], 1.0), GPULSE_ERANGE);
	tsdb_get_stats(db, &st);
	assert_int_equal(st.samples_dropped_total, 1);
	tsdb_close(db);
}

/* ---- matchers ---- */

static size_t select_names(struct tsdb *db, const struct tsdb_matcher *m, size_t nm,
			   char out[][64], size_t max)
{
	struct tsdb_select_opts so = { .mint = 0, .maxt = INT64_MAX };
	struct tsdb_iter *it;
	char err[256];
	assert_int_equal(tsdb_select(db, m, nm, &so, &it, err, sizeof err), 0);
	size_t n = 0;
	while (tsdb_iter_next_series(it) == 1 && n < max) {
		size_t nl;
		const struct label *l = tsdb_iter_labels(it, &nl);
		out[n][0] = 0;
		for (size_t i = 0; i < nl; i++) {
			size_t len = strlen(out[n]);
			snprintf(out[n] + len, 64 - len, "%s%s=%s", i ? "," : "", l[i].name, l[i].value);
		}
		n++;
	}
	tsdb_iter_free(it);
	return n;
}

static void test_matchers(void **state)
{
	(void)state;
	struct tsdb *db = open_db(NULL);
	const char *gpus[] = { "0", "1", "2", "10" };
	for (int g = 0; g < 4; g++) {
		uint32_t a = series2(db, "power", "gpu", gpus[g]);
		uint32_t b = series2(db, "temp", "gpu", gpus[g]);
		assert_int_equal(tsdb_append(db, a, 1000, g), 0);
		assert_int_equal(tsdb_append(db, b, 1000, g), 0);
	}
	uint32_t c = series2(db, "power", NULL, NULL);   /* no gpu label */
	assert_int_equal(tsdb_append(db, c, 1000, 9), 0);
	series2(db, "empty", "gpu", "0");               /* no samples: not returned */
	char got[16][64];
	struct tsdb_matcher m[3];

	m[0] = (struct tsdb_matcher){ TSDB_MATCH_EQ, "__name__", "power" };
	assert_int_equal(select_names(db, m, 1, got, 16), 5);
	assert_string_equal(got[0], "__name__=power");   /* fewer labels sort first */
	assert_string_equal(got[1], "__name__=power,gpu=0");
	assert_string_equal(got[2], "__name__=power,gpu=1");
	assert_string_equal(got[3], "__name__=power,gpu=10");

	m[1] = (struct tsdb_matcher){ TSDB_MATCH_NE, "gpu", "1" };
	assert_int_equal(select_names(db, m, 2, got, 16), 4);   /* missing gpu is "" != "1" */

	/* Anchored: "1" does not match "10". */
	m[1] = (struct tsdb_matcher){ TSDB_MATCH_RE, "gpu", "1" };
	assert_int_equal(select_names(db, m, 2, got, 16), 1);
	assert_string_equal(got[0], "__name__=power,gpu=1");
	m[1] = (struct tsdb_matcher){ TSDB_MATCH_RE, "gpu", "1|2" };
	assert_int_equal(select_names(db, m, 2, got, 16), 2);
	m[1] = (struct tsdb_matcher){ TSDB_MATCH_RE, "gpu", "1.*" };
	assert_int_equal(select_names(db, m, 2, got, 16), 2);
	m[1] = (struct tsdb_matcher){ TSDB_MATCH_NRE, "gpu", "[0-9]" };
	assert_int_equal(select_names(db, m, 2, got, 16), 2);    /* "" and "10" */
	m[1] = (struct tsdb_matcher){ TSDB_MATCH_EQ, "gpu", "" };
	assert_int_equal(select_names(db, m, 2, got, 16), 1);    /* label absent */
	m[0] = (struct tsdb_matcher){ TSDB_MATCH_RE, "__name__", "p.*|t.*" };
	m[1] = (struct tsdb_matcher){ TSDB_MATCH_EQ, "gpu", "2" };
	assert_int_equal(select_names(db, m, 2, got, 16), 2);

	struct tsdb_select_opts so = { .mint = 0, .maxt = INT64_MAX };
	struct tsdb_iter *it = NULL;
	char err[256];
	m[0] = (struct tsdb_matcher){ TSDB_MATCH_RE, "gpu", "(" };
	assert_int_equal(tsdb_select(db, m, 1, &so, &it, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "regular expression"));
	m[0] = (struct tsdb_matcher){ TSDB_MATCH_RE, "gpu", "1)|(2" };
	assert_int_equal(tsdb_select(db, m, 1, &so, &it, err, sizeof err), GPULSE_EINVAL);
	m[0] = (struct tsdb_matcher){ TSDB_MATCH_RE, "gpu", ".*" };
	assert_int_equal(tsdb_select(db, m, 1, &so, &it, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "empty string"));
	assert_null(it);

	char **names;
	size_t n;
	assert_int_equal(tsdb_label_names(db, &names, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "__name__");
	assert_string_equal(names[1], "gpu");
	tsdb_strings_free(names, n);
	assert_int_equal(tsdb_label_values(db, "__name__", &names, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "empty");
	assert_string_equal(names[2], "temp");
	tsdb_strings_free(names, n);
	tsdb_close(db);
}

/* ---- rollups and retention ---- */

static void test_rollups(void **state)
{
	(void)state;
	struct tsdb *db = open_db(NULL);
	uint32_t ref = series2(db, "x", "gpu", "0");
	enum { N = 6000 };   /* 10 minutes at 10 Hz, starting mid-minute */
	static int64_t t[N];
	static double v[N];
	int64_t start = 1800000000000LL + 30000;
	for (int i = 0; i < N; i++) {
		t[i] = start + i * 100 + (i % 3);
		uint64_t stale = STALE_NAN;
		if (i % 97 == 0)
			memcpy(&v[i], &stale, sizeof v[i]);
		else
			v[i] = sin(i * 0.01) * 100 + (i % 7) * 0.125;
		assert_int_equal(tsdb_append(db, ref, t[i], v[i]), 0);
		if (i % 1000 == 999)
			assert_int_equal(tsdb_flush(db), 0);
	}
	assert_int_equal(tsdb_flush(db), 0);
	/* Raw reads keep staleness markers bit for bit. */
	static int64_t rt2[N];
	static double rv2[N];
	assert_int_equal(read_series(db, "x", 0, INT64_MAX, rt2, rv2, N), N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(rt2[i], t[i]);
		assert_true(bits(rv2[i]) == bits(v[i]));
	}
	assert_true(bits(rv2[97]) == STALE_NAN);
	/* Computed directly, bucket by bucket. */
	struct tsdb_rollup want[16];
	int nw = 0;
	for (int i = 0; i < N; i++) {
		int64_t b = t[i] / 60000 * 60000;
		if (nw == 0 || want[nw - 1].t_ms != b)
			want[nw++] = (struct tsdb_rollup){ .t_ms = b };
		if (isnan(v[i]))
			continue;
		struct tsdb_rollup *w = &want[nw - 1];
		if (w->count == 0 || v[i] < w->min)
			w->min = v[i];
		if (w->count == 0 || v[i] > w->max)
			w->max = v[i];
		w->sum += v[i];
		w->count++;
	}
	for (int pass = 0; pass < 2; pass++) {
		struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", "x" };
		/* AUTO with a coarse step reads rollups. */
		struct tsdb_select_opts so = { .mint = 0, .maxt = INT64_MAX, .mode = TSDB_READ_AUTO,
					       .step_hint_ms = 300000, .now_ms = start };
		struct tsdb_iter *it;
		char err[256];
		assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
		assert_true(tsdb_iter_is_rollup(it));
		assert_int_equal(tsdb_iter_next_series(it), 1);
		struct tsdb_rollup r;
		int k = 0;
		while (tsdb_iter_next_rollup(it, &r) == 1) {
			assert_true(k < nw);
			assert_int_equal(r.t_ms, want[k].t_ms);
			assert_int_equal(r.count, want[k].count);
			assert_true(r.min == want[k].min);
			assert_true(r.max == want[k].max);
			/* The same additions in the same order. */
			assert_true(r.sum == want[k].sum);
			k++;
		}
		assert_int_equal(k, nw);
		tsdb_iter_free(it);
		/* A fine step over recent data reads raw. */
		so.step_hint_ms = 1000;
		so.mint = start;
		assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
		assert_false(tsdb_iter_is_rollup(it));
		tsdb_iter_free(it);
		tsdb_close(db);
		db = open_db(NULL);   /* and again from disk only */
	}
	/* Every bucket but the one holding the newest sample is on disk. */
	struct disk_blocks d;
	read_disk_blocks(&d);
	assert_int_equal(d.total, nw - 1);

	/* Retention: raw goes after 48 h, rollups stay for 30 days. */
	int64_t end = t[N - 1];
	assert_int_equal(tsdb_enforce_retention(db, end + 47LL * 3600 * 1000), 0);
	int64_t tt[10];
	double vv[10];
	assert_int_equal(read_series(db, "x", 0, INT64_MAX, tt, vv, 10), 10);
	assert_int_equal(tsdb_enforce_retention(db, end + 49LL * 3600 * 1000), 0);
	assert_int_equal(read_series(db, "x", 0, INT64_MAX, tt, vv, 10), 0);
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", "x" };
	struct tsdb_select_opts so = { .mint = 0, .maxt = INT64_MAX, .mode = TSDB_READ_AUTO,
				       .now_ms = end + 49LL * 3600 * 1000 };
	struct tsdb_iter *it;
	char err[256];
	/* A range older than raw retention reads rollups without a hint. */
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_true(tsdb_iter_is_rollup(it));
	assert_int_equal(tsdb_iter_next_series(it), 1);
	int k = 0;
	struct tsdb_rollup r;
	while (tsdb_iter_next_rollup(it, &r) == 1)
		k++;
	assert_int_equal(k, nw - 1);
	tsdb_iter_free(it);
	assert_int_equal(tsdb_enforce_retention(db, end + 31LL * 24 * 3600 * 1000), 0);
	so.mode = TSDB_READ_ROLLUP;
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 0);
	tsdb_iter_free(it);
	tsdb_close(db);
}

/* Rollups are packed ROLLBLOCK_MAX buckets a row: 100 minutes written
 * over many flushes fill blocks across flushes, read back per bucket and
 * as a total the same as the samples summed here, a range across a
 * block boundary gives exactly its buckets, retention cuts inside a
 * block, and a damaged block is skipped, counted, the rest served. */
static void test_rollup_blocks(void **state)
{
	(void)state;
	struct tsdb_opts o = { .rollup_retention_ms = 60LL * 60000 };
	struct tsdb *db = open_db(&o);
	uint32_t ref = series2(db, "b", "gpu", "0");
	enum { N = 600, MIN = 100 };   /* one sample every 10 s */
	static int64_t t[N];
	static double v[N];
	int64_t start = 1800000000000LL;   /* a whole minute */
	for (int i = 0; i < N; i++) {
		t[i] = start + i * 10000LL;
		v[i] = sin(i * 0.37) * 50 + 7;   /* doubles: 8 bytes a field */
		assert_int_equal(tsdb_append(db, ref, t[i], v[i]), 0);
		if (i % 17 == 16)
			assert_int_equal(tsdb_flush(db), 0);
	}
	assert_int_equal(tsdb_flush(db), 0);
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", "b" };
	char err[256];
	/* Every minute from the samples. */
	double mn[MIN], mx[MIN], sum[MIN];
	for (int k = 0; k < MIN; k++) {
		mn[k] = INFINITY, mx[k] = -INFINITY, sum[k] = 0;
		for (int i = k * 6; i < k * 6 + 6; i++) {
			mn[k] = fmin(mn[k], v[i]);
			mx[k] = fmax(mx[k], v[i]);
			sum[k] += v[i];
		}
	}
	for (int pass = 0; pass < 3; pass++) {
		/* 0: all; 1: minutes 40 to 55 (a block ends after minute 47);
		 * 2: the total of all. */
		int64_t lo = pass == 1 ? start + 40 * 60000LL : start;
		int64_t hi = pass == 1 ? start + 55 * 60000LL + 59999 : start + MIN * 60000LL;
		struct tsdb_select_opts so = { .mint = lo, .maxt = hi,
					       .mode = pass == 2 ? TSDB_READ_ROLLUP_TOTAL : TSDB_READ_ROLLUP };
		struct tsdb_iter *it;
		assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
		assert_int_equal(tsdb_iter_next_series(it), 1);
		struct tsdb_rollup r;
		int k = pass == 1 ? 40 : 0, got = 0;
		double tmin = INFINITY, tmax = -INFINITY, tsum = 0;
		while (tsdb_iter_next_rollup(it, &r) == 1) {
			if (pass == 2) {
				got++;
				tmin = r.min, tmax = r.max, tsum = r.sum;
				assert_int_equal(r.count, N);
				continue;
			}
			assert_int_equal(r.t_ms, start + k * 60000LL);
			assert_int_equal(r.count, 6);
			assert_true(r.min == mn[k] && r.max == mx[k]);
			assert_true(fabs(r.sum - sum[k]) <= 1e-9 * (fabs(sum[k]) + 1));
			k++, got++;
		}
		tsdb_iter_free(it);
		if (pass == 2) {
			double emin = INFINITY, emax = -INFINITY, esum = 0;
			for (int i = 0; i < MIN; i++)
				emin = fmin(emin, mn[i]), emax = fmax(emax, mx[i]), esum += sum[i];
			assert_int_equal(got, 1);
			assert_true(tmin == emin && tmax == emax && fabs(tsum - esum) <= 1e-9 * fabs(esum));
		} else {
			assert_int_equal(got, pass == 1 ? 16 : MIN);
		}
	}
	tsdb_close(db);

	/* On disk: the 99 closed minutes (the last one is not closed) in
	 * several blocks, each full up to its byte bound (the last aside),
	 * none starting at minute 70. */
	struct disk_blocks d;
	read_disk_blocks(&d);
	assert_int_equal(d.total, MIN - 1);
	assert_true(d.n >= 3);
	assert_true(d.longest <= ROLLBLOCK_MAX_BYTES && d.longest > ROLLBLOCK_MAX_BYTES - ROLLBLOCK_BUCKET_MAX_BYTES);
	for (int i = 0; i < d.n; i++)
		assert_true(d.mint[i] != start + 70 * 60000LL);

	/* Retention of 60 minutes at minute 130: minutes before 70 go, the
	 * block holding 70 is rewritten from it. */
	db = open_db(&o);
	assert_int_equal(tsdb_enforce_retention(db, start + 130 * 60000LL), 0);
	struct tsdb_select_opts so = { .mint = 0, .maxt = INT64_MAX, .mode = TSDB_READ_ROLLUP };
	struct tsdb_iter *it;
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	struct tsdb_rollup r;
	int k = 70;
	while (tsdb_iter_next_rollup(it, &r) == 1 && r.t_ms < start + 99 * 60000LL) {
		assert_int_equal(r.t_ms, start + k * 60000LL);
		assert_true(r.min == mn[k] && r.max == mx[k]);
		k++;
	}
	tsdb_iter_free(it);
	assert_int_equal(k, 99);
	tsdb_close(db);
	read_disk_blocks(&d);
	assert_int_equal(d.mint[0], start + 70 * 60000LL);
	assert_int_equal(d.total, 99 - 70);
	assert_true(d.n >= 2);

	/* A damaged block (one byte of the first one's buckets changed):
	 * skipped, counted once, the buckets of the others served. */
	sqlite3 *s;
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	char sql[256];
	snprintf(sql, sizeof sql, "UPDATE rollup_blocks SET data = substr(data, 1, 10) || "
		 "x'ff' || substr(data, 12) WHERE mint = %lld", (long long)d.mint[0]);
	assert_int_equal(sqlite3_exec(s, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(s);
	db = open_db(&o);
	int seen = 0, early = 0;
	for (int rep = 0; rep < 2; rep++) {   /* read twice: counted once */
		assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
		assert_int_equal(tsdb_iter_next_series(it), 1);
		seen = early = 0;
		while (tsdb_iter_next_rollup(it, &r) == 1) {
			seen += r.t_ms < start + 99 * 60000LL;
			early += r.t_ms < d.mint[1];
		}
		tsdb_iter_free(it);
	}
	/* The first block's buckets are gone, the other blocks' served. */
	assert_int_equal(early, 0);
	assert_int_equal(seen, d.total - d.buckets[0]);
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	assert_int_equal(st.corrupt_chunks_total, 1);
	tsdb_close(db);
}

/* ---- bounds ---- */

static void test_limits(void **state)
{
	(void)state;
	struct tsdb_opts o = { .max_series = 3 };
	struct tsdb *db = open_db(&o);
	char err[256];
	uint32_t ref;
	series2(db, "a", "i", "1");
	series2(db, "a", "i", "2");
	series2(db, "a", "i", "3");
	assert_int_equal(series2(db, "a", "i", "2"), 2);   /* existing: fine */
	struct label l4[2] = { { "i", "4" }, { "__name__", "a" } };
	assert_int_equal(tsdb_series(db, l4, 2, &ref, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "max_series"));

	char longv[TSDB_MAX_LABEL_VALUE + 2];
	memset(longv, 'v', sizeof longv - 1);
	longv[sizeof longv - 1] = 0;
	struct label ll[2] = { { "__name__", "a" }, { "k", longv } };
	assert_int_equal(tsdb_series(db, ll, 2, &ref, err, sizeof err), GPULSE_ELIMIT);
	struct label many[TSDB_MAX_LABELS + 1];
	assert_int_equal(tsdb_series(db, many, TSDB_MAX_LABELS + 1, &ref, err, sizeof err), GPULSE_ELIMIT);
	struct label noname[1] = { { "gpu", "0" } };
	assert_int_equal(tsdb_series(db, noname, 1, &ref, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "__name__"));
	struct label badname[2] = { { "__name__", "a" }, { "9x", "0" } };
	assert_int_equal(tsdb_series(db, badname, 2, &ref, err, sizeof err), GPULSE_EINVAL);
	struct label dup[3] = { { "__name__", "a" }, { "x", "0" }, { "x", "1" } };
	assert_int_equal(tsdb_series(db, dup, 3, &ref, err, sizeof err), GPULSE_EINVAL);
	assert_int_equal(tsdb_append(db, 0, 1, 1), GPULSE_EINVAL);
	assert_int_equal(tsdb_append(db, 99, 1, 1), GPULSE_EINVAL);

	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	assert_int_equal(st.series, 3);
	assert_int_equal(st.series_limit_hits_total, 1);
	assert_int_equal(st.label_limit_hits_total, 2);
	tsdb_close(db);
}

/* ---- records ---- */

static void test_records(void **state)
{
	(void)state;
	struct tsdb *db = open_db(NULL);
	assert_int_equal(tsdb_record_put(db, "alert", "HighTemp{gpu=\"0\"}", 2000, "{\"state\":\"firing\"}"), 0);
	assert_int_equal(tsdb_record_put(db, "alert", "b", 1000, "{}"), 0);
	assert_int_equal(tsdb_record_put(db, "bench", "b", 5, "[1,2]"), 0);
	assert_int_equal(tsdb_record_put(db, "alert", "b", 3000, "{\"v\":2}"), 0);   /* replaces */
	tsdb_close(db);
	db = open_db(NULL);
	struct tsdb_record r;
	assert_int_equal(tsdb_record_get(db, "alert", "b", &r), 0);
	assert_int_equal(r.t_ms, 3000);
	assert_string_equal(r.json, "{\"v\":2}");
	tsdb_record_clear(&r);
	assert_int_equal(tsdb_record_get(db, "alert", "zz", &r), GPULSE_ENOENT);
	struct tsdb_record *list;
	size_t n;
	assert_int_equal(tsdb_record_list(db, "alert", 0, INT64_MAX, 0, &list, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].key, "HighTemp{gpu=\"0\"}");
	assert_string_equal(list[1].key, "b");
	tsdb_records_free(list, n);
	assert_int_equal(tsdb_record_list(db, "alert", 2500, INT64_MAX, 0, &list, &n), 0);
	assert_int_equal(n, 1);
	tsdb_records_free(list, n);
	assert_int_equal(tsdb_record_delete(db, "alert", "b"), 0);
	assert_int_equal(tsdb_record_delete(db, "alert", "b"), GPULSE_ENOENT);
	assert_int_equal(tsdb_record_put(db, "", "k", 0, "{}"), GPULSE_EINVAL);
	tsdb_close(db);
}

/* ---- full disk, simulated with max_page_count ---- */

static void test_full_disk(void **state)
{
	(void)state;
	struct tsdb *db = open_db(NULL);
	uint32_t ref[8];
	char name[16];
	for (int s = 0; s < 8; s++) {
		snprintf(name, sizeof name, "s%d", s);
		ref[s] = series2(db, name, "gpu", "0");
	}
	assert_int_equal(tsdb_flush(db), 0);
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	/* A cap a little above the current size. */
	sqlite3 *sq;
	assert_int_equal(sqlite3_open(path, &sq), SQLITE_OK);
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(sq, "PRAGMA page_count", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	int pages = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(sq);
	assert_int_equal(tsdb_set_max_db_pages(db, pages + 3), 0);

	enum { N = 20000 };
	int64_t t = T0;
	int failures = 0;
	for (int i = 0; i < N; i++) {
		t += 100;
		for (int s = 0; s < 8; s++)
			assert_int_equal(tsdb_append(db, ref[s], t, (double)((i * 31 + s) % 1000) + 0.001 * i), 0);
		if (i % 500 == 499 && tsdb_flush(db) != 0)
			failures++;
	}
	assert_true(failures > 0);
	tsdb_get_stats(db, &st);
	assert_true(st.storage_errors_total >= (uint64_t)failures);
	assert_int_equal(st.samples_dropped_total, 0);
	/* Everything is still served, from disk and memory together. */
	static int64_t tt[N];
	static double vv[N];
	assert_int_equal(read_series(db, "s3", 0, INT64_MAX, tt, vv, N), N);
	for (int i = 0; i < N; i++)
		assert_true(vv[i] == (double)((i * 31 + 3) % 1000) + 0.001 * i);

	/* Space returns: the next flush writes everything. */
	assert_int_equal(tsdb_set_max_db_pages(db, 0), 0);
	assert_int_equal(tsdb_flush(db), 0);
	tsdb_close(db);
	db = open_db(NULL);
	assert_int_equal(read_series(db, "s7", 0, INT64_MAX, tt, vv, N), N);
	tsdb_close(db);

	/* The head's byte bound: with the disk full for good, the oldest
	 * chunks go, counted. */
	struct tsdb_opts o = { .max_head_bytes = 64 * 1024 };
	db = open_db(&o);
	/* SQLite keeps the cap at least at the current size: full now. */
	assert_int_equal(tsdb_set_max_db_pages(db, 1), 0);
	for (int i = 0; i < N; i++) {
		t += 100;
		for (int s = 0; s < 8; s++)
			assert_int_equal(tsdb_append(db, ref[s], t, (double)i), 0);
		if (i % 2000 == 0)
			tsdb_flush(db);
	}
	tsdb_get_stats(db, &st);
	assert_true(st.storage_errors_total > 0);
	assert_true(st.samples_dropped_total > 0);
	assert_true(st.head_bytes <= 64 * 1024 + 8 * 2200);
	assert_int_equal(tsdb_set_max_db_pages(db, 0), 0);
	tsdb_close(db);
}

/* ---- foreign and damaged files ---- */

static void expect_refused(const char *what, int want_rc)
{
	struct tsdb_opts o = { .path = path };
	struct tsdb *db = NULL;
	char err[256] = "";
	int rc = tsdb_open(&db, &o, err, sizeof err);
	assert_int_equal(rc, want_rc);
	assert_null(db);
	if (!strstr(err, what) || !strstr(err, path))
		fail_msg("error \"%s\" should name the file and say \"%s\"", err, what);
}

static void write_file(const char *p, const void *data, size_t len)
{
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void test_foreign(void **state)
{
	(void)state;
	char garbage[8192];
	for (size_t i = 0; i < sizeof garbage; i++)
		garbage[i] = (char)(i * 7 + 3);
	write_file(path, garbage, sizeof garbage);
	expect_refused("not a gpulse database", GPULSE_EPARSE);
	unlink(path);

	sqlite3 *s;
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	assert_int_equal(sqlite3_exec(s, "CREATE TABLE moz_places(id INTEGER PRIMARY KEY, url TEXT)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(s);
	expect_refused("another application", GPULSE_EPARSE);
	unlink(path);

	/* Our own file from a newer gpulse. */
	struct tsdb *db = open_db(NULL);
	tsdb_close(db);
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	assert_int_equal(sqlite3_exec(s, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(s);
	expect_refused("newer", GPULSE_EPARSE);
	unlink(path);

	/* A damaged file: pages past the header overwritten. */
	db = open_db(NULL);
	uint32_t ref = series2(db, "x", NULL, NULL);
	for (int i = 0; i < 50000; i++)
		assert_int_equal(tsdb_append(db, ref, T0 + i * 100, (double)(i % 977) * 1.37), 0);
	tsdb_close(db);
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	assert_int_equal(sqlite3_exec(s, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(s);
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	fseek(f, 4096, SEEK_SET);
	assert_int_equal(fwrite(garbage, 1, sizeof garbage, f), sizeof garbage);
	fclose(f);
	expect_refused("damaged", GPULSE_EPARSE);
	unlink(path);

	/* A truncated store says so (it said "not a gpulse database"), at
	 * every cut: inside the header, at a page boundary, mid-page. */
	db = open_db(NULL);
	ref = series2(db, "x", NULL, NULL);
	for (int i = 0; i < 50000; i++)
		assert_int_equal(tsdb_append(db, ref, T0 + i * 100, (double)(i % 977) * 1.37), 0);
	tsdb_close(db);
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	assert_int_equal(sqlite3_exec(s, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(s);
	static const off_t cuts[] = { 20480, 10000, 4096, 1024, 100, 50 };   /* each shorter */
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		assert_int_equal(truncate(path, cuts[i]), 0);
		expect_refused("truncated", GPULSE_EPARSE);
	}
	unlink(path);

	/* A damaged chunk inside a sound file: skipped and counted, no crash
	 * (test_damaged_chunks has the rest). */
	db = open_db(NULL);
	ref = series2(db, "x", NULL, NULL);
	for (int i = 0; i < 100; i++)
		assert_int_equal(tsdb_append(db, ref, T0 + i * 100, (double)i * 0.5), 0);
	tsdb_close(db);
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	assert_int_equal(sqlite3_exec(s, "UPDATE chunks SET data = substr(data, 1, 20)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(s);
	db = open_db(NULL);
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", "x" };
	struct tsdb_select_opts so = { .mint = 0, .maxt = INT64_MAX };
	struct tsdb_iter *it;
	char err[256];
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 0);
	tsdb_iter_free(it);
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	assert_int_equal(st.corrupt_chunks_total, 1);
	tsdb_close(db);
	unlink(path);

	/* An empty file is a new database. */
	write_file(path, "", 0);
	db = open_db(NULL);
	/* One store per file: a second open is refused while the first lives. */
	expect_refused("in use", GPULSE_EBUSY);
	tsdb_close(db);
	db = open_db(NULL);
	tsdb_close(db);
}

/* ---- damaged chunks and old stores ---- */

/* stderr into `file` between begin and end, to check log lines. */
static int saved_stderr = -1;

static void capture_begin(const char *file)
{
	fflush(stderr);
	saved_stderr = dup(2);
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	dup2(fd, 2);
	close(fd);
}

static char *capture_end(const char *file)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	static char text[65536];
	size_t n = fread(text, 1, sizeof text - 1, f);
	text[n] = 0;
	fclose(f);
	return text;
}

/* A test failed while capturing: give stderr back, with what it held. */
static void capture_abandon(void)
{
	if (saved_stderr < 0)
		return;
	char logf[160];
	snprintf(logf, sizeof logf, "%s/log.txt", dir);
	fputs(capture_end(logf), stderr);
}

static size_t count_str(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

struct chunk_row {
	int64_t id, mint, maxt, n;
};

/* The chunks of series id 1 by time, at most max. */
static size_t chunk_rows(sqlite3 *s, struct chunk_row *r, size_t max)
{
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(s, "SELECT id, mint, maxt, n FROM chunks WHERE series_id = 1 ORDER BY mint",
					    -1, &q, NULL), SQLITE_OK);
	size_t k = 0;
	while (k < max && sqlite3_step(q) == SQLITE_ROW) {
		r[k] = (struct chunk_row){ sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1),
					   sqlite3_column_int64(q, 2), sqlite3_column_int64(q, 3) };
		k++;
	}
	sqlite3_finalize(q);
	return k;
}

/* Flip one bit of chunk `id`'s bytes in place. */
static void flip_bit(sqlite3 *s, int64_t id, size_t bit)
{
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(s, "SELECT data FROM chunks WHERE id = ?1", -1, &q, NULL), SQLITE_OK);
	sqlite3_bind_int64(q, 1, id);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	uint8_t buf[1024];
	size_t len = (size_t)sqlite3_column_bytes(q, 0);
	assert_true(len <= sizeof buf && bit / 8 < len);
	memcpy(buf, sqlite3_column_blob(q, 0), len);
	sqlite3_finalize(q);
	buf[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
	assert_int_equal(sqlite3_prepare_v2(s, "UPDATE chunks SET data = ?2 WHERE id = ?1", -1, &q, NULL), SQLITE_OK);
	sqlite3_bind_int64(q, 1, id);
	sqlite3_bind_blob(q, 2, buf, (int)len, SQLITE_TRANSIENT);
	assert_int_equal(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);
}

static double damaged_value(int i)
{
	return (double)(i % 977) * 1.37;
}

/* One chunk overwritten with random bytes (the issue's `UPDATE chunks SET
 * data = randomblob(...)`) and one bit flipped in another (which changed
 * 23 values silently before chunks had a checksum): both are skipped,
 * every other sample comes back exactly, raw, newest-only and rollup
 * reads all answer, each damaged chunk is counted once however often it
 * is read, and the log names the series once (a rate-limited complaint). */
static void test_damaged_chunks(void **state)
{
	(void)state;
	enum { N = 6000 };
	struct tsdb *db = open_db(NULL);
	uint32_t ref = series2(db, "x", "gpu", "3");
	uint32_t other = series2(db, "y", NULL, NULL);
	for (int i = 0; i < N; i++) {
		assert_int_equal(tsdb_append(db, ref, T0 + i * 100, damaged_value(i)), 0);
		assert_int_equal(tsdb_append(db, other, T0 + i * 100, (double)i), 0);
	}
	tsdb_close(db);

	sqlite3 *s;
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	struct chunk_row c[64];
	size_t nc = chunk_rows(s, c, 64);
	assert_true(nc >= 4);
	char sql[256];
	snprintf(sql, sizeof sql, "UPDATE chunks SET data = randomblob(length(data)) WHERE id = %lld",
		 (long long)c[1].id);
	assert_int_equal(sqlite3_exec(s, sql, NULL, NULL, NULL), SQLITE_OK);
	flip_bit(s, c[2].id, 8 * 40 + 3);   /* deep in the bit stream: a value */
	sqlite3_close(s);

	char logf[160];
	snprintf(logf, sizeof logf, "%s/log.txt", dir);
	capture_begin(logf);
	db = open_db(NULL);
	static int64_t t[N];
	static double v[N];
	for (int pass = 0; pass < 3; pass++) {
		size_t n = read_series(db, "x", INT64_MIN, INT64_MAX, t, v, N);
		assert_int_equal(n, N - c[1].n - c[2].n);
		size_t k = 0;
		for (int i = 0; i < N; i++) {
			int64_t ti = T0 + i * 100;
			if ((ti >= c[1].mint && ti <= c[1].maxt) || (ti >= c[2].mint && ti <= c[2].maxt))
				continue;
			assert_int_equal(t[k], ti);
			assert_true(bits(v[k]) == bits(damaged_value(i)));
			k++;
		}
		assert_int_equal(k, n);
	}
	/* The untouched series is whole. */
	assert_int_equal(read_series(db, "y", INT64_MIN, INT64_MAX, t, v, N), N);

	/* Newest only, in a range that ends in the flipped chunk: the newest
	 * sound sample is chunk 0's last. */
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", "x" };
	struct tsdb_select_opts so = { .mint = c[0].mint, .maxt = c[2].maxt, .mode = TSDB_READ_LATEST };
	struct tsdb_iter *it;
	char err[256];
	int64_t t1;
	double v1;
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	assert_int_equal(tsdb_iter_next_sample(it, &t1, &v1), 1);
	assert_int_equal(t1, c[0].maxt);
	tsdb_iter_free(it);
	/* Rollups over the damaged range answer too. */
	so = (struct tsdb_select_opts){ .mint = T0, .maxt = T0 + N * 100, .mode = TSDB_READ_ROLLUP };
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	tsdb_iter_free(it);

	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	tsdb_close(db);
	char *log = capture_end(logf);
	assert_int_equal(st.corrupt_chunks_total, 2);
	/* Two damaged chunks, read five times: one line (the second is
	 * within the complaint's back-off), naming the file and the series.
	 * test_chunk checks that every flipped bit fails the checksum. */
	if (count_str(log, "damaged chunk skipped") != 1 || !strstr(log, path) ||
	    !strstr(log, "{__name__=\"x\", gpu=\"3\"}"))
		fail_msg("want one line naming %s and the series, got:\n%s", path, log);
}

/* A store of schema 1 with format-1 chunks (no checksum), as gpulse wrote
 * before chunks had one (tests/data/store-schema1.db, see its README):
 * it opens, is migrated to the current schema, reads back every sample
 * and its record, and takes new (checksummed) chunks beside the old. */
static void test_old_format(void **state)
{
	(void)state;
	const char *src = getenv("GPULSE_SOURCE_DIR");
	char fixture[4096], cmd[8300];
	snprintf(fixture, sizeof fixture, "%s/tests/data/store-schema1.db", src ? src : GPULSE_SOURCE_DIR);
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", fixture, path);
	assert_int_equal(system(cmd), 0);

	struct tsdb *db = open_db(NULL);
	static int64_t t[8000];
	static double v[8000];
	struct tsdb_matcher m[2] = { { TSDB_MATCH_EQ, "__name__", "old_metric" }, { TSDB_MATCH_EQ, "gpu", "1" } };
	struct tsdb_select_opts so = { .mint = INT64_MIN, .maxt = INT64_MAX, .mode = TSDB_READ_RAW };
	for (int g = 0; g < 2; g++) {
		m[1].value = g ? "1" : "0";
		struct tsdb_iter *it;
		char err[256];
		assert_int_equal(tsdb_select(db, m, 2, &so, &it, err, sizeof err), 0);
		assert_int_equal(tsdb_iter_next_series(it), 1);
		size_t n = 0;
		while (n < 8000 && tsdb_iter_next_sample(it, &t[n], &v[n]) == 1)
			n++;
		tsdb_iter_free(it);
		assert_int_equal(n, g ? 2000 : 3000);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(t[i], T0 + (int64_t)i * 100);
			assert_true(bits(v[i]) == bits((double)i * 0.25 + g * 1000));
		}
		/* The schema-1 rollup rows, packed into blocks by the migration,
		 * read back as the minutes of the samples (summed here). */
		struct tsdb_select_opts ro = { .mint = T0, .maxt = T0 + (int64_t)n * 100, .mode = TSDB_READ_ROLLUP };
		assert_int_equal(tsdb_select(db, m, 2, &ro, &it, err, sizeof err), 0);
		assert_int_equal(tsdb_iter_next_series(it), 1);
		struct tsdb_rollup r;
		size_t i = 0, buckets = 0;
		while (tsdb_iter_next_rollup(it, &r) == 1) {
			double mn = INFINITY, mx = -INFINITY, sum = 0;
			uint64_t c = 0;
			for (; i < n && t[i] < r.t_ms + 60000; i++, c++) {
				assert_true(t[i] >= r.t_ms);
				mn = fmin(mn, v[i]);
				mx = fmax(mx, v[i]);
				sum += v[i];
			}
			assert_true(r.t_ms % 60000 == 0);
			assert_int_equal(r.count, c);
			assert_true(r.min == mn && r.max == mx);
			assert_true(fabs(r.sum - sum) <= 1e-9 * fabs(sum));
			buckets++;
		}
		tsdb_iter_free(it);
		assert_int_equal(i, n);
		assert_int_equal(buckets, g ? 5 : 6);   /* minutes :40 to :44 or :45 */
	}
	struct tsdb_record r;
	assert_int_equal(tsdb_record_get(db, "alert", "k", &r), 0);
	assert_string_equal(r.json, "{\"old\":true}");
	tsdb_record_clear(&r);
	/* New samples after the old ones, in checksummed chunks. */
	struct label l[2] = { { "__name__", "old_metric" }, { "gpu", "0" } };
	uint32_t ref;
	char err[256];
	assert_int_equal(tsdb_series(db, l, 2, &ref, err, sizeof err), 0);
	for (int i = 3000; i < 5000; i++)
		assert_int_equal(tsdb_append(db, ref, T0 + i * 100LL, i * 0.25), 0);
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	assert_int_equal(st.corrupt_chunks_total, 0);
	tsdb_close(db);

	sqlite3 *s;
	assert_int_equal(sqlite3_open(path, &s), SQLITE_OK);
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_prepare_v2(s, "SELECT (SELECT user_version FROM pragma_user_version), "
					    "count(DISTINCT substr(data, 1, 1)) FROM chunks", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(q, 0), TSDB_SCHEMA_VERSION);
	assert_int_equal(sqlite3_column_int(q, 1), 2);   /* both formats stored */
	sqlite3_finalize(q);
	/* The rollup rows of schema 1 (5 and 4 closed minutes) now in blocks,
	 * their table gone. */
	assert_int_equal(sqlite3_prepare_v2(s, "SELECT count(*) FROM sqlite_master WHERE name = 'rollups'",
					    -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(q, 0), 0);
	sqlite3_finalize(q);
	sqlite3_close(s);
	struct disk_blocks d;
	read_disk_blocks(&d);
	assert_true(d.total >= 9);
	db = open_db(NULL);
	m[1].value = "0";
	struct tsdb_iter *it;
	assert_int_equal(tsdb_select(db, m, 2, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	size_t n = 0;
	while (n < 8000 && tsdb_iter_next_sample(it, &t[n], &v[n]) == 1)
		n++;
	tsdb_iter_free(it);
	assert_int_equal(n, 5000);
	for (size_t i = 0; i < n; i++)
		assert_true(t[i] == T0 + (int64_t)i * 100 && bits(v[i]) == bits((double)i * 0.25));
	tsdb_close(db);
}

/* ---- opening on a full disk ---- */

/* A full disk without root: a VFS over the default one whose writes fail
 * with SQLITE_FULL and whose shared memory (the -shm file that reading a
 * WAL database creates and grows) fails with SQLITE_IOERR_SHMSIZE, as the
 * unix VFS does on ENOSPC. Each file opened through it is the real VFS's
 * own, with its method table swapped for a copy that has the two
 * overrides while `disk_full` is set. */
static bool disk_full;
static sqlite3_vfs full_vfs;
static sqlite3_vfs *real_vfs;
static const sqlite3_io_methods *real_io;
static sqlite3_io_methods full_io;

static int full_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
	return disk_full ? SQLITE_FULL : real_io->xWrite(f, p, n, off);
}

static int full_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
	return disk_full ? SQLITE_IOERR_SHMSIZE : real_io->xShmMap(f, pg, pgsz, extend, pp);
}

static int full_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
	(void)vfs;
	int rc = real_vfs->xOpen(real_vfs, name, f, flags, out);
	if (rc == SQLITE_OK && f->pMethods && f->pMethods->iVersion >= 2) {
		if (!real_io) {
			real_io = f->pMethods;
			full_io = *real_io;
			full_io.xWrite = full_write;
			full_io.xShmMap = full_shm_map;
		}
		if (f->pMethods == real_io)
			f->pMethods = &full_io;
	}
	return rc;
}

static void expect_io_refused(const struct tsdb_opts *extra, const char *what)
{
	struct tsdb_opts o = *extra;
	o.path = path;
	o.clock.now_ms = test_now;
	struct tsdb *db = NULL;
	char err[256] = "";
	int rc = tsdb_open(&db, &o, err, sizeof err);
	if (rc != GPULSE_EIO || db || !strstr(err, what) || !strstr(err, path) ||
	    strstr(err, "not a gpulse") || strstr(err, "damaged"))
		fail_msg("open on a full disk: status %d, \"%s\"; want GPULSE_EIO naming the file "
			 "and saying \"%s\"", rc, err, what);
}

static void test_open_full_disk(void **state)
{
	(void)state;
	/* A new store whose file may not grow past two pages: creating the
	 * schema fails as it does on a full disk. */
	struct tsdb_opts capped = { .max_db_pages = 2 };
	expect_io_refused(&capped, "disk full (SQLITE_FULL)");
	unlink(path);

	/* An existing store (WAL mode, closed cleanly) opened on a full disk:
	 * reading its header needs the -shm file, which cannot grow. */
	struct tsdb *db = open_db(NULL);
	uint32_t ref = series2(db, "x", NULL, NULL);
	for (int i = 0; i < 100; i++)
		assert_int_equal(tsdb_append(db, ref, T0 + i * 100, (double)i), 0);
	tsdb_close(db);
	real_vfs = sqlite3_vfs_find(NULL);
	assert_non_null(real_vfs);
	full_vfs = *real_vfs;
	full_vfs.zName = "gpulse-test-full";
	full_vfs.pNext = NULL;
	full_vfs.xOpen = full_open;
	assert_int_equal(sqlite3_vfs_register(&full_vfs, 1), SQLITE_OK);
	disk_full = true;
	struct tsdb_opts none = { 0 };
	expect_io_refused(&none, "I/O error (SQLite code");

	/* Space again: the same file opens with its samples. */
	disk_full = false;
	db = open_db(NULL);
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", "x" };
	struct tsdb_select_opts so = { .mint = 0, .maxt = INT64_MAX };
	struct tsdb_iter *it;
	char err[256];
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	int n = 0;
	int64_t t;
	double v;
	while (tsdb_iter_next_sample(it, &t, &v) == 1)
		n++;
	assert_int_equal(n, 100);
	tsdb_iter_free(it);
	tsdb_close(db);
	sqlite3_vfs_unregister(&full_vfs);
	assert_ptr_equal(sqlite3_vfs_find(NULL), real_vfs);
}

/* ---- threads: appenders, the flusher and readers together ---- */

struct writer {
	struct tsdb *db;
	uint32_t ref[4];
	int n;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	for (int i = 0; i < w->n; i++)
		for (int s = 0; s < 4; s++)
			if (tsdb_append(w->db, w->ref[s], T0 + i * 10, (double)i) != 0)
				abort();
	return NULL;
}

/* The wall clock stepped back 60 s (an NTP step): samples older than the
 * series' newest keep being stored within the out-of-order window, reads
 * merge them by time (one sample per timestamp), before and after a
 * flush and a reopen; the newest's own time and a time beyond the window
 * are refused and counted; a chunk that would start at the time of a
 * stored chunk drops that duplicate sample rather than replace the row. */
static void check_merged(struct tsdb *db, size_t want)
{
	static int64_t t[400];
	static double v[400];
	size_t n = read_series(db, "step", T0 - 1000, T0 + 400000, t, v, 400);
	assert_int_equal(n, want);
	for (size_t i = 1; i < n; i++)
		assert_true(t[i - 1] < t[i]);
	/* Only the old clock wrote before T0 + 40 s: its values, whole. */
	for (size_t i = 0; i < 40; i++)
		assert_true(t[i] == T0 + (int64_t)i * 1000 && v[i] == (double)i);
	/* Only the corrected clock wrote after T0 + 99 s. */
	assert_true(t[n - 1] == T0 + 139000 && v[n - 1] == 1099);
}

static void test_clock_step_back(void **state)
{
	(void)state;
	struct tsdb *db = open_db(NULL);
	uint32_t ref = series2(db, "step", NULL, NULL);
	for (int i = 0; i < 100; i++)
		assert_int_equal(tsdb_append(db, ref, T0 + i * 1000LL, i), 0);
	assert_int_equal(tsdb_flush(db), 0);
	/* Back 60 s: T0 + 40 s .. T0 + 139 s; T0 + 99 s is the newest's time. */
	int refused = 0;
	for (int i = 0; i < 100; i++) {
		int rc = tsdb_append(db, ref, T0 + 40000 + i * 1000LL, 1000 + i);
		assert_true(rc == 0 || (rc == GPULSE_ERANGE && i == 59));
		refused += rc != 0;
	}
	assert_int_equal(refused, 1);
	/* 40 + 60 old times, 40 new ones after them. */
	check_merged(db, 140);
	assert_int_equal(tsdb_flush(db), 0);
	check_merged(db, 140);
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	assert_int_equal(st.samples_out_of_order_total, 59);
	assert_int_equal(st.samples_dropped_total, 1);
	/* The newest of the lookback is the corrected clock's. */
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", "step" };
	struct tsdb_select_opts so = { .mint = T0, .maxt = T0 + 120000, .mode = TSDB_READ_LATEST };
	struct tsdb_iter *it;
	char err[256];
	int64_t lt;
	double lv;
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 1);
	assert_int_equal(tsdb_iter_next_sample(it, &lt, &lv), 1);
	assert_true(lt == T0 + 120000 && lv == 1080);
	tsdb_iter_free(it);

	/* Beyond the window (1 h): refused, counted. */
	assert_int_equal(tsdb_append(db, ref, T0 + 139000 - 3601000LL, 1), GPULSE_ERANGE);
	/* At T0, where the first chunk on disk starts: the duplicate is
	 * dropped at the flush, and that chunk keeps its samples. */
	assert_int_equal(tsdb_append(db, ref, T0, -1), 0);
	assert_int_equal(tsdb_flush(db), 0);
	tsdb_get_stats(db, &st);
	assert_int_equal(st.samples_dropped_total, 3);
	check_merged(db, 140);
	tsdb_close(db);

	/* Chunks that overlap on disk read merged after a reopen too. */
	db = open_db(NULL);
	check_merged(db, 140);
	tsdb_close(db);
}

static void test_threads(void **state)
{
	(void)state;
	struct tsdb_opts o = { .flush_interval_ms = 5 };
	struct tsdb *db = open_db(&o);
	assert_int_equal(tsdb_start_flusher(db), 0);
	assert_int_equal(tsdb_start_flusher(db), GPULSE_ESTATE);
	struct writer w[2];
	pthread_t th[2];
	char name[16];
	for (int k = 0; k < 2; k++) {
		w[k].db = db;
		w[k].n = 50000;
		for (int s = 0; s < 4; s++) {
			snprintf(name, sizeof name, "w%d_%d", k, s);
			w[k].ref[s] = series2(db, name, NULL, NULL);
		}
		assert_int_equal(pthread_create(&th[k], NULL, writer_main, &w[k]), 0);
	}
	static int64_t t[50000];
	static double v[50000];
	for (int r = 0; r < 20; r++) {
		size_t n = read_series(db, "w1_2", 0, INT64_MAX, t, v, 50000);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(t[i], T0 + (int64_t)i * 10);   /* a prefix, no gap or duplicate */
	}
	for (int k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	tsdb_close(db);
	db = open_db(NULL);
	assert_int_equal(read_series(db, "w0_3", 0, INT64_MAX, t, v, 50000), 50000);
	tsdb_close(db);
}

/* The names TSDB_READ_SPAN lists for [lo, hi], joined by ','. */
static void span_names(struct tsdb *db, int64_t lo, int64_t hi, char *out, size_t cap)
{
	struct tsdb_matcher m = { TSDB_MATCH_RE, "__name__", "span_.*" };
	struct tsdb_select_opts so = { .mint = lo, .maxt = hi, .mode = TSDB_READ_SPAN };
	struct tsdb_iter *it = NULL;
	char err[256];
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	out[0] = '\0';
	int more;
	while ((more = tsdb_iter_next_series(it)) == 1) {
		size_t n;
		const struct label *l = tsdb_iter_labels(it, &n);
		size_t len = strlen(out);
		snprintf(out + len, cap - len, "%s%s", len ? "," : "", l[0].value);
	}
	assert_int_equal(more, 0);
	tsdb_iter_free(it);
}

/* As Prometheus lists series for /api/v1/series: those whose data
 * overlaps the range, a gap around the range included; not one whose
 * last sample is before it or whose first is after it. From the head,
 * then from disk after a flush and a reopen. */
static void test_select_span(void **state)
{
	(void)state;
	struct tsdb *db = open_db(NULL);
	uint32_t gap = series2(db, "span_gap", NULL, NULL);
	uint32_t before = series2(db, "span_before", NULL, NULL);
	uint32_t after = series2(db, "span_after", NULL, NULL);
	uint32_t inside = series2(db, "span_inside", NULL, NULL);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tsdb_append(db, gap, T0 + i * 1000, i), 0);
		assert_int_equal(tsdb_append(db, before, T0 + i * 1000, i), 0);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tsdb_append(db, gap, T0 + 600000 + i * 1000, i), 0);
		assert_int_equal(tsdb_append(db, after, T0 + 600000 + i * 1000, i), 0);
	}
	assert_int_equal(tsdb_append(db, inside, T0 + 300000, 1), 0);
	char got[256];
	for (int pass = 0; pass < 2; pass++) {
		span_names(db, T0 + 200000, T0 + 400000, got, sizeof got);
		assert_string_equal(got, "span_gap,span_inside");
		span_names(db, T0 + 250000, T0 + 260000, got, sizeof got);
		assert_string_equal(got, "span_gap");
		/* The edges are inclusive, as Prometheus's. */
		span_names(db, T0 + 2000, T0 + 2000, got, sizeof got);
		assert_string_equal(got, "span_before,span_gap");
		span_names(db, T0 + 602000, T0 + 700000, got, sizeof got);
		assert_string_equal(got, "span_after,span_gap");
		span_names(db, T0 + 603000, T0 + 700000, got, sizeof got);
		assert_string_equal(got, "");
		span_names(db, T0 - 5000, T0 - 1, got, sizeof got);
		assert_string_equal(got, "");
		assert_int_equal(tsdb_flush(db), 0);
		tsdb_close(db);
		db = open_db(NULL);
	}
	tsdb_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_real_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_matchers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollups, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_full_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clock_step_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_select_span, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
