/* The capacity report against a synthetic store with known data: raw
 * samples six to a minute around known per-minute means, written with the
 * store API, read back through the read-only store source, and every
 * figure checked against values this file computes on its own from the
 * minute means it generated (idle hours, allocated-idle hours, nearest-rank
 * percentiles, the band's shares, crossings, gaps, bottleneck hours, the
 * per-process figures); the same data three days back is read from the
 * 1-minute rollups and gives the same percentiles; a GPU replaced by a new
 * UUID is two GPUs linked to each other; no data, a missing store, a card
 * without GPM and too little history are said plainly. Times are taken
 * relative to now, so the shifted-clock stages see the same figures. */
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

#include "common/clock.h"
#include "report/report.h"
#include "common/status.h"
#include "store/tsdb.h"

#define MIN_MS 60000LL
#define NMIN 180                 /* three hours of minutes */
#define GIB 1073741824.0
#define TOTAL (141.0 * GIB)
#define OLD_MS (3LL * 86400 * 1000) /* the old copy: three days back */

static const double dev[6] = {-0.03, -0.02, -0.01, 0.01, 0.02, 0.03};

struct fx {
	char dir[64];
	char path[128];
	int64_t t0;                  /* first minute of the recent data */
	int64_t old0;                /* first minute of the old copy */
};

/* The generated minute means. */
static double util0(int k)
{
	return k % 6 == 0 ? 0.0 : 0.2 + 0.7 * ((k * 37) % 100) / 100.0;
}
static double sm0(int k) { return util0(k) * 0.8; }
static double tensor0(int k) { return sm0(k) * 0.5; }
static double mem0(int k) { return 10 * GIB + k * 1048576.0; }
static bool gpu1_has(int k) { return k < 90 || k >= 120; }
static double util1(int k) { return 0.9 + 0.001 * (k % 7); }
static bool trainer_holds(int k) { return k < 120; }
static bool idler_holds(int k) { return k % 6 == 0; }
/* gpulsed's verdicts of allocated-but-idle: pod idle-0 holds GPU 0 all
 * along and is idle from minute 30 (its window passed); trainer-0 holds
 * it while it runs and is never idle. */
static double pod_idle0(int k) { return k >= 30 ? 1 : 0; }

static void put_series(struct tsdb *db, const char *name, const char *gpu, const char *uuid,
		       const char *xn, const char *xv, const char *xn2, const char *xv2,
		       int64_t t0, int nmin, double (*mean)(int), bool (*has)(int), bool scaled)
{
	struct label l[8] = {{"__name__", name}, {"gpu", gpu}, {"uuid", uuid},
				  {"model", "NVIDIA H200"}};
	size_t n = 4;
	if (xn)
		l[n++] = (struct label){xn, xv};
	if (xn2)
		l[n++] = (struct label){xn2, xv2};
	uint32_t ref;
	char err[256];
	assert_int_equal(tsdb_series(db, l, n, &ref, err, sizeof err), 0);
	for (int k = 0; k < nmin; k++) {
		if (has && !has(k))
			continue;
		double m = mean(k);
		for (int j = 0; j < 6; j++) {
			double v = scaled ? m * (1 + dev[j]) : m;
			assert_int_equal(tsdb_append(db, ref, t0 + k * MIN_MS + 5000 + j * 10000, v), 0);
		}
	}
}

static double kernel_counter(int k, int j)
{
	return 30.0 * (k < 60 ? k : k - 60) + 30.0 * (j + 1) / 6;
}

static double one(int k) { (void)k; return 1; }
static double zero(int k) { (void)k; return 0; }
static double zero_or_one_idle(int k) { return util0(k) < 0.05 ? 1 : 0; }
static double zero_or_one_busy(int k) { return util0(k) < 0.05 ? 0 : 1; }
static double total(int k) { (void)k; return TOTAL; }
static double trainer_mem(int k) { (void)k; return 20 * GIB; }
static double idler_mem(int k) { (void)k; return 5 * GIB; }
static double util2a(int k) { (void)k; return 0.3; }
static double util2b(int k) { (void)k; return 0.6; }
static bool first_hour(int k) { return k < 60; }
static bool after_first_hour(int k) { return k >= 60; }

static void write_copy(struct tsdb *db, int64_t t0, bool with_gpu2)
{
	put_series(db, "gpulse_gpu_utilization_ratio", "0", "GPU-a", NULL, NULL, NULL, NULL, t0, NMIN,
		   util0, NULL, true);
	put_series(db, "gpulse_gpu_sm_active_ratio", "0", "GPU-a", NULL, NULL, NULL, NULL, t0, NMIN,
		   sm0, NULL, true);
	put_series(db, "gpulse_gpu_tensor_active_ratio", "0", "GPU-a", NULL, NULL, NULL, NULL, t0,
		   NMIN, tensor0, NULL, true);
	put_series(db, "gpulse_gpu_memory_used_bytes", "0", "GPU-a", NULL, NULL, NULL, NULL, t0, NMIN,
		   mem0, NULL, true);
	put_series(db, "gpulse_gpu_memory_total_bytes", "0", "GPU-a", NULL, NULL, NULL, NULL, t0,
		   NMIN, total, NULL, false);
	put_series(db, "gpulse_gpu_bottleneck", "0", "GPU-a", "class", "idle", NULL, NULL, t0, NMIN,
		   zero_or_one_idle, NULL, false);
	put_series(db, "gpulse_gpu_bottleneck", "0", "GPU-a", "class", "compute_bound", NULL, NULL,
		   t0, NMIN, zero_or_one_busy, NULL, false);
	put_series(db, "gpulse_process_gpu_memory_bytes", "0", "GPU-a", "pid", "100", "comm",
		   "trainer", t0, NMIN, trainer_mem, trainer_holds, false);
	put_series(db, "gpulse_process_gpu_memory_bytes", "0", "GPU-a", "pid", "200", "comm", "idler",
		   t0, NMIN, idler_mem, idler_holds, false);
	put_series(db, "gpulse_workload_allocated_idle", "0", "GPU-a", "pod", "idle-0", "namespace",
		   "ml", t0, NMIN, pod_idle0, NULL, false);
	put_series(db, "gpulse_workload_allocated_idle", "0", "GPU-a", "pod", "trainer-0",
		   "namespace", "ml", t0, NMIN, zero, trainer_holds, false);
	/* GPU 1: no GPM, a half-hour gap */
	put_series(db, "gpulse_gpu_utilization_ratio", "1", "GPU-b", NULL, NULL, NULL, NULL, t0, NMIN,
		   util1, gpu1_has, false);
	put_series(db, "gpulse_gpu_memory_total_bytes", "1", "GPU-b", NULL, NULL, NULL, NULL, t0,
		   NMIN, total, gpu1_has, false);
	put_series(db, "gpulse_gpu_up", "1", "GPU-b", NULL, NULL, NULL, NULL, t0, NMIN, one, NULL,
		   false);
	if (with_gpu2) {
		/* the injection library's kernel time of the trainer: no uuid,
		 * 30 s of kernels a minute, the process restarted at minute 60 */
		struct label l[] = {{"__name__", "gpulse_process_kernel_seconds_total"},
					 {"gpu", "0"}, {"pid", "100"}, {"comm", "trainer"},
					 {"kernel", "gemm"}};
		uint32_t ref;
		char err[256];
		assert_int_equal(tsdb_series(db, l, 5, &ref, err, sizeof err), 0);
		for (int k = 0; k < 120; k++)
			for (int j = 0; j < 6; j++)
				assert_int_equal(tsdb_append(db, ref, t0 + k * MIN_MS + 5000 + j * 10000,
							     kernel_counter(k, j)), 0);
		/* GPU 2: the card replaced after the first hour */
		put_series(db, "gpulse_gpu_utilization_ratio", "2", "GPU-c-old", NULL, NULL, NULL, NULL,
			   t0, NMIN, util2a, first_hour, false);
		put_series(db, "gpulse_gpu_utilization_ratio", "2", "GPU-c-new", NULL, NULL, NULL, NULL,
			   t0, NMIN, util2b, after_first_hour, false);
	}
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	snprintf(f->dir, sizeof f->dir, "/tmp/gpulse-report.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof f->path, "%s/store.db", f->dir);
	int64_t now = clock_wall_ms(NULL);
	f->t0 = (now / MIN_MS) * MIN_MS - (NMIN + 5) * MIN_MS;
	f->old0 = f->t0 - OLD_MS;
	struct tsdb *db;
	char err[256];
	struct tsdb_opts o = {.path = f->path};
	assert_int_equal(tsdb_open(&db, &o, err, sizeof err), 0);
	/* one series at a time in time order: the old copy first */
	struct tsdb *d2 = db;
	write_copy(d2, f->old0, false);
	assert_int_equal(tsdb_flush(db), 0);
	tsdb_close(db);
	/* series are appended in time order per series: reopen for the recent copy */
	assert_int_equal(tsdb_open(&db, &o, err, sizeof err), 0);
	write_copy(db, f->t0, true);
	assert_int_equal(tsdb_flush(db), 0);
	tsdb_close(db);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest rank, written again here on purpose (not report_percentile). */
static double nr(double *v, size_t n, double p)
{
	qsort(v, n, sizeof *v, cmpd);
	size_t rank = (size_t)ceil(p / 100 * (double)n);
	return v[(rank ? rank : 1) - 1];
}

/* The store source as it is (slots read straight from the store), or
 * with PromQL range queries only, as the HTTP sources work. */
static bool use_promql;
static int64_t step_ms; /* 0: the default minute */

static struct report *build(const struct fx *f, int64_t start, int64_t end, int64_t min_hist)
{
	struct report_db *d;
	char err[256];
	assert_int_equal(report_db_open(&d, f->path, 0, err, sizeof err), 0);
	struct report_source src;
	report_db_source(d, &src);
	struct report_source_ops promql_only = *src.ops;
	promql_only.slots = NULL;
	if (use_promql)
		src.ops = &promql_only;
	struct report_opts o = {.start_ms = start, .end_ms = end, .now_ms = report_db_now_ms(d),
				.gpu = -1, .min_history_ms = min_hist, .step_ms = step_ms};
	struct report *r = NULL;
	int rc = report_build(&src, &o, &r, err, sizeof err);
	if (rc)
		fail_msg("report_build: %s", err);
	report_db_close(d);
	return r;
}

static const struct report_gpu *gpu_by_uuid(const struct report *r, const char *uuid)
{
	for (size_t i = 0; i < r->ngpus; i++)
		if (strcmp(r->gpus[i].uuid, uuid) == 0)
			return &r->gpus[i];
	fail_msg("no GPU %s", uuid);
	return NULL;
}

static const struct report_proc *proc_by_pid(const struct report *r, const char *pid)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (strcmp(r->procs[i].pid, pid) == 0)
			return &r->procs[i];
	fail_msg("no process %s", pid);
	return NULL;
}

static bool has_note(const struct report *r, const char *needle)
{
	for (size_t i = 0; i < r->nnotes; i++)
		if (strstr(r->notes[i], needle))
			return true;
	return false;
}

static bool has_rec(const struct report *r, const char *kind, const char *needle)
{
	for (size_t i = 0; i < r->nrecs; i++)
		if (strcmp(r->recs[i].kind, kind) == 0 && (!needle || strstr(r->recs[i].text, needle)))
			return true;
	return false;
}

static void check_gpu0(const struct report_gpu *g, bool rollup, bool via_promql)
{
	double v[NMIN];
	size_t idle = 0;
	for (int k = 0; k < NMIN; k++) {
		v[k] = sm0(k);
		idle += util0(k) < 0.05;
	}
	assert_true(g->has_gpm);
	assert_string_equal(g->busy_metric, "sm_active");
	assert_int_equal(g->busy.n, NMIN);
	assert_float_equal(g->busy.p50, nr(v, NMIN, 50), 1e-9);
	assert_float_equal(g->busy.p95, nr(v, NMIN, 95), 1e-9);
	assert_float_equal(g->busy.p99, nr(v, NMIN, 99), 1e-9);
	for (int k = 0; k < NMIN; k++)
		v[k] = tensor0(k);
	assert_float_equal(g->tensor.p95, nr(v, NMIN, 95), 1e-9);
	assert_float_equal(g->covered_h, NMIN / 60.0, 1e-9);
	assert_float_equal(g->idle_h, (double)idle / 60, 1e-9);
	/* every idle minute had a process holding memory (the idler) */
	assert_float_equal(g->alloc_idle_h, (double)idle / 60, 1e-9);
	assert_float_equal(g->mem_total_bytes, TOTAL, 1);
	if (via_promql && rollup) {
		/* PromQL reads a rollup bucket as one sample, its mean */
		assert_float_equal(g->mem_high_bytes, mem0(NMIN - 1), 1);
	} else {
		/* the largest sample, from raw data or the rollups' max */
		assert_float_equal(g->mem_high_bytes, mem0(NMIN - 1) * (1 + dev[5]), 1);
	}
	if (rollup) {
		assert_float_equal(g->rollup_h, NMIN / 60.0, 1e-9);
		assert_float_equal(g->raw_h, 0, 1e-12);
	} else {
		assert_float_equal(g->raw_h, NMIN / 60.0, 1e-9);
	}
	assert_float_equal(g->class_h[DIAG_IDLE], (double)idle / 60, 1e-9);
	assert_float_equal(g->class_h[DIAG_COMPUTE_BOUND], (double)(NMIN - idle) / 60, 1e-9);
	/* crossings of 85%: runs of minutes with sm >= 0.85 */
	unsigned runs = 0;
	double above = 0;
	for (int k = 0; k < NMIN; k++)
		if (sm0(k) >= 0.85) {
			above += 1.0 / 60;
			if (k == 0 || sm0(k - 1) < 0.85)
				runs++;
		}
	assert_int_equal(g->crossings, runs);
	assert_float_equal(g->above_h, above, 1e-9);
}

static void recent_raw(struct fx *f)
{
	struct report *r = build(f, f->t0, f->t0 + NMIN * MIN_MS, 0);
	assert_int_equal(r->ngpus, 4);
	check_gpu0(gpu_by_uuid(r, "GPU-a"), false, use_promql);

	const struct report_gpu *g1 = gpu_by_uuid(r, "GPU-b");
	assert_false(g1->has_gpm);
	assert_string_equal(g1->busy_metric, "utilization");
	assert_float_equal(g1->covered_h, 2.5, 1e-9);
	assert_float_equal(g1->gap_h, 0.5, 1e-9);
	assert_int_equal(g1->crossings, 2); /* the gap ends the first run */
	assert_float_equal(g1->above_h, 2.5, 1e-9);
	assert_float_equal(g1->idle_h, 0, 1e-12);
	assert_true(has_note(r, "no GPM counters"));
	assert_true(has_note(r, "0.5 h without data"));

	/* the replaced card: two GPUs on index 2, linked */
	const struct report_gpu *old = gpu_by_uuid(r, "GPU-c-old"), *nw = gpu_by_uuid(r, "GPU-c-new");
	assert_int_equal(r->gpus[old->replaced_by].uuid[6], 'n');
	assert_string_equal(r->gpus[old->replaced_by].uuid, "GPU-c-new");
	assert_string_equal(r->gpus[nw->replaces].uuid, "GPU-c-old");
	assert_float_equal(old->covered_h, 1, 1e-9);
	assert_float_equal(nw->covered_h, 2, 1e-9);
	assert_true(has_note(r, "was replaced by GPU-c-new"));

	/* the band: the host's per-minute mean busy over the GPUs with data */
	assert_int_equal(r->nhosts, 1);
	assert_int_equal(r->hosts[0].ngpus, 3);
	size_t below = 0, in = 0, above = 0;
	double m[NMIN];
	for (int k = 0; k < NMIN; k++) {
		double s = sm0(k) + (k < 60 ? 0.3 : 0.6);
		int n = 2;
		if (gpu1_has(k)) {
			s += util1(k);
			n++;
		}
		m[k] = s / n;
		below += m[k] < 0.70;
		above += m[k] > 0.80;
		in += m[k] >= 0.70 && m[k] <= 0.80;
	}
	assert_float_equal(r->hosts[0].below, below / (double)NMIN, 1e-9);
	assert_float_equal(r->hosts[0].in, in / (double)NMIN, 1e-9);
	assert_float_equal(r->hosts[0].above, above / (double)NMIN, 1e-9);
	assert_float_equal(r->hosts[0].busy.p95, nr(m, NMIN, 95), 1e-9);

	/* processes */
	const struct report_proc *t = proc_by_pid(r, "100"), *i = proc_by_pid(r, "200");
	assert_string_equal(t->comm, "trainer");
	assert_float_equal(t->mem_high_bytes, 20 * GIB, 1);
	assert_float_equal(t->seen_h, 2, 1e-9);
	size_t idle_trainer = 0, idle_all = 0;
	for (int k = 0; k < NMIN; k++) {
		idle_all += util0(k) < 0.05;
		idle_trainer += util0(k) < 0.05 && trainer_holds(k);
	}
	assert_float_equal(t->idle_held_h, idle_trainer / 60.0, 1e-9);
	assert_float_equal(i->idle_held_h, idle_all / 60.0, 1e-9);
	assert_float_equal(i->mem_total_bytes, TOTAL, 1);
	/* kernel time: the increases of the per-minute largest counter value,
	 * a drop counting as a restart from zero */
	double want = 0, prev = NAN;
	for (int k = 0; k < 120; k++) {
		double mx = kernel_counter(k, 5);
		if (isfinite(prev))
			want += mx >= prev ? mx - prev : mx;
		prev = mx;
	}
	assert_true(t->traced);
	assert_false(i->traced);
	assert_float_equal(t->kernel_s, want, 1e-9);

	/* pods: the time each held the GPU, and of it allocated but idle */
	assert_int_equal(r->npods, 2);
	for (size_t k = 0; k < r->npods; k++) {
		const struct report_pod *p = &r->pods[k];
		assert_string_equal(p->namespace_, "ml");
		assert_string_equal(p->uuid, "GPU-a");
		if (strcmp(p->pod, "idle-0") == 0) {
			assert_float_equal(p->held_h, 3, 1e-9);
			assert_float_equal(p->idle_h, 2.5, 1e-9);
		} else {
			assert_string_equal(p->pod, "trainer-0");
			assert_float_equal(p->held_h, 2, 1e-9);
			assert_float_equal(p->idle_h, 0, 1e-9);
		}
	}

	/* three hours: too little for recommendations by default */
	assert_false(r->enough_history);
	assert_int_equal(r->nrecs, 0);
	assert_true(has_note(r, "too little history"));
	report_free(r);

	/* with an hour's minimum, they come, with the numbers */
	r = build(f, f->t0, f->t0 + NMIN * MIN_MS, 3600 * 1000);
	assert_true(r->enough_history);
	assert_true(has_rec(r, "right-size", "pid 100 (trainer)"));
	assert_true(has_rec(r, "right-size", "20.0 GiB of 141.0 GiB"));
	assert_true(has_rec(r, "allocated-idle", "pid 200 (idler)"));
	assert_true(has_rec(r, "allocated-idle", "pod ml/idle-0 held GPU 0 for 3.0 h, 2.5 h of it (83%)"));
	assert_false(has_rec(r, "allocated-idle", "trainer-0"));
	report_free(r);
}

static void test_recent_raw(void **state)
{
	use_promql = false;
	recent_raw(*state);
	use_promql = true;
	recent_raw(*state);
	use_promql = false;
}

static void old_rollups(struct fx *f)
{
	struct report *r = build(f, f->old0, f->old0 + NMIN * MIN_MS, 0);
	assert_int_equal(r->ngpus, 2);
	check_gpu0(gpu_by_uuid(r, "GPU-a"), true, use_promql);
	assert_non_null(strstr(r->resolution, "rollups"));
	report_free(r);

	/* both: the old copy from rollups, the recent from raw samples */
	r = build(f, f->old0, f->t0 + NMIN * MIN_MS, 0);
	const struct report_gpu *g = gpu_by_uuid(r, "GPU-a");
	assert_float_equal(g->raw_h, NMIN / 60.0, 1e-9);
	assert_float_equal(g->rollup_h, NMIN / 60.0, 1e-9);
	assert_float_equal(g->covered_h, 2 * NMIN / 60.0, 1e-9);
	assert_non_null(strstr(r->resolution, use_promql ? "from raw samples" : "within the raw retention"));
	if (!use_promql) {
		/* closed minutes inside raw retention come from their rollups:
		 * the same figures (checked above against the raw minutes) */
		assert_float_equal(g->read_raw_h, 0, 1e-12);
	}
	report_free(r);

	/* a step under a minute reads the raw samples themselves */
	step_ms = 30000;
	r = build(f, f->t0, f->t0 + NMIN * MIN_MS, 0);
	g = gpu_by_uuid(r, "GPU-a");
	assert_float_equal(g->read_raw_h, NMIN / 60.0, 1e-9);
	assert_float_equal(g->covered_h, NMIN / 60.0, 1e-9);
	double v[2 * NMIN];
	size_t idle = 0;
	for (int k = 0; k < 2 * NMIN; k++) {
		/* half minutes: the first three samples of minute k/2 or the last three */
		double m = sm0(k / 2), sum = 0;
		for (int j = (k % 2) * 3; j < (k % 2) * 3 + 3; j++)
			sum += m * (1 + dev[j]);
		v[k] = sum / 3;
		idle += util0(k / 2) * (1 + dev[(k % 2) * 3 + 1]) < 0.05;
	}
	assert_float_equal(g->busy.p95, nr(v, 2 * NMIN, 95), 1e-9);
	assert_float_equal(g->idle_h, idle / 120.0, 1e-9);
	assert_non_null(strstr(r->resolution, "raw samples"));
	step_ms = 0;
	report_free(r);
}

static void test_old_rollups(void **state)
{
	use_promql = false;
	old_rollups(*state);
	use_promql = true;
	old_rollups(*state);
	use_promql = false;
}

static void test_no_data(void **state)
{
	struct fx *f = *state;
	struct report *r = build(f, f->old0 - 86400000, f->old0 - 3600000, 0);
	assert_int_equal(r->ngpus, 0);
	assert_true(has_note(r, "no data"));
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	assert_int_equal(report_write_text(r, m, true), 0);
	assert_int_equal(report_write_json(r, m), 0);
	assert_int_equal(report_write_html(r, m), 0);
	fclose(m);
	assert_non_null(strstr(buf, "no data"));
	free(buf);
	report_free(r);

	struct report_db *d;
	char err[256], path[160];
	snprintf(path, sizeof path, "%s/missing.db", f->dir);
	assert_int_equal(report_db_open(&d, path, 0, err, sizeof err), GPULSE_ENOENT);
	assert_non_null(strstr(err, "no such store"));
	assert_int_not_equal(access(path, F_OK), 0); /* not created */
}

/* Grids filled by hand: consolidation, add capacity, failover. */
static void test_recommendations(void **state)
{
	(void)state;
	int64_t t0 = 1000LL * 86400 * 1000; /* any day: only hours count */
	struct report_opts o = {.start_ms = t0, .end_ms = t0 + 48 * 3600 * 1000LL, .gpu = -1};
	struct report *r = report_alloc(&o, 4);
	for (size_t k = 0; k < r->nslots; k++) {
		for (int g = 0; g < 4; g++) {
			struct report_gpu *x = &r->gpus[g];
			snprintf(x->uuid, sizeof x->uuid, "GPU-%d", g);
			snprintf(x->model, sizeof x->model, "NVIDIA H200");
			x->s_memtot[k] = TOTAL;
			x->s_mem[k] = 10 * GIB;
		}
		r->gpus[0].s_sm[k] = 0.10 + 0.05 * (k % 3);
		r->gpus[0].s_util[k] = 0.5;
		r->gpus[1].s_sm[k] = 0.12;
		r->gpus[1].s_util[k] = 0.5;
		r->gpus[2].s_sm[k] = 0.99;
		r->gpus[2].s_util[k] = 1;
		r->gpus[3].s_sm[k] = 0.98;
		r->gpus[3].s_util[k] = 1;
	}
	report_compute(r);
	assert_true(r->enough_history);
	/* together p95 is 0.20 + 0.12 = 0.32 */
	assert_true(has_rec(r, "consolidate", "together p95 32%"));
	assert_false(has_rec(r, "add-capacity", NULL)); /* mean (0.15+0.12+0.99+0.98)/4 < band */
	/* failover: sum / 3 */
	assert_float_equal(r->hosts[0].failover_p95, (0.20 + 0.12 + 0.99 + 0.98) / 3, 1e-9);
	assert_true(r->hosts[0].failover_room);
	report_free(r);

	r = report_alloc(&o, 2);
	for (size_t k = 0; k < r->nslots; k++)
		for (int g = 0; g < 2; g++) {
			r->gpus[g].s_sm[k] = 0.95;
			r->gpus[g].s_util[k] = 1;
		}
	report_compute(r);
	assert_string_equal(r->hosts[0].verdict, "above band");
	assert_true(has_rec(r, "add-capacity", "above the 70-80% band 100% of working hours"));
	assert_true(has_rec(r, "failover", "190%"));
	report_free(r);

	/* busy in working hours only: idle time is night time, to share */
	r = report_alloc(&o, 1);
	double idle = 0, off = 0;
	for (size_t k = 0; k < r->nslots; k++) {
		int64_t t = r->start_ms + (int64_t)k * r->o.step_ms;
		int64_t day = t / 86400000, hour = (t / 3600000) % 24;
		int wday = (int)((day + 4) % 7); /* 1970-01-01 was a Thursday */
		bool work = wday >= 1 && wday <= 5 && hour >= 8 && hour < 18;
		r->gpus[0].s_util[k] = work ? 0.9 : 0;
		r->gpus[0].s_sm[k] = work ? 0.8 : 0;
		if (!work) {
			idle += 1.0 / 60;
			off += 1.0 / 60;
		}
	}
	report_compute(r);
	assert_float_equal(r->gpus[0].idle_h, idle, 1e-9);
	assert_float_equal(r->gpus[0].idle_off_h, off, 1e-9);
	assert_true(idle > 24);
	assert_true(has_rec(r, "share", "100% of that outside working hours"));
	assert_false(has_rec(r, "release", NULL));
	report_free(r);
}

static void test_parse(void **state)
{
	(void)state;
	double lo, hi;
	assert_int_equal(report_parse_band("0.70-0.80", &lo, &hi), 0);
	assert_float_equal(lo, 0.70, 1e-12);
	assert_float_equal(hi, 0.80, 1e-12);
	assert_int_equal(report_parse_band("60-90", &lo, &hi), 0);
	assert_float_equal(hi, 0.90, 1e-12);
	assert_int_equal(report_parse_band("0.8-0.7", &lo, &hi), GPULSE_EINVAL);
	assert_int_equal(report_parse_band("abc", &lo, &hi), GPULSE_EINVAL);
	assert_int_equal(report_parse_band("0.5-", &lo, &hi), GPULSE_EINVAL);

	struct report_matrix m = {0};
	char err[256];
	const char *ok = "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
			 "{\"metric\":{\"gpu\":\"0\",\"uuid\":\"U\"},\"values\":[[10.5,\"0.25\"],[11.5,\"NaN\"]]}]}}";
	assert_int_equal(report_parse_matrix(ok, strlen(ok), 10, 100, &m, err, sizeof err), 0);
	assert_int_equal(m.n, 1);
	assert_int_equal(m.series[0].n, 2);
	assert_int_equal(m.series[0].t_ms[0], 10500);
	assert_float_equal(m.series[0].v[0], 0.25, 1e-12);
	assert_true(isnan(m.series[0].v[1]));
	assert_string_equal(report_series_label(&m.series[0], "uuid"), "U");
	report_matrix_free(&m);
	const char *bad = "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
			  "{\"metric\":{},\"values\":[[1,2]]}]}}";
	assert_int_equal(report_parse_matrix(bad, strlen(bad), 10, 100, &m, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "result[0].values[0]"));
	report_matrix_free(&m);
	const char *e = "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error at char 3\"}";
	assert_int_equal(report_parse_matrix(e, strlen(e), 10, 100, &m, err, sizeof err), GPULSE_EIO);
	assert_non_null(strstr(err, "parse error at char 3"));
	assert_int_equal(report_parse_matrix(ok, strlen(ok), 0, 100, &m, err, sizeof err), GPULSE_ELIMIT);
	report_matrix_free(&m);
	assert_int_equal(report_parse_matrix(ok, strlen(ok), 10, 1, &m, err, sizeof err), GPULSE_ELIMIT);
	report_matrix_free(&m);
	assert_int_equal(report_parse_matrix("[", 1, 10, 1, &m, err, sizeof err), GPULSE_EPARSE);
	report_matrix_free(&m);
}

/* A running owner is not disturbed: the read-only open takes no lock,
 * creates nothing and refuses writes. */
static void test_read_only(void **state)
{
	struct fx *f = *state;
	struct tsdb *owner, *reader;
	char err[256];
	struct tsdb_opts o = {.path = f->path};
	assert_int_equal(tsdb_open(&owner, &o, err, sizeof err), 0);
	struct tsdb_opts ro = {.path = f->path, .read_only = true};
	assert_int_equal(tsdb_open(&reader, &ro, err, sizeof err), 0);
	struct label l[] = {{"__name__", "x_new"}};
	uint32_t ref;
	assert_int_equal(tsdb_series(reader, l, 1, &ref, err, sizeof err), GPULSE_ESTATE);
	assert_int_equal(tsdb_flush(reader), GPULSE_ESTATE);
	/* the owner goes on writing and flushing while the reader is open */
	assert_int_equal(tsdb_series(owner, l, 1, &ref, err, sizeof err), 0);
	assert_int_equal(tsdb_append(owner, ref, clock_wall_ms(NULL), 1), 0);
	assert_int_equal(tsdb_flush(owner), 0);
	tsdb_close(reader);
	tsdb_close(owner);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_recent_raw, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_rollups, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_data, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
		cmocka_unit_test(test_recommendations),
		cmocka_unit_test(test_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
