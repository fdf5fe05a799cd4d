/* Diagnosis of 24 h of 8 GPUs from the store (issue 6's goal: at most
 * 1 s; docs/PERFORMANCE.md, "Diagnosis from the store").
 *
 *   bench_diag_store [HOURS [GPUS]]     (default 24 h, 8 GPUs)
 *
 * Fills a new store in /tmp the way gpulsed does (diag_history_put of
 * every 5 s live window, ending now), using the classifier's own windows
 * of the bundled real recordings repeated over the span; flushes, closes
 * and reopens the store (so reads go to SQLite, not the head), then times
 * diag_history_read for every GPU over the whole span at three window
 * lengths: 5 s (raw samples), gpulsed's automatic window for the span
 * (rollups), and 1 h. The anchor, in the same run: a bare tsdb_select
 * of the same series reading every raw sample without doing anything
 * with it, the store's floor for this data. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "diagnose/diagnose.h"
#include "diagnose/history.h"
#include "diagnose/peaks.h"
#include "record/recording.h"
#include "common/status.h"
#include "store/tsdb.h"

#define LIVE_W 5.0

static struct diag_window *classify(const char *path, const struct gpu_peaks *pk, size_t *n)
{
	struct recording *rec = NULL;
	char err[512];
	if (recording_load(path, &rec, err, sizeof err) != GPULSE_OK) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	struct diag_input in = {.gpu = 0, .rows = rec->rows, .nrows = rec->nrows,
				.origin_s = floor(rec->rows[0].t_s / LIVE_W) * LIVE_W,
				.window_s = LIVE_W};
	struct diag_window *w = NULL;
	if (diagnose_gpu(&in, pk, &w, n) != GPULSE_OK || *n == 0) {
		fprintf(stderr, "%s: no windows\n", path);
		exit(1);
	}
	recording_free(rec);
	return w;
}

static double time_reads(struct diag_history *h, int gpus, double since, double until,
			 double window_s, const struct gpu_peaks *pk, size_t *windows)
{
	int64_t t0 = clock_mono_ns();
	*windows = 0;
	for (int g = 0; g < gpus; g++) {
		struct diag_window *w = NULL;
		size_t n = 0;
		int rc = diag_history_read(h, g, since, until, window_s, 1000000, pk, &w, &n);
		if (rc) {
			fprintf(stderr, "read GPU %d: %s\n", g, gpulse_strerror(rc));
			exit(1);
		}
		*windows += n;
		free(w);
	}
	return (double)(clock_mono_ns() - t0) / 1e9;
}

static double time_bare(struct tsdb *db, int gpus, double since, double until, uint64_t *samples)
{
	int64_t t0 = clock_mono_ns();
	*samples = 0;
	for (int g = 0; g < gpus; g++) {
		char gs[16];
		snprintf(gs, sizeof gs, "%d", g);
		struct tsdb_matcher m[2] = {
			{TSDB_MATCH_RE, "__name__",
			 "gpulse_gpu_bottleneck|gpulse_gpu_diagnosis_finding|"
			 "gpulse_gpu_diagnosis_confidence_ratio|gpulse_gpu_headroom_ratio|"
			 "gpulse_gpu_diagnosis_bytes_per_second|gpulse_gpu_diagnosis_evidence_missing"},
			{TSDB_MATCH_EQ, "gpu", gs}};
		struct tsdb_select_opts so = {.mint = (int64_t)(since * 1000), .maxt = (int64_t)(until * 1000),
					      .mode = TSDB_READ_RAW};
		struct tsdb_iter *it;
		char err[160];
		if (tsdb_select(db, m, 2, &so, &it, err, sizeof err) != GPULSE_OK) {
			fprintf(stderr, "%s\n", err);
			exit(1);
		}
		int64_t t;
		double v;
		while (tsdb_iter_next_series(it) == 1)
			while (tsdb_iter_next_sample(it, &t, &v) == 1)
				(*samples)++;
		tsdb_iter_free(it);
	}
	return (double)(clock_mono_ns() - t0) / 1e9;
}

int main(int argc, char **argv)
{
	double hours = argc > 1 ? atof(argv[1]) : 24;
	int gpus = argc > 2 ? atoi(argv[2]) : 8;
	if (!(hours > 0) || gpus < 1 || gpus > GPU_MAX) {
		fprintf(stderr, "usage: bench_diag_store [HOURS [GPUS]]\n");
		return 2;
	}
	struct gpu_peaks pk;
	peaks_init(&pk);
	snprintf(pk.model, sizeof pk.model, "NVIDIA H200");
	peaks_derive(&pk);
	size_t na, nb;
	struct diag_window *a = classify(GPULSE_SOURCE_DATADIR "/recordings/h200-phases-10hz.csv", &pk, &na);
	struct diag_window *b = classify(GPULSE_SOURCE_DATADIR "/recordings/h200-mixed-10hz.csv", &pk, &nb);

	char dir[] = "/tmp/gpulse-diagbench-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char path[128];
	snprintf(path, sizeof path, "%s/db", dir);
	struct tsdb_opts o = {.path = path};
	char err[512];
	struct tsdb *db;
	if (tsdb_open(&db, &o, err, sizeof err) != GPULSE_OK) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct diag_history *h;
	if (diag_history_create(&h, db, NULL) != GPULSE_OK)
		return 1;
	double until = floor((double)clock_wall_ns() / 1e9 / LIVE_W) * LIVE_W;
	double since = until - hours * 3600;
	size_t per_gpu = (size_t)(hours * 3600 / LIVE_W);
	int64_t t0 = clock_mono_ns();
	for (int g = 0; g < gpus; g++) {
		struct gpu_identity id = {.index = g};
		snprintf(id.uuid, sizeof id.uuid, "GPU-bench-%04d", g);
		snprintf(id.name, sizeof id.name, "NVIDIA H200");
		for (size_t k = 0; k < per_gpu; k++) {
			/* GPUs run the recordings in different orders and phases. */
			size_t j = k + (size_t)g * 97;
			struct diag_window w = (g % 2 ? b[j % nb] : a[j % na]);
			w.start_s = since + (double)k * LIVE_W;
			w.end_s = w.start_s + LIVE_W;
			diag_history_put(h, &id, &w);
			if (k % 128 == 127)
				diag_history_sync(h);  /* gpulsed puts one a window */
		}
		tsdb_flush(db);
	}
	diag_history_sync(h);
	double fill_s = (double)(clock_mono_ns() - t0) / 1e9;
	struct diag_history_stats st;
	diag_history_get_stats(h, &st);
	diag_history_destroy(h);
	tsdb_close(db);

	if (tsdb_open(&db, &o, err, sizeof err) != GPULSE_OK || diag_history_create(&h, db, NULL)) {
		fprintf(stderr, "reopen: %s\n", err);
		return 1;
	}
	struct tsdb_stats ts;
	tsdb_get_stats(db, &ts);
	printf("store: %d GPUs x %.0f h of 5 s verdicts = %" PRIu64 " windows, %" PRIu64
	       " records (%" PRIu64 " dropped), %.1f MB on disk, filled in %.2f s\n",
	       gpus, hours, st.windows_total, st.records_total, st.records_dropped_total,
	       (double)ts.db_bytes / 1e6, fill_s);

	uint64_t samples;
	double bare = time_bare(db, gpus, since, until, &samples);
	double bare2 = time_bare(db, gpus, since, until, &samples);
	double anchor = fmin(bare, bare2);
	printf("%-40s %9.3f s  (%" PRIu64 " samples, %.1f M samples/s)  1.00\n",
	       "anchor: bare raw read of the series", anchor, samples, (double)samples / anchor / 1e6);
	double auto_w = 120;  /* gpulsed's automatic window for 24 h (720 windows) */
	if (hours != 24)
		auto_w = fmax(LIVE_W, ceil(hours * 3600 / 720 / LIVE_W) * LIVE_W);
	const double windows[] = {LIVE_W, auto_w, 3600};
	for (int i = 0; i < 3; i++) {
		size_t n;
		double first = time_reads(h, gpus, since, until, windows[i], &pk, &n);
		double again = time_reads(h, gpus, since, until, windows[i], &pk, &n);
		char label[64];
		snprintf(label, sizeof label, "diagnosis, %g s windows%s", windows[i],
			 windows[i] >= 60 ? " (rollups)" : " (raw)");
		printf("%-40s %9.3f s  (first %.3f s, %zu windows)  %.2f\n", label, again, first, n,
		       again / anchor);
	}
	diag_history_destroy(h);
	tsdb_close(db);
	free(a);
	free(b);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}
