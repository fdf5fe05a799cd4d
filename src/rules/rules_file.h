/* Prometheus rule files (groups of recording and alerting rules), parsed
 * and checked as `promtool check rules` does, and the evaluation of a
 * group's recording rules at one time into a memstore, with Prometheus's
 * semantics: rules run in order, each sees what the earlier ones of the
 * same evaluation recorded, and series a rule stops producing get a
 * staleness marker. Rule files come from users: every size is bounded
 * (bytes, groups, rules, labels, YAML nodes and depth in ytree.h). */
#ifndef GPULSE_RULES_FILE_H
#define GPULSE_RULES_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "promql/eval.h"
#include "promql/memstore.h"
#include "promql/queryable.h"

#define RULES_MAX_FILE_BYTES (16 * 1024 * 1024) /* one rule file */
#define RULES_MAX_GROUPS     10000              /* groups of one file */
#define RULES_MAX_RULES      100000             /* rules of one file */
#define RULES_MAX_LABELS     256                /* labels or annotations of one rule */

struct rules_rule {
	char *record;              /* recording rule: the new series' name; else NULL */
	char *alert;               /* alerting rule: the alert's name; else NULL */
	char *expr_text;
	struct promql_expr *expr;  /* parsed expr_text */
	int64_t for_ms;            /* alerting only */
	int64_t keep_firing_for_ms;
	struct label *labels; /* owned strings */
	size_t nlabels;
	struct label *annotations;
	size_t nannotations;
	/* Alerting rules: the parsed template of each label and annotation
	 * value (template.h), parallel to labels / annotations; an entry is
	 * NULL for a value without "{{" (used as it is). NULL arrays for
	 * recording rules. */
	struct tmpl **label_tmpls;
	struct tmpl **ann_tmpls;
	int line, col;             /* where the rule starts */
};

struct rules_group {
	char *name;
	int64_t interval_ms;       /* 0: the default */
	int64_t limit;
	struct rules_rule *rules;
	size_t nrules;
	int line, col;
};

struct rules_file {
	char *path;
	struct rules_group *groups;
	size_t ngroups;
};

/* Parse the rule file text data[len]; `path` is used in messages. On
 * success *out is a new file freed with rules_file_free. On failure every
 * problem found is appended to errs as "PATH:LINE:COL: message\n" (as
 * many as promtool would list, up to the buffer's maximum) and
 * GPULSE_EPARSE (GPULSE_ELIMIT for a bound) is returned. */
int rules_file_parse(const char *path, const char *data, size_t len, struct rules_file **out,
		     struct buf *errs);

/* Read and parse the file at `path` (at most RULES_MAX_FILE_BYTES). */
int rules_file_load(const char *path, struct rules_file **out, struct buf *errs);

/* Accepts NULL. */
void rules_file_free(struct rules_file *f);

/* Rules of every group. */
size_t rules_file_count(const struct rules_file *f);

/* What a group remembers between evaluations: the series each rule
 * produced last time, to mark them stale when they disappear, and each
 * alerting rule's alerts (alert_state.h). */
struct rules_group_state;
struct alert_rule_state;
struct alert_opts;

/* A new state for `g` (which must outlive it). Free with
 * rules_group_state_free (accepts NULL). */
struct rules_group_state *rules_group_state_new(const struct rules_group *g);
void rules_group_state_free(struct rules_group_state *s);

/* Evaluate g's rules in order at t_ms against `ms`: a recording rule's
 * result series go to `ms` at t_ms with __name__ = record and the rule's
 * labels; an alerting rule updates its alerts (alert_state.h) and writes
 * the ALERTS and ALERTS_FOR_STATE series of its pending and firing
 * alerts, as Prometheus does, so later rules and queries see them. On a
 * rule's error, errs gets the line "    rule: NAME, time: T, err:
 * MESSAGE" (promtool's) and the first error's status is returned; later
 * rules still run (as Prometheus does). */
int rules_group_eval(const struct rules_group *g, struct rules_group_state *s, struct memstore *ms,
		     const struct promql_opts *opts, int64_t t_ms, struct buf *errs);

/* Template data for the alerting rules of s ($externalLabels,
 * $externalURL); both are copied. Flap holding stays off here (promtool
 * has none). */
void rules_group_state_set_external(struct rules_group_state *s, const struct label *ext,
				    size_t next, const char *url);

/* The alerts of rule `ri` of the group (NULL for a recording rule). */
const struct alert_rule_state *rules_group_state_alerts(const struct rules_group_state *s, size_t ri);

#endif
