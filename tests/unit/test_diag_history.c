/* Diagnosis history in the store: the windows the classifier judges on a
 * real recording, kept through diag_history_put, read back with the same
 * window give the same class, findings and headroom; longer windows give
 * the class most of their windows had; ranges past the raw retention are
 * answered from the rollups with the same majority; records hold the
 * whole window at every class change and come back oldest first; a new
 * card in a slot gets its own series; old records are pruned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "diagnose/diagnose.h"
#include "diagnose/history.h"
#include "diagnose/peaks.h"
#include "record/recording.h"
#include "collect/sample.h"
#include "common/status.h"
#include "store/tsdb.h"

#define LIVE_W 5.0
#define COPIES 12

struct fixture {
	char dir[64];
	char path[128];
	struct tsdb *db;
	struct diag_history *h;
	struct diag_window *w;  /* the classifier's windows of GPU 0 */
	size_t nw;
	struct gpu_peaks pk;
	struct gpu_identity id;
	/* The store's clock: `age_ms` (default a minute) after the newest
	 * window, so the recording's own dates meet retention and rollup
	 * rules as if it had just been recorded, whatever today's date. */
	int64_t age_ms;
	int64_t now_ms;
};

static int64_t fixture_now(void *ctx)
{
	return ((const struct fixture *)ctx)->now_ms;
}

static const char *data_dir(void)
{
	const char *dir = getenv("GPULSE_TEST_DATA");
	return dir ? dir : GPULSE_SOURCE_DATADIR;
}

static void open_store(struct fixture *f, int64_t raw_retention_ms)
{
	struct tsdb_opts o = {.path = f->path, .raw_retention_ms = raw_retention_ms,
			      .clock = {.now_ms = fixture_now, .ctx = f}};
	char err[256];
	if (tsdb_open(&f->db, &o, err, sizeof err) != GPULSE_OK)
		fail_msg("%s", err);
	assert_int_equal(diag_history_create(&f->h, f->db, NULL), GPULSE_OK);
}

/* Classify the bundled recording's GPU 0 and keep every window. */
/* stretch: each window of the recording held that many windows in a row,
 * as a slower workload would. */
static void fill_stretched(struct fixture *f, int64_t raw_retention_ms, size_t stretch)
{
	snprintf(f->dir, sizeof f->dir, "/tmp/gpulse-dhist-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof f->path, "%s/db", f->dir);

	char rec_path[4096], err[512];
	snprintf(rec_path, sizeof rec_path, "%s/recordings/h200-phases-10hz.csv", data_dir());
	struct recording *rec = NULL;
	if (recording_load(rec_path, &rec, err, sizeof err) != GPULSE_OK)
		fail_msg("%s", err);
	peaks_init(&f->pk);
	snprintf(f->pk.model, sizeof f->pk.model, "NVIDIA H200");
	peaks_derive(&f->pk);
	struct diag_input in = {.gpu = 0, .rows = rec->rows, .nrows = rec->nrows,
				.origin_s = floor(rec->rows[0].t_s / LIVE_W) * LIVE_W,
				.window_s = LIVE_W};
	struct diag_window *one = NULL;
	size_t none = 0;
	assert_int_equal(diagnose_gpu(&in, &f->pk, &one, &none), GPULSE_OK);
	assert_true(none > 20);
	recording_free(rec);
	/* The recording a few times over, back to back, for longer windows. */
	size_t per_copy = none * stretch;
	double span = (double)(per_copy + 3) * LIVE_W;
	f->nw = per_copy * COPIES;
	f->w = calloc(f->nw, sizeof *f->w);
	assert_non_null(f->w);
	for (size_t c = 0; c < COPIES; c++)
		for (size_t k = 0; k < per_copy; k++) {
			struct diag_window *w = &f->w[c * per_copy + k];
			*w = one[k / stretch];
			w->start_s = one[0].start_s + (double)c * span + (double)k * LIVE_W;
			w->end_s = w->start_s + LIVE_W;
		}
	free(one);
	f->now_ms = (int64_t)(f->w[f->nw - 1].end_s * 1000) + (f->age_ms ? f->age_ms : 60000);
	open_store(f, raw_retention_ms);

	f->id.index = 0;
	snprintf(f->id.uuid, sizeof f->id.uuid, "GPU-test-0000");
	snprintf(f->id.name, sizeof f->id.name, "NVIDIA H200");
	for (size_t k = 0; k < f->nw; k++)
		diag_history_put(f->h, &f->id, &f->w[k]);
	diag_history_sync(f->h);
	assert_int_equal(tsdb_flush(f->db), GPULSE_OK);
}

static void fill(struct fixture *f, int64_t raw_retention_ms)
{
	fill_stretched(f, raw_retention_ms, 1);
}

static void teardown_fixture(struct fixture *f)
{
	diag_history_destroy(f->h);
	tsdb_close(f->db);
	free(f->w);
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
}

static bool same(double a, double b)
{
	return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-9 * fmax(1, fabs(a));
}

static void same_window_reads_back(void **state)
{
	(void)state;
	struct fixture f = {0};
	fill(&f, 0);
	struct diag_history_stats st;
	diag_history_get_stats(f.h, &st);
	assert_int_equal(st.windows_total, f.nw);
	assert_int_equal(st.append_errors_total, 0);

	struct diag_window *r = NULL;
	size_t nr = 0;
	assert_int_equal(diag_history_read(f.h, 0, f.w[0].start_s, f.w[f.nw - 1].end_s, LIVE_W,
					   100000, &f.pk, &r, &nr),
			 GPULSE_OK);
	assert_int_equal(nr, f.nw);
	unsigned any_missing = 0;
	for (size_t k = 0; k < nr; k++)
		any_missing |= f.w[k].missing;
	assert_true(any_missing != 0);  /* no device file: the link's peak is unknown */
	for (size_t k = 0; k < nr; k++) {
		assert_true(same(r[k].start_s, f.w[k].start_s));
		assert_int_equal(r[k].bottleneck, f.w[k].bottleneck);
		assert_int_equal(r[k].findings, f.w[k].findings);
		assert_int_equal(r[k].missing, f.w[k].missing);
		assert_int_equal(r[k].nverdicts, 1);
		assert_int_equal(r[k].nsamples, 0);  /* not stored: never a made-up count */
		assert_true(same(r[k].end_s, f.w[k].end_s));
		assert_true(same(r[k].headroom.dram, f.w[k].headroom.dram));
		assert_true(same(r[k].headroom.tensor, f.w[k].headroom.tensor));
		assert_true(same(r[k].headroom.busy, f.w[k].headroom.busy));
		assert_true(same(r[k].confidence, f.w[k].confidence));
		assert_true(r[k].advice[0] != '\0');
	}
	free(r);
	/* Another GPU has nothing stored. */
	assert_int_equal(diag_history_read(f.h, 1, f.w[0].start_s, f.w[f.nw - 1].end_s, LIVE_W,
					   100000, &f.pk, &r, &nr),
			 GPULSE_OK);
	assert_int_equal(nr, 0);
	assert_null(r);
	/* Bounds. */
	assert_int_equal(diag_history_read(f.h, 0, f.w[0].start_s, f.w[f.nw - 1].end_s, LIVE_W, 10,
					   &f.pk, &r, &nr),
			 GPULSE_EINVAL);
	assert_int_equal(diag_history_read(f.h, 0, 10, 5, LIVE_W, 10, &f.pk, &r, &nr),
			 GPULSE_EINVAL);
	teardown_fixture(&f);
}

/* The expected majority over the classifier's windows whose time lies
 * in [a, b), first class winning ties; *findings gets the findings of at
 * least a tenth of them. */
static int majority(const struct fixture *f, double a, double b, unsigned *findings, int *count)
{
	double cls[DIAG_CLASS_COUNT] = {0}, fnd[DIAG_FINDING_COUNT] = {0};
	int n = 0;
	for (size_t k = 0; k < f->nw; k++) {
		double t = f->w[k].end_s - 0.001;
		if (t < a || t >= b)
			continue;
		n++;
		cls[f->w[k].bottleneck]++;
		for (int i = 0; i < DIAG_FINDING_COUNT; i++)
			if (f->w[k].findings & DIAG_FINDING_BIT(i))
				fnd[i]++;
	}
	int best = 0;
	for (int c = 1; c < DIAG_CLASS_COUNT; c++)
		if (cls[c] > cls[best])
			best = c;
	*findings = 0;
	for (int i = 0; i < DIAG_FINDING_COUNT; i++)
		if (n && fnd[i] >= 1 && fnd[i] / n >= 0.1)
			*findings |= DIAG_FINDING_BIT(i);
	*count = n;
	return best;
}

static void check_majorities(struct fixture *f, double window_s)
{
	struct diag_window *r = NULL;
	size_t nr = 0;
	assert_int_equal(diag_history_read(f->h, 0, f->w[0].start_s - window_s,
					   f->w[f->nw - 1].end_s + window_s, window_s, 100000, &f->pk,
					   &r, &nr),
			 GPULSE_OK);
	assert_true(nr > 2);
	int total = 0;
	for (size_t k = 0; k < nr; k++) {
		unsigned fnd;
		int cnt;
		int want = majority(f, r[k].start_s, r[k].end_s, &fnd, &cnt);
		assert_int_equal(cnt, (int)r[k].nverdicts);
		assert_int_equal(r[k].bottleneck, want);
		assert_int_equal(r[k].findings, fnd);
		assert_true(r[k].nevidence >= 1);
		total += cnt;
	}
	assert_int_equal(total, (int)f->nw);
	free(r);
}

/* A merged window holds what its data held: it starts no earlier than
 * the first stored window in it and ends no later than the last one (nor
 * after the end of the range, "now"), so the spans add up to the
 * history's, not to the range asked for; its numbers are those of the
 * windows of its class, so "idle" never stands beside a busy GPU's
 * numbers; and its brief counts windows, not samples. */
static void merged_windows_keep_to_their_data(void **state)
{
	(void)state;
	struct fixture f = {0};
	fill(&f, 0);
	double first = f.w[0].start_s, last = f.w[f.nw - 1].end_s;
	const double W = 300;
	/* A range from well before the data to just before the last
	 * window's end: "now" cuts the last window. */
	double until = last - 2;
	struct diag_window *r = NULL;
	size_t nr = 0;
	assert_int_equal(diag_history_read(f.h, 0, first - 3 * W, until, W, 100000, &f.pk, &r, &nr),
			 GPULSE_OK);
	assert_true(nr > 2);
	assert_true(same(r[0].start_s, first));
	assert_true(r[nr - 1].end_s <= until);
	double covered = 0, held = 0;
	for (size_t k = 0; k < f.nw; k++)
		if (f.w[k].end_s - 0.001 <= until)
			held += f.w[k].end_s - f.w[k].start_s;
	int mismatched = 0;
	for (size_t k = 0; k < nr; k++) {
		assert_true(r[k].end_s > r[k].start_s && r[k].end_s - r[k].start_s <= W + 1e-9);
		assert_true(same(r[k].judged_start_s, r[k].start_s));
		assert_true(same(r[k].judged_end_s, r[k].end_s));
		covered += r[k].end_s - r[k].start_s;
		/* Its data: the first and the last stored window in it. */
		double lo = INFINITY, hi = -INFINITY, busy = 0;
		int nbusy = 0, ncls = 0;
		for (size_t i = 0; i < f.nw; i++) {
			double t = f.w[i].end_s - 0.001;
			if (t < r[k].start_s || t >= r[k].end_s)
				continue;
			lo = fmin(lo, f.w[i].start_s);
			hi = fmax(hi, f.w[i].end_s);
			if (f.w[i].bottleneck != r[k].bottleneck)
				continue;
			ncls++;
			if (!isnan(f.w[i].headroom.busy)) {
				busy += f.w[i].headroom.busy;
				nbusy++;
			}
		}
		assert_true(same(r[k].start_s, fmax(lo, first)));
		assert_true(same(r[k].end_s, fmin(hi, until)));
		assert_true(ncls > 0);
		if (nbusy)
			assert_true(same(r[k].headroom.busy, busy / nbusy));
		/* Over all its windows the mean would differ wherever
		 * classes mixed: the test sees such windows. */
		double all = 0;
		int nall = 0;
		for (size_t i = 0; i < f.nw; i++) {
			double t = f.w[i].end_s - 0.001;
			if (t >= r[k].start_s && t < r[k].end_s && !isnan(f.w[i].headroom.busy)) {
				all += f.w[i].headroom.busy;
				nall++;
			}
		}
		mismatched += nall && nbusy && !same(all / nall, busy / nbusy);
		assert_non_null(strstr(r[k].brief, " windows)"));
		assert_null(strstr(r[k].brief, "samples"));
	}
	assert_true(mismatched > 0);
	/* The spans are the history's: the recording's copies have gaps
	 * between them, which no window covers whole. */
	assert_true(covered <= last - first);
	assert_true(covered >= held - 1e-6 - (double)(COPIES + 1) * W);
	free(r);
	teardown_fixture(&f);
}

static void longer_windows_take_the_majority(void **state)
{
	(void)state;
	struct fixture f = {0};
	fill(&f, 0);
	check_majorities(&f, 60);
	check_majorities(&f, 300);
	teardown_fixture(&f);
}

/* With a raw retention shorter than the recording's age, the read goes to
 * the 1-minute rollups and still finds each window's majority. */
static void rollups_answer_old_ranges(void **state)
{
	(void)state;
	struct fixture f = {.age_ms = 2 * 3600 * 1000};
	fill(&f, 3600 * 1000);
	assert_int_equal(tsdb_flush(f.db), GPULSE_OK);  /* rollups that became due */
	struct tsdb_matcher m = {TSDB_MATCH_EQ, "__name__", "gpulse_gpu_bottleneck"};
	struct tsdb_select_opts so = {.mint = (int64_t)(f.w[0].start_s * 1000),
				      .maxt = (int64_t)(f.w[f.nw - 1].end_s * 1000),
				      .mode = TSDB_READ_AUTO, .step_hint_ms = 300000};
	struct tsdb_iter *it;
	char err[128];
	assert_int_equal(tsdb_select(f.db, &m, 1, &so, &it, err, sizeof err), GPULSE_OK);
	assert_true(tsdb_iter_is_rollup(it));  /* what diag_history_read gets too */
	tsdb_iter_free(it);
	check_majorities(&f, 300);
	teardown_fixture(&f);
}

static void records_at_class_changes(void **state)
{
	(void)state;
	struct fixture f = {0};
	fill_stretched(&f, 0, 4);
	struct buf b;
	buf_init(&b, 64 << 20);
	assert_int_equal(diag_history_records_json(f.h, f.id.uuid, f.w[0].start_s,
						   f.w[f.nw - 1].end_s, 100000, &b),
			 GPULSE_OK);
	json_error_t je;
	json_t *arr = json_loadb(b.data, b.len, 0, &je);
	if (!arr)
		fail_msg("records are not JSON: %s", je.text);
	assert_true(json_is_array(arr));
	/* Every record is one of the classifier's windows, whole. */
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v) {
		double s = json_number_value(json_object_get(v, "start_s"));
		const char *c = json_string_value(json_object_get(v, "bottleneck"));
		size_t k = 0;
		while (k < f.nw && fabs(f.w[k].start_s - s) > 1e-6)
			k++;
		assert_true(k < f.nw);
		assert_non_null(c);
		assert_string_equal(c, diag_class_name(f.w[k].bottleneck));
		assert_non_null(json_object_get(v, "evidence"));
	}
	/* After every state (class and findings) that held 30 s, the
	 * newest record by then has that state: changes that last are kept. */
	size_t runs = 0;
	for (size_t k = 0; k < f.nw;) {
		size_t e = k;
		while (e + 1 < f.nw && f.w[e + 1].bottleneck == f.w[k].bottleneck &&
		       f.w[e + 1].findings == f.w[k].findings && f.w[e + 1].start_s == f.w[e].end_s)
			e++;
		if (e - k + 1 >= 6) {  /* 30 s: the gap between records is met in it */
			runs++;
			json_t *last = NULL;
			json_array_foreach(arr, i, v)
				if (json_number_value(json_object_get(v, "start_s")) <= f.w[e].start_s)
					last = v;
			assert_non_null(last);
			assert_string_equal(json_string_value(json_object_get(last, "bottleneck")),
					    diag_class_name(f.w[k].bottleneck));
		}
		k = e + 1;
	}
	assert_true(runs >= 3);
	/* Flapping and repeats write no record: far fewer than the windows. */
	assert_true(json_array_size(arr) < f.nw / 4);
	double prev = -1e300;
	json_array_foreach(arr, i, v) {
		double s = json_number_value(json_object_get(v, "start_s"));
		assert_true(s > prev);  /* oldest first */
		prev = s;
	}
	size_t n = json_array_size(arr);
	json_decref(arr);
	/* The newest `limit`. */
	buf_reset(&b);
	assert_int_equal(diag_history_records_json(f.h, f.id.uuid, f.w[0].start_s,
						   f.w[f.nw - 1].end_s, 3, &b),
			 GPULSE_OK);
	arr = json_loadb(b.data, b.len, 0, &je);
	assert_non_null(arr);
	assert_int_equal(json_array_size(arr), 3);
	assert_true(fabs(json_number_value(json_object_get(json_array_get(arr, 2), "start_s")) -
			 prev) < 1e-6);
	json_decref(arr);
	/* Another card's uuid has none. */
	buf_reset(&b);
	assert_int_equal(diag_history_records_json(f.h, "GPU-other", f.w[0].start_s,
						   f.w[f.nw - 1].end_s, 100, &b),
			 GPULSE_OK);
	assert_memory_equal(b.data, "[]", 2);
	/* Pruning by age removes them all (the recording is old). */
	size_t deleted = 0;
	assert_int_equal(tsdb_record_prune(f.db, DIAG_HISTORY_KIND,
					   (int64_t)(f.w[f.nw - 1].end_s * 1000) + 1, &deleted),
			 GPULSE_OK);
	assert_int_equal(deleted, n);
	buf_free(&b);
	teardown_fixture(&f);
}

/* A new card in slot 0 gets series of its own uuid; reads by index see
 * both cards' windows. */
static void new_card_new_series(void **state)
{
	(void)state;
	struct fixture f = {0};
	fill(&f, 0);
	struct gpu_identity other = f.id;
	snprintf(other.uuid, sizeof other.uuid, "GPU-test-1111");
	struct diag_window w = f.w[f.nw - 1];
	w.start_s += 10 * LIVE_W;
	w.end_s += 10 * LIVE_W;
	diag_history_put(f.h, &other, &w);
	diag_history_sync(f.h);
	struct tsdb_matcher m = {TSDB_MATCH_EQ, "uuid", "GPU-test-1111"};
	struct tsdb_select_opts so = {.mint = 0, .maxt = INT64_MAX / 2, .mode = TSDB_READ_RAW};
	struct tsdb_iter *it;
	char err[128];
	assert_int_equal(tsdb_select(f.db, &m, 1, &so, &it, err, sizeof err), GPULSE_OK);
	int series = 0;
	while (tsdb_iter_next_series(it) == 1)
		series++;
	tsdb_iter_free(it);
	/* classes, findings, confidence, and the headroom numbers it had */
	assert_true(series >= DIAG_CLASS_COUNT + DIAG_FINDING_COUNT + 1);
	struct diag_window *r = NULL;
	size_t nr = 0;
	assert_int_equal(diag_history_read(f.h, 0, f.w[0].start_s, w.end_s, LIVE_W, 100000, &f.pk,
					   &r, &nr),
			 GPULSE_OK);
	assert_int_equal(nr, f.nw + 1);
	free(r);
	teardown_fixture(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(same_window_reads_back),
		cmocka_unit_test(longer_windows_take_the_majority),
		cmocka_unit_test(merged_windows_keep_to_their_data),
		cmocka_unit_test(rollups_answer_old_ranges),
		cmocka_unit_test(records_at_class_changes),
		cmocka_unit_test(new_card_new_series),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
