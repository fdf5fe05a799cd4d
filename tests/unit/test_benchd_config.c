/* The `bench:` section of gpulsed's configuration (src/daemon/benchd.c):
 * its defaults, the schedule's words and durations, and each value the
 * key table cannot judge alone refused with the key named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/benchd.h"
#include "common/clock.h"
#include "daemon/config.h"
#include "common/status.h"

static void schedules(void **state)
{
	(void)state;
	assert_true(benchd_schedule_ns("weekly") == 7LL * 86400 * NS_PER_SEC);
	assert_true(benchd_schedule_ns("daily") == 86400LL * NS_PER_SEC);
	assert_true(benchd_schedule_ns("off") == 0);
	assert_true(benchd_schedule_ns("72h") == 72LL * 3600 * NS_PER_SEC);
	assert_true(benchd_schedule_ns("1m") == 60 * NS_PER_SEC);
	assert_true(benchd_schedule_ns("30s") < 0); /* too often */
	assert_true(benchd_schedule_ns("fortnightly") < 0);
	assert_true(benchd_schedule_ns("") < 0);
}

static void defaults_validate(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[256];
	config_defaults(&c);
	assert_true(c.bench.enabled);
	assert_string_equal(c.bench.schedule, "weekly");
	assert_true(c.bench.idle_for_ns == 30LL * 60 * NS_PER_SEC);
	assert_string_equal(c.bench.mode, "quick");
	assert_int_equal(benchd_validate(&c, "g.yml", err, sizeof err), 0);
	assert_int_equal(config_validate(&c, "g.yml", err, sizeof err), 0);
}

static void parse_and_refuse(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[256];
	config_defaults(&c);
	const char *ok = "bench:\n  schedule: 72h\n  idle_for: 5m\n  mode: full\n"
			 "  fleet_prometheus_url: \"https://prom.example:9090\"\n";
	assert_int_equal(config_parse(&c, ok, strlen(ok), "g.yml", err, sizeof err), 0);
	assert_int_equal(config_validate(&c, "g.yml", err, sizeof err), 0);
	assert_true(c.bench.idle_for_ns == 300 * NS_PER_SEC);
	assert_string_equal(c.bench.mode, "full");

	static const struct {
		const char *yaml, *want;
	} bad[] = {
		{"bench:\n  schedule: hourly-ish\n", "g.yml: bench.schedule: \"hourly-ish\" is not weekly, daily, off"},
		{"bench:\n  mode: slow\n", "g.yml: bench.mode: \"slow\" is not quick or full"},
		{"bench:\n  noise_floor: 0.1\n  noise_ceiling: 0.05\n", "bench.noise_floor (0.1) is above bench.noise_ceiling"},
		{"bench:\n  min_runs: 9\n  baseline_runs: 8\n", "bench.min_runs (9) is above bench.baseline_runs (8)"},
		{"bench:\n  fleet_prometheus_url: prom:9090\n", "bench.fleet_prometheus_url: \"prom:9090\" is not an http"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		config_defaults(&c);
		assert_int_equal(config_parse(&c, bad[i].yaml, strlen(bad[i].yaml), "g.yml", err, sizeof err), 0);
		int rc = config_validate(&c, "g.yml", err, sizeof err);
		if (rc != GPULSE_EINVAL || !strstr(err, bad[i].want))
			fail_msg("case %zu: rc %d \"%s\"", i, rc, err);
	}
	/* Ranges the key table checks, with the file's line. */
	config_defaults(&c);
	const char *range = "bench:\n  idle_utilization_percent: 101\n";
	assert_int_equal(config_parse(&c, range, strlen(range), "g.yml", err, sizeof err), GPULSE_EPARSE);
	assert_non_null(strstr(err, "g.yml:2:"));
	const char *unknown = "bench:\n  idle_minutes: 30\n";
	assert_int_equal(config_parse(&c, unknown, strlen(unknown), "g.yml", err, sizeof err), GPULSE_EPARSE);
	assert_non_null(strstr(err, "idle_minutes"));
}

/* The screen section: its defaults, a variant that is not one, and an
 * interval out of range refused with the file's line. */
static void screen_section(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[256];
	config_defaults(&c);
	assert_true(c.screen.enabled);
	assert_true(c.screen.interval_ns == 86400LL * NS_PER_SEC);
	assert_string_equal(c.screen.variant, "quick");
	const char *ok = "screen:\n  enabled: false\n  interval: 72h\n  variant: full\n";
	assert_int_equal(config_parse(&c, ok, strlen(ok), "g.yml", err, sizeof err), 0);
	assert_int_equal(config_validate(&c, "g.yml", err, sizeof err), 0);
	assert_false(c.screen.enabled);
	assert_true(c.screen.interval_ns == 72LL * 3600 * NS_PER_SEC);
	assert_string_equal(c.screen.variant, "full");

	config_defaults(&c);
	const char *variant = "screen:\n  variant: slow\n";
	assert_int_equal(config_parse(&c, variant, strlen(variant), "g.yml", err, sizeof err), 0);
	assert_int_equal(config_validate(&c, "g.yml", err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "g.yml: screen.variant: \"slow\" is not quick or full"));
	const char *often = "screen:\n  interval: 30s\n";
	assert_int_equal(config_parse(&c, often, strlen(often), "g.yml", err, sizeof err), GPULSE_EPARSE);
	assert_non_null(strstr(err, "g.yml:2:"));
	assert_non_null(strstr(err, "interval"));
	const char *word = "screen:\n  interval: daily-ish\n";
	assert_int_equal(config_parse(&c, word, strlen(word), "g.yml", err, sizeof err), GPULSE_EPARSE);

	struct gpulse_config a, b;
	config_defaults(&a);
	config_defaults(&b);
	b.screen.interval_ns = 3600 * NS_PER_SEC;
	assert_false(benchd_config_equal(&a, &b));
}

static void equality(void **state)
{
	(void)state;
	struct gpulse_config a, b;
	config_defaults(&a);
	config_defaults(&b);
	assert_true(benchd_config_equal(&a, &b));
	assert_true(config_equal(&a, &b));
	b.bench.noise_ceiling = 0.06;
	assert_false(benchd_config_equal(&a, &b));
	assert_false(config_equal(&a, &b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(schedules),
		cmocka_unit_test(defaults_validate),
		cmocka_unit_test(parse_and_refuse),
		cmocka_unit_test(equality),
		cmocka_unit_test(screen_section),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
