/* `gpulse rules test FILE...` and `gpulse rules check FILE...`: promtool's
 * rule unit tests and rule-file check, with promtool's verdicts and
 * report layout. The work is src/rules/'s; this file only dispatches and
 * prints. */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "cli/commands.h"
#include "rules/rules_file.h"
#include "rules/rules_test.h"

#define CHECK_ERRS_MAX (1u << 20)

static void rules_usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse rules test FILE...\n"
		"       gpulse rules check FILE...\n"
		"  test   run the rule unit tests of each file (promtool's test-file format:\n"
		"         rule_files, evaluation_interval, tests with input_series,\n"
		"         promql_expr_test and alert_rule_test, judged as promtool 2.42 does)\n"
		"  check  check the syntax and the expressions of Prometheus rule files\n"
		"Exit status: 0 all passed, 1 a test failed or a file is unreadable or\n"
		"invalid, 2 usage error.\n");
}

static int rules_check(int argc, char **argv)
{
	int rc = CLI_OK;
	for (int i = 0; i < argc; i++) {
		struct buf errs;
		struct rules_file *f = NULL;
		buf_init(&errs, CHECK_ERRS_MAX);
		printf("Checking %s\n", argv[i]);
		if (rules_file_load(argv[i], &f, &errs) == 0) {
			printf("  SUCCESS: %zu rules found\n\n", rules_file_count(f));
		} else {
			fflush(stdout);
			fprintf(stderr, "  FAILED:\n%s\n", errs.data ? errs.data : "");
			rc = CLI_FAIL;
		}
		rules_file_free(f);
		buf_free(&errs);
	}
	return rc;
}

static int rules_run_tests(int argc, char **argv)
{
	int rc = CLI_OK;
	for (int i = 0; i < argc; i++) {
		if (rules_test_run_file(argv[i], stdout) != 0)
			rc = CLI_FAIL;
		fflush(stdout);
	}
	return rc;
}

int cmd_rules(int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		rules_usage(stdout);
		return CLI_OK;
	}
	if (argc < 3) {
		rules_usage(stderr);
		return CLI_USAGE;
	}
	if (strcmp(argv[1], "test") == 0)
		return rules_run_tests(argc - 2, argv + 2);
	if (strcmp(argv[1], "check") == 0)
		return rules_check(argc - 2, argv + 2);
	fprintf(stderr, "gpulse rules: unknown subcommand \"%s\" (test or check)\n", argv[1]);
	rules_usage(stderr);
	return CLI_USAGE;
}
