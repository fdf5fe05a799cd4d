/* The daemon's configuration file: defaults, a full file, the shipped
 * etc/gpulse.yml, every class of error with its FILE:LINE:COL (and the
 * config left untouched), durations, the security rule, and the
 * translation into the collector's and the HTTP server's structs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <netdb.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/duration.h"
#include "collect/collector.h"
#include "daemon/config.h"
#include "diagnose/diagnose.h"
#include "http/http_server.h"
#include "common/status.h"

#define NAME "t.yml"

static int parse(struct gpulse_config *c, const char *yaml, char *err, size_t errlen)
{
	return config_parse(c, yaml, strlen(yaml), NAME, err, errlen);
}

/* A temporary file holding `content` with `mode`; the caller unlinks it. */
static void temp_file(char *path, size_t len, const char *content, mode_t mode)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, len, "%s/gpulse-test-XXXXXX", dir && dir[0] ? dir : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t n = strlen(content);
	assert_int_equal(write(fd, content, n), (ssize_t)n);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void test_defaults(void **state)
{
	(void)state;
	struct gpulse_config c;
	config_defaults(&c);
	assert_string_equal(c.listen, "127.0.0.1:9401");
	assert_string_equal(c.nvml_library, "");
	assert_int_equal(c.sampling.fast_ns, 100 * NS_PER_MS);
	assert_int_equal(c.sampling.normal_ns, NS_PER_SEC);
	assert_int_equal(c.sampling.slow_ns, 30 * NS_PER_SEC);
	assert_int_equal(c.sampling.call_deadline_ns, 2 * NS_PER_SEC);
	assert_int_equal(c.sampling.rediscover_ns, 10 * NS_PER_SEC);
	assert_true(c.sampling.per_process_utilization);
	assert_true(c.sampling.gpm);
	assert_true(c.sampling.events);
	assert_string_equal(c.replay.file, "");
	assert_true(c.replay.speed == 1.0);
	assert_true(c.replay.loop);
	assert_int_equal(c.http.max_connections, 64);
	assert_int_equal(c.http.threads, 2);
	assert_int_equal(c.http.timeout_ns, 10 * NS_PER_SEC);
	assert_string_equal(c.http.tls_cert_file, "");
	assert_string_equal(c.http.tls_key_file, "");
	assert_string_equal(c.http.auth_token_file, "");
	assert_false(c.http.allow_insecure_remote);
	assert_int_equal(c.log_level, LOG_INFO);

	char err[512];
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	assert_true(config_listen_is_loopback(c.listen));
}

static const char full_yaml[] =
	"# every key, none at its default\n"
	"listen: \"[::1]:9500\"\n"
	"nvml_library: /opt/nvidia/libnvidia-ml.so.1\n"
	"sampling:\n"
	"  fast: 50ms\n"
	"  normal: 2s\n"
	"  slow: 1m\n"
	"  call_deadline: 500ms\n"
	"  rediscover: 1m30s\n"
	"  per_process_utilization: false\n"
	"  gpm: no\n"
	"  events: off\n"
	"replay:\n"
	"  file: 'data/recordings/h200 phases.csv'\n"
	"  speed: 12.5\n"
	"  loop: false\n"
	"http:\n"
	"  max_connections: 200\n"
	"  threads: 8\n"
	"  timeout: 30\n"
	"  header_timeout: 750ms\n"
	"  max_connections_per_address: 12\n"
	"  tls_cert_file: \"\"\n"
	"  tls_key_file:\n"
	"  auth_token_file: ~\n"
	"  allow_insecure_remote: true\n"
	"log_level: debug\n";

static void test_full_file(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[512] = "";
	config_defaults(&c);
	if (parse(&c, full_yaml, err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_string_equal(err, "");
	assert_string_equal(c.listen, "[::1]:9500");
	assert_string_equal(c.nvml_library, "/opt/nvidia/libnvidia-ml.so.1");
	assert_int_equal(c.sampling.fast_ns, 50 * NS_PER_MS);
	assert_int_equal(c.sampling.normal_ns, 2 * NS_PER_SEC);
	assert_int_equal(c.sampling.slow_ns, 60 * NS_PER_SEC);
	assert_int_equal(c.sampling.call_deadline_ns, 500 * NS_PER_MS);
	assert_int_equal(c.sampling.rediscover_ns, 90 * NS_PER_SEC);
	assert_false(c.sampling.per_process_utilization);
	assert_false(c.sampling.gpm);
	assert_false(c.sampling.events);
	/* A relative path resolves against the file's directory, here the
	 * working directory's (NAME has none). */
	char cwd[512], want[600];
	assert_non_null(getcwd(cwd, sizeof cwd));
	snprintf(want, sizeof want, "%s/data/recordings/h200 phases.csv", cwd);
	assert_string_equal(c.replay.file, want);
	assert_true(c.replay.speed == 12.5);
	assert_false(c.replay.loop);
	assert_int_equal(c.http.max_connections, 200);
	assert_int_equal(c.http.header_timeout_ns, 750 * NS_PER_MS);
	assert_int_equal(c.http.max_connections_per_address, 12);
	assert_int_equal(c.http.threads, 8);
	assert_int_equal(c.http.timeout_ns, 30 * NS_PER_SEC);
	assert_string_equal(c.http.tls_cert_file, "");
	assert_string_equal(c.http.tls_key_file, "");
	assert_string_equal(c.http.auth_token_file, "");
	assert_true(c.http.allow_insecure_remote);
	assert_int_equal(c.log_level, LOG_DEBUG);
	c.replay.file[0] = '\0'; /* no such recording: config_validate would refuse it */
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	assert_true(config_listen_is_loopback(c.listen));
}

static void test_partial_files_keep_defaults(void **state)
{
	(void)state;
	static const char *const ok[] = {
		"",                              /* empty file */
		"# only a comment\n",
		"---\n",                         /* an empty document */
		"---\n...\n",
		"sampling:\n",                   /* every key commented out */
		"sampling: ~\nhttp:\n  # threads: 4\n",
		"{}\n",
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct gpulse_config c, d;
		char err[512] = "";
		config_defaults(&c);
		config_defaults(&d);
		if (parse(&c, ok[i], err, sizeof err) != 0)
			fail_msg("case %zu: %s", i, err);
		assert_true(config_equal(&c, &d));
	}
	/* Parsing layers over what is already there. */
	struct gpulse_config c;
	char err[512];
	config_defaults(&c);
	assert_int_equal(parse(&c, "sampling:\n  fast: 20ms\n", err, sizeof err), 0);
	assert_int_equal(parse(&c, "sampling:\n  slow: 1m\n", err, sizeof err), 0);
	assert_int_equal(c.sampling.fast_ns, 20 * NS_PER_MS);
	assert_int_equal(c.sampling.slow_ns, 60 * NS_PER_SEC);
	assert_int_equal(c.sampling.normal_ns, NS_PER_SEC);
}

static void test_shipped_file(void **state)
{
	(void)state;
	const char *src = getenv("GPULSE_SOURCE_DIR");
	if (!src)
		src = ".";
	char path[4096], err[512] = "";
	snprintf(path, sizeof path, "%s/etc/gpulse.yml", src);
	struct gpulse_config c, d;
	config_defaults(&d);
	/* Start from something else, so "unchanged" cannot pass for "read". */
	config_defaults(&c);
	c.sampling.fast_ns = 10 * NS_PER_MS;
	c.http.threads = 9;
	snprintf(c.listen, sizeof c.listen, "127.0.0.1:1");
	if (config_load_file(&c, path, err, sizeof err) != 0)
		fail_msg("%s", err);
	/* The documented file shows every default, so it reads as them. */
	assert_true(config_equal(&c, &d));
	assert_int_equal(config_validate(&c, path, err, sizeof err), 0);
}

struct bad_case {
	const char *yaml;
	const char *want;   /* the message, or its start when `prefix` */
	bool prefix;
};

static void test_errors(void **state)
{
	(void)state;
	static const struct bad_case cases[] = {
		/* unknown keys, with suggestions */
		{"log_level: info\nlisten: 127.0.0.1:9401\nlisen: 1.2.3.4:80\n",
		 NAME ":3:1: unknown key \"lisen\" (did you mean \"listen\"?)", false},
		{"sampling:\n  fats: 1s\n",
		 NAME ":2:3: unknown key \"fats\" in sampling (did you mean \"fast\"?)", false},
		{"fast: 1s\n",
		 NAME ":1:1: unknown key \"fast\" (did you mean \"sampling.fast\"? it belongs under sampling:)",
		 false},
		{"http:\n  color: blue\n",
		 NAME ":2:3: unknown key \"color\" in http (known keys: max_connections, threads, "
		 "timeout, header_timeout, max_connections_per_address, tls_cert_file, tls_key_file, "
		 "tls_client_ca_file, "
		 "auth_token_file, write_token_file, rate_limit, rate_limit_burst, basic_auth_users, "
		 "allow_insecure_remote)", false},
		/* wrong types */
		{"listen:\n  host: a\n",
		 NAME ":2:3: listen: expected an address like 127.0.0.1:9401, got a mapping", false},
		{"sampling: 5\n", NAME ":1:11: sampling: expected a mapping of keys, got a single value \"5\"",
		 false},
		{"log_level: [info]\n", NAME ":1:12: log_level: expected a log level", true},
		{"sampling:\n  - fast\n", NAME ":2:3: sampling: expected a mapping of keys, got a list", false},
		{"- a\n- b\n", NAME ":1:1: the file must be a mapping of keys", true},
		{"hello\n", NAME ":1:1: the file must be a mapping of keys", true},
		{"? [a, b]\n: c\n", NAME ":1:3: keys must be plain names, not a list", false},
		/* duplicates */
		{"log_level: info\nlisten: 127.0.0.1:1\nlog_level: debug\n",
		 NAME ":3:1: duplicate key \"log_level\" (first given at line 1)", false},
		{"http:\n  threads: 2\n  threads: 3\n",
		 NAME ":3:3: duplicate key \"http.threads\" (first given at line 2)", false},
		{"sampling:\n  fast: 1s\nsampling:\n  slow: 1m\n",
		 NAME ":3:1: duplicate key \"sampling\" (first given at line 1)", false},
		/* values */
		{"log_level: info\nsampling:\n  normal: 1s\n  slow: 30s\n  call_deadline: 2s\n  gpm: true\n"
		 "  fast: 10x\n",
		 NAME ":7:9: sampling.fast: bad duration \"10x\" (use e.g. 100ms, 1s, 5m)", false},
		{"sampling:\n  fast: 5ms\n", NAME ":2:9: sampling.fast: \"5ms\" is out of range (10ms..1m)",
		 false},
		{"sampling:\n  fast: 2m\n", NAME ":2:9: sampling.fast: \"2m\" is out of range (10ms..1m)",
		 false},
		{"sampling:\n  call_deadline: -1s\n", NAME ":2:18: sampling.call_deadline: bad duration", true},
		{"sampling:\n  fast:\n", NAME ":2:8: sampling.fast: has no value (expected a duration", true},
		{"sampling:\n  slow: 99999999999999999999s\n",
		 NAME ":2:9: sampling.slow: duration \"99999999999999999999s\" is too long", false},
		{"replay:\n  loop: maybe\n", NAME ":2:9: replay.loop: expected true or false, got \"maybe\"",
		 false},
		{"replay:\n  speed: 0\n", NAME ":2:10: replay.speed: \"0\" is out of range (above 0 and at most 1000)",
		 false},
		{"replay:\n  speed: 1001\n", NAME ":2:10: replay.speed: \"1001\" is out of range", true},
		{"replay:\n  speed: fast\n", NAME ":2:10: replay.speed: expected a number, got \"fast\"", false},
		{"replay:\n  speed: nan\n", NAME ":2:10: replay.speed: expected a number", true},
		{"http:\n  threads: 0\n", NAME ":2:12: http.threads: \"0\" is out of range (1..64)", false},
		{"http:\n  threads: 65\n", NAME ":2:12: http.threads: \"65\" is out of range (1..64)", false},
		{"http:\n  threads: 1.5\n", NAME ":2:12: http.threads: expected a whole number, got \"1.5\"",
		 false},
		{"http:\n  max_connections: 10001\n", NAME ":2:20: http.max_connections: \"10001\" is out of range",
		 true},
		{"http:\n  header_timeout: 50ms\n",
		 NAME ":2:19: http.header_timeout: \"50ms\" is out of range", true},
		{"http:\n  max_connections_per_address: 10001\n",
		 NAME ":2:32: http.max_connections_per_address: \"10001\" is out of range", true},
		{"http:\n  timeout: 500ms\n", NAME ":2:12: http.timeout: \"500ms\" is out of range (1s..1h)",
		 false},
		{"log_level: verbose\n",
		 NAME ":1:12: log_level: unknown level \"verbose\" (use error, warn, info or debug)", false},
		{"listen: localhost\n", NAME ":1:9: listen: Listen address \"localhost\" has no port", true},
		{"listen: ::1:9401\n", NAME ":1:9: listen: Listen address \"::1:9401\" looks like an IPv6", true},
		{"listen: \"127.0.0.1:99999\"\n", NAME ":1:9: listen: Port", true},
		{"listen: \"a\\x1b[31m:1\"\n", NAME ":1:9: listen: \"a\\x1b[31m:1\" holds a control character",
		 false},
		{"nvml_library: \"a\\0b\"\n", NAME ":1:15: nvml_library: contains a NUL character", false},
		/* YAML itself */
		{"log_level: info\n---\nlog_level: debug\n", NAME ":2:1: a second YAML document", true},
		{"sampling:\n  fast: &d 1s\n  normal: *d\n",
		 NAME ":3:11: sampling.normal: aliases (*name) are not supported here", false},
		{"listen: 127.0.0.1:1\n]\n", NAME ":2:1: YAML syntax error:", true},
		{"sampling:\n  fast: 1s\n slow: 2s\n", NAME ":3:2: YAML syntax error:", true},
		{"log_level: info\nlisten: \"127.0.0.1:9401\n", NAME ":3:1: YAML syntax error:", true},
		{"log_level: b: c\n", NAME ":1:13: YAML syntax error: mapping values are not allowed", true},
		{"log_level: info\n\tlisten: x\n", NAME ":2:1: YAML syntax error:", true},
		{"listen: \"\xff\"\n", NAME ":1:10: not valid YAML text:", true},
	};
	/* Start from a config unlike the defaults, to see that nothing moved. */
	struct gpulse_config before;
	config_defaults(&before);
	before.sampling.fast_ns = 20 * NS_PER_MS;
	before.http.threads = 7;
	snprintf(before.nvml_library, sizeof before.nvml_library, "/x/libnvidia-ml.so.1");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct gpulse_config c = before;
		char err[512] = "";
		int rc = parse(&c, cases[i].yaml, err, sizeof err);
		if (rc != GPULSE_EPARSE)
			fail_msg("case %zu: want a parse error, got %d (%s)", i, rc, err);
		bool match = cases[i].prefix ? strncmp(err, cases[i].want, strlen(cases[i].want)) == 0
					     : strcmp(err, cases[i].want) == 0;
		if (!match)
			fail_msg("case %zu:\n  want %s\"%s\"\n  got       \"%s\"", i,
				 cases[i].prefix ? "prefix " : "", cases[i].want, err);
		if (memcmp(&c, &before, sizeof c) != 0)
			fail_msg("case %zu: the config changed on error", i);
	}
}

/* diagnosis.memory_pressure: the live diagnosis's memory_pressure
 * threshold, a ratio in (0, 1], DIAG_MEMORY_PRESSURE_DEFAULT unless set. */
static void test_memory_pressure(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[512] = "";
	config_defaults(&c);
	assert_true(c.diagnosis.memory_pressure == DIAG_MEMORY_PRESSURE_DEFAULT);
	assert_true(c.diagnosis.memory_pressure == 0.85);

	if (parse(&c, "diagnosis:\n  memory_pressure: 0.5\n", err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_true(c.diagnosis.memory_pressure == 0.5);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	config_defaults(&c);
	if (parse(&c, "diagnosis:\n  memory_pressure: 1\n", err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_true(c.diagnosis.memory_pressure == 1.0);

	static const struct bad_case cases[] = {
		{"diagnosis:\n  memory_pressure: 0\n",
		 NAME ":2:20: diagnosis.memory_pressure: \"0\" is out of range (above 0 and at most 1)",
		 false},
		{"diagnosis:\n  memory_pressure: 1.01\n",
		 NAME ":2:20: diagnosis.memory_pressure: \"1.01\" is out of range (above 0 and at most 1)",
		 false},
		{"diagnosis:\n  memory_pressure: -0.5\n",
		 NAME ":2:20: diagnosis.memory_pressure: \"-0.5\" is out of range (above 0 and at most 1)",
		 false},
		{"diagnosis:\n  memory_pressure: 85%\n",
		 NAME ":2:20: diagnosis.memory_pressure: expected a number, got \"85%\"", false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		config_defaults(&c);
		err[0] = '\0';
		if (parse(&c, cases[i].yaml, err, sizeof err) != GPULSE_EPARSE)
			fail_msg("case %zu: want a parse error (%s)", i, err);
		bool match = cases[i].prefix ? strncmp(err, cases[i].want, strlen(cases[i].want)) == 0
					     : strcmp(err, cases[i].want) == 0;
		if (!match)
			fail_msg("case %zu:\n  want \"%s\"\n  got  \"%s\"", i, cases[i].want, err);
		assert_true(c.diagnosis.memory_pressure == DIAG_MEMORY_PRESSURE_DEFAULT);
	}

	/* A value set past the parser is caught by config_validate. */
	config_defaults(&c);
	c.diagnosis.memory_pressure = 1.5;
	assert_int_equal(config_validate(&c, "gpulsed", err, sizeof err), GPULSE_EINVAL);
	assert_string_equal(err, "gpulsed: diagnosis.memory_pressure: 1.5 is out of range "
				 "(above 0 and at most 1)");
}

static void test_error_buffer_small(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[8];
	config_defaults(&c);
	assert_int_equal(parse(&c, "lisen: x\n", err, sizeof err), GPULSE_EPARSE);
	assert_int_equal(strlen(err), sizeof err - 1);
	assert_int_equal(parse(&c, "lisen: x\n", NULL, 0), GPULSE_EPARSE);
}

static void test_durations(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int rc;
		int64_t ns;
	} cases[] = {
		{"100ms", 0, 100 * NS_PER_MS},
		{"1s", 0, NS_PER_SEC},
		{"30s", 0, 30 * NS_PER_SEC},
		{"5m", 0, 300 * NS_PER_SEC},
		{"1h30m", 0, 5400 * NS_PER_SEC},
		{"1h30m15s250ms", 0, 5415 * NS_PER_SEC + 250 * NS_PER_MS},
		{"2d", 0, 2 * 86400 * NS_PER_SEC},
		{"1w", 0, 7 * 86400 * NS_PER_SEC},
		{"1y", 0, 365 * 86400 * NS_PER_SEC},
		{"0s", 0, 0},
		{"0", 0, 0},
		{"30", 0, 30 * NS_PER_SEC},
		{"0.25", 0, 250 * NS_PER_MS},
		{".5", 0, 500 * NS_PER_MS},
		{"1.000000001", 0, NS_PER_SEC + 1},
		{"1.0000000019", 0, NS_PER_SEC + 1},      /* past 1 ns is dropped */
		{"9223372036", 0, 9223372036LL * NS_PER_SEC},
		{"9223372037", GPULSE_ERANGE, 0},
		{"106752d", GPULSE_ERANGE, 0},
		{"99999999999999999999ms", GPULSE_ERANGE, 0},
		{"", GPULSE_EINVAL, 0},
		{"10x", GPULSE_EINVAL, 0},
		{"s", GPULSE_EINVAL, 0},
		{"1", 0, NS_PER_SEC},
		{"1.", GPULSE_EINVAL, 0},
		{"1.5h", GPULSE_EINVAL, 0},
		{"-1s", GPULSE_EINVAL, 0},
		{"+1s", GPULSE_EINVAL, 0},
		{"1 s", GPULSE_EINVAL, 0},
		{" 1s", GPULSE_EINVAL, 0},
		{"30m1h", GPULSE_EINVAL, 0},             /* largest unit first */
		{"1s1s", GPULSE_EINVAL, 0},              /* each unit once */
		{"1ms1s", GPULSE_EINVAL, 0},
		{"1us", GPULSE_EINVAL, 0},
		{"1.2.3", GPULSE_EINVAL, 0},
		{"1h ", GPULSE_EINVAL, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int64_t ns = -42;
		int rc = duration_parse_arg(cases[i].s, &ns);
		if (rc != cases[i].rc)
			fail_msg("\"%s\": want rc %d, got %d", cases[i].s, cases[i].rc, rc);
		if (rc == 0 && ns != cases[i].ns)
			fail_msg("\"%s\": want %lld ns, got %lld", cases[i].s, (long long)cases[i].ns,
				 (long long)ns);
		if (rc != 0 && ns != -42)
			fail_msg("\"%s\": failed but wrote the output", cases[i].s);
	}

	/* Formatting reads back to the same value. */
	static const struct {
		int64_t ns;
		const char *s;
	} fmt[] = {
		{0, "0s"},
		{100 * NS_PER_MS, "100ms"},
		{NS_PER_SEC, "1s"},
		{5400 * NS_PER_SEC, "1h30m"},
		{86400 * NS_PER_SEC, "1d"},
		/* Weeks only when they divide the rest: 30d, not 4w2d. */
		{30 * 86400 * NS_PER_SEC, "30d"},
		{14 * 86400 * NS_PER_SEC, "2w"},
		{(8 * 86400 + 3600) * NS_PER_SEC, "8d1h"},
		{401LL * 86400 * NS_PER_SEC, "1y36d"},
		{1500 * NS_PER_MS, "1s500ms"},
		{500 * NS_PER_US, "0.0005"},
		{NS_PER_SEC + 1, "1.000000001"},
		{INT64_MAX, "9223372036.854775807"},
		{-NS_PER_SEC, "-1s"},
	};
	for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
		char s[64];
		duration_format(fmt[i].ns, s, sizeof s);
		assert_string_equal(s, fmt[i].s);
		int64_t back;
		if (fmt[i].ns >= 0) {
			assert_int_equal(duration_parse_arg(s, &back), 0);
			assert_int_equal(back, fmt[i].ns);
		}
	}
}

static void test_cross_field(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[512];
	config_defaults(&c);
	assert_int_equal(parse(&c, "sampling:\n  fast: 2s\n", err, sizeof err), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_string_equal(err, NAME ": sampling.normal (1s) must not be shorter than sampling.fast (2s)");

	config_defaults(&c);
	c.sampling.slow_ns = 500 * NS_PER_MS;
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_string_equal(err, NAME ": sampling.slow (500ms) must not be shorter than sampling.normal (1s)");

	/* Command-line overrides skip the parser; validate catches them. */
	config_defaults(&c);
	c.replay.speed = 0;
	assert_int_equal(config_validate(&c, "gpulsed", err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "gpulsed: replay.speed: 0 is out of range"));
	config_defaults(&c);
	c.replay.speed = 2000;
	assert_int_equal(config_validate(&c, "gpulsed", err, sizeof err), GPULSE_EINVAL);
	config_defaults(&c);
	snprintf(c.listen, sizeof c.listen, "nowhere");
	assert_int_equal(config_validate(&c, "gpulsed", err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "gpulsed: listen: "));
	config_defaults(&c);
	c.sampling.call_deadline_ns = 5 * NS_PER_MS;
	assert_int_equal(config_validate(&c, "gpulsed", err, sizeof err), GPULSE_EINVAL);
	assert_string_equal(err, "gpulsed: sampling.call_deadline: 5ms is out of range (10ms..1m)");
	config_defaults(&c);
	c.http.threads = 0;
	assert_int_equal(config_validate(&c, "gpulsed", err, sizeof err), GPULSE_EINVAL);
	assert_string_equal(err, "gpulsed: http.threads: 0 is out of range (1..64)");
	config_defaults(&c);
	c.log_level = (enum log_level)9;
	assert_int_equal(config_validate(&c, "gpulsed", err, sizeof err), GPULSE_EINVAL);
}

/* storage.path names a file in a directory that exists: a missing
 * directory is reported as such, with the key, not through the store's
 * lock file. */
static void test_storage_dir(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[512];
	config_defaults(&c);
	assert_int_equal(parse(&c, "storage:\n  path: /nonexistent/dir/g.db\n", err, sizeof err), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_string_equal(err, NAME ": storage.path: directory /nonexistent/dir does not exist "
			    "(create it, or choose another path)");

	char file[256];
	temp_file(file, sizeof file, "x", 0600);
	snprintf(c.storage.path, sizeof c.storage.path, "%s/g.db", file);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "storage.path: "));
	assert_non_null(strstr(err, " is not a directory"));
	unlink(file);

	snprintf(c.storage.path, sizeof c.storage.path, "/tmp");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_string_equal(err, NAME ": storage.path: /tmp is a directory; name the database file in "
			    "it (e.g. /tmp/gpulse.db)");

	/* A new file in an existing directory, or in the working one. */
	snprintf(c.storage.path, sizeof c.storage.path, "/tmp/gpulse-test-none.db");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	snprintf(c.storage.path, sizeof c.storage.path, "gpulse-test-none.db");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	/* storage.retry_interval: 30s by default, 1s..1h. */
	config_defaults(&c);
	assert_int_equal(c.storage.retry_interval_ns, 30 * NS_PER_SEC);
	assert_int_equal(parse(&c, "storage:\n  retry_interval: 2s\n", err, sizeof err), 0);
	assert_int_equal(c.storage.retry_interval_ns, 2 * NS_PER_SEC);
	assert_int_not_equal(parse(&c, "storage:\n  retry_interval: 500ms\n", err, sizeof err), 0);
	assert_non_null(strstr(err, "retry_interval"));
	assert_int_not_equal(parse(&c, "storage:\n  retry_interval: 2h\n", err, sizeof err), 0);
}

/* What SIGHUP cannot apply: exactly the restart keys whose values
 * changed, by their dotted names, in the order of the file. */
/* query: (issue 14): Prometheus's timeout default, gpulsed's concurrency
 * default, the ranges, and both keys wait for a restart. */
static void test_query_keys(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[512] = "";
	config_defaults(&c);
	assert_int_equal(c.query.timeout_ns, 120 * NS_PER_SEC);
	assert_int_equal(c.query.max_concurrency, 2);
	assert_int_equal(parse(&c, "query:\n  timeout: 30s\n  max_concurrency: 4\n", err, sizeof err),
			 0);
	assert_int_equal(c.query.timeout_ns, 30 * NS_PER_SEC);
	assert_int_equal(c.query.max_concurrency, 4);
	assert_int_equal(config_validate(&c, "gpulsed", err, sizeof err), 0);
	config_defaults(&c);
	assert_int_equal(parse(&c, "query:\n  timeout: 10ms\n", err, sizeof err), GPULSE_EPARSE);
	assert_string_equal(err, NAME ":2:12: query.timeout: \"10ms\" is out of range (100ms..1d)");
	assert_int_equal(parse(&c, "query:\n  max_concurrency: 0\n", err, sizeof err), GPULSE_EPARSE);
	assert_string_equal(err, NAME ":2:20: query.max_concurrency: \"0\" is out of range (1..64)");

	struct gpulse_config a, b;
	struct buf out;
	buf_init(&out, 4096);
	config_defaults(&a);
	b = a;
	b.query.timeout_ns = 5 * NS_PER_SEC;
	b.query.max_concurrency = 8;
	assert_false(config_equal(&a, &b));
	assert_int_equal(config_restart_changes(&a, &b, true, &out), 2);
	assert_string_equal(out.data, "query.timeout, query.max_concurrency");
	buf_free(&out);
}

static void test_restart_changes(void **state)
{
	(void)state;
	struct gpulse_config a, b;
	struct buf out;
	buf_init(&out, 4096);
	config_defaults(&a);
	config_defaults(&b);
	assert_int_equal(config_restart_changes(&a, &b, true, &out), 0);
	assert_int_equal(out.len, 0);

	/* Live keys are applied: none is listed. */
	b.sampling.fast_ns = 200 * NS_PER_MS;
	b.log_level = LOG_DEBUG;
	snprintf(b.rule_files[0], sizeof b.rule_files[0], "/etc/gpulse/rules.yml");
	snprintf(b.alerting.webhooks.urls[0], sizeof b.alerting.webhooks.urls[0], "http://h/");
	assert_int_equal(config_restart_changes(&a, &b, true, &out), 0);

	b.http.threads = 3;
	assert_int_equal(config_restart_changes(&a, &b, true, &out), 1);
	assert_string_equal(out.data, "http.threads");

	buf_reset(&out);
	b.diagnosis.window_ns = 10 * NS_PER_SEC;
	b.alerting.resend_delay_ns = 2 * 60 * NS_PER_SEC;
	assert_int_equal(config_restart_changes(&a, &b, true, &out), 3);
	assert_string_equal(out.data, "diagnosis.window, http.threads, alerting.resend_delay");

	/* The rules' start-time keys count only while rules run. */
	config_defaults(&b);
	snprintf(b.alerting.external_url, sizeof b.alerting.external_url, "http://gpulse/");
	snprintf(b.alerting.external_labels[0][0], sizeof b.alerting.external_labels[0][0], "dc");
	snprintf(b.alerting.external_labels[0][1], sizeof b.alerting.external_labels[0][1], "x");
	buf_reset(&out);
	assert_int_equal(config_restart_changes(&a, &b, false, &out), 0);
	assert_int_equal(config_restart_changes(&a, &b, true, &out), 2);
	assert_string_equal(out.data, "alerting.external_url, alerting.external_labels");

	/* A string is its text: bytes after its end (a flag copied over a
	 * longer value) are no change. */
	config_defaults(&b);
	memset(b.listen, 'x', sizeof b.listen);
	snprintf(b.listen, sizeof b.listen, "%s", a.listen);
	memset(b.storage.path + 1, 'y', 16);
	buf_reset(&out);
	assert_int_equal(config_restart_changes(&a, &b, true, &out), 0);
	buf_free(&out);
}

static void test_security_rule(void **state)
{
	(void)state;
	struct gpulse_config c;
	char err[2048], cert[256], key[256], token[256];
	temp_file(cert, sizeof cert, "-----BEGIN CERTIFICATE-----\n", 0644);
	temp_file(key, sizeof key, "-----BEGIN PRIVATE KEY-----\n", 0600);
	temp_file(token, sizeof token, "s3cret-token\n", 0600);

	/* Not loopback, no TLS, no token: refused, naming what is missing. */
	config_defaults(&c);
	assert_int_equal(parse(&c, "listen: 0.0.0.0:9401\n", err, sizeof err), 0);
	assert_false(config_listen_is_loopback(c.listen));
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, NAME ": listen \"0.0.0.0:9401\" is reachable from other machines"));
	assert_non_null(strstr(err, "missing: http.tls_cert_file, http.tls_key_file, http.auth_token_file or http.basic_auth_users"));
	assert_non_null(strstr(err, "allow_insecure_remote"));

	/* ":PORT" is every interface, not loopback. */
	snprintf(c.listen, sizeof c.listen, ":9401");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	snprintf(c.listen, sizeof c.listen, "[::]:9401");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	/* Loopback forms need nothing. */
	static const char *const loop[] = {"127.0.0.1:9401", "127.1.2.3:1", "[::1]:9401",
					   "[::ffff:127.0.0.1]:80"};
	for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++) {
		snprintf(c.listen, sizeof c.listen, "%s", loop[i]);
		assert_true(config_listen_is_loopback(c.listen));
		assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	}
	/* A name is not loopback by its name: it passes here and is judged
	 * by what it resolves to when bound (test_to_http_resolved). */
	snprintf(c.listen, sizeof c.listen, "localhost:9401");
	assert_false(config_listen_is_loopback(c.listen));
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);

	/* TLS alone is not enough; the token is required too. */
	snprintf(c.listen, sizeof c.listen, "10.0.0.5:9401");
	snprintf(c.http.tls_cert_file, sizeof c.http.tls_cert_file, "%s", cert);
	snprintf(c.http.tls_key_file, sizeof c.http.tls_key_file, "%s", key);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "missing: http.auth_token_file or http.basic_auth_users)"));
	/* With all three: accepted. */
	snprintf(c.http.auth_token_file, sizeof c.http.auth_token_file, "%s", token);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);

	/* The opt-out serves in the clear. */
	struct gpulse_config d;
	config_defaults(&d);
	assert_int_equal(parse(&d, "listen: \":9401\"\nhttp:\n  allow_insecure_remote: true\n",
			       err, sizeof err), 0);
	assert_int_equal(config_validate(&d, NAME, err, sizeof err), 0);

	/* A world-readable token file is refused, by name. */
	assert_int_equal(chmod(token, 0644), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "http.auth_token_file"));
	assert_non_null(strstr(err, token));
	assert_non_null(strstr(err, "readable by every user (mode 0644)"));
	/* ...even on loopback. */
	snprintf(c.listen, sizeof c.listen, "127.0.0.1:9401");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_int_equal(chmod(token, 0640), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);

	/* Empty, whitespace-only and missing token files. */
	char empty[256], blank[256];
	temp_file(empty, sizeof empty, "", 0600);
	temp_file(blank, sizeof blank, " \n\n", 0600);
	snprintf(c.http.auth_token_file, sizeof c.http.auth_token_file, "%s", empty);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "is empty"));
	snprintf(c.http.auth_token_file, sizeof c.http.auth_token_file, "%s", blank);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "only whitespace"));
	snprintf(c.http.auth_token_file, sizeof c.http.auth_token_file, "%s.missing", token);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "No such file"));
	snprintf(c.http.auth_token_file, sizeof c.http.auth_token_file, "%s", token);

	/* Cert and key go together, and must be readable. */
	c.http.tls_key_file[0] = '\0';
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "set both or neither"));
	snprintf(c.http.tls_key_file, sizeof c.http.tls_key_file, "%s.missing", key);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "http.tls_key_file: cannot read"));

	unlink(cert);
	unlink(key);
	unlink(token);
	unlink(empty);
	unlink(blank);
}

/* http.write_token_file (issue 14): parsed, checked as the read token is,
 * never the read token itself, and handed to the server. */
static void test_write_token_file(void **state)
{
	(void)state;
	struct gpulse_config c;
	struct http_config h;
	char err[2048], rd[256], wr[256], same[256], tok[CONFIG_TOKEN_MAX], wtok[CONFIG_TOKEN_MAX];
	temp_file(rd, sizeof rd, "read-tok\n", 0600);
	temp_file(wr, sizeof wr, "write-tok\n", 0600);
	temp_file(same, sizeof same, "read-tok  \n", 0600);

	config_defaults(&c);
	char text[1024];
	snprintf(text, sizeof text, "http:\n  auth_token_file: %s\n  write_token_file: %s\n", rd, wr);
	assert_int_equal(parse(&c, text, err, sizeof err), 0);
	assert_string_equal(c.http.write_token_file, wr);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	assert_int_equal(config_to_http(&c, &h, tok, sizeof tok, wtok, sizeof wtok), 0);
	assert_string_equal(h.auth_token, "read-tok");
	assert_string_equal(h.write_token, "write-tok");
	assert_non_null(strstr(h.write_hint, "http.write_token_file"));

	/* Not a string. */
	struct gpulse_config d;
	config_defaults(&d);
	assert_int_not_equal(parse(&d, "http:\n  write_token_file: [a]\n", err, sizeof err), 0);
	assert_non_null(strstr(err, NAME ":2:21: http.write_token_file: expected"));

	/* World-readable, empty, missing: refused by name. */
	assert_int_equal(chmod(wr, 0644), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, NAME ": http.write_token_file: "));
	assert_non_null(strstr(err, "readable by every user (mode 0644)"));
	/* ...and the server gets a token no request can present. */
	assert_int_not_equal(config_to_http(&c, &h, tok, sizeof tok, wtok, sizeof wtok), 0);
	assert_string_equal(h.write_token, "\x01");
	assert_string_equal(h.auth_token, "read-tok");
	assert_int_equal(chmod(wr, 0600), 0);
	snprintf(c.http.write_token_file, sizeof c.http.write_token_file, "%s.missing", wr);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "http.write_token_file"));
	assert_non_null(strstr(err, "No such file"));

	/* The read token as the write token would make every reader a
	 * writer (trailing whitespace does not make it another). */
	snprintf(c.http.write_token_file, sizeof c.http.write_token_file, "%s", same);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "http.write_token_file: "));
	assert_non_null(strstr(err, "holds the same token as http.auth_token_file"));

	/* A write token alone is fine on loopback; beyond it the read token
	 * is still required (the security rule is unchanged). */
	snprintf(c.http.write_token_file, sizeof c.http.write_token_file, "%s", wr);
	c.http.auth_token_file[0] = '\0';
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	snprintf(c.listen, sizeof c.listen, "10.0.0.5:9401");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "http.auth_token_file"));

	/* A change is a restart change, and config_equal sees it. */
	config_defaults(&d);
	struct gpulse_config e = d;
	snprintf(e.http.write_token_file, sizeof e.http.write_token_file, "%s", wr);
	assert_false(config_equal(&d, &e));
	struct buf out;
	buf_init(&out, 4096);
	assert_int_equal(config_restart_changes(&d, &e, false, &out), 1);
	assert_string_equal(out.data, "http.write_token_file");
	buf_free(&out);
	unlink(rd);
	unlink(wr);
	unlink(same);
}

/* http.basic_auth_users (issue 14): a mapping of user names to bcrypt
 * hashes, each checked where it is written; the users count as the token
 * of the security rule; they reach the server and survive a dump. */
#define ALICE_HASH "$2y$10$gpulsetestsaltgpulse.u9bzToBj4eZj15FTExTvvzxdnHDxia5e"
static void test_basic_auth_users(void **state)
{
	(void)state;
	struct gpulse_config c, d;
	struct http_config h;
	char err[2048];
	config_defaults(&c);
	assert_int_equal(parse(&c, "http:\n  basic_auth_users:\n    alice: " ALICE_HASH "\n"
				  "    \"bob@scraper\": '$2b$04$gpulsetestsaltgpulse.usdyC1vXtlPhUkTAUkyESI9kLY5zIeCe'\n",
			       err, sizeof err), 0);
	assert_string_equal(c.http.basic_auth_users[0][0], "alice");
	assert_string_equal(c.http.basic_auth_users[0][1], ALICE_HASH);
	assert_string_equal(c.http.basic_auth_users[1][0], "bob@scraper");
	assert_string_equal(c.http.basic_auth_users[2][0], "");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	assert_int_equal(config_to_http(&c, &h, NULL, 0, NULL, 0), 0);
	assert_int_equal(h.nbasic_users, 2);
	assert_string_equal(h.basic_users[1].name, "bob@scraper");
	assert_string_equal(h.basic_users[0].hash, ALICE_HASH);

	/* --print-config reads back to the same users. */
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(config_dump(&c, &b), 0);
	config_defaults(&d);
	assert_int_equal(parse(&d, b.data, err, sizeof err), 0);
	assert_true(config_equal(&c, &d));
	buf_free(&b);

	/* With TLS, the users stand for the token beyond loopback. */
	char cert[256], key[256];
	temp_file(cert, sizeof cert, "-----BEGIN CERTIFICATE-----\n", 0644);
	temp_file(key, sizeof key, "-----BEGIN PRIVATE KEY-----\n", 0600);
	snprintf(c.listen, sizeof c.listen, "10.0.0.5:9401");
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "(missing: http.tls_cert_file, http.tls_key_file)"));
	snprintf(c.http.tls_cert_file, sizeof c.http.tls_cert_file, "%s", cert);
	snprintf(c.http.tls_key_file, sizeof c.http.tls_key_file, "%s", key);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	unlink(cert);
	unlink(key);

	static const struct {
		const char *yaml, *want;
	} bad[] = {
		{"http:\n  basic_auth_users:\n    alice: hunter2\n",
		 NAME ":3:12: http.basic_auth_users.alice: \"hunter2\" is not a bcrypt hash (60 "
		 "characters starting $2y$, $2b$ or $2a$ and a cost of 04 to 31"},
		{"http:\n  basic_auth_users:\n    alice: \"$6$salt$abc\"\n",
		 NAME ":3:12: http.basic_auth_users.alice: \"$6$salt$abc\" is not a bcrypt hash"},
		{"http:\n  basic_auth_users:\n    \"a:b\": " ALICE_HASH "\n",
		 NAME ":3:5: http.basic_auth_users: user name \"a:b\" must be 1 to 64 bytes without "
		 "':'"},
		{"http:\n  basic_auth_users:\n    alice: " ALICE_HASH "\n    alice: " ALICE_HASH "\n",
		 NAME ":4:5: http.basic_auth_users: user \"alice\" is given twice"},
		{"http:\n  basic_auth_users: [alice]\n",
		 NAME ":2:21: http.basic_auth_users: expected a mapping of user names to bcrypt hashes"},
		{"http:\n  basic_auth_users:\n    alice: [x]\n",
		 NAME ":3:12: http.basic_auth_users.alice: the value must be a string"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		config_defaults(&d);
		assert_int_not_equal(parse(&d, bad[i].yaml, err, sizeof err), 0);
		if (strncmp(err, bad[i].want, strlen(bad[i].want)) != 0)
			fail_msg("case %zu: %s", i, err);
	}
	/* At most HTTP_BASIC_MAX_USERS. */
	struct buf many;
	buf_init(&many, 1 << 16);
	buf_puts(&many, "http:\n  basic_auth_users:\n");
	for (int i = 0; i <= HTTP_BASIC_MAX_USERS; i++)
		buf_printf(&many, "    u%d: " ALICE_HASH "\n", i);
	config_defaults(&d);
	assert_int_not_equal(parse(&d, many.data, err, sizeof err), 0);
	assert_non_null(strstr(err, "more than 16 users"));
	buf_free(&many);
}

/* http.rate_limit and http.rate_limit_burst (issue 14). */
static void test_rate_limit_keys(void **state)
{
	(void)state;
	struct gpulse_config c;
	struct http_config h;
	char err[1024];
	config_defaults(&c);
	assert_true(c.http.rate_limit == 0); /* off by default */
	assert_int_equal(c.http.rate_limit_burst, 0);
	assert_int_equal(parse(&c, "http:\n  rate_limit: 2.5\n  rate_limit_burst: 20\n", err,
			       sizeof err), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	assert_int_equal(config_to_http(&c, &h, NULL, 0, NULL, 0), 0);
	assert_true(h.rate_limit == 2.5);
	assert_int_equal(h.rate_limit_burst, 20);
	config_defaults(&c);
	assert_int_not_equal(parse(&c, "http:\n  rate_limit: -1\n", err, sizeof err), 0);
	assert_non_null(strstr(err, NAME ":2:15: http.rate_limit: "));
	assert_int_not_equal(parse(&c, "http:\n  rate_limit: fast\n", err, sizeof err), 0);
	assert_non_null(strstr(err, NAME ":2:15: http.rate_limit: "));
	assert_int_not_equal(parse(&c, "http:\n  rate_limit_burst: 2000000\n", err, sizeof err), 0);
	assert_non_null(strstr(err, NAME ":2:21: http.rate_limit_burst: "));
	assert_non_null(strstr(err, "out of range"));
}

/* http.tls_client_ca_file (issue 14): needs TLS, must be readable, and
 * reaches the server. */
static void test_tls_client_ca_file(void **state)
{
	(void)state;
	struct gpulse_config c;
	struct http_config h;
	char err[1024], cert[256], key[256], ca[256];
	temp_file(cert, sizeof cert, "-----BEGIN CERTIFICATE-----\n", 0644);
	temp_file(key, sizeof key, "-----BEGIN PRIVATE KEY-----\n", 0600);
	temp_file(ca, sizeof ca, "-----BEGIN CERTIFICATE-----\n", 0644);
	config_defaults(&c);
	char text[1024];
	snprintf(text, sizeof text, "http:\n  tls_client_ca_file: %s\n", ca);
	assert_int_equal(parse(&c, text, err, sizeof err), 0);
	assert_string_equal(c.http.tls_client_ca_file, ca);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, NAME ": http.tls_client_ca_file needs TLS"));
	snprintf(c.http.tls_cert_file, sizeof c.http.tls_cert_file, "%s", cert);
	snprintf(c.http.tls_key_file, sizeof c.http.tls_key_file, "%s", key);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	assert_int_equal(config_to_http(&c, &h, NULL, 0, NULL, 0), 0);
	assert_string_equal(h.tls_client_ca_file, ca);
	snprintf(c.http.tls_client_ca_file, sizeof c.http.tls_client_ca_file, "%s.missing", ca);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "http.tls_client_ca_file: cannot read"));
	config_defaults(&c);
	assert_int_equal(config_to_http(&c, &h, NULL, 0, NULL, 0), 0);
	assert_null(h.tls_client_ca_file);
	unlink(cert);
	unlink(key);
	unlink(ca);
}

static void test_to_http(void **state)
{
	(void)state;
	struct gpulse_config c;
	struct http_config h;
	char tok[CONFIG_TOKEN_MAX], token[256];
	config_defaults(&c);
	assert_int_equal(config_to_http(&c, &h, tok, sizeof tok, NULL, 0), 0);
	assert_string_equal(h.listen, "127.0.0.1:9401");
	assert_int_equal(h.max_connections, 64);
	assert_int_equal(h.threads, 2);
	assert_int_equal(h.timeout_s, 10);
	assert_int_equal(h.header_timeout_ms, 5000);
	assert_int_equal(h.max_per_ip, 0); /* the server's default */
	assert_true(h.max_body_bytes > 0);
	assert_null(h.tls_cert_file);
	assert_null(h.tls_key_file);
	assert_null(h.auth_token);

	temp_file(token, sizeof token, "abc123\r\n", 0600);
	snprintf(c.http.auth_token_file, sizeof c.http.auth_token_file, "%s", token);
	c.http.timeout_ns = 1500 * NS_PER_MS; /* rounds up */
	c.http.header_timeout_ns = 1500 * NS_PER_US; /* rounds up to 2 ms */
	c.http.max_connections_per_address = 8;
	assert_int_equal(config_to_http(&c, &h, tok, sizeof tok, NULL, 0), 0);
	assert_string_equal(h.auth_token, "abc123");
	assert_int_equal(h.timeout_s, 2);
	assert_int_equal(h.header_timeout_ms, 2);
	assert_int_equal(h.max_per_ip, 8);

	/* A token that cannot be read fails closed: no request can match. */
	assert_int_equal(chmod(token, 0604), 0);
	assert_int_not_equal(config_to_http(&c, &h, tok, sizeof tok, NULL, 0), 0);
	assert_non_null(h.auth_token);
	assert_string_equal(h.auth_token, "\x01");
	unlink(token);
	assert_int_not_equal(config_to_http(&c, &h, tok, sizeof tok, NULL, 0), 0);
	assert_string_equal(h.auth_token, "\x01");
}

/* Every name resolves to 10.77.0.1, as a hostile /etc/hosts would make
 * "localhost" do; numeric, so no network is needed. */
static int resolve_remote(const char *host, const char *port, const struct addrinfo *hints,
			  struct addrinfo **res)
{
	(void)host;
	struct addrinfo h = *hints;
	h.ai_flags |= AI_NUMERICHOST;
	return getaddrinfo("10.77.0.1", port, &h, res);
}

/* The daemon's path end to end: a "localhost" listen passes
 * config_validate, and the server it configures refuses it without TLS
 * once it resolves beyond loopback, naming the keys and the address. */
static void test_to_http_resolved(void **state)
{
	(void)state;
	struct gpulse_config c;
	struct http_config h;
	struct http_server *s = NULL;
	char tok[CONFIG_TOKEN_MAX], err[1024] = "";
	config_defaults(&c);
	assert_int_equal(parse(&c, "listen: localhost:0\n", err, sizeof err), 0);
	assert_int_equal(config_validate(&c, NAME, err, sizeof err), 0);
	assert_int_equal(config_to_http(&c, &h, tok, sizeof tok, NULL, 0), 0);
	assert_true(h.refuse_insecure_remote);
	h.resolve = resolve_remote;
	assert_int_equal(http_server_start(&s, &h, err, sizeof err), GPULSE_EINVAL);
	assert_null(s);
	assert_non_null(strstr(err, "listen \"localhost:0\" resolves to 10.77.0.1, which is "
				    "reachable from other machines, so it needs TLS and a token"));
	assert_non_null(strstr(err, "http.tls_cert_file, http.tls_key_file and "
				    "http.auth_token_file"));
	assert_non_null(strstr(err, "http.allow_insecure_remote: true"));

	/* The opt-out lets it through to the bind (of 10.77.0.1, which no
	 * interface here has). */
	c.http.allow_insecure_remote = true;
	assert_int_equal(config_to_http(&c, &h, tok, sizeof tok, NULL, 0), 0);
	assert_false(h.refuse_insecure_remote);
	h.resolve = resolve_remote;
	assert_int_equal(http_server_start(&s, &h, err, sizeof err), GPULSE_EIO);
	assert_null(strstr(err, "reachable from other machines"));
}

static void test_to_collector(void **state)
{
	(void)state;
	struct gpulse_config c;
	struct collector_config cc;
	char err[512];
	config_defaults(&c);
	config_to_collector(&c, &cc);
	assert_null(cc.nvml_path);
	assert_int_equal(cc.period_ns[TIER_FAST], 100 * NS_PER_MS);
	assert_int_equal(cc.period_ns[TIER_NORMAL], NS_PER_SEC);
	assert_int_equal(cc.period_ns[TIER_SLOW], 30 * NS_PER_SEC);
	assert_int_equal(cc.call_deadline_ns, 2 * NS_PER_SEC);
	assert_int_equal(cc.rediscover_ns, 10 * NS_PER_SEC);
	assert_true(cc.per_process_util && cc.gpm && cc.events);

	assert_int_equal(parse(&c, full_yaml, err, sizeof err), 0);
	config_to_collector(&c, &cc);
	assert_string_equal(cc.nvml_path, "/opt/nvidia/libnvidia-ml.so.1");
	assert_int_equal(cc.period_ns[TIER_FAST], 50 * NS_PER_MS);
	assert_int_equal(cc.period_ns[TIER_SLOW], 60 * NS_PER_SEC);
	assert_int_equal(cc.call_deadline_ns, 500 * NS_PER_MS);
	assert_false(cc.per_process_util || cc.gpm || cc.events);
}

static void test_dump_round_trip(void **state)
{
	(void)state;
	struct gpulse_config c, back;
	char err[512];
	config_defaults(&c);
	assert_int_equal(parse(&c, full_yaml, err, sizeof err), 0);
	/* Strings YAML cannot hold raw, a duration finer than 1 ms, an odd speed. */
	snprintf(c.replay.file, sizeof c.replay.file, "/q\"uote\\ tab\t nl\n del\x7f é\xc2\x85");
	c.sampling.rediscover_ns = 1500 * NS_PER_MS + 1;
	c.replay.speed = 0.1;
	c.log_level = LOG_WARN;

	struct buf b;
	buf_init(&b, 1 << 16);
	assert_int_equal(config_dump(&c, &b), 0);
	assert_non_null(strstr(b.data, "\nsampling:\n  fast: 50ms\n"));
	assert_non_null(strstr(b.data, "\n  speed: 0.1\n"));
	assert_non_null(strstr(b.data, "\nlog_level: warn\n"));
	config_defaults(&back);
	if (config_parse(&back, b.data, b.len, "dump", err, sizeof err) != 0)
		fail_msg("%s\n%s", err, b.data);
	assert_true(config_equal(&c, &back));

	/* The defaults dump and read back as the defaults. */
	buf_reset(&b);
	config_defaults(&c);
	assert_int_equal(config_dump(&c, &b), 0);
	assert_non_null(strstr(b.data, "listen: \"127.0.0.1:9401\"\n"));
	config_defaults(&back);
	back.http.threads = 5;
	assert_int_equal(config_parse(&back, b.data, b.len, "dump", err, sizeof err), 0);
	assert_true(config_equal(&c, &back));
	buf_free(&b);
}

/* Every relative path in the file resolves against the file's directory
 * (as Prometheus's), cleaned; names a search finds stay names; an exec
 * path is never resolved (it must be absolute). Parsing text checks no
 * file. */
static void test_paths_resolved(void **state)
{
	(void)state;
	static const char yaml[] =
		"nvml_library: libnvidia-ml.so.1\n"
		"replay:\n  file: rec.csv\n"
		"storage:\n  path: ../db/g.db\n"
		"http:\n  tls_cert_file: ./tls/c.pem\n  tls_key_file: tls//k.pem\n"
		"  tls_client_ca_file: /abs/ca.pem\n  auth_token_file: t\n  write_token_file: w\n"
		"rule_files: [r.yml, /abs/r.yml]\n"
		"alerting:\n  alertmanagers:\n    bearer_token_file: am\n"
		"  webhooks:\n    bearer_token_file: wh\n"
		"  exec:\n    path: hook.sh\n  queue:\n    path: aq\n"
		"profiling:\n  socket: run/s.sock\n"
		"attribution:\n  proc_root: proc\n  cgroup_root: cg\n  pod_resources_socket: k.sock\n"
		"bench:\n  command: gpulse\n  cublaslt: lib/libcublasLt.so\n"
		"remote_write:\n  - url: https://r/w\n    basic_auth: {username: u, password_file: pw}\n"
		"    tls_config: {ca_file: ca, cert_file: c, key_file: k}\n    queue_dir: q\n"
		"  - url: https://r/w2\n    authorization: {credentials_file: cred}\n";
	struct gpulse_config c;
	char err[512] = "";
	config_defaults(&c);
	if (config_parse(&c, yaml, strlen(yaml), "/etc/gpulse/conf/gpulse.yml", err, sizeof err))
		fail_msg("%s", err);
	const struct {
		const char *got, *want;
	} cases[] = {
		{c.nvml_library, "libnvidia-ml.so.1"},
		{c.replay.file, "/etc/gpulse/conf/rec.csv"},
		{c.storage.path, "/etc/gpulse/db/g.db"},
		{c.http.tls_cert_file, "/etc/gpulse/conf/tls/c.pem"},
		{c.http.tls_key_file, "/etc/gpulse/conf/tls/k.pem"},
		{c.http.tls_client_ca_file, "/abs/ca.pem"},
		{c.http.auth_token_file, "/etc/gpulse/conf/t"},
		{c.http.write_token_file, "/etc/gpulse/conf/w"},
		{c.rule_files[0], "/etc/gpulse/conf/r.yml"},
		{c.rule_files[1], "/abs/r.yml"},
		{c.alerting.alertmanagers.bearer_token_file, "/etc/gpulse/conf/am"},
		{c.alerting.webhooks.bearer_token_file, "/etc/gpulse/conf/wh"},
		{c.alerting.exec.path, "hook.sh"},
		{c.alerting.queue.path, "/etc/gpulse/conf/aq"},
		{c.profiling.socket, "/etc/gpulse/conf/run/s.sock"},
		{c.attribution.proc_root, "/etc/gpulse/conf/proc"},
		{c.attribution.cgroup_root, "/etc/gpulse/conf/cg"},
		{c.attribution.pod_resources_socket, "/etc/gpulse/conf/k.sock"},
		{c.bench.command, "gpulse"},
		{c.bench.cublaslt, "/etc/gpulse/conf/lib/libcublasLt.so"},
		{c.remote_write[0].basic_auth.password_file, "/etc/gpulse/conf/pw"},
		{c.remote_write[0].tls_config.ca_file, "/etc/gpulse/conf/ca"},
		{c.remote_write[0].tls_config.cert_file, "/etc/gpulse/conf/c"},
		{c.remote_write[0].tls_config.key_file, "/etc/gpulse/conf/k"},
		{c.remote_write[0].queue_dir, "/etc/gpulse/conf/q"},
		{c.remote_write[1].authorization.credentials_file, "/etc/gpulse/conf/cred"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strcmp(cases[i].got, cases[i].want) != 0)
			fail_msg("case %zu: \"%s\", want \"%s\"", i, cases[i].got, cases[i].want);
	/* The exec path is refused as relative, not looked for beside the file. */
	struct gpulse_config e;
	config_defaults(&e);
	memcpy(e.alerting.exec.path, c.alerting.exec.path, sizeof e.alerting.exec.path);
	assert_int_equal(config_validate(&e, NAME, err, sizeof err), GPULSE_EINVAL);
	if (!strstr(err, "alerting.exec.path: hook.sh must be an absolute path"))
		fail_msg("%s", err);

	/* A file at the root, and ".." past the root. */
	config_defaults(&c);
	assert_int_equal(config_parse(&c, "replay:\n  file: ../../r.csv\n", 27, "/g.yml", err,
				      sizeof err), 0);
	assert_string_equal(c.replay.file, "/r.csv");
	/* A path that no longer fits once resolved is refused at its line. */
	char big[CONFIG_PATH_LEN + 64];
	snprintf(big, sizeof big, "replay:\n  file: %0*d\n", CONFIG_PATH_LEN - 8, 0);
	assert_int_equal(config_parse(&c, big, strlen(big), "/etc/gpulse/g.yml", err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "/etc/gpulse/g.yml:2:9: replay.file: path is too long"));
}

/* config_load_file checks that the files the file names are there, at
 * their line, and leaves the config untouched when one is not; what
 * gpulsed creates may be missing. */
/* `tmpl` with every '@' replaced by `dir`, into out[len]. */
static void at_dir(char *out, size_t len, const char *tmpl, const char *dir)
{
	size_t o = 0;
	for (const char *t = tmpl; *t && o + 1 < len; t++) {
		if (*t != '@') {
			out[o++] = *t;
			continue;
		}
		for (const char *d = dir; *d && o + 1 < len; d++)
			out[o++] = *d;
	}
	out[o] = '\0';
}

static void test_load_checks_files(void **state)
{
	(void)state;
	char dir[256], path[320], rec[320], text[1024], err[512] = "", want[900];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/gpulse-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/g.yml", dir);
	snprintf(rec, sizeof rec, "%s/rec.csv", dir);
	struct gpulse_config c, d;
	config_defaults(&c);
	config_defaults(&d);

	static const struct {
		const char *yaml, *want; /* @: the directory; want follows "PATH:" */
	} cases[] = {
		{"replay:\n  file: rec.csv\n", "2:9: replay.file: @/rec.csv: No such file or directory"},
		{"rule_files:\n  - r.yml\n", "2:5: rule_files: @/r.yml: No such file or directory"},
		{"http:\n  auth_token_file: t\n", "2:20: http.auth_token_file: @/t: No such file or directory"},
		{"alerting:\n  exec:\n    path: @/hook\n", "3:11: alerting.exec.path: @/hook: No such file or directory"},
		{"bench:\n  command: ./gpulse\n", "2:12: bench.command: @/gpulse: No such file or directory"},
		{"remote_write:\n  - url: http://r/w\n    tls_config:\n      ca_file: ca\n",
		 "4:16: remote_write[0].tls_config.ca_file: @/ca: No such file or directory"},
		{"replay:\n  file: .\n", "2:9: replay.file: @: is a directory, not a file"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		at_dir(text, sizeof text, cases[i].yaml, dir);
		fputs(text, f);
		fclose(f);
		assert_int_equal(config_load_file(&c, path, err, sizeof err), GPULSE_EPARSE);
		at_dir(text, sizeof text, cases[i].want, dir);
		snprintf(want, sizeof want, "%.300s:%.500s", path, text);
		assert_string_equal(err, want);
		assert_true(config_equal(&c, &d));
	}
	/* Parsed as text, the same file checks nothing. */
	assert_int_equal(config_parse(&c, "replay:\n  file: rec.csv\n", 24, path, err, sizeof err), 0);
	config_defaults(&c);

	/* There: loaded, resolved. Created by gpulsed: may be missing. */
	FILE *f = fopen(rec, "w");
	assert_non_null(f);
	fclose(f);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "replay:\n  file: rec.csv\nstorage:\n  path: new.db\nalerting:\n  queue:\n"
		"    path: q\nprofiling:\n  socket: s.sock\n");
	fclose(f);
	if (config_load_file(&c, path, err, sizeof err))
		fail_msg("%s", err);
	assert_string_equal(c.replay.file, rec);
	assert_int_equal(config_validate(&c, path, err, sizeof err), 0);
	/* --replay's value (set after the load) is checked by config_validate. */
	snprintf(c.replay.file, sizeof c.replay.file, "%s/gone.csv", dir);
	assert_int_equal(config_validate(&c, "command line", err, sizeof err), GPULSE_EINVAL);
	snprintf(want, sizeof want, "command line: replay.file: %s/gone.csv: No such file or directory",
		 dir);
	assert_string_equal(err, want);
	unlink(rec);
	unlink(path);
	rmdir(dir);
}

static void test_load_file_limits(void **state)
{
	(void)state;
	struct gpulse_config c, d;
	char err[512], path[256];
	config_defaults(&c);
	config_defaults(&d);

	assert_int_equal(config_load_file(&c, "/nonexistent/gpulse.yml", err, sizeof err), GPULSE_EIO);
	assert_non_null(strstr(err, "/nonexistent/gpulse.yml"));
	assert_int_equal(config_load_file(&c, "/", err, sizeof err), GPULSE_EIO);

	/* Over 1 MiB: refused before parsing, even when it is all comments. */
	size_t big = CONFIG_MAX_FILE_BYTES + 10;
	char *data = malloc(big + 1);
	assert_non_null(data);
	memset(data, '#', big);
	data[big] = '\0';
	temp_file(path, sizeof path, data, 0600);
	free(data);
	assert_int_equal(config_load_file(&c, path, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "larger than"));
	assert_true(config_equal(&c, &d));
	unlink(path);

	/* Errors name the path given. */
	temp_file(path, sizeof path, "http:\n  threads: many\n", 0644);
	assert_int_equal(config_load_file(&c, path, err, sizeof err), GPULSE_EPARSE);
	char want[512];
	snprintf(want, sizeof want, "%s:2:12: http.threads: expected a whole number", path);
	assert_true(strncmp(err, want, strlen(want)) == 0);
	assert_true(config_equal(&c, &d));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full_file),
		cmocka_unit_test(test_partial_files_keep_defaults),
		cmocka_unit_test(test_shipped_file),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_memory_pressure),
		cmocka_unit_test(test_error_buffer_small),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_cross_field),
		cmocka_unit_test(test_storage_dir),
		cmocka_unit_test(test_query_keys),
		cmocka_unit_test(test_restart_changes),
		cmocka_unit_test(test_security_rule),
		cmocka_unit_test(test_to_http),
		cmocka_unit_test(test_write_token_file),
		cmocka_unit_test(test_basic_auth_users),
		cmocka_unit_test(test_rate_limit_keys),
		cmocka_unit_test(test_tls_client_ca_file),
		cmocka_unit_test(test_to_http_resolved),
		cmocka_unit_test(test_to_collector),
		cmocka_unit_test(test_dump_round_trip),
		cmocka_unit_test(test_paths_resolved),
		cmocka_unit_test(test_load_checks_files),
		cmocka_unit_test(test_load_file_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
