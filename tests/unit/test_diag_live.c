/* The live diagnosis: rows from fast updates, normal-tier values written
 * back into the interval they describe, a window judged only once all its
 * evidence is in, the verdict on the bus, and on-demand windows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collect/bus.h"
#include "diagnose/live.h"
#include "common/status.h"

static void publish(struct bus *b, enum tier t, double t_s, const int *fields, const double *v, int n)
{
	static struct gpu_update u;
	memset(&u, 0, sizeof u);
	u.gpu = 0;
	u.tier = t;
	u.wall_ns = (int64_t)(t_s * 1e9);
	u.mask = fields_of_tier(t);
	for (int i = 0; i < n; i++) {
		u.v[fields[i]] = v[i];
		u.valid |= FIELD_BIT(fields[i]);
	}
	bus_publish(b, &u);
}

/* A tensor-bound second: fast tier busy, normal tier's GPM says tensor. */
static void busy_second(struct bus *b, double t0)
{
	static const int ff[] = {F_GPU_UTIL, F_MEM_UTIL, F_MEM_USED, F_MEM_TOTAL, F_POWER, F_SM_CLOCK};
	static const double fv[] = {1.0, 0.2, 4e9, 150e9, 690, 1.47e9};
	for (int k = 1; k <= 10; k++)
		publish(b, TIER_FAST, t0 + k * 0.1, ff, fv, 6);
}

static void normal_second(struct bus *b, double t)
{
	static const int nf[] = {F_GPM_SM, F_GPM_OCCUPANCY, F_GPM_TENSOR, F_GPM_DRAM, F_CLOCK_REASONS,
				 F_PROC_COUNT};
	static const double nv[] = {0.95, 0.14, 0.93, 0.17, 4, 1};
	publish(b, TIER_NORMAL, t, nf, nv, 6);
}

static void test_backfill_and_verdict(void **state)
{
	(void)state;
	struct bus *b;
	assert_int_equal(bus_create(&b), 0);
	struct gpu_identity id;
	memset(&id, 0, sizeof id);
	snprintf(id.uuid, sizeof id.uuid, "GPU-live");
	snprintf(id.name, sizeof id.name, "NVIDIA H200");
	id.pcie_max_gen = 5;
	id.pcie_max_width = 16;
	int slot;
	assert_int_equal(bus_attach_gpu(b, &id, &slot), 0);
	struct diag_live *dl;
	assert_int_equal(diag_live_create(&dl, b, 2.0, 60.0, 10), 0);

	/* Seconds 1000..1004 of fast samples, the normal tier one second
	 * behind each. [1000, 1002) is partial (the first sample is at
	 * 1000.1) and never judged live; [1002, 1004) is complete only when
	 * the normal update at 1004 has arrived. */
	struct gpu_snapshot s;
	double t = 1000.0;
	for (int sec = 0; sec < 4; sec++) {
		busy_second(b, t + sec);
		if (sec < 3)
			normal_second(b, t + sec + 1);
	}
	assert_int_equal(bus_read(b, slot, &s), 0);
	assert_int_equal(s.diag_class, -1);
	normal_second(b, 1004.0);
	busy_second(b, 1004.0);
	assert_int_equal(bus_read(b, slot, &s), 0);
	assert_true(s.diag_window_end_s == 1004.0);
	assert_string_equal(diag_class_name((enum diag_class)s.diag_class), "compute_bound");
	assert_true(s.diag_findings & DIAG_FINDING_BIT(DIAG_FINDING_POWER_CAPPED));

	/* On demand: every window since 1000 carries the written-back GPM. */
	struct diag_window *w;
	size_t n;
	struct gpu_peaks pk;
	assert_int_equal(diag_live_windows(dl, slot, 1000.0, 2.0, &w, &n, &pk), 0);
	assert_true(n >= 2);
	assert_string_equal(diag_class_name(w[1].bottleneck), "compute_bound");
	assert_true(pk.pcie_bytes_per_s > 6e10);
	/* No limit reported yet: the model's default board power. */
	assert_string_equal(pk.power_source, "model table (default limit)");
	free(w);
	/* The limit the driver reports (slow tier) is the yardstick from then
	 * on, though rows keep no slow-tier column. */
	static const int sf[] = {F_POWER_LIMIT};
	static const double sv[] = {450};
	publish(b, TIER_SLOW, 1005.0, sf, sv, 1);
	assert_int_equal(diag_live_peaks(dl, slot, &pk), 0);
	assert_true(pk.power_limit_w == 450);
	assert_string_equal(pk.power_source, "device");
	assert_int_equal(diag_live_windows(dl, slot, 1000.0, 2.0, &w, &n, &pk), 0);
	assert_true(pk.power_limit_w == 450);
	free(w);
	assert_int_equal(diag_live_windows(dl, 7, 0, 0, &w, &n, &pk), GPULSE_ENOENT);
	assert_int_equal(diag_live_windows(dl, slot, 0, 0.01, &w, &n, &pk), GPULSE_EINVAL);
	/* A lost GPU carries no verdict. */
	bus_set_health(b, slot, GPU_HEALTH_LOST, "test");
	assert_int_equal(bus_read(b, slot, &s), 0);
	assert_int_equal(s.diag_class, -1);
	diag_live_destroy(dl);
	bus_destroy(b);
}

/* An idle second whose clock event reasons still say SW power cap (the
 * driver can report it on an idle card): the window is idle, and idle
 * windows carry no slowdown finding, live or on demand. */
static void idle_capped_second(struct bus *b, double t0)
{
	static const int ff[] = {F_GPU_UTIL, F_MEM_UTIL, F_MEM_USED, F_MEM_TOTAL, F_POWER, F_SM_CLOCK};
	static const double fv[] = {0.0, 0.0, 4e9, 150e9, 699, 1.2e9};
	static const int nf[] = {F_GPM_SM, F_GPM_OCCUPANCY, F_GPM_TENSOR, F_GPM_DRAM, F_CLOCK_REASONS,
				 F_PROC_COUNT};
	static const double nv[] = {0, 0, 0, 0, 0x4 | 0x20 | 0x8, 0};
	for (int k = 1; k <= 10; k++)
		publish(b, TIER_FAST, t0 + k * 0.1, ff, fv, 6);
	publish(b, TIER_NORMAL, t0 + 1, nf, nv, 6);
}

static void test_idle_not_capped(void **state)
{
	(void)state;
	struct bus *b;
	assert_int_equal(bus_create(&b), 0);
	struct gpu_identity id;
	memset(&id, 0, sizeof id);
	snprintf(id.uuid, sizeof id.uuid, "GPU-idle");
	snprintf(id.name, sizeof id.name, "NVIDIA H200");
	int slot;
	assert_int_equal(bus_attach_gpu(b, &id, &slot), 0);
	struct diag_live *dl;
	assert_int_equal(diag_live_create(&dl, b, 2.0, 60.0, 10), 0);
	/* The memory threshold is the daemon's to set; 2 % makes these
	 * idle windows (2.7 % used) carry memory_pressure, which, unlike
	 * the slowdowns, an idle GPU can have. */
	struct diag_options o;
	diag_options_defaults(&o);
	o.memory_pressure_ratio = 1.5;
	assert_int_equal(diag_live_set_options(dl, &o), GPULSE_EINVAL);
	o.memory_pressure_ratio = 0.02;
	assert_int_equal(diag_live_set_options(dl, &o), GPULSE_OK);
	for (int sec = 0; sec < 8; sec++)
		idle_capped_second(b, 3000.0 + sec);
	struct gpu_snapshot s;
	assert_int_equal(bus_read(b, slot, &s), 0);
	assert_true(s.diag_window_end_s >= 3004.0);
	assert_string_equal(diag_class_name((enum diag_class)s.diag_class), "idle");
	assert_int_equal(s.diag_findings, DIAG_FINDING_BIT(DIAG_FINDING_MEMORY_PRESSURE));
	struct diag_window *w;
	size_t n;
	struct gpu_peaks pk;
	assert_int_equal(diag_live_windows(dl, slot, 3000.0, 2.0, &w, &n, &pk), 0);
	assert_true(n >= 3);
	for (size_t k = 0; k < n; k++) {
		assert_int_equal(w[k].bottleneck, DIAG_IDLE);
		assert_int_equal(w[k].findings, DIAG_FINDING_BIT(DIAG_FINDING_MEMORY_PRESSURE));
	}
	free(w);
	diag_live_destroy(dl);
	bus_destroy(b);
}

static void test_history_bound(void **state)
{
	(void)state;
	struct bus *b;
	assert_int_equal(bus_create(&b), 0);
	struct gpu_identity id;
	memset(&id, 0, sizeof id);
	snprintf(id.uuid, sizeof id.uuid, "GPU-live");
	int slot;
	assert_int_equal(bus_attach_gpu(b, &id, &slot), 0);
	struct diag_live *dl;
	assert_int_equal(diag_live_create(&dl, b, 1.0, 10.0, 10), 0);
	for (int sec = 0; sec < 30; sec++)
		busy_second(b, 2000.0 + sec);
	struct diag_window *w;
	size_t n;
	struct gpu_peaks pk;
	assert_int_equal(diag_live_windows(dl, slot, 0, 1.0, &w, &n, &pk), 0);
	/* Only the last ~10 s are held. */
	assert_true(n >= 9 && n <= 12);
	assert_true(w[0].start_s >= 2019.0);
	free(w);
	struct diag_live *bad;
	assert_int_equal(diag_live_create(&bad, b, 0.01, 10, 10), GPULSE_EINVAL);
	assert_null(bad);
	diag_live_destroy(NULL);
	diag_live_destroy(dl);
	bus_destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backfill_and_verdict),
		cmocka_unit_test(test_history_bound),
		cmocka_unit_test(test_idle_not_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
