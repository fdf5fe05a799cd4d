/* The `profiling:` section of gpulsed's configuration (src/daemon/config.c
 * key table, src/daemon/profiling.c checks): defaults, parsed values,
 * ranges, the checks the table cannot make (mode names, nvtx needs a
 * range, id lists), and a dump that reads back equal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "daemon/config.h"
#include "daemon/profiling.h"
#include "common/status.h"

static int load(struct gpulse_config *c, const char *yaml, char *err, size_t errlen)
{
	config_defaults(c);
	int rc = config_parse(c, yaml, strlen(yaml), "t.yml", err, errlen);
	return rc ? rc : config_validate(c, "t.yml", err, errlen);
}

static void test_defaults(void **state)
{
	(void)state;
	struct gpulse_config c;
	config_defaults(&c);
	assert_true(c.profiling.enabled);
	assert_string_equal(c.profiling.socket, "/run/gpulse/inject.sock");
	assert_string_equal(c.profiling.mode, "continuous");
	assert_true(c.profiling.budget_percent == 0.5);
	assert_int_equal(c.profiling.max_clients, 128);
	assert_int_equal(c.profiling.max_clients_per_uid, 0);   /* a quarter, in the server */
	assert_true(c.profiling.idle_timeout_ns == 30000000000LL);
	assert_int_equal(c.profiling.kernels_per_process, 32);
	char err[256];
	assert_int_equal(config_validate(&c, "d", err, sizeof err), 0);
}

static void test_values(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[512];
	const char *y = "profiling:\n"
			"  socket: /tmp/x/inject.sock\n"
			"  max_clients: 7\n"
			"  max_clients_per_uid: 3\n"
			"  idle_timeout: 2s\n"
			"  allowed_uids: \"0, 1000\"\n"
			"  kernels_per_process: 8\n"
			"  process_expiry: 30s\n"
			"  mode: nvtx\n"
			"  nvtx_range: train_step\n"
			"  budget_percent: 0.1\n"
			"  store_interval: 5s\n";
	if (load(&c, y, err, sizeof err))
		fail_msg("%s", err);
	assert_string_equal(c.profiling.socket, "/tmp/x/inject.sock");
	assert_int_equal(c.profiling.max_clients, 7);
	assert_int_equal(c.profiling.max_clients_per_uid, 3);
	assert_true(c.profiling.idle_timeout_ns == 2000000000LL);
	assert_int_equal(c.profiling.kernels_per_process, 8);
	assert_true(c.profiling.process_expiry_ns == 30000000000LL);
	assert_string_equal(c.profiling.nvtx_range, "train_step");

	/* The dump reads back equal, and a changed key is not equal. */
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(config_dump(&c, &b), 0);
	assert_non_null(strstr(b.data, "\nprofiling:\n"));
	struct gpulse_config back;
	config_defaults(&back);
	if (config_parse(&back, b.data, b.len, "dump", err, sizeof err))
		fail_msg("%s\n%s", err, b.data);
	assert_true(config_equal(&c, &back));
	assert_true(profiling_config_equal(&c, &back));
	back.profiling.max_kernel_series++;
	assert_false(config_equal(&c, &back));
	buf_free(&b);
}

static void test_refused(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[512];
	static const struct {
		const char *yaml, *want;
	} bad[] = {
		{"profiling:\n  mode: fast\n", "profiling.mode: \"fast\" is not one of"},
		{"profiling:\n  mode: nvtx\n", "needs profiling.nvtx_range"},
		{"profiling:\n  allowed_uids: \"1000,bob\"\n", "profiling.allowed_uids: \"bob\""},
		{"profiling:\n  allowed_gids: \"-5\"\n", "profiling.allowed_gids"},
		{"profiling:\n  max_clients: 0\n", "max_clients"},
		{"profiling:\n  max_clients: 8\n  max_clients_per_uid: 9\n",
		 "profiling.max_clients_per_uid (9) is over profiling.max_clients (8)"},
		{"profiling:\n  idle_timeout: 0s\n", "idle_timeout"},
		{"profiling:\n  kernels_per_process: 257\n", "kernels_per_process"},
		{"profiling:\n  budget_percent: 0\n", "budget_percent"},
		{"profiling:\n  budget_percent: 101\n", "budget_percent"},
		{"profiling:\n  socket: \"\"\n", "profiling.socket is empty"},
		{"profiling:\n  color: red\n", "color"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		int rc = load(&c, bad[i].yaml, err, sizeof err);
		if (rc == 0 || !strstr(err, bad[i].want))
			fail_msg("%s: rc %d, \"%s\" lacks \"%s\"", bad[i].yaml, rc, err, bad[i].want);
	}
	/* Turned off, an empty socket is fine. */
	assert_int_equal(load(&c, "profiling:\n  enabled: false\n  socket: \"\"\n", err, sizeof err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
