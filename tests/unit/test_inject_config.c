/* Tests for the injection library's settings (src/inject/inject_config.c:
 * modes, budgets, socket paths, bad values keep defaults with a message)
 * and its capture buffer (src/inject/capture.c: events become
 * TRACE_EVENTS frames that decode, the cap drops and counts, names are
 * interned with an "other" overflow, TRACE_END closes the capture). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "inject/capture.h"
#include "inject/inject_config.h"
#include "common/status.h"
#include "wire/wire.h"

static const char *const *env_table;

static const char *fake_get(const char *name)
{
	for (const char *const *p = env_table; p && p[0]; p += 2)
		if (strcmp(p[0], name) == 0)
			return p[1];
	return NULL;
}

static void test_parse_mode_budget(void **state)
{
	(void)state;
	uint8_t m = 99;
	char nvtx[WIRE_NAME_MAX + 1] = "";
	assert_int_equal(inject_parse_mode("full", &m, nvtx, sizeof nvtx), 0);
	assert_int_equal(m, WIRE_MODE_FULL);
	assert_int_equal(inject_parse_mode("profiler-api", &m, nvtx, sizeof nvtx), 0);
	assert_int_equal(m, WIRE_MODE_FOCUSED_PROFILER);
	assert_int_equal(inject_parse_mode("nvtx:train step", &m, nvtx, sizeof nvtx), 0);
	assert_int_equal(m, WIRE_MODE_FOCUSED_NVTX);
	assert_string_equal(nvtx, "train step");
	assert_int_equal(inject_parse_mode("nvtx:", &m, nvtx, sizeof nvtx), GPULSE_EINVAL);
	assert_int_equal(inject_parse_mode("Full", &m, nvtx, sizeof nvtx), GPULSE_EINVAL);
	assert_string_equal(inject_mode_name(WIRE_MODE_OFF), "off");
	uint32_t ppm = 0;
	assert_int_equal(inject_parse_budget("0.5%", &ppm), 0);
	assert_int_equal(ppm, 5000);
	assert_int_equal(inject_parse_budget("2500ppm", &ppm), 0);
	assert_int_equal(ppm, 2500);
	assert_int_equal(inject_parse_budget("0.01", &ppm), 0);
	assert_int_equal(ppm, 10000);
	assert_int_equal(inject_parse_budget("100%", &ppm), 0);
	assert_int_equal(ppm, 1000000);
	assert_int_equal(inject_parse_budget("0%", &ppm), GPULSE_EINVAL);
	assert_int_equal(inject_parse_budget("101%", &ppm), GPULSE_EINVAL);
	assert_int_equal(inject_parse_budget("-1%", &ppm), GPULSE_EINVAL);
	assert_int_equal(inject_parse_budget("1 %", &ppm), GPULSE_EINVAL);
	assert_int_equal(inject_parse_budget("nan", &ppm), GPULSE_EINVAL);
	assert_int_equal(inject_parse_budget("", &ppm), GPULSE_EINVAL);
}

static void test_load_defaults_and_paths(void **state)
{
	(void)state;
	struct inject_config c;
	char err[512];
	static const char *const none[] = { NULL };
	env_table = none;
	inject_config_load(&c, fake_get, 1000, err, sizeof err);
	assert_string_equal(err, "");
	assert_int_equal(c.mode, WIRE_MODE_CONTINUOUS);
	assert_int_equal(c.budget_ppm, 5000);
	assert_false(c.mode_set || c.budget_set); /* gpulsed's CONFIG may set them */
	assert_int_equal(c.topk, 64);
	assert_string_equal(c.socket_paths[0], WIRE_DEFAULT_SOCKET);
	assert_string_equal(c.socket_paths[1], "/tmp/gpulse-1000/inject.sock");
	assert_string_equal(c.dump_path, "");
	static const char *const xdg[] = { "XDG_RUNTIME_DIR", "/run/user/1000", NULL };
	env_table = xdg;
	inject_config_load(&c, fake_get, 1000, err, sizeof err);
	assert_string_equal(c.socket_paths[1], "/run/user/1000/gpulse/inject.sock");
	assert_string_equal(c.socket_paths[2], "/tmp/gpulse-1000/inject.sock");
	static const char *const set[] = {
		"GPULSE_MODE", "nvtx:step", "GPULSE_BUDGET", "1%", "GPULSE_SOCKET", "/x/y.sock",
		"GPULSE_TOPK", "10", "GPULSE_INJECT_DUMP", "/tmp/d.json",
		"GPULSE_INJECT_SKIP", "uvm,nvtx,probe,sync,copies,perthread,interpose,calibrate",
		"GPULSE_COST_NS", "1500", "GPULSE_TAIL_NS", "5e8", NULL,
	};
	env_table = set;
	inject_config_load(&c, fake_get, 0, err, sizeof err);
	assert_string_equal(err, "");
	assert_int_equal(c.mode, WIRE_MODE_FOCUSED_NVTX);
	assert_string_equal(c.nvtx_range, "step");
	assert_int_equal(c.budget_ppm, 10000);
	assert_true(c.mode_set && c.budget_set); /* they outrank gpulsed's CONFIG */
	assert_string_equal(c.socket_paths[0], "/x/y.sock");
	assert_string_equal(c.socket_paths[1], "");
	assert_int_equal(c.topk, 10);
	assert_string_equal(c.dump_path, "/tmp/d.json");
	assert_int_equal(c.skip, INJECT_SKIP_UVM | INJECT_SKIP_NVTX | INJECT_SKIP_PROBE |
				     INJECT_SKIP_SYNC | INJECT_SKIP_COPIES | INJECT_SKIP_PERTHREAD |
				     INJECT_SKIP_INTERPOSE | INJECT_SKIP_CALIBRATE);
	assert_true(c.cost_ns == 1500);
	assert_int_equal(c.tail_ns, 500000000);
}

static void test_load_bad_values_keep_defaults(void **state)
{
	(void)state;
	struct inject_config c;
	char err[1024];
	static const char *const bad[] = {
		"GPULSE_MODE", "turbo", "GPULSE_BUDGET", "lots", "GPULSE_TOPK", "0",
		"GPULSE_INJECT_SKIP", "uvm,gpu", "GPULSE_COST_NS", "-3", "GPULSE_TAIL_NS", "-1", NULL,
	};
	env_table = bad;
	inject_config_load(&c, fake_get, 0, err, sizeof err);
	assert_int_equal(c.mode, WIRE_MODE_CONTINUOUS);
	assert_int_equal(c.budget_ppm, 5000);
	assert_false(c.mode_set || c.budget_set); /* bad values set nothing */
	assert_int_equal(c.topk, 64);
	assert_int_equal(c.skip, INJECT_SKIP_UVM);
	assert_true(c.cost_ns == 2000);
	assert_non_null(strstr(err, "GPULSE_MODE=turbo"));
	assert_non_null(strstr(err, "GPULSE_BUDGET=lots"));
	assert_non_null(strstr(err, "GPULSE_TOPK=0"));
	assert_non_null(strstr(err, "'gpu'"));
	assert_non_null(strstr(err, "GPULSE_COST_NS=-3"));
	assert_non_null(strstr(err, "GPULSE_TAIL_NS=-1"));
	assert_int_equal(c.tail_ns, 2000000000);
}

struct got {
	uint64_t events, end_total, end_dropped;
	int ends, frames;
	int names_other;
	char first_name[WIRE_KERNEL_NAME_MAX + 1];
	int refuse;
};

static int collect(const uint8_t *frame, size_t len, void *user)
{
	struct got *g = user;
	if (g->refuse) {
		g->refuse--;
		return GPULSE_ELIMIT;
	}
	unsigned type;
	uint32_t plen;
	assert_int_equal(wire_header_parse(frame, &type, &plen), 0);
	assert_int_equal(plen + WIRE_HEADER_BYTES, len);
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	char err[200];
	if (wire_decode(&m, type, frame + WIRE_HEADER_BYTES, plen, err, sizeof err))
		fail_msg("%s", err);
	if (type == WIRE_TRACE_EVENTS) {
		assert_int_equal(m.u.trace_events.capture_id, 5);
		if (g->events == 0)
			snprintf(g->first_name, sizeof g->first_name, "%s", m.u.trace_events.events[0].name);
		for (uint32_t i = 0; i < m.u.trace_events.count; i++) {
			const struct wire_event *e = &m.u.trace_events.events[i];
			assert_true(e->end_ns >= e->start_ns);
			if (strcmp(e->name, "other") == 0)
				g->names_other++;
		}
		g->events += m.u.trace_events.count;
		g->frames++;
	} else if (type == WIRE_TRACE_END) {
		g->ends++;
		g->end_total = m.u.trace_end.events_total;
		g->end_dropped = m.u.trace_end.events_dropped;
	} else {
		fail_msg("unexpected %s", wire_type_name(type));
	}
	wire_msg_free(&m);
	return 0;
}

/* GPULSE_DETACH: off unless "1"; anything but 0 or 1 is said and stays off. */
static void test_detach_setting(void **state)
{
	(void)state;
	struct inject_config c;
	char err[1024];
	env_table = NULL;
	inject_config_load(&c, fake_get, 0, err, sizeof err);
	assert_false(c.detach);
	static const char *const on[] = { "GPULSE_DETACH", "1", NULL };
	env_table = on;
	inject_config_load(&c, fake_get, 0, err, sizeof err);
	assert_true(c.detach);
	assert_string_equal(err, "");
	static const char *const bad[] = { "GPULSE_DETACH", "yes", NULL };
	env_table = bad;
	inject_config_load(&c, fake_get, 0, err, sizeof err);
	assert_false(c.detach);
	assert_non_null(strstr(err, "GPULSE_DETACH"));
}

/* GPULSE_SAMPLE_EVERY: a whole number in 1..65536, else 32 and a line. */
static void test_sample_every_setting(void **state)
{
	(void)state;
	struct inject_config c;
	char err[1024];
	env_table = NULL;
	inject_config_load(&c, fake_get, 0, err, sizeof err);
	assert_int_equal(c.sample_every, 32);
	static const char *const ok[] = { "GPULSE_SAMPLE_EVERY", "128", NULL };
	env_table = ok;
	inject_config_load(&c, fake_get, 0, err, sizeof err);
	assert_int_equal(c.sample_every, 128);
	assert_string_equal(err, "");
	static const char *const bad[][3] = { { "GPULSE_SAMPLE_EVERY", "0", NULL },
					      { "GPULSE_SAMPLE_EVERY", "2.5", NULL },
					      { "GPULSE_SAMPLE_EVERY", "70000", NULL },
					      { "GPULSE_SAMPLE_EVERY", "x", NULL } };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		env_table = bad[i];
		inject_config_load(&c, fake_get, 0, err, sizeof err);
		assert_int_equal(c.sample_every, 32);
		assert_non_null(strstr(err, "GPULSE_SAMPLE_EVERY"));
	}
}

/* GPULSE_SAMPLE_OFFSET: floors in [0, 4], else the device's own figure
 * (-1) and a line naming it. */
static void test_sample_offset_setting(void **state)
{
	(void)state;
	struct inject_config c;
	char err[1024];
	env_table = NULL;
	inject_config_load(&c, fake_get, 0, err, sizeof err);
	assert_true(c.offset_floors < 0);
	static const char *const ok[][3] = { { "GPULSE_SAMPLE_OFFSET", "1.5", NULL },
					     { "GPULSE_SAMPLE_OFFSET", "0", NULL } };
	static const double want[] = { 1.5, 0 };
	for (size_t i = 0; i < 2; i++) {
		env_table = ok[i];
		inject_config_load(&c, fake_get, 0, err, sizeof err);
		assert_true(c.offset_floors == want[i]);
		assert_string_equal(err, "");
	}
	static const char *const bad[][3] = { { "GPULSE_SAMPLE_OFFSET", "-1", NULL },
					      { "GPULSE_SAMPLE_OFFSET", "4.5", NULL },
					      { "GPULSE_SAMPLE_OFFSET", "2x", NULL } };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		env_table = bad[i];
		inject_config_load(&c, fake_get, 0, err, sizeof err);
		assert_true(c.offset_floors < 0);
		assert_non_null(strstr(err, "GPULSE_SAMPLE_OFFSET="));
	}
}

static void test_capture_frames_and_cap(void **state)
{
	(void)state;
	struct capture *c = capture_create();
	assert_non_null(c);
	assert_false(capture_pending(c));
	assert_int_equal(capture_start(c, 5, 3000, 0, 1000), 0);
	assert_true(capture_active(c, 0));
	assert_true(capture_active(c, 999));
	assert_false(capture_active(c, 1000));
	assert_false(capture_active(c, -1)); /* before the capture began */
	char name[32];
	for (int i = 0; i < 3500; i++) {
		snprintf(name, sizeof name, "k%d", i % 2000); /* 2000 names > the table */
		capture_add(c, WIRE_EV_KERNEL, 0, 0, 7, (uint64_t)i * 10, (uint64_t)i * 10 + 5, 0, name);
	}
	struct got g = { 0 };
	/* Before the end time: events go out, no TRACE_END yet. */
	assert_int_equal(capture_drain(c, 500, 0, collect, &g), 0);
	assert_int_equal(g.events, 3000);
	assert_true(g.frames >= 3); /* split at the frame bound */
	assert_int_equal(g.ends, 0);
	assert_string_equal(g.first_name, "k0");
	assert_true(g.names_other > 0);
	assert_true(capture_pending(c));
	/* After the end: TRACE_END counts every event, kept and dropped. */
	assert_int_equal(capture_drain(c, 2000, 0, collect, &g), 0);
	assert_int_equal(g.ends, 1);
	assert_int_equal(g.end_total, 3500);
	assert_int_equal(g.end_dropped, 500);
	assert_false(capture_pending(c));
	/* Added after the end: ignored. */
	capture_add(c, WIRE_EV_COPY, WIRE_COPY_H2D, 0, 1, 1, 2, 3, "H2D");
	capture_destroy(c);
}

static void test_capture_refused_frames_counted(void **state)
{
	(void)state;
	struct capture *c = capture_create();
	assert_int_equal(capture_start(c, 5, 0, 0, 100), 0);
	for (int i = 0; i < 10; i++)
		capture_add(c, WIRE_EV_MEMSET, WIRE_COPY_MEMSET, 0, 1, 1, 2, 64, "memset");
	struct got g = { .refuse = 2 };
	/* The events' frame is refused (lost, counted), then END is refused
	 * and comes again on the next drain. */
	assert_int_equal(capture_drain(c, 0, 1, collect, &g), GPULSE_ELIMIT);
	assert_true(capture_pending(c));
	assert_int_equal(capture_drain(c, 0, 1, collect, &g), 0);
	assert_int_equal(g.ends, 1);
	assert_int_equal(g.end_total, 10);
	assert_int_equal(g.end_dropped, 10);
	capture_destroy(c);
	capture_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_mode_budget),
		cmocka_unit_test(test_load_defaults_and_paths),
		cmocka_unit_test(test_load_bad_values_keep_defaults),
		cmocka_unit_test(test_detach_setting),
		cmocka_unit_test(test_sample_every_setting),
		cmocka_unit_test(test_sample_offset_setting),
		cmocka_unit_test(test_capture_frames_and_cap),
		cmocka_unit_test(test_capture_refused_frames_counted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
