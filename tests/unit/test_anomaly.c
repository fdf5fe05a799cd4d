/* The anomaly detector: the model's arithmetic on synthetic series (a
 * step, a slow drift, a spike, and seasonality that must not score high),
 * its bounds, and the detector over the bus (ticks, contexts, scores,
 * missing values, the store), and the config section. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "anomaly/anomaly.h"
#include "collect/bus.h"
#include "daemon/config.h"
#include "common/status.h"
#include "store/tsdb.h"

/* Deterministic noise: a 64-bit LCG turned into an approximately normal
 * value (sum of 12 uniforms minus 6: mean 0, deviation 1). */
static uint64_t rng_state;
static double noise(void)
{
	double s = 0;
	for (int i = 0; i < 12; i++) {
		rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
		s += (double)(rng_state >> 11) / 9007199254740992.0;
	}
	return s - 6;
}

static struct anomaly_model *model(double step_s, int buckets, double floor)
{
	struct anomaly_params p;
	anomaly_params_default(&p, step_s);
	p.season_buckets = buckets;
	struct anomaly_model *m = NULL;
	assert_int_equal(anomaly_model_new(&m, &p, 1, floor), GPULSE_OK);
	return m;
}

/* A stationary series: max score over `n` ticks from t0 (1 s each). */
static double feed_normal(struct anomaly_model *m, double *t, int n, double level, double sd)
{
	double mx = 0;
	for (int i = 0; i < n; i++) {
		double z = anomaly_model_observe(m, (*t)++, 0, level + sd * noise());
		if (isfinite(z) && z > mx)
			mx = z;
	}
	return mx;
}

static void test_warmup_then_low_scores(void **state)
{
	(void)state;
	rng_state = 1;
	struct anomaly_model *m = model(1, 0, 0.1);
	double t = 1e9;
	/* The first 60 values (the warm-up) have no score. */
	for (int i = 0; i < 60; i++)
		assert_true(isnan(anomaly_model_observe(m, t++, 0, 100 + noise())));
	double z = anomaly_model_observe(m, t++, 0, 100);
	assert_true(isfinite(z));
	/* Noise of deviation 1 scores like a z-score: rarely above 4. */
	double mx = feed_normal(m, &t, 3000, 100, 1);
	assert_true(mx < 5);
	assert_true(mx > 2); /* and the scale is not inflated: 3000 normal draws reach 2 */
	anomaly_model_free(m);
}

static void test_step(void **state)
{
	(void)state;
	rng_state = 2;
	struct anomaly_model *m = model(1, 0, 0.1);
	double t = 1e9;
	feed_normal(m, &t, 1200, 100, 1);
	/* A step of 10 deviations scores high at once and stays high for a
	 * while: the clipped update learns a level shift only gradually. */
	double first = anomaly_model_observe(m, t++, 0, 110 + noise());
	assert_true(first > 6);
	int high = 0;
	for (int i = 0; i < 60; i++)
		high += anomaly_model_observe(m, t++, 0, 110 + noise()) > 6;
	assert_true(high >= 50);
	/* ... and once the new level has lasted long, it is normal. */
	feed_normal(m, &t, 3600, 110, 1);
	assert_true(feed_normal(m, &t, 600, 110, 1) < 5);
	anomaly_model_free(m);
}

static void test_slow_drift(void **state)
{
	(void)state;
	rng_state = 3;
	struct anomaly_model *m = model(1, 0, 0.1);
	double t = 1e9;
	feed_normal(m, &t, 1200, 100, 1);
	/* Drift 0.05 deviations a second (a leak): no single value is far
	 * from the one before, but the series leaves its normal. */
	int first_high = -1;
	double early_max = 0;
	for (int i = 0; i < 1200; i++) {
		double z = anomaly_model_observe(m, t++, 0, 100 + 0.05 * i + noise());
		if (i < 40 && z > early_max)
			early_max = z; /* drifted less than 2 deviations */
		if (first_high < 0 && z > 6)
			first_high = i;
	}
	assert_true(early_max < 5);
	assert_true(first_high > 0);
	/* Found before the drift reached 30 deviations (10 minutes). */
	assert_true(first_high < 600);
	anomaly_model_free(m);
}

static void test_spike(void **state)
{
	(void)state;
	rng_state = 4;
	struct anomaly_model *m = model(1, 0, 0.1);
	double t = 1e9;
	feed_normal(m, &t, 1200, 100, 1);
	double z = anomaly_model_observe(m, t++, 0, 130);
	assert_true(z > 20);
	/* One spike barely moves the baseline: the next normal values
	 * score as before. */
	assert_true(feed_normal(m, &t, 60, 100, 1) < 5);
	anomaly_model_free(m);
}

/* A working-hours pattern: 0.1 at night, 0.9 from 09:00 to 17:00 (UTC),
 * ticks of a minute. */
static double workday(double t_s)
{
	double h = fmod(t_s, 86400) / 3600;
	return h >= 9 && h < 17 ? 0.9 : 0.1;
}

static void test_seasonality_not_anomalous(void **state)
{
	(void)state;
	rng_state = 5;
	struct anomaly_model *seasonal = model(60, 24, 0.05);
	struct anomaly_model *flat = model(60, 0, 0.05);
	double t0 = 1795910400; /* a midnight, UTC */
	double t = t0;
	for (int day = 0; day < 14; day++)
		for (int i = 0; i < 1440; i++, t += 60) {
			double x = workday(t) + 0.01 * noise();
			anomaly_model_observe(seasonal, t, 0, x);
			anomaly_model_observe(flat, t, 0, x);
		}
	/* Day 15: the same pattern. The seasonal model knows 09:00 and
	 * 17:00; the short-term baseline alone scores the switches high. */
	double max_seasonal = 0, max_flat = 0;
	for (int i = 0; i < 1440; i++, t += 60) {
		double x = workday(t) + 0.01 * noise();
		double zs = anomaly_model_observe(seasonal, t, 0, x);
		double zf = anomaly_model_observe(flat, t, 0, x);
		max_seasonal = fmax(max_seasonal, zs);
		max_flat = fmax(max_flat, zf);
	}
	assert_true(max_seasonal < 4);
	assert_true(max_flat > 6);
	/* Day 16: the day's level at 02:00 has never been seen at that hour,
	 * and the night before was quiet: anomalous. */
	for (int i = 0; i < 120; i++, t += 60)
		anomaly_model_observe(seasonal, t, 0, 0.1 + 0.01 * noise());
	assert_true(anomaly_model_observe(seasonal, t, 0, 0.9) > 6);
	anomaly_model_free(seasonal);
	anomaly_model_free(flat);
}

static void test_model_bounds(void **state)
{
	(void)state;
	struct anomaly_params p;
	anomaly_params_default(&p, 1);
	struct anomaly_model *m = NULL;
	assert_int_equal(anomaly_model_new(&m, &p, 0, 1), GPULSE_EINVAL);
	assert_int_equal(anomaly_model_new(&m, &p, ANOMALY_CONTEXTS_MAX + 1, 1), GPULSE_EINVAL);
	assert_int_equal(anomaly_model_new(&m, &p, 1, 0), GPULSE_EINVAL);
	p.season_buckets = ANOMALY_SEASON_BUCKETS_MAX + 1;
	assert_int_equal(anomaly_model_new(&m, &p, 1, 1), GPULSE_EINVAL);
	p.season_buckets = ANOMALY_SEASON_BUCKETS_MAX;
	assert_int_equal(anomaly_model_new(&m, &p, ANOMALY_CONTEXTS_MAX, 1), GPULSE_OK);
	/* Out-of-range context or a non-finite value: no score, nothing learned. */
	assert_true(isnan(anomaly_model_observe(m, 0, -1, 1)));
	assert_true(isnan(anomaly_model_observe(m, 0, ANOMALY_CONTEXTS_MAX, 1)));
	assert_true(isnan(anomaly_model_observe(m, 0, 0, NAN)));
	double t = 1e9;
	for (int i = 0; i < 100; i++)
		anomaly_model_observe(m, t++, 3, 5);
	/* A constant series: its scale is the floor, and a huge deviation
	 * is capped rather than infinite. */
	assert_true(fabs(anomaly_model_observe(m, t++, 3, 7) - 2) < 1e-9);
	assert_true(anomaly_model_observe(m, t++, 3, 1e300) == ANOMALY_SCORE_MAX);
	/* Contexts are separate: context 4 has not warmed up. */
	assert_true(isnan(anomaly_model_observe(m, t++, 4, 5)));
	anomaly_model_free(m);
}

/* ---- the detector over the bus ----------------------------------------- */

static struct bus *bus_with_gpu(void)
{
	struct bus *b = NULL;
	assert_int_equal(bus_create(&b), GPULSE_OK);
	struct gpu_identity id;
	memset(&id, 0, sizeof id);
	id.index = 0;
	snprintf(id.uuid, sizeof id.uuid, "GPU-test");
	snprintf(id.name, sizeof id.name, "NVIDIA H200");
	int slot;
	assert_int_equal(bus_attach_gpu(b, &id, &slot), GPULSE_OK);
	assert_int_equal(slot, 0);
	return b;
}

static void publish_fast(struct bus *b, double t_s, double util, double power, double mem)
{
	static struct gpu_update u;
	memset(&u, 0, sizeof u);
	u.gpu = 0;
	u.tier = TIER_FAST;
	u.wall_ns = (int64_t)(t_s * 1e9);
	u.mask = fields_of_tier(TIER_FAST);
	u.v[F_GPU_UTIL] = util;
	u.v[F_POWER] = power;
	u.v[F_MEM_USED] = mem;
	u.v[F_MEM_TOTAL] = 150e9;
	u.v[F_SM_CLOCK] = 1.98e9;
	u.valid = FIELD_BIT(F_GPU_UTIL) | FIELD_BIT(F_POWER) | FIELD_BIT(F_MEM_USED) |
		  FIELD_BIT(F_MEM_TOTAL) | FIELD_BIT(F_SM_CLOCK);
	if (!isfinite(power))
		u.valid &= ~FIELD_BIT(F_POWER);
	bus_publish(b, &u);
}

static void test_detector_over_bus(void **state)
{
	(void)state;
	rng_state = 6;
	struct bus *b = bus_with_gpu();
	struct anomaly_config c;
	anomaly_config_default(&c);
	c.warmup_ns = 30LL * 1000000000;
	struct anomaly *a = NULL;
	assert_int_equal(anomaly_create(&a, &c, b, NULL), GPULSE_OK);
	assert_int_equal(anomaly_subscribe(a), GPULSE_OK);
	double sc[ANOMALY_WATCH_COUNT];
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_ENOENT); /* no update yet */

	double t = 1795910400.05;
	/* 60 s of a busy GPU at 10 Hz: 600 W, 40 GB. */
	for (int i = 0; i < 600; i++, t += 0.1)
		publish_fast(b, t, 1.0, 600 + 3 * noise(), 40e9);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(isfinite(sc[ANOMALY_W_POWER]) && sc[ANOMALY_W_POWER] < 5);
	assert_true(isfinite(sc[ANOMALY_W_MEM]) && sc[ANOMALY_W_MEM] < 1);
	assert_true(isnan(sc[ANOMALY_W_TEMP])); /* never reported */
	/* Power jumps by 200 W under the same load: high within two ticks. */
	for (int i = 0; i < 20; i++, t += 0.1)
		publish_fast(b, t, 1.0, 800, 40e9);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(sc[ANOMALY_W_POWER] > 6);
	/* The same power when the GPU is idle is judged in the idle context,
	 * which has not warmed up: no score rather than a false one. */
	for (int i = 0; i < 20; i++, t += 0.1)
		publish_fast(b, t, 0.0, 800, 40e9);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(isnan(sc[ANOMALY_W_POWER]));
	assert_true(isnan(sc[ANOMALY_W_MEM])); /* memory too is judged per load */
	/* Memory 1.5 GB up is 1 % of 150 GB (the floor): a score of ~1, not
	 * a false alarm on a series that never moved. */
	for (int i = 0; i < 20; i++, t += 0.1)
		publish_fast(b, t, 1.0, 600, 41.5e9);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(sc[ANOMALY_W_MEM] > 0.5 && sc[ANOMALY_W_MEM] < 1.5);
	/* Power stops being readable while the rest goes on: its score goes
	 * away after a few ticks. */
	for (int i = 0; i < 100; i++, t += 0.1)
		publish_fast(b, t, 1.0, NAN, 41.5e9);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(isnan(sc[ANOMALY_W_POWER]));
	assert_true(isfinite(sc[ANOMALY_W_MEM]));
	assert_int_equal(anomaly_scores_uuid(a, "GPU-test", sc, ANOMALY_WATCH_COUNT), GPULSE_OK);
	assert_int_equal(anomaly_scores_uuid(a, "GPU-none", sc, ANOMALY_WATCH_COUNT), GPULSE_ENOENT);
	struct anomaly_stats st;
	anomaly_get_stats(a, &st);
	assert_int_equal(st.models, ANOMALY_WATCH_COUNT);
	assert_true(st.ticks_total >= 4 * 70);
	/* 34 contexts (utilization 1, power 8, temperature 16, memory 3,
	 * clock 6) of 1 + 24 baselines of 24 bytes, plus the models. */
	assert_true(st.model_bytes >= 34 * 25 * 24 && st.model_bytes < 34 * 25 * 24 + 5 * 256);
	anomaly_destroy(a);
	bus_destroy(b);
}

static void publish_normal(struct bus *b, double t_s, double temp, double sm_active, uint64_t reasons)
{
	static struct gpu_update u;
	memset(&u, 0, sizeof u);
	u.gpu = 0;
	u.tier = TIER_NORMAL;
	u.wall_ns = (int64_t)(t_s * 1e9);
	u.mask = fields_of_tier(TIER_NORMAL);
	u.v[F_TEMP] = temp;
	u.v[F_GPM_SM] = sm_active;
	u.v[F_CLOCK_REASONS] = (double)reasons;
	u.valid = FIELD_BIT(F_TEMP) | FIELD_BIT(F_GPM_SM) | FIELD_BIT(F_CLOCK_REASONS);
	bus_publish(b, &u);
}

/* One second of a busy GPU: ten fast updates, then the normal tier. */
static void busy_second(struct bus *b, double *t, double power, double temp, uint64_t reasons)
{
	for (int k = 0; k < 10; k++, *t += 0.1)
		publish_fast(b, *t, 1.0, power + noise(), 40e9);
	publish_normal(b, *t - 0.05, temp + 0.2 * noise(), 0.95, reasons);
}

static void test_detector_contexts(void **state)
{
	(void)state;
	rng_state = 8;
	struct bus *b = bus_with_gpu();
	struct anomaly_config c;
	anomaly_config_default(&c);
	c.warmup_ns = 30LL * 1000000000;
	struct anomaly *a = NULL;
	assert_int_equal(anomaly_create(&a, &c, b, NULL), GPULSE_OK);
	assert_int_equal(anomaly_subscribe(a), GPULSE_OK);
	double sc[ANOMALY_WATCH_COUNT];
	double t = 1795910400.05;
	for (int i = 0; i < 60; i++)
		busy_second(b, &t, 600, 60, 0);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(sc[ANOMALY_W_TEMP] < 4);
	assert_true(isfinite(sc[ANOMALY_W_CLOCK]));
	/* A stated power cap: the clock is judged apart from the free
	 * clocks (a context with no history yet: no score). */
	busy_second(b, &t, 600, 60, 0x4);
	busy_second(b, &t, 600, 60, 0x4);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(isnan(sc[ANOMALY_W_CLOCK]));
	/* 15 C hotter at the same power (a failing fan): high. */
	for (int i = 0; i < 3; i++)
		busy_second(b, &t, 600, 75, 0);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(sc[ANOMALY_W_TEMP] > 6);
	assert_true(isfinite(sc[ANOMALY_W_CLOCK]));
	/* 75 C at 700 W: a power level never seen, so a context with no
	 * history (once the smoothed power has moved to its bin). */
	for (int i = 0; i < 20; i++)
		busy_second(b, &t, 700, 75, 0);
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	assert_true(isnan(sc[ANOMALY_W_TEMP]));
	anomaly_destroy(a);
	bus_destroy(b);
}

static void test_detector_writes_store(void **state)
{
	(void)state;
	rng_state = 7;
	char dir[] = "/tmp/gpulse-anomaly-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/db", dir);
	struct tsdb_opts o = {.path = path};
	struct tsdb *db = NULL;
	char err[256];
	assert_int_equal(tsdb_open(&db, &o, err, sizeof err), GPULSE_OK);
	struct bus *b = bus_with_gpu();
	struct anomaly_config c;
	anomaly_config_default(&c);
	c.warmup_ns = 5LL * 1000000000;
	struct anomaly *a = NULL;
	assert_int_equal(anomaly_create(&a, &c, b, db), GPULSE_OK);
	assert_int_equal(anomaly_subscribe(a), GPULSE_OK);
	double t = 1795910400.05;
	for (int i = 0; i < 200; i++, t += 0.1)
		publish_fast(b, t, 1.0, 600 + noise(), 40e9);
	struct anomaly_stats st;
	anomaly_get_stats(a, &st);
	/* 19 closed ticks, 5 of warm-up, for utilization, power, memory and
	 * clock: 14 scores each. */
	assert_int_equal(st.scores_appended_total, 4 * 14);
	assert_int_equal(st.store_errors_total, 0);
	anomaly_destroy(a);
	bus_destroy(b);
	tsdb_close(db);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* The store's series bound: the scores it refuses are counted, once per
 * series (a refused series is not asked for again), and scoring goes on. */
static void test_detector_store_bound(void **state)
{
	(void)state;
	rng_state = 9;
	char dir[] = "/tmp/gpulse-anomaly-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/db", dir);
	struct tsdb_opts o = {.path = path, .max_series = 2};
	struct tsdb *db = NULL;
	char err[256];
	assert_int_equal(tsdb_open(&db, &o, err, sizeof err), GPULSE_OK);
	struct bus *b = bus_with_gpu();
	struct anomaly_config c;
	anomaly_config_default(&c);
	c.warmup_ns = 5LL * 1000000000;
	struct anomaly *a = NULL;
	assert_int_equal(anomaly_create(&a, &c, b, db), GPULSE_OK);
	assert_int_equal(anomaly_subscribe(a), GPULSE_OK);
	double t = 1795910400.05;
	for (int i = 0; i < 200; i++, t += 0.1)
		publish_fast(b, t, 1.0, 600 + noise(), 40e9);
	struct anomaly_stats st;
	anomaly_get_stats(a, &st);
	/* Two of the four scored watches got a series (14 scores each); the
	 * other two were refused once each. */
	assert_int_equal(st.store_errors_total, 2);
	assert_int_equal(st.scores_appended_total, 2 * 14);
	double sc[ANOMALY_WATCH_COUNT];
	assert_int_equal(anomaly_scores(a, 0, sc), GPULSE_OK);
	for (int w = 0; w < ANOMALY_WATCH_COUNT; w++)
		if (w != ANOMALY_W_TEMP)
			assert_true(isfinite(sc[w]));
	anomaly_destroy(a);
	bus_destroy(b);
	tsdb_close(db);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_detector_config_bounds(void **state)
{
	(void)state;
	struct anomaly_config c;
	anomaly_config_default(&c);
	struct anomaly *a = NULL;
	c.step_ns = 1000000; /* 1 ms */
	assert_int_equal(anomaly_create(&a, &c, NULL, NULL), GPULSE_EINVAL);
	anomaly_config_default(&c);
	c.season_buckets = ANOMALY_SEASON_BUCKETS_MAX + 1;
	assert_int_equal(anomaly_create(&a, &c, NULL, NULL), GPULSE_EINVAL);
	anomaly_config_default(&c);
	c.halflife_ns = c.step_ns / 2;
	assert_int_equal(anomaly_create(&a, &c, NULL, NULL), GPULSE_EINVAL);
	anomaly_destroy(NULL);
}

static void test_config_section(void **state)
{
	(void)state;
	struct gpulse_config c;
	config_defaults(&c);
	assert_true(c.anomaly.enabled);
	assert_int_equal(c.anomaly.season_buckets, 24);
	char err[512];
	const char *ok = "anomaly:\n  enabled: false\n  step: 2s\n  halflife: 30m\n"
			 "  season_buckets: 48\n  season_halflife: 14d\n  warmup: 5m\n";
	assert_int_equal(config_parse(&c, ok, strlen(ok), "g.yml", err, sizeof err), 0);
	assert_false(c.anomaly.enabled);
	assert_int_equal(c.anomaly.step_ns, 2000000000LL);
	assert_int_equal(c.anomaly.halflife_ns, 1800LL * 1000000000);
	assert_int_equal(c.anomaly.season_buckets, 48);
	assert_int_equal(c.anomaly.season_halflife_ns, 14LL * 86400 * 1000000000);
	assert_int_equal(c.anomaly.warmup_ns, 300LL * 1000000000);
	assert_int_equal(config_validate(&c, "g.yml", err, sizeof err), 0);
	const char *bad = "anomaly:\n  season_buckets: 97\n";
	assert_int_equal(config_parse(&c, bad, strlen(bad), "g.yml", err, sizeof err), GPULSE_EPARSE);
	assert_non_null(strstr(err, "g.yml:2:"));
	assert_non_null(strstr(err, "season_buckets"));
	const char *unknown = "anomaly:\n  windoww: 5s\n";
	assert_int_equal(config_parse(&c, unknown, strlen(unknown), "g.yml", err, sizeof err),
			 GPULSE_EPARSE);
	config_defaults(&c);
	c.anomaly.halflife_ns = 1000000000;
	c.anomaly.step_ns = 2000000000;
	assert_int_equal(config_validate(&c, "g.yml", err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "anomaly.halflife"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_warmup_then_low_scores),
		cmocka_unit_test(test_step),
		cmocka_unit_test(test_slow_drift),
		cmocka_unit_test(test_spike),
		cmocka_unit_test(test_seasonality_not_anomalous),
		cmocka_unit_test(test_model_bounds),
		cmocka_unit_test(test_detector_over_bus),
		cmocka_unit_test(test_detector_contexts),
		cmocka_unit_test(test_detector_writes_store),
		cmocka_unit_test(test_detector_store_bound),
		cmocka_unit_test(test_detector_config_bounds),
		cmocka_unit_test(test_config_section),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
