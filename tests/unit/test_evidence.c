/* Evidence's bounds (src/daemon/evidence.c): the budgets per GPU and per
 * hour refuse what is past them and count each refusal per GPU; a trigger
 * while the GPU is raised joins its evidence and spends nothing; the
 * records held stay within max_records once gathered; a raise is asked of
 * the source for each new piece. On a bus with two GPUs and no other
 * source (no diagnosis, no profiling), so gathering is immediate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collect/bus.h"
#include "common/buf.h"
#include "common/clock.h"
#include "daemon/evidence.h"
#include "common/status.h"

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
			evidence_metrics(e, &m, false);
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
		evidence_metrics(e, &m, false);
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
	struct alert_label labels[] = {{"alertname", "GPUThermalSlowdown"}, {"gpu", "0"}};
	struct alert_label ann[] = {{"summary", "hot"}};
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budgets_and_bounds),
		cmocka_unit_test(test_join_while_raised),
		cmocka_unit_test(test_disabled_forwards),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
