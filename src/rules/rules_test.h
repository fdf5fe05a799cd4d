/* promtool's rule unit-test files (`promtool test rules`): input series in
 * the series notation, rule files evaluated every evaluation_interval with
 * their recorded series fed back, and PromQL expressions checked against
 * expected samples at given times, with promtool 2.42's semantics and
 * messages, and alert_rule_test cases compared as promtool does: the
 * firing alerts of the named rule at the evaluation at or just before
 * eval_time, labels (alertname added to the expected ones) and expanded
 * annotations, sorted, compared exactly. */
#ifndef GPULSE_RULES_TEST_H
#define GPULSE_RULES_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/buf.h"
#include "promql/queryable.h"

#define RULES_TEST_MAX_FILE_BYTES (16 * 1024 * 1024)
#define RULES_TEST_MAX_EVAL_STEPS 1000000 /* group evaluations of one test group */

struct rules_test_sample {
	char *labels;            /* series notation, parsed when the test runs */
	double value;
	int line, col;
};

struct rules_expr_test {
	char *expr;
	int64_t eval_time_ms;
	struct rules_test_sample *exp;
	size_t nexp;
	int line, col;
};

/* One expected alert: exp_labels (without alertname) and exp_annotations. */
struct rules_exp_alert {
	struct label *labels;   /* owned strings */
	size_t nlabels;
	struct label *ann;
	size_t nann;
};

struct rules_alert_test {
	int64_t eval_time_ms;
	char *alertname;
	struct rules_exp_alert *exp;
	size_t nexp;
	int line, col;
};

struct rules_input_series {
	char *series;
	char *values;
	int line, col;
};

struct rules_test_group {
	char *name;              /* optional */
	int64_t interval_ms;     /* of the input series; 0 (absent): all at t = 0, as promtool 2.42 */
	struct rules_input_series *inputs;
	size_t ninputs;
	struct rules_expr_test *exprs;
	size_t nexprs;
	struct rules_alert_test *alerts;
	size_t nalerts;
	struct label *ext_labels; /* external_labels; owned strings */
	size_t next_labels;
	char *external_url;      /* NULL: none */
	int line, col;
};

struct rules_test_file {
	char *path;
	char **rule_files;       /* as written (relative to the test file) */
	size_t nrule_files;
	int64_t eval_interval_ms; /* default 1m */
	char **group_order;
	size_t ngroup_order;
	struct rules_test_group *tests;
	size_t ntests;
};

/* Parse a test file's text; `path` names it in messages and anchors
 * relative rule_files. On failure errs gets "PATH:LINE:COL: problem"
 * lines and a status is returned; on success *out is freed with
 * rules_test_file_free. */
int rules_test_parse(const char *path, const char *data, size_t len, struct rules_test_file **out,
		     struct buf *errs);

/* Accepts NULL. */
void rules_test_file_free(struct rules_test_file *f);

/* Run every test of the file at `path`, printing promtool's report to
 * `out` ("Unit Testing:  PATH", then "  SUCCESS" or "  FAILED:" and one
 * message per failure). 0 when every test passes, GPULSE_EINVAL when one
 * fails, another status when the file or its rule files cannot be read
 * or are invalid. */
int rules_test_run_file(const char *path, FILE *out);

#endif
