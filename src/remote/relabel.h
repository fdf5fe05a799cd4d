/* Prometheus's relabelling (relabel_config: write_relabel_configs of
 * remote_write) over a label set, with its actions and defaults as
 * Prometheus 2.42 documents them: replace, keep, drop, hashmod, labelmap,
 * labeldrop, labelkeep, lowercase, uppercase, keepequal, dropequal.
 * Regular expressions are RE2's, fully anchored (src/common/rx.h); $1,
 * ${name} in target_label and replacement expand as Go's ExpandString.
 * A compiled set may be applied from many threads at once. */
#ifndef GPULSE_RELABEL_H
#define GPULSE_RELABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/tsdb.h"

#define RELABEL_MAX_RULES 32
#define RELABEL_MAX_SOURCES 16
#define RELABEL_MAX_LABELS 64    /* labels of a set while it is relabelled */

enum relabel_action {
	RELABEL_REPLACE, RELABEL_KEEP, RELABEL_DROP, RELABEL_HASHMOD, RELABEL_LABELMAP,
	RELABEL_LABELDROP, RELABEL_LABELKEEP, RELABEL_LOWERCASE, RELABEL_UPPERCASE,
	RELABEL_KEEPEQUAL, RELABEL_DROPEQUAL,
};

/* One rule as configured. NULL strings take Prometheus's defaults:
 * separator ";", regex "(.*)", replacement "$1", action "replace". */
struct relabel_spec {
	const char *source_labels[RELABEL_MAX_SOURCES];
	size_t nsource;
	const char *separator;
	const char *regex;
	const char *target_label;
	const char *replacement;
	const char *action;
	uint64_t modulus;
};

struct relabel;

/* Compile n rules. Each is checked as Prometheus checks it (an unknown
 * action, a regex RE2 refuses, a missing target_label or modulus where
 * the action needs one, keepequal/dropequal with a regex or replacement
 * other than the default, an invalid label name): GPULSE_EINVAL with the
 * rule's index and the problem in err. *out is the caller's, freed with
 * relabel_free. */
int relabel_compile(const struct relabel_spec *specs, size_t n, struct relabel **out, char *err,
		    size_t errlen);
void relabel_free(struct relabel *r);  /* accepts NULL */

/* A label set under relabelling: owned copies, freed by relabel_set_clear. */
struct relabel_set {
	size_t n;
	char *name[RELABEL_MAX_LABELS];
	char *value[RELABEL_MAX_LABELS];
};
void relabel_set_clear(struct relabel_set *s);

/* Relabel the n labels `in` into *out (cleared first). *keep is false
 * when a rule dropped the series or no __name__ is left. Labels with an
 * empty value are removed, and *out is sorted by name. 0, GPULSE_ENOMEM,
 * or GPULSE_ELIMIT when the set would pass RELABEL_MAX_LABELS or a
 * regex hit its cost limit (the series is then not kept). r NULL: a
 * copy. */
int relabel_apply(const struct relabel *r, const struct label *in, size_t n,
		  struct relabel_set *out, bool *keep);

#endif
