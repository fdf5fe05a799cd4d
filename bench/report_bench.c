/* The capacity report over a month of store data (issue: 30 days x 8 GPUs
 * in at most 2 s). Generates the store from the bundled recordings, then
 * times report_build + the three renderers against an anchor measured in
 * the same run: reading every stored sample and rollup of the same range
 * straight through tsdb_select (the floor any report from this store
 * pays). Each is timed in wall-clock and in the process's CPU time (best
 * of three of each): on a shared machine the CPU time moves far less with
 * the load than the wall clock does.
 *
 *   bench_report [--days 30] [--gpus 8] [--old-dt 10] [--raw-hz 1]
 *                [--keep FILE.db] [--html FILE] [--text FILE] [RECORDING.csv...]
 *
 * The data: each GPU replays the recordings end to end (offset per GPU),
 * through a load profile by GPU and hour of day: GPUs 0-3 train in working
 * hours and idle at night, 4-5 serve at a fifth of the load, 6 holds
 * memory and never computes, 7 is replaced by a new card (new UUID) half
 * way. Samples older than 48 h are written every --old-dt seconds (what
 * their 1-minute rollups are made of; the raw chunks are then removed by
 * retention, as in a real store), the last 48 h at gpulsed's default
 * rates: utilization and memory at --raw-hz (the fast tier, 10 Hz), SM
 * and tensor activity and per-process memory once a second, the stored
 * diagnosis (gpulse_gpu_bottleneck{class}) every 5 s. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "collect/fields.h"
#include "record/recording.h"
#include "report/report.h"
#include "common/status.h"
#include "store/tsdb.h"

#define MIB 1048576.0
#define GIB 1073741824.0
#define DAY_MS 86400000LL
#define RAW_MS (48LL * 3600 * 1000)

enum s { S_UTIL, S_SM, S_TENSOR, S_MEM, S_MEMTOT, S_IDLE, S_COMPUTE, S_MEMBOUND, S_MIXED, S_PROC,
	 S_COUNT };

static double now_s(void)
{
	return (double)clock_mono_ns() / 1e9;
}

/* CPU time of the process (user + system): what the work itself cost. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t series(struct tsdb *db, const char *name, const char *gpu, const char *uuid,
		       const char *xn, const char *xv, const char *xn2, const char *xv2)
{
	struct label l[7] = {{"__name__", name}, {"gpu", gpu}, {"uuid", uuid},
				  {"model", "NVIDIA H200"}};
	size_t n = 4;
	if (xn)
		l[n++] = (struct label){xn, xv};
	if (xn2)
		l[n++] = (struct label){xn2, xv2};
	uint32_t ref;
	char err[256];
	if (tsdb_series(db, l, n, &ref, err, sizeof err) != 0) {
		fprintf(stderr, "series: %s\n", err);
		exit(1);
	}
	return ref;
}

struct gpu_refs {
	uint32_t ref[S_COUNT];
};

static void make_refs(struct tsdb *db, int g, const char *uuid, struct gpu_refs *r)
{
	char gs[16], pid[24];
	snprintf(gs, sizeof gs, "%d", g);
	snprintf(pid, sizeof pid, "%d", 4100 + g * 7);
	static const char *const comm[8] = {"train.py", "train.py", "train.py", "train.py",
					    "serve",    "serve",    "jupyter",  "train.py"};
	r->ref[S_UTIL] = series(db, "gpulse_gpu_utilization_ratio", gs, uuid, NULL, NULL, NULL, NULL);
	r->ref[S_SM] = series(db, "gpulse_gpu_sm_active_ratio", gs, uuid, NULL, NULL, NULL, NULL);
	r->ref[S_TENSOR] = series(db, "gpulse_gpu_tensor_active_ratio", gs, uuid, NULL, NULL, NULL, NULL);
	r->ref[S_MEM] = series(db, "gpulse_gpu_memory_used_bytes", gs, uuid, NULL, NULL, NULL, NULL);
	r->ref[S_MEMTOT] = series(db, "gpulse_gpu_memory_total_bytes", gs, uuid, NULL, NULL, NULL, NULL);
	r->ref[S_IDLE] = series(db, "gpulse_gpu_bottleneck", gs, uuid, "class", "idle", NULL, NULL);
	r->ref[S_COMPUTE] = series(db, "gpulse_gpu_bottleneck", gs, uuid, "class", "compute_bound", NULL, NULL);
	r->ref[S_MEMBOUND] = series(db, "gpulse_gpu_bottleneck", gs, uuid, "class", "memory_bound", NULL, NULL);
	r->ref[S_MIXED] = series(db, "gpulse_gpu_bottleneck", gs, uuid, "class", "mixed", NULL, NULL);
	r->ref[S_PROC] = series(db, "gpulse_process_gpu_memory_bytes", gs, uuid, "pid", pid, "comm",
				comm[g % 8]);
}

/* The load of GPU g at time t: 1 replays the recording, a fraction scales
 * its activity down, 0 is idle. */
static double load_of(int g, int64_t t_ms)
{
	time_t t = (time_t)(t_ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	bool work = tm.tm_wday >= 1 && tm.tm_wday <= 5 && tm.tm_hour >= 8 && tm.tm_hour < 19;
	switch (g % 8) {
	case 0: case 1: case 2: case 3: case 7: return work ? 1 : (tm.tm_hour % 6 == 0 ? 1 : 0);
	case 4: case 5: return 0.2;
	default: return 0;
	}
}

static void put(struct tsdb *db, uint32_t ref, int64_t t, double v, uint64_t *n)
{
	if (tsdb_append(db, ref, t, v) == 0)
		(*n)++;
}

static int generate(const char *path, int days, int gpus, double old_dt, double raw_hz,
		    struct recording **recs, int nrecs, int64_t end_ms)
{
	struct tsdb *db;
	char err[512];
	struct tsdb_opts o = {.path = path, .max_head_bytes = 1u << 30};
	if (tsdb_open(&db, &o, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	/* the rows of all recordings, end to end */
	size_t nrows = 0;
	for (int i = 0; i < nrecs; i++)
		nrows += recs[i]->nrows;
	const struct rec_row **rows = malloc(nrows * sizeof *rows);
	nrows = 0;
	for (int i = 0; i < nrecs; i++)
		for (size_t k = 0; k < recs[i]->nrows; k++)
			rows[nrows++] = &recs[i]->rows[k];
	struct gpu_refs *refs = calloc((size_t)gpus * 2, sizeof *refs);
	for (int g = 0; g < gpus; g++) {
		char uuid[64];
		snprintf(uuid, sizeof uuid, "GPU-%08x-0000-4000-8000-00000000000%d", 0x5eed0000u + (unsigned)g, g);
		make_refs(db, g, uuid, &refs[g]);
		if (g % 8 == 7) {
			snprintf(uuid, sizeof uuid, "GPU-%08x-0000-4000-8000-0000000000a%d", 0xbeef0000u + (unsigned)g, g);
			make_refs(db, g, uuid, &refs[gpus + g]);
		}
	}
	int64_t start = end_ms - (int64_t)days * DAY_MS, raw_from = end_ms - RAW_MS;
	int64_t replace_at = start + (end_ms - start) / 2;
	uint64_t n = 0;
	int64_t next_flush = start + 3600000;
	uint64_t tick = 0;
	/* In the raw range the series come at gpulsed's default rates: the
	 * fast tier (utilization, memory) every tick, the normal tier (GPM,
	 * processes) every second, the stored diagnosis every 5 s window. */
	uint64_t per_s = raw_hz >= 1 ? (uint64_t)llround(raw_hz) : 1;
	for (int64_t t = start; t < end_ms;) {
		bool raw = t >= raw_from;
		bool normal = !raw || tick % per_s == 0, window = !raw || tick % (5 * per_s) == 0;
		for (int g = 0; g < gpus; g++) {
			const struct gpu_refs *r = (g % 8 == 7 && t >= replace_at) ? &refs[gpus + g] : &refs[g];
			/* 10 Hz rows; a different place in the tile per GPU */
			size_t row = (size_t)(((t / 100) + (int64_t)g * 997) % (int64_t)nrows);
			const struct rec_row *x = rows[row];
			double ld = load_of(g, t);
			double util = (x->valid & FIELD_BIT(F_GPU_UTIL)) ? x->v[F_GPU_UTIL] : 0;
			double sm = (x->valid & FIELD_BIT(F_GPM_SM)) ? x->v[F_GPM_SM] : util * 0.8;
			double tensor = (x->valid & FIELD_BIT(F_GPM_TENSOR)) ? x->v[F_GPM_TENSOR] : 0;
			double dram = (x->valid & FIELD_BIT(F_GPM_DRAM)) ? x->v[F_GPM_DRAM] : 0;
			double mem = (x->valid & FIELD_BIT(F_MEM_USED)) ? x->v[F_MEM_USED] : 615 * MIB;
			double tot = (x->valid & FIELD_BIT(F_MEM_TOTAL)) ? x->v[F_MEM_TOTAL] : 143771 * MIB;
			util = ld >= 1 ? util : util * ld;
			sm *= ld;
			tensor *= ld;
			double held = ld > 0 ? mem - 615 * MIB : 0;
			if (g % 8 == 6)
				held = 30 * GIB; /* a notebook holding memory, never computing */
			if (g % 8 >= 4 && g % 8 <= 5)
				held = 18 * GIB;
			mem = 615 * MIB + (held > 0 ? held : 0);
			put(db, r->ref[S_UTIL], t, util, &n);
			put(db, r->ref[S_MEM], t, mem, &n);
			put(db, r->ref[S_MEMTOT], t, tot, &n);
			if (normal) {
				put(db, r->ref[S_SM], t, sm, &n);
				put(db, r->ref[S_TENSOR], t, tensor, &n);
				if (held > 0)
					put(db, r->ref[S_PROC], t, held, &n);
			}
			int cls = util < 0.05 ? S_IDLE : dram > 0.5 ? S_MEMBOUND
					  : sm > 0.5 ? S_COMPUTE : S_MIXED;
			for (int c = S_IDLE; window && c <= S_MIXED; c++)
				put(db, r->ref[c], t, c == cls, &n);
		}
		t += t < raw_from ? (int64_t)(old_dt * 1000) : (int64_t)(1000 / raw_hz);
		tick++;
		if (t >= next_flush) {
			if (tsdb_flush(db) != 0) {
				fprintf(stderr, "flush failed\n");
				return 1;
			}
			next_flush += 3600000;
		}
	}
	tsdb_flush(db);
	tsdb_enforce_retention(db, end_ms);
	struct tsdb_stats st;
	tsdb_get_stats(db, &st);
	fprintf(stderr, "generated %llu samples, %llu series, %.1f MB\n", (unsigned long long)n,
		(unsigned long long)st.series, st.db_bytes / 1e6);
	tsdb_close(db);
	free(rows);
	free(refs);
	return 0;
}

/* The anchor: every sample and rollup of the range read straight. */
static double anchor(const char *path, int64_t start, int64_t end, uint64_t *count, double *cpu)
{
	struct tsdb *db;
	char err[512];
	struct tsdb_opts o = {.path = path, .read_only = true};
	if (tsdb_open(&db, &o, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	double t0 = now_s(), c0 = cpu_s();
	*count = 0;
	for (int mode = 0; mode < 2; mode++) {
		struct tsdb_matcher m = {TSDB_MATCH_RE, "__name__", "gpulse_(gpu|process)_.*"};
		struct tsdb_select_opts so = {.mint = mode ? end - RAW_MS : start,
					      .maxt = mode ? end : end - RAW_MS,
					      .mode = mode ? TSDB_READ_RAW : TSDB_READ_ROLLUP};
		struct tsdb_iter *it;
		if (tsdb_select(db, &m, 1, &so, &it, err, sizeof err) != 0) {
			fprintf(stderr, "%s\n", err);
			exit(1);
		}
		while (tsdb_iter_next_series(it) == 1) {
			int64_t t;
			double v;
			struct tsdb_rollup ru;
			if (mode)
				while (tsdb_iter_next_sample(it, &t, &v) == 1)
					(*count)++;
			else
				while (tsdb_iter_next_rollup(it, &ru) == 1)
					(*count)++;
		}
		tsdb_iter_free(it);
	}
	double dt = now_s() - t0;
	*cpu = cpu_s() - c0;
	tsdb_close(db);
	return dt;
}

int main(int argc, char **argv)
{
	int days = 30, gpus = 8;
	double old_dt = 10, raw_hz = 10;
	const char *keep = NULL, *html = NULL, *text = NULL;
	const char *recs_path[8];
	int nrecs = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--days") && i + 1 < argc) days = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gpus") && i + 1 < argc) gpus = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--old-dt") && i + 1 < argc) old_dt = atof(argv[++i]);
		else if (!strcmp(argv[i], "--raw-hz") && i + 1 < argc) raw_hz = atof(argv[++i]);
		else if (!strcmp(argv[i], "--keep") && i + 1 < argc) keep = argv[++i];
		else if (!strcmp(argv[i], "--html") && i + 1 < argc) html = argv[++i];
		else if (!strcmp(argv[i], "--text") && i + 1 < argc) text = argv[++i];
		else if (argv[i][0] != '-' && nrecs < 8) recs_path[nrecs++] = argv[i];
		else {
			fprintf(stderr, "usage: %s [--days N] [--gpus N] [--old-dt S] [--raw-hz HZ] [--keep DB] [--html F] [--text F] [REC.csv...]\n", argv[0]);
			return 2;
		}
	}
	if (days < 1 || gpus < 1 || gpus > 64 || !(old_dt >= 1) || !(raw_hz > 0 && raw_hz <= 10)) {
		fprintf(stderr, "bad sizes\n");
		return 2;
	}
	if (nrecs == 0) {
		recs_path[nrecs++] = GPULSE_SOURCE_DATADIR "/recordings/h200-phases-10hz.csv";
		recs_path[nrecs++] = GPULSE_SOURCE_DATADIR "/recordings/h200-mixed-10hz.csv";
	}
	struct recording *recs[8];
	char err[512];
	for (int i = 0; i < nrecs; i++)
		if (recording_load(recs_path[i], &recs[i], err, sizeof err) != 0) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
	char dir[] = "/tmp/gpulse-report-bench.XXXXXX", path[256];
	if (keep) {
		snprintf(path, sizeof path, "%s", keep);
	} else {
		if (!mkdtemp(dir))
			return 1;
		snprintf(path, sizeof path, "%s/store.db", dir);
	}
	int64_t end = (clock_wall_ms(NULL) / 60000) * 60000;
	if (access(path, F_OK) != 0) {
		double g0 = now_s();
		if (generate(path, days, gpus, old_dt, raw_hz, recs, nrecs, end) != 0)
			return 1;
		fprintf(stderr, "generation took %.1f s\n", now_s() - g0);
	}
	int64_t start = end - (int64_t)days * DAY_MS;
	uint64_t count = 0;
	double best_anchor = 1e9, best_report = 1e9, cpu_anchor = 1e9, cpu_report = 1e9;
	for (int rep = 0; rep < 3; rep++) {
		double ac;
		double a = anchor(path, start, end, &count, &ac);
		if (a < best_anchor)
			best_anchor = a;
		if (ac < cpu_anchor)
			cpu_anchor = ac;
		double t0 = now_s(), c0 = cpu_s();
		struct report_db *d;
		if (report_db_open(&d, path, 0, err, sizeof err) != 0) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		struct report_source src;
		report_db_source(d, &src);
		struct report_opts o = {.start_ms = start, .end_ms = end, .now_ms = end, .gpu = -1};
		struct report *r;
		if (report_build(&src, &o, &r, err, sizeof err) != 0) {
			fprintf(stderr, "report: %s\n", err);
			return 1;
		}
		FILE *fh = fopen(html && rep == 0 ? html : "/dev/null", "w");
		FILE *ft = fopen(text && rep == 0 ? text : "/dev/null", "w");
		FILE *fj = fopen("/dev/null", "w");
		report_write_html(r, fh);
		report_write_text(r, ft, true);
		report_write_json(r, fj);
		fclose(fh);
		fclose(ft);
		fclose(fj);
		double dt = now_s() - t0, dc = cpu_s() - c0;
		if (dt < best_report)
			best_report = dt;
		if (dc < cpu_report)
			cpu_report = dc;
		if (rep == 0)
			fprintf(stderr, "report: %zu GPUs, %zu slots, %zu recommendations\n", r->ngpus,
				r->nslots, r->nrecs);
		report_free(r);
		report_db_close(d);
	}
	printf("days %d gpus %d: anchor (read %llu samples and rollups) %.3f s; report (build + text + json + html) %.3f s; ratio %.2f; cpu: anchor %.3f s, report %.3f s, ratio %.2f\n",
	       days, gpus, (unsigned long long)count, best_anchor, best_report,
	       best_report / best_anchor, cpu_anchor, cpu_report, cpu_report / cpu_anchor);
	for (int i = 0; i < nrecs; i++)
		recording_free(recs[i]);
	if (!keep) {
		char cmd[300];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return 0;
}
