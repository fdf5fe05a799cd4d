/* Helper of tests/integration/test_tsdb_crash.sh and test_tsdb_fulldisk.sh.
 *
 *   tsdb_crash_helper write DB LOG FLUSH_MS [PACE_MS]
 *     Appends to 8 series without end (about 400,000 samples/s; with
 *     PACE_MS, a sample to each every PACE_MS: few enough between flushes
 *     for the store's head log, tsdb.h, to hold them), continuing
 *     after whatever DB holds, with the store's flusher running; every
 *     20 ms writes "INDEX MONO_MS FLUSHES" to LOG (write(2): a SIGKILL
 *     loses none), FLUSHES the flushes completed so far.
 *   tsdb_crash_helper check DB LOG FLUSH_MS
 *     PRAGMA integrity_check is ok; every series is an exact prefix of what
 *     was written (no gap, no duplicate, every value right); and nothing
 *     appended before a flush that completed began is missing: a line
 *     logged when k flushes had completed is covered by flush k + 2 (k + 1
 *     may have begun before it), so every line whose k + 2 is at most the
 *     last line's count must be on disk. No clock is involved: the check
 *     holds however slowly the machine runs the flusher.
 *   tsdb_crash_helper fulldisk DB FILLER
 *     Appends incompressible samples and flushes until a flush fails (the
 *     filesystem is full), checks that everything is still served from
 *     memory and counted, deletes FILLER, checks that the next flush writes
 *     it all and that it reads back after reopening. */
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "store/tsdb.h"

#define NSERIES 8
#define BASE_T 1800000000000LL
#define STEP_MS 10

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tsdb_crash_helper: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static double value_of(int64_t i, int s)
{
	return (double)i * 1.5 + s;
}

/* The store's clock sits at the samples' own time, so retention never
 * meets them, whatever today's date. */
static int64_t store_now(void *ctx)
{
	(void)ctx;
	return BASE_T;
}

static struct tsdb *open_store(const char *path, int64_t flush_ms)
{
	struct tsdb_opts o = { .path = path, .flush_interval_ms = flush_ms,
			       .clock = { .now_ms = store_now } };
	struct tsdb *db;
	char err[512];
	if (tsdb_open(&db, &o, err, sizeof err) != 0)
		die("%s", err);
	return db;
}

static uint32_t series_ref(struct tsdb *db, int s)
{
	char name[32], err[256];
	snprintf(name, sizeof name, "crash_s%d", s);
	struct label l[2] = { { "__name__", name }, { "gpu", "0" } };
	uint32_t ref;
	if (tsdb_series(db, l, 2, &ref, err, sizeof err) != 0)
		die("%s", err);
	return ref;
}

/* Samples of series s; checks they are the exact prefix. Returns the count. */
static int64_t verify_series(struct tsdb *db, int s)
{
	char name[32], err[256];
	snprintf(name, sizeof name, "crash_s%d", s);
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", name };
	struct tsdb_select_opts so = { .mint = INT64_MIN, .maxt = INT64_MAX };
	struct tsdb_iter *it;
	if (tsdb_select(db, &m, 1, &so, &it, err, sizeof err) != 0)
		die("%s", err);
	int64_t n = 0, t;
	double v;
	int rc = tsdb_iter_next_series(it);
	if (rc < 0)
		die("reading %s failed (%d)", name, -rc);
	if (rc == 1)
		while (tsdb_iter_next_sample(it, &t, &v) == 1) {
			if (t != BASE_T + n * STEP_MS)
				die("%s: gap or duplicate at sample %lld", name, (long long)n);
			if (v != value_of(n, s))
				die("%s: wrong value at sample %lld", name, (long long)n);
			n++;
		}
	tsdb_iter_free(it);
	return n;
}

static int do_write(const char *path, const char *log, int64_t flush_ms, int64_t pace_ms)
{
	struct tsdb *db = open_store(path, flush_ms);
	uint32_t ref[NSERIES];
	int64_t next[NSERIES], from = INT64_MAX;
	for (int s = 0; s < NSERIES; s++) {
		ref[s] = series_ref(db, s);
		next[s] = verify_series(db, s);
		if (next[s] < from)
			from = next[s];
	}
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0)
		die("cannot open %s", log);
	if (tsdb_start_flusher(db) != 0)
		die("no flusher");
	/* Only this run's lines count for the check after the next kill. */
	char start[64];
	int slen = snprintf(start, sizeof start, "start %lld\n", (long long)(clock_mono_ns() / NS_PER_MS));
	if (write(fd, start, (size_t)slen) != slen)
		die("log write failed");
	int64_t last_log = 0;
	for (int64_t i = from; i < INT64_MAX; i++) {
		for (int s = 0; s < NSERIES; s++)
			if (i >= next[s] && tsdb_append(db, ref[s], BASE_T + i * STEP_MS, value_of(i, s)) != 0)
				die("append failed at %lld", (long long)i);
		if (pace_ms > 0 || i % 50 == 49) {
			struct timespec ts = { pace_ms / 1000, pace_ms > 0 ? pace_ms % 1000 * 1000000 : 1000000 };
			nanosleep(&ts, NULL);
			int64_t now = clock_mono_ns() / NS_PER_MS;
			if (now - last_log >= 20) {
				char line[64];
				struct tsdb_stats st;
				tsdb_get_stats(db, &st);
				int len = snprintf(line, sizeof line, "%lld %lld %llu\n", (long long)i, (long long)now,
						   (unsigned long long)(st.flushes_total - st.storage_errors_total));
				if (write(fd, line, (size_t)len) != len)
					die("log write failed");
				last_log = now;
			}
		}
	}
	return 0;
}

static int do_check(const char *path, const char *log, int64_t flush_ms)
{
	sqlite3 *sq;
	sqlite3_stmt *st;
	if (sqlite3_open_v2(path, &sq, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(sq, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		die("%s: cannot run integrity_check", path);
	const char *res = (const char *)sqlite3_column_text(st, 0);
	if (!res || strcmp(res, "ok") != 0)
		die("integrity_check: %s", res ? res : "?");
	sqlite3_finalize(st);
	/* The head log rows the kill left, for the open to replay. */
	long long log_rows = -1;
	if (sqlite3_prepare_v2(sq, "SELECT count(*) FROM head_log", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		log_rows = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(sq);

	struct tsdb *db = open_store(path, flush_ms);
	int64_t have = INT64_MAX;
	for (int s = 0; s < NSERIES; s++) {
		int64_t n = verify_series(db, s);
		if (n < have)
			have = n;
	}
	tsdb_close(db);

	/* The last line stands for the moment of the kill (within 20 ms). */
	FILE *f = fopen(log, "r");
	if (!f)
		die("cannot read %s", log);
	static int64_t idx[1 << 16];
	static unsigned long long flushed[1 << 16];
	size_t nl = 0;
	long long a, b;
	unsigned long long k;
	char line[128];
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "start %lld", &a) == 1)
			nl = 0;   /* a new run: the lines before it are checked already */
		else if (nl < (1u << 16) && sscanf(line, "%lld %lld %llu", &a, &b, &k) == 3) {
			idx[nl] = a;
			flushed[nl] = k;
			nl++;
		}
	}
	fclose(f);
	int64_t must = -1;
	for (size_t i = nl; i-- > 0;)
		if (flushed[i] + 2 <= flushed[nl - 1]) {
			must = idx[i];
			break;
		}
	printf("samples per series on disk: %lld; appended by the kill: %lld; required: %lld; "
	       "head log rows replayed: %lld\n",
	       (long long)have, nl ? (long long)idx[nl - 1] + 1 : 0LL, (long long)must + 1, log_rows);
	if (have < must + 1)
		die("lost samples a completed flush held: %lld missing",
		    (long long)(must + 1 - have));
	return 0;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static double random_value(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0 * 1000.0;
}

static int do_fulldisk(const char *path, const char *filler)
{
	struct tsdb *db = open_store(path, 1000);
	uint32_t ref[NSERIES];
	for (int s = 0; s < NSERIES; s++)
		ref[s] = series_ref(db, s);
	struct tsdb_stats st;
	int64_t i = 0;
	int failed_flushes = 0;
	/* Fill until flushes fail, then keep sampling a while. */
	for (; i < 4000000 && failed_flushes < 5; i++) {
		for (int s = 0; s < NSERIES; s++)
			if (tsdb_append(db, ref[s], BASE_T + i * STEP_MS, random_value()) != 0)
				die("append failed at %lld", (long long)i);
		if (i % 1000 == 999 && tsdb_flush(db) != 0)
			failed_flushes++;
	}
	tsdb_get_stats(db, &st);
	printf("full: %lld samples appended, %llu storage errors, %llu dropped, head %llu bytes, db %llu bytes\n",
	       (long long)i * NSERIES, (unsigned long long)st.storage_errors_total,
	       (unsigned long long)st.samples_dropped_total, (unsigned long long)st.head_bytes,
	       (unsigned long long)st.db_bytes);
	if (failed_flushes == 0 || st.storage_errors_total == 0)
		die("the disk never filled (%s)", filler);
	if (st.samples_dropped_total != 0)
		die("samples dropped while the head had room");
	/* Served from memory. */
	char err[256];
	struct tsdb_matcher m = { TSDB_MATCH_EQ, "__name__", "crash_s5" };
	struct tsdb_select_opts so = { .mint = INT64_MIN, .maxt = INT64_MAX };
	struct tsdb_iter *it;
	int64_t n = 0, t;
	double v;
	if (tsdb_select(db, &m, 1, &so, &it, err, sizeof err) != 0 || tsdb_iter_next_series(it) != 1)
		die("select failed while full");
	while (tsdb_iter_next_sample(it, &t, &v) == 1)
		n++;
	tsdb_iter_free(it);
	if (n != i)
		die("served %lld samples, not all", (long long)n);
	/* Space returns. */
	if (unlink(filler) != 0)
		die("cannot remove %s", filler);
	if (tsdb_flush(db) != 0)
		die("flush still failing after space returned");
	tsdb_close(db);
	db = open_store(path, 1000);
	if (tsdb_select(db, &m, 1, &so, &it, err, sizeof err) != 0 || tsdb_iter_next_series(it) != 1)
		die("select after reopen failed");
	n = 0;
	while (tsdb_iter_next_sample(it, &t, &v) == 1)
		n++;
	tsdb_iter_free(it);
	tsdb_close(db);
	if (n != i)
		die("after reopen %lld samples, not all", (long long)n);
	printf("resumed: all %lld samples of each series on disk\n", (long long)n);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "write") == 0)
		return do_write(argv[2], argv[3], atoll(argv[4]), argc == 6 ? atoll(argv[5]) : 0);
	if (argc == 5 && strcmp(argv[1], "check") == 0)
		return do_check(argv[2], argv[3], atoll(argv[4]));
	if (argc == 4 && strcmp(argv[1], "fulldisk") == 0)
		return do_fulldisk(argv[2], argv[3]);
	fprintf(stderr, "usage: tsdb_crash_helper write DB LOG FLUSH_MS | check DB LOG FLUSH_MS | fulldisk DB FILLER\n");
	return 2;
}
