/* Alertmanager's label matchers (`alertname=~"GPUDown|GPULost"`,
 * `severity!=info`) and inhibit rules (source_matchers, target_matchers,
 * equal), applied to alert label sets. Regular expressions are PromQL's:
 * anchored at both ends and compiled once, through the PromQL parser, so
 * a matcher means the same here as in a rule's selector. */
#ifndef GPULSE_ALERT_MATCHER_H
#define GPULSE_ALERT_MATCHER_H

#include <stdbool.h>
#include <stddef.h>

#include "alert/notice.h"

#define ALERT_MATCHER_MAX_LEN 1024 /* bytes of one matcher's text */

struct promql_expr;
struct promql_matcher;

struct alert_matcher {
	struct promql_expr *sel;         /* owns the matcher below */
	const struct promql_matcher *m;
};

/* Parse one matcher: NAME OP VALUE, OP one of = != =~ !~, VALUE a
 * double-quoted string with Go escapes or bare text (trimmed), as
 * Alertmanager takes them. 0, or GPULSE_EPARSE with the reason in `err`
 * (the matcher is then empty). Free with alert_matcher_free. */
int alert_matcher_parse(const char *text, struct alert_matcher *out, char *err, size_t errlen);
/* Release a parsed matcher; accepts NULL and empty matchers. */
void alert_matcher_free(struct alert_matcher *m);
/* Whether the label set (sorted or not; a missing label reads as "")
 * satisfies the matcher, in *matched: 0, or promql_matcher_matches's
 * GPULSE_ELIMIT / GPULSE_ENOMEM when its regular expression could not
 * decide (then neither answer holds). */
int alert_matcher_matches(const struct alert_matcher *m, const struct label *labels,
			  size_t n, bool *matched);

/* The value of label `name` in labels[n], or "" when absent. */
const char *alert_label_get(const struct label *labels, size_t n, const char *name);

struct alert_inhibit_rule {
	struct alert_matcher *source;  /* owned arrays */
	size_t nsource;
	struct alert_matcher *target;
	size_t ntarget;
	char **equal;                  /* owned label names */
	size_t nequal;
};

/* Build a rule from matcher texts and label names. 0, or GPULSE_EPARSE
 * with "source_matchers[i]: reason" in `err` (the rule is then empty).
 * Free with alert_inhibit_rule_free. */
int alert_inhibit_rule_init(struct alert_inhibit_rule *r, const char *const *source,
			    size_t nsource, const char *const *target, size_t ntarget,
			    const char *const *equal, size_t nequal, char *err, size_t errlen);
void alert_inhibit_rule_free(struct alert_inhibit_rule *r);

/* Alertmanager's rule for one pair: `target` (labels tl[tn]) is muted by
 * the firing alert `source` (sl[sn]) under rule r when the source matches
 * every source matcher, the target every target matcher, the `equal`
 * labels have the same value in both (absent counts as ""), and, when
 * the target also matches the source side, the source does not match the
 * target side (so alerts that are both never mute each other, nor
 * themselves). A matcher whose regular expression cannot decide (its
 * match limit) mutes nothing: the alert is sent rather than lost. */
bool alert_inhibit_rule_mutes(const struct alert_inhibit_rule *r, const struct label *sl,
			      size_t sn, const struct label *tl, size_t tn);

#endif
