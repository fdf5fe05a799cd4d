/* The `alerting:` section of the configuration: defaults (the default
 * inhibit rule among them), every key parsed, errors with FILE:LINE:COL
 * for bad lists, matchers, labels and durations (the config then left
 * untouched), the checks config_validate adds, the dump reading back to
 * the same values, and the translation into a running notifier. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/alerting.h"
#include "common/buf.h"
#include "common/clock.h"
#include "daemon/config.h"
#include "alert/notify.h"
#include "common/status.h"

#define NAME "t.yml"

static int parse(struct gpulse_config *c, const char *yaml, char *err, size_t errlen)
{
	return config_parse(c, yaml, strlen(yaml), NAME, err, errlen);
}

static void test_defaults(void **state)
{
	(void)state;
	struct gpulse_config c;
	config_defaults(&c);
	assert_int_equal(c.alerting.resend_delay_ns, 60 * NS_PER_SEC);
	assert_string_equal(c.alerting.group_by[0], "alertname");
	assert_string_equal(c.alerting.group_by[1], "");
	assert_int_equal(c.alerting.group_wait_ns, 30 * NS_PER_SEC);
	assert_int_equal(c.alerting.group_interval_ns, 300 * NS_PER_SEC);
	assert_int_equal(c.alerting.repeat_interval_ns, 4 * 3600 * NS_PER_SEC);
	assert_int_equal(c.alerting.ninhibit_rules, 1);
	assert_string_equal(c.alerting.inhibit_rules[0].source_matchers[0],
			    "alertname=~\"GPUDown|GPULost|GPUFallenOffBus\"");
	assert_string_equal(c.alerting.inhibit_rules[0].equal[0], "gpu");
	assert_int_equal(alerting_receiver_count(&c), 0);
	assert_false(c.alerting.alertmanagers.inhibit);
	char err[256];
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
}

static const char full[] =
	"alerting:\n"
	"  external_url: https://node7.example:9401\n"
	"  external_labels:\n"
	"    cluster: a100-east\n"
	"    node: node7\n"
	"  resend_delay: 30s\n"
	"  alertmanagers:\n"
	"    urls: [\"http://am1:9093\", \"http://am2:9093/\"]\n"
	"    timeout: 5s\n"
	"    inhibit: true\n"
	"  webhooks:\n"
	"    urls:\n"
	"      - https://hooks.example/gpu\n"
	"    timeout: 3s\n"
	"  exec:\n"
	"    path: /bin/true\n"
	"    args: [--alert, \"x y\"]\n"
	"    timeout: 2s\n"
	"  queue:\n"
	"    path: /var/lib/gpulse/aq\n"
	"    max_bytes: 1048576\n"
	"    max_batches: 500\n"
	"  retry_backoff: 250ms\n"
	"  max_retry_backoff: 2m\n"
	"  group_by: [alertname, gpu]\n"
	"  group_wait: 10s\n"
	"  group_interval: 1m\n"
	"  repeat_interval: 12h\n"
	"  inhibit_rules:\n"
	"    - source_matchers: ['severity=\"critical\"']\n"
	"      target_matchers: ['severity=~\"warning|info\"']\n"
	"      equal: [gpu, uuid]\n"
	"    - source_matchers: [alertname=GPULost]\n";

static void test_full(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[512];
	config_defaults(&c);
	assert_int_equal(parse(&c, full, err, sizeof err), 0);
	const typeof(c.alerting) *a = &c.alerting;
	assert_string_equal(a->external_url, "https://node7.example:9401");
	assert_string_equal(a->external_labels[0][0], "cluster");
	assert_string_equal(a->external_labels[0][1], "a100-east");
	assert_string_equal(a->external_labels[1][0], "node");
	assert_string_equal(a->external_labels[2][0], "");
	assert_int_equal(a->resend_delay_ns, 30 * NS_PER_SEC);
	assert_string_equal(a->alertmanagers.urls[1], "http://am2:9093/");
	assert_string_equal(a->alertmanagers.urls[2], "");
	assert_int_equal(a->alertmanagers.timeout_ns, 5 * NS_PER_SEC);
	assert_true(a->alertmanagers.inhibit);
	assert_string_equal(a->webhooks.urls[0], "https://hooks.example/gpu");
	assert_string_equal(a->exec.args[1], "x y");
	assert_int_equal(a->queue.max_bytes, 1048576);
	assert_int_equal(a->queue.max_batches, 500);
	assert_int_equal(a->retry_backoff_ns, 250 * NS_PER_MS);
	assert_string_equal(a->group_by[1], "gpu");
	assert_int_equal(a->repeat_interval_ns, 12 * 3600 * NS_PER_SEC);
	assert_int_equal(a->ninhibit_rules, 2);
	assert_string_equal(a->inhibit_rules[0].target_matchers[0], "severity=~\"warning|info\"");
	assert_string_equal(a->inhibit_rules[0].equal[1], "uuid");
	assert_string_equal(a->inhibit_rules[1].source_matchers[0], "alertname=GPULost");
	assert_string_equal(a->inhibit_rules[1].equal[0], "");
	assert_int_equal(alerting_receiver_count(&c), 4);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);

	/* The dump reads back to the same values. */
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(config_dump(&c, &b), 0);
	struct gpulse_config back;
	config_defaults(&back);
	assert_int_equal(config_parse(&back, b.data, b.len, "dump.yml", err, sizeof err), 0);
	assert_true(config_equal(&c, &back));
	buf_free(&b);

	/* An empty list switches inhibition off. */
	assert_int_equal(parse(&c, "alerting:\n  inhibit_rules: []\n", err, sizeof err), 0);
	assert_int_equal(c.alerting.ninhibit_rules, 0);
}

static void test_errors(void **state)
{
	(void)state;
	static const struct {
		const char *yaml;
		const char *where; /* "t.yml:LINE:COL:" */
		const char *what;
	} cases[] = {
		{"alerting:\n  inhibit_rules:\n    - source_matchers: ['alertname=~\"(\"']\n", "t.yml:3:25:",
		 "source_matchers"},
		{"alerting:\n  inhibit_rules:\n    - source_matchers: [a=b]\n      equals: [gpu]\n",
		 "t.yml:4:7:", "unknown key"},
		{"alerting:\n  inhibit_rules:\n    - equal: [gpu]\n", "t.yml:3:7:", "at least one matcher"},
		{"alerting:\n  inhibit_rules:\n    - source_matchers: [a=b]\n      equal: [gpu-index]\n",
		 "t.yml:4:15:", "not a label name"},
		{"alerting:\n  group_by: [alertname, 3gpu]\n", "t.yml:2:25:", "not a label name"},
		{"alerting:\n  external_labels:\n    9x: y\n", "t.yml:3:5:", "label names"},
		{"alerting:\n  external_labels: {a: b, a: c}\n", "t.yml:2:27:", "given twice"},
		{"alerting:\n  group_wait: soon\n", "t.yml:2:15:", "bad duration"},
		{"alerting:\n  alertmanagers:\n    urls: [a, b, c, d, e, f, g, h, i]\n", "t.yml:3:36:",
		 "more than 8"},
		{"alerting:\n  webhooks:\n    url: [http://x]\n", "t.yml:3:5:", "did you mean"},
		{"alerting:\n  queue:\n    max_bytes: 10\n", "t.yml:3:16:", "out of range"},
		{"alerting:\n  alertmanagers:\n    urls: http://x\n", "t.yml:3:11:", "a list of strings"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct gpulse_config c, before;
		char err[512] = "";
		config_defaults(&c);
		before = c;
		int rc = parse(&c, cases[i].yaml, err, sizeof err);
		if (rc != GPULSE_EPARSE || strncmp(err, cases[i].where, strlen(cases[i].where)) != 0 ||
		    !strstr(err, cases[i].what))
			fail_msg("case %zu: rc %d, message \"%s\", wanted \"%s ... %s\"", i, rc, err,
				 cases[i].where, cases[i].what);
		assert_memory_equal(&c, &before, sizeof c);
	}
}

static void test_validate(void **state)
{
	(void)state;
	static const struct {
		const char *yaml;
		const char *what;
	} cases[] = {
		{"alerting:\n  alertmanagers:\n    urls: [am1:9093]\n", "alerting.alertmanagers.urls[0]"},
		{"alerting:\n  webhooks:\n    urls: [\"ftp://x\"]\n", "alerting.webhooks.urls[0]"},
		{"alerting:\n  external_url: node7\n", "alerting.external_url"},
		{"alerting:\n  exec:\n    path: hook.sh\n", "absolute"},
		{"alerting:\n  exec:\n    path: /nonexistent/hook\n", "not an executable"},
		{"alerting:\n  exec:\n    args: [x]\n", "without alerting.exec.path"},
		{"alerting:\n  group_by: [\"...\", gpu]\n", "must be alone"},
		{"alerting:\n  retry_backoff: 2m\n  max_retry_backoff: 1m\n", "must not be shorter"},
		{"alerting:\n  alertmanagers:\n    bearer_token_file: /nonexistent/token\n",
		 "alerting.alertmanagers.bearer_token_file"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct gpulse_config c;
		char err[512] = "";
		config_defaults(&c);
		if (parse(&c, cases[i].yaml, err, sizeof err) != 0)
			fail_msg("case %zu does not parse: %s", i, err);
		int rc = config_validate(&c, NAME, err, sizeof err);
		if (rc != GPULSE_EINVAL || strncmp(err, NAME ": ", strlen(NAME) + 2) != 0 ||
		    !strstr(err, cases[i].what))
			fail_msg("case %zu: rc %d, message \"%s\", wanted \"%s\"", i, rc, err, cases[i].what);
	}
	/* A world-readable token file is refused too. */
	char tok[] = "/tmp/gpulse-token-XXXXXX";
	int fd = mkstemp(tok);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "s3cret\n", 7), 7);
	close(fd);
	assert_int_equal(chmod(tok, 0644), 0);
	struct gpulse_config c;
	char err[512], yaml[256];
	config_defaults(&c);
	snprintf(yaml, sizeof yaml, "alerting:\n  webhooks:\n    bearer_token_file: %s\n", tok);
	assert_int_equal(parse(&c, yaml, err, sizeof err), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_int_equal(chmod(tok, 0600), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	unlink(tok);
}

static void test_translation(void **state)
{
	(void)state;
	char dir[] = "/tmp/gpulse-alertcfg-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct gpulse_config c;
	char err[512], yaml[512], qdir[256];
	config_defaults(&c);
	/* No queue path: next to the store, or none without a store. */
	alerting_queue_dir(&c, qdir, sizeof qdir);
	assert_string_equal(qdir, "");
	snprintf(c.storage.path, sizeof c.storage.path, "%s/gpulse.db", dir);
	alerting_queue_dir(&c, qdir, sizeof qdir);
	char want[300];
	snprintf(want, sizeof want, "%s/gpulse.db.alert-queue", dir);
	assert_string_equal(qdir, want);
	snprintf(yaml, sizeof yaml,
		 "alerting:\n  alertmanagers:\n    urls: [\"http://127.0.0.1:9/\"]\n"
		 "  webhooks:\n    urls: [\"http://127.0.0.1:9/a\", \"http://127.0.0.1:9/b\"]\n");
	assert_int_equal(parse(&c, yaml, err, sizeof err), 0);
	struct alerting *a;
	assert_int_equal(alerting_start(&a, &c, err, sizeof err), 0);
	struct stat st;
	assert_int_equal(stat(want, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	struct notify_stats ns;
	alerting_stats(alerting_sink_ctx(a), &ns);
	assert_int_equal(ns.nreceivers, 3);
	assert_int_equal(ns.receivers[0].kind, NOTIFY_ALERTMANAGER);
	assert_int_equal(ns.queue_max_batches, 10000);
	/* Reload: one webhook fewer, a smaller queue. */
	snprintf(yaml, sizeof yaml,
		 "alerting:\n  webhooks:\n    urls: [\"http://127.0.0.1:9/b\"]\n  queue:\n    max_batches: 7\n");
	assert_int_equal(parse(&c, yaml, err, sizeof err), 0);
	assert_int_equal(alerting_reload(a, &c, err, sizeof err), 0);
	alerting_stats(alerting_sink_ctx(a), &ns);
	assert_int_equal(ns.nreceivers, 2);
	assert_int_equal(ns.queue_max_batches, 7);
	assert_ptr_equal(alerting_sink(), notify_sink);
	alerting_stop(a);
	alerting_stop(NULL);
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_translation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
