/* The health score (src/diagnose/health.c): fault histories built by
 * hand, each with the score, the drain verdict, the top reason and the
 * evidence text worked out from the rules of docs/internals/health.md. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "diagnose/health.h"

#define T0 1800000000.0 /* any Unix time: nothing reads the clock */
#define NPTS 121        /* an hour at the 30 s slow tier */

static struct health_point pts[NPTS];

/* A healthy H100's hour: counters at 0, x16 of x16, no slowdown. */
static void healthy(void)
{
	for (int i = 0; i < NPTS; i++) {
		struct health_point *p = &pts[i];
		memset(p, 0, sizeof *p);
		p->t_s = T0 + 30.0 * i;
		p->valid = (1u << HI_COUNT) - 1;
		p->v[HI_PCIE_WIDTH] = 16;
		p->v[HI_PCIE_WIDTH_MAX] = 16;
	}
}

static struct health_input input(void)
{
	return (struct health_input){.points = pts, .npoints = NPTS, .now_s = T0 + 3600,
				     .window_s = 24 * 3600};
}

static void healthy_card_scores_100(void **state)
{
	(void)state;
	healthy();
	struct health_input in = input();
	struct gpu_health_score v;
	health_eval(&in, &v);
	assert_true(v.valid);
	assert_true(v.score == 100);
	assert_false(v.drain);
	assert_int_equal(v.top_reason, -1);
	for (int r = 0; r < HEALTH_REASON_COUNT; r++) {
		assert_true(v.penalty[r] == 0);
		assert_string_equal(v.evidence[r], "");
	}
	assert_true(v.window_s == 3600);
}

/* Corrected errors at a rate that climbs: i*(i+1)/2 after i readings
 * (1, 2, 3 ... new ones per reading), 7260 in the hour; 1830 of them in
 * the first half hour (readings 1-60) and 5430 in the second. */
static void climbing_corrected_rate(void **state)
{
	(void)state;
	healthy();
	for (int i = 0; i < NPTS; i++)
		pts[i].v[HI_ECC_SBE] = i * (i + 1) / 2.0;
	struct health_input in = input();
	struct gpu_health_score v;
	health_eval(&in, &v);
	/* 7260/h >= 100/h: 30, rising: +15. */
	assert_true(v.penalty[HEALTH_ECC_CORRECTED_RATE] == 45);
	assert_true(v.score == 55);
	assert_false(v.drain);
	assert_int_equal(v.top_reason, HEALTH_ECC_CORRECTED_RATE);
	assert_string_equal(v.evidence[HEALTH_ECC_CORRECTED_RATE],
			    "7260 corrected ECC errors in 1h00m (7.26e+03/h), rising; 1830 then 5430 "
			    "by half-window");

	/* The same number at a steady rate is not "rising": 60 a reading. */
	for (int i = 0; i < NPTS; i++)
		pts[i].v[HI_ECC_SBE] = 60.0 * i;
	health_eval(&in, &v);
	assert_true(v.penalty[HEALTH_ECC_CORRECTED_RATE] == 30);
	assert_null(strstr(v.evidence[HEALTH_ECC_CORRECTED_RATE], "rising"));
}

static void pending_remap_drains(void **state)
{
	(void)state;
	healthy();
	for (int i = 100; i < NPTS; i++) {
		pts[i].v[HI_REMAP_PENDING] = 1;
		pts[i].v[HI_REMAP_UNC] = 1;
		pts[i].v[HI_ECC_DBE] = 1;
	}
	struct health_input in = input();
	struct gpu_health_score v;
	health_eval(&in, &v);
	assert_true(v.drain);
	assert_int_equal(v.top_reason, HEALTH_ECC_UNCORRECTED);
	assert_true(v.penalty[HEALTH_REMAP_PENDING] == 30);
	assert_true(v.drains[HEALTH_REMAP_PENDING]);
	assert_string_equal(v.evidence[HEALTH_REMAP_PENDING],
			    "a row remap is pending: drain and reset the GPU to apply it");
	assert_true(v.penalty[HEALTH_ROWS_REMAPPED] == 5);
	assert_string_equal(v.evidence[HEALTH_ECC_UNCORRECTED],
			    "1 uncorrectable ECC error in the last 1h00m (1 since driver load)");
	/* 100 - 60 - 30 - 5 */
	assert_true(v.score == 5);

	/* Pending alone (no DBE in the history): it is the top reason. */
	for (int i = 0; i < NPTS; i++)
		pts[i].v[HI_ECC_DBE] = 0;
	health_eval(&in, &v);
	assert_int_equal(v.top_reason, HEALTH_REMAP_PENDING);
	assert_true(v.score == 65);
	assert_string_equal(health_reason_name(v.top_reason), "row_remap_pending");
}

static void xid79_drains_and_ages_out(void **state)
{
	(void)state;
	healthy();
	struct health_xid x[] = {{T0 + 3000, 13, 4}, {T0 + 3540, 79, 1}};
	struct health_input in = input();
	in.xids = x;
	in.nxids = 2;
	struct gpu_health_score v;
	health_eval(&in, &v);
	assert_true(v.drain);
	assert_true(v.score == 0);
	assert_int_equal(v.top_reason, HEALTH_XID);
	assert_string_equal(v.evidence[HEALTH_XID],
			    "XID 79 x1 (GPU has fallen off the bus), last 1m00s ago; 5 XIDs in all");
	/* A day later both have left the window. */
	in.now_s += 24 * 3600;
	health_eval(&in, &v);
	assert_false(v.drain);
	assert_true(v.penalty[HEALTH_XID] == 0);
	/* An application's XID alone costs nothing but is shown. */
	in.now_s = T0 + 3600;
	in.nxids = 1;
	health_eval(&in, &v);
	assert_true(v.score == 100);
	assert_false(v.drain);
	assert_string_equal(v.evidence[HEALTH_XID], "XID 13 x4 (Graphics Engine Exception (usually "
			    "the application)), last 10m00s ago; 4 XIDs in all");
}

static void xid_table_is_consistent(void **state)
{
	(void)state;
	static const uint32_t wanted[] = {48, 63, 64, 74, 79, 92, 94, 95};
	for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
		assert_non_null(health_xid_lookup(wanted[i]));
	assert_null(health_xid_lookup(0));
	for (size_t i = 0; i < health_xid_count; i++) {
		assert_true(health_xid_table[i].penalty >= 0 && health_xid_table[i].penalty <= 100);
		assert_true(strlen(health_xid_table[i].meaning) > 0);
		if (i)
			assert_true(health_xid_table[i].code > health_xid_table[i - 1].code);
	}
	assert_true(health_xid_lookup(79)->drain && health_xid_lookup(79)->penalty == 100);
	assert_false(health_xid_lookup(63)->drain);
}

/* A driver reload resets the counters: the increase is counted from the
 * value after the reset, not as a negative step. Width and replays too. */
static void resets_link_and_replays(void **state)
{
	(void)state;
	healthy();
	for (int i = 0; i < NPTS; i++) {
		pts[i].v[HI_ECC_SBE] = i < 60 ? 100 + i / 10 : (i - 60) / 10;
		pts[i].v[HI_PCIE_REPLAY] = i >= 90 ? 12 : 0;
		pts[i].v[HI_PCIE_WIDTH] = i >= 90 ? 8 : 16;
	}
	struct health_input in = input();
	struct gpu_health_score v;
	health_eval(&in, &v);
	/* 100..105 (+5), reset to 0 (counted 0), 0..6 (+6): 11 in an hour. */
	assert_string_equal(v.evidence[HEALTH_ECC_CORRECTED_RATE],
			    "11 corrected ECC errors in 1h00m (11/h); 5 then 6 by half-window");
	assert_true(v.penalty[HEALTH_ECC_CORRECTED_RATE] == 15);
	assert_true(v.penalty[HEALTH_PCIE_REPLAY] == 10);
	assert_string_equal(v.evidence[HEALTH_PCIE_REPLAY], "12 PCIe replays in 1h00m (12/h)");
	assert_true(v.penalty[HEALTH_PCIE_LINK] == 30);
	assert_string_equal(v.evidence[HEALTH_PCIE_LINK],
			    "PCIe link x8 of x16; its width changed in the window");
	assert_true(v.score == 100 - 15 - 10 - 30);
}

static void thermal_slowdown_and_measures(void **state)
{
	(void)state;
	healthy();
	/* Thermal policy active 12 % of the time; hardware slowdown in 7 of
	 * 121 readings (every 20th, 5.8 %). */
	for (int i = 0; i < NPTS; i++) {
		pts[i].v[HI_VIOL_THERMAL] = 3.6 * i;
		pts[i].v[HI_HW_SLOWDOWN] = i % 20 == 0;
	}
	struct health_input in = input();
	in.bench.set = true;
	snprintf(in.bench.text, sizeof in.bench.text, "gemm_bf16 14.2%% below its baseline");
	struct gpu_health_score v;
	health_eval(&in, &v);
	assert_true(v.penalty[HEALTH_THERMAL] == 15);
	assert_string_equal(v.evidence[HEALTH_THERMAL],
			    "the thermal policy held the clocks down 12.0% of 1h00m");
	assert_true(v.penalty[HEALTH_CLOCK_SLOWDOWN] == 10);
	assert_string_equal(v.evidence[HEALTH_CLOCK_SLOWDOWN],
			    "hardware slowdown (thermal or power brake) in 7 of 121 readings");
	assert_true(v.penalty[HEALTH_BENCH_REGRESSION] == 15);
	assert_false(v.drain);
	assert_true(v.score == 60);
	in.corruption.set = true;
	snprintf(in.corruption.text, sizeof in.corruption.text, "screen gemm_i32 tile 3: 1 element");
	health_eval(&in, &v);
	assert_true(v.drain);
	assert_int_equal(v.top_reason, HEALTH_CORRUPTION);
	assert_true(v.score == 0);
}

/* Not-read inputs give no evidence and cost nothing. */
static void unread_inputs_cost_nothing(void **state)
{
	(void)state;
	healthy();
	for (int i = 0; i < NPTS; i++) {
		pts[i].valid = 0;
		pts[i].v[HI_REMAP_PENDING] = 1; /* not valid: ignored */
	}
	struct health_input in = input();
	struct gpu_health_score v;
	health_eval(&in, &v);
	assert_true(v.score == 100);
	assert_false(v.drain);
	in.npoints = 0;
	health_eval(&in, &v);
	assert_true(v.score == 100 && v.window_s == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(healthy_card_scores_100),
		cmocka_unit_test(climbing_corrected_rate),
		cmocka_unit_test(pending_remap_drains),
		cmocka_unit_test(xid79_drains_and_ages_out),
		cmocka_unit_test(xid_table_is_consistent),
		cmocka_unit_test(resets_link_and_replays),
		cmocka_unit_test(thermal_slowdown_and_measures),
		cmocka_unit_test(unread_inputs_cost_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
