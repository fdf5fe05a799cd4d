/* Evidence's bounds (src/daemon/evidence.c): the budgets per GPU and per
 * hour refuse what is past them and count each refusal per GPU; a trigger
 * while the GPU is raised joins its evidence and spends nothing; the
 * records held stay within max_records once gathered; a raise is asked of
 * the source for each new piece. On a bus with two GPUs and no other
 * source (no diagnosis, no profiling), so gathering is immediate. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "collect/bus.h"
#include "common/buf.h"
#include "common/clock.h"
#include "daemon/evidence.h"
#include "daemon/evidence_files.h"
#include "export/prom.h"
#include "common/status.h"


/* The evidence families as /metrics writes them. */
static void emit_evidence(void *ctx, struct metric_sink *s)
{
	evidence_metrics(ctx, s);
}

static int raises;

static int count_raise(void *ctx, int slot, int64_t duration_ns)
{
	(void)ctx;
	(void)slot;
	(void)duration_ns;
	raises++;
	return 0;
}

static struct bus *two_gpus(void)
{
	struct bus *b = NULL;
	assert_int_equal(bus_create(&b), GPULSE_OK);
	for (int i = 0; i < 2; i++) {
		struct gpu_identity id;
		memset(&id, 0, sizeof id);
		id.index = i;
		snprintf(id.uuid, sizeof id.uuid, "GPU-test-%d", i);
		int slot;
		assert_int_equal(bus_attach_gpu(b, &id, &slot), GPULSE_OK);
		assert_int_equal(slot, i);
	}
	return b;
}

/* The value of the first line of `text` that starts with `prefix`. */
static double metric_value(const char *text, const char *prefix)
{
	const char *p = strstr(text, prefix);
	assert_non_null(p);
	return strtod(p + strlen(prefix), NULL);
}

static void test_budgets_and_bounds(void **state)
{
	(void)state;
	struct bus *b = two_gpus();
	struct evidence_config c;
	evidence_config_defaults(&c);
	c.per_gpu_per_hour = 3;
	c.per_hour = 5;
	c.settle_ns = 0;
	c.raise_ns = 1;          /* every trigger a new piece, none joined */
	c.max_records = 2;
	struct evidence *e = NULL;
	assert_int_equal(evidence_create(&e, &c, b, NULL, NULL), GPULSE_OK);
	struct evidence_sources src = {.raise = count_raise};
	raises = 0;
	assert_int_equal(evidence_start(e, &src), GPULSE_OK);

	char id[64];
	int ok = 0, refused = 0;
	for (int i = 0; i < 4; i++) {   /* GPU 0: 3 allowed, the 4th refused */
		int rc = evidence_trigger(e, 0, "alert", "GPUTest", id, sizeof id);
		rc == GPULSE_OK ? ok++ : refused++;
		if (rc == GPULSE_OK)
			assert_true(id[0]);
		else
			assert_int_equal(rc, GPULSE_ELIMIT);
		/* Gathered, the records are pruned to leave a place. */
		for (int k = 0; k < 200 && rc == GPULSE_OK; k++) {
			struct buf m;
			buf_init(&m, 1 << 16);
			assert_int_equal(prom_emit_text(&m, false, emit_evidence, e), 0);
			double held = metric_value(m.data, "\ngpulse_evidence_records ");
			buf_free(&m);
			if (held <= 1)
				break;
			usleep(10000);
		}
	}
	assert_int_equal(ok, 3);
	assert_int_equal(refused, 1);
	/* GPU 1: two more reach the hour's 5, the third is refused. */
	for (int i = 0; i < 3; i++) {
		int rc = evidence_trigger(e, 1, "anomaly", "power score 9", id, sizeof id);
		assert_int_equal(rc, i < 2 ? GPULSE_OK : GPULSE_ELIMIT);
		usleep(20000);
	}
	assert_int_equal(raises, 5);

	/* Counted per GPU; no more than max_records held once gathered. */
	struct buf m;
	buf_init(&m, 1 << 16);
	for (int k = 0; k < 500; k++) {
		buf_reset(&m);
		assert_int_equal(prom_emit_text(&m, false, emit_evidence, e), 0);
		if (metric_value(m.data, "\ngpulse_evidence_records ") <= 2 &&
		    metric_value(m.data, "\ngpulse_evidence_dropped_total ") >= 3)
			break;
		usleep(10000);
	}
	assert_true(metric_value(m.data, "gpulse_evidence_budget_hits_total{gpu=\"0\"} ") == 1);
	assert_true(metric_value(m.data, "gpulse_evidence_budget_hits_total{gpu=\"1\"} ") == 1);
	assert_true(metric_value(m.data, "gpulse_evidence_taken_total{cause=\"alert\"} ") == 3);
	assert_true(metric_value(m.data, "gpulse_evidence_taken_total{cause=\"anomaly\"} ") == 2);
	assert_true(metric_value(m.data, "\ngpulse_evidence_records ") <= 2);
	assert_true(metric_value(m.data, "\ngpulse_evidence_dropped_total ") >= 3);
	buf_free(&m);
	evidence_destroy(e);
	bus_destroy(b);
}

/* While a GPU is raised, another trigger joins its evidence: same ID, no
 * budget spent, no second raise. */
static void test_join_while_raised(void **state)
{
	(void)state;
	struct bus *b = two_gpus();
	struct evidence_config c;
	evidence_config_defaults(&c);
	c.per_gpu_per_hour = 1;
	c.settle_ns = 0;
	struct evidence *e = NULL;
	assert_int_equal(evidence_create(&e, &c, b, NULL, NULL), GPULSE_OK);
	struct evidence_sources src = {.raise = count_raise};
	raises = 0;
	assert_int_equal(evidence_start(e, &src), GPULSE_OK);
	char a[64], bb[64];
	assert_int_equal(evidence_trigger(e, 0, "anomaly", "utilization score 8", a, sizeof a),
			 GPULSE_OK);
	assert_int_equal(evidence_trigger(e, 0, "alert", "GPUAnomaly", bb, sizeof bb), GPULSE_OK);
	assert_string_equal(a, bb);
	assert_int_equal(raises, 1);
	/* An unknown slot takes nothing. */
	assert_int_equal(evidence_trigger(e, 7, "alert", "GPUTest", a, sizeof a), GPULSE_ENOENT);
	evidence_destroy(e);
	bus_destroy(b);
}

/* Off: nothing is taken, the sink forwards unchanged. */
static size_t forwarded, forwarded_annotations;

static void next_sink(void *ctx, const struct alert_notice *n, size_t k)
{
	(void)ctx;
	forwarded += k;
	for (size_t i = 0; i < k; i++)
		forwarded_annotations += n[i].nannotations;
}

static void test_disabled_forwards(void **state)
{
	(void)state;
	struct bus *b = two_gpus();
	struct evidence_config c;
	evidence_config_defaults(&c);
	c.enabled = false;
	struct evidence *e = NULL;
	assert_int_equal(evidence_create(&e, &c, b, next_sink, NULL), GPULSE_OK);
	struct evidence_sources src = {.raise = count_raise};
	assert_int_equal(evidence_start(e, &src), GPULSE_OK);
	char id[64];
	assert_int_equal(evidence_trigger(e, 0, "alert", "GPUTest", id, sizeof id), GPULSE_ESTATE);
	struct label labels[] = {{"alertname", "GPUThermalSlowdown"}, {"gpu", "0"}};
	struct label ann[] = {{"summary", "hot"}};
	struct alert_notice n = {.labels = labels, .nlabels = 2, .annotations = ann,
				 .nannotations = 1, .fingerprint = 42};
	forwarded = forwarded_annotations = 0;
	evidence_sink(e, &n, 1);
	assert_int_equal(forwarded, 1);
	assert_int_equal(forwarded_annotations, 1);
	evidence_destroy(e);

	/* On: the listed alert's notice gains the link. */
	evidence_config_defaults(&c);
	c.settle_ns = 0;
	assert_int_equal(evidence_create(&e, &c, b, next_sink, NULL), GPULSE_OK);
	assert_int_equal(evidence_start(e, &src), GPULSE_OK);
	forwarded = forwarded_annotations = 0;
	evidence_sink(e, &n, 1);
	assert_int_equal(forwarded, 1);
	assert_int_equal(forwarded_annotations, 2);
	evidence_destroy(e);
	bus_destroy(b);
}

/* Wait (up to 5 s) until the metrics say `prefix` value `want`; the
 * metrics text last read stays in *m. */
static bool wait_metric_cmp(struct evidence *e, struct buf *m, const char *prefix, double want,
			    bool at_least)
{
	for (int k = 0; k < 500; k++) {
		buf_reset(m);
		assert_int_equal(prom_emit_text(m, false, emit_evidence, e), 0);
		const char *p = strstr(m->data, prefix);
		double v = p ? strtod(p + strlen(prefix), NULL) : NAN;
		if (at_least ? v >= want : v == want)
			return true;
		usleep(10000);
	}
	return false;
}

static bool wait_metric(struct evidence *e, struct buf *m, const char *prefix, double want)
{
	return wait_metric_cmp(e, m, prefix, want, false);
}

static char last_annotation[700];

static void keep_annotation(void *ctx, const struct alert_notice *n, size_t k)
{
	(void)ctx;
	for (size_t i = 0; i < k; i++)
		for (size_t a = 0; a < n[i].nannotations; a++)
			if (strcmp(n[i].annotations[a].name, "evidence") == 0)
				snprintf(last_annotation, sizeof last_annotation, "%s",
					 n[i].annotations[a].value);
}

static bool file_exists(const char *dir, const char *name)
{
	char path[1200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	struct stat st;
	return stat(path, &st) == 0;
}

/* Kept in files: a second evidence on the same directory (a restarted
 * gpulsed) holds what the first gathered, byte for byte, links the same
 * alert to the same evidence without taking more, and keeps the budget
 * the first spent. A damaged file is set aside and counted. */
static void test_kept_across_restart(void **state)
{
	(void)state;
	struct bus *b = two_gpus();
	char dir[] = "/tmp/gpulse-evidence-test.XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct evidence_config c;
	evidence_config_defaults(&c);
	c.per_gpu_per_hour = 1;
	c.settle_ns = 0;
	snprintf(c.dir, sizeof c.dir, "%s", dir);
	struct evidence *e = NULL;
	assert_int_equal(evidence_create(&e, &c, b, keep_annotation, NULL), GPULSE_OK);
	struct evidence_sources src = {.raise = count_raise};
	assert_int_equal(evidence_start(e, &src), GPULSE_OK);
	char id[64], name[128];
	assert_int_equal(evidence_trigger(e, 0, "anomaly", "power score 9", id, sizeof id), GPULSE_OK);
	/* GPU 1 through an alert of the default set. */
	struct label labels[] = {{"alertname", "GPUThermalSlowdown"}, {"gpu", "1"}};
	struct alert_notice n = {.labels = labels, .nlabels = 2, .fingerprint = 0xfeedfacecafe,
				 .starts_at_ms = 1796658709050};
	last_annotation[0] = '\0';
	evidence_sink(e, &n, 1);
	assert_non_null(strstr(last_annotation, "/api/v1/evidence/"));
	char url[700];
	snprintf(url, sizeof url, "%s", last_annotation);
	struct buf m;
	buf_init(&m, 1 << 16);
	assert_true(wait_metric(e, &m, "\ngpulse_evidence_records ", 2));
	/* Both written (the alert's with its link: a second write). */
	char name2[128];
	snprintf(name, sizeof name, "%s" EVIDENCE_FILE_SUFFIX, id);
	snprintf(name2, sizeof name2, "%s" EVIDENCE_FILE_SUFFIX, strrchr(url, '/') + 1);
	for (int k = 0; k < 500 && !(file_exists(dir, name) && file_exists(dir, name2)); k++)
		usleep(10000);
	assert_true(file_exists(dir, name) && file_exists(dir, name2));
	assert_true(wait_metric(e, &m, "\ngpulse_evidence_unsaved ", 0));
	assert_true(wait_metric(e, &m, "\ngpulse_evidence_store_available ", 1));
	evidence_destroy(e);

	/* A file the disk damaged. */
	char bad[512];
	snprintf(bad, sizeof bad, "%s/1-0-1" EVIDENCE_FILE_SUFFIX, dir);
	FILE *f = fopen(bad, "w");
	assert_non_null(f);
	fputs("gpulse-evidence 1 {\"id\":\"1-0-1\"}\n{}", f);
	fclose(f);

	raises = 0;
	assert_int_equal(evidence_create(&e, &c, b, keep_annotation, NULL), GPULSE_OK);
	assert_int_equal(evidence_start(e, &src), GPULSE_OK);
	buf_reset(&m);
	assert_int_equal(prom_emit_text(&m, false, emit_evidence, e), 0);
	assert_true(metric_value(m.data, "\ngpulse_evidence_records ") == 2);
	assert_true(metric_value(m.data, "gpulse_evidence_store_errors_total{op=\"load\"} ") == 1);
	assert_true(file_exists(dir, "1-0-1" EVIDENCE_FILE_SUFFIX ".bad"));
	/* The alert, still firing, links what it linked. */
	last_annotation[0] = '\0';
	evidence_sink(e, &n, 1);
	assert_string_equal(last_annotation, url);
	assert_true(metric_value(m.data, "gpulse_evidence_taken_total{cause=\"alert\"} ") == 0);
	/* GPU 0 spent its hour's budget before the restart. */
	assert_int_equal(evidence_trigger(e, 0, "alert", "GPUTest", id, sizeof id), GPULSE_ELIMIT);
	assert_int_equal(raises, 0);
	evidence_destroy(e);

	/* The document itself, as written. */
	char *data = NULL;
	size_t len = 0;
	struct evidence_file_meta meta;
	size_t off, dlen;
	char err[256];
	snprintf(name, sizeof name, "%s" EVIDENCE_FILE_SUFFIX, strrchr(url, '/') + 1);
	snprintf(bad, sizeof bad, "%s/%s", dir, name);
	f = fopen(bad, "r");
	assert_non_null(f);
	data = malloc(1 << 16);
	len = fread(data, 1, 1 << 16, f);
	fclose(f);
	assert_int_equal(evidence_file_decode(data, len, &meta, &off, &dlen, err, sizeof err), 0);
	assert_int_equal(meta.gpu, 1);
	assert_string_equal(meta.cause, "alert");
	assert_int_equal(meta.nlinks, 1);
	assert_true(meta.links[0].fingerprint == 0xfeedfacecafe);
	assert_true(meta.links[0].starts_at_ms == 1796658709050);
	assert_string_equal(meta.links[0].alert, "GPUThermalSlowdown");
	assert_true(dlen > 2 && data[off] == '{');
	/* One byte changed: the CRC says so. */
	data[off + dlen / 2] ^= 1;
	assert_int_equal(evidence_file_decode(data, len, &meta, &off, &dlen, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "CRC"));
	free(data);
	buf_free(&m);
	bus_destroy(b);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* A directory that cannot be written: the evidence is gathered and held
 * in memory, counted as unsaved, the failure counted and available 0;
 * once the directory can be made, it is written within retry_ns. */
static void test_unwritable_dir(void **state)
{
	(void)state;
	struct bus *b = two_gpus();
	char base[] = "/tmp/gpulse-evidence-test.XXXXXX";
	assert_non_null(mkdtemp(base));
	struct evidence_config c;
	evidence_config_defaults(&c);
	c.settle_ns = 0;
	c.retry_ns = 50 * NS_PER_MS;
	/* Its parent is a file: nothing can be made under it, root or not. */
	char parent[300];
	snprintf(parent, sizeof parent, "%s/parent", base);
	FILE *f = fopen(parent, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(c.dir, sizeof c.dir, "%s/ev", parent);
	struct evidence *e = NULL;
	assert_int_equal(evidence_create(&e, &c, b, NULL, NULL), GPULSE_OK);
	struct evidence_sources src = {.raise = count_raise};
	assert_int_equal(evidence_start(e, &src), GPULSE_OK);
	char id[64];
	assert_int_equal(evidence_trigger(e, 0, "alert", "GPUTest", id, sizeof id), GPULSE_OK);
	struct buf m;
	buf_init(&m, 1 << 16);
	assert_true(wait_metric(e, &m, "\ngpulse_evidence_unsaved ", 1));
	assert_true(wait_metric_cmp(e, &m, "gpulse_evidence_store_errors_total{op=\"write\"} ", 1, true));
	assert_true(metric_value(m.data, "\ngpulse_evidence_store_available ") == 0);
	assert_true(metric_value(m.data, "gpulse_evidence_store_errors_total{op=\"load\"} ") == 1);
	assert_true(metric_value(m.data, "gpulse_evidence_store_errors_total{op=\"write\"} ") >= 1);
	assert_true(metric_value(m.data, "\ngpulse_evidence_records ") == 1);
	/* The file goes, a directory can be made: written. */
	assert_int_equal(unlink(parent), 0);
	assert_int_equal(mkdir(parent, 0700), 0);
	assert_true(wait_metric(e, &m, "\ngpulse_evidence_unsaved ", 0));
	assert_true(wait_metric(e, &m, "\ngpulse_evidence_store_available ", 1));
	char name[128];
	snprintf(name, sizeof name, "%s" EVIDENCE_FILE_SUFFIX, id);
	assert_true(file_exists(c.dir, name));
	evidence_destroy(e);
	buf_free(&m);
	bus_destroy(b);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budgets_and_bounds),
		cmocka_unit_test(test_join_while_raised),
		cmocka_unit_test(test_disabled_forwards),
		cmocka_unit_test(test_kept_across_restart),
		cmocka_unit_test(test_unwritable_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
