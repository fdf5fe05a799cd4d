/* Store benchmarks (docs/PERFORMANCE.md, "Time-series store"):
 *
 *   bench_tsdb ingest [SAMPLES [SERIES [random]]]
 *     Appends SAMPLES samples round-robin over SERIES series (values of the
 *     real H200 recording, or random doubles with `random`: the codec's
 *     worst case; 10 Hz timestamps) into the head on one thread; prints
 *     samples/s. No flush runs during the timing.
 *   bench_tsdb size CSV DB [FLUSH_EVERY_ROWS]
 *     Stores the recording's columns as series gpulse_gpu_<column>{gpu="0"}
 *     (flushing every FLUSH_EVERY_ROWS rows, default only at the end),
 *     closes, and prints the file size, the chunk payload and bytes per
 *     sample.
 *   bench_tsdb flush [SECONDS [SERIES [FLUSH_MS]]]
 *     The store's steady state: SERIES series (default 826, what gpulsed
 *     keeps for one GPU) take one sample each every 100 ms of a virtual
 *     clock (the recording's values), and tsdb_flush runs every FLUSH_MS
 *     (default 1000) of it (tsdb_flush_periodic, as the flusher), for SECONDS (default 600) of data after a
 *     first minute not timed (the chunks past their first flushes).
 *     Prints the process CPU time (appends, flushes, SQLite, its
 *     WAL checkpoints) per second of data; run it under `perf stat -e
 *     instructions:u` for a count that does not move with the load. */
#include <inttypes.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "store/tsdb.h"

enum { MAXR = 100000, MAXC = 64 };
static int64_t rt[MAXR];
static double rv[MAXC][MAXR];
static char rnames[MAXC][80];
static size_t nrows;
static int ncols;

static int load_csv(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return -1;
	}
	static char line[16384];
	if (!fgets(line, sizeof line, f)) {
		fclose(f);
		return -1;
	}
	line[strcspn(line, "\r\n")] = 0;
	char *save = NULL, *tok = strtok_r(line, ",", &save);
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
	return 0;
}

static struct tsdb *open_store(const char *path)
{
	struct tsdb_opts o = { .path = path, .max_head_bytes = (size_t)4 << 30 };
	struct tsdb *db;
	char err[512];
	if (tsdb_open(&db, &o, err, sizeof err) != 0) {
		fprintf(stderr, "bench_tsdb: %s\n", err);
		exit(1);
	}
	return db;
}

static uint32_t ref_of(struct tsdb *db, const char *name, const char *gpu)
{
	struct label l[2] = { { "__name__", name }, { "gpu", gpu } };
	uint32_t ref;
	char err[256];
	if (tsdb_series(db, l, 2, &ref, err, sizeof err) != 0) {
		fprintf(stderr, "bench_tsdb: %s\n", err);
		exit(1);
	}
	return ref;
}

static int bench_ingest(const char *csv, uint64_t samples, int nseries, int random_values)
{
	if (load_csv(csv) != 0)
		return 1;
	if (random_values) {
		uint64_t x = 0x9e3779b97f4a7c15ull;
		for (int c = 0; c < ncols; c++)
			for (size_t r = 0; r < nrows; r++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				rv[c][r] = (double)(x >> 11) * 0x1p-53 * 1000.0;
			}
	}
	char dir[] = "/tmp/gpulse-bench-tsdbXXXXXX", path[256];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/bench.db", dir);
	struct tsdb *db = open_store(path);
	uint32_t *ref = malloc((size_t)nseries * sizeof *ref);
	char gpu[16];
	for (int s = 0; s < nseries; s++) {
		snprintf(gpu, sizeof gpu, "%d", s / ncols);
		ref[s] = ref_of(db, rnames[s % ncols], gpu);
	}
	uint64_t rounds = samples / (uint64_t)nseries;
	int64_t t0 = clock_mono_ns(), c0 = clock_process_cpu_ns();
	for (uint64_t r = 0; r < rounds; r++) {
		int64_t t = 1800000000000LL + (int64_t)r * 100;
		size_t row = r % nrows;
		for (int s = 0; s < nseries; s++)
			if (tsdb_append(db, ref[s], t, rv[s % ncols][row]) != 0) {
				fprintf(stderr, "bench_tsdb: append failed\n");
				return 1;
			}
	}
	int64_t t1 = clock_mono_ns(), c1 = clock_process_cpu_ns();
	uint64_t n = rounds * (uint64_t)nseries;
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	printf("ingest%s: %" PRIu64 " samples into %d series in %.3f s (cpu %.3f s): %.2f M samples/s, head %.1f MB (%.2f bytes/sample)\n",
	       random_values ? " (random values)" : "", n, nseries, (double)(t1 - t0) / 1e9, (double)(c1 - c0) / 1e9,
	       (double)n / ((double)(t1 - t0) / 1e9) / 1e6, (double)st.head_bytes / 1e6,
	       (double)st.head_bytes / (double)n);
	/* Not timed: leave nothing behind. */
	tsdb_close(db);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}

static int64_t query_int(sqlite3 *s, const char *q)
{
	sqlite3_stmt *st;
	int64_t v = -1;
	if (sqlite3_prepare_v2(s, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int bench_size(const char *csv, const char *path, size_t flush_every)
{
	if (load_csv(csv) != 0)
		return 1;
	/* The size of an empty store: the schema's fixed cost. */
	unlink(path);
	struct tsdb *db = open_store(path);
	tsdb_close(db);
	struct stat st;
	if (stat(path, &st) != 0)
		return 1;
	long long empty = (long long)st.st_size;
	unlink(path);
	db = open_store(path);
	uint32_t ref[MAXC];
	for (int c = 0; c < ncols; c++)
		ref[c] = ref_of(db, rnames[c], "0");
	for (size_t i = 0; i < nrows; i++) {
		for (int c = 0; c < ncols; c++)
			tsdb_append(db, ref[c], rt[i], rv[c][i]);
		if (flush_every && i % flush_every == flush_every - 1)
			tsdb_flush(db);
	}
	tsdb_close(db);   /* flushes; the last connection checkpoints the WAL away */
	if (stat(path, &st) != 0)
		return 1;
	sqlite3 *s;
	if (sqlite3_open(path, &s) != SQLITE_OK)
		return 1;
	int64_t payload = query_int(s, "SELECT sum(length(data)) FROM chunks");
	int64_t nchunks = query_int(s, "SELECT count(*) FROM chunks");
	/* Buckets in the packed blocks (rollblock.h: 6-byte header, 32 a bucket). */
	int64_t nroll = query_int(s, "SELECT coalesce(sum((length(data) - 6) / 32), 0) FROM rollup_blocks");
	int64_t nblocks = query_int(s, "SELECT count(*) FROM rollup_blocks");
	int64_t pages = query_int(s, "PRAGMA page_count");
	int64_t freep = query_int(s, "PRAGMA freelist_count");
	int64_t psize = query_int(s, "PRAGMA page_size");
	sqlite3_close(s);
	double n = (double)nrows * ncols;
	printf("size: %zu rows x %d series = %.0f samples; file %lld bytes (%.3f bytes/sample), "
	       "used pages %lld bytes (%.3f), chunk payload %lld bytes in %lld chunks (%.3f), %lld rollup buckets in %lld blocks, "
	       "empty store %lld bytes, file less empty store %.3f bytes/sample\n",
	       nrows, ncols, n, (long long)st.st_size, (double)st.st_size / n,
	       (long long)((pages - freep) * psize), (double)((pages - freep) * psize) / n,
	       (long long)payload, (long long)nchunks, (double)payload / n, (long long)nroll,
	       (long long)nblocks, empty, (double)(st.st_size - empty) / n);
	return 0;
}

static int bench_flush(const char *csv, int seconds, int nseries, int flush_ms)
{
	if (load_csv(csv) != 0 || nseries <= 0 || flush_ms <= 0 || seconds <= 0)
		return 1;
	char dir[] = "/tmp/gpulse-bench-tsdbXXXXXX", path[256];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/bench.db", dir);
	/* The store's own defaults, as gpulsed opens it. */
	struct tsdb_opts o = { .path = path };
	struct tsdb *db;
	char err[512];
	if (tsdb_open(&db, &o, err, sizeof err) != 0) {
		fprintf(stderr, "bench_tsdb: %s\n", err);
		return 1;
	}
	uint32_t *ref = malloc((size_t)nseries * sizeof *ref);
	char gpu[16];
	for (int s = 0; s < nseries; s++) {
		snprintf(gpu, sizeof gpu, "%d", s / ncols);
		ref[s] = ref_of(db, rnames[s % ncols], gpu);
	}
	const int warm = 60;
	int64_t t_start = 1800000000000LL, c0 = 0, w0 = 0;
	int64_t steps = (int64_t)(warm + seconds) * 10;
	for (int64_t r = 0; r < steps; r++) {
		if (r == (int64_t)warm * 10) {
			c0 = clock_process_cpu_ns();
			w0 = clock_mono_ns();
		}
		int64_t t = t_start + r * 100;
		size_t row = (size_t)r % nrows;
		for (int s = 0; s < nseries; s++)
			if (tsdb_append(db, ref[s], t, rv[s % ncols][row]) != 0) {
				fprintf(stderr, "bench_tsdb: append failed\n");
				return 1;
			}
		if ((r + 1) * 100 % flush_ms == 0 && tsdb_flush_periodic(db) != 0) {
			fprintf(stderr, "bench_tsdb: flush failed\n");
			return 1;
		}
	}
	int64_t c1 = clock_process_cpu_ns(), w1 = clock_mono_ns();
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	printf("flush: %d series at 10 Hz, a flush every %d ms, %d s of data: cpu %.3f ms per second of data "
	       "(%.1f us per flush interval per series; wall %.3f s), %" PRIu64 " chunk writes, file+wal %.1f MB\n",
	       nseries, flush_ms, seconds, (double)(c1 - c0) / 1e6 / seconds,
	       (double)(c1 - c0) / 1e3 / ((double)seconds * 1000 / flush_ms) / nseries,
	       (double)(w1 - w0) / 1e9, st.chunks_flushed_total, (double)st.db_bytes / 1e6);
	tsdb_close(db);
	free(ref);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *csv = getenv("GPULSE_RECORDING");
	char def[4096];
	if (!csv) {
		snprintf(def, sizeof def, "%s/recordings/h200-phases-10hz.csv", GPULSE_SOURCE_DATADIR);
		csv = def;
	}
	if (argc >= 2 && strcmp(argv[1], "ingest") == 0)
		return bench_ingest(csv, argc > 2 ? strtoull(argv[2], NULL, 10) : 20000000,
				    argc > 3 ? atoi(argv[3]) : 1100,
				    argc > 4 && strcmp(argv[4], "random") == 0);
	if (argc >= 2 && strcmp(argv[1], "flush") == 0)
		return bench_flush(csv, argc > 2 ? atoi(argv[2]) : 600, argc > 3 ? atoi(argv[3]) : 826,
				   argc > 4 ? atoi(argv[4]) : 1000);
	if (argc >= 4 && strcmp(argv[1], "size") == 0)
		return bench_size(argv[2], argv[3], argc > 4 ? (size_t)atoi(argv[4]) : 0);
	fprintf(stderr, "usage: bench_tsdb ingest [SAMPLES [SERIES [random]]] | size CSV DB [FLUSH_EVERY_ROWS] | flush [SECONDS [SERIES [FLUSH_MS]]]\n");
	return 2;
}
