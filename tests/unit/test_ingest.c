/* The bus -> store ingest: updates published on a bus come back from the
 * store as series named and labelled as on /metrics (extra labels of the
 * field table included), the ticker adds gpulse_gpu_up, staleness, clock
 * reasons, XIDs, ECC events and link maxima and ends a lost GPU's series, a field that
 * becomes absent gets exactly one staleness marker so PromQL stops
 * returning it at once, out-of-order appends are counted and never fatal,
 * and the data survives a flush and reopen. */
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

#include "collect/bus.h"
#include "promql/eval.h"
#include "store/ingest.h"
#include "promql/parser.h"
#include "promql/queryable.h"
#include "common/stale.h"
#include "common/status.h"
#include "store/tsdb.h"
#include "promql/tsdb_queryable.h"

#define T0_MS 1795965289000LL

static char dir[64];
static char path[128];

struct fixture {
	struct bus *bus;
	struct tsdb *db;
	struct ingest *ing;
	int slot;
};

static struct fixture fx;

/* The store's clock (the ticker's "now"): it runs from 10 s after T0, so
 * the ticker's samples follow the test's own, whatever today's date. */
static int64_t fixture_now(void *ctx)
{
	static int64_t start_ns;
	(void)ctx;
	if (!start_ns)
		start_ns = clock_mono_ns();
	return T0_MS + 10000 + (clock_mono_ns() - start_ns) / NS_PER_MS;
}

static void open_all(void)
{
	struct tsdb_opts o = {.path = path, .clock = {.now_ms = fixture_now}};
	char err[256] = "";
	assert_int_equal(tsdb_open(&fx.db, &o, err, sizeof err), 0);
	assert_int_equal(bus_create(&fx.bus), 0);
	struct gpu_identity id;
	memset(&id, 0, sizeof id);
	id.index = 3;
	strcpy(id.uuid, "GPU-0123");
	strcpy(id.name, "NVIDIA H200");
	assert_int_equal(bus_attach_gpu(fx.bus, &id, &fx.slot), 0);
	assert_int_equal(ingest_create(&fx.ing, fx.db, fx.bus), 0);
	assert_int_equal(ingest_subscribe(fx.ing), 0);
}

static void close_all(void)
{
	tsdb_close(fx.db);
	ingest_destroy(fx.ing);
	bus_destroy(fx.bus);
	memset(&fx, 0, sizeof fx);
}

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/gpulse-ingestXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/store.db", dir);
	open_all();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close_all();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void publish(enum tier tier, int64_t t_ms, uint64_t mask, uint64_t valid,
		    const double *v)
{
	struct gpu_update *u = calloc(1, sizeof *u);
	assert_non_null(u);
	u->gpu = fx.slot;
	u->tier = tier;
	u->wall_ns = t_ms * 1000000;
	u->mask = mask;
	u->valid = valid;
	for (int f = 0; f < FIELD_COUNT; f++)
		u->v[f] = v ? v[f] : 0;
	bus_publish(fx.bus, u);
	free(u);
}

/* Samples of the one series matching name (and, when given, one more
 * equality matcher); returns the count, labels checked by the caller
 * through *nlabels. */
static size_t read_series(const char *name, const char *lname, const char *lvalue,
			  int64_t *t, double *v, size_t max, size_t *nlabels)
{
	struct tsdb_matcher m[2] = {{TSDB_MATCH_EQ, "__name__", name},
				    {TSDB_MATCH_EQ, lname, lvalue}};
	struct tsdb_select_opts so = {.mint = 0, .maxt = INT64_MAX / 2, .mode = TSDB_READ_RAW};
	struct tsdb_iter *it = NULL;
	char err[256];
	assert_int_equal(tsdb_select(fx.db, m, lname ? 2 : 1, &so, &it, err, sizeof err), 0);
	size_t n = 0;
	if (tsdb_iter_next_series(it) == 1) {
		const struct label *l = tsdb_iter_labels(it, nlabels);
		bool have_uuid = false, have_model = false, have_gpu = false;
		for (size_t i = 0; i < *nlabels; i++) {
			have_uuid |= strcmp(l[i].name, "uuid") == 0 && strcmp(l[i].value, "GPU-0123") == 0;
			have_model |= strcmp(l[i].name, "model") == 0 &&
				      strcmp(l[i].value, "NVIDIA H200") == 0;
			have_gpu |= strcmp(l[i].name, "gpu") == 0 && strcmp(l[i].value, "3") == 0;
		}
		assert_true(have_uuid && have_model && have_gpu);
		while (n < max && tsdb_iter_next_sample(it, &t[n], &v[n]) == 1)
			n++;
		assert_int_equal(tsdb_iter_next_series(it), 0);
	}
	tsdb_iter_free(it);
	return n;
}

static int is_stale(double v)
{
	uint64_t bits;
	memcpy(&bits, &v, sizeof bits);
	return bits == STALE_NAN_BITS;
}

static void test_values_and_labels(void **state)
{
	(void)state;
	double v[FIELD_COUNT] = {0};
	uint64_t fast = FIELD_BIT(F_GPU_UTIL) | FIELD_BIT(F_POWER);
	for (int i = 0; i < 5; i++) {
		v[F_GPU_UTIL] = 0.1 * i;
		v[F_POWER] = 100 + i;
		publish(TIER_FAST, T0_MS + 100 * i, fast, fast, v);
	}
	v[F_ECC_SBE_VOL] = 7;
	v[F_ECC_DBE_VOL] = 1;
	v[F_CLOCK_REASONS] = 0x4;
	publish(TIER_SLOW, T0_MS, FIELD_BIT(F_ECC_SBE_VOL) | FIELD_BIT(F_ECC_DBE_VOL),
		FIELD_BIT(F_ECC_SBE_VOL) | FIELD_BIT(F_ECC_DBE_VOL), v);
	publish(TIER_NORMAL, T0_MS, FIELD_BIT(F_CLOCK_REASONS), FIELD_BIT(F_CLOCK_REASONS), v);

	int64_t t[16];
	double x[16];
	size_t nl;
	assert_int_equal(read_series("gpulse_gpu_power_watts", NULL, NULL, t, x, 16, &nl), 5);
	assert_int_equal(nl, 4);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(t[i], T0_MS + 100 * i);
		assert_true(x[i] == 100 + i);
	}
	assert_int_equal(read_series("gpulse_gpu_utilization_ratio", NULL, NULL, t, x, 16, &nl), 5);
	assert_true(x[3] == 0.1 * 3);
	assert_int_equal(read_series("gpulse_gpu_ecc_errors_total", "type", "corrected", t, x, 16, &nl), 1);
	assert_int_equal(nl, 5);
	assert_true(x[0] == 7);
	assert_int_equal(read_series("gpulse_gpu_ecc_errors_total", "type", "uncorrected", t, x, 16, &nl), 1);
	assert_true(x[0] == 1);
	assert_int_equal(read_series(INGEST_CLOCK_REASONS_METRIC, NULL, NULL, t, x, 16, &nl), 1);
	assert_true(x[0] == 4);
	/* The integral of the power readings: trapezoids of 100 ms. */
	assert_int_equal(read_series("gpulse_gpu_power_energy_joules_total", NULL, NULL, t, x, 16, &nl), 5);
	double joules = 0;
	for (int i = 1; i < 5; i++) {
		joules += 0.5 * ((100 + i - 1) + (100 + i)) * 0.1;
		assert_true(fabs(x[i] - joules) < 1e-9);
		assert_int_equal(t[i], T0_MS + 100 * i);
	}
	assert_true(x[0] == 0);
	/* A field outside the update's mask is not written at all. */
	assert_int_equal(read_series("gpulse_gpu_temperature_celsius", NULL, NULL, t, x, 16, &nl), 0);

	struct ingest_stats st;
	ingest_get_stats(fx.ing, &st);
	assert_int_equal(st.updates_total, 7);
	/* power, util and the bus's power integral (bus_publish); ECC, reasons */
	assert_int_equal(st.samples_appended_total, 5 * 3 + 3);
	assert_int_equal(st.append_errors_total, 0);

	/* Flushed and reopened, the same samples come back. */
	close_all();
	open_all();
	assert_int_equal(read_series("gpulse_gpu_power_watts", NULL, NULL, t, x, 16, &nl), 5);
	assert_true(x[4] == 104);
}

/* Evaluate `q` at t_ms over the store; returns the vector's size and the
 * first value in *v. */
static size_t instant(const char *q, int64_t t_ms, double *v)
{
	struct promql_expr *e = NULL;
	char err[256];
	assert_int_equal(promql_parse(q, &e, err, sizeof err), 0);
	struct promql_opts o;
	promql_opts_default(&o);
	struct tsdb_queryable_ctx qc = {.db = fx.db};
	struct promql_result *r = NULL;
	int rc = promql_eval_instant(e, &tsdb_queryable, &qc, &o, t_ms, &r, err, sizeof err);
	if (rc)
		fail_msg("%s: %s", q, err);
	size_t n = r->nseries;
	if (n && v)
		*v = r->series[0].points[0].v;
	promql_result_free(r);
	promql_expr_free(e);
	return n;
}

/* The ticker: what /metrics shows beyond the fields, and a lost GPU's
 * series ended with staleness markers. */
static void test_tick(void **state)
{
	(void)state;
	double v[FIELD_COUNT] = {0};
	v[F_MEM_USED] = 1e9;
	v[F_CLOCK_REASONS] = 4;  /* SW power cap */
	publish(TIER_FAST, T0_MS, FIELD_BIT(F_MEM_USED) | FIELD_BIT(F_CLOCK_REASONS),
		FIELD_BIT(F_MEM_USED) | FIELD_BIT(F_CLOCK_REASONS), v);
	bus_note_xid(fx.bus, fx.slot, 79, (T0_MS + 50) * 1000000);
	bus_note_xid(fx.bus, fx.slot, 79, (T0_MS + 60) * 1000000);
	bus_note_xid(fx.bus, fx.slot, 13, (T0_MS + 70) * 1000000);
	bus_note_ecc_event(fx.bus, fx.slot, true);
	ingest_tick(fx.ing, T0_MS + 100);
	int64_t t[16];
	double x[16];
	size_t nl;
	assert_int_equal(read_series("gpulse_gpu_up", NULL, NULL, t, x, 16, &nl), 1);
	assert_true(x[0] == 1 && t[0] == T0_MS + 100);
	assert_int_equal(read_series("gpulse_gpu_stale", NULL, NULL, t, x, 16, &nl), 1);
	assert_true(x[0] == 0);
	assert_int_equal(read_series("gpulse_gpu_xid_errors_total", "xid", "79", t, x, 16, &nl), 1);
	assert_true(x[0] == 2);
	assert_int_equal(read_series("gpulse_gpu_xid_errors_total", "xid", "13", t, x, 16, &nl), 1);
	assert_true(x[0] == 1);
	assert_int_equal(read_series("gpulse_gpu_ecc_events_total", "type", "double_bit", t, x, 16,
				     &nl), 1);
	assert_true(x[0] == 1);
	assert_int_equal(read_series("gpulse_gpu_throttle_active", "reason", "sw_power_cap", t, x,
				     16, &nl), 1);
	assert_true(x[0] == 1);
	assert_int_equal(read_series("gpulse_gpu_throttle_active", "reason", "hw_slowdown", t, x, 16,
				     &nl), 1);
	assert_true(x[0] == 0);

	/* Lost: up 0, and the memory series ends with a staleness marker. */
	bus_set_health(fx.bus, fx.slot, GPU_HEALTH_LOST, "test");
	ingest_tick(fx.ing, T0_MS + 1100);
	assert_int_equal(read_series("gpulse_gpu_up", NULL, NULL, t, x, 16, &nl), 2);
	assert_true(x[1] == 0);
	assert_int_equal(read_series("gpulse_gpu_memory_used_bytes", NULL, NULL, t, x, 16, &nl), 2);
	assert_true(x[0] == 1e9);
	assert_true(is_stale(x[1]) && t[1] == T0_MS + 1100);
	/* Only once. */
	ingest_tick(fx.ing, T0_MS + 2100);
	assert_int_equal(read_series("gpulse_gpu_memory_used_bytes", NULL, NULL, t, x, 16, &nl), 2);
	struct ingest_stats st;
	ingest_get_stats(fx.ing, &st);
	assert_int_equal(st.append_errors_total, 0);

	/* The ticker thread runs ticks on its own. */
	assert_int_equal(ingest_start(fx.ing, 20 * 1000000), GPULSE_OK);
	assert_int_equal(ingest_start(fx.ing, 20 * 1000000), GPULSE_ESTATE);
	usleep(200 * 1000);
	ingest_stop(fx.ing);
	assert_true(read_series("gpulse_gpu_up", NULL, NULL, t, x, 16, &nl) > 4);
}

/* Each process's memory and SM share go to the store once a tick, with
 * pid and comm, as /metrics shows them (the capacity report names them). */
static void test_tick_processes(void **state)
{
	(void)state;
	struct gpu_update *u = calloc(1, sizeof *u);
	assert_non_null(u);
	u->gpu = fx.slot;
	u->tier = TIER_NORMAL;
	u->wall_ns = T0_MS * 1000000;
	u->has_procs = true;
	u->nprocs = 2;
	u->procs[0] = (struct gpu_process){.pid = 41, .mem_valid = true, .used_bytes = 5000000000ull,
					   .util_valid = true, .sm_ratio = 0.25};
	memcpy(u->procs[0].comm, "python", 6);
	u->procs[1] = (struct gpu_process){.pid = 42, .mem_valid = true, .used_bytes = 1000};
	memcpy(u->procs[1].comm, "\xff\xfe" "bad", 5); /* not UTF-8: cleaned */
	bus_publish(fx.bus, u);
	free(u);
	ingest_tick(fx.ing, T0_MS + 100);
	ingest_tick(fx.ing, T0_MS + 1100);
	int64_t t[8];
	double x[8];
	size_t nl;
	assert_int_equal(read_series("gpulse_process_gpu_memory_bytes", "pid", "41", t, x, 8, &nl), 2);
	assert_true(x[0] == 5e9 && t[1] == T0_MS + 1100);
	assert_int_equal(nl, 6); /* __name__, gpu, uuid, model, pid, comm */
	assert_int_equal(read_series("gpulse_process_sm_utilization_ratio", "comm", "python", t, x, 8,
				     &nl), 2);
	assert_true(x[0] == 0.25);
	assert_int_equal(read_series("gpulse_process_gpu_memory_bytes", "pid", "42", t, x, 8, &nl), 2);
	assert_true(x[0] == 1000);
	/* no SM share was read for pid 42: no series */
	struct tsdb_matcher m[2] = {{TSDB_MATCH_EQ, "__name__", "gpulse_process_sm_utilization_ratio"},
				    {TSDB_MATCH_EQ, "pid", "42"}};
	struct tsdb_select_opts so = {.mint = 0, .maxt = INT64_MAX / 2, .mode = TSDB_READ_RAW};
	struct tsdb_iter *it = NULL;
	char err[256];
	assert_int_equal(tsdb_select(fx.db, m, 2, &so, &it, err, sizeof err), 0);
	assert_int_equal(tsdb_iter_next_series(it), 0);
	tsdb_iter_free(it);
	/* lost: no process samples */
	bus_set_health(fx.bus, fx.slot, GPU_HEALTH_LOST, "test");
	ingest_tick(fx.ing, T0_MS + 2100);
	assert_int_equal(read_series("gpulse_process_gpu_memory_bytes", "pid", "41", t, x, 8, &nl), 2);
}

/* What the ingest declares it writes (ingest_metric_names, the list the
 * store's scrape of /metrics leaves to it) covers every name it wrote:
 * every field valid, XIDs, ECC events, processes, a tick. */
static void test_declared_names(void **state)
{
	(void)state;
	struct gpu_update *u = calloc(1, sizeof *u);
	assert_non_null(u);
	u->gpu = fx.slot;
	u->tier = TIER_NORMAL;
	u->wall_ns = T0_MS * 1000000;
	for (int f = 0; f < FIELD_COUNT; f++)
		u->mask |= FIELD_BIT(f);
	u->valid = u->mask;
	u->has_procs = true;
	u->nprocs = 1;
	u->procs[0] = (struct gpu_process){.pid = 41, .mem_valid = true, .used_bytes = 5,
					   .util_valid = true, .sm_ratio = 0.25};
	memcpy(u->procs[0].comm, "python", 6);
	bus_publish(fx.bus, u);
	free(u);
	bus_note_xid(fx.bus, fx.slot, 79, (T0_MS + 50) * 1000000);
	bus_note_ecc_event(fx.bus, fx.slot, true);
	ingest_tick(fx.ing, T0_MS + 100);

	const char *declared[INGEST_METRIC_NAMES_MAX];
	size_t nd = 0;
	assert_int_equal(ingest_metric_names(declared, INGEST_METRIC_NAMES_MAX, &nd), GPULSE_OK);
	char **names = NULL;
	size_t n = 0;
	assert_int_equal(tsdb_label_values(fx.db, "__name__", &names, &n), 0);
	assert_true(n > 20);
	for (size_t i = 0; i < n; i++) {
		bool found = false;
		for (size_t k = 0; k < nd && !found; k++)
			found = strcmp(names[i], declared[k]) == 0;
		if (!found)
			fail_msg("the ingest wrote %s but does not declare it", names[i]);
	}
	tsdb_strings_free(names, n);
	/* Each once; a cap too small says so. */
	for (size_t i = 0; i < nd; i++)
		for (size_t k = i + 1; k < nd; k++)
			assert_string_not_equal(declared[i], declared[k]);
	assert_int_equal(ingest_metric_names(declared, 3, &nd), GPULSE_ELIMIT);
	assert_int_equal(nd, 3);
}

static void test_stale_marker(void **state)
{
	(void)state;
	double v[FIELD_COUNT] = {0};
	uint64_t fast = FIELD_BIT(F_GPU_UTIL) | FIELD_BIT(F_POWER);
	v[F_POWER] = 300;
	v[F_GPU_UTIL] = 0.5;
	publish(TIER_FAST, T0_MS, fast, fast, v);
	publish(TIER_FAST, T0_MS + 100, fast, fast, v);
	/* Power becomes unreadable for three updates, then comes back. */
	for (int i = 2; i < 5; i++)
		publish(TIER_FAST, T0_MS + 100 * i, fast, FIELD_BIT(F_GPU_UTIL), v);
	v[F_POWER] = 310;
	publish(TIER_FAST, T0_MS + 500, fast, fast, v);

	int64_t t[16];
	double x[16];
	size_t nl;
	size_t n = read_series("gpulse_gpu_power_watts", NULL, NULL, t, x, 16, &nl);
	assert_int_equal(n, 4); /* 300, 300, one marker, 310 */
	assert_true(x[0] == 300 && x[1] == 300);
	assert_true(is_stale(x[2]));
	assert_int_equal(t[2], T0_MS + 200);
	assert_true(x[3] == 310);
	struct ingest_stats st;
	ingest_get_stats(fx.ing, &st);
	assert_int_equal(st.stale_markers_total, 1);

	/* PromQL stops returning the series at the marker, not after the
	 * five-minute lookback, and sees it again when it returns. */
	double got = 0;
	assert_int_equal(instant("gpulse_gpu_power_watts", T0_MS + 150, &got), 1);
	assert_true(got == 300);
	assert_int_equal(instant("gpulse_gpu_power_watts", T0_MS + 450, NULL), 0);
	assert_int_equal(instant("gpulse_gpu_utilization_ratio", T0_MS + 450, &got), 1);
	assert_true(got == 0.5);
	assert_int_equal(instant("gpulse_gpu_power_watts", T0_MS + 600, &got), 1);
	assert_true(got == 310);
	assert_int_equal(instant("sum by (gpu) (gpulse_gpu_power_watts)", T0_MS + 600, &got), 1);
	assert_true(got == 310);
}

static void test_out_of_order_counted(void **state)
{
	(void)state;
	double v[FIELD_COUNT] = {0};
	uint64_t m = FIELD_BIT(F_POWER);
	v[F_POWER] = 1;
	publish(TIER_FAST, T0_MS + 1000, m, m, v);
	publish(TIER_FAST, T0_MS + 1000, m, m, v); /* same millisecond */
	/* Older than the store's out-of-order window (1 h; a sample
	 * within it is taken: test_tsdb's test_clock_step_back). */
	publish(TIER_FAST, T0_MS + 1000 - 2 * 3600 * 1000LL, m, m, v);
	struct ingest_stats st;
	ingest_get_stats(fx.ing, &st);
	assert_int_equal(st.append_errors_total, 4); /* power and its integral, twice */
	assert_int_equal(st.samples_appended_total, 2);
	struct tsdb_stats ts;
	tsdb_get_stats(fx.db, &ts);
	assert_int_equal(ts.samples_dropped_total, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_values_and_labels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_marker, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tick, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tick_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_declared_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_order_counted, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
