/* Tests for the status document (src/export/status_json.c): it parses
 * with jansson and holds the expected keys and values for a bus of two
 * GPUs (one lost), with absent fields left out and NaN written as null. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "collect/bus.h"
#include "common/clock.h"
#include "export/selfstats.h"
#include "common/status.h"
#include "export/status_json.h"

/* Mark f read in this update, whatever tier the table gives it. */
static void set_field(struct gpu_update *u, enum field_id f, double v)
{
	u->mask |= FIELD_BIT(f);
	u->valid |= FIELD_BIT(f);
	u->v[f] = v;
}

static struct bus *make_bus(void)
{
	struct bus *bus;
	assert_int_equal(bus_create(&bus), 0);
	struct gpu_identity id0 = {
		.index = 0, .uuid = "GPU-aaaa", .name = "NVIDIA H200 \"SXM\" \\ 141GB",
		.pci_bus_id = "00000000:19:00.0", .serial = "1650924060001",
		.driver_version = "580.65.06", .cuda_version = "13.0", .architecture = "hopper",
		.cc_major = 9, .cc_minor = 0, .mig_mode = 1, .max_sm_clock_hz = 1980e6,
		.max_mem_clock_hz = 3201e6, .pcie_max_gen = 5, .pcie_max_width = 16,
		.gpm_supported = true, .source = "replay",
	};
	struct gpu_identity id1 = {.index = 1, .uuid = "GPU-bbbb", .name = "bad \xff utf8",
				   .mig_mode = -1, .source = "replay"};
	int slot;
	assert_int_equal(bus_attach_gpu(bus, &id0, &slot), 0);
	assert_int_equal(bus_attach_gpu(bus, &id1, &slot), 0);

	struct gpu_update *u = calloc(1, sizeof *u);
	assert_non_null(u);
	u->gpu = 0;
	u->tier = TIER_FAST;
	u->wall_ns = 1700000000LL * NS_PER_SEC + 500000000;
	u->mask = FIELD_BIT(F_MEM_FREE); /* tried, not read */
	set_field(u, F_GPU_UTIL, 0.75);
	set_field(u, F_POWER, 312.5);
	set_field(u, F_SM_CLOCK, NAN);
	bus_publish(bus, u);

	memset(u, 0, sizeof *u);
	u->gpu = 0;
	u->tier = TIER_NORMAL;
	u->wall_ns = 1700000001LL * NS_PER_SEC;
	set_field(u, F_CLOCK_REASONS, 0x4 | 0x40);
	u->has_procs = true;
	u->nprocs = 2;
	u->procs[0] = (struct gpu_process){.pid = 1234, .comm = "python", .mem_valid = true,
					   .uid_valid = true, .uid = 1001,
					   .util_valid = true, .used_bytes = 2147483648ULL,
					   .sm_ratio = 0.5, .mem_ratio = 0.25};
	u->procs[1] = (struct gpu_process){.pid = 99, .comm = "tab\there"};
	bus_publish(bus, u);
	bus_note_xid(bus, 0, 79, clock_wall_ns());
	bus_note_ecc_event(bus, 0, true);

	memset(u, 0, sizeof *u);
	u->gpu = 1;
	u->tier = TIER_FAST;
	u->wall_ns = 1700000000LL * NS_PER_SEC;
	set_field(u, F_POWER, 100);
	bus_publish(bus, u);
	bus_set_health(bus, 1, GPU_HEALTH_LOST, "GPU_IS_LOST");
	free(u);
	return bus;
}

static json_t *render(struct bus *bus, const struct self_stats *self)
{
	struct buf out;
	buf_init(&out, 1 << 20);
	assert_int_equal(status_json_render(&out, bus, self), 0);
	json_error_t err;
	json_t *root = json_loads(out.data, 0, &err);
	if (!root)
		fail_msg("invalid JSON (%s at %d): %s", err.text, err.position, out.data);
	buf_free(&out);
	return root;
}

static void test_envelope(void **state)
{
	(void)state;
	struct bus *bus = make_bus();
	struct self_stats self = {.start_wall_ns = 1700000000LL * NS_PER_SEC, .mode = MODE_REPLAY,
				  .replay_speed = 2};
	snprintf(self.mode_detail, sizeof self.mode_detail, "data/recordings/h200.csv");
	json_t *root = render(bus, &self);
	assert_string_equal(json_string_value(json_object_get(root, "status")), "success");
	json_t *data = json_object_get(root, "data");
	assert_non_null(data);
	assert_string_equal(json_string_value(json_object_get(data, "mode")), "replay");
	assert_string_equal(json_string_value(json_object_get(data, "detail")),
			    "data/recordings/h200.csv");
	assert_true(json_number_value(json_object_get(data, "replay_speed")) == 2);
	assert_true(json_number_value(json_object_get(data, "start_time")) == 1700000000);
	assert_int_equal(json_array_size(json_object_get(data, "gpus")), 2);
	json_decref(root);
	bus_destroy(bus);
}

static void test_gpu_up(void **state)
{
	(void)state;
	struct bus *bus = make_bus();
	json_t *root = render(bus, NULL);
	json_t *g = json_array_get(json_object_get(json_object_get(root, "data"), "gpus"), 0);
	assert_non_null(g);
	assert_int_equal(json_integer_value(json_object_get(g, "gpu")), 0);
	assert_string_equal(json_string_value(json_object_get(g, "uuid")), "GPU-aaaa");
	assert_string_equal(json_string_value(json_object_get(g, "model")),
			    "NVIDIA H200 \"SXM\" \\ 141GB");
	assert_string_equal(json_string_value(json_object_get(g, "pci_bus_id")), "00000000:19:00.0");
	assert_string_equal(json_string_value(json_object_get(g, "serial")), "1650924060001");
	assert_string_equal(json_string_value(json_object_get(g, "driver_version")), "580.65.06");
	assert_string_equal(json_string_value(json_object_get(g, "cuda_version")), "13.0");
	assert_string_equal(json_string_value(json_object_get(g, "architecture")), "hopper");
	assert_string_equal(json_string_value(json_object_get(g, "compute_capability")), "9.0");
	assert_string_equal(json_string_value(json_object_get(g, "mig_mode")), "enabled");
	assert_string_equal(json_string_value(json_object_get(g, "source")), "replay");
	assert_string_equal(json_string_value(json_object_get(g, "health")), "up");
	assert_string_equal(json_string_value(json_object_get(g, "health_reason")), "");
	assert_true(json_number_value(json_object_get(g, "max_sm_clock_hz")) == 1980e6);
	assert_true(json_number_value(json_object_get(g, "max_mem_clock_hz")) == 3201e6);
	assert_int_equal(json_integer_value(json_object_get(g, "pcie_max_gen")), 5);
	assert_int_equal(json_integer_value(json_object_get(g, "pcie_max_width")), 16);
	assert_true(json_is_true(json_object_get(g, "gpm_supported")));

	json_t *st = json_object_get(g, "sample_time");
	assert_true(json_number_value(json_object_get(st, "fast")) == 1700000000.5);
	assert_true(json_number_value(json_object_get(st, "normal")) == 1700000001);
	assert_true(json_is_null(json_object_get(st, "slow")));

	json_t *fields = json_object_get(g, "fields");
	assert_true(json_number_value(json_object_get(fields, "gpu_util")) == 0.75);
	assert_true(json_number_value(json_object_get(fields, "power")) == 312.5);
	/* NaN is not JSON: null. Never-read fields are absent. */
	assert_true(json_is_null(json_object_get(fields, "sm_clock")));
	assert_null(json_object_get(fields, "mem_free"));
	assert_null(json_object_get(fields, "temp"));
	assert_non_null(json_object_get(fields, "clock_reasons"));
	assert_int_equal(json_array_size(json_object_get(g, "stale_fields")), 0);

	json_t *tr = json_object_get(g, "throttle_reasons");
	assert_int_equal(json_array_size(tr), 2);
	assert_string_equal(json_string_value(json_array_get(tr, 0)), "sw_power_cap");
	assert_string_equal(json_string_value(json_array_get(tr, 1)), "hw_thermal_slowdown");

	json_t *procs = json_object_get(g, "processes");
	assert_int_equal(json_array_size(procs), 2);
	json_t *p0 = json_array_get(procs, 0), *p1 = json_array_get(procs, 1);
	assert_int_equal(json_integer_value(json_object_get(p0, "pid")), 1234);
	assert_string_equal(json_string_value(json_object_get(p0, "comm")), "python");
	assert_int_equal(json_integer_value(json_object_get(p0, "used_bytes")), 2147483648LL);
	assert_true(json_number_value(json_object_get(p0, "sm_ratio")) == 0.5);
	assert_true(json_number_value(json_object_get(p0, "mem_ratio")) == 0.25);
	assert_string_equal(json_string_value(json_object_get(p1, "comm")), "tab\there");
	assert_int_equal(json_integer_value(json_object_get(p0, "uid")), 1001);
	assert_true(json_is_null(json_object_get(p1, "uid"))); /* unread: absent, never 0 (root) */
	assert_true(json_is_null(json_object_get(p1, "used_bytes")));
	assert_true(json_is_null(json_object_get(p1, "sm_ratio")));
	assert_int_equal(json_integer_value(json_object_get(g, "processes_dropped")), 0);

	json_t *xid = json_object_get(g, "xid");
	assert_int_equal(json_array_size(xid), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(xid, 0), "code")), 79);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(xid, 0), "count")), 1);
	assert_int_equal(json_integer_value(json_object_get(g, "xid_other")), 0);
	json_t *ecc = json_object_get(g, "ecc_events");
	assert_int_equal(json_integer_value(json_object_get(ecc, "single_bit")), 0);
	assert_int_equal(json_integer_value(json_object_get(ecc, "double_bit")), 1);
	json_decref(root);
	bus_destroy(bus);
}

static void test_gpu_lost(void **state)
{
	(void)state;
	struct bus *bus = make_bus();
	json_t *root = render(bus, NULL);
	json_t *data = json_object_get(root, "data");
	assert_string_equal(json_string_value(json_object_get(data, "mode")), "none");
	assert_true(json_is_null(json_object_get(data, "replay_speed")));
	json_t *g = json_array_get(json_object_get(data, "gpus"), 1);
	assert_string_equal(json_string_value(json_object_get(g, "health")), "lost");
	assert_string_equal(json_string_value(json_object_get(g, "health_reason")), "GPU_IS_LOST");
	/* Invalid UTF-8 from the driver becomes '?'. */
	assert_string_equal(json_string_value(json_object_get(g, "model")), "bad ? utf8");
	assert_string_equal(json_string_value(json_object_get(g, "compute_capability")), "");
	assert_string_equal(json_string_value(json_object_get(g, "mig_mode")), "unknown");
	assert_int_equal(json_object_size(json_object_get(g, "fields")), 0);
	json_t *stale = json_object_get(g, "stale_fields");
	/* power, and the integral the bus derives from it */
	assert_int_equal(json_array_size(stale), 2);
	assert_string_equal(json_string_value(json_array_get(stale, 0)), "power");
	assert_string_equal(json_string_value(json_array_get(stale, 1)), "power_energy");
	assert_true(json_is_null(json_object_get(g, "throttle_reasons")));
	assert_int_equal(json_array_size(json_object_get(g, "processes")), 0);
	assert_int_equal(json_integer_value(json_object_get(g, "lost_total")), 1);
	json_decref(root);
	bus_destroy(bus);
}

static void test_empty_and_bound(void **state)
{
	(void)state;
	struct bus *bus;
	assert_int_equal(bus_create(&bus), 0);
	json_t *root = render(bus, NULL);
	assert_int_equal(json_array_size(json_object_get(json_object_get(root, "data"), "gpus")), 0);
	json_decref(root);
	bus_destroy(bus);

	bus = make_bus();
	struct buf small;
	buf_init(&small, 200);
	assert_int_equal(status_json_render(&small, bus, NULL), GPULSE_ELIMIT);
	buf_free(&small);
	bus_destroy(bus);
}

static void test_escaping(void **state)
{
	(void)state;
	struct bus *bus;
	assert_int_equal(bus_create(&bus), 0);
	struct gpu_identity id = {.index = 3, .uuid = "GPU-c", .mig_mode = -1};
	snprintf(id.name, sizeof id.name, "q\"b\\s\x01\x1f\n\r\t caf\xc3\xa9 \xe2\x82");
	int slot;
	assert_int_equal(bus_attach_gpu(bus, &id, &slot), 0);
	json_t *root = render(bus, NULL);
	json_t *g = json_array_get(json_object_get(json_object_get(root, "data"), "gpus"), 0);
	assert_string_equal(json_string_value(json_object_get(g, "model")),
			    "q\"b\\s\x01\x1f\n\r\t caf\xc3\xa9 ??");
	assert_int_equal(json_integer_value(json_object_get(g, "gpu")), 3);
	json_decref(root);
	bus_destroy(bus);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envelope),
		cmocka_unit_test(test_gpu_up),
		cmocka_unit_test(test_gpu_lost),
		cmocka_unit_test(test_empty_and_bound),
		cmocka_unit_test(test_escaping),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
