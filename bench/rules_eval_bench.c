/* Rule evaluation cost (docs/PERFORMANCE.md, "Rule evaluation"):
 *
 *   bench_rules_eval RULES.yml [CYCLES [RECORDING.csv]]
 *
 * Fills a store in a temporary directory the way gpulsed does (the bus and
 * the ingest) with 15 minutes of 8 GPUs at 10 Hz, each GPU replaying the
 * recording (default: the bundled H200 recording) from its own offset,
 * flushed to SQLite; then evaluates every group of RULES.yml once per
 * cycle, CYCLES times (default 200), through the daemon's rule engine
 * (alerts, ALERTS series, records and a counting sink included), and in
 * the same run an anchor: one trivial recording rule. Prints ms per cycle
 * (mean, median, p99) of both and their ratio. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/bus.h"
#include "common/clock.h"
#include "rules/engine.h"
#include "store/ingest.h"
#include "record/recording.h"
#include "store/tsdb.h"

#define NGPUS 8
#define HISTORY_S (15 * 60)
#define STEP_MS 100

static size_t notices;

static void count_sink(void *ctx, const struct alert_notice *n, size_t count)
{
	(void)ctx;
	(void)n;
	notices += count;
}

static int64_t now_ms;

static int64_t bench_clock(void *ctx)
{
	(void)ctx;
	return now_ms;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Evaluate every group of e once per cycle at t0 + cycle seconds; ms per
 * cycle into ms[cycles], and each group's total ms into group_ms[] (when
 * not NULL). */
static int run(struct rules_engine *e, int64_t t0, int cycles, double *ms, double *group_ms)
{
	size_t ng = rules_engine_group_count(e);
	for (int c = 0; c < cycles; c++) {
		int64_t t = t0 + (int64_t)c * 1000;
		now_ms = t;
		ms[c] = 0;
		for (size_t g = 0; g < ng; g++) {
			int64_t a = clock_mono_ns();
			rules_engine_eval_group(e, g, t);
			double d = (double)(clock_mono_ns() - a) / 1e6;
			ms[c] += d;
			if (group_ms)
				group_ms[g] += d;
		}
	}
	return 0;
}

static void report(const char *what, double *ms, int n)
{
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += ms[i];
	qsort(ms, (size_t)n, sizeof *ms, dcmp);
	printf("%-34s mean %.4f ms  median %.4f ms  p99 %.4f ms  per cycle (%d cycles)\n", what,
	       sum / n, ms[n / 2], ms[(int)(n * 0.99)], n);
}

static double mean(const double *ms, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += ms[i];
	return s / n;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_rules_eval RULES.yml [CYCLES [RECORDING.csv]]\n");
		return 2;
	}
	int cycles = argc > 2 ? atoi(argv[2]) : 200;
	const char *recpath = argc > 3 ? argv[3] : GPULSE_SOURCE_DATADIR "/recordings/h200-phases-10hz.csv";
	if (cycles < 10)
		cycles = 10;
	char err[1024];
	struct recording *rec = NULL;
	if (recording_load(recpath, &rec, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	char dir[] = "/tmp/gpulse-rbenchXXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char path[256];
	snprintf(path, sizeof path, "%s/store.db", dir);
	struct tsdb *db = NULL;
	struct tsdb_opts o = {.path = path};
	if (tsdb_open(&db, &o, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct bus *bus = NULL;
	struct ingest *ing = NULL;
	if (bus_create(&bus) || ingest_create(&ing, db, bus) || ingest_subscribe(ing)) {
		fprintf(stderr, "cannot set up the bus and the ingest\n");
		return 1;
	}
	int slot[NGPUS];
	for (int i = 0; i < NGPUS; i++) {
		struct gpu_identity id;
		memset(&id, 0, sizeof id);
		id.index = i;
		snprintf(id.uuid, sizeof id.uuid, "GPU-bench-%d", i);
		snprintf(id.name, sizeof id.name, "NVIDIA H200");
		id.pcie_max_gen = 5;
		id.pcie_max_width = 16;
		id.mig_mode = -1;
		if (bus_attach_gpu(bus, &id, &slot[i])) {
			fprintf(stderr, "cannot attach GPU %d\n", i);
			return 1;
		}
	}
	/* 15 minutes ending at a whole second, 10 Hz, every GPU. */
	int64_t end_ms = (clock_wall_ns() / 1000000 / 1000) * 1000;
	int64_t start_ms = end_ms - HISTORY_S * 1000;
	struct gpu_update *u = calloc(1, sizeof *u);
	if (!u)
		return 1;
	size_t steps = (size_t)(HISTORY_S * 1000 / STEP_MS);
	for (size_t k = 0; k <= steps; k++) {
		for (int i = 0; i < NGPUS; i++) {
			const struct rec_row *row = &rec->rows[(k + (size_t)i * 1171) % rec->nrows];
			u->gpu = slot[i];
			u->tier = TIER_FAST;
			u->wall_ns = (start_ms + (int64_t)k * STEP_MS) * 1000000;
			u->mask = rec->columns;
			u->valid = row->valid;
			memcpy(u->v, row->v, sizeof u->v);
			bus_publish(bus, u);
		}
		if (k % 3000 == 0)
			tsdb_flush(db);
	}
	free(u);
	tsdb_flush(db);
	struct tsdb_stats ts;
	tsdb_get_stats(db, &ts);
	printf("store: %d GPUs, %d min at 10 Hz: %" PRIu64 " series, %" PRIu64 " samples\n", NGPUS,
	       HISTORY_S / 60, ts.series, ts.samples_appended_total);

	struct buf errs;
	buf_init(&errs, 1 << 20);
	static const char anchor_text[] =
		"groups:\n  - name: anchor\n    interval: 1s\n    rules:\n"
		"      - record: bench:one\n        expr: vector(1)\n";
	/* A second reference point: one instant selector over the 8 GPUs,
	 * the store's read path alone (5 minutes of lookback at 10 Hz). */
	static const char sel_text[] =
		"groups:\n  - name: selector\n    interval: 1s\n    rules:\n"
		"      - record: bench:power\n        expr: gpulse_gpu_power_watts\n";
	struct rules_file **sf = calloc(1, sizeof *sf);
	struct rules_file **af = calloc(1, sizeof *af);
	struct rules_file **pf = NULL;
	const char *paths[1] = {argv[1]};
	if (!af || !sf || rules_file_parse("anchor.yml", anchor_text, strlen(anchor_text), &af[0], &errs) ||
	    rules_file_parse("selector.yml", sel_text, strlen(sel_text), &sf[0], &errs) ||
	    rules_files_load(paths, 1, &pf, &errs)) {
		fprintf(stderr, "%s", errs.data ? errs.data : "cannot load the rules\n");
		return 1;
	}
	size_t nrules = rules_file_count(pf[0]);
	buf_free(&errs);
	struct rules_engine_config c = {.db = db, .now_ms = bench_clock, .alert_sink = count_sink};
	struct rules_engine *anchor = NULL, *pack = NULL, *sel = NULL;
	if (rules_engine_new(&anchor, &c, af, 1) || rules_engine_new(&pack, &c, pf, 1) ||
	    rules_engine_new(&sel, &c, sf, 1)) {
		fprintf(stderr, "cannot create the engines\n");
		return 1;
	}
	double *ma = calloc((size_t)cycles, sizeof *ma), *mp = calloc((size_t)cycles, sizeof *mp);
	double *msel = calloc((size_t)cycles, sizeof *msel);
	if (!ma || !mp || !msel)
		return 1;
	/* Warm-up (restores, first series creation), then interleaved runs so
	 * both see the same machine state. */
	size_t ng = rules_engine_group_count(pack);
	double *gms = calloc(ng + 1, sizeof *gms);
	if (!gms)
		return 1;
	run(pack, end_ms - 2000, 1, mp, NULL);
	run(anchor, end_ms - 2000, 1, ma, NULL);
	int half = cycles / 2;
	run(anchor, end_ms, half, ma, NULL);
	run(pack, end_ms, half, mp, gms);
	run(sel, end_ms, cycles, msel, NULL);
	run(anchor, end_ms + (int64_t)half * 1000, cycles - half, ma + half, NULL);
	run(pack, end_ms + (int64_t)half * 1000, cycles - half, mp + half, gms);
	/* The engine evaluates a group every group interval: per second of
	 * engine time a group costs its evaluation / its interval. */
	double per_s = 0;
	for (size_t g = 0; g < ng; g++) {
		const struct rules_group *gr = &pf[0]->groups[g];
		int64_t iv = gr->interval_ms > 0 ? gr->interval_ms : 1000; /* gpulsed's default */
		double m = gms[g] / cycles;
		per_s += m * 1000.0 / (double)iv;
		printf("  group %-28s interval %6.0f s  %8.3f ms per evaluation\n", gr->name,
		       (double)iv / 1000.0, m);
	}
	free(gms);
	struct rules_alert_stats as;
	rules_engine_alert_stats(pack, &as);
	printf("rules: %s, %zu rules in %zu groups; alerts firing %" PRIu64 ", pending %" PRIu64
	       ", notices %zu\n", argv[1], nrules, rules_engine_group_count(pack), as.firing, as.pending,
	       notices);
	double mean_a = mean(ma, cycles), mean_p = mean(mp, cycles);
	report("anchor (1 trivial recording rule)", ma, cycles);
	double mean_sel = mean(msel, cycles);
	report("one instant selector, 8 GPUs", msel, cycles);
	report("rule file, all groups", mp, cycles);
	printf("ratio rule file / one selector (means): %.1f\n", mean_p / mean_sel);
	printf("ratio rule file / anchor (means): %.1f\n", mean_p / mean_a);
	printf("amortized at the groups' intervals: %.3f ms of evaluation per second "
	       "(a 1 s engine cycle)\n", per_s);
	printf("budget 1 ms per cycle: all groups at once %s; amortized %s\n",
	       mean_p <= 1.0 ? "met" : "NOT met", per_s <= 1.0 ? "met" : "NOT met");
	if (getenv("BENCH_RULES_JSON")) {
		struct buf jb;
		buf_init(&jb, 64 << 20);
		rules_engine_write_json(pack, NULL, &jb);
		FILE *jf = fopen(getenv("BENCH_RULES_JSON"), "w");
		if (jf) {
			fputs(jb.data ? jb.data : "", jf);
			fclose(jf);
		}
		buf_free(&jb);
	}
	rules_engine_free(anchor);
	rules_engine_free(pack);
	rules_engine_free(sel);
	free(msel);
	free(ma);
	free(mp);
	ingest_destroy(ing);
	bus_destroy(bus);
	tsdb_close(db);
	recording_free(rec);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return 0;
}
