/* Helpers shared by rules_file.c and rules_test.c: YAML mapping access
 * with Go's strict-unmarshal complaints, name checks, label sets and
 * bounded file reading. Not for use outside src/rules/. */
#ifndef GPULSE_RULES_UTIL_H
#define GPULSE_RULES_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "promql/queryable.h"
#include "rules/ytree.h"

/* The value of `key` in mapping n, or NULL. */
const struct ynode *rules_map_get(const struct ynode *n, const char *key);

/* Complain (as "PATH:LINE:COL: field K not found in type T" or "key
 * already set") about every key of mapping n not in the NULL-terminated
 * `allowed`, counting complaints in *nerr. Nonzero when any. */
int rules_check_keys(const char *path, const struct ynode *n, const char *const *allowed,
		     const char *type, struct buf *errs, int *nerr);

bool rules_valid_metric_name(const char *s);
bool rules_valid_label_name(const char *s);

/* Free labels whose name and value strings were each malloc'ed. */
void rules_labels_free(struct label *l, size_t n);

/* Sort labels by name. */
void rules_labels_sort(struct label *l, size_t n);

/* Prometheus's labels.Compare: by name, then value, label by label,
 * then the shorter set first. */
int rules_labels_cmp(const struct label *a, size_t na, const struct label *b,
		     size_t nb);

/* Read at most max bytes of the file at path into *data (NUL-terminated,
 * free()). 0, or a status with err set. */
int rules_read_file(const char *path, size_t max, char **data, size_t *len, char *err,
		    size_t errlen);

/* Append v as Go's strconv.FormatFloat(v, 'E', -1, 64) ("3E-01"). */
int rules_format_e(struct buf *b, double v);

#endif
